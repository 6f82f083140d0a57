"""Lesson 7's pictures of a trained ViT: where the class token looks (overlaid on the images), how
far each head looks per layer (ViT paper, Fig. 7 right), and the principal components of the
patch-embedding filters (Fig. 7 left); and `share_colour_scale`, which puts the panels of any
figure on one colour scale so that they can be compared."""

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.collections import LineCollection

from utils.inspection import attention_share
from utils.validation import WrongTypeError, check_tensor, check_whole
from utils.viz.core import DPI, check_image_batch, check_names, to_numpy_image, with_alt_text


def _region_outline(region: np.ndarray, patch_height: float, patch_width: float) -> list[list[tuple[float, float]]]:
    """The edges between patches inside `region` (rows, cols) and patches outside it (or the
    border), as line segments in pixel coordinates: the outline of the region."""
    rows, cols = region.shape
    inside = np.pad(region, 1)  # False all around, so the border counts as outside
    segments = []
    for r in range(rows):
        for c in range(cols):
            if not inside[r + 1, c + 1]:
                continue
            top, bottom = r * patch_height, (r + 1) * patch_height
            left, right = c * patch_width, (c + 1) * patch_width
            if not inside[r, c + 1]:
                segments.append([(left, top), (right, top)])
            if not inside[r + 2, c + 1]:
                segments.append([(left, bottom), (right, bottom)])
            if not inside[r + 1, c]:
                segments.append([(left, top), (left, bottom)])
            if not inside[r + 1, c + 2]:
                segments.append([(right, top), (right, bottom)])
    return segments


