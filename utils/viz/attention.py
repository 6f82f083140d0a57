"""Pictures of attention weights: one matrix, or one matrix per head side by side."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.viz.core import DPI


def _draw_weights(ax: plt.Axes, weights: np.ndarray, labels: list[str] | None, annotate: bool) -> plt.cm.ScalarMappable:
    """Draw one (N_q, N_k) weight matrix on `ax`: rows are queries, columns keys."""
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=max(float(weights.max()), 1e-9))
    N_q, N_k = weights.shape
    if labels is not None:
        ax.set_xticks(range(N_k), labels[:N_k], rotation=90)
        ax.set_yticks(range(N_q), labels[:N_q])
    if annotate:
        for i in range(N_q):
            for j in range(N_k):
                value = weights[i, j]
                color = "black" if value > 0.6 * weights.max() else "white"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color=color)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    return image


def show_attention(
    weights: torch.Tensor,
    labels: list[str] | None = None,
    title: str = "attention weights",
    annotate: bool | None = None,
    size: float = 4.0,
) -> plt.Figure:
    """Draw one attention matrix as a heat map; each row is a query's weights over the keys.

    Args:
        weights: (N_q, N_k), rows summing to 1.
        labels: optional token names, used for both axes.
        annotate: write each weight in its cell (default: when the matrix is at most 10 x 10).
    """
    if weights.ndim != 2:
        raise ValueError(f"expected one attention matrix (N_q, N_k), got {tuple(weights.shape)}")
    array = weights.detach().cpu().float().numpy()
    annotate = max(array.shape) <= 10 if annotate is None else annotate
    fig, ax = plt.subplots(figsize=(size, size * array.shape[0] / array.shape[1]), dpi=DPI)
    image = _draw_weights(ax, array, labels, annotate)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return fig


def show_heads(
    weights: torch.Tensor,
    labels: list[str] | None = None,
    title: str = "attention weights per head",
    annotate: bool | None = None,
    size: float = 3.0,
) -> plt.Figure:
    """Draw each head's attention matrix side by side.

    Args:
        weights: (heads, N_q, N_k), rows summing to 1.
    """
    if weights.ndim != 3:
        raise ValueError(f"expected one matrix per head (heads, N_q, N_k), got {tuple(weights.shape)}")
    array = weights.detach().cpu().float().numpy()
    heads = array.shape[0]
    annotate = max(array.shape[1:]) <= 8 if annotate is None else annotate
    fig, axes = plt.subplots(1, heads, figsize=(size * heads, size), dpi=DPI, squeeze=False)
    for head, ax in enumerate(axes[0]):
        _draw_weights(ax, array[head], labels, annotate)
        ax.set_title(f"head {head}")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
