"""Attention heat maps draw the weights they are given, one panel per head."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch

from utils.viz.attention import show_attention, show_heads


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_show_attention_draws_the_matrix_and_writes_small_ones_out():
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    ax = show_attention(weights, labels=["a", "b", "c", "d"]).axes[0]
    assert torch.allclose(torch.as_tensor(ax.images[0].get_array().data), weights)
    assert [t.get_text() for t in ax.texts][:2] == [f"{weights[0, 0]:.2f}", f"{weights[0, 1]:.2f}"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c", "d"]


def test_show_attention_leaves_big_matrices_unannotated():
    ax = show_attention(torch.softmax(torch.randn(20, 20), dim=-1)).axes[0]
    assert len(ax.texts) == 0


def test_show_heads_draws_one_panel_per_head():
    weights = torch.softmax(torch.randn(3, 5, 5), dim=-1)
    fig = show_heads(weights)
    panels = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["head 0", "head 1", "head 2"]
    assert torch.allclose(torch.as_tensor(panels[2].images[0].get_array().data), weights[2])


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(N_q, N_k\)"):
        show_attention(torch.rand(2, 3, 3))
    with pytest.raises(ValueError, match=r"\(heads, N_q, N_k\)"):
        show_heads(torch.rand(3, 3))
