"""Lesson 6's experiments, each defined once: the main runs, the settings chosen on validation, the
ablations and the CNN comparisons. The lesson runs seed 0 of each live; `make experiments`
(tools/run_experiments.py) runs seeds 0-4 of all of them and ships the results in
utils/results/lesson6.json, so the lesson can print its live run beside five seeds' spread.

- `EXPERIMENTS`: name -> `Experiment` (the data, the model, fit's options; budgets in steps).
- `experiment_data(data)`: the train / validation / test split every experiment of that data uses.
- `run_experiment(name, seeds, data)`: train and measure (utils.experiments.run_seeds).
- `shipped_runs(name)`: the shipped runs of one experiment; `shipped_results()` the whole file.
- `agrees_with_shipped(name, run, data)`: does a live run agree with the shipped seeds? Exactly,
  on the kind of CPU that made the file; where another seed would land, on another kind.
"""

import difflib
import json
import platform
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import torch
from torch import nn

from utils.baselines import DeepCNN, SmallCNN
from utils.data import RELATIONAL_TASKS, load_training_set, split_validation
from utils.datasets import ImageDataset
from utils.experiments import PREDICTION, compare, prediction_interval, run_seeds, spread
from utils.runtime import cpu_kind, release_memory
from utils.validation import WrongTypeError, describe
from utils.vit import VisionTransformer, ViTConfig

RESULTS_FILE = Path(__file__).parent / "results" / "lesson6.json"
SEEDS = tuple(range(5))  # the seeds `make experiments` runs; the lesson runs the first
VALIDATION_FRACTION = 0.2  # of each training set, stratified, set aside to choose settings on
SPLIT_SEED = 0  # which validation part: fixed, so that every experiment sees the same one
IMAGES_OF_SLACK = 2  # an accuracy agrees within the prediction interval widened by this many images

# Budgets in optimiser steps (batches of 128), so that every machine makes the same run.
DIGITS_STEPS = 2000  # the final digits model: 9 steps an epoch (1,078 images), 223 epochs
DIGITS_ABLATION_STEPS = 600  # every digits comparison: 67 epochs
PAIRS_STEPS = 600  # "same colour?": 25 steps an epoch, 24 epochs
ORIENTATION_STEPS = 400  # "side by side?": 16 epochs

# The data each experiment trains on: load_training_set's options and the tiny ViT's shape for it.
DATA = {
    "digits": (dict(name="digits"), dict(image_size=8, in_channels=1, num_classes=10, patch_size=4)),
    "same_colour": (
        dict(name="relational", task="same_colour"),
        dict(image_size=32, in_channels=3, num_classes=2, patch_size=8),
    ),
    "orientation": (
        dict(name="relational", task="orientation"),
        dict(image_size=32, in_channels=3, num_classes=2, patch_size=8),
    ),
    # lesson 9: a quarter of the training images (1,000 + 250 for validation; the same test set)
    "orientation_1000": (
        dict(name="relational", task="orientation", train_size=1250),
        dict(image_size=32, in_channels=3, num_classes=2, patch_size=8),
    ),
    # lesson 9: "same colour?" with the two objects always at mirrored places (left and right)
    "mirrored_colour": (
        dict(name="relational", task="same_colour", mirrored=True),
        dict(image_size=32, in_channels=3, num_classes=2, patch_size=8),
    ),
}
MODELS = ("vit", "small_cnn", "deep_cnn")
DIGITS_FIT = dict(lr=3e-3, max_shift=1, label_smoothing=0.1)  # the digits recipe, chosen on validation
PAIRS_FIT = dict(lr=1e-3)  # the two-object recipe


