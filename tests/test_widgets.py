"""The widgets, driven from Python: move a control, check what is now drawn and reported."""

import pytest
import torch

from utils.widgets import PatchSlicer, SoftmaxTemperature


def test_patch_slicer_redraws_the_grid_and_the_counts():
    slicer = PatchSlicer(torch.rand(3, 32, 32), patch_size=16)
    assert len(slicer.lines) == 3 + 3  # borders at 0, 16, 32 each way
    assert "5 tokens" in slicer.summary.value and "<b>25</b>" in slicer.summary.value
    slicer.patch_size.value = 4
    assert len(slicer.lines) == 9 + 9
    assert slicer.ax.get_title() == "8 x 8 patches of 4 x 4 px"
    assert "65 tokens" in slicer.summary.value and "4,225" in slicer.summary.value
    assert len(slicer.ax.lines) == 18  # the old grid was removed, not drawn over


def test_patch_slicer_offers_only_sizes_that_divide_the_image():
    slicer = PatchSlicer(torch.rand(3, 24, 36), patch_size=12)
    assert list(slicer.patch_size.options) == [2, 3, 4, 6, 12]
    with pytest.raises(ValueError, match="must divide the image"):
        PatchSlicer(torch.rand(3, 24, 36), patch_size=5)


def test_softmax_temperature_sharpens_and_flattens():
    scores = torch.tensor([2.0, 1.0, 0.0, -1.0])
    widget = SoftmaxTemperature(scores)
    torch.testing.assert_close(widget.weights, torch.softmax(scores, 0))
    heights = [bar.get_height() for bar in widget.bars]
    torch.testing.assert_close(torch.tensor(heights), torch.softmax(scores, 0))
    widget.scale.value = 10.0
    assert widget.weights.max() > 0.99 and widget.bars[0].get_height() > 0.99
    assert "largest weight <b>1.00</b>" in widget.summary.value
    widget.scale.value = 0.01
    assert widget.weights.max() < 0.26  # nearly uniform over 4 keys
    with pytest.raises(ValueError, match=r"\(N,\)"):
        SoftmaxTemperature(torch.rand(2, 3))
