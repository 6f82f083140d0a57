"""Lesson 13's pictures: hidden patches are painted, reconstructions keep the visible patches, and
every figure says what it shows in its alt text."""

import pytest
import torch

from utils.patches import patchify
from utils.viz.core import alt_text
from utils.viz.mae import HIDDEN, filled, painted, plot_arms, plot_reconstructions


def test_painted_colours_exactly_the_hidden_patches():
    images = torch.rand(2, 1, 8, 8)
    mask = torch.zeros(2, 16)
    mask[0, 5] = 1
    out = painted(images, mask, 2)
    assert out.shape == (2, 3, 8, 8)
    assert torch.allclose(out[0, :, 2:4, 2:4], torch.tensor(HIDDEN)[:, None, None].expand(3, 2, 2))
    assert torch.equal(out[1], images[1].expand(3, -1, -1))


def test_filled_keeps_the_visible_patches_and_pastes_the_prediction():
    images = torch.rand(1, 1, 8, 8)
    mask = torch.zeros(1, 16)
    mask[0, 0] = 1
    prediction = torch.full((1, 16, 4), 0.25)
    out = patchify(filled(images, prediction, mask, 2), 2)
    assert torch.allclose(out[0, 0], torch.full((4,), 0.25))
    assert torch.equal(out[0, 1:], patchify(images, 2)[0, 1:])


def test_the_figures_describe_themselves_and_refuse_a_wrong_mask():
    images = torch.rand(3, 1, 8, 8)
    mask = torch.ones(3, 16)
    mask[:, :4] = 0
    fig = plot_reconstructions(images, torch.rand(3, 16, 4), mask, 2)
    assert "12 of 16 patches hidden" in alt_text(fig)
    fig = plot_arms({"MAE": [0.8, 0.9], "random": [0.5, 0.6]})
    assert "MAE 85.0 %" in alt_text(fig) and "random 55.0 %" in alt_text(fig)
    with pytest.raises(ValueError, match="mask must be"):
        painted(images, torch.ones(3, 4), 2)
    with pytest.raises(ValueError, match="prediction must be"):
        filled(images, torch.rand(3, 16, 3), mask, 2)