def show_attention_maps(
    images: torch.Tensor,
    maps: torch.Tensor | dict[str, torch.Tensor],
    titles: list[str] | None = None,
    regions: torch.Tensor | None = None,
    size: float = 2.4,
    scale: str = "row",
) -> plt.Figure:
    """Attention over the patch grid laid over each image: one column per image, the image on
    top, then one panel per map (nearest-neighbour upsampled: each patch one flat colour).

    Panels that are compared share a colour scale from 0, with a colour bar: with scale="row"
    every image's map of one name (one row; its largest weight sets the top), with
    scale="shared" every map of the figure (one bar). With `regions`, the region's patches
    are outlined in cyan and each map's title gives the share of the map inside the region
    (`attention_share`) next to the share uniform attention would put there.

    Args:
        images: (B, C, H, W) in [0, 1]; C = 1 (drawn grey) or 3.
        maps: (B, rows, cols) non-negative attention over the patches, or {name: (B, rows, cols)}
            (e.g. {"last layer": ..., "rollout": ...}), one row of panels per name.
        titles: B titles for the images (e.g. their labels).
        regions: (B, rows, cols) bool, e.g. `patch_coverage` of the objects' masks.
        scale: "row" (one colour scale per map name) or "shared" (one for all maps).
    """
    B, C, H, W = check_image_batch(images).shape
    if scale not in ("row", "shared"):
        raise ValueError(
            f"scale must be 'row' (one colour scale per map name) or 'shared' (one for all), got {scale!r}"
        )
    if not isinstance(maps, (torch.Tensor, dict)):
        raise WrongTypeError(f"expected maps (B, rows, cols) or a dict of them, got a {type(maps).__name__}")
    named = {"attention": maps} if isinstance(maps, torch.Tensor) else dict(maps)
    if not named:
        raise ValueError("expected at least one map (B, rows, cols), got an empty dict")
    for name, values in named.items():
        if not isinstance(values, torch.Tensor) or values.ndim != 3 or values.shape[0] != B:
            got = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
            raise ValueError(f"expected maps (B, rows, cols) with B = {B} for {name!r}, got {got}")
        check_tensor(values, f"maps {name!r} (B, rows, cols)", ndim=3, nonempty=True)
    if titles is not None:
        check_names(titles, B, "titles, one per image")
    if regions is not None:
        check_tensor(regions, "regions (B, rows, cols)", ndim=3, nonempty=True)
        if regions.dtype != torch.bool:
            raise ValueError(f"expected regions of bools (True: inside), got {regions.dtype}: use .bool() or > 0.5")
        for name, values in named.items():
            if tuple(regions.shape) != tuple(values.shape):
                raise ValueError(
                    f"expected regions (B, rows, cols) = {tuple(values.shape)} like the maps {name!r}, "
                    f"got {tuple(regions.shape)}"
                )
        regions = regions.detach().cpu().bool()
    extent = (0, W, H, 0)  # (left, right, bottom, top): every grid covers the whole image
    tops = {name: max(float(values.detach().max()), 1e-9) for name, values in named.items()}  # each row's top
    if scale == "shared":
        tops = dict.fromkeys(tops, max(tops.values()))
    fig, axes = plt.subplots(
        1 + len(named),
        B,
        figsize=(size * B + 1.2, size * (1 + len(named)) * 1.12),
        dpi=DPI,
        squeeze=False,
        layout="constrained",  # leaves room for the colour bars
    )
    overlays = {}  # name -> one overlay drawn with that name's scale, for its colour bar
    for b in range(B):
        picture = to_numpy_image(images[b])  # (H, W) or (H, W, 3)
        panels = [(axes[0, b], None, None)] + [
            (axes[1 + i, b], name, values) for i, (name, values) in enumerate(named.items())
        ]
        for ax, name, values in panels:
            ax.imshow(picture, cmap="gray_r" if C == 1 else None, vmin=0, vmax=1, extent=extent)
            ax.set_xticks([])
            ax.set_yticks([])
            if name is None:
                ax.set_title(titles[b] if titles is not None else f"image {b}", fontsize=9)
            else:
                grid = values[b].detach().cpu().float()  # (rows, cols)
                overlays[name] = ax.imshow(
                    grid.numpy(),
                    cmap="inferno",
                    alpha=0.6,
                    vmin=0,
                    vmax=tops[name],
                    extent=extent,
                    interpolation="nearest",
                )
                title = name
                if regions is not None:
                    share = attention_share(grid[None], regions[b][None]).item()
                    uniform = regions[b].float().mean().item()
                    title = f"{name}\n{share:.0%} inside (uniform {uniform:.0%})"
                ax.set_title(title, fontsize=9)
            if regions is not None:
                rows, cols = regions.shape[1:]
                outline = _region_outline(regions[b].numpy(), H / rows, W / cols)
                ax.add_collection(LineCollection(outline, colors="cyan", linewidths=1.5))
            ax.set_xlim(0, W)
            ax.set_ylim(H, 0)
    if scale == "shared":
        fig.colorbar(next(iter(overlays.values())), ax=axes[1:, :], shrink=0.8, label="attention weight")
    else:
        for row, name in enumerate(named, start=1):
            fig.colorbar(overlays[name], ax=axes[row, :], shrink=0.8, label=f"{name}: weight")
    rows, cols = next(iter(named.values())).shape[1:]
    shown = ", ".join(titles) if titles is not None else f"{B} images"
    text = (
        f"{shown}: each image on top and, below it, one attention map per row ({'; '.join(named)}) over the "
        f"{rows} x {cols} patch grid, brighter where the weight is higher"
    )
    if regions is not None:
        shares = "; ".join(
            f"{name}: "
            + ", ".join(
                f"{attention_share(values[b][None].detach().cpu().float(), regions[b][None]).item():.0%}"
                for b in range(B)
            )
            for name, values in named.items()
        )
        text += f", the objects outlined. Share of the weight on the objects: {shares}"
    return with_alt_text(fig, text + ".")


def share_colour_scale(figure: plt.Figure, vmin: float | None = None, vmax: float | None = None) -> tuple[float, float]:
    """Put every image panel of `figure` on one colour scale (its colour bars follow), so that
    panels drawn on scales of their own (e.g. `show_pos_similarity`'s tables) can be compared.

    Args:
        vmin, vmax: the scale; by default the lowest and highest value drawn in any panel.
    Returns:
        (vmin, vmax), the scale used.
    """
    if not isinstance(figure, plt.Figure):
        raise WrongTypeError(f"expected a matplotlib Figure, got {type(figure).__name__}")
    images = [image for ax in figure.axes for image in ax.images]
    if not images:
        raise ValueError("the figure has no image panels to put on one colour scale")
    values = [np.asarray(image.get_array(), dtype=float) for image in images]
    low = min(float(np.nanmin(v)) for v in values) if vmin is None else float(vmin)
    high = max(float(np.nanmax(v)) for v in values) if vmax is None else float(vmax)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"expected a colour scale with vmin < vmax, both finite, got {low} and {high}")
    for image in images:
        image.set_clim(low, high)
    return low, high


