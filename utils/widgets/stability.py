"""Lesson 11's explorer: the largest attention logit over training and, at the chosen step, what the
class token attends to, for each learning rate with and without qk-norm."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.validation import WrongTypeError, check_tensor, describe
from utils.viz.core import DPI, check_image, to_numpy_image
from utils.widgets import StaticPicture, show_in


def _entropy(weights: torch.Tensor) -> torch.Tensor:
    """(..., T) attention weights -> (...) their entropy in nats."""
    return -(weights * weights.clamp_min(1e-12).log()).sum(-1)


class LogitExplorer(StaticPicture, widgets.VBox):
    """Learning rate, qk-norm on or off, and a training step: the left panel draws the largest
    attention logit of every seed over training (log scale) with the step marked; the right one the
    last block's class-token attention on one digit at that step (seed 0), a row per head, a column
    per token (the class token, then the 2 x 2 patches).

    Args:
        image: (C, H, W) the digit whose attention is shown.
        steps: the record steps, (R,).
        curves: (stabiliser, lr) -> (seeds, R) largest logits.
        pictures: (stabiliser, lr) -> (R, heads, T) the class token's attention weights.
        (utils.stability.explorer_inputs() reads all three from the shipped results.)
    """

    shows = (
        "Left, the largest attention logit of every seed over training; right, the last block's "
        "class-token attention on one digit at the chosen step, a row per head"
    )

    def __init__(self, image, steps, curves: dict, pictures: dict, size: float = 3.4):
        image = check_image(image)
        steps = [int(s) for s in steps]
        if not steps:
            raise ValueError("steps must name at least one record step")
        if not isinstance(curves, dict) or not isinstance(pictures, dict) or set(curves) != set(pictures):
            raise WrongTypeError(
                f"curves and pictures must be dicts with the same (stabiliser, lr) keys, got {describe(curves)} "
                f"and {describe(pictures)}"
            )
        for key in curves:
            check_tensor(curves[key], f"curves[{key}] (seeds, R)", ndim=2)
            check_tensor(pictures[key], f"pictures[{key}] (R, heads, T)", ndim=3)
            if curves[key].shape[1] != len(steps) or len(pictures[key]) != len(steps):
                raise ValueError(
                    f"curves[{key}] and pictures[{key}] must hold one record per step ({len(steps)}), got "
                    f"{tuple(curves[key].shape)} and {tuple(pictures[key].shape)}"
                )
        stabilisers = list(dict.fromkeys(key[0] for key in curves))
        if len(stabilisers) != 2 or "plain" not in stabilisers:
            raise ValueError(f"expected the keys of two arms, 'plain' and one stabiliser, got {stabilisers}")
        self.other = next(s for s in stabilisers if s != "plain")
        lrs = sorted({key[1] for key in curves})
        self.image, self.steps, self.curves, self.pictures = image, steps, curves, pictures
        self.lr = widgets.SelectionSlider(options=[(f"{lr:g}", lr) for lr in lrs], value=lrs[-1], description="lr")
        self.stabilised = widgets.Checkbox(value=False, description=self.other)
        self.step = widgets.SelectionSlider(options=steps, value=steps[-1], description="step")
        self.summary = widgets.HTML()
        self.output = widgets.Output()
        self.fig, (self.ax_digit, self.ax_curve, self.ax_attention) = plt.subplots(
            1, 3, figsize=(3.2 * size, size), dpi=DPI, gridspec_kw={"width_ratios": [1, 2.2, 1.6]}
        )
        self.ax_digit.imshow(to_numpy_image(image), cmap="gray")
        self.ax_digit.set_axis_off()
        self.ax_digit.set_title("the digit", fontsize=9)
        plt.close(self.fig)
        for control in (self.lr, self.stabilised, self.step):
            control.observe(lambda change: self.redraw(), names="value")
        super().__init__([widgets.HBox([self.lr, self.stabilised]), self.step, self.summary, self.output])
        self.redraw()

    @property
    def key(self) -> tuple:
        return (self.other if self.stabilised.value else "plain", self.lr.value)

    @property
    def record(self) -> int:
        return self.steps.index(self.step.value)

    @property
    def weights(self) -> torch.Tensor:
        """(heads, T): the class token's attention at the chosen step, what the right panel shows."""
        return self.pictures[self.key][self.record].float()

    def redraw(self) -> None:
        curves = self.curves[self.key].double()
        self.ax_curve.clear()
        for seed, curve in enumerate(curves):
            self.ax_curve.plot(
                self.steps, curve.clamp(max=1e6).numpy(), color="tab:blue", alpha=0.35 + 0.65 * (seed == 0)
            )
        self.ax_curve.axvline(self.step.value, color="tab:red", linewidth=1)
        self.ax_curve.set_yscale("log")
        self.ax_curve.set_ylim(1e-2, max(1e3, float(curves[torch.isfinite(curves)].max()) * 2))
        self.ax_curve.set_xlabel("optimiser step")
        self.ax_curve.set_title(f"largest logit, {self.key[0]}, lr {self.key[1]:g} ({len(curves)} seeds)", fontsize=9)
        self.ax_curve.grid(alpha=0.3)
        weights = self.weights
        self.ax_attention.clear()
        self.ax_attention.imshow(weights.numpy(), cmap="viridis", vmin=0, vmax=1)
        for (head, token), value in np.ndenumerate(weights.numpy()):
            self.ax_attention.text(token, head, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white")
        self.ax_attention.set_xticks(range(weights.shape[1]), ["cls"] + [f"p{i}" for i in range(weights.shape[1] - 1)])
        self.ax_attention.set_yticks(range(weights.shape[0]), [f"head {h}" for h in range(weights.shape[0])])
        self.ax_attention.set_title(f"class token's attention, step {self.step.value}", fontsize=9)
        self.fig.tight_layout()
        logit = float(curves[0, self.record])
        entropy = _entropy(weights).mean().item()
        self.summary.value = (
            f"seed 0 at step {self.step.value}: largest logit <b>{logit:.3g}</b>; the class token's largest "
            f"weight {weights.max():.2f}, mean entropy over heads {entropy:.2f} nats (uniform over "
            f"{weights.shape[1]} tokens: {np.log(weights.shape[1]):.2f})"
        )
        show_in(self.output, self.fig)

    def state_line(self) -> str:
        """E.g. "plain, lr 0.03, step 300"."""
        return f"{self.key[0]}, lr {self.key[1]:g}, step {self.step.value}"
