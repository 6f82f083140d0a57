"""Multiply-adds per image, counted by torch's FlopCounterMode, against formulas written by hand."""

import pytest
import torch
from torch import nn

from utils import MultiHeadSelfAttention, VisionTransformer, ViTConfig
from utils.baselines import DeepCNN, SmallCNN
from utils.compute import multiply_adds


def test_a_linear_layer_does_in_times_out_per_token():
    assert multiply_adds(nn.Linear(20, 7), (20,)) == 20 * 7
    assert multiply_adds(nn.Linear(20, 7), (5, 20)) == 5 * 20 * 7  # 5 tokens
    assert multiply_adds(nn.Linear(20, 7, bias=False), (5, 20)) == 5 * 20 * 7


@pytest.mark.parametrize(
    "conv, size, out_size",
    [
        (nn.Conv2d(3, 8, 3, padding=1), 16, 16),
        (nn.Conv2d(3, 8, 3, stride=2, padding=1), 16, 8),
        (nn.Conv2d(4, 6, 5), 12, 8),
        (nn.Conv2d(3, 64, 8, stride=8), 32, 4),  # the tiny ViT's patch embedding
    ],
)
def test_a_convolution_does_c_in_c_out_k_k_per_output_pixel(conv, size, out_size):
    assert conv(torch.rand(1, conv.in_channels, size, size)).shape[-1] == out_size
    k = conv.kernel_size[0]
    expected = conv.in_channels * conv.out_channels * k * k * out_size * out_size
    assert multiply_adds(conv, (conv.in_channels, size, size)) == expected


@pytest.mark.parametrize("implementation", ["explicit", "fused", "auto"])
def test_self_attention_counts_its_projections_and_both_attention_matmuls(implementation):
    """q k^T and weights v are counted with the explicit attention and with torch's fused kernel
    alike (FlopCounterMode has no formula of its own for the CPU's fused kernel)."""
    T, D = 17, 64
    layer = MultiHeadSelfAttention(D, num_heads=4)
    layer.implementation = implementation
    # qkv (T x D x 3D) + proj (T x D x D), then q k^T (T x T x D) + weights v (T x T x D) over all heads
    assert multiply_adds(layer, (T, D)) == 4 * T * D * D + 2 * T * T * D


def tiny_vit_formula(config: ViTConfig) -> int:
    """Multiply-adds of one image through a ViT, by hand: patch embedding, per block qkv, attention,
    proj and MLP, then the head (norms, softmax and additions not counted)."""
    N, T, D = config.num_patches, config.num_tokens, config.embed_dim
    hidden = int(D * config.mlp_ratio)
    patch_embedding = N * (config.in_channels * config.patch_size**2) * D
    block = T * D * 3 * D + 2 * T * T * D + T * D * D + 2 * T * D * hidden  # qkv, attention, proj, fc1 + fc2
    return patch_embedding + config.depth * block + D * config.num_classes


@pytest.mark.parametrize("implementation", ["auto", "fused"])
def test_the_tiny_vit_for_the_two_object_task_matches_the_formula(implementation):
    config = ViTConfig.tiny(image_size=32, patch_size=8, num_classes=2)
    vit = VisionTransformer(config)
    for block in vit.blocks:
        block.attn.implementation = implementation
    assert tiny_vit_formula(config) == 2_572_928  # 16 patches of 192 numbers, 17 tokens of 64, 4 blocks
    assert multiply_adds(vit, (3, 32, 32)) == tiny_vit_formula(config)


def test_the_tiny_vit_formula_holds_for_other_shapes_too():
    config = ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, num_classes=10, depth=2, mlp_ratio=3.0)
    assert multiply_adds(VisionTransformer(config), (1, 8, 8)) == tiny_vit_formula(config)


def test_small_cnn_at_32_pixels_runs_its_first_stage_at_full_size():
    cnn = SmallCNN.with_parameters(147_650, in_channels=3, num_classes=2)  # the tiny ViT's count
    w = cnn.width
    assert w == 48
    expected = (
        (3 * w + w * w) * 9 * 32 * 32  # two 3x3 convolutions at 32 x 32
        + (w * 2 * w + 2 * w * 2 * w) * 9 * 16 * 16  # two at 16 x 16, twice as wide
        + 2 * w * 2  # the head
    )
    assert multiply_adds(cnn, (3, 32, 32)) == expected == 54_411_456  # 21 times the tiny ViT's


