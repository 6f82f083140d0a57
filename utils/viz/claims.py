"""Lesson 9's pictures: every seed of every arm, curves with their seed-to-seed band, and what
pruning each head costs."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.validation import check_tensor
from utils.viz.core import DPI, check_not_empty, with_alt_text


def _as_tensor(values, what: str, ndim: int) -> torch.Tensor:
    tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values, dtype=np.float64))
    return check_tensor(tensor, what, ndim=ndim, nonempty=True).detach().cpu().double()


def plot_seeds(groups: dict, ylabel: str, title: str = "", percent: bool = True, size: float = 4.0) -> plt.Figure:
    """One column per arm: a dot per seed and a bar at their mean, so the spread is in view.

    Args:
        groups: arm name -> per-seed values (a list or (seeds,) tensor), in the order of the columns.
        ylabel: what the values are; percent: fractions shown as percentages.
    """
    checked = {
        name: _as_tensor(values, f"groups[{name!r}] (seeds,)", 1)
        for name, values in check_not_empty(groups, "arm").items()
    }
    scale = 100.0 if percent else 1.0
    fig, ax = plt.subplots(figsize=(max(size, 1.1 * len(checked) + 1.5), size), dpi=DPI)
    for column, values in enumerate(checked.values()):
        points = values.numpy() * scale
        offsets = np.linspace(-0.12, 0.12, len(points)) if len(points) > 1 else np.zeros(1)
        ax.scatter(column + offsets, points, s=22, color="tab:blue", zorder=3)
        ax.hlines(points.mean(), column - 0.3, column + 0.3, color="black", linewidth=2, zorder=2)
    ax.set_xticks(range(len(checked)), list(checked), rotation=20, ha="right")
    ax.set_ylabel(ylabel + (" (%)" if percent else ""))
    ax.set_title(title or "each dot one seed, the bar their mean")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    unit = " %" if percent else ""
    arms = "; ".join(
        f"{name}: mean {float(values.mean()) * scale:.1f}{unit}, seeds from {float(values.min()) * scale:.1f} to "
        f"{float(values.max()) * scale:.1f}"
        for name, values in checked.items()
    )
    return with_alt_text(fig, f"{title or ylabel}: one column per arm, a dot per seed, a bar at their mean. {arms}.")


def plot_curves(steps, curves: dict, ylabel: str, title: str = "", log: bool = False, size: float = 4.0) -> plt.Figure:
    """Curves over training: the mean over seeds as a line, the lowest to highest seed as a band.

    Args:
        steps: (E,) the x positions (optimiser steps).
        curves: name -> (seeds, E) values.
        log: a logarithmic y axis (losses).
    """
    x = _as_tensor(steps, "steps (E,)", 1).numpy()
    fig, ax = plt.subplots(figsize=(size * 1.5, size), dpi=DPI)
    for name, values in check_not_empty(curves, "curve (seeds, E)").items():
        values = _as_tensor(values, f"curves[{name!r}] (seeds, E)", 2)
        if values.shape[1] != len(x):
            raise ValueError(f"curves[{name!r}] has {values.shape[1]} points per seed, steps has {len(x)}")
        line = ax.plot(x, values.mean(dim=0).numpy(), label=f"{name} ({values.shape[0]} seeds)")[0]
        ax.fill_between(
            x, values.min(dim=0).values.numpy(), values.max(dim=0).values.numpy(), alpha=0.2, color=line.get_color()
        )
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("optimiser steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title or "mean over seeds; the band runs from the lowest to the highest seed")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    ends = "; ".join(
        f"{name}: {float(_as_tensor(values, name, 2).mean(dim=0)[-1]):.3g} at step {x[-1]:g}"
        for name, values in curves.items()
    )
    return with_alt_text(
        fig,
        f"{title or ylabel} against optimiser steps, the mean over seeds as a line and the lowest to highest seed "
        f"as a band. At the end: {ends}.",
    )


def plot_head_costs(costs, size: float = 4.0) -> plt.Figure:
    """What pruning each head costs, one panel per seed: (seeds, depth, heads) accuracy points lost.

    Which head index does what is an accident of the init: compare the panels. A head whose pruning
    helps (a negative cost) shows white, as one that costs nothing.
    """
    costs = _as_tensor(costs, "costs (seeds, depth, heads)", 3).numpy() * 100
    seeds = costs.shape[0]
    fig, axes = plt.subplots(1, seeds, figsize=(size * 0.6 * seeds, size * 0.8), dpi=DPI, squeeze=False)
    top = max(float(np.abs(costs).max()), 1e-9)
    for seed, ax in enumerate(axes[0]):
        image = ax.imshow(costs[seed], cmap="Reds", vmin=0, vmax=top)
        ax.set_title(f"seed {seed}", fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("block" if seed == 0 else "")
        ax.set_xticks(range(costs.shape[2]))
        ax.set_yticks(range(costs.shape[1]))
    fig.colorbar(image, ax=list(axes[0]), shrink=0.8, label="validation points lost when pruned")
    worst = []
    for seed in range(seeds):
        block, head = divmod(int(np.argmax(costs[seed])), costs.shape[2])
        worst.append(f"seed {seed}: block {block}, head {head}, {costs[seed, block, head]:.1f} points")
    return with_alt_text(
        fig,
        f"One panel per seed, blocks by heads, shaded by the validation points lost when that head is pruned. "
        f"The costliest head: {'; '.join(worst)}.",
    )
