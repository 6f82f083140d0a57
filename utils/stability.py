"""Lesson 11's experiment: a ViT that trains. The largest attention logit recorded over training at
rising learning rates, with and without qk-norm, warm-up and LayerScale, and the 2022 recipe's items
(DeiT III; Beyer et al. 2022, "Better plain ViT baselines") ablated on the digits.

Every arm trains lesson 6's tiny ViT on the digits (lesson 6's data and split, steps of 128 digits,
AdamW, shifts of 1 px, label smoothing 0.1) with `train`, a loop built from utils.training's pieces
(the same batches, schedule and steps as `fit`: with no extras it gives fit's weights exactly) that
also records, every RECORD_EVERY steps, the largest attention logit (utils.claims.max_attention_logits)
and the mean training loss since the last record. `python tools/run_experiments.py --suite stability`
runs seeds 0-4 of every arm and ships the results in utils/results/lesson11.json; the lesson runs
seed 0 of two arms live and prints the rest from the file.

- `ARMS`: name -> `Arm`; `sweep_name(stabiliser, lr)`, `recipe_name(item)`.
- `train(model, data, ...)`: the loop; `mixup_batch(images, labels, lam, order, num_classes)`,
  `flip_batch(images, generator)`: the two augmentations fit does not have.
- `qk_norm_bound(head_dim, ...)`: the largest logit qk-norm allows (derived in the lesson).
- `run_arm(name, seed, data)`: train and measure one seed.
- `shipped_runs`, `shipped_values`, `agrees_with_shipped`: the shipped seeds, as in lessons 5, 6, 9.
- `sweep_family(stabiliser)`, `recipe_family()`: the rubric's comparisons the lesson prints.
"""

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from utils.ablations import (
    DIGITS_FIT,
    Experiment,
    ShippedArms,
    Split,
    check_split,
    experiment_data,
)
from utils.claims import attention_logits, max_attention_logits
from utils.datasets import check_float_images, check_labels
from utils.experiments import MAX_SEED, run_record
from utils.runtime import set_seed, torch_threads
from utils.training import (
    History,
    evaluate,
    parameter_groups,
    shuffled_batches,
    train_step,
    warmup_cosine,
)
from utils.validation import WrongTypeError, check_number, check_positive, check_whole, describe

RESULTS_FILE = Path(__file__).parent / "results" / "lesson11.json"
COMMAND = "python tools/run_experiments.py --suite stability"
STEPS = 300  # optimiser steps of 128 digits: 36 epochs of 1,078 images
LONG_STEPS = 900  # the recipe's "longer schedule": three times as long
LRS = (3e-3, 1e-2, 3e-2)  # lesson 6's choice, then 3.3 x and 10 x it
RECIPE_LR = 3e-3  # lesson 6's digits recipe, chosen there on validation
RECORD_EVERY = 10  # steps between two records of the largest logit
MEASURE_IMAGES = 256  # the first validation images: the same for every run
LAYER_SCALE = 0.1  # CaiT's starting value for models up to 18 blocks deep
MIXUP_ALPHA = 0.2  # Beyer et al. 2022's Mixup (lam ~ Beta(0.2, 0.2))
FIT = {key: value for key, value in DIGITS_FIT.items() if key != "lr"}  # the rest of lesson 6's digits recipe
STABILISERS = {  # name -> (warm-up fraction, ViTConfig overrides): each changes one thing of "plain"
    "plain": (0.0, {}),
    "qk-norm": (0.0, {"qk_norm": True}),
    "warm-up": (0.1, {}),
    "LayerScale": (0.0, {"layer_scale": LAYER_SCALE}),
}
RECIPE = {  # item -> (fit options, ViTConfig overrides) added to the base: lesson 6's recipe, warm-up 10 %
    "base": ({}, {}),
    "mean pooling": ({}, {"pool": "mean"}),
    "sin-cos positions": ({}, {"pos_embed": "sincos"}),
    "Mixup": ({"mixup": MIXUP_ALPHA}, {}),
    "flips": ({"flip": True}, {}),
    "900 steps": ({"steps": LONG_STEPS}, {}),
    "all four": ({"mixup": MIXUP_ALPHA, "steps": LONG_STEPS}, {"pool": "mean", "pos_embed": "sincos"}),
}
TRAIN_OPTIONS = ("steps", "lr", "warmup", "max_shift", "label_smoothing", "mixup", "flip")


