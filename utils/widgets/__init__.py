"""Interactive explorers for the lessons, built on ipywidgets + matplotlib: Part I's here, each
Part II lesson's in a module of its own (`utils.widgets.stability`, ...), on the same StaticPicture.

Each widget takes tensors (never notebook globals), exposes its controls as attributes so that
tests can drive them, and redraws only its own figure when a control moves. Inputs that do not
fit each other raise a ValueError when the widget is built, not on a later slider move. Display
one by leaving it as a cell's last expression, or with `display(widget)`: Jupyter shows the live
widget, and a view without a kernel (GitHub, nbviewer, the site) its picture (`StaticPicture`).
"""

import base64
import html
import io
import re
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from utils.embeddings import neighbour_similarity, pos_embed_similarity
from utils.inspection import attention_rollout, attention_share
from utils.patches import to_2tuple
from utils.runtime import eval_mode
from utils.validation import WrongTypeError, check_positive, check_tensor, check_whole
from utils.vit import VisionTransformer
from utils.viz.core import DPI, check_image, check_image_batch, check_names, to_numpy_image
from utils.viz.embeddings import check_pos_table

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"  # the output type of a live widget


class StaticPicture:
    """Mixin for an explorer (an ipywidgets box that draws into `self.fig`): its display carries,
    beside the live widget, a PNG of the figure as it is now and a line naming the controls' values,
    so that a notebook seen without a kernel (GitHub, nbviewer, the site) shows a picture, not
    `AttentionExplorer(children=(HBox(...`. Jupyter front ends rank the live widget above the PNG.

    The picture travels as an `<img>` in text/html whose alt text (`alt_text`) says what it shows
    and its numbers now (a screen reader, the site), as `utils.viz.core.with_alt_text` does for
    the lessons' figures; the class says what it draws in `shows`.

    One bundle, from `_repr_mimebundle_`, serves ipywidgets 8 (IPython asks that) and ipywidgets 7
    (Google Colab's), whose `Widget._ipython_display_` would publish a bundle of its own: IPython
    prefers that method, and falls back to `_repr_mimebundle_` when it raises NotImplementedError
    (ipympl's figure widget does the same). The class that mixes it in names it first,
    `class X(StaticPicture, widgets.VBox)`, and defines `state_line`.
    """

    fig: plt.Figure
    summary: widgets.HTML  # the numbers under the figure, for what it draws now
    shows: str = ""  # what the picture shows, in words: the start of its alt text

    def state_line(self) -> str:
        """The controls' values in words, e.g. "image 0, class token: layer 2, mean of the heads"."""
        raise NotImplementedError(f"{type(self).__name__} must say its state in state_line()")

    def png(self) -> bytes:
        """The figure as it is now: a PNG of its own size, at its own DPI."""
        buffer = io.BytesIO()
        self.fig.savefig(buffer, format="png", dpi=self.fig.dpi)
        return buffer.getvalue()

    def alt_text(self) -> str:
        """What the picture shows, the controls' values and the numbers under it, e.g. "One query's
        attention over the image as a heat map (image 0, class token: layer 3, mean of the heads):
        top patch (3, 4) holds 21% of the weight, ..."."""
        numbers = html.unescape(re.sub(r"<[^>]+>", "", self.summary.value))  # the summary's words
        return " ".join(f"{self.shows} ({self.state_line()}): {numbers}".split())

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """{text/plain, text/html (the picture: a base64 PNG in an <img> with its alt text), and the
        live widget while it is open}."""
        png = base64.b64encode(self.png()).decode("ascii")
        bundle = {
            "text/plain": f"{type(self).__name__}: {self.state_line()} (interactive in Jupyter)",
            "text/html": f'<img alt="{html.escape(self.alt_text())}" src="data:image/png;base64,{png}">',
        }
        if self._view_name is not None and self.comm is not None:  # closed: the last picture only
            bundle[WIDGET_VIEW] = {"version_major": 2, "version_minor": 0, "model_id": self._model_id}
            if hasattr(self, "_handle_displayed"):  # ipywidgets 7: run the on_displayed hooks, as it would
                self._handle_displayed()
        return bundle

    if hasattr(widgets.Widget, "_ipython_display_"):  # ipywidgets 7

        def _ipython_display_(self, **kwargs):
            raise NotImplementedError  # IPython: use _repr_mimebundle_ instead


