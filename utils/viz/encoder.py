"""Lesson 5's pictures: GELU vs ReLU, one encoder block in both orders, pre-norm vs post-norm in a
deep stack, receptive fields."""

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from utils.validation import check_tensor
from utils.viz.core import DPI, check_names, check_not_empty, with_alt_text

NORM_COLORS = {"pre-norm": "tab:blue", "post-norm": "tab:orange"}


def plot_activations(
    x: torch.Tensor, curves: dict[str, torch.Tensor], title: str = "activations", size: float = 4.0
) -> plt.Figure:
    """Draw activation functions over the same inputs.

    Args:
        x: (K,) input values.
        curves: name -> (K,) outputs, one line each.
    """
    xs = check_tensor(x, "input values x (K,)", ndim=1, nonempty=True).detach().cpu().float().numpy()
    for name, y in check_not_empty(curves, "curve (K,)").items():
        check_tensor(y, f"curve {name!r} (K,)", ndim=1, nonempty=True)
        if y.shape != x.shape:
            raise ValueError(f"curve {name!r} has shape {tuple(y.shape)}, the inputs {tuple(x.shape)}")
    fig, ax = plt.subplots(figsize=(size * 1.2, size), dpi=DPI)
    for name, y in curves.items():
        ax.plot(xs, y.detach().cpu().float().numpy(), label=name, linewidth=2)
    ax.axhline(0, color="gray", linewidth=0.6)
    ax.axvline(0, color="gray", linewidth=0.6)
    ax.set_xlabel("input")
    ax.set_ylabel("output")
    ax.set_title(title)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    lowest = "; ".join(f"{name} lowest {float(y.min()):.3f}" for name, y in curves.items())
    return with_alt_text(
        fig, f"{title}: {', '.join(curves)} plotted for inputs from {xs[0]:g} to {xs[-1]:g}. {lowest}."
    )


def plot_norm_placement(
    stream_std: dict[str, torch.Tensor], grad_norms: dict[str, torch.Tensor], size: float = 4.0
) -> plt.Figure:
    """Pre-norm vs post-norm through a deep stack: the residual stream's scale and the gradient.

    Args:
        stream_std: name ("pre-norm", "post-norm") -> (depth,) std of the stream after each block.
        grad_norms: name -> (seeds, depth) gradient norm reaching each block's input, one row per
            random initialisation (drawn as one thin line each, on a log scale).
    """
    for name, std in check_not_empty(stream_std, "stream std (depth,)").items():
        check_tensor(std, f"stream_std[{name!r}] (depth,)", ndim=1, nonempty=True)
    for name, norms in check_not_empty(grad_norms, "gradient norms (seeds, depth)").items():
        check_tensor(norms, f"grad_norms[{name!r}] shaped (seeds, depth)", ndim=2, nonempty=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(size * 2.4, size), dpi=DPI)
    for name, std in stream_std.items():
        blocks = np.arange(1, len(std) + 1)
        left.plot(blocks, std.detach().cpu().numpy(), label=name, color=NORM_COLORS.get(name), linewidth=2)
    left.set_xlabel("block")
    left.set_ylabel("std of the residual stream")
    left.set_title("forward: scale of the stream after each block")
    left.set_ylim(bottom=0)
    left.legend()
    left.grid(alpha=0.3)
    for name, norms in grad_norms.items():
        if norms.ndim != 2:
            raise ValueError(f"expected grad_norms[{name!r}] shaped (seeds, depth), got {tuple(norms.shape)}")
        blocks = np.arange(1, norms.shape[1] + 1)
        for seed, row in enumerate(norms.detach().cpu().numpy()):
            right.plot(
                blocks,
                row,
                color=NORM_COLORS.get(name),
                linewidth=1,
                alpha=0.7,
                label=name if seed == 0 else None,
            )
    right.set_yscale("log")
    right.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.1, 0.2, 0.5, 1, 2, 5
    right.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    right.yaxis.set_minor_formatter(NullFormatter())
    right.axhline(1, color="gray", linewidth=0.8, linestyle="--")
    right.set_xlabel("block (the gradient flows from right to left)")
    right.set_ylabel("gradient at the block's input\n(relative to the output's)")
    right.set_title("backward: gradient reaching each block")
    right.legend()
    right.grid(alpha=0.3, which="both")
    fig.tight_layout()
    ends = "; ".join(
        f"{name}: stream std {float(stream_std[name][-1]):.1f} after block {len(stream_std[name])}, "
        "gradient at block 1 "
        f"{float(norms[:, 0].min()):.2f}x to {float(norms[:, 0].max()):.2f}x over {norms.shape[0]} seeds"
        for name, norms in grad_norms.items()
        if name in stream_std
    )
    return with_alt_text(
        fig,
        "Left: the standard deviation of the residual stream after each block. Right, on a log scale: the "
        f"gradient reaching each block's input relative to the output's, one thin line per seed. {ends}.",
    )


