"""Lesson 1's pictures: an image, its patch grid, the patches pulled apart, the token sequence."""

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import patheffects

from utils.patches import check_image_size, patchify, to_2tuple
from utils.validation import check_tensor, check_whole
from utils.viz.core import DPI, check_image, to_numpy_image, with_alt_text


def _check_patch_size(image: torch.Tensor, patch_size: int) -> None:
    """A ValueError unless `image` (C, H, W) is a picture that `patch_size` cuts into whole patches."""
    check_image(image)
    check_whole(patch_size, "patch_size")
    check_image_size(tuple(image.shape[1:]), patch_size)


def show_image(image: torch.Tensor, title: str | None = None, size: float = 3.5) -> plt.Figure:
    """Draw one (C, H, W) image with its pixel axes."""
    check_image(image)
    fig, ax = plt.subplots(figsize=(size, size), dpi=DPI)
    ax.imshow(to_numpy_image(image), cmap="gray")
    ax.set_title(title or f"image {tuple(image.shape)}")
    C, H, W = image.shape
    colour = "colour" if C == 3 else "grey"
    channels = f"{C} channel{'s' * (C > 1)}"
    return with_alt_text(fig, f"A {colour} image, {H} px high and {W} px wide, {channels}, with pixel axes.")


def _draw_patch_grid(ax: plt.Axes, image: torch.Tensor, patch_size: int, numbers: bool, size: float) -> None:
    """Draw `image` on `ax` with white patch borders and, if asked, each patch's token index."""
    C, H, W = image.shape
    rows, cols = H // patch_size, W // patch_size
    ax.imshow(to_numpy_image(image), cmap="gray")
    for edge in range(0, W + 1, patch_size):
        ax.axvline(edge - 0.5, color="white", linewidth=0.8)
    for edge in range(0, H + 1, patch_size):
        ax.axhline(edge - 0.5, color="white", linewidth=0.8)
    if numbers:
        fontsize = max(4, min(9, int(size * 16 / max(rows, cols))))  # 7 pt for 14 x 14 at 6 in
        for index in range(rows * cols):
            row, col = divmod(index, cols)
            ax.text(
                col * patch_size + patch_size / 2 - 0.5,
                row * patch_size + patch_size / 2 - 0.5,
                str(index),
                ha="center",
                va="center",
                color="yellow",
                fontsize=fontsize,
                path_effects=[patheffects.withStroke(linewidth=1.5, foreground="black")],
            )
    ax.set_title(f"{rows} x {cols} = {rows * cols} patches of {patch_size} x {patch_size} px")


def show_patch_grid(image: torch.Tensor, patch_size: int, numbers: bool = True, size: float = 6.0) -> plt.Figure:
    """Draw an image with its patch grid, each patch labelled with its token index (row-major)."""
    _check_patch_size(image, patch_size)
    C, H, W = image.shape
    fig, ax = plt.subplots(figsize=(size, size * H / W), dpi=DPI)
    _draw_patch_grid(ax, image, patch_size, numbers, size)
    rows, cols = H // patch_size, W // patch_size
    numbered = f", each numbered from 0 at the top left to {rows * cols - 1}, row by row" if numbers else ""
    return with_alt_text(
        fig, f"The image cut by white lines into {rows} x {cols} = {rows * cols} patches of {patch_size} px{numbered}."
    )


def compare_patch_sizes(image: torch.Tensor, patch_sizes: list[int], size: float = 3.5) -> plt.Figure:
    """Draw the image's patch grid for each patch size, side by side."""
    if not isinstance(patch_sizes, (list, tuple)) or not patch_sizes:
        raise ValueError(f"expected a non-empty list of patch sizes, got {patch_sizes!r}")
    for patch_size in patch_sizes:
        _check_patch_size(image, patch_size)
    C, H, W = image.shape
    fig, axes = plt.subplots(1, len(patch_sizes), figsize=(size * len(patch_sizes), size * H / W), dpi=DPI)
    for ax, patch_size in zip(np.atleast_1d(axes), patch_sizes):
        _draw_patch_grid(ax, image, patch_size, numbers=False, size=size)
    fig.tight_layout()
    grids = "; ".join(f"{patch_size} px patches: {(H // patch_size) * (W // patch_size)}" for patch_size in patch_sizes)
    return with_alt_text(fig, f"The same image cut into patches of each size, side by side. {grids}.")