@dataclass(frozen=True)
class Arm:
    """One arm: a tiny ViT on the digits (`experiment`: its fit options are `train`'s)."""

    experiment: Experiment

    def __post_init__(self):
        if not isinstance(self.experiment, Experiment) or self.experiment.model != "vit":
            raise WrongTypeError(
                f"experiment must be a ViT Experiment (utils.ablations), got {describe(self.experiment)}"
            )
        unknown = set(self.experiment.fit) - set(TRAIN_OPTIONS)
        if unknown:
            raise ValueError(f"train takes {TRAIN_OPTIONS}, got {sorted(unknown)}")

    def build(self) -> nn.Module:
        """A fresh, untrained model (seed first: set_seed(seed))."""
        return self.experiment.build()

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return self.experiment.as_dict()


def sweep_name(stabiliser: str, lr: float) -> str:
    """The name of a sweep arm, e.g. sweep_name("qk-norm", 1e-2) -> "qk-norm, lr 0.01"."""
    if stabiliser not in STABILISERS:
        raise ValueError(f"stabiliser must be one of {tuple(STABILISERS)}, got {stabiliser!r}")
    return f"{stabiliser}, lr {lr:g}"


def recipe_name(item: str) -> str:
    """The name of a recipe arm, e.g. recipe_name("Mixup") -> "recipe: Mixup"."""
    if item not in RECIPE:
        raise ValueError(f"item must be one of {tuple(RECIPE)}, got {item!r}")
    return f"recipe: {item}"


def _sweep_arm(stabiliser: str, lr: float) -> Arm:
    warmup, vit = STABILISERS[stabiliser]
    return Arm(Experiment("digits", "vit", {"steps": STEPS, "lr": lr, "warmup": warmup, **FIT}, vit))


def _recipe_arm(item: str) -> Arm:
    extra_fit, vit = RECIPE[item]
    fit = {"steps": STEPS, "lr": RECIPE_LR, "warmup": 0.1, **FIT, **extra_fit}
    return Arm(Experiment("digits", "vit", fit, vit))


ARMS: dict[str, Arm] = {
    **{sweep_name(s, lr): _sweep_arm(s, lr) for s in STABILISERS for lr in LRS},
    **{recipe_name(item): _recipe_arm(item) for item in RECIPE},
}


# ---- the two augmentations fit does not have ----------------------------------------------------


