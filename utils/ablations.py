"""Lesson 6's experiments, each defined once: the main runs, the settings chosen on validation, the
ablations and the CNN comparisons. The lesson runs seed 0 of each live; `make experiments`
(tools/run_experiments.py) runs seeds 0-4 of all of them and ships the results in
utils/results/lesson6.json, so the lesson can print its live run beside five seeds' spread.

- `EXPERIMENTS`: name -> `Experiment` (the data, the model, fit's options; budgets in steps).
- `experiment_data(data)`: the train / validation / test split every experiment of that data uses.
- `run_experiment(name, seeds, data)`: train and measure (utils.experiments.run_seeds).
- `shipped_runs(name)`: the shipped runs of one experiment; `shipped_results()` the whole file,
  checked once as it is read (`read_results`: JSON, every key, accuracies, the checksum that
  tools/run_experiments.py stores, `experiments_checksum`) and read again when it changes on disk.
- `agrees_with_shipped(name, run, data)`: does a live run agree with the shipped seeds? Exactly,
  on the kind of CPU that made the file; where another seed would land, on another kind.
- `grade_shipped(family)`: claims about shipped experiments graded by the rubric (utils.rubric),
  Holm inside the family; `versus(a, b)`: Welch's test alone.
- `accuracy_by_reach(cnn, test)`: a CNN's accuracy on the two-object images its windows can and
  cannot reach (run_experiment stores it with every CNN run on a two-object set).
"""

import difflib
import hashlib
import json
import math
import platform
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import torch
from torch import nn
from tqdm.auto import tqdm

from utils.baselines import DeepCNN, SmallCNN, objects_in_one_window
from utils.data import RELATIONAL_TASKS, load_training_set, split_validation
from utils.datasets import ImageDataset
from utils.experiments import (
    MAX_SEED,
    PREDICTION,
    check_fraction,
    compare,
    prediction_interval,
    run_record,
    run_seeds,
    spread,
)
from utils.rubric import grade_family
from utils.runtime import cpu_kind, release_memory, set_seed
from utils.tables import Table
from utils.training import evaluate, fit, predict
from utils.validation import WrongTypeError, check_flag, check_number, check_positive, check_whole, describe
from utils.vit import VisionTransformer, ViTConfig

ROOT = Path(__file__).resolve().parent.parent  # the course's folder: paths in messages are shown from it
RESULTS_FILE = Path(__file__).parent / "results" / "lesson6.json"
CHECKSUM_KEY = "experiments_sha256"  # a results file's own key: experiments_checksum of its "experiments"
# How a shipped results file (by name, in RESULTS_FILE's folder) is made again: command, duration.
REMAKE = {
    "lesson6.json": ("make experiments", "about 25 minutes"),
    "lesson9.json": ("make claims", "about an hour"),
    "lesson5.json": ("python tools/run_experiments.py --suite norm_order", "about 10 minutes"),
    "lesson11.json": ("python tools/run_experiments.py --suite stability", "about 12 minutes"),
    "lesson12.json": ("python tools/run_experiments.py --suite resolution", "about 15 minutes"),
    "lesson13.json": ("python tools/run_experiments.py --suite mae", "about 20 minutes"),
}
# What every stored run holds (run_seeds' dict); lesson 9's runs hold more.
RUN_KEYS = (
    "seed",
    "val_accuracy",
    "test_accuracy",
    "steps",
    "epochs",
    "seconds",
    "steps_per_second",
    "parameters",
    "multiply_adds",
)
ACCURACIES = ("val_accuracy", "test_accuracy")  # fractions from 0 to 1
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
# Mean norms of the position table's patch rows at init, 64 wide (measured; lesson 6 prints them):
LEARNED_ROW_NORM = 0.14  # trunc-normal, std 0.02, cut at 2 std: about 0.0175 * sqrt(64)
SINCOS_ROW_NORM = 5.66  # sqrt(64 / 2): every sin-cos pair has norm 1


