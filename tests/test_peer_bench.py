"""tools/peer_bench.py (make bench): the course's ViT against transformers' ViTForImageClassification. The rows
are complete and the two models compute the same function; no test asserts a time."""

import dataclasses

import pytest
import torch

import tools.peer_bench as peer_bench
from tools.peer_bench import (
    HF_ATTENTION,
    PEER_CASES,
    TASKS,
    format_peer_table,
    hf_twin,
    run_peer_benchmark,
)
from utils.pretrained import from_hf

pytest.importorskip("transformers", reason="transformers is a dev requirement; make test installs it")


@pytest.fixture(scope="module")
def quick_rows():
    return run_peer_benchmark(quick=True)


def test_a_quick_run_measures_the_tiny_case_in_both_attentions_and_both_tasks(quick_rows):
    tiny = next(iter(PEER_CASES))
    assert {(r["case"], r["attention"], r["task"]) for r in quick_rows} == {
        (tiny, attention, task) for attention in HF_ATTENTION for task in TASKS
    }
    for row in quick_rows:
        assert 0 < row["low"] <= row["ratio"] <= row["high"]  # the median between the quartiles
        assert row["max_logit_difference"] < 1e-4  # the same weights: the same function, to float32 rounding


def test_the_table_shows_every_row_and_says_which_way_the_ratio_reads(quick_rows):
    table = format_peer_table(quick_rows)
    assert table.count("tiny, 32 px, patch 4") == len(HF_ATTENTION)
    assert "below 1.00 the course's model is faster" in table


def test_without_transformers_the_comparison_says_so(monkeypatch):
    monkeypatch.setattr(peer_bench, "transformers_available", lambda: False)
    assert run_peer_benchmark(quick=True) == []
    assert "transformers is not installed" in format_peer_table([])


@pytest.mark.parametrize("name", list(PEER_CASES))
def test_the_twin_has_the_shape_of_the_course_model(name):
    """Each case's transformers twin, cut to one block (ViT-B's twelve would cost seconds to build),
    converts into the course's model with every parameter accounted for, computing the same logits."""
    config, _ = PEER_CASES[name]
    config = dataclasses.replace(config, depth=1)
    twin = hf_twin(config, "sdpa").eval()
    ours = from_hf(twin).eval()
    assert (ours.config.embed_dim, ours.config.depth, ours.config.num_heads) == (config.embed_dim, 1, config.num_heads)
    assert ours.patch_embed.image_size == (config.image_size, config.image_size)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in twin.parameters())
    images = torch.randn(1, config.in_channels, config.image_size, config.image_size)
    with torch.inference_mode():
        difference = (ours(images) - twin(pixel_values=images).logits).abs().max()
    assert difference < 1e-4