def show_in(output: widgets.Output, fig: plt.Figure) -> None:
    """Replace what `output` shows with the figure as it is now (a fresh picture each time:
    display updates by id do not reach the inside of an Output widget in JupyterLab)."""
    with output:
        output.clear_output(wait=True)
        display(fig)


class PatchSlicer(StaticPicture, widgets.VBox):
    """A patch-size slider over an image (lesson 1): redraws the patch grid and reports the
    number of tokens and the size of the attention matrix they imply.

    Args:
        image: (C, H, W) in [0, 1]; the slider offers the patch sizes that divide H and W.
    """

    shows = "The image with the patch grid of the chosen size drawn over it"

    def __init__(self, image: torch.Tensor, patch_size: int = 16, size: float = 4.0):
        C, H, W = check_image(image).shape
        check_whole(patch_size, "patch_size")
        check_positive(size, "size")
        sizes = [p for p in range(2, min(H, W) + 1) if H % p == 0 and W % p == 0 and (H // p) * (W // p) <= 4096]
        if not sizes:
            raise ValueError(
                f"no patch size from 2 px up cuts the image ({H} x {W}) into whole patches (at most 4,096): "
                "crop or resize it first"
            )
        if patch_size not in sizes:
            raise ValueError(f"patch_size {patch_size} must divide the image ({H} x {W}); choose from {sizes}")
        self.image = image
        self.patch_size = widgets.SelectionSlider(options=sizes, value=patch_size, description="patch size")
        self.summary = widgets.HTML()
        self.output = widgets.Output()
        self.fig, self.ax = plt.subplots(figsize=(size, size * H / W), dpi=DPI)
        self.ax.imshow(to_numpy_image(image), cmap="gray")
        self.lines = []
        plt.close(self.fig)  # shown in self.output, not again at the end of the cell
        self.patch_size.observe(lambda change: self.redraw(), names="value")
        super().__init__([self.patch_size, self.summary, self.output])
        self.redraw()

    def redraw(self) -> None:
        """Draw the grid for the chosen patch size and update the numbers."""
        P = self.patch_size.value
        C, H, W = self.image.shape
        rows, cols = H // P, W // P
        tokens = rows * cols + 1  # with the class token
        for line in self.lines:
            line.remove()
        self.lines = [self.ax.axvline(x - 0.5, color="white", linewidth=0.6) for x in range(0, W + 1, P)]
        self.lines += [self.ax.axhline(y - 0.5, color="white", linewidth=0.6) for y in range(0, H + 1, P)]
        self.ax.set_title(f"{rows} x {cols} patches of {P} x {P} px")
        self.summary.value = (
            f"{rows * cols:,} patches + 1 class token = <b>{tokens:,} tokens</b>; "
            f"attention matrix {tokens:,} x {tokens:,} = <b>{tokens * tokens:,}</b> entries per head"
        )
        show_in(self.output, self.fig)

    def state_line(self) -> str:
        """E.g. "patch size 16 px: 14 x 14 patches + 1 class token = 197 tokens"."""
        P = self.patch_size.value
        C, H, W = self.image.shape
        tokens = (H // P) * (W // P) + 1
        return f"patch size {P} px: {H // P} x {W // P} patches + 1 class token = {tokens:,} tokens"


class SoftmaxTemperature(StaticPicture, widgets.VBox):
    """A slider on the scale of attention scores (lesson 3): the softmax weights sharpen as the
    scale grows and flatten as it shrinks.

    Args:
        scores: (N,) one query's raw scores over N keys.
    """

    shows = "A bar chart of the softmax weights of one query's scores times the scale, one bar per key"

    def __init__(self, scores: torch.Tensor, scale: float = 1.0, size: float = 4.0):
        check_tensor(scores, "one row of scores (N,)", ndim=1, nonempty=True)
        if not scores.float().isfinite().all():
            raise ValueError(f"expected finite scores, got {scores.tolist()}")
        if not 0.01 <= check_positive(scale, "scale") <= 100:
            raise ValueError(f"scale must be between 0.01 and 100 (the slider's range), got {scale}")
        check_positive(size, "size")
        self.scores = scores.detach().float()
        self.scale = widgets.FloatLogSlider(value=scale, base=10, min=-2, max=2, step=0.05, description="scale")
        self.summary = widgets.HTML()
        self.output = widgets.Output()
        self.fig, self.ax = plt.subplots(figsize=(size, 0.6 * size), dpi=DPI)
        self.bars = self.ax.bar(range(len(self.scores)), torch.zeros(len(self.scores)).tolist())
        self.ax.set_ylim(0, 1)
        self.ax.set_xlabel("key")
        self.ax.set_ylabel("weight")
        plt.close(self.fig)
        self.scale.observe(lambda change: self.redraw(), names="value")
        super().__init__([self.scale, self.summary, self.output])
        self.redraw()

    @property
    def weights(self) -> torch.Tensor:
        """(N,) softmax(scale * scores): what the bars show."""
        return torch.softmax(self.scale.value * self.scores, dim=-1)

    def redraw(self) -> None:
        weights = self.weights
        for bar, weight in zip(self.bars, weights.tolist()):
            bar.set_height(weight)
        entropy = -(weights * weights.clamp_min(1e-12).log()).sum().item()
        self.ax.set_title(f"softmax({self.scale.value:.2f} x scores)")
        self.summary.value = f"largest weight <b>{weights.max():.2f}</b>, entropy {entropy:.2f} nats"
        show_in(self.output, self.fig)

    def state_line(self) -> str:
        """E.g. "softmax(1.00 x scores) over 4 keys"."""
        return f"softmax({self.scale.value:.2f} x scores) over {len(self.scores)} keys"


def _patch_outline(ax: plt.Axes, patch_size: int, color: str = "cyan") -> plt.Rectangle:
    """A hidden square outline of one patch on `ax`, moved with `set_xy`."""
    box = plt.Rectangle((-0.5, -0.5), patch_size, patch_size, fill=False, edgecolor=color, linewidth=2)
    box.set_visible(False)
    ax.add_patch(box)
    return box


class AttentionExplorer(StaticPicture, widgets.VBox):
    """Where a ViT looks (lesson 7): one query token's attention over the image, as a heat map on
    the picture, with the same query's map in every head of the layer beside it.

    Controls (attributes): `image`, `layer` (1 = first block), `head` (-1 = mean of the heads),
    `mode` ("attention": that layer's weights; "rollout": attention rollout through layers
    1 .. layer, heads averaged), `query` ("class token" or "patch") and `row` / `col` (the query
    patch). The drawn map is `self.map` (rows, cols): the query's weights on the patches.

    Args:
        model: a `VisionTransformer`; run once per image shown, in eval mode, without gradients.
        images: (B, C, H, W) in [0, 1], the size the model expects.
        labels: optional (B,) true class indices, and `classes` the names of all the model's classes.
        regions: optional (B, rows, cols) bool patches of interest (e.g. the objects); the
            summary then reports the share of the map that falls on them.
        preprocess: optional function applied to the images before the model (e.g.
            utils.imagenet.normalize for the published ViT-B/16); the picture shows them as given.
    """

    shows = "One query's attention over the image as a heat map on the picture, and its map in every head"

    def __init__(
        self,
        model,
        images: torch.Tensor,
        labels: torch.Tensor | None = None,
        classes: list[str] | None = None,
        regions: torch.Tensor | None = None,
        preprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
        size: float = 3.2,
    ):
        if not isinstance(model, VisionTransformer):
            raise WrongTypeError(
                f"expected the course's VisionTransformer, got a {type(model).__name__} "
                "(a transformers ViT? convert it with utils.pretrained.from_hf)"
            )
        config = model.config
        rows, cols = model.patch_embed.grid_size
        _check_explorer_images(images, (config.in_channels, *model.patch_embed.image_size))
        B = len(images)
        if regions is not None:
            _check_regions(regions, (B, rows, cols))
        _check_labels_and_classes(labels, classes, B, config.num_classes)
        if preprocess is not None and not callable(preprocess):
            raise WrongTypeError(f"preprocess must be a function of the images, got a {type(preprocess).__name__}")
        check_positive(size, "size")
        self.model, self.images, self.labels, self.classes, self.regions = model, images, labels, classes, regions
        self.preprocess = preprocess or (lambda images: images)
        self.grid_size, self.patch_size = (rows, cols), model.patch_embed.patch_size
        self.prefix = model.num_prefix_tokens
        self._cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

        heads = config.num_heads
        queries = ["class token", "patch"] if self.prefix else ["patch"]
        self.image = widgets.IntSlider(value=0, min=0, max=len(images) - 1, description="image")
        self.mode = widgets.ToggleButtons(options=["attention", "rollout"], description="show")
        self.layer = widgets.IntSlider(value=config.depth, min=1, max=config.depth, description="layer")
        self.head = widgets.Dropdown(
            options=[("mean", -1)] + [(str(h + 1), h) for h in range(heads)], description="head"
        )
        self.query = widgets.ToggleButtons(options=queries, description="query")
        self.row = widgets.IntSlider(value=rows // 2, min=0, max=rows - 1, description="query row")
        self.col = widgets.IntSlider(value=cols // 2, min=0, max=cols - 1, description="query col")
        self.summary = widgets.HTML()
        self.output = widgets.Output()

        # the picture with the map on top (left), the heads of the layer (right)
        head_cols = -(-heads // 2)  # two rows of heads
        self.fig = plt.figure(figsize=(size * (1 + head_cols / 2), size), dpi=DPI)
        grid = self.fig.add_gridspec(2, 2 + head_cols)
        self.ax = self.fig.add_subplot(grid[:, :2])
        H, W = model.patch_embed.image_size
        extent = (-0.5, W - 0.5, H - 0.5, -0.5)  # the map's cells cover the image's patches
        self.picture = self.ax.imshow(to_numpy_image(images[0]), cmap="gray")
        self.overlay = self.ax.imshow(
            np.zeros((rows, cols)), cmap="inferno", alpha=0.6, extent=extent, interpolation="nearest"
        )
        self.box = _patch_outline(self.ax, self.patch_size)
        self.ax.set_axis_off()
        self.head_axes = [self.fig.add_subplot(grid[h // head_cols, 2 + h % head_cols]) for h in range(heads)]
        self.head_images = [
            ax.imshow(np.zeros((rows, cols)), cmap="inferno", interpolation="nearest") for ax in self.head_axes
        ]
        for h, ax in enumerate(self.head_axes):
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"head {h + 1}", fontsize=8)
        self.heads_title = self.fig.text(0.5 + 0.5 / (1 + head_cols / 2), 0.97, "", ha="center", va="top", fontsize=9)
        self.fig.tight_layout(rect=(0, 0, 1, 0.93))
        plt.close(self.fig)

        for control in (self.image, self.mode, self.layer, self.head, self.query, self.row, self.col):
            control.observe(lambda change: self.redraw(), names="value")
        controls = widgets.HBox(
            [
                widgets.VBox([self.image, self.mode, self.layer, self.head]),
                widgets.VBox([self.query, self.row, self.col]),
            ]
        )
        super().__init__([controls, self.summary, self.output])
        self.redraw()

    def attention(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(attn (depth, heads, T, T), logits (num_classes,)) for image `index`, computed once."""
        if index not in self._cache:
            with eval_mode(self.model), torch.no_grad():
                logits, attn = self.model(self._preprocessed(index), return_attention=True)
            self._cache[index] = attn[:, 0].float().cpu(), logits[0].float().cpu()
        return self._cache[index]

    def _preprocessed(self, index: int) -> torch.Tensor:
        """Image `index` (1, C, H, W) through `preprocess`, checked: the same shape, finite values."""
        image = self.images[index : index + 1]
        out = self.preprocess(image)
        if not isinstance(out, torch.Tensor) or out.shape != image.shape:
            got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else f"a {type(out).__name__}"
            raise ValueError(
                f"preprocess turned image {index} of shape {tuple(image.shape)} into {got}: it must return a "
                f"tensor of the same shape (the size the model takes); resize the images before the explorer"
            )
        if not torch.isfinite(out).all():
            raise ValueError(f"preprocess turned image {index} into values holding NaN or infinity")
        return out

    @property
    def query_index(self) -> int:
        """The query's token index: 0 for the class token, prefix + row * cols + col for a patch."""
        if self.query.value == "class token":
            return 0
        return self.prefix + self.row.value * self.grid_size[1] + self.col.value

    def weights(self) -> torch.Tensor:
        """(T, T): the matrix the map is a row of, for the current controls."""
        attn, _ = self.attention(self.image.value)
        if self.mode.value == "rollout":
            return attention_rollout(attn[: self.layer.value, None])[0]  # through layers 1 .. layer
        layer = attn[self.layer.value - 1]  # (heads, T, T)
        return layer.mean(dim=0) if self.head.value < 0 else layer[self.head.value]

    def redraw(self) -> None:
        """Recompute the map for the current controls and redraw the picture and the heads."""
        rows, cols = self.grid_size
        index, q = self.image.value, self.query_index
        attn, logits = self.attention(index)
        self.head.disabled = self.mode.value == "rollout"  # rollout averages the heads
        self.row.disabled = self.col.disabled = self.query.value != "patch"
        self.map = self.weights()[q, self.prefix :].reshape(rows, cols)  # (rows, cols)
        self.picture.set_data(to_numpy_image(self.images[index]))
        self.overlay.set_data(self.map.numpy())
        self.overlay.set_clim(0, max(self.map.max().item(), 1e-9))
        heads = attn[self.layer.value - 1, :, q, self.prefix :].reshape(-1, rows, cols)  # (heads, rows, cols)
        top = max(heads.max().item(), 1e-9)  # one colour scale for all heads: compare them
        for h, (ax, image) in enumerate(zip(self.head_axes, self.head_images)):
            image.set_data(heads[h].numpy())
            image.set_clim(0, top)
            chosen = self.mode.value == "attention" and self.head.value == h
            for spine in ax.spines.values():
                spine.set_edgecolor("cyan" if chosen else "black")
                spine.set_linewidth(3 if chosen else 0.8)
        self.box.set_visible(self.query.value == "patch")
        P = self.patch_size
        self.box.set_xy((self.col.value * P - 0.5, self.row.value * P - 0.5))
        self.ax.set_title(self._shown(), fontsize=9)
        self.heads_title.set_text(f"the heads of layer {self.layer.value}, same query")
        self.summary.value = self._describe(index, logits)
        show_in(self.output, self.fig)

    def _shown(self) -> str:
        """The query and the map, e.g. "class token: layer 2, head 1" or "patch (3, 4): rollout through layer 5"."""
        what = (
            f"rollout through layer {self.layer.value}"
            if self.mode.value == "rollout"
            else (
                f"layer {self.layer.value}, "
                + ("mean of the heads" if self.head.value < 0 else f"head {self.head.value + 1}")
            )
        )
        who = "class token" if self.query.value == "class token" else f"patch ({self.row.value}, {self.col.value})"
        return f"{who}: {what}"

    def state_line(self) -> str:
        """E.g. "image 0, class token: layer 12, mean of the heads"."""
        return f"image {self.image.value}, {self._shown()}"

    def _describe(self, index: int, logits: torch.Tensor) -> str:
        """One line of numbers for what is drawn: the top patch, the share on the regions, the prediction."""
        rows, cols = self.grid_size
        share = self.map.sum().item()  # the rest goes to the class token
        top = int(self.map.argmax())
        parts = [f"top patch ({top // cols}, {top % cols}) holds <b>{self.map.max():.0%}</b> of the weight"]
        if self.prefix:
            parts.append(f"the class token {1 - share:.0%}")
        if self.regions is not None:
            region = self.regions[index]
            on = attention_share(self.map[None], region[None]).item()
            parts.append(f"on the marked patches <b>{on:.0%}</b> (uniform: {region.float().mean():.0%})")
        prediction = int(logits.argmax())
        name = (lambda i: self.classes[i]) if self.classes else str
        predicted = f"predicted <b>{name(prediction)}</b>"
        if self.labels is not None:
            predicted += f" (true: {name(int(self.labels[index]))})"
        return "; ".join(parts) + "<br>" + predicted


def _check_explorer_images(images, expected: tuple[int, int, int]) -> None:
    """A ValueError unless `images` is a non-empty batch (B, C, H, W) of the (C, H, W) the model takes."""
    shape = f"(B, {', '.join(map(str, expected))})"
    if not isinstance(images, torch.Tensor):
        raise WrongTypeError(f"expected images {shape} as a torch.Tensor, got a {type(images).__name__}")
    if images.ndim != 4 or tuple(images.shape[1:]) != expected:
        hint = ""
        if images.ndim == 4 and tuple(images.shape[1:]) == (*expected[1:], expected[0]):
            hint = ": the channels are last; use images.permute(0, 3, 1, 2)"
        elif tuple(images.shape) == expected:
            hint = ": one image; add the batch axis, images[None]"
        raise ValueError(f"expected images {shape}, got {tuple(images.shape)}{hint}")
    if len(images) == 0:
        raise ValueError(f"expected at least one image {shape}, got an empty batch {tuple(images.shape)}")
    check_image_batch(images, f"images {shape}")
    finite = torch.isfinite(images.detach().flatten(1)).all(1)  # (B,)
    if not finite.all():
        first = int((~finite).nonzero()[0])
        raise ValueError(
            f"expected images {shape} of finite values, image {first} holds NaN or infinity "
            f"({int((~finite).sum())} of {len(images)} images do)"
        )


def _check_regions(regions, expected: tuple[int, int, int]) -> None:
    """A ValueError unless `regions` is a bool tensor (B, rows, cols) of this shape."""
    check_tensor(regions, "regions (B, rows, cols)", ndim=3, nonempty=True)
    if tuple(regions.shape) != expected:
        raise ValueError(f"expected regions (B, rows, cols) = {expected}, got {tuple(regions.shape)}")
    if regions.dtype != torch.bool:
        raise ValueError(f"expected regions of bools (True: a patch of interest), got {regions.dtype}: use .bool()")


def _check_labels_and_classes(labels, classes, count: int, num_classes: int) -> None:
    """A ValueError unless labels (one class index per image) and classes (one name per class) fit the model."""
    if num_classes == 0 and (labels is not None or classes is not None):
        raise ValueError("the model has no classification head (num_classes=0): pass no labels or classes")
    if classes is not None:
        check_names(classes, num_classes, f"class names, one per output of the model ({num_classes})")
    if labels is not None:
        try:
            labels = torch.as_tensor(labels)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(
                f"expected labels (B,) = ({count},), one class index per image, got {labels!r:.60}"
            ) from None
        if tuple(labels.shape) != (count,) or labels.is_floating_point() or labels.dtype == torch.bool:
            got = f"{labels.dtype} {tuple(labels.shape)}"
            raise ValueError(f"expected labels (B,) = ({count},), one class index per image, got {got}")
        if not (labels.min() >= 0 and labels.max() < num_classes):
            low, high = labels.min().item(), labels.max().item()
            raise ValueError(f"labels must be class indices 0 .. {num_classes - 1}, got {low} .. {high}")


def _similarity_mosaic(similarity: torch.Tensor, rows: int, cols: int) -> np.ndarray:
    """Lay every position's similarity map on its grid place, maps 1 cell apart (NaN between).

    Args:
        similarity: (N, N), N = rows * cols.
    Returns:
        (rows * (rows + 1) - 1, cols * (cols + 1) - 1) array; tile (r, c) is row r * cols + c.
    """
    maps = similarity.reshape(rows, cols, rows, cols).float().numpy()  # (r, c, r', c')
    mosaic = np.full((rows, rows + 1, cols, cols + 1), np.nan, dtype=np.float32)
    mosaic[:, :rows, :, :cols] = maps.transpose(0, 2, 1, 3)  # (r, r', c, c')
    return mosaic.reshape(rows * (rows + 1), cols * (cols + 1))[:-1, :-1]


class PositionSimilarityExplorer(StaticPicture, widgets.VBox):
    """What each position embedding is close to (lesson 7; ViT paper, Fig. 7 centre): on the
    left every position's cosine-similarity map on its place in the grid, on the right the
    chosen position's map, large.

    Controls (attributes): `table` (which position table), `step` (the training step, for the
    snapshots), `row` / `col` (the chosen position). `self.similarity` (N, N) and `self.map`
    (rows, cols) are what is drawn.

    Args:
        tables: {name: (1, prefix + N, D) position table}, e.g. trained, at initialisation, sin-cos;
            all of one width D.
        grid_size: patches per side (or (rows, cols)), N = rows * cols.
        snapshots: optional {"steps": [...], "tables": [(1, prefix + N, D), ...]} taken during
            training (a shipped checkpoint's `pos_embed_snapshots`), one table per step: adds the
            table "learned, during training" and the step slider.
    """

    DURING_TRAINING = "learned, during training"
    shows = "Every position embedding's cosine similarity to the others, drawn on the grid, the chosen one's large"

    def __init__(
        self,
        tables: dict[str, torch.Tensor],
        grid_size: int | tuple[int, int],
        num_prefix_tokens: int = 1,
        snapshots: dict | None = None,
        size: float = 3.5,
    ):
        rows, cols = to_2tuple(grid_size, "grid_size")
        if rows * cols < 2:
            raise ValueError(f"expected a grid of at least 2 positions to compare, got {rows} x {cols}")
        check_whole(num_prefix_tokens, "num_prefix_tokens", minimum=0)
        check_positive(size, "size")
        if not isinstance(tables, dict):
            raise WrongTypeError(f"expected tables as a dict {{name: (1, T, D) table}}, got a {type(tables).__name__}")
        steps, snapshot_tables = _check_snapshots(snapshots, tables, self.DURING_TRAINING)
        if not tables and not steps:
            raise ValueError("expected at least one position table")
        named = [*tables.items(), *zip(steps, snapshot_tables)]
        for name, table in named:
            check_pos_table(table, (rows, cols), num_prefix_tokens, name)
            if not table.isfinite().all():
                raise ValueError(f"table {name!r} holds NaN or infinity")
        widths = {name: table.shape[-1] for name, table in named}
        if len(set(widths.values())) > 1:
            raise ValueError(f"expected tables of one width D, got widths {widths}")
        self.grid_size, self.prefix = (rows, cols), num_prefix_tokens
        self.tables = {name: table.detach().float().cpu() for name, table in tables.items()}
        if steps:
            self.snapshots = dict(zip(steps, (t.detach().float().cpu() for t in snapshot_tables)))
            self.tables[self.DURING_TRAINING] = None
        self.table = widgets.Dropdown(options=list(self.tables), description="table")
        self.step = widgets.SelectionSlider(options=steps or [0], value=(steps or [0])[-1], description="step")
        self.row = widgets.IntSlider(value=rows // 2, min=0, max=rows - 1, description="row")
        self.col = widgets.IntSlider(value=cols // 2, min=0, max=cols - 1, description="col")
        self.summary = widgets.HTML()
        self.output = widgets.Output()

        self.fig, (self.mosaic_ax, self.map_ax) = plt.subplots(1, 2, figsize=(2 * size, size), dpi=DPI)
        cmap = plt.get_cmap("viridis").with_extremes(bad="white")  # NaN gaps between the tiles
        blank = _similarity_mosaic(torch.zeros(rows * cols, rows * cols), rows, cols)
        self.mosaic_image = self.mosaic_ax.imshow(blank, cmap=cmap, interpolation="nearest")
        self.map_image = self.map_ax.imshow(np.zeros((rows, cols)), cmap=cmap, interpolation="nearest")
        self.tile_box = plt.Rectangle((0, 0), cols, rows, fill=False, edgecolor="red", linewidth=1.5)
        self.mosaic_ax.add_patch(self.tile_box)
        (self.marker,) = self.map_ax.plot([0], [0], "o", color="red", markersize=6)
        self.mosaic_ax.set_title("every position's map, on its place", fontsize=9)
        for ax in (self.mosaic_ax, self.map_ax):
            ax.set_xticks([])
            ax.set_yticks([])
        self.fig.colorbar(self.map_image, ax=self.map_ax, fraction=0.046, pad=0.04, label="cosine similarity")
        plt.close(self.fig)

        for control in (self.table, self.step, self.row, self.col):
            control.observe(lambda change: self.redraw(), names="value")
        controls = widgets.HBox([widgets.VBox([self.table, self.step]), widgets.VBox([self.row, self.col])])
        super().__init__([controls, self.summary, self.output])
        self.redraw()

    def current_table(self) -> torch.Tensor:
        """(1, prefix + N, D): the chosen table (at the chosen step, for the snapshots)."""
        if self.table.value == self.DURING_TRAINING:
            return self.snapshots[self.step.value]
        return self.tables[self.table.value]

    def redraw(self) -> None:
        """Recompute the similarities for the chosen table and redraw both panels."""
        rows, cols = self.grid_size
        r, c = self.row.value, self.col.value
        self.step.disabled = self.table.value != self.DURING_TRAINING
        self.similarity = pos_embed_similarity(self.current_table(), self.prefix)  # (N, N)
        self.map = self.similarity[r * cols + c].reshape(rows, cols)  # (rows, cols)
        low = min(self.similarity.min().item(), 0.0)
        self.mosaic_image.set_data(_similarity_mosaic(self.similarity, rows, cols))
        self.map_image.set_data(self.map.numpy())
        for image in (self.mosaic_image, self.map_image):
            image.set_clim(low, 1.0)
        self.tile_box.set_xy((c * (cols + 1) - 0.5, r * (rows + 1) - 0.5))
        self.marker.set_data([c], [r])
        self.map_ax.set_title(f"position ({r}, {c}) vs all", fontsize=9)
        self.fig.suptitle(self._table_name(), fontsize=10)
        near, far = neighbour_similarity(self.similarity, (rows, cols))
        others = self.map.flatten().clone()
        others[r * cols + c] = -float("inf")  # not itself
        best = int(others.argmax())
        self.summary.value = (
            f"grid neighbours <b>{near:.2f}</b>, far apart <b>{far:.2f}</b>; position ({r}, {c}) is most "
            f"similar to ({best // cols}, {best % cols}): {others[best]:.2f}"
        )
        show_in(self.output, self.fig)

    def _table_name(self) -> str:
        """The chosen table's name, with the step for the snapshots."""
        during = self.table.value == self.DURING_TRAINING
        return self.table.value + (f", step {self.step.value}" if during else "")

    def state_line(self) -> str:
        """E.g. "table learned, position (7, 7)"."""
        return f"table {self._table_name()}, position ({self.row.value}, {self.col.value})"


def _check_snapshots(snapshots, tables: dict, during_training: str) -> tuple[list[int], list]:
    """The steps and tables of `snapshots` ({"steps": [...], "tables": [...]}, one table per step,
    the steps distinct), checked; ([], []) for None."""
    if snapshots is None:
        return [], []
    if not isinstance(snapshots, dict) or not {"steps", "tables"} <= snapshots.keys():
        raise ValueError(f"expected snapshots {{'steps': [...], 'tables': [...]}}, got {type(snapshots).__name__}")
    steps, snapshot_tables = list(snapshots["steps"]), list(snapshots["tables"])
    if len(steps) != len(snapshot_tables) or not steps:
        raise ValueError(
            f"expected one snapshot table per step (at least one), got {len(steps)} steps and "
            f"{len(snapshot_tables)} tables"
        )
    steps = [check_whole(step, f"snapshots['steps'][{i}]", minimum=0) for i, step in enumerate(steps)]  # NumPy's too
    if len(set(steps)) != len(steps):
        raise ValueError(f"expected distinct training steps, got {steps}")
    if during_training in tables:
        raise ValueError(f"the name {during_training!r} is the snapshots' own: name that table otherwise")
    return steps, snapshot_tables
