"""What every plot of the course shares: figure resolution, tensor-to-picture conversion, and the
checks of what only a plot is given (names, panels, pictures).

Every plotting function takes tensors (never notebook globals) and returns its matplotlib Figure.
Call it before a cell's prints, not as the cell's last line (IPython would draw it twice).
A plot given the wrong thing raises a ValueError (a TypeError for no tensor at all) that says
what it expected and what came, before it draws anything; a plotted tensor is checked with
`utils.validation.check_tensor(..., ndim=..., nonempty=True)`: nothing empty can be drawn.
"""

import numpy as np
import torch

from utils.validation import WrongTypeError, check_tensor

DPI = 80  # small figures keep the committed notebooks small


def check_names(names, count: int, what: str) -> list[str]:
    """`names` as a list if it holds exactly `count` entries ("expected {count} {what}")."""
    if isinstance(names, str) or not hasattr(names, "__len__"):
        raise WrongTypeError(f"expected {what} as a list, got a {type(names).__name__}")
    if len(names) != count:
        raise ValueError(f"expected {count} {what}, got {len(names)}")
    return list(names)


def check_not_empty(mapping, what: str) -> dict:
    """`mapping` as a dict if it is a non-empty dict ("expected at least one {what}")."""
    if not isinstance(mapping, dict):
        raise WrongTypeError(f"expected {what} as a dict {{name: tensor}}, got a {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"expected at least one {what}, got an empty dict")
    return mapping


def check_image(image, what: str = "one image shaped (C, H, W)") -> torch.Tensor:
    """`image` if it is one (C, H, W) picture, C = 1 (grey) or 3 (RGB), float in [0, 1] or uint8;
    else a ValueError that names the usual mix-up (a batch, channels last, 0 .. 255 floats)."""
    if isinstance(image, torch.Tensor) and image.ndim == 4:
        raise ValueError(f"expected {what}, got {tuple(image.shape)}: a batch; pick one image, images[0]")
    if isinstance(image, torch.Tensor) and image.ndim == 2:
        raise ValueError(f"expected {what}, got {tuple(image.shape)}: add the channel axis, image[None]")
    C, H, W = check_tensor(image, what, ndim=3, nonempty=True).shape
    if C not in (1, 3):
        hint = ": its channels are last; use image.permute(2, 0, 1)" if W in (1, 3) else ""
        raise ValueError(f"expected {what} with C = 1 (grey) or 3 (RGB), got {tuple(image.shape)}{hint}")
    return _check_pixels(image, what)


def check_image_batch(images, what: str = "images (B, C, H, W)") -> torch.Tensor:
    """`images` if it is a batch of at least one (C, H, W) picture, as check_image wants them."""
    if isinstance(images, torch.Tensor) and images.ndim == 3:
        raise ValueError(f"expected {what}, got {tuple(images.shape)}: one image; add the batch axis, images[None]")
    B, C, H, W = check_tensor(images, what, ndim=4, nonempty=True).shape
    if C not in (1, 3):
        hint = ": the channels are last; use images.permute(0, 3, 1, 2)" if W in (1, 3) else ""
        raise ValueError(f"expected {what} with C = 1 (grey) or 3 (RGB), got {tuple(images.shape)}{hint}")
    return _check_pixels(images, what)


def _check_pixels(images: torch.Tensor, what: str) -> torch.Tensor:
    """`images` if they hold floats in [0, 1] (a little outside is clipped when drawn) or uint8."""
    if images.dtype == torch.uint8:
        return images
    if not images.is_floating_point():
        raise ValueError(f"expected {what} of floats in [0, 1] (or uint8), got {images.dtype}")
    high = images.detach().max().item()
    if high > 1.5:
        raise ValueError(f"expected {what} in [0, 1], got values up to {high:g}: 0 .. 255 pixels? divide by 255")
    return images


def to_numpy_image(image: torch.Tensor) -> np.ndarray:
    """(C, H, W) tensor in [0, 1] (or uint8, 0 .. 255) -> (H, W, C) or (H, W) array for imshow;
    floats are clipped to [0, 1]."""
    check_image(image)
    image = image.detach().cpu()
    image = image.float() / 255 if image.dtype == torch.uint8 else image.float().clamp(0, 1)
    array = image.permute(1, 2, 0).numpy()  # (H, W, C)
    return array[..., 0] if array.shape[-1] == 1 else array
