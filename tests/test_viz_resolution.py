"""Lesson 12's plots draw what they say (one map per panel, a dot per seed, the means) and refuse
input that does not fit."""

import numpy as np
import pytest
import torch
from matplotlib.collections import PathCollection

from utils.viz.core import alt_text
from utils.viz.resolution import plot_against, plot_grid_maps


def test_plot_grid_maps_draws_one_map_per_panel_and_outlines_the_query():
    maps = {"4 x 4": torch.arange(16.0).reshape(4, 4), "6 x 6": torch.zeros(6, 6)}
    fig = plot_grid_maps(maps, "scores", marks={"4 x 4": (1, 2)})
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["4 x 4", "6 x 6"]
    assert panels[0].images[0].get_array().shape == (4, 4) and len(panels[0].patches) == 1
    assert "highest at (3, 3)" in alt_text(fig)
    with pytest.raises(ValueError, match=r"maps\['a'\] \(rows, cols\)"):
        plot_grid_maps({"a": torch.zeros(3)}, "scores")


def test_plot_against_draws_every_seed_and_the_means():
    values = [[0.5, 0.7, 0.9], [0.7, 0.9, 1.0]]
    ax = plot_against([0.25, 0.5, 1.0], {"RoPE": values}, "share kept", "accuracy", "dropping").axes[0]
    assert np.allclose(ax.lines[0].get_ydata(), [60, 80, 95])
    assert sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)) == 6
    with pytest.raises(ValueError, match="2 values per seed, xs has 3"):
        plot_against([0.25, 0.5, 1.0], {"RoPE": [[0.5, 0.6]]}, "share kept", "accuracy", "dropping")
