"""Lesson 12's explorer: one query's RoPE scores against a key of the same content at every patch,
at the training grid and at a larger one, with the positions as they are or scaled into the
training range (position interpolation). Move the query: the pattern moves with it (a score
depends on the offset only); at the larger grid some offsets were never seen in training."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.patches import to_2tuple
from utils.rope import apply_rope, rope_angles, rope_sin_cos
from utils.validation import check_tensor
from utils.viz.core import DPI
from utils.widgets import StaticPicture, show_in


def rope_scores(q: torch.Tensor, k: torch.Tensor, grid: tuple[int, int], query: tuple[int, int], scale: float = 1.0):
    """(rows, cols): the score q . k / sqrt(d) of the query at patch `query` against the same key
    content k at every patch of `grid`, both turned by RoPE with positions multiplied by `scale`."""
    d = q.shape[-1]
    rows, cols = grid
    sin, cos = rope_sin_cos(rope_angles(grid, d) * scale)  # each (N, d)
    turned_q = apply_rope(q.expand(1, 1, rows * cols, d), sin, cos)[0, 0, query[0] * cols + query[1]]  # (d,)
    turned_k = apply_rope(k.expand(1, 1, rows * cols, d), sin, cos)[0, 0]  # (N, d)
    return (turned_k @ turned_q / d**0.5).reshape(rows, cols)


class RopeScores(StaticPicture, widgets.VBox):
    """Sliders pick a query patch of the larger grid; a checkbox scales its positions.

    Args:
        q, k: (d,) one query's and one key's content, d divisible by 4.
        train_grid, new_grid: (rows, cols) of the training grid and of the larger one.
    """

    shows = (
        "Two heat maps of one query's RoPE scores against a key of the same content at every patch, "
        "left at the training grid, right at a larger grid"
    )

    def __init__(self, q: torch.Tensor, k: torch.Tensor, train_grid=(4, 4), new_grid=(6, 6), size: float = 3.0):
        check_tensor(q, "q (d,)", ndim=1, nonempty=True)
        check_tensor(k, "k (d,)", ndim=1, nonempty=True)
        if q.shape != k.shape or q.shape[0] % 4:
            raise ValueError(
                f"q and k must have the same width, divisible by 4, got {tuple(q.shape)} and {tuple(k.shape)}"
            )
        self.q, self.k = q.detach().float(), k.detach().float()
        self.train_grid, self.new_grid = to_2tuple(train_grid, "train_grid"), to_2tuple(new_grid, "new_grid")
        if any(new < old for new, old in zip(self.new_grid, self.train_grid)):
            raise ValueError(f"new_grid {self.new_grid} must be at least train_grid {self.train_grid} on both axes")
        self.row = widgets.IntSlider(value=0, min=0, max=self.new_grid[0] - 1, description="query row")
        self.col = widgets.IntSlider(value=0, min=0, max=self.new_grid[1] - 1, description="query col")
        self.scaled = widgets.Checkbox(value=False, description="scale positions (interpolation)")
        self.summary = widgets.HTML()
        self.output = widgets.Output()
        self.fig, self.axes = plt.subplots(1, 2, figsize=(2 * size, size), dpi=DPI)
        plt.close(self.fig)
        for control in (self.row, self.col, self.scaled):
            control.observe(lambda change: self.redraw(), names="value")
        super().__init__([widgets.HBox([self.row, self.col]), self.scaled, self.summary, self.output])
        self.redraw()

    @property
    def scale(self) -> float:
        """The factor on the larger grid's positions: training rows / new rows when scaled, else 1."""
        return self.train_grid[0] / self.new_grid[0] if self.scaled.value else 1.0

    def maps(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The two maps drawn: (training grid, query clipped into it) and (larger grid, as set)."""
        clipped = (min(self.row.value, self.train_grid[0] - 1), min(self.col.value, self.train_grid[1] - 1))
        left = rope_scores(self.q, self.k, self.train_grid, clipped)
        right = rope_scores(self.q, self.k, self.new_grid, (self.row.value, self.col.value), self.scale)
        return left, right

    def unseen_offsets(self) -> int:
        """How many keys of the larger grid sit further from the query, in scaled patches, than any
        two patches of the training grid (on either axis)."""
        rows, cols = self.new_grid
        r = torch.arange(rows).unsqueeze(1).expand(rows, cols)
        c = torch.arange(cols).unsqueeze(0).expand(rows, cols)
        far_rows = (r - self.row.value).abs() * self.scale > self.train_grid[0] - 1 + 1e-9
        far_cols = (c - self.col.value).abs() * self.scale > self.train_grid[1] - 1 + 1e-9
        return int((far_rows | far_cols).sum())

    def redraw(self) -> None:
        left, right = self.maps()
        clipped = (min(self.row.value, self.train_grid[0] - 1), min(self.col.value, self.train_grid[1] - 1))
        for ax, values, grid, query, name in (
            (self.axes[0], left, self.train_grid, clipped, "training grid"),
            (self.axes[1], right, self.new_grid, (self.row.value, self.col.value), "larger grid"),
        ):
            ax.clear()
            ax.imshow(values.numpy(), cmap="viridis")
            ax.add_patch(
                plt.Rectangle((query[1] - 0.5, query[0] - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2)
            )
            ax.set_title(f"{name} {grid[0]} x {grid[1]}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        self.fig.tight_layout()
        total = self.new_grid[0] * self.new_grid[1]
        self.summary.value = (
            f"keys at an offset the training grid never has: <b>{self.unseen_offsets()} of {total}</b>; "
            f"score at the query's own patch {float(right[self.row.value, self.col.value]):.2f}"
        )
        show_in(self.output, self.fig)

    def state_line(self) -> str:
        """E.g. "query (5, 0) of 6 x 6, positions as they are"."""
        how = f"positions scaled by {self.scale:.2f}" if self.scaled.value else "positions as they are"
        return f"query ({self.row.value}, {self.col.value}) of {self.new_grid[0]} x {self.new_grid[1]}, {how}"