def show_attention_distance(
    distances: torch.Tensor, patch_size: int | None = None, uniform: float | None = None, size: float = 5.0
) -> plt.Figure:
    """How far each head looks, layer by layer (ViT paper, Fig. 7 right): one dot per head, and
    a line through the mean over the heads.

    Args:
        distances: (depth, heads) mean attention distance in pixels, from `mean_attention_distance`.
        patch_size: if given, a dotted line at P pixels: a head that looks only at the
            neighbouring patches.
        uniform: if given, a dashed line at the distance uniform attention would give.
    """
    check_tensor(distances, "distances (depth, heads)", ndim=2, nonempty=True)
    values = distances.detach().cpu().double().numpy()  # (depth, heads)
    depth, heads = values.shape
    layers = np.arange(1, depth + 1)  # layer 1 is the first block
    fig, ax = plt.subplots(figsize=(size, size * 0.75), dpi=DPI)
    ax.scatter(np.repeat(layers, heads), values.reshape(-1), s=25, alpha=0.7, label=f"one head ({heads} per layer)")
    ax.plot(layers, values.mean(axis=1), "-", color="black", linewidth=1.5, label="mean over heads")
    if uniform is not None:
        ax.axhline(uniform, linestyle="--", color="gray", label=f"uniform attention ({uniform:.1f} px)")
    if patch_size is not None:
        ax.axhline(patch_size, linestyle=":", color="gray", label=f"one patch away ({patch_size} px)")
    ax.set_xticks(layers)
    ax.set_xlim(0.5, depth + 0.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("layer (network depth)")
    ax.set_ylabel("mean attention distance (pixels)")
    ax.set_title("how far each head looks")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    means = ", ".join(f"{value:.1f}" for value in values.mean(axis=1))
    reference = f"; uniform attention would read {uniform:.1f} px" if uniform is not None else ""
    return with_alt_text(
        fig,
        f"The mean attention distance of each of the {heads} heads of each of the {depth} layers, in pixels, a dot "
        f"per head; the mean over heads, layer 1 to {depth}: {means} px{reference}.",
    )


def _percent(x: float) -> str:
    """A share as a percentage: "12%", or "3.4%" below 10% where whole percents say too little."""
    return f"{x:.0%}" if x >= 0.095 else f"{x:.1%}"


def normalise_component(component: torch.Tensor) -> torch.Tensor:
    """(C, P, P) -> the same, stretched to [0, 1] for display (a constant becomes 0.5 grey)."""
    check_tensor(component, "one component (C, P, P)", ndim=3, nonempty=True)
    low, high = component.min(), component.max()
    if high - low < 1e-12:
        return torch.full_like(component, 0.5)
    return (component - low) / (high - low)


def show_filter_components(
    components: torch.Tensor, share: torch.Tensor, columns: int = 8, size: float = 1.4
) -> plt.Figure:
    """The principal components of the patch-embedding filters as small pictures (ViT paper,
    Fig. 7 left), each titled with the share of the filters' variance it explains.

    Each component is stretched to [0, 1] on its own (its sign is arbitrary, so are its colours).

    Args:
        components: (count, C, P, P) from `patch_embedding_components`; C = 1 (grey) or 3 (RGB).
        share: (count,) share of the variance of each component.
        columns: pictures per row.
    """
    check_tensor(components, "components (count, C, P, P) with C = 1 or 3", ndim=4, nonempty=True)
    if components.shape[1] not in (1, 3):
        raise ValueError(f"expected components (count, C, P, P) with C = 1 or 3, got {tuple(components.shape)}")
    check_whole(columns, "columns")
    count = components.shape[0]
    if tuple(check_tensor(share, f"one share per component ({count},)", ndim=1, nonempty=True).shape) != (count,):
        raise ValueError(f"expected one share per component ({count},), got {tuple(share.shape)}")
    components = components.detach().cpu().float()
    columns = min(columns, count)
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows + 0.4), dpi=DPI, squeeze=False)
    for index, ax in enumerate(axes.flat):
        ax.set_axis_off()
        if index < count:
            picture = to_numpy_image(normalise_component(components[index]))  # (P, P) or (P, P, 3)
            ax.imshow(picture, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(_percent(share[index].item()), fontsize=9)
    fig.suptitle("principal components of the patch-embedding filters", fontsize=10)
    fig.tight_layout()
    shares = ", ".join(_percent(value) for value in share.tolist())
    return with_alt_text(
        fig,
        f"The {count} principal components of the patch-embedding filters as small pictures, each titled with "
        f"the share of the filters' variance it explains: {shares}.",
    )