@dataclass(frozen=True)
class Experiment:
    """One training recipe: which data, which model, fit's options (a budget in steps).

    data: a key of DATA ("digits", "same_colour", "orientation", ...).
    model: "vit" (the tiny ViT, ViTConfig.tiny with the data's shape and `vit`'s overrides),
        "small_cnn" (the SmallCNN with as many parameters as the data's tiny ViT) or "deep_cnn" (DeepCNN).
    fit: keyword arguments of utils.training.fit, including steps.
    vit: ViTConfig fields that differ from the data's tiny ViT, e.g. {"pool": "mean"}.
    pos_norm: None (the model's own position table), or the mean norm the table's patch rows are
        scaled to at init: a learned table's random draw (std 0.02, rows of norm about 0.14) or the
        fixed sin-cos table (rows of norm 5.66) scaled whole, so that the two kinds can be compared
        at the same magnitude. The sin-cos table stays fixed.
    """

    data: str
    model: str
    fit: Mapping = field(default_factory=dict)
    vit: Mapping = field(default_factory=dict)
    pos_norm: float | None = None

    def __post_init__(self):
        if not isinstance(self.data, str) or self.data not in DATA:
            raise ValueError(f"data must be one of {sorted(DATA)}, got {self.data!r}")
        if not isinstance(self.model, str) or self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        for name in ("fit", "vit"):
            if not isinstance(getattr(self, name), Mapping):
                raise WrongTypeError(
                    f"{name} must be a dict of options, e.g. {{'steps': 600}}, got {describe(getattr(self, name))}"
                )
        if self.vit and self.model != "vit":
            raise ValueError(f"vit options are for the ViT, got {dict(self.vit)} for a {self.model}")
        if self.pos_norm is not None:
            check_positive(self.pos_norm, "pos_norm", meaning=" (the mean norm of the position table's rows)")
            if self.model != "vit" or self.config.pos_embed == "none":
                raise ValueError(f"pos_norm scales a ViT's position table, got {self.model} with {dict(self.vit)}")
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
            model = VisionTransformer(self.config)
            if self.pos_norm is not None:
                with torch.no_grad():
                    rows = model.pos_embed[0, model.num_prefix_tokens :]  # (N, D): one row per patch
                    model.pos_embed.mul_(self.pos_norm / rows.norm(dim=-1).mean())  # no random numbers drawn
            return model
        if self.model == "small_cnn":  # as many parameters as the data's tiny ViT
            vit = VisionTransformer(ViTConfig.tiny(**shape))
            target = sum(parameter.numel() for parameter in vit.parameters())
            return SmallCNN.with_parameters(target, shape["in_channels"], shape["num_classes"])
        return DeepCNN(shape["in_channels"], shape["num_classes"])

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        recipe = {"data": self.data, "model": self.model, "vit": dict(self.vit), "fit": dict(self.fit)}
        if self.pos_norm is not None:  # only where set: the other recipes stay as the file stores them
            recipe["pos_norm"] = self.pos_norm
        return recipe

    def __str__(self) -> str:
        model = {"vit": "tiny ViT", "small_cnn": "SmallCNN", "deep_cnn": "DeepCNN"}[self.model]
        if self.model == "vit":
            config = self.config
            model += f" ({config.patch_size} px patches, {config.num_tokens} tokens, {config.pool} pooling"
            model += f", {'no' if config.pos_embed == 'none' else config.pos_embed} positions"
            model += f", rows scaled to norm {self.pos_norm})" if self.pos_norm is not None else ")"
        options = ", ".join(f"{key}={value}" for key, value in self.fit.items())
        return f"{model} on {self.data}: fit({options})"


def _vit(data: str, steps: int, fit: Mapping, pos_norm: float | None = None, **vit) -> Experiment:
    return Experiment(data, "vit", {"steps": steps, **fit}, vit, pos_norm)


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
    # the magnitude confound: at init sin-cos rows have norm 5.66, learned rows 0.14 (patch tokens 0.89)
    "orientation, sincos, norm 0.14": _vit(
        "orientation", ORIENTATION_STEPS, PAIRS_FIT, pos_norm=LEARNED_ROW_NORM, pos_embed="sincos"
    ),
    "orientation, learned, norm 5.66": _vit("orientation", ORIENTATION_STEPS, PAIRS_FIT, pos_norm=SINCOS_ROW_NORM),
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


@dataclass(frozen=True)
class Origin:
    """Which data a part of a Split holds: experiment_data stores it on each part as `origin`."""

    data: str  # the key of DATA
    images: int  # how many images experiment_data gave this part


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
    for part in (train, val, test):
        part.origin = Origin(data, len(part))  # so that another experiment's Split is refused
    return Split(train, val, test)


