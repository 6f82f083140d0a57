"""patchify / unpatchify / PatchEmbedding against Tensor.unfold and nn.Conv2d."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from utils.patches import PatchEmbedding, patchify, resize_patch_embed, resize_patches, unpatchify
from utils.validation import WrongTypeError

# (B, C, H, W, P): square and non-square images, RGB and grayscale, P = 1 and P = side.
SHAPES = [
    (2, 3, 8, 8, 4),
    (1, 1, 12, 8, 4),
    (3, 3, 6, 15, 3),
    (2, 2, 4, 4, 1),
    (2, 3, 16, 16, 16),
    (1, 1, 32, 48, 8),
]


def unfold_patches(images: torch.Tensor, P: int) -> torch.Tensor:
    """Independent reference: Tensor.unfold cuts the patches, then (rows, cols) -> N, (C, P, P) -> C*P*P."""
    B, C, H, W = images.shape
    windows = images.unfold(2, P, P).unfold(3, P, P)  # (B, C, rows, cols, P, P)
    windows = windows.permute(0, 2, 3, 1, 4, 5)  # (B, rows, cols, C, P, P)
    return windows.reshape(B, (H // P) * (W // P), C * P * P)


@pytest.mark.parametrize("B, C, H, W, P", SHAPES)
def test_patchify_equals_unfold_reference(B, C, H, W, P):
    torch.manual_seed(0)
    images = torch.randn(B, C, H, W)
    patches = patchify(images, P)
    assert patches.shape == (B, (H // P) * (W // P), C * P * P)
    assert torch.equal(patches, unfold_patches(images, P))


@pytest.mark.parametrize("B, C, H, W, P", SHAPES)
def test_unpatchify_inverts_patchify_exactly(B, C, H, W, P):
    torch.manual_seed(0)
    images = torch.randn(B, C, H, W)
    assert torch.equal(unpatchify(patchify(images, P), P, (H, W)), images)


def test_unpatchify_accepts_one_side_for_square_images():
    torch.manual_seed(0)
    images = torch.randn(2, 3, 12, 12)
    assert torch.equal(unpatchify(patchify(images, 4), 4, 12), images)


def test_patches_are_row_major():
    torch.manual_seed(0)
    images = torch.randn(2, 3, 12, 16)  # 3 rows x 4 cols of 4 px patches
    P = 4
    patches = patchify(images, P)
    # patch 1: top row, second from the left; patch 4: second row, leftmost; the last: bottom right
    assert torch.equal(patches[:, 1], images[:, :, 0:P, P : 2 * P].reshape(2, -1))
    assert torch.equal(patches[:, 4], images[:, :, P : 2 * P, 0:P].reshape(2, -1))
    assert torch.equal(patches[:, 11], images[:, :, 2 * P :, 3 * P :].reshape(2, -1))
    # within a patch: channel first, then row, then column of the pixel
    assert patches[0, 1, 0] == images[0, 0, 0, P]
    assert patches[0, 1, 1] == images[0, 0, 0, P + 1]
    assert patches[0, 1, P] == images[0, 0, 1, P]
    assert patches[0, 1, P * P] == images[0, 1, 0, P]


@pytest.mark.parametrize("B, C, H, W, P", [(2, 3, 8, 8, 4), (1, 1, 12, 8, 4), (2, 3, 6, 15, 3)])
def test_linear_on_patches_equals_strided_conv_and_patch_embedding(B, C, H, W, P):
    torch.manual_seed(0)
    D = 5
    images = torch.randn(B, C, H, W)
    conv = nn.Conv2d(C, D, kernel_size=P, stride=P)
    with torch.no_grad():
        expected = conv(images).flatten(2).transpose(1, 2)  # (B, N, D), row-major
        linear_out = patchify(images, P) @ conv.weight.reshape(D, C * P * P).T + conv.bias
        embed = PatchEmbedding((H, W), P, C, D)
        embed.proj.load_state_dict(conv.state_dict())
        tokens = embed(images)
    N = (H // P) * (W // P)
    assert tokens.shape == (B, N, D)
    assert embed.num_patches == N and embed.grid_size == (H // P, W // P)
    torch.testing.assert_close(linear_out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tokens, expected, atol=1e-5, rtol=1e-5)


def test_patch_embedding_has_a_strided_conv_named_proj():
    embed = PatchEmbedding(32, 8, 3, 16)
    assert isinstance(embed.proj, nn.Conv2d)
    assert embed.proj.kernel_size == (8, 8) and embed.proj.stride == (8, 8)
    assert set(dict(embed.named_parameters())) == {"proj.weight", "proj.bias"}


# ---- clear errors ------------------------------------------------------------------------


def test_patchify_rejects_side_not_divisible_by_patch_size():
    with pytest.raises(ValueError, match=r"10x12 is not divisible by the patch size 4"):
        patchify(torch.zeros(1, 3, 10, 12), 4)


def test_patchify_rejects_3d_input_with_unsqueeze_hint():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\).*3-D.*unsqueeze\(0\)"):
        patchify(torch.zeros(3, 8, 8), 4)


def test_patch_embedding_rejects_wrong_channel_count():
    embed = PatchEmbedding(8, 4, 3, 6)
    with pytest.raises(ValueError, match=r"expected 3 channels.*got 1 channels") as info:
        embed(torch.zeros(2, 1, 8, 8))
    assert "channels-last" not in str(info.value)


def test_patch_embedding_hints_at_channels_last():
    embed = PatchEmbedding(8, 4, 3, 6)
    with pytest.raises(ValueError, match=r"expected 3 channels.*channels-last.*permute\(0, 3, 1, 2\)"):
        embed(torch.zeros(2, 8, 8, 3))


def test_patch_embedding_rejects_other_image_size():
    embed = PatchEmbedding(32, 4, 3, 6)
    with pytest.raises(ValueError, match=r"expected 32x32 images.*got 64x48"):
        embed(torch.zeros(1, 3, 64, 48))


def test_patch_embedding_rejects_image_size_not_divisible():
    with pytest.raises(ValueError, match=r"30x30 is not divisible by the patch size 4"):
        PatchEmbedding(30, 4, 3, 6)


def test_unpatchify_rejects_wrong_number_of_patches():
    patches = patchify(torch.zeros(1, 3, 8, 8), 4)  # N = 4
    with pytest.raises(ValueError, match=r"N=16.*got \(1, 4, 48\)"):
        unpatchify(patches, 4, 16)


def test_unpatchify_rejects_patch_width_not_a_multiple_of_p_squared():
    with pytest.raises(ValueError, match=r"got \(1, 4, 47\)"):
        unpatchify(torch.zeros(1, 4, 47), 4, 8)


# ---- bad arguments: a clear error that names the argument ---------------------------------


def test_wrong_type_error_is_both_a_type_error_and_a_value_error():
    assert issubclass(WrongTypeError, TypeError) and issubclass(WrongTypeError, ValueError)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (
            dict(image_size="88"),
            r"image_size must be a whole number \(one side\) or a pair \(H, W\) of them, got '88' \(str\)",
        ),
        (dict(image_size=0), r"image_size must be a whole number, at least 1, got 0"),
        (dict(image_size=-32), r"image_size must be .* at least 1, got -32"),
        (dict(image_size=(32, 32, 3)), r"image_size must be one side or a pair \(H, W\), got \(32, 32, 3\)"),
        (dict(image_size=(32.0, 32)), r"image_size\[0\] must be a whole number, .* got 32.0 \(float\)"),
        (dict(patch_size=0), r"patch_size must be a whole number, at least 1, got 0"),
        (dict(patch_size=-4), r"patch_size must be .* got -4"),
        (dict(patch_size=4.0), r"patch_size must be .* got 4.0 \(float\): use patch_size=4"),
        (dict(patch_size=True), r"patch_size must be .* got True \(bool\)"),
        (dict(in_channels=0), r"in_channels must be .* got 0"),
        (dict(embed_dim=-8), r"embed_dim must be .* got -8"),
        (dict(embed_dim="8"), r"embed_dim must be .* got '8' \(str\)"),
    ],
)
def test_patch_embedding_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError, match=words):
        PatchEmbedding(**{**dict(image_size=32, patch_size=4, in_channels=3, embed_dim=8), **kwargs})


@pytest.mark.parametrize("size", ["48", 0, -4, (48, 0), 4.5])
def test_set_image_size_rejects_a_size_that_is_no_size(size):
    embed = PatchEmbedding(32, 4, 3, 8)
    with pytest.raises(ValueError, match=r"image_size"):
        embed.set_image_size(size)
    assert embed.image_size == (32, 32) and embed.num_patches == 64  # unchanged


@pytest.mark.parametrize("patch_size, words", [(0, r"at least 1, got 0"), (-2, r"got -2"), (2.0, r"got 2.0 \(float\)")])
def test_patchify_and_unpatchify_name_a_bad_patch_size(patch_size, words):
    with pytest.raises(ValueError, match=r"patch_size must be a whole number, .*" + words):
        patchify(torch.zeros(1, 3, 8, 8), patch_size)
    with pytest.raises(ValueError, match=r"patch_size must be a whole number, .*" + words):
        unpatchify(torch.zeros(1, 4, 48), patch_size, 8)


def test_unpatchify_rejects_a_bad_image_size_and_what_is_no_tensor():
    with pytest.raises(ValueError, match=r"image_size must be .* got -8"):
        unpatchify(torch.zeros(1, 4, 48), 4, -8)
    with pytest.raises(TypeError, match=r"expected patches as a torch.Tensor .* got list"):
        unpatchify([[0.0]], 4, 8)
    with pytest.raises(ValueError, match=r"got \(1, 4, 0\)"):  # C = 0: no channel
        unpatchify(torch.zeros(1, 4, 0), 4, 8)


def test_patchify_explains_an_image_smaller_than_a_patch_and_an_empty_image():
    with pytest.raises(
        ValueError, match=r"8x8 is not divisible by the patch size 16; the image is smaller than one 16x16"
    ):
        patchify(torch.zeros(1, 3, 8, 8), 16)
    with pytest.raises(ValueError, match=r"at least one channel and pixel, got shape \(1, 3, 0, 0\)"):
        patchify(torch.zeros(1, 3, 0, 0), 4)
    with pytest.raises(TypeError, match=r"images as a torch.Tensor .* got ndarray"):
        patchify(torch.zeros(1, 3, 8, 8).numpy(), 4)


def test_patchify_is_a_pure_reshape_for_any_dtype():
    # patchify and unpatchify only move numbers: 0-255 pixels and boolean masks are cut the same way
    torch.manual_seed(0)
    pixels = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    patches = patchify(pixels, 4)
    assert patches.dtype == torch.uint8
    assert torch.equal(patches.float(), patchify(pixels.float(), 4))
    assert torch.equal(unpatchify(patches, 4, 8), pixels)
    masks = pixels > 127
    assert torch.equal(patchify(masks, 4), patchify(pixels, 4) > 127)


@pytest.mark.parametrize(
    "dtype, words",
    [
        (torch.uint8, r"got torch.uint8; convert with `images.float\(\)` \(and divide by 255"),
        (torch.int64, r"got torch.int64; convert with `images.float\(\)`"),
        (torch.float64, r"got torch.float64; convert with `images.float\(\)`$"),
        (torch.float16, r"got torch.float16; convert with `images.float\(\)`$"),
    ],
)
def test_patch_embedding_names_the_dtype_it_needs(dtype, words):
    embed = PatchEmbedding(8, 4, 3, 6)
    with pytest.raises(ValueError, match=r"expected images of dtype torch.float32 .*" + words):
        embed(torch.zeros(2, 3, 8, 8).to(dtype))


def test_patch_embedding_follows_the_dtype_of_its_weights():
    embed = PatchEmbedding(8, 4, 3, 6).double()
    assert embed(torch.zeros(2, 3, 8, 8, dtype=torch.float64)).dtype == torch.float64
    with pytest.raises(ValueError, match=r"expected images of dtype torch.float64 .*convert with `images.double\(\)`"):
        embed(torch.zeros(2, 3, 8, 8))


def test_patch_embedding_names_a_device_mismatch():
    with torch.device("meta"):
        embed = PatchEmbedding(8, 4, 3, 6)  # weights on another device than the images
    with pytest.raises(ValueError, match=r"images are on cpu but the model is on meta; move them with"):
        embed(torch.zeros(2, 3, 8, 8))


@pytest.mark.parametrize("old, new", [(4, 4), (4, 6), (4, 8), (8, 12), (3, 7)])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_flexivit_resize_keeps_every_token(old, new, mode):
    """FlexiViT's promise: a patch resized to the new size, through the resized kernel, gives the
    original kernel's token, <R x, w_new> = <x, w> (for a larger patch: R has full column rank)."""
    torch.manual_seed(0)
    weight = torch.randn(6, 3, old, old, dtype=torch.float64)
    patches = torch.randn(10, 3, old, old, dtype=torch.float64)
    resized_weight = resize_patch_embed(weight, new, mode)
    assert resized_weight.shape == (6, 3, new, new)
    tokens = torch.einsum("dcij,ncij->nd", weight, patches)
    again = torch.einsum("dcij,ncij->nd", resized_weight, resize_patches(patches, new, mode))
    torch.testing.assert_close(again, tokens, rtol=1e-10, atol=1e-10)
    # in float32, to float32 rounding
    w32, p32 = weight.float(), patches.float()
    got = torch.einsum("dcij,ncij->nd", resize_patch_embed(w32, new, mode), resize_patches(p32, new, mode))
    torch.testing.assert_close(got, tokens.float(), rtol=1e-5, atol=1e-5)


