"""Lesson 5's experiment: pre-norm or post-norm, each at its own best learning rate, with and
without a warm-up, over five seeds.

Xiong et al. (2020) predict that a post-norm Transformer needs a learning-rate warm-up and a
pre-norm one does not. This suite tests that prediction on the digits (lesson 6's data and split):
the tiny ViT with 8 blocks in both orders, three learning rates, no warm-up or fit's default one
(the first 10 % of the steps), a budget in steps. `python tools/run_experiments.py --suite
norm_order` runs seeds 0-4 of every arm and ships the results in utils/results/lesson5.json; the
lesson runs seed 0 of two arms live and prints the rest from the file.

- `ARMS`: name -> `Arm` (an `Experiment` plus the norm order); `arm_name(order, lr, warmup)`.
- `run_arm(name, seed, data)`: train and measure one seed.
- `shipped_runs(name)`, `shipped_values(name, key)`: the shipped seeds of one arm.
- `agrees_with_shipped(name, run, data)`: does a live run agree with them (as in lessons 6 and 9)?
- `best_lr(order, warmup)`: the learning rate with the highest mean validation accuracy.
"""

from dataclasses import dataclass
from pathlib import Path

from torch import nn

from utils.ablations import (
    DIGITS_FIT,
    Experiment,
    ShippedArms,
    Split,
    experiment_data,
)
from utils.training import predict
from utils.validation import WrongTypeError, describe

RESULTS_FILE = Path(__file__).parent / "results" / "lesson5.json"
COMMAND = "python tools/run_experiments.py --suite norm_order"
DEPTH = 8  # blocks, the same for both orders
STEPS = 300  # optimiser steps of 128 digits: 33 epochs of 1,078 images
LRS = (1e-3, 3e-3, 1e-2)  # the sweep; lesson 6's digits recipe uses 3e-3
WARMUPS = (0.0, 0.1)  # none, or fit's default: the first 10 % of the steps
ORDERS = ("pre-norm", "post-norm")
FIT = {key: value for key, value in DIGITS_FIT.items() if key != "lr"}  # the rest of lesson 6's digits recipe


@dataclass(frozen=True)
class Arm:
    """One arm of the experiment: a tiny ViT on the digits (`experiment`) in one norm order.

    Post-norm is the same model with every block's `norm_first` switched off and no final
    LayerNorm (its last block already ends on one, as in the original Transformer).
    """

    experiment: Experiment
    order: str

    def __post_init__(self):
        if not isinstance(self.experiment, Experiment) or self.experiment.model != "vit":
            raise WrongTypeError(
                f"experiment must be a ViT Experiment (utils.ablations), got {describe(self.experiment)}"
            )
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")

    def build(self) -> nn.Module:
        """A fresh, untrained model (seed first: set_seed(seed))."""
        model = self.experiment.build()  # pre-norm, the course's init (trunc-normal, std 0.02)
        if self.order == "post-norm":
            for block in model.blocks:
                block.norm_first = False  # the same weights, the norms moved after the adds
            model.norm = nn.Identity()
        return model

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return {**self.experiment.as_dict(), "order": self.order}


def arm_name(order: str, lr: float, warmup: float) -> str:
    """The name of an arm, e.g. arm_name("post-norm", 1e-2, 0.1) -> "post-norm, lr 0.01, warm-up 10 %"."""
    return f"{order}, lr {lr:g}, warm-up {warmup * 100:.0f} %"


ARMS: dict[str, Arm] = {
    arm_name(order, lr, warmup): Arm(
        Experiment("digits", "vit", {"steps": STEPS, "lr": lr, "warmup": warmup, **FIT}, {"depth": DEPTH}), order
    )
    for order in ORDERS
    for warmup in WARMUPS
    for lr in LRS
}


SHIPPED = ShippedArms(ARMS, RESULTS_FILE, COMMAND)  # the arms' shipped seeds (utils.ablations)
shipped_runs, shipped_values, agrees_with_shipped = SHIPPED.runs, SHIPPED.values, SHIPPED.agrees


def run_arm(name: str, seed: int, data: Split | None = None) -> dict:
    """Train seed `seed` of arm `name`: run_record's dict (seed, val_accuracy, test_accuracy, steps,
    epochs, seconds, ...) plus "same_answer", the share of the validation images given the model's
    commonest answer (1.0: the same digit for every image)."""
    data = experiment_data("digits") if data is None else data
    model, record = SHIPPED.train(name, seed, data)
    answers = predict(model, data.val.tensors[0])  # (images,): the digit the model says for each
    record["same_answer"] = answers.bincount().max().item() / len(answers)
    return record


def best_lr(order: str, warmup: float) -> float:
    """The learning rate of LRS whose shipped runs have the highest mean validation accuracy, for
    one order and warm-up (the choice is made on validation only)."""
    if order not in ORDERS or warmup not in WARMUPS:
        raise ValueError(f"order must be one of {ORDERS} and warmup one of {WARMUPS}, got {order!r}, {warmup!r}")

    def mean_val(lr):
        values = shipped_values(arm_name(order, lr, warmup))
        return sum(values) / len(values)

    return max(LRS, key=mean_val)