def test_deep_cnn_halves_the_image_before_it_widens():
    cnn = DeepCNN(3, 2, width=16)
    w = cnn.width
    expected = (
        3 * w * 9 * 32 * 32  # the first convolution at full size, then a max-pool
        + (w * w + w * 2 * w) * 9 * 16 * 16
        + (2 * w * 2 * w + 2 * w * 4 * w) * 9 * 8 * 8
        + (4 * w * 4 * w + 4 * w * 4 * w) * 9 * 4 * 4
        + 4 * w * 4 * w * 9 * 2 * 2
        + 4 * w * 2  # the head
    )
    assert multiply_adds(cnn, (3, 32, 32)) == expected == 5_308_544  # about twice the tiny ViT's


def test_the_count_leaves_the_model_as_it_found_it():
    vit = VisionTransformer(ViTConfig.tiny(image_size=16, patch_size=8, num_classes=2, dropout=0.1))
    vit.train()
    vit.blocks[0].eval()  # a mixed state comes back as it was
    rng = torch.get_rng_state()
    multiply_adds(vit, (3, 16, 16))
    assert vit.training and not vit.blocks[0].training and vit.blocks[1].training
    assert all(p.grad is None for p in vit.parameters())
    assert torch.equal(torch.get_rng_state(), rng)  # draws no random numbers: later seeded cells stay the same
    with pytest.raises(ValueError):
        multiply_adds(vit, (3, 15, 15))
    assert vit.training and not vit.blocks[0].training  # also after the model refused the input


def test_a_model_of_another_dtype_gets_an_input_of_its_dtype():
    assert multiply_adds(nn.Linear(4, 3).double(), (4,)) == 12
    assert multiply_adds(nn.ReLU(), (4,)) == 0  # no parameters: a float32 input, nothing to count


@pytest.mark.parametrize(
    "input_shape, error, match",
    [
        ((1, 3, 32, 32), ValueError, r"refused an input of shape \(1, 1, 3, 32, 32\) .* without the batch axis: "),
        ((1, 32, 32), ValueError, r"takes images \(B, 3, H, W\), got \(1, 1, 32, 32\)"),
        ((3, 32), ValueError, r"refused an input of shape \(1, 3, 32\)"),
        (32, TypeError, r"input_shape must be the shape of one example without the batch axis, e.g. \(3, 32, 32\)"),
        (torch.rand(3, 32, 32), TypeError, r"got a tensor of dtype float32 .* pass a shape, not the images"),
        ((), ValueError, r"got an empty shape \(\)"),
        ((3, 0, 32), ValueError, r"input_shape\[1\] must be a whole number, at least 1, got 0"),
        ((3, -32, 32), ValueError, r"input_shape\[1\] .* got -32"),
        ((3, 32.0, 32), TypeError, r"input_shape\[1\] must be a whole number, .* use input_shape\[1\]=32"),
        (("3", 32, 32), TypeError, r"input_shape\[0\] must be a whole number"),
        ((3, 10**6, 10**6), ValueError, r"holds 3,000,000,000,000 numbers per example, more than"),
    ],
)
def test_multiply_adds_says_what_shape_it_takes(input_shape, error, match):
    with pytest.raises(error, match=match):
        multiply_adds(SmallCNN(3, 2, width=4), input_shape)


def test_multiply_adds_needs_a_model():
    with pytest.raises(TypeError, match=r"model must be a torch nn.Module, e.g. VisionTransformer\(config\), got"):
        multiply_adds(ViTConfig.tiny(), (3, 32, 32))
    with pytest.raises(ValueError, match=r"model must be a torch nn.Module"):  # a WrongTypeError is a ValueError too
        multiply_adds("vit", (3, 32, 32))
    with pytest.raises(TypeError, match=r"that is the class VisionTransformer; build a model from it first"):
        multiply_adds(VisionTransformer, (3, 32, 32))