def test_the_resize_matrix_is_torchs_interpolation():
    torch.manual_seed(0)
    patch = torch.randn(2, 3, 5, 5)
    expected = F.interpolate(patch, size=(7, 7), mode="bilinear", align_corners=False, antialias=False)
    torch.testing.assert_close(resize_patches(patch, 7), expected)


def test_a_model_with_resized_patches_sees_resized_images_as_before():
    """Through a whole patch embedding: images whose every patch is resized from 4 to 8 pixels,
    embedded with the resized kernel, give the same tokens."""
    torch.manual_seed(0)
    embed = PatchEmbedding(16, 4, 3, 12)
    images = torch.randn(2, 3, 16, 16)
    patches = images.reshape(2, 3, 4, 4, 4, 4).permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, 4, 4)
    bigger = resize_patches(patches, 8).permute(0, 3, 1, 4, 2, 5).reshape(2, 3, 32, 32)  # each patch now 8 x 8
    resized = PatchEmbedding(32, 8, 3, 12)
    with torch.no_grad():
        resized.proj.weight.copy_(resize_patch_embed(embed.proj.weight, 8))
        resized.proj.bias.copy_(embed.proj.bias)
        torch.testing.assert_close(resized(bigger), embed(images), rtol=1e-5, atol=1e-5)


def test_resize_patch_embed_refuses_what_is_no_kernel():
    with pytest.raises(ValueError, match=r"expected a kernel shaped \(D, C, P, P\)"):
        resize_patch_embed(torch.randn(4, 3, 4, 5), 6)
    with pytest.raises(ValueError, match="mode must be"):
        resize_patch_embed(torch.randn(4, 3, 4, 4), 6, mode="area")
