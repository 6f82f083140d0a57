"""Lesson 11's picture: the learning-rate sweep, accuracy and the largest attention logit side by
side, one line per stabiliser, every seed a dot."""

import matplotlib.pyplot as plt
import numpy as np
import torch

from utils.validation import check_tensor
from utils.viz.core import DPI, check_not_empty, with_alt_text


def _values(values, what: str, lrs: int) -> np.ndarray:
    tensor = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values, dtype=np.float64))
    tensor = check_tensor(tensor, what, ndim=2, nonempty=True).detach().double()
    if tensor.shape[1] != lrs:
        raise ValueError(f"{what} has {tensor.shape[1]} learning rates per seed, lrs has {lrs}")
    return tensor.numpy()


def plot_sweep(lrs, accuracy: dict, logits: dict, size: float = 3.6) -> plt.Figure:
    """Left: validation accuracy against the learning rate; right: the largest attention logit
    over the whole run (log scale). One line (the mean) per arm, a dot per seed.

    Args:
        lrs: the learning rates, (L,).
        accuracy, logits: arm name -> (seeds, L) values: accuracies as fractions, logits as numbers.
    """
    x = np.asarray(check_tensor(torch.as_tensor(lrs, dtype=torch.float64), "lrs (L,)", ndim=1, nonempty=True))
    check_not_empty(accuracy, "arm")
    if list(accuracy) != list(logits):
        raise ValueError(f"accuracy and logits must name the same arms, got {list(accuracy)} and {list(logits)}")
    fig, (left, right) = plt.subplots(1, 2, figsize=(2.4 * size, size), dpi=DPI)
    words = []
    for name in accuracy:
        acc = _values(accuracy[name], f"accuracy[{name!r}] (seeds, L)", len(x)) * 100
        big = _values(logits[name], f"logits[{name!r}] (seeds, L)", len(x))
        line = left.plot(x, acc.mean(0), marker="o", label=name)[0]
        right.plot(x, big.mean(0), marker="o", color=line.get_color(), label=name)
        for seeds, ax in ((acc, left), (big, right)):
            for column, lr in enumerate(x):
                ax.scatter(np.full(len(seeds), lr), seeds[:, column], s=9, color=line.get_color(), alpha=0.5)
        means = ", ".join(f"{a:.1f} % / {b:.3g}" for a, b in zip(acc.mean(0), big.mean(0), strict=True))
        words.append(f"{name}: {means}")
    for ax, label in ((left, "validation accuracy (%)"), (right, "largest attention logit")):
        ax.set_xscale("log")
        ax.set_xlabel("peak learning rate")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    right.set_yscale("log")
    left.legend(fontsize=8)
    left.set_title("accuracy: the line is the mean, a dot each seed", fontsize=9)
    right.set_title("the largest logit over the whole run", fontsize=9)
    fig.tight_layout()
    rates = ", ".join(f"{lr:g}" for lr in x)
    return with_alt_text(
        fig,
        f"Two panels against the learning rate ({rates}): validation accuracy and the largest attention "
        f"logit, one line per arm, a dot per seed. Mean accuracy / mean largest logit per rate: "
        + "; ".join(words)
        + ".",
    )
