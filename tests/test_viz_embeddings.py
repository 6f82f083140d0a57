"""Lesson 2's plots draw what their titles say, and refuse the wrong input."""

import numpy as np
import pytest
import torch

from utils import pos_embed_similarity, resize_pos_embed, sincos_pos_embed_2d
from utils.embeddings import neighbour_similarity
from utils.viz.embeddings import (
    show_images,
    show_pos_similarity,
    show_pos_table,
    show_resized_similarity,
    show_token_scales,
)


def tiles(fig):
    """The small-multiple heat maps of a figure (axes that hold an image), in drawing order."""
    return [ax for ax in fig.axes if ax.images]


def test_show_pos_similarity_draws_each_position_on_its_grid_place():
    sincos = pos_embed_similarity(sincos_pos_embed_2d((4, 6), 16))  # (24, 24)
    torch.manual_seed(0)
    random = pos_embed_similarity(torch.randn(1, 25, 16))
    fig = show_pos_similarity({"sin-cos": sincos, "random": random}, (4, 6), panels=7)
    drawn = tiles(fig)
    assert len(drawn) == 2 * 4 * 6  # the whole grid, once per table
    # tile (row 2, col 5) of the first table is position 2 * 6 + 5 laid out on the grid
    tile = np.asarray(drawn[2 * 6 + 5].images[0].get_array())
    assert np.allclose(tile, sincos[17].reshape(4, 6).numpy())
    assert tile[2, 5] == pytest.approx(1.0)  # similar to itself
    near, far = neighbour_similarity(sincos, (4, 6))
    assert f"neighbours {near:.2f}, far apart {far:.2f}" in fig.subfigs[0]._suptitle.get_text()


def test_show_pos_similarity_picks_evenly_spread_positions_on_a_large_grid():
    fig = show_pos_similarity({"sin-cos": pos_embed_similarity(sincos_pos_embed_2d(14, 32))}, 14, panels=7)
    drawn = tiles(fig)
    assert len(drawn) == 49
    labels = [ax.get_ylabel() for ax in drawn if ax.get_ylabel()]
    assert labels == ["0", "2", "4", "6", "9", "11", "13"]  # the corners are always shown


def test_show_token_scales_one_histogram_per_set_on_a_log_axis():
    fig = show_token_scales({"tokens": torch.ones(5, 4), "positions": torch.full((1, 7, 4), 0.01)})
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["tokens (median 2.00)", "positions (median 0.02)"]
    assert sum(bar.get_height() for bar in ax.patches) == 5 + 7


def test_show_pos_table_draws_the_patch_rows_without_the_class_token():
    table = sincos_pos_embed_2d((3, 4), 16)  # (1, 13, 16)
    fig = show_pos_table(table)
    ax = fig.axes[0]
    assert np.allclose(np.asarray(ax.images[0].get_array()), table[0, 1:].numpy())
    assert [text.get_text() for text in ax.texts] == ["column: sin", "column: cos", "row: sin", "row: cos"]
    assert [line.get_xdata()[0] for line in ax.lines] == [7.5, 3.5, 11.5]  # halves, then sin | cos


def test_show_resized_similarity_matches_anchors_to_the_same_place():
    table = sincos_pos_embed_2d(14, 32)
    fig = show_resized_similarity(table, resize_pos_embed(table, 14, 24), 14, 24, [(0, 0), (7, 7), (13, 13)])
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "14 x 14: patch (0, 0)",
        "14 x 14: patch (7, 7)",
        "14 x 14: patch (13, 13)",
        "24 x 24: patch (0, 0)",
        "24 x 24: patch (12, 12)",
        "24 x 24: patch (23, 23)",
    ]
    assert [np.asarray(ax.images[0].get_array()).shape for ax in fig.axes] == [(14, 14)] * 3 + [(24, 24)] * 3


def test_show_images_side_by_side():
    images = [torch.rand(3, 8, 8), torch.rand(3, 8, 8)]
    fig = show_images(images, ["a", "b"])
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
    assert np.allclose(np.asarray(fig.axes[1].images[0].get_array()), images[1].permute(1, 2, 0).numpy())


@pytest.mark.parametrize(
    "draw, says",
    [
        (lambda: show_pos_similarity({}, 3), "at least one similarity matrix"),
        (lambda: show_pos_similarity({"a": torch.rand(8, 8)}, 3), r"N = 3 x 3 = 9, got \(8, 8\)"),
        (lambda: show_pos_similarity({"a": torch.rand(9, 9)}, 0), "grid_size must be a whole number"),
        (lambda: show_pos_similarity({"a": torch.rand(9, 9)}, 3, panels=0), "panels must be a whole number"),
        (lambda: show_token_scales({}), "at least one set of vectors"),
        (lambda: show_token_scales({"zeros": torch.zeros(3, 4)}), "'zeros': a log axis needs lengths > 0"),
        (lambda: show_token_scales({"none": torch.zeros(0, 4)}), "something on every axis"),
        (lambda: show_pos_table(torch.rand(2, 5, 4)), r"one table .*got \(2, 5, 4\)"),
        (lambda: show_pos_table(torch.rand(1, 5, 4), num_prefix_tokens=5), "N >= 1 positions after its 5 prefix"),
        (
            lambda: show_resized_similarity(torch.rand(1, 10, 8), torch.rand(1, 17, 8), 3, 5, [(0, 0)]),
            r"table 'after': expected 1 \+ 5 x 5 = 26 entries, got shape \(1, 17, 8\)",
        ),
        (
            lambda: show_resized_similarity(torch.rand(1, 10, 8), torch.rand(1, 17, 8), 3, 4, [(3, 0)]),
            r"anchor \(3, 0\) is no \(row, col\) patch of the old 3 x 3 grid",
        ),
        (lambda: show_resized_similarity(torch.rand(1, 10, 8), torch.rand(1, 17, 8), 3, 4, []), "at least one anchor"),
        (lambda: show_images([torch.rand(3, 8, 8)], []), "expected 1 titles, one per image, got 0"),
        (lambda: show_images(torch.rand(2, 3, 8, 8), ["a", "b"]), r"pass list\(images\)"),
        (lambda: show_images([torch.rand(8, 8, 3)], ["a"]), r"permute\(2, 0, 1\)"),
    ],
)
def test_the_embedding_plots_refuse_empty_or_mismatched_input(draw, says):
    with pytest.raises(ValueError, match=says):
        draw()