def _classes_in_words(classes: list[str]) -> str:
    return f"{classes[0]!r} to {classes[-1]!r}" if len(classes) > 3 else str(classes)


def check_split(data, expected: str, name: str, verb: str = "is measured on") -> Split:
    """`data` if it is the Split experiment_data(expected) returns: the same classes in every part,
    and (when experiment_data made it) the same data and every image of each part; a ValueError
    that names experiment `name` and what it `verb` ("trains on", "is measured on") otherwise."""
    wanted = f"experiment_data({expected!r})"
    if not isinstance(data, Split):
        raise WrongTypeError(f"data must be the Split that {wanted} returns, got {describe(data)}")
    said, classes = f"{name!r} {verb} {wanted}", _classes(expected)
    for part_name, part in zip(Split._fields, data):
        if not isinstance(part, ImageDataset):
            raise WrongTypeError(f"data.{part_name} must be an ImageDataset from {wanted}, got {describe(part)}")
        if part.classes != classes:
            raise ValueError(
                f"{said} (classes {_classes_in_words(classes)}), but data.{part_name} holds the classes "
                f"{part.classes}: pass {wanted}"
            )
        origin = getattr(part, "origin", None)
        if isinstance(origin, Origin) and origin.data != expected:
            raise ValueError(
                f"{said}, but data is the Split of experiment_data({origin.data!r}) (the same classes, other "
                f"images): pass {wanted}"
            )
        if isinstance(origin, Origin) and len(part) != origin.images:
            raise ValueError(
                f"{said}, but data.{part_name} holds {len(part)} images, not the {origin.images} of {wanted}: "
                "pass the whole Split"
            )
    return data


def run_experiment(name: str, seeds: Iterable[int] = (0,), data: Split | None = None, progress: bool = False):
    """Train and measure one experiment for each seed (see utils.experiments.run_seeds).

    Args:
        name: a key of EXPERIMENTS.
        seeds: distinct whole numbers; seed 0 alone is what the lesson runs live.
        data: the experiment's Split if already loaded (else it is loaded here).
        progress: one progress bar over the seeds.
    Returns:
        one dict per seed: seed, val_accuracy, test_accuracy, steps, seconds, steps_per_second,
        parameters, multiply_adds; a CNN on a two-object set adds train_accuracy and
        accuracy_by_reach's in_reach, accuracy_in_reach and accuracy_out_of_reach.
    """
    experiment = _check_name(name)
    if data is None:
        data = experiment_data(experiment.data)
    check_split(data, experiment.data, name, "trains on")
    if experiment.model == "vit" or getattr(data.test, "object_masks", None) is None:
        return run_seeds(experiment.build, data.train, data.val, data.test, seeds, progress=progress, **experiment.fit)
    # a CNN on a two-object set: also its training accuracy and its accuracy on the test images its
    # windows can and cannot reach
    built = []  # the model of each seed, trained in place by run_seeds

    def build() -> nn.Module:
        built.append(experiment.build())
        return built[-1]

    runs = []
    for seed in tqdm(list(seeds), desc="seeds", disable=not progress):  # one at a time: the same runs
        (run,) = run_seeds(build, data.train, data.val, data.test, [seed], **experiment.fit)
        _, train_accuracy = evaluate(built[-1], data.train)  # below chance on test: did it fit train?
        runs.append({**run, "train_accuracy": train_accuracy, **accuracy_by_reach(built[-1], data.test)})
        built.clear()
    return runs


def accuracy_by_reach(model: nn.Module, test: ImageDataset) -> dict:
    """A CNN's test accuracy split by whether one window of its receptive field touches both
    objects (utils.baselines.objects_in_one_window): {"in_reach": how many images, "accuracy_in_reach",
    "accuracy_out_of_reach" (None when every image is in reach)}.

    Args:
        model: a trained SmallCNN or DeepCNN (it has `receptive_field`).
        test: a two-object set (make_relational), e.g. experiment_data("same_colour").test.
    """
    window = getattr(model, "receptive_field", None)
    if window is None:
        raise WrongTypeError(f"model must be a CNN with a receptive_field (SmallCNN, DeepCNN), got {describe(model)}")
    together = objects_in_one_window(test, window)  # (N,) bool
    right = predict(model, test.images) == test.labels  # (N,) bool
    out = ~together
    return {
        "in_reach": int(together.sum()),
        "accuracy_in_reach": float(right[together].float().mean()) if together.any() else None,
        "accuracy_out_of_reach": float(right[out].float().mean()) if out.any() else None,
    }