def mixup_batch(
    images: torch.Tensor, labels: torch.Tensor, lam: float, order: torch.Tensor, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixup (Zhang et al. 2018): each image blended with the image `order` puts beside it.

    Args:
        images: (B, C, H, W); labels: (B,) class indices; lam: the weight of each image's own
            half, in [0, 1]; order: (B,) a permutation of range(B); num_classes: K.
    Returns:
        images lam * x + (1 - lam) * x[order], (B, C, H, W), and the targets the same blend of
        one-hot labels, (B, K), each row summing to 1.
    """
    check_float_images(images)
    check_labels(labels, num_classes=num_classes)
    lam = check_number(lam, "lam", low=0.0, high=1.0, meaning=" (the weight of each image's own half)")
    if not isinstance(order, torch.Tensor) or order.shape != labels.shape:
        raise ValueError(f"order must be a permutation of range({len(labels)}), got {describe(order)}")
    targets = F.one_hot(labels, num_classes).float()  # (B, K)
    mixed = lam * images + (1 - lam) * images[order]  # (B, C, H, W)
    return mixed, lam * targets + (1 - lam) * targets[order]  # (B, K)


def flip_batch(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Mirror each image left to right with probability 1/2: (B, C, H, W) -> (B, C, H, W)."""
    check_float_images(images)
    flipped = torch.rand(len(images), generator=generator) < 0.5  # (B,)
    return torch.where(flipped[:, None, None, None], images.flip(-1), images)


# ---- the loop ---------------------------------------------------------------------------------


def qk_norm_bound(head_dim: int, gamma_q=None, beta_q=None, gamma_k=None, beta_k=None) -> float:
    """The largest attention logit q.k / sqrt(d) that qk-norm allows, d = head_dim.

    LayerNorm makes each head's query z_q with mean 0 and variance at most 1 over its d features,
    so |z_q| <= sqrt(d), and returns gamma * z + beta: its norm is at most max|gamma| sqrt(d) + |beta|.
    Cauchy-Schwarz bounds the dot product by the product of the two norms. With gamma = 1, beta = 0
    (LayerNorm's start) the bound is sqrt(d) * sqrt(d) / sqrt(d) = sqrt(d).
    """
    d = check_whole(head_dim, "head_dim", minimum=1)

    def largest_norm(gamma, beta) -> float:
        g = 1.0 if gamma is None else float(torch.as_tensor(gamma).detach().abs().max())
        b = 0.0 if beta is None else float(torch.as_tensor(beta).detach().norm())
        return g * math.sqrt(d) + b

    return largest_norm(gamma_q, beta_q) * largest_norm(gamma_k, beta_k) / math.sqrt(d)


def _finite(value: float) -> bool:
    return value == value and abs(value) != float("inf")


def train(
    model: nn.Module,
    data: Split,
    *,
    steps: int,
    lr: float,
    warmup: float = 0.1,
    label_smoothing: float = 0.0,
    max_shift: int = 0,
    mixup: float = 0.0,
    flip: bool = False,
    seed: int = 0,
    record_every: int = RECORD_EVERY,
    on_record=None,
    weight_decay: float = 0.05,
    batch_size: int = 128,
) -> dict:
    """Train `model` on data.train as fit does (AdamW, parameter_groups, warm-up + cosine by steps,
    shuffled_batches with shifts, train_step) and record the largest attention logit on the first
    MEASURE_IMAGES validation images every `record_every` steps (and at step 0).

    mixup: Mixup's alpha (0: none), a Beta(alpha, alpha) weight per batch; flip: mirror half the
    training images. Without them the batches, the steps and so the weights are fit's.
    on_record: called with the model at every record (step 0 included), e.g. to keep a picture.
    Returns:
        {"history": a History with one entry (the end), "record_step": [...], "max_logit": [max over
        blocks at each record, None where not finite], "loss": [mean training loss since the last
        record], "finite": every loss a number}.
    """
    if not isinstance(data, Split):
        raise WrongTypeError(f"data must be a Split (utils.ablations.experiment_data), got {describe(data)}")
    steps = check_whole(steps, "steps", minimum=1)
    check_positive(lr, "lr", meaning=" (the peak learning rate)")
    alpha = check_number(mixup, "mixup", low=0.0, meaning=" (Mixup's alpha; 0: none)")
    record_every = check_whole(record_every, "record_every", minimum=1)
    images, labels = data.train.tensors
    measure = data.val.tensors[0][:MEASURE_IMAGES]
    num_classes = int(labels.max()) + 1
    generator = torch.Generator().manual_seed(seed)
    lams = np.random.default_rng(seed)  # Mixup's weights: a stream of their own (fit's stays as it is)
    groups = parameter_groups(model, weight_decay)
    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)
    if on_record is not None and not callable(on_record):
        raise WrongTypeError(f"on_record must be a function of the model (or None), got {describe(on_record)}")
    start_logits = max_attention_logits(model, measure)
    record = {"record_step": [0], "max_logit": [None if None in start_logits else max(start_logits)]}
    if on_record is not None:
        on_record(model)
    record["loss"], window, done, epoch, start = [None], [], 0, 0, time.perf_counter()
    model.train()
    with torch_threads(1):
        while done < steps:
            epoch += 1
            for x, y in shuffled_batches(images, labels, batch_size, max_shift, generator, torch.device("cpu")):
                factor = warmup_cosine(done / steps, warmup)
                for group in optimizer.param_groups:
                    group["lr"] = lr * factor
                if flip:
                    x = flip_batch(x, generator)
                if alpha > 0:
                    lam = float(lams.beta(alpha, alpha))
                    x, target = mixup_batch(x, y, lam, torch.randperm(len(y), generator=generator), num_classes)
                    optimizer.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(model(x), target, label_smoothing=label_smoothing)
                    loss.backward()
                    optimizer.step()
                    loss = loss.item()
                else:
                    loss = train_step(model, optimizer, x, y, label_smoothing=label_smoothing)
                done += 1
                window.append(loss)
                if done % record_every == 0 or done == steps:
                    largest = max_attention_logits(model, measure)
                    record["record_step"].append(done)
                    record["max_logit"].append(None if None in largest else max(largest))
                    record["loss"].append(sum(window) / len(window) if all(map(_finite, window)) else None)
                    window = []
                    if on_record is not None:
                        on_record(model)
                if done == steps:
                    break
    model.eval()
    val_loss, val_accuracy = evaluate(model, data.val)
    history = History(
        epoch=[epoch], step=[done], seconds=[time.perf_counter() - start], lr=[lr * factor],
        val_loss=[val_loss], val_accuracy=[val_accuracy], done=True,
    )  # fmt: skip
    del optimizer
    return record | {"history": history, "finite": None not in record["loss"][1:] and _finite(val_loss)}


