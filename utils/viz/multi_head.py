"""Lesson 4's pictures: the tensor's shape at each step of multi-head attention, and the width of
the projected queries (or keys, values) cut into one slice per head."""

from typing import NamedTuple

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyBboxPatch

from utils.validation import check_tensor, check_whole
from utils.viz.core import DPI, check_names, with_alt_text

TOKEN_MAJOR, HEAD_MAJOR, WEIGHTS = "#cfe2f3", "#fce5cd", "#d9ead3"  # box colours by layout


class ShapeStep(NamedTuple):
    """One step of multi-head self-attention: what the tensor is called, the operation that made
    it, its shape in letters and in numbers."""

    name: str
    operation: str
    symbols: str
    shape: tuple[int, ...]


def multi_head_shapes(B: int, T: int, D: int, num_heads: int) -> list[ShapeStep]:
    """The shape of the tensor after every step of multi-head self-attention on (B, T, D) tokens.

    The steps are those of `utils.MultiHeadSelfAttention.forward`; q, k and v share one step.
    """
    for value, name in [(B, "B"), (T, "T"), (D, "D"), (num_heads, "num_heads")]:
        check_whole(value, name)
    if D % num_heads:
        raise ValueError(f"width D={D} is not divisible by num_heads={num_heads}")
    h, hd = num_heads, D // num_heads
    return [
        ShapeStep("tokens x", "", "(B, T, D)", (B, T, D)),
        ShapeStep("qkv(x)", "qkv = Linear(D, 3D): q, k, v in one matmul", "(B, T, 3D)", (B, T, 3 * D)),
        ShapeStep("split", "reshape: 3D = 3 x heads x head_dim", "(B, T, 3, heads, head_dim)", (B, T, 3, h, hd)),
        ShapeStep("per head", "permute(2, 0, 3, 1, 4)", "(3, B, heads, T, head_dim)", (3, B, h, T, hd)),
        ShapeStep("q, k, v (each)", "unbind the first axis", "(B, heads, T, head_dim)", (B, h, T, hd)),
        ShapeStep("weights", "softmax(q kᵀ / √head_dim), per head", "(B, heads, T, T)", (B, h, T, T)),
        ShapeStep("out", "weights @ v", "(B, heads, T, head_dim)", (B, h, T, hd)),
        ShapeStep("heads back", "transpose(1, 2)", "(B, T, heads, head_dim)", (B, T, h, hd)),
        ShapeStep("merged", "reshape: heads side by side", "(B, T, D)", (B, T, D)),
        ShapeStep("output", "proj = Linear(D, D): mixes the heads", "(B, T, D)", (B, T, D)),
    ]


def _box_colour(symbols: str) -> str:
    if symbols.endswith("T, T)"):
        return WEIGHTS
    return HEAD_MAJOR if symbols.startswith(("(3, B, heads", "(B, heads")) else TOKEN_MAJOR


