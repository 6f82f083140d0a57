"""utils/data_parallel.py, lesson 14's processes: run_processes starts real processes in a gloo group
and returns their results by rank, says which process failed and why, and refuses a worker a new
process could not import; the hand-made and DDP gradients equal one process's on the whole batch;
vit_train runs the command and hands back its result and weights."""

import pytest
import torch

from utils.data import load_digits
from utils.data_parallel import (
    all_reduce_demo,
    all_reduce_seconds,
    ddp_gradients,
    full_batch_gradients,
    hand_made_ddp_gradients,
    largest_difference,
    run_processes,
    vit_train,
)

CONFIG = dict(image_size=8, patch_size=4, in_channels=1, num_classes=10, embed_dim=32, depth=1, num_heads=2)


def test_all_reduce_sums_every_process_number_into_each():
    assert run_processes(all_reduce_demo, 3) == [(1.0, 6.0), (2.0, 6.0), (3.0, 6.0)]


def test_the_processes_average_equals_the_whole_batch_by_hand_and_with_ddp():
    train, _ = load_digits()
    images, labels = train.images[:24], train.labels[:24]
    whole = full_batch_gradients(CONFIG, images, labels)
    half = full_batch_gradients(CONFIG, images[:12], labels[:12])
    assert largest_difference(half, whole) > 1e-3  # one share alone is not the batch: the test can fail
    for worker in (hand_made_ddp_gradients, ddp_gradients):
        ranks = run_processes(worker, 2, CONFIG, images, labels)
        assert largest_difference(ranks[0], ranks[1]) == 0
        assert largest_difference(ranks[0], whole) < 1e-6, worker.__name__


def test_a_failing_process_is_named_with_its_error():
    with pytest.raises(RuntimeError, match=r"process \d of 2 failed: RuntimeError: .*negative"):
        run_processes(all_reduce_seconds, 2, -1)


def notebook_worker(process):
    return process.rank


def test_a_worker_a_new_process_cannot_import_is_refused():
    notebook_worker.__module__ = "__main__"  # as if defined in a notebook
    with pytest.raises(ValueError, match="defined in the notebook"):
        run_processes(notebook_worker, 2)

    def local(process):
        return process.rank

    with pytest.raises(ValueError, match="inside a function"):
        run_processes(local, 2)


def test_the_time_of_an_all_reduce_is_measured():
    seconds = run_processes(all_reduce_seconds, 2, 1000, 3)
    assert all(0 < s < 5 for s in seconds)


def test_vit_train_returns_the_result_and_the_weights():
    run = vit_train("--data", "digits", "--patch-size", "4", "--batch-size", "32", "--steps", "2")
    assert run["result"]["step"] == 2 and run["result"]["finished"]
    assert run["weights"]["head.weight"].shape == (10, 64)
    with pytest.raises(ValueError, match="leave --out out"):
        vit_train("--out", "x")
    with pytest.raises(RuntimeError, match=r"(?s)exit code 2.*--steps must be at least 1"):
        vit_train("--steps", "0")
    with pytest.raises(RuntimeError, match=r"(?s)process \d, exit code 2.*--steps must be at least 1"):
        vit_train("--steps", "0", processes=2)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="world_size"):
        run_processes(all_reduce_demo, 0)
    with pytest.raises(ValueError, match="the two sets name different tensors"):
        largest_difference({"a": torch.zeros(1)}, {"b": torch.zeros(1)})
