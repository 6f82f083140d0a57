"""Lesson 13's explorer: its sliders set how many patches are hidden, which digit and which mask,
and it draws and reports what they pick."""

import pytest
import torch

from utils.mae import MaskedAutoencoder
from utils.patches import patchify
from utils.vit import VisionTransformer, ViTConfig
from utils.widgets.mae import MaskRatioExplorer


def mae():
    torch.manual_seed(0)
    config = ViTConfig.tiny(image_size=8, in_channels=1, num_classes=10, patch_size=2, pool="mean", pos_embed="sincos")
    return MaskedAutoencoder(VisionTransformer(config)).eval()


def test_the_slider_hides_as_many_patches_as_it_says():
    images = torch.rand(3, 1, 8, 8)
    widget = MaskRatioExplorer(mae(), images, patchify(images, 2).mean(0))
    assert int(widget.mask.sum()) == 12 and "12 of 16 hidden" in widget.summary.value
    assert "each place's mean pixels" in widget.summary.value
    widget.hidden.value = 4
    assert int(widget.mask.sum()) == 4 and "4 of 16 hidden" in widget.summary.value
    blue = (widget.pictures[1].get_array()[..., 2] > widget.pictures[1].get_array()[..., 0]).sum()
    assert blue == 4 * 4  # four hidden patches of 2 x 2 pixels painted blue
    widget.hidden.value = 0
    assert widget.loss is None and "nothing hidden" in widget.summary.value
    assert "image 0, 0 of 16 patches hidden, mask seed 0" in widget.alt_text()


def test_another_image_or_mask_seed_redraws():
    images = torch.rand(3, 1, 8, 8)
    widget = MaskRatioExplorer(mae(), images)
    first = widget.mask.clone()
    widget.draw.value = 7
    assert not torch.equal(first, widget.mask)
    widget.image.value = 2
    drawn = torch.as_tensor(widget.pictures[0].get_array()[..., 0].tolist())
    torch.testing.assert_close(drawn, images[2, 0])


def test_the_explorer_refuses_what_does_not_fit():
    with pytest.raises(TypeError, match="MaskedAutoencoder"):
        MaskRatioExplorer("mae", torch.rand(1, 1, 8, 8))
    with pytest.raises(ValueError, match=r"images must be \(B, 1, 8, 8\)"):
        MaskRatioExplorer(mae(), torch.rand(1, 1, 16, 16))
    with pytest.raises(ValueError, match="hidden must be"):
        MaskRatioExplorer(mae(), torch.rand(1, 1, 8, 8), hidden=16)
