"""Lesson 1: cutting an image into patches, and the patch embedding that turns them into tokens.

It also holds the argument checks that every later module of the library shares (this module is
the first in the data flow, so all of them may import it): a wrong type, size or dtype raises an
error that names the argument, what was expected and what came.
"""

import math
import numbers
import operator

import torch
from torch import nn


class WrongTypeError(TypeError, ValueError):
    """An argument of the wrong type. Also a ValueError (as NumPy's AxisError is also an
    IndexError), so that `except ValueError` catches every bad input the library refuses."""


def check_whole(value, name: str, minimum: int = 1) -> int:
    """`value` as a Python int; an error naming `name` unless it is a whole number >= minimum.

    Python, NumPy and one-element torch integers pass; bools, floats (even 4.0) and strings do not.
    """
    expected = f"{name} must be a whole number (an int) >= {minimum}"
    if isinstance(value, bool):
        raise WrongTypeError(f"{expected}, got the bool {value!r}")
    try:
        whole = operator.index(value)
    except TypeError:
        hint = f" (use {name}={int(value)})" if isinstance(value, float) and value.is_integer() else ""
        raise WrongTypeError(f"{expected}, got {value!r} of type {type(value).__name__}{hint}") from None
    if whole < minimum:
        raise ValueError(f"{expected}, got {whole}")
    return whole


def _as_real(value, name: str, expected: str) -> float:
    """`value` as a float, or a WrongTypeError saying `name` must be `expected`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongTypeError(f"{name} must be {expected}, got {value!r} of type {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int too big for a float
        return math.inf


def check_positive(value, name: str) -> float:
    """`value` as a float; an error naming `name` unless it is a finite number > 0 (no NaN)."""
    number = _as_real(value, name, "a finite number > 0")
    if not 0 < number < math.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def check_probability(value, name: str) -> float:
    """`value` as a float; an error naming `name` unless it is a probability in [0, 1) (no NaN)."""
    number = _as_real(value, name, "a probability in [0, 1)")
    if not 0 <= number < 1:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}")
    return number


def check_flag(value, name: str) -> bool:
    """`value` itself; an error naming `name` unless it is True or False (not 'no', not 0)."""
    if not isinstance(value, bool):
        raise WrongTypeError(f"{name} must be True or False, got {value!r} of type {type(value).__name__}")
    return value


def check_tensor(value, name: str, shape: str, ndim: int | None = None) -> None:
    """Raise unless `value` is a torch.Tensor (with `ndim` axes, if given); `shape` describes the
    expected layout in the message, e.g. "(B, N, D)"."""
    if not isinstance(value, torch.Tensor):
        raise WrongTypeError(f"expected {name} as a torch.Tensor shaped {shape}, got {type(value).__name__}")
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"expected {name} shaped {shape}, got a {value.ndim}-D tensor of shape {tuple(value.shape)}")


CONVERSIONS = {torch.float32: ".float()", torch.float64: ".double()", torch.float16: ".half()"}


def check_dtype(tensor: torch.Tensor, name: str, dtype: torch.dtype | None = None) -> None:
    """Raise unless `tensor` holds floating-point numbers (of `dtype`, if given: the dtype of the
    weights it meets; under autocast any floating dtype passes, autocast converts it)."""
    if tensor.is_floating_point() and (
        dtype is None or tensor.dtype == dtype or torch.is_autocast_enabled(tensor.device.type)
    ):
        return
    wanted = dtype if dtype is not None else torch.float32
    convert = CONVERSIONS.get(wanted, f".to({wanted})")
    why = " (the dtype of the model's weights)" if dtype is not None else ""
    pixels = (
        "" if tensor.is_floating_point() or tensor.is_complex() else " (and divide by 255 if they are 0-255 pixels)"
    )
    raise ValueError(
        f"expected {name} of dtype {wanted}{why}, got {tensor.dtype}; convert with `{name}{convert}`{pixels}"
    )


def check_device(tensor: torch.Tensor, name: str, weight: torch.Tensor) -> None:
    """Raise unless `tensor` sits on the device of the module weight it meets."""
    if tensor.device != weight.device:
        raise ValueError(
            f"{name} are on {tensor.device} but the model is on {weight.device}; "
            f"move them with `{name}.to({str(weight.device)!r})`"
        )


def to_2tuple(size, name: str = "size") -> tuple[int, int]:
    """An image or grid size given as one side (square) or as (H, W), always returned as (H, W) ints;
    an error naming `name` unless each side is a whole number >= 1."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"{name} must be one side or a pair (H, W), got {size!r} with {len(size)} entries")
        return (check_whole(size[0], f"{name}[0]"), check_whole(size[1], f"{name}[1]"))
    if isinstance(size, str) or not hasattr(size, "__index__"):
        raise WrongTypeError(
            f"{name} must be a whole number (one side) or a pair (H, W) of them, got {size!r} of type "
            f"{type(size).__name__}"
        )
    side = check_whole(size, name)
    return (side, side)


def check_image_size(image_size: int | tuple[int, int], patch_size: int) -> tuple[int, int]:
    """The (H, W) of `image_size`; an error unless both sides are whole multiples of patch_size."""
    height, width = to_2tuple(image_size, "image_size")
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by the patch size {patch_size}")
    return height, width


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
        raise WrongTypeError(f"expected images as a torch.Tensor (B, C, H, W), got {type(images).__name__}")
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
        the patches equals a Conv2d(kernel_size=P, stride=P) whose weight is reshaped (D, C*P*P).
    """
    P = check_whole(patch_size, "patch_size")
    check_images(images, P)
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
        check_images(images, self.patch_size, self.in_channels, self.image_size)
        check_dtype(images, "images", self.proj.weight.dtype)
        check_device(images, "images", self.proj.weight)
        x = self.proj(images)  # (B, D, rows, cols)
        return x.flatten(2).transpose(1, 2)  # (B, N, D)

    def extra_repr(self) -> str:
        return f"image_size={self.image_size}, patch_size={self.patch_size}, num_patches={self.num_patches}"
