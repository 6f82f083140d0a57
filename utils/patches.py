"""Lesson 1: cutting an image into patches, and the patch embedding that turns them into tokens."""

import torch
from torch import nn


def to_2tuple(size: int | tuple[int, int]) -> tuple[int, int]:
    """An image size given as one side (square) or as (H, W), always returned as (H, W)."""
    if isinstance(size, int):
        return (size, size)
    height, width = size
    return (int(height), int(width))


def check_images(
    images: torch.Tensor,
    patch_size: int,
    in_channels: int | None = None,
    image_size: int | tuple[int, int] | None = None,
) -> None:
    """Raise a ValueError that names the mismatch unless `images` is (B, C, H, W) and fits.

    Args:
        images: the batch to check, expected (B, C, H, W).
        patch_size: H and W must be multiples of it.
        in_channels: the C the model was built for, if it matters.
        image_size: the (H, W) the model was built for, if it matters.
    """
    if not isinstance(images, torch.Tensor):
        raise ValueError(f"expected images as a torch.Tensor (B, C, H, W), got {type(images).__name__}")
    if images.ndim != 4:
        hint = " (add the batch axis: images.unsqueeze(0))" if images.ndim == 3 else ""
        raise ValueError(
            f"expected images shaped (B, C, H, W), got a {images.ndim}-D tensor of shape {tuple(images.shape)}{hint}"
        )
    _, channels, height, width = images.shape
    if in_channels is not None and channels != in_channels:
        hint = ""
        if images.shape[-1] == in_channels:
            hint = "; it looks channels-last (B, H, W, C): use images.permute(0, 3, 1, 2)"
        raise ValueError(
            f"expected {in_channels} channels, images shaped (B, {in_channels}, H, W), "
            f"got {channels} channels in shape {tuple(images.shape)}{hint}"
        )
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"image size {height}x{width} is not divisible by the patch size {patch_size}; "
            f"crop or resize to a multiple of {patch_size} "
            f"(e.g. {height // patch_size * patch_size}x{width // patch_size * patch_size})"
        )
    if image_size is not None and (height, width) != to_2tuple(image_size):
        expected_h, expected_w = to_2tuple(image_size)
        raise ValueError(
            f"expected {expected_h}x{expected_w} images (the size the model was built for), "
            f"got {height}x{width}; resize the images, or call "
            f"set_image_size(({height}, {width})) on the model to resize its position table"
        )


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping P x P patches and flatten each one.

    Args:
        images: (B, C, H, W), with H and W multiples of patch_size.
        patch_size: the side P of a square patch.
    Returns:
        patches (B, N, C*P*P) with N = (H/P) * (W/P) in row-major order (left to right,
        then top to bottom); each patch flattened in (C, P, P) order, so that a Linear on
        the patches equals a Conv2d(kernel_size=P, stride=P) whose weight is reshaped (D, C*P*P).
    """
    check_images(images, patch_size)
    B, C, H, W = images.shape
    P = patch_size
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, rows, P, cols, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P, P)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)  # (B, N, C*P*P)


def unpatchify(patches: torch.Tensor, patch_size: int, image_size: int | tuple[int, int]) -> torch.Tensor:
    """Put patches from `patchify` back into images; the exact inverse.

    Args:
        patches: (B, N, C*P*P), row-major, each patch in (C, P, P) order.
        patch_size: the side P of a square patch.
        image_size: the (H, W) (or one side, if square) of the images they came from.
    Returns:
        images (B, C, H, W).
    """
    H, W = to_2tuple(image_size)
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"image size {H}x{W} is not divisible by the patch size {P}")
    rows, cols = H // P, W // P
    if patches.ndim != 3 or patches.shape[1] != rows * cols or patches.shape[2] % (P * P):
        raise ValueError(
            f"expected patches shaped (B, N={rows * cols}, C*{P}*{P}) for {H}x{W} images, got {tuple(patches.shape)}"
        )
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    grid = patches.reshape(B, rows, cols, C, P, P)  # (B, rows, cols, C, P, P)
    grid = grid.permute(0, 3, 1, 4, 2, 5)  # (B, C, rows, P, cols, P)
    return grid.reshape(B, C, H, W)  # (B, C, H, W)


class PatchEmbedding(nn.Module):
    """Cut an image into patches and project each one to a D-wide token, in one strided Conv2d.

    Args:
        image_size: side (or (H, W)) of the images the model is built for.
        patch_size: side P of a square patch; must divide the image size.
        in_channels: C, 3 for RGB.
        embed_dim: D, the width of each token.
    """

    def __init__(
        self,
        image_size: int | tuple[int, int] = 224,
        patch_size: int = 16,
        in_channels: int = 3,
        embed_dim: int = 768,
    ):
        super().__init__()
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.embed_dim = embed_dim
        self.set_image_size(image_size)
        # A kernel of P with a stride of P sees each patch exactly once: a Linear on every patch.
        self.proj = nn.Conv2d(in_channels, embed_dim, kernel_size=patch_size, stride=patch_size)

    def set_image_size(self, image_size: int | tuple[int, int]) -> None:
        """Accept images of another size from now on (the position table must be resized too)."""
        height, width = to_2tuple(image_size)
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f"image size {height}x{width} is not divisible by the patch size {self.patch_size}")
        self.image_size = (height, width)
        self.grid_size = (height // self.patch_size, width // self.patch_size)  # (rows, cols)
        self.num_patches = self.grid_size[0] * self.grid_size[1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images -> (B, N, D) patch tokens in row-major order."""
        check_images(images, self.patch_size, self.in_channels, self.image_size)
        x = self.proj(images)  # (B, D, rows, cols)
        return x.flatten(2).transpose(1, 2)  # (B, N, D)

    def extra_repr(self) -> str:
        return f"image_size={self.image_size}, patch_size={self.patch_size}, num_patches={self.num_patches}"
