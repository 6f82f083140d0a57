"""Interactive explorers for the lessons, built on ipywidgets + matplotlib.

Each widget takes tensors (never notebook globals), exposes its controls as attributes so that
tests can drive them, and redraws only its own figure when a control moves. Display one by
leaving it as a cell's last expression, or with `display(widget)`.
"""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display

from utils.viz.core import DPI, to_numpy_image


def show_in(output: widgets.Output, fig: plt.Figure) -> None:
    """Replace what `output` shows with the figure as it is now (a fresh picture each time:
    display updates by id do not reach the inside of an Output widget in JupyterLab)."""
    with output:
        output.clear_output(wait=True)
        display(fig)


class PatchSlicer(widgets.VBox):
    """A patch-size slider over an image (lesson 1): redraws the patch grid and reports the
    number of tokens and the size of the attention matrix they imply.

    Args:
        image: (C, H, W) in [0, 1]; the slider offers the patch sizes that divide H and W.
    """

    def __init__(self, image: torch.Tensor, patch_size: int = 16, size: float = 4.0):
        C, H, W = image.shape
        sizes = [p for p in range(2, min(H, W) + 1) if H % p == 0 and W % p == 0 and (H // p) * (W // p) <= 4096]
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


class SoftmaxTemperature(widgets.VBox):
    """A slider on the scale of attention scores (lesson 3): the softmax weights sharpen as the
    scale grows and flatten as it shrinks.

    Args:
        scores: (N,) one query's raw scores over N keys.
    """

    def __init__(self, scores: torch.Tensor, scale: float = 1.0, size: float = 4.0):
        if scores.ndim != 1:
            raise ValueError(f"expected one row of scores (N,), got {tuple(scores.shape)}")
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
