"""Lesson 12's pictures: maps over the patch grid side by side (RoPE scores, attention), and accuracy
against a setting (tokens kept, patch size) with every seed in view. Per-arm seed plots come from
utils.viz.claims.plot_seeds."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.validation import check_tensor
from utils.viz.core import DPI, check_not_empty, with_alt_text


def plot_grid_maps(maps: dict, title: str, marks: dict | None = None, size: float = 2.6) -> plt.Figure:
    """One heat map per entry, each over its own patch grid, with its own colour scale.

    Args:
        maps: panel title -> (rows, cols) values, e.g. one query's scores against every key.
        title: the figure's title (it starts the alt text).
        marks: panel title -> (row, col) to outline (the query), optional.
    """
    checked = {
        name: check_tensor(values, f"maps[{name!r}] (rows, cols)", ndim=2, nonempty=True).detach().cpu().float()
        for name, values in check_not_empty(maps, "map").items()
    }
    marks = marks or {}
    fig, axes = plt.subplots(1, len(checked), figsize=(size * len(checked), size + 0.4), dpi=DPI, squeeze=False)
    described = []
    for ax, (name, values) in zip(axes[0], checked.items()):
        image = ax.imshow(values.numpy(), cmap="viridis")
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        if name in marks:
            row, col = marks[name]
            ax.add_patch(plt.Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        top = np.unravel_index(int(values.argmax()), tuple(values.shape))
        described.append(
            f"{name}: {values.shape[0]} x {values.shape[1]} grid, from {float(values.min()):.2f} to "
            f"{float(values.max()):.2f}, highest at ({top[0]}, {top[1]})"
        )
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return with_alt_text(fig, f"{title}: heat maps over the patch grid. " + "; ".join(described) + ".")


def plot_against(xs, series: dict, xlabel: str, ylabel: str, title: str, size: float = 4.0) -> plt.Figure:
    """Accuracy against a setting: per series, a dot per seed at every x and a line through the means.

    Args:
        xs: (K,) the setting's values (e.g. the share of tokens kept).
        series: name -> (seeds, K) fractions from 0 to 1, shown as percentages.
    """
    x = np.asarray(xs, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(size * 1.4, size), dpi=DPI)
    described = []
    for name, values in check_not_empty(series, "series").items():
        values = torch.as_tensor(np.asarray(values, dtype=np.float64))
        check_tensor(values, f"series[{name!r}] (seeds, {len(x)})", ndim=2, nonempty=True)
        if values.shape[1] != len(x):
            raise ValueError(f"series[{name!r}] has {values.shape[1]} values per seed, xs has {len(x)}")
        points = values.numpy() * 100
        (line,) = ax.plot(x, points.mean(axis=0), marker="o", label=f"{name} ({len(points)} seeds)")
        for seed in points:
            ax.scatter(x, seed, s=10, color=line.get_color(), alpha=0.5)
        means = ", ".join(f"{xi:g}: {m:.1f} %" for xi, m in zip(x, points.mean(axis=0)))
        described.append(f"{name}, mean at each {xlabel}: {means}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + " (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return with_alt_text(
        fig, f"{title}: {ylabel} against {xlabel}, a dot per seed, a line through the means. " + "; ".join(described)
    )
