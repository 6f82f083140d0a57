"""Lesson 2's pictures: token scales, a position table, its similarity grid (ViT paper, Fig. 7
centre), and the similarity maps before and after resizing the table to a new grid."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.embeddings import neighbour_similarity, pos_embed_similarity
from utils.patches import to_2tuple
from utils.validation import WrongTypeError, check_tensor, check_whole
from utils.viz.core import DPI, check_names, check_not_empty, to_numpy_image, with_alt_text


def check_pos_table(table, grid_size: int | tuple[int, int], num_prefix_tokens: int, name) -> torch.Tensor:
    """`table` if it is a position table (1, prefix + rows * cols, D) or (prefix + N, D) for the
    grid `grid_size`; else a ValueError that names the table (`name`) and its shape."""
    rows, cols = to_2tuple(grid_size, "grid_size")
    if not isinstance(table, torch.Tensor):
        raise WrongTypeError(f"table {name!r}: expected a torch.Tensor (1, T, D), got a {type(table).__name__}")
    shape = tuple(table.shape)
    if table.ndim not in (2, 3) or (table.ndim == 3 and shape[0] != 1) or shape[-1] == 0:
        raise ValueError(f"table {name!r}: expected a position table (1, T, D) or (T, D), got shape {shape}")
    if shape[-2] != num_prefix_tokens + rows * cols:
        raise ValueError(
            f"table {name!r}: expected {num_prefix_tokens} + {rows} x {cols} = "
            f"{num_prefix_tokens + rows * cols} entries, got shape {shape}"
        )
    return table


def _two_decimals(x: float) -> str:
    """x with two decimals, never "-0.00"."""
    return f"{round(x, 2) + 0.0:.2f}"


def _chosen_positions(side: int, count: int) -> list[int]:
    """`count` indices spread evenly over 0 .. side - 1, both ends included."""
    return sorted({round(x) for x in np.linspace(0, side - 1, min(count, side))})


def show_pos_similarity(
    similarities: dict[str, torch.Tensor],
    grid_size: int | tuple[int, int],
    panels: int = 7,
    size: float = 5.5,
) -> plt.Figure:
    """Small multiples of position similarity, like Fig. 7 (centre) of the ViT paper.

    For each table, the tile in row r, column c is the similarity of the position at patch (r, c)
    with every position, laid out on the patch grid. One shared colour scale per table.

    Args:
        similarities: {name: (N, N) cosine similarity} (e.g. from `pos_embed_similarity`).
        grid_size: patches per side (or (rows, cols)), N = rows * cols.
        panels: tiles per side; positions are spread evenly over the grid (all of them if
            the grid is no larger).
    """
    rows, cols = to_2tuple(grid_size, "grid_size")
    check_whole(panels, "panels")
    for name, similarity in check_not_empty(similarities, "similarity matrix (N, N)").items():
        check_tensor(similarity, f"similarity {name!r} (N, N)", ndim=2, nonempty=True)
    tile_rows, tile_cols = _chosen_positions(rows, panels), _chosen_positions(cols, panels)
    fig = plt.figure(figsize=(size * len(similarities), size * 1.1), dpi=DPI)
    subfigures = np.atleast_1d(fig.subfigures(1, len(similarities), wspace=0.05))
    for subfigure, (name, similarity) in zip(subfigures, similarities.items()):
        near, far = neighbour_similarity(similarity, (rows, cols))
        maps = similarity.detach().cpu().float().reshape(rows * cols, rows, cols).numpy()  # (N, rows, cols)
        low = float(maps.min())
        axes = subfigure.subplots(len(tile_rows), len(tile_cols), squeeze=False)
        for i, r in enumerate(tile_rows):
            for j, c in enumerate(tile_cols):
                ax = axes[i, j]
                image = ax.imshow(maps[r * cols + c], cmap="viridis", vmin=low, vmax=1.0)
                ax.set_xticks([])
                ax.set_yticks([])
                if i == len(tile_rows) - 1:
                    ax.set_xlabel(str(c), fontsize=8)
                if j == 0:
                    ax.set_ylabel(str(r), fontsize=8)
        subfigure.suptitle(f"{name}\nneighbours {_two_decimals(near)}, far apart {_two_decimals(far)}", fontsize=11)
        subfigure.supxlabel("input patch column", fontsize=9)
        subfigure.supylabel("input patch row", fontsize=9)
        subfigure.colorbar(image, ax=axes, fraction=0.04, pad=0.03, label="cosine similarity")
    tables = "; ".join(
        f"{name} {_two_decimals(near)} and {_two_decimals(far)}"
        for name, (near, far) in ((name, neighbour_similarity(s, (rows, cols))) for name, s in similarities.items())
    )
    return with_alt_text(
        fig,
        f"For each position table, a {len(tile_rows)} x {len(tile_cols)} grid of tiles: the tile at patch (r, c) of "
        f"the {rows} x {cols} grid shows the cosine similarity of that position to every other, brightest (1.0) at "
        f"itself. Mean similarity of neighbours (1 patch apart) and of far positions: {tables}.",
    )


def show_token_scales(vectors: dict[str, torch.Tensor], size: float = 6.0) -> plt.Figure:
    """Histogram of the length (L2 norm) of every vector in each set, on a log axis.

    Args:
        vectors: {name: (..., D)}: patch tokens, position tables, ...; one norm per D-wide row.
    """
    for name, t in check_not_empty(vectors, "set of vectors (..., D)").items():
        at_least_one_axis = max(getattr(t, "ndim", 1), 1)  # (..., D): any number of axes, at least one
        check_tensor(t, f"vectors {name!r} (..., D)", ndim=at_least_one_axis, nonempty=True)
    norms = {
        name: t.detach().cpu().float().reshape(-1, t.shape[-1]).norm(dim=-1).numpy()  # one per row
        for name, t in vectors.items()
    }
    for name, values in norms.items():
        if not (values > 0).all() or not np.isfinite(values).all():
            raise ValueError(f"vectors {name!r}: a log axis needs lengths > 0 (and finite), got {values.min():g}")
    every = np.concatenate(list(norms.values()))
    bins = np.geomspace(every.min() * 0.8, every.max() * 1.25, 60)
    fig, ax = plt.subplots(figsize=(size, size * 0.45), dpi=DPI)
    for name, values in norms.items():
        ax.hist(values, bins=bins, alpha=0.7, label=f"{name} (median {np.median(values):.2f})")
    ax.set_xscale("log")
    ax.set_xlabel("length of one D-wide vector (L2 norm, log scale)")
    ax.set_ylabel("count")
    ax.legend(fontsize=8)
    medians = "; ".join(f"{name}: median {np.median(values):.2f}" for name, values in norms.items())
    return with_alt_text(fig, f"Histograms, on a log axis, of the length of every vector in each set. {medians}.")


def show_pos_table(pos_embed: torch.Tensor, num_prefix_tokens: int = 1, size: float = 7.0) -> plt.Figure:
    """Draw a 2-D sin-cos position table as an (N, D) heat map, its two halves labelled.

    Args:
        pos_embed: (1, prefix + N, D) or (prefix + N, D); the prefix entries are left out.
    """
    check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
    if isinstance(pos_embed, torch.Tensor) and pos_embed.ndim == 2:
        pos_embed = pos_embed[None]  # (1, prefix + N, D)
    check_tensor(pos_embed, "pos_embed (1, prefix + N, D)", ndim=3, nonempty=True)
    if pos_embed.shape[0] != 1 or pos_embed.shape[1] <= num_prefix_tokens:
        raise ValueError(
            f"expected pos_embed (1, prefix + N, D): one table with N >= 1 positions after its "
            f"{num_prefix_tokens} prefix entries, got {tuple(pos_embed.shape)}"
        )
    table = pos_embed.detach().cpu().float().reshape(-1, pos_embed.shape[-1])[num_prefix_tokens:]  # (N, D)
    N, D = table.shape
    fig, ax = plt.subplots(figsize=(size, size * 0.5), dpi=DPI)
    image = ax.imshow(table.numpy(), aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.axvline(D / 2 - 0.5, color="black", linewidth=1.5)  # column code | row code
    for start, text in [(0, "column"), (D // 2, "row")]:
        ax.axvline(start + D / 4 - 0.5, color="gray", linewidth=0.8, linestyle="--")  # sin | cos
        for offset, part in [(0, "sin"), (D // 4, "cos")]:
            ax.text(start + offset + D / 8, -1, f"{text}: {part}", ha="center", va="bottom", fontsize=9)
    ax.set_xlabel(f"channel (0 .. {D - 1})")
    ax.set_ylabel(f"patch position (0 .. {N - 1}, row-major)")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    return with_alt_text(
        fig,
        f"The position table as a heat map, {N} positions (rows) by {D} channels (columns), blue -1 to red +1: "
        f"channels 0-{D // 2 - 1} code the column (sin, then cos), channels {D // 2}-{D - 1} the row.",
    )


def _new_position(r: int, old: int, new: int) -> int:
    """The patch of the new grid whose centre sits where patch r's centre sat on the old one."""
    return min(new - 1, int((r + 0.5) * new / old))


