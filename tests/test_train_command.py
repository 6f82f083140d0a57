"""`vit-train` (utils/train_command.py) and what it stands on (utils/distributed.py, utils/resume.py):
two processes under torchrun (gloo, on this CPU) train exactly as one process with the same global
batch, so does gradient accumulation, a stopped and resumed run ends bit for bit as an uninterrupted
one, every epoch has its own order split into disjoint shares, a process that dies stops the others
instead of hanging them, and a bad argument is refused, named, before any training."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from utils.distributed import Process, global_batches, rank_share, this_process
from utils.resume import latest_step, load_training_state, save_training_state
from utils.train_command import main
from utils.vit import VisionTransformer, ViTConfig

ROOT = Path(__file__).resolve().parents[1]
# the digits with 4 px patches (a 2 x 2 grid): a step takes milliseconds
RUN = ["--data", "digits", "--patch-size", "4", "--batch-size", "64", "--quiet", "--log-every", "1"]
TIMEOUT_S = 120


def command(out: Path, *extra: str, processes: int = 1) -> subprocess.CompletedProcess:
    """vit-train in a process of its own, or under torchrun with `processes` processes (gloo)."""
    launch = [sys.executable, "-m", "utils.train_command"]
    if processes > 1:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        launch += ["-m", "utils.train_command"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [*launch, *RUN, "--out", str(out), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def weights(out: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(out / f"step-{step:07d}" / "model.safetensors")


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


def moved(out: Path, step: int) -> float:
    """How far training moved the weights from their start (seed 0): the scale the differences are judged on."""
    torch.manual_seed(0)
    start = VisionTransformer(ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=10)).state_dict()
    return largest_difference(weights(out, step), start)


def test_two_processes_train_as_one_with_the_same_global_batch(tmp_path):
    one, two = command(tmp_path / "one", "--steps", "4"), command(tmp_path / "two", "--steps", "4", processes=2)
    assert one.returncode == 0, one.stderr
    assert two.returncode == 0, two.stderr[-3000:]
    difference = largest_difference(weights(tmp_path / "one", 4), weights(tmp_path / "two", 4))
    assert difference < 1e-5 < moved(tmp_path / "one", 4) / 100, difference  # float rounding, not another run
    assert json.loads((tmp_path / "two" / "result.json").read_text())["settings"]["world_size"] == 2
    assert two.stdout.count("step 4 of 4") == 1  # rank 0 alone reports


def test_gradient_accumulation_trains_as_the_full_batch(tmp_path):
    for name, extra in [("full", []), ("accumulated", ["--accumulate", "4"])]:
        run = command(tmp_path / name, "--steps", "4", *extra)
        assert run.returncode == 0, run.stderr
    difference = largest_difference(weights(tmp_path / "full", 4), weights(tmp_path / "accumulated", 4))
    assert difference < 1e-5 < moved(tmp_path / "full", 4) / 100, difference


def test_a_stopped_and_resumed_run_ends_exactly_as_an_uninterrupted_one(tmp_path):
    extra = ["--steps", "6", "--max-shift", "1", "--eval-every", "2", "--save-every", "2"]
    assert command(tmp_path / "whole", *extra).returncode == 0
    stopped = command(tmp_path / "parts", *extra, "--stop-after", "3")
    assert stopped.returncode == 0 and "step 3 of 6" in stopped.stdout, stopped.stderr
    assert latest_step(tmp_path / "parts") == 3
    resumed = command(tmp_path / "parts", *extra, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    whole, parts = weights(tmp_path / "whole", 6), weights(tmp_path / "parts", 6)
    assert all(torch.equal(whole[name], parts[name]) for name in whole)
    metrics = [(tmp_path / run / "metrics.jsonl").read_text() for run in ("whole", "parts")]
    assert metrics[0] == metrics[1]  # the lines of steps redone after the save were dropped, not doubled
    assert len(metrics[0].splitlines()) == 6 + 3


def test_every_epoch_has_its_own_order_and_each_process_a_disjoint_share():
    first, second = global_batches(100, 16, epoch=0, seed=0), global_batches(100, 16, epoch=1, seed=0)
    assert first.shape == (6, 16) and not torch.equal(first, second)  # 96 images, the last 4 dropped
    assert torch.equal(first, global_batches(100, 16, epoch=0, seed=0))  # the same on every process
    assert len(set(first.flatten().tolist())) == 96
    shares = [rank_share(first[0], Process(rank, 4)) for rank in range(4)]
    assert torch.equal(torch.cat(shares), first[0])  # together the global batch, each image once


@pytest.mark.parametrize(
    "batch, world, problem",
    [
        (torch.arange(10), Process(0, 4), "does not split evenly over 4 processes"),
        (torch.zeros(2, 4), Process(), "(G,)"),
    ],
)
def test_a_share_that_cannot_be_equal_is_refused(batch, world, problem):
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        rank_share(batch, world)


def test_a_batch_larger_than_the_data_is_refused():
    with pytest.raises(ValueError, match="larger than the 10 training images"):
        global_batches(10, 16, epoch=0, seed=0)


def test_torchruns_variables_are_read_and_checked(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert this_process() == Process(1, 2, 1) and not this_process().is_main
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ValueError, match="RANK=2.*WORLD_SIZE=2"):
        this_process()
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match=r"\$RANK must be a whole number"):
        this_process()


DIES = """
import os, sys
import torch
import utils.train_command as command