@dataclass(frozen=True)
class Experiment:
    """One training recipe: which data, which model, fit's options (a budget in steps).

    data: a key of DATA ("digits", "same_colour", "orientation", ...).
    model: "vit" (the tiny ViT, ViTConfig.tiny with the data's shape and `vit`'s overrides),
        "small_cnn" (the SmallCNN with as many parameters as the data's tiny ViT) or "deep_cnn" (DeepCNN).
    fit: keyword arguments of utils.training.fit, including steps.
    vit: ViTConfig fields that differ from the data's tiny ViT, e.g. {"pool": "mean"}.
    """

    data: str
    model: str
    fit: Mapping = field(default_factory=dict)
    vit: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if self.data not in DATA:
            raise ValueError(f"data must be one of {sorted(DATA)}, got {self.data!r}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.vit and self.model != "vit":
            raise ValueError(f"vit options are for the ViT, got {dict(self.vit)} for a {self.model}")
        object.__setattr__(self, "fit", MappingProxyType(dict(self.fit)))  # read-only: shared by all
        object.__setattr__(self, "vit", MappingProxyType(dict(self.vit)))

    @property
    def config(self) -> ViTConfig | None:
        """The ViT's config (None for a CNN)."""
        if self.model != "vit":
            return None
        return ViTConfig.tiny(**{**DATA[self.data][1], **self.vit})

    def build(self) -> nn.Module:
        """A fresh, untrained model (seed first: set_seed(seed))."""
        shape = DATA[self.data][1]
        if self.model == "vit":
            return VisionTransformer(self.config)
        if self.model == "small_cnn":  # as many parameters as the data's tiny ViT
            vit = VisionTransformer(ViTConfig.tiny(**shape))
            target = sum(parameter.numel() for parameter in vit.parameters())
            return SmallCNN.with_parameters(target, shape["in_channels"], shape["num_classes"])
        return DeepCNN(shape["in_channels"], shape["num_classes"])

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return {"data": self.data, "model": self.model, "vit": dict(self.vit), "fit": dict(self.fit)}

    def __str__(self) -> str:
        model = {"vit": "tiny ViT", "small_cnn": "SmallCNN", "deep_cnn": "DeepCNN"}[self.model]
        if self.model == "vit":
            config = self.config
            model += f" ({config.patch_size} px patches, {config.num_tokens} tokens, {config.pool} pooling"
            model += f", {'no' if config.pos_embed == 'none' else config.pos_embed} positions)"
        options = ", ".join(f"{key}={value}" for key, value in self.fit.items())
        return f"{model} on {self.data}: fit({options})"


def _vit(data: str, steps: int, fit: Mapping, **vit) -> Experiment:
    return Experiment(data, "vit", {"steps": steps, **fit}, vit)


A = DIGITS_ABLATION_STEPS
EXPERIMENTS: dict[str, Experiment] = {
    # the final models of sections 3 and 4: their test accuracy is the lesson's result
    "digits": _vit("digits", DIGITS_STEPS, DIGITS_FIT),
    "same colour": _vit("same_colour", PAIRS_STEPS, PAIRS_FIT),
    # the learning rates, chosen on validation
    "same colour, lr 3e-4": _vit("same_colour", PAIRS_STEPS, {**PAIRS_FIT, "lr": 3e-4}),
    "same colour, lr 3e-3": _vit("same_colour", PAIRS_STEPS, {**PAIRS_FIT, "lr": 3e-3}),
    "digits, 600 steps": _vit("digits", A, DIGITS_FIT),  # every digits ablation changes one thing of this
    "digits, 600 steps, lr 1e-3": _vit("digits", A, {**DIGITS_FIT, "lr": 1e-3}),
    "digits, 600 steps, lr 1e-2": _vit("digits", A, {**DIGITS_FIT, "lr": 1e-2}),
    # patch size: more tokens, more compute per step
    "digits, 600 steps, patch 1": _vit("digits", A, DIGITS_FIT, patch_size=1),
    "digits, 600 steps, patch 2": _vit("digits", A, DIGITS_FIT, patch_size=2),
    "digits, 600 steps, lr 1e-3, patch 1": _vit("digits", A, {**DIGITS_FIT, "lr": 1e-3}, patch_size=1),
    "digits, 600 steps, lr 1e-3, patch 2": _vit("digits", A, {**DIGITS_FIT, "lr": 1e-3}, patch_size=2),
    # class token or mean pooling, at two learning rates
    "digits, 600 steps, mean pooling": _vit("digits", A, DIGITS_FIT, pool="mean"),
    "digits, 600 steps, lr 1e-3, mean pooling": _vit("digits", A, {**DIGITS_FIT, "lr": 1e-3}, pool="mean"),
    # weight decay on every parameter (fit's behaviour before its parameter groups)
    "digits, 600 steps, decay everything": _vit("digits", A, {**DIGITS_FIT, "decay_everything": True}),
    # position embeddings where position decides the label, and the position table's learning rate
    "orientation, learned": _vit("orientation", ORIENTATION_STEPS, PAIRS_FIT),
    "orientation, sincos": _vit("orientation", ORIENTATION_STEPS, PAIRS_FIT, pos_embed="sincos"),
    "orientation, none": _vit("orientation", ORIENTATION_STEPS, PAIRS_FIT, pos_embed="none"),
    "orientation, learned, position lr x10": _vit(
        "orientation", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 10.0}}
    ),
    "orientation, learned, position lr x0.1": _vit(
        "orientation", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.1}}
    ),
    # the ViT against CNNs at equal steps (the ViT's side: "digits, 600 steps" and "same colour")
    "digits, 600 steps, SmallCNN": Experiment("digits", "small_cnn", {"steps": A, **DIGITS_FIT}),
    "digits, 600 steps, DeepCNN": Experiment("digits", "deep_cnn", {"steps": A, **DIGITS_FIT}),
    "same colour, SmallCNN": Experiment("same_colour", "small_cnn", {"steps": PAIRS_STEPS, **PAIRS_FIT}),
    "same colour, DeepCNN": Experiment("same_colour", "deep_cnn", {"steps": PAIRS_STEPS, **PAIRS_FIT}),
}
del A


