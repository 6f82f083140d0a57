"""Lesson 9's plots draw what their titles say (every seed, the mean, the band), and refuse the
wrong input."""

import numpy as np
import pytest
import torch
from matplotlib.collections import LineCollection, PathCollection

from utils.viz.claims import plot_curves, plot_head_costs, plot_seeds


def test_plot_seeds_draws_every_seed_and_a_bar_at_the_mean():
    groups = {"a": [0.5, 0.7, 0.9], "b": torch.tensor([0.2, 0.4])}
    ax = plot_seeds(groups, "accuracy").axes[0]
    dots = [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    assert [len(d) for d in dots] == [3, 2]
    assert np.allclose(sorted(dots[0][:, 1]), [50, 70, 90])  # percentages
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    means = sorted(segment[0][1] for bar in bars for segment in bar.get_segments())
    assert np.allclose(means, [30, 70])
    assert [label.get_text() for label in ax.get_xticklabels()] == ["a", "b"]
    with pytest.raises(ValueError, match="at least one arm"):
        plot_seeds({}, "accuracy")
    with pytest.raises(ValueError, match=r"groups\['a'\] \(seeds,\)"):
        plot_seeds({"a": [[0.5, 0.6]]}, "accuracy")


def test_plot_curves_draws_the_mean_and_the_band_from_lowest_to_highest_seed():
    steps = [25, 50, 75]
    values = torch.tensor([[1.0, 0.5, 0.2], [3.0, 1.5, 0.4]])
    ax = plot_curves(steps, {"learned": values}, "loss", log=True).axes[0]
    assert np.allclose(ax.lines[0].get_ydata(), [2.0, 1.0, 0.3])
    assert ax.lines[0].get_label() == "learned (2 seeds)"
    band = ax.collections[0].get_paths()[0].vertices
    assert np.isclose(band[:, 1].max(), 3.0) and np.isclose(band[:, 1].min(), 0.2)
    assert ax.get_yscale() == "log"
    with pytest.raises(ValueError, match="3 points per seed, steps has 2"):
        plot_curves([25, 50], {"learned": values}, "loss")


def test_plot_head_costs_draws_one_panel_per_seed_on_one_scale():
    costs = torch.zeros(3, 4, 4)
    costs[1, 2, 3] = 0.05
    fig = plot_head_costs(costs)
    panels = [ax for ax in fig.axes if ax.get_title().startswith("seed")]
    assert [ax.get_title() for ax in panels] == ["seed 0", "seed 1", "seed 2"]
    assert np.isclose(panels[1].images[0].get_array()[2, 3], 5.0)  # points
    assert all(np.allclose(ax.images[0].get_clim(), (0, 5.0)) for ax in panels)
    with pytest.raises(ValueError, match=r"\(seeds, depth, heads\)"):
        plot_head_costs(torch.zeros(4, 4))