def cls_attention(model: nn.Module, image: torch.Tensor) -> list[list[float]]:
    """The last block's attention of the class token over all tokens, per head: (heads, T) as lists."""
    logits = attention_logits(model, image[None])[-1][0]  # (heads, T, T)
    return logits[:, 0].softmax(dim=-1).tolist()


SHIPPED = ShippedArms(ARMS, RESULTS_FILE, COMMAND)  # the arms' shipped seeds (utils.ablations)
shipped_runs, shipped_values, agrees_with_shipped = SHIPPED.runs, SHIPPED.values, SHIPPED.agrees


def run_arm(name: str, seed: int, data: Split | None = None) -> dict:
    """Train seed `seed` of arm `name`: run_record's dict (seed, val_accuracy, test_accuracy, steps,
    seconds, ...) plus train's record ("record_step", "max_logit", "loss", "finite"), "max_logit_end"
    (per block) and, for seed 0 of the sweep's models with a class token, "cls_attention": the last
    block's class-token attention on the first validation image at each record (the explorer's)."""
    arm = SHIPPED.arm(name)
    seed = check_whole(seed, "seed", minimum=0, maximum=MAX_SEED)
    data = experiment_data("digits") if data is None else check_split(data, "digits", name, "trains on")
    set_seed(seed)
    model = arm.build()
    options = dict(arm.experiment.fit)
    watch = seed == 0 and name.startswith(tuple(STABILISERS))
    pictures, first = [], data.val.tensors[0][0]

    def watch_one_image(model_):  # the same training: looking draws no random numbers
        pictures.append(cls_attention(model_, first))

    result = train(model, data, seed=seed, on_record=watch_one_image if watch else None, **options)
    _, test_accuracy = evaluate(model, data.test)
    record = run_record(model, result.pop("history"), test_accuracy, seed, tuple(data.train.tensors[0].shape[1:]))
    record |= result
    record["max_logit_end"] = max_attention_logits(model, data.val.tensors[0][:MEASURE_IMAGES])
    if watch:
        record["cls_attention"] = pictures
    return record


# ---- the shipped results ------------------------------------------------------------------------