def show_multi_head_shapes(B: int, T: int, D: int, num_heads: int, size: float = 6.5) -> plt.Figure:
    """Draw multi-head self-attention as a column of boxes, one per step, each labelled with the
    tensor's shape in letters and in numbers; the operation is written beside each arrow."""
    steps = multi_head_shapes(B, T, D, num_heads)
    rows = len(steps)
    fig, ax = plt.subplots(figsize=(size, size * 1.3), dpi=DPI)
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.8, rows)
    ax.set_axis_off()
    left, width, height = 2.5, 4.2, 0.62
    for i, step in enumerate(steps):
        y = rows - 1 - i  # bottom of this step's row; the first step on top
        box = FancyBboxPatch(
            (left, y + (1 - height) / 2),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=_box_colour(step.symbols),
            edgecolor="#555555",
            linewidth=1,
        )
        ax.add_patch(box)
        middle = left + width / 2
        ax.text(middle, y + 0.62, step.symbols, ha="center", va="center", fontsize=9, weight="bold")
        ax.text(middle, y + 0.38, str(step.shape), ha="center", va="center", fontsize=9, family="monospace")
        ax.text(left - 0.15, y + 0.5, step.name, ha="right", va="center", fontsize=9)
        if i:  # the arrow from the step above, with the operation beside it
            ax.annotate(
                "",
                xy=(middle, y + 1 - (1 - height) / 2 + 0.02),
                xytext=(middle, y + 1 + (1 - height) / 2 - 0.02),
                arrowprops=dict(arrowstyle="->", color="#555555"),
            )
            ax.text(middle + 0.15, y + 1, step.operation, ha="left", va="center", fontsize=8, color="#333333")
    legend = [(TOKEN_MAJOR, "one row per token"), (HEAD_MAJOR, "one block per head"), (WEIGHTS, "T x T per head")]
    for j, (colour, text) in enumerate(legend):
        x = 0.3 + 3.3 * j
        swatch = FancyBboxPatch((x, -0.7), 0.4, 0.3, boxstyle="square,pad=0", facecolor=colour, edgecolor="#555555")
        ax.add_patch(swatch)
        ax.text(x + 0.55, -0.55, text, ha="left", va="center", fontsize=8)
    ax.set_title(f"multi-head self-attention, B={B}, T={T}, D={D}, {num_heads} heads of {D // num_heads}")
    flow = ", then ".join(f"{step.name} {step.symbols} {step.shape}" for step in steps)
    return with_alt_text(
        fig,
        f"Multi-head self-attention for B = {B}, T = {T}, D = {D}, {num_heads} heads of {D // num_heads}, "
        f"step by step with the shape of each tensor: {flow}.",
    )


def show_head_split(
    x: torch.Tensor,
    num_heads: int,
    labels: list[str] | None = None,
    feature_names: list[str] | None = None,
    size: float = 4.5,
    what: str = "feature",
) -> plt.Figure:
    """Draw one sequence's queries (or keys, or values) as a (T, D) matrix with the width cut into
    `num_heads` equal slices, one per head: head i attends with slice i of the *projected* q, k
    and v, and every number of that slice was computed from the whole token.

    Args:
        x: (T, D) one sequence's queries, keys or values, D divisible by num_heads.
        labels: optional token names (rows).
        feature_names: optional feature names (columns).
        what: what a column is, for the axis label, e.g. "feature of q".
    """
    T, D = check_tensor(x, "one sequence's queries, keys or values (T, D)", ndim=2, nonempty=True).shape
    check_whole(num_heads, "num_heads")
    if labels is not None:
        check_names(labels, T, "token labels, one per row")
    if feature_names is not None:
        check_names(feature_names, D, "feature names, one per column")
    if D % num_heads:
        raise ValueError(f"width D={D} is not divisible by num_heads={num_heads}")
    head_dim = D // num_heads
    fig, ax = plt.subplots(figsize=(size, size * max(T, 2) / max(D, 2) + 0.8), dpi=DPI)
    ax.imshow(x.detach().cpu().float().numpy(), cmap="viridis", aspect="auto", interpolation="nearest")
    for head in range(1, num_heads):
        ax.axvline(head * head_dim - 0.5, color="white", linewidth=3)
    for head in range(num_heads):
        ax.text(
            head * head_dim + (head_dim - 1) / 2,
            -0.7,
            f"head {head}",
            ha="center",
            va="bottom",
            fontsize=10,
        )
    ax.set_ylim(T - 0.5, -1.4)  # room above the matrix for the head names
    ax.set_yticks(range(T), labels if labels is not None else range(T))
    if feature_names is not None:
        ax.set_xticks(range(D), feature_names, rotation=90)
    ax.set_xlabel(f"{what}: {num_heads} heads x {head_dim} = {D}")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return with_alt_text(
        fig,
        f"One sequence as a {T} x {D} matrix, one row per token, one column per {what}; the {D} columns are cut "
        f"by white lines into {num_heads} slices of {head_dim}, one per head.",
    )
