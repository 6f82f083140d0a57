"""Lesson 13's pictures: an image with its hidden patches painted over, the MAE's reconstructions,
and the arms of the experiment, every seed a dot."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.patches import patchify, unpatchify
from utils.validation import check_tensor
from utils.viz.core import DPI, check_image_batch, check_not_empty, to_numpy_image, with_alt_text

HIDDEN = (0.25, 0.45, 0.85)  # the colour of a hidden patch: blue, apart from the grey digits


def _check_mask(mask, images: torch.Tensor, patch_size: int) -> torch.Tensor:
    N = (images.shape[-2] // patch_size) * (images.shape[-1] // patch_size)
    mask = check_tensor(mask, f"mask (B, N={N})", ndim=2, nonempty=True)
    if tuple(mask.shape) != (len(images), N):
        raise ValueError(f"mask must be (B, N) = {(len(images), N)} for these images, got {tuple(mask.shape)}")
    return mask.detach().float()


def painted(images: torch.Tensor, mask: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, 3, H, W): the images in colour with every hidden patch (mask 1.0) painted HIDDEN."""
    images = check_image_batch(images).detach().float()
    mask = _check_mask(mask, images, patch_size)
    rgb = images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images  # (B, 3, H, W)
    patches = patchify(rgb, patch_size)  # (B, N, 3*P*P)
    colour = torch.tensor(HIDDEN).repeat_interleave(patch_size * patch_size)  # (3*P*P,) in (C, P, P) order
    patches = torch.where(mask[..., None] > 0.5, colour, patches)
    return unpatchify(patches, patch_size, tuple(images.shape[-2:]))


def filled(images: torch.Tensor, prediction: torch.Tensor, mask: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W): the visible patches as they are, the hidden ones the MAE's prediction (clipped
    to [0, 1]), the way MAE's paper shows its reconstructions."""
    images = check_image_batch(images).detach().float()
    mask = _check_mask(mask, images, patch_size)
    target = patchify(images, patch_size)  # (B, N, C*P*P)
    check_tensor(prediction, f"prediction {tuple(target.shape)}", ndim=3)
    if prediction.shape != target.shape:
        raise ValueError(
            f"prediction must be {tuple(target.shape)} like patchify(images), got {tuple(prediction.shape)}"
        )
    patches = torch.where(mask[..., None] > 0.5, prediction.detach().clamp(0, 1), target)
    return unpatchify(patches, patch_size, tuple(images.shape[-2:]))


def plot_reconstructions(
    images: torch.Tensor, prediction: torch.Tensor, mask: torch.Tensor, patch_size: int, size: float = 1.1
) -> plt.Figure:
    """Three rows, one column per image: the image, what the encoder sees (hidden patches blue),
    and the reconstruction (visible patches kept, hidden ones predicted). The title gives the mean
    squared error on the hidden patches."""
    shown = painted(images, mask, patch_size)
    rebuilt = filled(images, prediction, mask, patch_size)
    target = patchify(images.float(), patch_size)
    errors = ((prediction.detach() - target) ** 2).mean(-1)  # (B, N)
    loss = ((errors * mask).sum() / mask.sum()).item()
    count = len(images)
    fig, axes = plt.subplots(3, count, figsize=(size * count, size * 3.3), dpi=DPI, squeeze=False)
    for column in range(count):
        for row, picture in enumerate((images[column], shown[column], rebuilt[column])):
            ax = axes[row, column]
            ax.imshow(to_numpy_image(picture), cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
    for row, name in enumerate(("image", "visible", "rebuilt")):
        axes[row, 0].set_ylabel(name)
    hidden = int(mask[0].sum().item())
    fig.suptitle(f"{hidden} of {mask.shape[1]} patches hidden; MSE on them {loss:.3f}")
    fig.tight_layout()
    plt.close(fig)
    return with_alt_text(
        fig,
        f"Three rows of {count} digits: the image, the image with {hidden} of {mask.shape[1]} patches hidden "
        f"(blue), and the masked autoencoder's reconstruction; mean squared error on the hidden patches "
        f"{loss:.3f}",
    )


def plot_arms(values: dict, key: str = "test accuracy", size: float = 4.5) -> plt.Figure:
    """One row per arm: every seed a dot, the mean a bar. values: arm label -> the seeds' accuracies
    (fractions)."""
    check_not_empty(values, "arm")
    fig, ax = plt.subplots(figsize=(size * 1.4, 0.45 * size), dpi=DPI)
    words = []
    labels = list(values)
    for row, label in enumerate(labels):
        seeds = np.asarray(values[label], dtype=float) * 100
        if seeds.ndim != 1 or not len(seeds):
            raise ValueError(f"values[{label!r}] must be the seeds' accuracies, got {values[label]!r}")
        ax.barh(row, seeds.mean(), color="0.85")
        ax.plot(seeds, np.full(len(seeds), row), "o", color="C0")
        words.append(f"{label} {seeds.mean():.1f} %")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(f"{key} (%), one dot per seed, bar = mean")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    plt.close(fig)
    return with_alt_text(fig, f"The {key} of each arm, a dot per seed and a bar at the mean: " + "; ".join(words))
