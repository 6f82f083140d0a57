"""Lesson 11's explorer: its controls pick the arm, the learning rate and the step, and it draws
what they pick."""

import numpy as np
import pytest
import torch

from utils.widgets.stability import LogitExplorer

STEPS = [0, 10, 20]


def inputs():
    """Two arms at two learning rates: the plain one's logits grow, qk-norm's stay small; seed 0's
    class-token attention turns one-hot on the plain arm at the high rate."""
    curves, pictures = {}, {}
    for stabiliser in ("plain", "qk-norm"):
        for lr in (1e-2, 3e-2):
            growth = 100.0 if stabiliser == "plain" and lr == 3e-2 else 1.0
            curves[stabiliser, lr] = torch.tensor([[0.1, 2.0 * growth, 5.0 * growth]] * 3)  # (3 seeds, 3 records)
            uniform = torch.full((3, 4, 5), 0.2)  # (records, heads, tokens)
            if growth > 1:
                uniform[2] = torch.eye(5)[1].expand(4, 5)  # every head on patch 0 at the last record
            pictures[stabiliser, lr] = uniform
    return curves, pictures


def test_the_explorer_draws_the_chosen_arm_and_step():
    curves, pictures = inputs()
    widget = LogitExplorer(torch.rand(1, 8, 8), STEPS, curves, pictures)
    assert widget.state_line() == "plain, lr 0.03, step 20"
    assert len(widget.ax_curve.lines) == 3 + 1  # a line per seed and the step's marker
    assert np.allclose(widget.ax_curve.lines[0].get_ydata(), [0.1, 200.0, 500.0])
    assert widget.weights.max() == 1.0 and "largest logit <b>500</b>" in widget.summary.value
    assert np.allclose(widget.ax_attention.images[0].get_array(), pictures["plain", 3e-2][2])
    widget.step.value = 10
    assert "step 10" in widget.state_line() and torch.allclose(widget.weights, torch.full((4, 5), 0.2))
    assert widget.ax_curve.lines[-1].get_xdata()[0] == 10
    widget.stabilised.value = True
    assert widget.state_line() == "qk-norm, lr 0.03, step 10" and "largest logit <b>2</b>" in widget.summary.value
    widget.lr.value = 1e-2
    assert widget.key == ("qk-norm", 1e-2) and "1.61 nats" in widget.summary.value  # log 5: uniform
    assert "qk-norm, lr 0.01" in widget.alt_text()


def test_the_explorer_refuses_inputs_that_do_not_fit():
    curves, pictures = inputs()
    with pytest.raises(ValueError, match="one record per step"):
        LogitExplorer(torch.rand(1, 8, 8), STEPS[:2], curves, pictures)
    with pytest.raises(TypeError, match="the same"):
        LogitExplorer(torch.rand(1, 8, 8), STEPS, curves, {})
    with pytest.raises(ValueError, match="a batch"):
        LogitExplorer(torch.rand(2, 1, 8, 8), STEPS, curves, pictures)
