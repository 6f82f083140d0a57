"""Attention pictures: heat maps of the weights they are given, one panel per head, weight rows as
bars, a text table, and the cost plot."""

import pytest
import torch

from utils.viz.attention import (
    format_matrix,
    plot_attention_cost,
    show_attention,
    show_heads,
    show_weight_rows,
)


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


def test_format_matrix_labels_rows_and_columns_and_rounds():
    text = format_matrix(torch.tensor([[1.0, -0.001], [0.125, 2 / 3]]), labels=["a", "bb"])
    assert text.splitlines() == [
        "      a   bb",
        " a 1.00 0.00",  # -0.001 is not written "-0.00"
        "bb 0.12 0.67",
    ]
    wide = format_matrix(torch.ones(2, 3), labels=["x", "y"], columns=["p", "q", "r"], decimals=1)
    assert wide.splitlines()[0].split() == ["p", "q", "r"]
    assert wide.splitlines()[1].split() == ["x", "1.0", "1.0", "1.0"]
    assert format_matrix(torch.zeros(2, 3)).splitlines()[0].split() == ["0", "1", "2"]
    with pytest.raises(ValueError, match=r"\(rows, cols\)"):
        format_matrix(torch.zeros(2))
    with pytest.raises(ValueError, match="1 row and 2 column labels"):
        format_matrix(torch.zeros(2, 2), labels=["a"], columns=["a", "b"])


def test_show_weight_rows_draws_one_bar_chart_per_row():
    rows = {"unscaled": torch.tensor([0.0, 0.9, 0.1]), "scaled": torch.tensor([0.3, 0.4, 0.3])}
    fig = show_weight_rows(rows)
    assert [ax.get_title() for ax in fig.axes] == ["unscaled\nlargest weight 0.90", "scaled\nlargest weight 0.40"]
    assert [bar.get_height() for bar in fig.axes[1].patches] == pytest.approx([0.3, 0.4, 0.3])
    assert fig.axes[0].get_ylim() == (0, 1)
    with pytest.raises(ValueError, match=r"\(N_k,\)"):
        show_weight_rows({"two rows": torch.rand(2, 3)})


def test_plot_attention_cost_draws_memory_and_time_with_a_square_law_line():
    tokens, nbytes, seconds = [10, 20, 40], [400, 1600, 6400], [1e-3, 2e-3, 8e-3]
    memory, time = plot_attention_cost(tokens, nbytes, seconds).axes
    measured, square_law = memory.lines
    assert list(measured.get_ydata()) == pytest.approx([4e-4, 1.6e-3, 6.4e-3])  # in MB
    assert list(square_law.get_ydata()) == pytest.approx([4e-4, 1.6e-3, 6.4e-3])  # exactly T^2 here
    assert list(time.lines[0].get_ydata()) == pytest.approx([1.0, 2.0, 8.0])  # in ms
    assert list(time.lines[1].get_ydata()) == pytest.approx([0.5, 2.0, 8.0])  # T^2 through the last point
    assert memory.get_xscale() == time.get_yscale() == "log"
    with pytest.raises(ValueError, match="one memory and one time per T"):
        plot_attention_cost([10, 20], [400], [1e-3, 2e-3])


@pytest.mark.parametrize(
    "draw, error, says",
    [
        (lambda: show_attention(torch.zeros(0, 3)), ValueError, r"\(N_q, N_k\) with something on every axis"),
        (lambda: show_attention(torch.rand(3, 3), labels=["a"]), ValueError, "expected 3 token labels"),
        (lambda: show_attention(torch.rand(3, 3).numpy()), TypeError, r"torch.from_numpy"),
        (lambda: show_heads(torch.rand(2, 4, 4), labels=list("abcde")), ValueError, "expected 4 token labels"),
        (lambda: show_heads(torch.zeros(0, 3, 3)), ValueError, "something on every axis"),
        (lambda: format_matrix(torch.zeros(0, 2)), ValueError, "something on every axis"),
        (lambda: format_matrix(torch.zeros(2, 2), decimals=-1), ValueError, "decimals must be a whole number"),
        (lambda: show_weight_rows({}), ValueError, "at least one row of weights"),
        (lambda: show_weight_rows({"a": [0.5, 0.5]}), TypeError, r"torch.tensor\(...\)"),
        (lambda: show_weight_rows(torch.rand(3)), TypeError, "dict"),
        (lambda: plot_attention_cost([], [], []), ValueError, "at least one sequence length"),
        (lambda: plot_attention_cost([10, 20], [0, 400], [1e-3, 2e-3]), ValueError, "nbytes > 0"),
    ],
)
def test_the_attention_plots_refuse_empty_mismatched_or_untyped_input(draw, error, says):
    with pytest.raises(error, match=says):
        draw()