def show_receptive_fields(
    masks: torch.Tensor, titles: list[str], source: tuple[int, int] = (0, 0), size: float = 2.6
) -> plt.Figure:
    """Draw, on the patch grid, which patches one output patch depends on, one panel per model.

    Args:
        masks: (panels, rows, cols) boolean, True where the input patch is seen.
        titles: one title per panel.
        source: (row, col) of the output patch whose view is drawn (marked with a star).
    """
    check_tensor(masks, "boolean masks shaped (panels, rows, cols)", ndim=3, nonempty=True)
    if masks.dtype != torch.bool:
        raise ValueError(f"expected boolean masks shaped (panels, rows, cols), got {masks.dtype} {tuple(masks.shape)}")
    check_names(titles, masks.shape[0], "titles, one per mask")
    panels, rows, cols = masks.shape
    if len(source) != 2 or not (0 <= source[0] < rows and 0 <= source[1] < cols):
        raise ValueError(f"source {source!r} is no (row, col) patch of the {rows} x {cols} grid")
    cmap = ListedColormap(["#e8e8e8", "#3b75af"])  # unseen, seen
    fig, axes = plt.subplots(1, panels, figsize=(size * panels, size + 0.4), dpi=DPI, squeeze=False)
    for ax, mask, title in zip(axes[0], masks, titles):
        ax.imshow(mask.cpu().numpy().astype(float), cmap=cmap, vmin=0, vmax=1)
        ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.8)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.plot(source[1], source[0], marker="*", color="gold", markersize=12, markeredgecolor="black")
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    seen = "; ".join(f"{title}: {int(mask.sum())} of {rows * cols}" for mask, title in zip(masks, titles))
    return with_alt_text(
        fig,
        f"On the {rows} x {cols} patch grid, in blue, the input patches the output at patch {tuple(source)} "
        f"(a star) depends on, one panel per model. Patches seen: {seen}.",
    )


# One encoder block, bottom to top, in each order: what draw_encoder_blocks draws. "split" is where a
# residual connection leaves the stream, "add" where it comes back (the ⊕).
BLOCK_STEPS = {
    "pre-norm": (
        ("in", "tokens x (B, T, D)"),
        ("split", ""),
        ("norm", "LayerNorm (norm1)"),
        ("attn", "multi-head attention"),
        ("add", ""),
        ("split", ""),
        ("norm", "LayerNorm (norm2)"),
        ("mlp", "MLP (fc1, GELU, fc2)"),
        ("add", ""),
        ("out", "tokens out (B, T, D)"),
    ),
    "post-norm": (
        ("in", "tokens x (B, T, D)"),
        ("split", ""),
        ("attn", "multi-head attention"),
        ("add", ""),
        ("norm", "LayerNorm (norm1)"),
        ("split", ""),
        ("mlp", "MLP (fc1, GELU, fc2)"),
        ("add", ""),
        ("norm", "LayerNorm (norm2)"),
        ("out", "tokens out (B, T, D)"),
    ),
}
BLOCK_TITLES = {"pre-norm": "pre-norm (ViT)", "post-norm": "post-norm (original Transformer)"}
_BOX_COLORS = {"norm": "#f6e39b", "attn": "#f4b183", "mlp": "#9dc3e6"}


