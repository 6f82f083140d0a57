"""Pictures of attention weights: one matrix, one matrix per head, one query's row; and its cost."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.validation import check_tensor, check_whole
from utils.viz.core import DPI, check_names, check_not_empty, with_alt_text


def _check_labels(labels: list[str] | None, N_q: int, N_k: int) -> None:
    """Token names for both axes: one per token of the longer side (queries and keys share the first)."""
    if labels is not None:
        check_names(labels, max(N_q, N_k), f"token labels, one per token of the {N_q} x {N_k} weights")


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


def _largest(array: np.ndarray, labels: list[str] | None) -> str:
    """Where a weight matrix is largest, in words: "0.46 (query cloud, key sun)"."""
    i, j = np.unravel_index(int(np.argmax(array)), array.shape)
    if labels is None:
        return f"{array[i, j]:.2f} (query {i}, key {j})"
    return f"{array[i, j]:.2f} (query {labels[i]}, key {labels[j]})"


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
    check_tensor(weights, "one attention matrix (N_q, N_k)", ndim=2, nonempty=True)
    _check_labels(labels, *weights.shape)
    array = weights.detach().cpu().float().numpy()
    annotate = max(array.shape) <= 10 if annotate is None else annotate
    fig, ax = plt.subplots(figsize=(size, size * array.shape[0] / array.shape[1]), dpi=DPI)
    image = _draw_weights(ax, array, labels, annotate)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    N_q, N_k = array.shape
    tokens = f" ({', '.join(labels)})" if labels is not None and len(labels) <= 12 else ""
    return with_alt_text(
        fig,
        f"{title}: a {N_q} x {N_k} heat map, one row per query, one column per key{tokens}; "
        f"the largest weight is {_largest(array, labels)}.",
    )


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
    check_tensor(weights, "one matrix per head (heads, N_q, N_k)", ndim=3, nonempty=True)
    _check_labels(labels, *weights.shape[1:])
    array = weights.detach().cpu().float().numpy()
    heads = array.shape[0]
    annotate = max(array.shape[1:]) <= 8 if annotate is None else annotate
    fig, axes = plt.subplots(1, heads, figsize=(size * heads, size), dpi=DPI, squeeze=False)
    for head, ax in enumerate(axes[0]):
        _draw_weights(ax, array[head], labels, annotate)
        ax.set_title(f"head {head}")
    fig.suptitle(title)
    fig.tight_layout()
    largest = "; ".join(f"head {head}: {_largest(array[head], labels)}" for head in range(heads))
    N_q, N_k = array.shape[1:]
    return with_alt_text(
        fig,
        f"{title}: {heads} heat maps side by side, one per head, each {N_q} queries by {N_k} keys. "
        f"Largest weights: {largest}.",
    )


def format_matrix(
    matrix: torch.Tensor, labels: list[str] | None = None, columns: list[str] | None = None, decimals: int = 2
) -> str:
    """A small matrix as a text table with row and column labels, rounded for reading by eye.

    Args:
        matrix: (rows, cols), e.g. attention scores or weights (N_q, N_k).
        labels: names of the rows (default: their indices).
        columns: names of the columns (default: `labels` when the matrix is square, else indices).
    """
    check_tensor(matrix, "a matrix (rows, cols)", ndim=2, nonempty=True)
    check_whole(decimals, "decimals", minimum=0)
    rows, cols = matrix.shape
    row_labels = labels if labels is not None else [str(i) for i in range(rows)]
    if columns is not None:
        col_labels = columns
    elif labels is not None and cols == rows:
        col_labels = labels
    else:
        col_labels = [str(j) for j in range(cols)]
    if len(row_labels) != rows or len(col_labels) != cols:
        raise ValueError(f"{len(row_labels)} row and {len(col_labels)} column labels for a {rows} x {cols} matrix")
    values = matrix.detach().cpu().double().tolist()
    cells = [[f"{v if round(v, decimals) != 0 else 0.0:.{decimals}f}" for v in row] for row in values]  # no -0.00
    width = max(len(text) for text in [*col_labels, *(t for row in cells for t in row)])
    first = max(len(label) for label in row_labels)
    lines = [" " * first + " " + " ".join(label.rjust(width) for label in col_labels)]
    for label, row in zip(row_labels, cells):
        lines.append(label.rjust(first) + " " + " ".join(text.rjust(width) for text in row))
    return "\n".join(lines)


def show_weight_rows(
    rows: dict[str, torch.Tensor], title: str = "one query's weights over the keys", size: float = 3.2
) -> plt.Figure:
    """Draw one or more weight vectors as bar charts side by side, on the same 0..1 scale.

    Args:
        rows: panel title -> (N_k,) weights of one query (summing to 1).
    """
    for name, weights in check_not_empty(rows, "row of weights").items():
        check_tensor(weights, f"one query's weights (N_k,) for {name!r}", ndim=1, nonempty=True)
    fig, axes = plt.subplots(1, len(rows), figsize=(size * len(rows), size * 0.8), dpi=DPI, squeeze=False, sharey=True)
    for ax, (name, weights) in zip(axes[0], rows.items()):
        values = weights.detach().cpu().double().numpy()
        ax.bar(range(len(values)), values, color="tab:blue")
        ax.set_ylim(0, 1)
        ax.set_title(f"{name}\nlargest weight {values.max():.2f}", fontsize=10)
        ax.set_xlabel("key")
    axes[0][0].set_ylabel("weight")
    fig.suptitle(title)
    fig.tight_layout()
    panels = "; ".join(f"{name}: largest weight {float(w.max()):.2f}" for name, w in rows.items())
    keys = len(next(iter(rows.values())))
    return with_alt_text(fig, f"{title}: bar charts of the weights over {keys} keys, on a 0 to 1 scale. {panels}.")


def plot_attention_cost(tokens: list[int], nbytes: list[float], seconds: list[float], size: float = 3.5) -> plt.Figure:
    """Memory and time of one attention matrix against the number of tokens T, on log-log axes,
    each with a dashed T^2 line through its largest point for comparison.

    Args:
        tokens: the sequence lengths T.
        nbytes: bytes of one T x T matrix for each T.
        seconds: measured time of one attention for each T.
    """
    if not len(tokens) == len(nbytes) == len(seconds):
        raise ValueError(f"expected one memory and one time per T, got {len(tokens)}, {len(nbytes)}, {len(seconds)}")
    if not tokens:
        raise ValueError("expected at least one sequence length T, got none")
    for name, values in [("tokens", tokens), ("nbytes", nbytes), ("seconds", seconds)]:
        if not all(value > 0 for value in values):
            raise ValueError(f"a log-log plot needs {name} > 0, got {list(values)}")
    T = np.asarray(tokens, dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(2 * size, size * 0.85), dpi=DPI)
    panels = [
        (axes[0], np.asarray(nbytes) / 1e6, "memory of one T x T matrix (MB)", "exact"),
        (axes[1], np.asarray(seconds) * 1e3, "time of one attention (ms)", "measured"),
    ]
    for ax, values, label, kind in panels:
        ax.loglog(T, values, "o-", label=kind)
        ax.loglog(T, values[-1] * (T / T[-1]) ** 2, "--", color="gray", label="∝ T²")
        ax.set_xticks(T, [str(t) for t in tokens])
        ax.minorticks_off()
        ax.set_xlabel("tokens T")
        ax.set_title(label, fontsize=10)
        ax.legend()
    fig.tight_layout()
    return with_alt_text(
        fig,
        f"Log-log plots against the number of tokens T ({tokens[0]} to {tokens[-1]}), "
        "each with a dashed T squared line: "
        f"the memory of one T x T matrix, exact, {nbytes[-1] / 1e6:.1f} MB at T = {tokens[-1]}; and the time of one "
        f"attention measured here, {seconds[-1] * 1e3:.3g} ms at T = {tokens[-1]}.",
    )