class Split(NamedTuple):
    """One training set split three ways: train on `train`, choose settings on `val`, report `test` once."""

    train: ImageDataset
    val: ImageDataset
    test: ImageDataset


def _check_name(name) -> Experiment:
    if not isinstance(name, str):
        raise WrongTypeError(f"name must be the name of an experiment (a str), got {describe(name)}")
    if name not in EXPERIMENTS:
        close = difflib.get_close_matches(name, list(EXPERIMENTS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; the names: {', '.join(map(repr, EXPERIMENTS))}"
        raise ValueError(f"no experiment {name!r}{hint}")
    return EXPERIMENTS[name]


def _classes(data: str) -> list[str]:
    """The class names of a DATA key's training set."""
    options = DATA[data][0]
    return RELATIONAL_TASKS[options["task"]] if options["name"] == "relational" else [str(d) for d in range(10)]


def experiment_data(data: str) -> Split:
    """The three parts of one training set: the course's train / test split, and a stratified
    VALIDATION_FRACTION of train set aside (split_validation, seed SPLIT_SEED).

    Args:
        data: a key of DATA ("digits", "same_colour", "orientation", ...).
    """
    if not isinstance(data, str) or data not in DATA:
        raise ValueError(f"data must be one of {sorted(DATA)}, got {describe(data)}")
    release_memory()  # the images are drawn in fresh pages: first hand back what earlier work freed
    train, test = load_training_set(**DATA[data][0])
    train, val = split_validation(train, VALIDATION_FRACTION, seed=SPLIT_SEED)
    return Split(train, val, test)


def run_experiment(name: str, seeds: Iterable[int] = (0,), data: Split | None = None, progress: bool = False):
    """Train and measure one experiment for each seed (see utils.experiments.run_seeds).

    Args:
        name: a key of EXPERIMENTS.
        seeds: distinct whole numbers; seed 0 alone is what the lesson runs live.
        data: the experiment's Split if already loaded (else it is loaded here).
        progress: one progress bar over the seeds.
    Returns:
        one dict per seed: seed, val_accuracy, test_accuracy, steps, seconds, steps_per_second,
        parameters, multiply_adds.
    """
    experiment = _check_name(name)
    if data is None:
        data = experiment_data(experiment.data)
    if not isinstance(data, Split):
        raise WrongTypeError(
            f"data must be the Split that experiment_data({experiment.data!r}) returns, got {describe(data)}"
        )
    expected = _classes(experiment.data)
    if data.train.classes != expected:
        raise ValueError(
            f"{name!r} trains on {experiment.data!r}, but data holds the classes {data.train.classes}: "
            f"pass experiment_data({experiment.data!r})"
        )
    return run_seeds(experiment.build, data.train, data.val, data.test, seeds, progress=progress, **experiment.fit)


@cache
def _shipped(path: Path) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"no shipped results at {path}: `make experiments` writes them (about 25 minutes)")
    with open(path, encoding="utf-8") as file:
        return json.load(file)


def shipped_results(path: str | Path = RESULTS_FILE) -> dict:
    """The shipped results: {"produced_by", "torch", "python", "threads", "seeds", "experiments":
    {name: {"recipe": Experiment.as_dict(), "runs": [run_experiment's dicts]}}}."""
    return _shipped(Path(path))


def shipped_runs(name: str, path: str | Path = RESULTS_FILE) -> list[dict]:
    """The shipped runs of experiment `name`, one dict per seed (as run_experiment returns them).

    Raises a ValueError when the file's recipe is not today's EXPERIMENTS[name]: the results would
    belong to another experiment (run `make experiments` again).
    """
    return runs_of_recipe(path, name, _check_name(name).as_dict(), "make experiments")


def runs_of_recipe(path: str | Path, name: str, recipe: dict, command: str) -> list[dict]:
    """The runs stored under `name` in the results file at `path`, if they were made by `recipe`;
    a ValueError that says to run `command` again otherwise (lessons 6 and 9 share it)."""
    results = shipped_results(path)["experiments"]
    if name not in results:
        raise ValueError(f"the shipped results hold no experiment {name!r}: run `{command}` again")
    if results[name]["recipe"] != json.loads(json.dumps(recipe)):
        raise ValueError(
            f"the shipped results of {name!r} were made with another recipe ({results[name]['recipe']}) than "
            f"today's ({recipe}): run `{command}` again"
        )
    return results[name]["runs"]


def shipped_values(name: str, key: str = "val_accuracy") -> list[float]:
    """One number per shipped seed, e.g. shipped_values("digits", "test_accuracy")."""
    runs = shipped_runs(name)
    if key not in runs[0]:
        raise ValueError(f"the shipped runs hold {sorted(runs[0])}, not {key!r}")
    return [run[key] for run in runs]


def made_here(path: str | Path = RESULTS_FILE) -> bool:
    """Whether the results file at `path` was made by this kind of CPU (utils.runtime.cpu_kind) and this
    torch version: then a rerun of a shipped seed gives its numbers again, bit for bit."""
    results = shipped_results(path)
    return results.get("cpu") == cpu_kind() and results.get("torch") == torch.__version__.split("+")[0]


@dataclass(frozen=True)
class Agreement:
    """How a number from a run made here compares with the shipped seeds: truthy when it agrees;
    str() says what it was held to, e.g. "97.0 %, inside 93.1 % to 100.0 %, where one more seed lands ...".

    On the kind of CPU that made the file (`exact`) only the same seed's stored number agrees. On
    another kind the run is as different as another seed, so it must land inside the seeds'
    prediction interval (utils.experiments.prediction_interval), widened by IMAGES_OF_SLACK
    images for accuracies.
    """

    holds: bool
    value: float  # the number from the run made here
    stored: float  # the same seed's number in the file
    low: float  # what counts as agreeing: [low, high]
    high: float
    exact: bool  # this kind of CPU made the file: low == high == stored
    percent: bool  # show as percentages

    def __bool__(self) -> bool:
        return self.holds

    def _show(self, number: float) -> str:
        return f"{number * 100:.1f} %" if self.percent else f"{number:.4g}"

    def __str__(self) -> str:
        value = self._show(self.value)
        if self.exact:
            same = "the same" if self.holds else "NOT the same"
            return (
                f"{value}, {same} as the shipped run of this seed ({self._show(self.stored)}; this kind of CPU made it)"
            )
        where = "inside" if self.holds else "OUTSIDE"
        return (
            f"{value}, {where} {self._show(self.low)} to {self._show(self.high)}, where one more seed lands "
            f"{PREDICTION * 100:.0f} times in 100 (another kind of CPU made the shipped runs)"
        )


def agreement(value: float, stored: float, seeds: list[float], exact: bool, images: int | None = None) -> Agreement:
    """Whether `value`, from a run made here, agrees with a shipped seed's `stored` number and the
    numbers of all shipped `seeds` (see Agreement). `images`: for an accuracy, how many images it
    was measured on (it is then shown as a percentage and widened by IMAGES_OF_SLACK images)."""
    if exact:
        low = high = stored
    else:
        low, high = prediction_interval(seeds, percent=images is not None)
        if images is not None:
            low, high = max(low - IMAGES_OF_SLACK / images, 0.0), min(high + IMAGES_OF_SLACK / images, 1.0)
    return Agreement(low <= value <= high, value, stored, low, high, exact, images is not None)


def agrees_with_shipped(name: str, run: dict, data: Split, key: str = "val_accuracy") -> Agreement:
    """Whether a live run of experiment `name` (run_experiment's dict, with its seed) agrees with
    the shipped runs: exactly, if this kind of CPU made the file (made_here), else inside where one
    more seed lands. `data`: the experiment's Split, whose sizes turn accuracies into images."""
    return agreement_of_runs(shipped_runs(name), run, key, made_here(), data)


def agreement_of_runs(runs: list[dict], run: dict, key: str, exact: bool, data: Split | None = None) -> Agreement:
    """agrees_with_shipped for any list of shipped runs (lessons 6 and 9 share it); `data` is
    needed for the accuracies ("val_accuracy", "test_accuracy")."""
    if not isinstance(run, Mapping) or key not in run or "seed" not in run:
        raise ValueError(
            f"run must be a dict with 'seed' and {key!r}, as run_experiment returns it; got {describe(run)}"
        )
    same_seed = [shipped for shipped in runs if shipped["seed"] == run["seed"]]
    if not same_seed:
        raise ValueError(f"no shipped run has seed {run['seed']}; the shipped seeds: {[r['seed'] for r in runs]}")
    images = None
    if key in ("val_accuracy", "test_accuracy"):
        if not isinstance(data, Split):
            raise WrongTypeError(f"an accuracy needs the Split it was measured on as data, got {describe(data)}")
        images = len(data.val if key == "val_accuracy" else data.test)
    return agreement(run[key], same_seed[0][key], [shipped[key] for shipped in runs], exact, images)


def versus(name_a: str, name_b: str, key: str = "val_accuracy", names: tuple[str, str] | None = None):
    """Welch's t-test of two shipped experiments over their seeds (utils.experiments.compare):
    str() is the verdict, e.g. "sincos is higher by 16.3 points (p < 0.001, 5 seeds each)"."""
    names = names or (name_a, name_b)
    return compare(shipped_values(name_a, key), shipped_values(name_b, key), percent=True, names=names)


def results_table(
    labels: Mapping[str, str],
    live: Mapping[str, dict],
    key: str = "val_accuracy",
    runs: Callable[[str], list[dict]] = shipped_runs,
) -> str:
    """A text table with one row per experiment: the run made here (seed 0; "not run" when `live`
    lacks it), the shipped seeds' spread of `key`, and what the run cost: steps, epochs, parameters,
    multiply-adds per image (the same for every seed and machine; from the shipped seed 0).

    Args:
        labels: {experiment name: how the row is called}, in the order of the rows.
        live: {experiment name: the run made here} (run_experiment(name)[0] or run_record(...)).
        key: "val_accuracy" (choices, ablations) or "test_accuracy" (final models).
        runs: name -> the shipped runs (lesson 9 passes utils.claims.shipped_runs).
    """
    what = {"val_accuracy": "validation", "test_accuracy": "test"}.get(key, key)
    width = max(len(label) for label in labels.values())
    lines = [
        f"{'':<{width}}  {'here, seed 0':>12}  {f'{what} accuracy, shipped seeds 0-4':<40}  "
        f"{'steps':>5}  {'epochs':>6}  {'parameters':>10}  {'mult-adds/image':>15}"
    ]
    for name, label in labels.items():
        found = runs(name)
        values, first = [run[key] for run in found], found[0]
        shipped = spread(values, percent=True)
        summary = f"{shipped.mean:.1%} ± {100 * shipped.std:.1f} (range {min(values):.1%}-{max(values):.1%})"
        here = f"{live[name][key]:.1%}" if name in live else "not run"
        lines.append(
            f"{label:<{width}}  {here:>12}  {summary:<40}  {first['steps']:>5}  {first['epochs']:>6}  "
            f"{first['parameters']:>10,}  {first['multiply_adds'] / 1e6:>13.2f} M"
        )
    return "\n".join(lines)


def environment() -> dict:
    """What the shipped results depend on besides the recipes: versions and the thread count."""
    return {
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
        "threads": 1,  # fit's and evaluate's default: the same numbers on every machine of one kind
        "cpu": cpu_kind(),  # another kind of CPU rounds differently: its runs agree like another seed's
        "seeds": list(SEEDS),
        "validation_fraction": VALIDATION_FRACTION,
        "split_seed": SPLIT_SEED,
    }
