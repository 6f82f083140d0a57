"""Lesson 1: cutting an image into patches, and the patch embedding that turns them into tokens.

It also holds the checks of image sizes and image batches against a patch size, which the later
modules share; the generic argument checks live in `utils.validation`.
"""

import torch
import torch.nn.functional as F
from torch import nn

from utils.validation import WrongTypeError, check_device, check_dtype, check_tensor, check_whole, describe


def to_2tuple(size, name: str = "size") -> tuple[int, int]:
    """An image or grid size given as one side (square) or as (H, W), always returned as (H, W) ints;
    an error naming `name` unless each side is a whole number >= 1."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"{name} must be one side or a pair (H, W), got {size!r} with {len(size)} entries")
        return (check_whole(size[0], f"{name}[0]"), check_whole(size[1], f"{name}[1]"))
    if isinstance(size, str) or not hasattr(size, "__index__"):
        raise WrongTypeError(f"{name} must be a whole number (one side) or a pair (H, W) of them, got {describe(size)}")
    side = check_whole(size, name)
    return (side, side)


def check_image_size(image_size: int | tuple[int, int], patch_size: int) -> tuple[int, int]:
    """The (H, W) of `image_size`; an error unless both sides are whole multiples of patch_size."""
    height, width = to_2tuple(image_size, "image_size")
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by the patch size {patch_size}")
    return height, width


def check_images_fit(
    images: torch.Tensor,
    patch_size: int,
    in_channels: int | None = None,
    image_size: int | tuple[int, int] | None = None,
) -> None:
    """Raise a ValueError that names the mismatch unless `images` is a (B, C, H, W) batch that a
    model (or patchify) can cut: sides that are multiples of patch_size, and the model's channels
    and image size.

    Args:
        images: the batch to check, expected (B, C, H, W).
        patch_size: H and W must be multiples of it.
        in_channels: the C the model was built for, if it matters.
        image_size: the (H, W) the model was built for, if it matters.
    """
    check_tensor(images, "images", "(B, C, H, W)")
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
    if min(channels, height, width) == 0:
        raise ValueError(f"expected images with at least one channel and pixel, got shape {tuple(images.shape)}")
    if height % patch_size or width % patch_size:
        if height < patch_size or width < patch_size:
            advice = f"the image is smaller than one {patch_size}x{patch_size} patch"
        else:
            advice = (
                f"crop or resize to a multiple of {patch_size} "
                f"(e.g. {height // patch_size * patch_size}x{width // patch_size * patch_size})"
            )
        raise ValueError(f"image size {height}x{width} is not divisible by the patch size {patch_size}; {advice}")
    if image_size is not None and (height, width) != to_2tuple(image_size):
        expected_h, expected_w = to_2tuple(image_size)
        raise ValueError(
            f"expected {expected_h}x{expected_w} images (the size the model was built for), "
            f"got {height}x{width}; resize the images, or call "
            f"set_image_size(({height}, {width})) on the model to resize its position table"
        )


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut images into non-overlapping P x P patches and flatten each one.

    A pure reshape, so any dtype works: float images, 0-255 uint8 pixels or boolean masks are
    cut the same way and keep their dtype.

    Args:
        images: (B, C, H, W), with H and W multiples of patch_size.
        patch_size: the side P of a square patch.
    Returns:
        patches (B, N, C*P*P) with N = (H/P) * (W/P) in row-major order (left to right,
        then top to bottom); each patch flattened in (C, P, P) order, so that a Linear on
        the patches equals a Conv2d(kernel_size=P, stride=P) whose weight is reshaped (D, C*P*P):
        the conv's D kernels, flattened, are the rows of Linear.weight, i.e. the columns of the
        paper's E = Linear.weight.T, of shape (C*P*P, D).
    """
    P = check_whole(patch_size, "patch_size")
    check_images_fit(images, P)
    B, C, H, W = images.shape
    grid = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, rows, P, cols, P)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, P, P)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)  # (B, N, C*P*P)


