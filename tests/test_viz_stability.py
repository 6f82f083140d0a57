"""Lesson 11's sweep plot draws the mean of each arm and every seed, and refuses the wrong input."""

import numpy as np
import pytest
import torch

from utils.viz.core import alt_text
from utils.viz.stability import plot_sweep


def test_the_sweep_plot_draws_means_and_seeds_on_log_axes():
    lrs = [3e-3, 1e-2, 3e-2]
    accuracy = {"plain": torch.tensor([[0.9, 0.8, 0.4], [0.92, 0.82, 0.3]]), "qk-norm": [[0.9, 0.9, 0.8]] * 2}
    logits = {"plain": [[10.0, 100.0, 1000.0]] * 2, "qk-norm": [[3.0, 4.0, 5.0]] * 2}
    fig = plot_sweep(lrs, accuracy, logits)
    left, right = fig.axes
    assert np.allclose(left.lines[0].get_ydata(), [91, 81, 35])  # percentages, the mean of the seeds
    assert np.allclose(right.lines[1].get_ydata(), [3, 4, 5])
    assert right.get_yscale() == "log" and left.get_xscale() == "log"
    assert len(left.collections) == 2 * 3  # a dot per seed, one scatter per arm and rate
    assert "plain: 91.0 % / 10" in alt_text(fig)


def test_the_sweep_plot_refuses_arms_or_rates_that_do_not_match():
    with pytest.raises(ValueError, match="2 learning rates per seed, lrs has 3"):
        plot_sweep([1, 2, 3], {"a": [[0.5, 0.6]]}, {"a": [[1.0, 2.0]]})
    with pytest.raises(ValueError, match="the same arms"):
        plot_sweep([1, 2], {"a": [[0.5, 0.6]]}, {"b": [[1.0, 2.0]]})
