"""Lesson 8's picture of a classifier's answers: each photo above its top-k classes as bars."""

import matplotlib.pyplot as plt
import torch

from utils.viz.core import DPI, check_image_batch, to_numpy_image, with_alt_text


def show_top_k(
    images: torch.Tensor, names: list[str], answers: list[list[tuple[str, float]]], size: float = 2.6
) -> plt.Figure:
    """One column per image: the image on top, its answers below as horizontal bars, the most
    probable on top, the bar's length its probability (0 to 1).

    Args:
        images: (B, C, H, W) in [0, 1], as shown (not normalised).
        names: B titles for the images.
        answers: for each image its (class name, probability) pairs, most probable first (`top_k`).
    """
    check_image_batch(images)
    if not len(images) == len(names) == len(answers):
        raise ValueError(
            f"expected one name and one answer list per image: {len(images)} images, "
            f"{len(names)} names, {len(answers)} answer lists"
        )
    for name, answer in zip(names, answers):
        _check_answer(answer, name)
    fig, axes = plt.subplots(
        2,
        len(images),
        figsize=(size * len(images), size * 1.9),
        dpi=DPI,
        squeeze=False,
        gridspec_kw={"height_ratios": [1.2, 0.8]},
    )
    for column, (image, name, answer) in enumerate(zip(images, names, answers)):
        photo_ax, bars_ax = axes[0, column], axes[1, column]
        photo_ax.imshow(to_numpy_image(image), cmap="gray")
        photo_ax.set_title(name, fontsize=9)
        photo_ax.set_axis_off()
        labels, probabilities = zip(*answer)
        positions = range(len(answer))[::-1]  # the most probable on top
        bars_ax.barh(list(positions), probabilities, color="tab:blue")
        bars_ax.set_yticks(list(positions), [label[:18] for label in labels], fontsize=8)
        bars_ax.set_xlim(0, 1)
        bars_ax.tick_params(axis="x", labelsize=7)
        for position, probability in zip(positions, probabilities):
            bars_ax.text(min(probability, 0.72) + 0.02, position, f"{probability:.0%}", va="center", fontsize=7)
    fig.tight_layout()
    tops = "; ".join(f"{name}: {answer[0][0]} {answer[0][1]:.0%}" for name, answer in zip(names, answers))
    return with_alt_text(
        fig,
        f"Each of {len(images)} photos above its {len(answers[0])} most probable classes as bars. Top class: {tops}.",
    )


def _check_answer(answer, name: str) -> None:
    """A ValueError unless `answer` is a non-empty list of (class name, probability in [0, 1]) pairs."""
    expected = f"answers for {name!r}: expected a non-empty list of (class name, probability) pairs as top_k gives"
    if not isinstance(answer, (list, tuple)) or not answer:
        raise ValueError(f"{expected}, got {answer!r:.80}")
    for pair in answer:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValueError(f"{expected}, got the entry {pair!r:.80}")
        if not 0 <= pair[1] <= 1:
            raise ValueError(f"{expected}, got the probability {pair[1]!r} for {pair[0]!r}: not in [0, 1]")