# ---- the shipped results -----------------------------------------------------------------------


def experiments_checksum(experiments: Mapping) -> str:
    """The sha256 (hex) of the canonical JSON of a results file's "experiments" (sorted keys, no
    spaces): tools/run_experiments.py stores it under CHECKSUM_KEY, read_results compares."""
    text = json.dumps(experiments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _shown(path: Path) -> str:
    """`path` as a message shows it: from the course's folder when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except (ValueError, OSError, RuntimeError):  # outside the folder, or a link that loops
        return str(path)


def _remake(path: Path) -> tuple[str, str] | None:
    """(command, duration) that makes the shipped results file at `path` again; None for another file."""
    shipped = path.resolve().parent == RESULTS_FILE.parent.resolve()
    return REMAKE.get(path.name) if shipped else None


def _fix(path: Path) -> str:
    """How to get a good file at `path` back."""
    remake = _remake(path)
    if remake:
        return f"restore it with git checkout {_shown(path)}, or run {remake[0]} ({remake[1]})"
    return "remove it, or write it again with tools/run_experiments.py --output"


def _is_real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _run_problem(run, index: int, name: str) -> str | None:
    """What makes run `index` of experiment `name` no stored run, or None."""
    if not isinstance(run, dict):
        return f"run {index} of {name!r} is {describe(run)}, not a dict"
    missing = [key for key in RUN_KEYS if key not in run]
    if missing:
        return f"run {index} of {name!r} has no {missing[0]!r} (expected {', '.join(RUN_KEYS)})"
    seed = run["seed"]
    if not _is_whole(seed):
        return f"run {index} of {name!r} has seed {seed!r}, not a whole number"
    for key in ACCURACIES:
        if not (_is_real(run[key]) and 0 <= run[key] <= 1):
            return f"seed {seed} of {name!r} has {key} {run[key]!r}; the file holds accuracies from 0 to 1"
    for key in ("steps", "epochs", "parameters", "multiply_adds"):
        if not _is_whole(run[key]):
            return f"seed {seed} of {name!r} has {key} {run[key]!r}, not a whole number"
    for key in ("seconds", "steps_per_second"):
        if not _is_real(run[key]):
            return f"seed {seed} of {name!r} has {key} {run[key]!r}, not a finite number"
    return None


def results_problem(results) -> str | None:
    """What makes `results` (a results file's JSON) no results file, the first thing found, or None:
    the keys produced_by, seeds and experiments; every experiment's recipe and runs; every run's
    RUN_KEYS (accuracies from 0 to 1, whole numbers where they count) and distinct seeds."""
    if not isinstance(results, dict):
        return f"it holds {type(results).__name__}, not a dict of results"
    missing = [key for key in ("produced_by", "seeds", "experiments") if key not in results]
    if missing:
        return f"it has no {missing[0]!r} (expected produced_by, seeds, experiments, ...)"
    if not isinstance(results["seeds"], list) or not all(_is_whole(seed) for seed in results["seeds"]):
        return f"its seeds are {results['seeds']!r}, not a list of whole numbers"
    experiments = results["experiments"]
    if not isinstance(experiments, dict) or not experiments:
        return "its 'experiments' holds no experiment"
    for name, entry in experiments.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("recipe"), dict) or "runs" not in entry:
            return f"{name!r} is not a dict with a 'recipe' and its 'runs'"
        runs = entry["runs"]
        if not isinstance(runs, list) or not runs:
            return f"{name!r} holds no runs"
        seeds = set()
        for index, run in enumerate(runs):
            problem = _run_problem(run, index, name)
            if problem:
                return problem
            if run["seed"] in seeds:
                return f"{name!r} holds seed {run['seed']} twice"
            seeds.add(run["seed"])
    return None


def read_results(path: str | Path) -> dict:
    """The results file at `path`, checked as a whole: valid JSON, every key in place (results_problem),
    the checksum of its experiments as tools/run_experiments.py wrote it. A ValueError that names the
    file, what is wrong and how to restore it otherwise (FileNotFoundError when there is none)."""
    path = Path(path)
    shown, fix, remake = _shown(path), _fix(path), _remake(path)
    if not path.is_file():
        if remake:
            raise FileNotFoundError(f"no shipped results at {shown}: {remake[0]} writes them ({remake[1]})")
        raise FileNotFoundError(
            f"no results at {shown}: tools/run_experiments.py writes them (make experiments for lesson 6, "
            "make claims for lesson 9)"
        )
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{shown} is not a text file (not UTF-8), so no results: {fix}") from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{shown} is not valid JSON (cut off or edited? {error.msg} at line {error.lineno}, column "
            f"{error.colno}): {fix}"
        ) from None
    problem = results_problem(results)
    if problem:
        raise ValueError(f"{shown}: {problem}: it was edited or cut off; {fix}")
    if CHECKSUM_KEY not in results:
        raise ValueError(
            f"{shown} holds no checksum ({CHECKSUM_KEY!r}): it was edited, or written by an older "
            f"tools/run_experiments.py; {fix}"
        )
    if results[CHECKSUM_KEY] != experiments_checksum(results["experiments"]):
        when = f"after {remake[0]} wrote it" if remake else "after it was written"
        raise ValueError(f"{shown} was changed {when} (checksum differs): {fix}")
    return results


@lru_cache(maxsize=8)
def _read_once(path: Path, modified_ns: int, size: int) -> dict:
    return read_results(path)  # cached per version of the file: a rewritten file is read again


def shipped_results(path: str | Path = RESULTS_FILE) -> dict:
    """The shipped results (read_results): {"produced_by", "torch", "python", "threads", "seeds",
    "experiments": {name: {"recipe": Experiment.as_dict(), "runs": [run_experiment's dicts]}},
    "experiments_sha256"}. Read once per version of the file (its time of change and size)."""
    path = Path(path)
    if not path.is_file():
        return read_results(path)  # raises, saying how to make it
    status = path.stat()
    return _read_once(path, status.st_mtime_ns, status.st_size)


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


def values_of(runs: list[dict], name: str, key: str) -> list:
    """The shipped `runs`' values of `key`, one per seed; a ValueError naming what experiment
    `name`'s runs hold otherwise (lessons 6 and 9 share it)."""
    if not isinstance(key, str):
        raise WrongTypeError(f"key must be the name of a measurement, e.g. 'val_accuracy', got {describe(key)}")
    if not all(key in run for run in runs):
        raise ValueError(f"the shipped runs of {name!r} hold {sorted(runs[0])}, not {key!r}")
    return [run[key] for run in runs]


def shipped_values(name: str, key: str = "val_accuracy") -> list[float]:
    """One number per shipped seed, e.g. shipped_values("digits", "test_accuracy")."""
    return values_of(shipped_runs(name), name, key)


def made_here(path: str | Path = RESULTS_FILE, name: str | None = None) -> bool:
    """Whether the results at `path` (of experiment `name`, when given) were made by this kind of CPU
    (utils.runtime.cpu_kind) and this torch version: then a rerun of a shipped seed gives its numbers
    again, bit for bit. A file whose experiments were run on several kinds records each one's kind
    (its "cpu"); the file's own "cpu" then reads "mixed: ..."."""
    results = shipped_results(path)
    cpu = results.get("cpu")
    if name is not None and name in results["experiments"]:
        cpu = results["experiments"][name].get("cpu", cpu)
    return cpu == cpu_kind() and results.get("torch") == torch.__version__.split("+")[0]


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
    exact = check_flag(exact, "exact")
    if images is not None:
        images = check_whole(images, "images", meaning=" (how many images the accuracy was measured on)")
        value, stored = check_fraction(value, "value"), check_fraction(stored, "stored")
    else:
        value, stored = check_number(value, "value"), check_number(stored, "stored")
    if exact:
        low = high = stored
    else:
        low, high = prediction_interval(seeds, percent=images is not None)
        if images is not None:
            low, high = max(low - IMAGES_OF_SLACK / images, 0.0), min(high + IMAGES_OF_SLACK / images, 1.0)
    return Agreement(low <= value <= high, value, stored, low, high, exact, images is not None)


def agrees_with_shipped(name: str, run: dict, data: Split, key: str = "val_accuracy") -> Agreement:
    """Whether a live run of experiment `name` (run_experiment's dict, with its seed) agrees with
    the shipped runs: exactly, if this kind of CPU made them (made_here), else inside where one
    more seed lands. `data`: the experiment's Split (experiment_data), whose sizes turn accuracies
    into images; another experiment's is refused."""
    runs = shipped_runs(name)
    check_split(data, _check_name(name).data, name)
    return agreement_of_runs(runs, run, key, made_here(RESULTS_FILE, name), data, name)


def agreement_of_runs(
    runs: list[dict], run: dict, key: str, exact: bool, data: Split | None = None, name: str = "the experiment"
) -> Agreement:
    """agrees_with_shipped for any list of shipped runs (lessons 6 and 9 share it); `data` is
    needed for the accuracies ("val_accuracy", "test_accuracy"); `name`: whose runs they are."""
    if not isinstance(key, str):
        raise WrongTypeError(f"key must be the name of a measurement, e.g. 'val_accuracy', got {describe(key)}")
    if not isinstance(run, Mapping) or key not in run or "seed" not in run:
        raise ValueError(
            f"run must be a dict with 'seed' and {key!r}, as run_experiment returns it; got {describe(run)}"
        )
    seed = check_whole(run["seed"], "run['seed']", minimum=0)
    value = check_fraction(run[key], f"run[{key!r}]") if key in ACCURACIES else check_number(run[key], f"run[{key!r}]")
    same_seed = [shipped for shipped in runs if shipped["seed"] == seed]
    if not same_seed:
        raise ValueError(f"no shipped run has seed {seed}; the shipped seeds: {[r['seed'] for r in runs]}")
    images = None
    if key in ACCURACIES:
        if not isinstance(data, Split):
            raise WrongTypeError(f"an accuracy needs the Split it was measured on as data, got {describe(data)}")
        images = len(data.val if key == "val_accuracy" else data.test)
    return agreement(value, same_seed[0][key], values_of(runs, name, key), exact, images)


@dataclass(frozen=True)
class ShippedArms:
    """A lesson's arms and the file their seeds ship in (lessons 5, 11, 12, 13): `arm(name)` looks one
    up (a close name suggested), `runs`/`values` read its shipped seeds, `agrees` holds a live run
    to them by the agreement rule (exact on the kind of CPU that made them, else like one more seed).

    arms: name -> an arm with `.as_dict()` (its recipe as the file stores it); data: the DATA key
    every arm trains on."""

    arms: Mapping
    results_file: Path
    command: str
    data: str = "digits"

    def arm(self, name):
        """The arm called `name`; a TypeError for a non-str, a ValueError naming the closest arm."""
        if not isinstance(name, str):
            raise WrongTypeError(f"name must be the name of an arm (a str), got {describe(name)}")
        if name not in self.arms:
            close = difflib.get_close_matches(name, list(self.arms), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; the names: {', '.join(map(repr, self.arms))}"
            raise ValueError(f"no arm {name!r}{hint}")
        return self.arms[name]

    def runs(self, name: str, path: str | Path | None = None) -> list[dict]:
        """The shipped runs of arm `name`, one dict per seed; a ValueError when the file's recipe is
        not today's (run the suite again)."""
        return runs_of_recipe(path or self.results_file, name, self.arm(name).as_dict(), self.command)

    def values(self, name: str, key: str = "val_accuracy") -> list:
        """One value of `key` per shipped seed of arm `name`."""
        return values_of(self.runs(name), name, key)

    def train(self, name: str, seed: int, data: "Split | None" = None) -> tuple[nn.Module, dict]:
        """Train seed `seed` of arm `name` (its `.build()` and `.experiment.fit`) on `data` (the
        arms' DATA split if None): the trained model and run_record's dict."""
        arm = self.arm(name)
        seed = check_whole(seed, "seed", minimum=0, maximum=MAX_SEED)
        data = experiment_data(self.data) if data is None else check_split(data, self.data, name, "trains on")
        set_seed(seed)
        model = arm.build()
        history = fit(model, data.train, data.val, seed=seed, progress=False, **arm.experiment.fit)
        _, test_accuracy = evaluate(model, data.test)
        return model, run_record(model, history, test_accuracy, seed, tuple(data.train.tensors[0].shape[1:]))

    def agrees(self, name: str, run: dict, data: "Split", key: str = "val_accuracy") -> "Agreement":
        """Whether a live run of arm `name` agrees with its shipped seeds (agreement_of_runs)."""
        runs = self.runs(name)
        check_split(data, self.data, name)
        return agreement_of_runs(runs, run, key, made_here(self.results_file, name), data, name)


def versus(name_a: str, name_b: str, key: str = "val_accuracy", names: tuple[str, str] | None = None):
    """Welch's t-test of two shipped experiments over their seeds (utils.experiments.compare):
    str() is the verdict, e.g. "sincos is higher by 16.3 points (p < 0.001, 5 seeds each)"."""
    names = names or (name_a, name_b)
    return compare(shipped_values(name_a, key), shipped_values(name_b, key), percent=True, names=names)


def grade_shipped(family: Mapping[str, Mapping], key: str = "val_accuracy") -> dict:
    """Grade claims about shipped experiments with the rubric (utils.rubric.grade_family): Holm's
    correction inside the family, the exact test where Welch's assumptions fail.

    Args:
        family: {label: dict(a=experiment name, b=experiment name, claim="higher" | "lower" | "equal",
            effect=smallest effect of interest as a fraction (0.01 = 1 point), names=(shown A, shown B))}.
        key: "val_accuracy" (choices, ablations) or "test_accuracy" (final models).
    Returns:
        {label: utils.rubric.Grade}, in the order given.
    """
    if not isinstance(family, Mapping) or not family:
        raise WrongTypeError(
            f"family must be a non-empty dict {{label: dict(a=..., b=..., ...)}}, got {describe(family)}"
        )
    comparisons = {}
    for label, options in family.items():
        if not isinstance(options, Mapping) or not {"a", "b", "claim", "effect"} <= set(options):
            raise ValueError(f"family[{label!r}] must be a dict with a, b, claim and effect, got {describe(options)}")
        a, b = options["a"], options["b"]
        comparisons[label] = {
            **options,
            "a": shipped_values(a, key),
            "b": shipped_values(b, key),
            "names": tuple(options.get("names", (a, b))),
            "percent": True,
        }
    return grade_family(comparisons)


def results_table(
    labels: Mapping[str, str],
    live: Mapping[str, dict],
    key: str = "val_accuracy",
    runs: Callable[[str], list[dict]] = shipped_runs,
) -> Table:
    """A table (utils.tables: text, and HTML in Jupyter) with one row per experiment: the run made
    here (seed 0; "not run" when `live` lacks it), the shipped seeds' spread of `key`, and what the
    run cost: steps, epochs, parameters, multiply-adds per image (the same for every seed and
    machine; from the shipped seed 0).

    Args:
        labels: {experiment name: how the row is called}, in the order of the rows.
        live: {experiment name: the run made here} (run_experiment(name)[0] or run_record(...)).
        key: "val_accuracy" (choices, ablations) or "test_accuracy" (final models).
        runs: name -> the shipped runs (lesson 9 passes utils.claims.shipped_runs).
    """
    if not isinstance(labels, Mapping):
        raise WrongTypeError(f"labels must be a dict {{experiment name: row label}}, got {describe(labels)}")
    if not labels:
        raise ValueError("labels must name at least one experiment, e.g. {'digits': 'tiny ViT'}, got an empty dict")
    if not isinstance(live, Mapping):
        raise WrongTypeError(f"live must be a dict {{experiment name: the run made here}}, got {describe(live)}")
    what = {"val_accuracy": "validation", "test_accuracy": "test"}.get(key, key)
    header = ["", "here, seed 0", f"{what} accuracy, shipped seeds 0-4", "steps", "epochs", "parameters"]
    rows = []
    for name, label in labels.items():
        found = runs(name)
        values, first = [run[key] for run in found], found[0]
        shipped = spread(values, percent=True)
        summary = f"{shipped.mean:.1%} ± {100 * shipped.std:.1f} (range {min(values):.1%}-{max(values):.1%})"
        here = f"{_live_value(live, name, key):.1%}" if name in live else "not run"
        cost = [first["steps"], first["epochs"], f"{first['parameters']:,}", f"{first['multiply_adds'] / 1e6:.2f} M"]
        rows.append([label, here, summary, *cost])
    return Table([*header, "mult-adds/image"], rows, align="lrlrrrr")


def _live_value(live: Mapping, name: str, key: str) -> float:
    """live[name][key], checked: a fraction from 0 to 1."""
    run = live[name]
    if not isinstance(run, Mapping) or key not in run:
        raise ValueError(f"live[{name!r}] must be a run's dict holding {key!r}, got {describe(run)}")
    return check_fraction(run[key], f"live[{name!r}][{key!r}]")


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