def show_resized_similarity(
    before: torch.Tensor,
    after: torch.Tensor,
    old_grid: int | tuple[int, int],
    new_grid: int | tuple[int, int],
    anchors: list[tuple[int, int]],
    num_prefix_tokens: int = 1,
    size: float = 2.2,
) -> plt.Figure:
    """Similarity maps of a few positions, before (top row) and after (bottom row) resizing.

    Args:
        before: (1, prefix + old_rows * old_cols, D) position table.
        after: (1, prefix + new_rows * new_cols, D), the same table resized.
        anchors: (row, col) patches of the old grid; each is matched to the patch of the new
            grid at the same place in the image, and marked with a red dot.
    """
    grids = [to_2tuple(old_grid, "old_grid"), to_2tuple(new_grid, "new_grid")]
    check_pos_table(before, grids[0], num_prefix_tokens, "before")
    check_pos_table(after, grids[1], num_prefix_tokens, "after")
    if not anchors:
        raise ValueError("expected at least one anchor (row, col) of the old grid, got none")
    for anchor in anchors:
        if len(anchor) != 2 or not (0 <= anchor[0] < grids[0][0] and 0 <= anchor[1] < grids[0][1]):
            raise ValueError(f"anchor {anchor!r} is no (row, col) patch of the old {grids[0][0]} x {grids[0][1]} grid")
    fig, axes = plt.subplots(2, len(anchors), figsize=(size * len(anchors), size * 2.2), dpi=DPI, squeeze=False)
    for line, (table, (rows, cols)) in enumerate(zip([before, after], grids)):
        similarity = pos_embed_similarity(table, num_prefix_tokens).detach().cpu()  # (N, N)
        maps = similarity.reshape(rows * cols, rows, cols).numpy()
        for k, (r, c) in enumerate(anchors):
            if line:
                r = _new_position(r, grids[0][0], rows)
                c = _new_position(c, grids[0][1], cols)
            ax = axes[line, k]
            ax.imshow(maps[r * cols + c], cmap="viridis", vmin=float(maps.min()), vmax=1.0)
            ax.plot([c], [r], "o", color="red", markersize=4)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{rows} x {cols}: patch ({r}, {c})", fontsize=9)
    fig.suptitle("similarity of one position to all others, before (top) and after resizing (bottom)", fontsize=10)
    fig.tight_layout(h_pad=3.0)
    (old_rows, old_cols), (new_rows, new_cols) = grids
    return with_alt_text(
        fig,
        f"Cosine similarity of {len(anchors)} position{'s' * (len(anchors) > 1)} to every other, "
        f"on the {old_rows} x {old_cols} grid (top) and at the same place of the resized {new_rows} x {new_cols} "
        f"grid (bottom); each map is brightest, 1.0, at its red dot.",
    )


def show_images(images: list[torch.Tensor], titles: list[str], size: float = 3.0) -> plt.Figure:
    """Draw (C, H, W) images side by side, each with its title."""
    if isinstance(images, torch.Tensor):
        hint = ": pass list(images)" if images.ndim == 4 else ""
        raise WrongTypeError(f"expected a list of (C, H, W) images, got a tensor {tuple(images.shape)}{hint}")
    if not isinstance(images, (list, tuple)) or not images:
        raise ValueError(f"expected a non-empty list of (C, H, W) images, got {type(images).__name__} {images!r:.60}")
    check_names(titles, len(images), "titles, one per image")
    fig, axes = plt.subplots(1, len(images), figsize=(size * len(images), size), dpi=DPI, squeeze=False)
    for ax, image, title in zip(axes[0], images, titles):
        ax.imshow(to_numpy_image(image), cmap="gray")
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    fig.tight_layout()
    shapes = "; ".join(f"{title} ({image.shape[-2]} x {image.shape[-1]} px)" for image, title in zip(images, titles))
    return with_alt_text(fig, f"{len(images)} image{'s' * (len(images) > 1)} side by side: {shapes}.")
