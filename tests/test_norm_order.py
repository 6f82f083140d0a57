"""Lesson 5's experiment (utils.norm_order): the arms compare like with like, the post-norm model is
the pre-norm one with its norms moved, and the shipped results are read and checked."""

import pytest
import torch

from utils.ablations import SEEDS, experiment_data, read_results
from utils.encoder import EncoderBlock
from utils.norm_order import (
    ARMS,
    DEPTH,
    LRS,
    ORDERS,
    RESULTS_FILE,
    STEPS,
    WARMUPS,
    Arm,
    arm_name,
    best_lr,
    run_arm,
    shipped_runs,
    shipped_values,
)


def test_every_arm_has_the_same_data_depth_and_budget_and_differs_in_one_setting():
    assert len(ARMS) == len(ORDERS) * len(LRS) * len(WARMUPS) == 12
    for order in ORDERS:
        for lr in LRS:
            for warmup in WARMUPS:
                arm = ARMS[arm_name(order, lr, warmup)]
                assert arm.order == order and arm.experiment.data == "digits"
                assert arm.experiment.config.depth == DEPTH
                fit = dict(arm.experiment.fit)
                assert (fit["steps"], fit["lr"], fit["warmup"]) == (STEPS, lr, warmup)
    assert arm_name("post-norm", 1e-2, 0.1) == "post-norm, lr 0.01, warm-up 10 %"


def test_the_post_norm_model_is_the_pre_norm_one_with_its_norms_moved():
    torch.manual_seed(0)
    pre = ARMS[arm_name("pre-norm", 1e-3, 0.0)].build()
    torch.manual_seed(0)
    post = ARMS[arm_name("post-norm", 1e-3, 0.0)].build()
    assert all(block.norm_first for block in pre.blocks)
    assert not any(block.norm_first for block in post.blocks)
    assert isinstance(post.norm, torch.nn.Identity) and not isinstance(pre.norm, torch.nn.Identity)
    post_weights = dict(post.named_parameters())
    for name, weight in pre.named_parameters():  # the same draws, except the final LayerNorm
        if not name.startswith("norm."):
            assert torch.equal(weight, post_weights[name]), name
    tokens = torch.randn(2, 5, 64)
    block = post.blocks[0].eval()
    h = block.norm1(tokens + block.attn(tokens))  # post-norm: normalise after each add
    expected = block.norm2(h + block.mlp(h))
    assert torch.allclose(block(tokens), expected, atol=1e-6)
    assert isinstance(block, EncoderBlock)


def test_an_arm_refuses_another_order_or_model():
    with pytest.raises(ValueError, match="order must be one of"):
        Arm(ARMS[arm_name("pre-norm", 1e-3, 0.0)].experiment, "sandwich")
    with pytest.raises(ValueError, match="no arm 'pre-norm, lr 0.02, warm-up 0 %'"):
        shipped_runs("pre-norm, lr 0.02, warm-up 0 %")
    with pytest.raises(ValueError, match="order must be one of"):
        best_lr("sandwich", 0.0)


def test_the_shipped_file_holds_every_arm_over_five_seeds():
    results = read_results(RESULTS_FILE)  # checks the checksum that tools/run_experiments.py stored
    assert results["produced_by"] == "python tools/run_experiments.py --suite norm_order"
    assert list(results["experiments"]) == list(ARMS) and results["cpu"]
    for name in ARMS:
        runs = shipped_runs(name)
        assert [run["seed"] for run in runs] == list(SEEDS)
        assert all(run["steps"] == STEPS and 0 < run["same_answer"] <= 1 for run in runs)
    for order in ORDERS:
        for warmup in WARMUPS:
            chosen = best_lr(order, warmup)
            means = {lr: sum(shipped_values(arm_name(order, lr, warmup))) / len(SEEDS) for lr in LRS}
            assert means[chosen] == max(means.values())


def test_an_arm_refuses_another_experiments_data_before_training():
    with pytest.raises(ValueError, match="trains on"):
        run_arm(arm_name("pre-norm", 1e-2, 0.0), 0, experiment_data("same_colour"))
