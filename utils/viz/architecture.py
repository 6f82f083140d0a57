"""Lesson 1's map of the whole Vision Transformer, drawn by the course: image -> patches -> linear
projection (+ class token, + position embeddings) -> L encoder blocks -> LayerNorm -> head, with
the shape of every tensor for a given ViTConfig, and one encoder block opened up beside it; each
step labelled with the paper's equation or with the lesson that builds it."""

import re

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from utils.encoder import mlp_hidden_dim
from utils.patches import to_2tuple
from utils.validation import WrongTypeError, check_flag, check_whole, describe
from utils.vit import ViTConfig
from utils.viz.core import DPI, with_alt_text

# box colours: data (grey), the patch embedding of eq. 1 (blue), the encoder of eqs. 2-3 (orange),
# the output of eq. 4 (green)
COLOURS = {"data": "#eeeeee", "embed": "#cfe2f3", "encoder": "#fce5cd", "output": "#d9ead3"}


def _check_config(config) -> ViTConfig:
    if not isinstance(config, ViTConfig):
        raise WrongTypeError(f"expected a ViTConfig, e.g. ViTConfig.vit_b16(), got {describe(config)}")
    return config


def vit_shapes(config: ViTConfig, batch_size: int = 1) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor a VisionTransformer(config) makes on a batch of images, by name,
    in the order the model makes them.

    Args:
        config: the model's ViTConfig.
        batch_size: B, the number of images.
    Returns:
        {"image": (B, C, H, W), "patches": (B, N, C*P*P), "patch tokens": (B, N, D),
        "class token": (1, 1, D) (only with pool="cls"), "position table": (1, T, D) (unless
        pos_embed="none"), "tokens": (B, T, D) (z_0, the first block's input),
        "attention weights": (B, heads, T, T), "MLP hidden": (B, T, mlp_ratio * D),
        "encoder output": (B, T, D), "pooled": (B, D), "logits": (B, num_classes)}; without a
        head (num_classes=0) the "logits" are the pooled features (B, D).
    """
    config = _check_config(config)
    B = check_whole(batch_size, "batch_size")
    H, W = to_2tuple(config.image_size)
    C, P, D = config.in_channels, config.patch_size, config.embed_dim
    N, T = config.num_patches, config.num_tokens
    shapes = {"image": (B, C, H, W), "patches": (B, N, C * P * P), "patch tokens": (B, N, D)}
    if config.pool == "cls":
        shapes["class token"] = (1, 1, D)
    if config.pos_embed != "none":
        shapes["position table"] = (1, T, D)
    shapes |= {
        "tokens": (B, T, D),
        "attention weights": (B, config.num_heads, T, T),
        "MLP hidden": (B, T, mlp_hidden_dim(D, config.mlp_ratio)),
        "encoder output": (B, T, D),
        "pooled": (B, D),
        "logits": (B, config.num_classes or D),
    }
    return shapes


def _box(ax: plt.Axes, x: float, y: float, width: float, text: str, colour: str, height: float = 0.62) -> None:
    """A rounded box centred on (x, y) with `text` in it."""
    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=colour,
            edgecolor="#555555",
            linewidth=1.0,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=9)


def _arrow(ax: plt.Axes, start: tuple[float, float], end: tuple[float, float], color: str = "#444444") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=color, shrinkA=0, shrinkB=0))


def _shape_text(ax: plt.Axes, x: float, y: float, shape: tuple[int, ...], letters: str) -> None:
    """The shape as numbers, its letters in grey after it."""
    ax.text(x, y, str(shape), ha="left", va="center", fontsize=9, family="monospace")
    ax.text(x, y - 0.3, letters, ha="left", va="center", fontsize=8, color="#777777", family="monospace")


def show_architecture(
    config: ViTConfig, batch_size: int = 1, size: float = 10.0, by_lesson: bool = False
) -> plt.Figure:
    """Draw the ViT of `config` as the data flows through it, each step with the shape it outputs,
    and one pre-norm encoder block opened up (LN, multi-head self-attention, +, LN, MLP, +).

    Args:
        config: the model's ViTConfig (ViTConfig.vit_b16(), ViTConfig.tiny(), ...).
        batch_size: B, the number of images the shapes are drawn for.
        size: the figure's width in inches.
        by_lesson: label each step with the lesson that builds it (a roadmap), not with the
            ViT paper's equation that writes it.
    Returns:
        the matplotlib Figure.
    """
    by_lesson = check_flag(by_lesson, "by_lesson")
    shapes = vit_shapes(config, batch_size)
    P, D, L, heads = config.patch_size, config.embed_dim, config.depth, config.num_heads
    hidden = shapes["MLP hidden"][-1]
    with_cls, positions = config.pool == "cls", config.pos_embed
    token_letters = "(B, T = N + 1, D)" if with_cls else "(B, T = N, D)"

    steps = [  # (text in the box, colour, shape after it, its letters, equation, lesson)
        ("image", "data", shapes["image"], "(B, C, H, W)", "", ""),
        (f"cut into {P} x {P} patches\n(patchify)", "data", shapes["patches"], "(B, N, C*P*P)", "", "1"),
        (
            "linear projection E\n(PatchEmbedding: Conv2d, stride P)",
            "embed",
            shapes["patch tokens"],
            "(B, N, D)",
            "1",
            "1",
        ),
    ]
    if with_cls:
        steps.append(
            (
                f"prepend the class token $x_{{class}}$\n(cls_token: {shapes['class token']})",
                "embed",
                shapes["tokens"],
                token_letters,
                "1",
                "2",
            )
        )
    if positions != "none":
        kind = "learned" if positions == "learned" else "fixed 2-D sin-cos"
        table = f"{kind}, {shapes['position table']}"
        steps.append(
            (
                f"+ position embeddings $E_{{pos}}$\n(pos_embed: {table})",
                "embed",
                shapes["tokens"],
                token_letters,
                "1",
                "2",
            )
        )
    steps += [
        (
            f"L = {L} encoder blocks\n(blocks: EncoderBlock x {L})",
            "encoder",
            shapes["encoder output"],
            "(B, T, D)",
            "2-3",
            "5",
        ),
        ("final LayerNorm\n(norm)", "output", shapes["encoder output"], "(B, T, D)", "4", "5"),
        (
            "take the class token $z_L^0$" if with_cls else "mean over the N patch tokens",
            "output",
            shapes["pooled"],
            "(B, D)",
            "4" if with_cls else "",
            "5",
        ),
        (
            f"classifier head\n(head: Linear(D, {config.num_classes}))"
            if config.num_classes
            else "no head (num_classes = 0)",
            "output",
            shapes["logits"],
            "(B, classes)" if config.num_classes else "(B, D)",
            "",
            "5",
        ),
    ]

    rows = len(steps)
    fig, ax = plt.subplots(figsize=(size, size * 0.72), dpi=DPI)
    ax.set_xlim(0, 15)
    ax.set_ylim(-0.6, rows + 0.2)
    ax.set_axis_off()
    x, width, gap = 3.2, 4.2, 1.0  # the main column: centre, box width, distance between box centres
    ys = [rows - 0.4 - i * gap for i in range(rows)]
    encoder_y = None
    for (text, colour, shape, letters, equation, lesson), y in zip(steps, ys, strict=True):
        _box(ax, x, y, width, text, COLOURS[colour])
        if shape is not None:
            _shape_text(ax, x + width / 2 + 0.15, y + 0.12, shape, letters)
        label = (f"lesson {lesson}" if lesson else "") if by_lesson else (f"eq. {equation}" if equation else "")
        if label:
            ax.text(x - width / 2 - 0.12, y, label, ha="right", va="center", fontsize=8, color="#1f4e79")
        if y != ys[-1]:
            _arrow(ax, (x, y - 0.31), (x, y - gap + 0.31))
        if colour == "encoder":
            encoder_y = y

    # one encoder block, opened up: z' = z + MSA(LN(z)) (eq. 2), then z + MLP(LN(z')) (eq. 3)
    bx, bwidth, top = 12.0, 3.4, rows - 0.1
    inner = [  # (text in the box, the shape it makes, the lesson that builds it)
        ("LayerNorm (norm1)", None, "lesson 5"),
        (
            f"multi-head self-attention (attn)\n{heads} heads of {D // heads}",
            ("weights", shapes["attention weights"]),
            "lessons 3-4",
        ),
        ("+", None, "lesson 5"),
        ("LayerNorm (norm2)", None, "lesson 5"),
        (f"MLP (mlp): {D} -> {hidden} -> {D}\n(Linear, GELU, Linear)", ("hidden", shapes["MLP hidden"]), "lesson 5"),
        ("+", None, "lesson 5"),
    ]
    step = 1.0
    inner_ys = [top - 1.25 - i * step for i in range(len(inner))]
    frame_bottom = inner_ys[-1] - 0.95
    ax.add_patch(
        FancyBboxPatch(
            (bx - bwidth / 2 - 1.6, frame_bottom),
            bwidth + 2.4,
            top - frame_bottom,
            boxstyle="round,pad=0.02,rounding_size=0.2",
            facecolor="#fff8f0",
            edgecolor="#c27c0e",
            linewidth=1.2,
            linestyle="--",
        )
    )
    title = "one encoder block" if by_lesson else "one encoder block (pre-norm)"
    ax.text(bx, top - 0.3, title, ha="center", va="center", fontsize=10, weight="bold")
    ax.text(bx, inner_ys[0] + 0.72, f"in: {shapes['tokens']}", ha="center", va="center", fontsize=8)
    _arrow(ax, (bx, inner_ys[0] + 0.58), (bx, inner_ys[0] + 0.3))
    residual_x = bx + bwidth / 2 + 0.4
    branch_from = inner_ys[0] + 0.48
    for i, ((text, shape, lesson), y) in enumerate(zip(inner, inner_ys, strict=True)):
        if text == "+":
            ax.add_patch(plt.Circle((bx, y), 0.2, facecolor="white", edgecolor="#555555"))
            ax.text(bx, y, "+", ha="center", va="center", fontsize=11)
            # the residual: the block's (or the sub-layer's) input, added back
            ax.plot([bx, residual_x, residual_x], [branch_from, branch_from, y], color="#c27c0e", linewidth=1.2)
            _arrow(ax, (residual_x, y), (bx + 0.2, y), color="#c27c0e")
            label = "eq. 2: z' = z + MSA(LN(z))" if i == 2 else "eq. 3: z + MLP(LN(z'))"
            ax.text(
                bx - 0.3, y - 0.35, lesson if by_lesson else label, ha="right", va="center", fontsize=8, color="#1f4e79"
            )
            branch_from = y - 0.35
            edge = 0.2
        else:
            _box(ax, bx, y, bwidth, text, COLOURS["encoder"], height=0.6)
            if by_lesson:
                ax.text(bx - bwidth / 2 - 0.1, y, lesson, ha="right", va="center", fontsize=8, color="#1f4e79")
            if shape is not None:
                ax.text(bx - 0.12, y - 0.46, f"{shape[0]} {shape[1]}", ha="right", va="center", fontsize=8)
            edge = 0.3
        if i < len(inner) - 1:
            nxt = 0.2 if inner[i + 1][0] == "+" else 0.3
            _arrow(ax, (bx, y - edge), (bx, y - step + nxt))
    _arrow(ax, (bx, inner_ys[-1] - 0.2), (bx, frame_bottom + 0.3))
    ax.text(bx, frame_bottom + 0.18, f"out: {shapes['encoder output']}", ha="center", va="center", fontsize=8)
    if encoder_y is not None:  # tie the block in the column to its opened-up view
        ax.plot(
            [x + width / 2 + 2.3, bx - bwidth / 2 - 1.6],
            [encoder_y, encoder_y],
            color="#c27c0e",
            linestyle=":",
            linewidth=1.2,
        )
    H, W = shapes["image"][2:]
    fig.suptitle(
        f"ViT for {H} x {W} images: {P} px patches, D = {D}, L = {L} blocks, {heads} heads", fontsize=11, y=0.99
    )
    fig.subplots_adjust(left=0.0, right=1.0, top=0.95, bottom=0.0)
    flow = ", then ".join(  # each box's first line, its TeX symbol left out
        re.sub(r" ?\$[^$]*\$", "", text.split("\n")[0]) + f" {shape}" for text, _, shape, *_ in steps
    )
    return with_alt_text(
        fig,
        f"The ViT for {H} x {W} images as the data flows, each step with the shape it outputs: {flow}. "
        f"Beside it one pre-norm encoder block opened up: LayerNorm, {heads}-head self-attention, add, "
        f"LayerNorm, MLP {D} to {hidden} to {D}, add.",
    )