def unpatchify(patches: torch.Tensor, patch_size: int, image_size: int | tuple[int, int]) -> torch.Tensor:
    """Put patches from `patchify` back into images; the exact inverse (any dtype, like patchify).

    Args:
        patches: (B, N, C*P*P), row-major, each patch in (C, P, P) order.
        patch_size: the side P of a square patch.
        image_size: the (H, W) (or one side, if square) of the images they came from.
    Returns:
        images (B, C, H, W).
    """
    P = check_whole(patch_size, "patch_size")
    H, W = check_image_size(image_size, P)
    rows, cols = H // P, W // P
    check_tensor(patches, "patches", f"(B, N={rows * cols}, C*{P}*{P})")
    if patches.ndim != 3 or patches.shape[1] != rows * cols or patches.shape[2] % (P * P) or patches.shape[2] == 0:
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

    This is eq. 1's x_p E of the ViT paper: E, of shape (C*P*P, D), is
    proj.weight.reshape(D, C*P*P).T, so the D kernels (C, P, P), flattened, are its columns.

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
        self.patch_size = check_whole(patch_size, "patch_size")
        self.in_channels = check_whole(in_channels, "in_channels")
        self.embed_dim = check_whole(embed_dim, "embed_dim")
        self.set_image_size(image_size)
        # A kernel of P with a stride of P sees each patch exactly once: a Linear on every patch.
        self.proj = nn.Conv2d(self.in_channels, self.embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def set_image_size(self, image_size: int | tuple[int, int]) -> None:
        """Accept images of another size from now on (the position table must be resized too)."""
        height, width = check_image_size(image_size, self.patch_size)
        self.image_size = (height, width)
        self.grid_size = (height // self.patch_size, width // self.patch_size)  # (rows, cols)
        self.num_patches = self.grid_size[0] * self.grid_size[1]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) float images (the dtype and device of the weights) -> (B, N, D) patch tokens
        in row-major order."""
        check_images_fit(images, self.patch_size, self.in_channels, self.image_size)
        check_dtype(images, "images", self.proj.weight.dtype)
        check_device(images, "images", self.proj.weight)
        x = self.proj(images)  # (B, D, rows, cols)
        return x.flatten(2).transpose(1, 2)  # (B, N, D)

    def extra_repr(self) -> str:
        return f"image_size={self.image_size}, patch_size={self.patch_size}, num_patches={self.num_patches}"


def patch_resize_matrix(old_size: int, new_size: int, mode: str = "bilinear") -> torch.Tensor:
    """The (new*new, old*old) float64 matrix R of resizing one old x old patch to new x new pixels:
    R @ patch.flatten() == F.interpolate(patch, (new, new), mode, align_corners=False,
    antialias=False).flatten(), built by resizing each basis patch (each channel alike)."""
    old, new = check_whole(old_size, "old_size"), check_whole(new_size, "new_size")
    if mode not in ("bilinear", "bicubic", "nearest"):
        raise ValueError(f"mode must be 'bilinear', 'bicubic' or 'nearest', got {mode!r}")
    basis = torch.eye(old * old, dtype=torch.float64).reshape(old * old, 1, old, old)  # one patch per pixel
    extra = {} if mode == "nearest" else {"align_corners": False, "antialias": False}
    resized = F.interpolate(basis, size=(new, new), mode=mode, **extra)  # (old*old, 1, new, new)
    return resized.reshape(old * old, new * new).T  # (new*new, old*old)


def resize_patches(patches: torch.Tensor, new_size: int, mode: str = "bilinear") -> torch.Tensor:
    """(..., C, P, P) patches -> (..., C, new, new), each resized on its own by patch_resize_matrix's R."""
    check_tensor(patches, "patches", "(..., C, P, P)")
    P = patches.shape[-1]
    if patches.ndim < 3 or patches.shape[-2] != P:
        raise ValueError(f"expected square patches shaped (..., C, P, P), got {tuple(patches.shape)}")
    R = patch_resize_matrix(P, new_size, mode).to(patches.dtype)  # (new*new, P*P)
    flat = patches.reshape(*patches.shape[:-2], P * P) @ R.T  # (..., C, new*new)
    return flat.reshape(*patches.shape[:-2], new_size, new_size)


def resize_patch_embed(weight: torch.Tensor, new_patch_size: int, mode: str = "bilinear") -> torch.Tensor:
    """FlexiViT's pseudo-inverse resize of a patch-embedding kernel (Beyer et al. 2023, "FlexiViT: One
    Model for All Patch Sizes", eq. 4; timm's resample_patch_embed): the (D, C, P, P) kernel w becomes
    the (D, C, Q, Q) kernel pinv(R^T) w, R the resize of a patch from P to Q pixels (patch_resize_matrix).

    Its promise: for Q >= P, a patch x resized to Q x Q and embedded with the new kernel gives the
    token the old kernel gives x, <R x, w_new> = <x, w>, for every x (R^T pinv(R^T) = I when R has
    full column rank). For Q < P no kernel can keep every token; this one keeps them in the least-
    squares sense. The bias is unchanged. Computed in float64, returned in the weight's dtype.

    Args:
        weight: (D, C, P, P), e.g. model.patch_embed.proj.weight.
        new_patch_size: Q, the new patch side.
        mode: the resize the images will see: "bilinear" (default), "bicubic" or "nearest".
    Returns:
        (D, C, Q, Q).
    """
    check_tensor(weight, "weight", "(D, C, P, P)")
    if weight.ndim != 4 or weight.shape[-1] != weight.shape[-2]:
        raise ValueError(f"expected a kernel shaped (D, C, P, P), got {tuple(weight.shape)}")
    D, C, P, _ = weight.shape
    Q = check_whole(new_patch_size, "new_patch_size")
    R = patch_resize_matrix(P, Q, mode)  # (Q*Q, P*P)
    inverse = torch.linalg.pinv(R.T)  # (Q*Q, P*P)
    resized = weight.detach().to(torch.float64).reshape(D * C, P * P) @ inverse.T  # (D*C, Q*Q)
    return resized.reshape(D, C, Q, Q).to(weight.dtype)
