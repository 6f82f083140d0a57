"""utils.packing: images of different sizes packed into one sequence with a block-diagonal mask give
exactly the logits of running them one by one, each at its own size (to float32 rounding)."""

import copy

import pytest
import torch
from references import randomize_

from utils.packing import pack, packed_forward
from utils.vit import VisionTransformer, ViTConfig

LAYOUTS = {
    "learned": {},
    "sincos-mean": dict(pos_embed="sincos", pool="mean", fc_norm=True),
    "rope2d-registers": dict(pos_embed="rope2d", reg_tokens=2),
    "no-embed-class-registers": dict(no_embed_class=True, reg_tokens=3, layer_scale=0.5),
    "distilled-swiglu-qk-norm": dict(dist_token=True, mlp="swiglu", qk_norm=True),
}
SIZES = [(32, 32), (16, 24), (40, 8), (4, 4)]


@pytest.mark.parametrize("name", LAYOUTS)
def test_packing_equals_running_the_images_one_by_one(name):
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(ViTConfig.tiny(depth=2, **LAYOUTS[name])), std=0.2).eval()
    images = [torch.randn(3, h, w) for h, w in SIZES]
    with torch.no_grad():
        packed = packed_forward(model, images)
        one_by_one = []
        for image in images:
            alone = copy.deepcopy(model)
            alone.set_image_size(tuple(image.shape[1:]))
            one_by_one.append(alone(image.unsqueeze(0))[0])
    torch.testing.assert_close(packed, torch.stack(one_by_one), rtol=1e-5, atol=1e-5)


def test_the_mask_is_block_diagonal():
    model = VisionTransformer(ViTConfig.tiny(depth=1, reg_tokens=1)).eval()
    images = [torch.randn(3, 8, 8), torch.randn(3, 4, 12)]
    packed = pack(model, images)
    assert packed.segments == ((0, 2 + 4), (6, 2 + 3))
    assert packed.tokens.shape == (1, 11, 64)
    expected = torch.zeros(11, 11, dtype=torch.bool)
    expected[:6, :6] = expected[6:, 6:] = True
    assert torch.equal(packed.mask, expected)


def test_packing_without_the_mask_would_mix_the_images():
    """The mask is what makes packing exact: without it each image attends to the others."""
    torch.manual_seed(0)
    model = randomize_(VisionTransformer(ViTConfig.tiny(depth=1)), std=0.2).eval()
    images = [torch.randn(3, 8, 8), torch.randn(3, 12, 4)]
    packed = pack(model, images)
    with torch.no_grad():
        masked = model.blocks[0](packed.tokens, mask=packed.mask)
        unmasked = model.blocks[0](packed.tokens)
    assert (masked - unmasked).abs().max() > 1e-3


def test_bad_images_are_refused_by_name():
    model = VisionTransformer(ViTConfig.tiny(depth=1))
    with pytest.raises(ValueError, match="not divisible by the patch size 4"):
        pack(model, [torch.randn(3, 10, 8)])
    with pytest.raises(TypeError, match="non-empty list"):
        pack(model, torch.randn(2, 3, 8, 8))
    with pytest.raises(ValueError, match="expected 3 channels"):
        pack(model, [torch.randn(1, 8, 8)])