def norms_on_the_stream(order: str) -> int:
    """How many LayerNorms the residual stream itself passes through in one block of `order`
    (the boxes between the splits and adds of BLOCK_STEPS that are not inside a branch)."""
    if order not in BLOCK_STEPS:
        raise ValueError(f"order must be one of {list(BLOCK_STEPS)}, got {order!r}")
    on_stream, inside_branch = 0, False
    for kind, _ in BLOCK_STEPS[order]:
        if kind == "split":
            inside_branch = True
        elif kind == "add":
            inside_branch = False
        elif kind == "norm" and not inside_branch:
            on_stream += 1
    return on_stream


def draw_encoder_blocks(orders=("pre-norm", "post-norm"), size: float = 3.4) -> plt.Figure:
    """One encoder block per panel, side by side, drawn bottom to top (as in the ViT paper's
    Figure 1): the sub-layers as boxes, each residual connection as a line from where it leaves
    the stream to its ⊕. A panel's title says how many LayerNorms sit on the stream itself.

    Args:
        orders: keys of BLOCK_STEPS ("pre-norm", "post-norm"), one panel each.
    """
    if isinstance(orders, str) or not isinstance(orders, list | tuple) or not orders:
        raise ValueError(f"orders must be a non-empty list of {list(BLOCK_STEPS)}, got {orders!r}")
    for order in orders:
        if order not in BLOCK_STEPS:
            raise ValueError(f"order must be one of {list(BLOCK_STEPS)}, got {order!r}")
    fig, axes = plt.subplots(1, len(orders), figsize=(size * 1.3 * len(orders), size * 1.6), dpi=DPI, squeeze=False)
    for ax, order in zip(axes[0], orders):
        steps = BLOCK_STEPS[order]
        split_at = None
        for y, (kind, label) in enumerate(steps):
            if y > 0:  # the stream, from the step below to this one
                ax.annotate("", xy=(0, y - 0.28), xytext=(0, y - 0.72), arrowprops=dict(arrowstyle="-|>", lw=1.2))
            if kind in _BOX_COLORS:
                ax.add_patch(
                    plt.Rectangle((-1.35, y - 0.28), 2.7, 0.56, facecolor=_BOX_COLORS[kind], edgecolor="black", lw=1)
                )
                ax.text(0, y, label, ha="center", va="center", fontsize=8)
            elif kind == "add":
                ax.add_patch(plt.Circle((0, y), 0.22, facecolor="white", edgecolor="black", lw=1.2))
                ax.text(0, y, "+", ha="center", va="center", fontsize=12)
                ax.plot([0, -1.75, -1.75], [split_at, split_at, y], color="black", lw=1.2)  # the residual
                ax.annotate("", xy=(-0.22, y), xytext=(-1.75, y), arrowprops=dict(arrowstyle="-|>", lw=1.2))
            elif kind == "split":
                split_at = y
                ax.plot([0], [y], marker="o", color="black", markersize=4)
            else:  # in, out
                ax.text(0, y, label, ha="center", va="center", fontsize=9, fontweight="bold")
        ax.set_xlim(-2.1, 1.6)
        ax.set_ylim(-0.6, len(steps) - 0.4)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"{BLOCK_TITLES[order]}\nLayerNorms on the stream: {norms_on_the_stream(order)}", fontsize=10)
    fig.tight_layout()
    panels = " ".join(
        f"{BLOCK_TITLES[order]}, bottom to top: "
        + ", ".join("add" if kind == "add" else label for kind, label in BLOCK_STEPS[order] if label or kind == "add")
        + f"; LayerNorms on the stream: {norms_on_the_stream(order)}."
        for order in orders
    )
    return with_alt_text(fig, f"One encoder block per panel, each residual a line to its add. {panels}")