def largest_logit(name: str) -> list[float]:
    """Per shipped seed, the largest attention logit over the whole run (every record, every
    block); inf where a record was not finite."""
    return [max(float("inf") if v is None else v for v in run["max_logit"]) for run in shipped_runs(name)]


# ---- the verdicts -----------------------------------------------------------------------------

ACCURACY = 0.02  # the smallest effect of interest: 2 points of validation accuracy (5 of 270 images)


def sweep_family(stabiliser: str) -> dict:
    """The rubric's comparisons of one stabiliser against plain, one per learning rate, claim
    "higher" validation accuracy (utils.rubric.grade_family's input: Holm over the three)."""
    if stabiliser not in STABILISERS or stabiliser == "plain":
        raise ValueError(f"stabiliser must be one of {tuple(STABILISERS)[1:]}, got {stabiliser!r}")
    return {
        f"lr {lr:g}": dict(
            a=shipped_values(sweep_name(stabiliser, lr)),
            b=shipped_values(sweep_name("plain", lr)),
            claim="higher",
            effect=ACCURACY,
            names=(stabiliser, "plain"),
            percent=True,
        )
        for lr in LRS
    }


RECIPE_CLAIMS = {  # item -> the claim the 2022 recipe makes for it on ImageNet (flips: digits are not symmetric)
    "mean pooling": "higher",
    "sin-cos positions": "higher",
    "Mixup": "higher",
    "flips": "lower",
    "900 steps": "higher",
    "all four": "higher",
}


def recipe_family() -> dict:
    """The rubric's comparisons of each recipe item against the base (Holm over them all)."""
    base = shipped_values(recipe_name("base"))
    return {
        item: dict(
            a=shipped_values(recipe_name(item)),
            b=base,
            claim=claim,
            effect=ACCURACY,
            names=(item, "base"),
            percent=True,
        )
        for item, claim in RECIPE_CLAIMS.items()
    }


# ---- divergence, read from a loss history ------------------------------------------------------


def first_divergence(losses, factor: float = 2.0) -> int | None:
    """The index of the first loss that is not a finite number (NaN, inf or None) or more than
    `factor` times the smallest loss before it; None when the run never diverged.

    Args:
        losses: a sequence of training losses in order (e.g. a run's "loss" record without its
            first entry, which is None: no step before step 0).
        factor: how far above its best so far a loss may climb before the run counts as diverged.
    """
    if isinstance(losses, str | bytes) or not hasattr(losses, "__len__"):
        raise WrongTypeError(f"losses must be a list of numbers, got {describe(losses)}")
    factor = check_number(factor, "factor", low=1.0, meaning=" (how many times the best loss so far)")
    best = math.inf
    for index, loss in enumerate(losses):
        if loss is None or not _finite(float(loss)):
            return index
        if loss > factor * best:
            return index
        best = min(best, loss)
    return None


def diverged_runs(name: str, factor: float = 2.0) -> int:
    """How many shipped seeds of arm `name` diverged (first_divergence of their loss records)."""
    return sum(first_divergence(run["loss"][1:], factor) is not None for run in shipped_runs(name))


def explorer_inputs(stabilisers: tuple[str, ...] = ("plain", "qk-norm")) -> dict:
    """What utils.widgets.stability.LogitExplorer shows, read from the shipped results:
    {"steps": [...], "curves": {(stabiliser, lr): (5 seeds, records) largest logits},
    "pictures": {(stabiliser, lr): (records, heads, T) seed 0's class-token attention}}."""
    steps, curves, pictures = None, {}, {}
    for stabiliser in stabilisers:
        for lr in LRS:
            runs = shipped_runs(sweep_name(stabiliser, lr))
            steps = runs[0]["record_step"]
            curves[stabiliser, lr] = torch.tensor(
                [[math.inf if v is None else v for v in run["max_logit"]] for run in runs]
            )
            pictures[stabiliser, lr] = torch.tensor(runs[0]["cls_attention"])
    return {"steps": steps, "curves": curves, "pictures": pictures}