if os.environ["RANK"] == "1":  # this process dies without a word after its second step
    step = torch.optim.AdamW.step
    calls = []

    def dying(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os._exit(3)
        return step(self, *args, **kwargs)

    torch.optim.AdamW.step = dying
sys.exit(command.main())
"""


def test_a_process_that_dies_stops_the_others_instead_of_hanging_them(tmp_path):
    script = tmp_path / "dies.py"
    script.write_text(textwrap.dedent(DIES))
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]
    run = subprocess.run(
        [*launch, *RUN, "--steps", "50", "--out", str(tmp_path / "run")],
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert run.returncode != 0
    assert "exitcode  : 3" in run.stderr or "exit code 3" in run.stderr.lower(), run.stderr[-2000:]
    assert not (tmp_path / "run" / "result.json").exists()


@pytest.mark.parametrize(
    "arguments, problem",
    [
        (["--batch-size", "100", "--accumulate", "3"], "choose a multiple of 3"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--lr", "-1"], "--lr must be a positive number"),
        (["--val-fraction", "1"], "--val-fraction must be above 0 and below 1"),
        (["--resume"], "nothing saved in"),
        (["--model", "vit_l"], "neither a preset"),
        (["--patch-size", "3"], "does not fit the data.*not divisible by patch_size 3"),
        (["--batch-size", "4096"], "larger than the 1078 training images"),
        (["--lr-multiplier", "pos_embed"], "takes NAME=FACTOR"),
        (["--lr-multiplier", "pos_embed=-1"], "a factor of 0 or more"),
        (["--lr-multiplier", "pos_embd=0.1"], "--lr-multiplier: .*pos_embd"),
    ],
)
def test_a_bad_argument_is_named_before_any_training(tmp_path, capsys, arguments, problem):
    out = tmp_path / "run"
    assert main(["--data", "digits", "--patch-size", "4", "--quiet", "--out", str(out), *arguments]) == 2
    error = capsys.readouterr().err
    assert error.startswith("vit-train: error: ") and len(error.splitlines()) == 1
    assert re.search(problem, error), error
    assert not (out / "latest.json").exists()


def test_a_model_file_that_does_not_fit_the_data_is_named(tmp_path, capsys):
    config = tmp_path / "model.json"
    config.write_text(json.dumps({"image_size": 32, "patch_size": 4, "embed_dim": 32, "depth": 1, "num_heads": 2}))
    assert main(["--data", "digits", "--model", str(config), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert "image_size 32 but the data has 8" in capsys.readouterr().err


def test_an_out_that_is_a_file_or_a_damaged_pointer_is_named(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main([*RUN, "--out", str(tmp_path / "file")]) == 2
    assert "is a file: name a folder" in capsys.readouterr().err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "latest.json").write_text("{half")
    assert main([*RUN, "--resume", "--out", str(tmp_path / "run")]) == 2
    assert "latest.json is damaged" in capsys.readouterr().err


def test_a_finished_run_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*RUN, "--steps", "2", "--out", str(out)]) == 0
    before = (out / "metrics.jsonl").read_text()
    assert main([*RUN, "--steps", "2", "--out", str(out)]) == 2
    assert "holds a saved run: add --resume" in capsys.readouterr().err
    assert (out / "metrics.jsonl").read_text() == before


def test_a_save_cut_short_leaves_the_previous_state_and_other_settings_are_refused(tmp_path):
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig.tiny(depth=1))
    optimizer = torch.optim.AdamW(model.parameters())
    save_training_state(tmp_path, model, optimizer, 2, {"lr": 0.001})
    (tmp_path / ".step-0000004.partial-99").mkdir()  # a save killed half-way
    assert latest_step(tmp_path) == 2
    assert load_training_state(tmp_path, model, optimizer, {"lr": 0.001}) == 2
    with pytest.raises(ValueError, match="other settings.*lr: saved 0.001, now 0.002"):
        load_training_state(tmp_path, model, optimizer, {"lr": 0.002})
    for step in (4, 6):
        save_training_state(tmp_path, model, optimizer, step, {"lr": 0.001})
    assert sorted(path.name for path in tmp_path.glob("step-*")) == ["step-0000004", "step-0000006"]  # two kept


def test_a_learning_rate_multiplier_reaches_its_parameters_and_the_settings(tmp_path):
    assert main([*RUN, "--steps", "1", "--lr-multiplier", "pos_embed=0.1", "--out", str(tmp_path / "run")]) == 0
    settings = json.loads((tmp_path / "run" / "result.json").read_text())["settings"]
    assert settings["lr_multipliers"] == {"pos_embed": 0.1}
    state = torch.load(tmp_path / "run" / "step-0000001" / "optimizer.pt", weights_only=True)
    groups = {tuple(group["param_names"]): group["lr_multiplier"] for group in state["param_groups"]}
    assert groups[("pos_embed",)] == 0.1 and sorted(set(groups.values())) == [0.1, 1.0]


@pytest.mark.parametrize(
    "call, problem",
    [
        (lambda: global_batches(10, 2, epoch=0, seed=1.5), "seed must be a whole number"),
        (lambda: rank_share([0, 1], Process()), "batch as a torch.Tensor"),
        (lambda: rank_share(torch.arange(4), 2), "must be a utils.distributed.Process"),
        (lambda: save_training_state("unused", None, None, -1, {}), "step must be a whole number, at least 0"),
    ],
)
def test_bad_inputs_to_the_library_are_named(call, problem):
    with pytest.raises((ValueError, TypeError), match=problem):
        call()


def test_a_pointer_to_a_missing_step_is_named(tmp_path):
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig.tiny(depth=1))
    optimizer = torch.optim.AdamW(model.parameters())
    save_training_state(tmp_path, model, optimizer, 2, {})
    import shutil

    shutil.rmtree(tmp_path / "step-0000002")
    with pytest.raises(ValueError, match="names step 2, but .* is missing or incomplete"):
        load_training_state(tmp_path, model, optimizer, {})


def test_vit_train_is_the_installed_command():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"vit-train": "utils.train_command:main"}