def show_patches(image: torch.Tensor, patch_size: int, gap: int = 2, size: float = 4.5) -> plt.Figure:
    """Draw the image pulled apart into its patches, a small gap between neighbours."""
    _check_patch_size(image, patch_size)
    check_whole(gap, "gap", minimum=0)
    image = image.float() / 255 if image.dtype == torch.uint8 else image  # the canvas is float, white = 1
    C, H, W = image.shape
    P = patch_size
    rows, cols = H // P, W // P
    patches = patchify(image.unsqueeze(0), P)[0].reshape(rows, cols, C, P, P)  # (rows, cols, C, P, P)
    canvas = torch.ones(C, rows * (P + gap) - gap, cols * (P + gap) - gap)  # white background
    for row in range(rows):
        for col in range(cols):
            top, left = row * (P + gap), col * (P + gap)
            canvas[:, top : top + P, left : left + P] = patches[row, col]
    fig, ax = plt.subplots(figsize=(size, size * H / W), dpi=DPI)
    ax.imshow(to_numpy_image(canvas), cmap="gray")
    ax.set_axis_off()
    ax.set_title(f"{rows * cols} patches, each {C} x {P} x {P}")
    return with_alt_text(
        fig,
        f"The image pulled apart into its {rows} x {cols} = {rows * cols} patches of {P} x {P} px, "
        "a white gap between them.",
    )


def show_token_sequence(patches: torch.Tensor, patch_size: int, count: int = 16, size: float = 9.0) -> plt.Figure:
    """Draw the first `count` patches as the sequence the Transformer reads, and the whole
    (N, C*P*P) token matrix, one row per token.

    Args:
        patches: (N, C*P*P) one image's patches from `patchify`.
    """
    N, CPP = check_tensor(patches, "one image's patches shaped (N, C*P*P)", ndim=2, nonempty=True).shape
    P = check_whole(patch_size, "patch_size")
    check_whole(count, "count")
    C = CPP // (P * P)
    if C * P * P != CPP or C not in (1, 3):
        raise ValueError(
            f"patches {tuple(patches.shape)} are not (N, C*P*P) with P = {P} and C = 1 or 3 "
            f"(C*P*P = {P * P} or {3 * P * P}): is patch_size the one they were cut with?"
        )
    count = min(count, N)
    fig = plt.figure(figsize=(size, size * 0.55), dpi=DPI)
    grid = fig.add_gridspec(2, count, height_ratios=[1, 3.2], hspace=0.45)
    for index in range(count):
        ax = fig.add_subplot(grid[0, index])
        ax.imshow(to_numpy_image(patches[index].reshape(C, P, P)), cmap="gray")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(str(index), fontsize=8)
    fig.text(0.5, 0.93, f"the first {count} of {N} tokens, in reading order", ha="center")
    ax = fig.add_subplot(grid[1, :])
    image = ax.imshow(patches.detach().cpu().numpy(), aspect="auto", cmap="viridis", interpolation="nearest")
    ax.set_xlabel(f"feature: {C} channels x {P} x {P} pixels = {CPP} numbers per token")
    ax.set_ylabel(f"token (0 .. {N - 1})")
    ax.set_title(f"the token sequence as a matrix: {N} x {CPP}")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    return with_alt_text(
        fig,
        f"Top: the first {count} patches as small pictures, numbered in reading order. Bottom: all {N} tokens as "
        f"a {N} x {CPP} matrix, one row per token, each row its {CPP} pixel values in colour.",
    )


def plot_token_counts(image_size: int | tuple[int, int], patch_sizes: list[int], size: float = 5.0) -> plt.Figure:
    """Bar chart (log scale) of tokens and attention-matrix entries for each patch size."""
    H, W = to_2tuple(image_size, "image_size")
    if not isinstance(patch_sizes, (list, tuple)) or not patch_sizes:
        raise ValueError(f"expected a non-empty list of patch sizes, got {patch_sizes!r}")
    for patch_size in patch_sizes:
        if check_whole(patch_size, "patch_size") > min(H, W):
            raise ValueError(f"patch_size {patch_size} is larger than the image ({H} x {W})")
    tokens = [(H // p) * (W // p) + 1 for p in patch_sizes]
    fig, ax = plt.subplots(figsize=(size, size * 0.6), dpi=DPI)
    positions = np.arange(len(patch_sizes))
    ax.bar(positions - 0.2, tokens, width=0.4, label="tokens T = N + 1")
    ax.bar(positions + 0.2, [t * t for t in tokens], width=0.4, label="attention entries T²")
    ax.set_yscale("log")
    ax.set_xticks(positions, [f"{p} px" for p in patch_sizes])
    ax.set_xlabel(f"patch size (image {H} x {W})")
    ax.legend()
    counts = "; ".join(f"{p} px: {t:,} tokens, {t * t:,} entries" for p, t in zip(patch_sizes, tokens))
    return with_alt_text(
        fig, f"Bars on a log scale: tokens T = N + 1 and attention entries T squared for each patch size. {counts}."
    )
