"""Lesson 6: experiments over seeds. One training run is one draw of a random number (the init,
the shuffling); a conclusion needs several seeds and a measure of the noise between them.

- `spread(values)`: n, mean, sample standard deviation and a 95 % confidence interval of the mean.
- `compare(a, b)`: Welch's t-test of two sets of runs: is the difference bigger than the noise?
- `prediction_interval(values)`: where one more run (another seed) would land.
- `run_seeds(build_model, train, val, test, seeds, ...)`: train and test one fresh model per seed.
- `check_fraction(value, name)`: an accuracy from a caller is a fraction from 0 to 1, not a percentage.

Nothing here prints: the lesson formats the tables.
"""

import difflib
import inspect
import itertools
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset
from tqdm.auto import tqdm

from utils.compute import multiply_adds
from utils.datasets import check_dataset
from utils.runtime import set_seed
from utils.training import evaluate, fit
from utils.validation import WrongTypeError, check_flag, check_number, check_whole, describe

CONFIDENCE = 0.95  # of the interval `spread` gives
PREDICTION = 0.99  # how often one more run lands inside `prediction_interval`
ALPHA = 0.05  # `compare` calls a difference significant when p < ALPHA
MAX_VALUES = 10**6  # values one spread takes: a guard against an endless generator
MAX_SEEDS = 10**4  # seeds one run_seeds takes: a guard against an endless generator
MAX_SEED = 2**32 - 1  # the largest seed NumPy's seeding (in set_seed) takes
TAKEN_BY_RUN_SEEDS = ("seed", "progress")  # fit's options that run_seeds sets itself


# ---- checks, one place per idea -----------------------------------------------------------------


def check_fraction(value, name: str) -> float:
    """`value` as a float; an error naming `name` unless it is a fraction from 0 to 1 (an accuracy),
    e.g. "run['val_accuracy'] must be a fraction from 0 to 1, got 97.0: divide by 100 if it is a
    percentage"."""
    try:
        return check_number(value, name, low=0, high=1)
    except WrongTypeError:
        raise
    except ValueError:  # NaN, infinity or out of range: a real number, said as it came
        came = repr(value) if isinstance(value, int) else repr(float(value))
        hint = ": divide by 100 if it is a percentage" if 1 < value <= 100 else ""
        raise ValueError(f"{name} must be a fraction from 0 to 1, got {came}{hint}") from None


def _check_values(values, name: str, percent: bool) -> np.ndarray:
    """`values` as a 1-D float64 array of at least 2 finite numbers (fractions from 0 to 1 with
    percent=True); a list, tuple, range, 1-D NumPy array or 1-D tensor passes."""
    expected = f"{name} must be a list of at least 2 numbers, one per seed, e.g. [0.91, 0.93, 0.92, 0.90, 0.94]"
    if isinstance(values, Spread):
        raise WrongTypeError(f"{expected}, got a Spread: pass the values it was computed from")
    if isinstance(values, torch.Tensor | np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{expected}, got {describe(values)}: it must be 1-D, one number per seed")
        values = values.tolist()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise WrongTypeError(f"{expected}, got {describe(values)}")
    values = list(itertools.islice(values, MAX_VALUES + 1))
    if len(values) > MAX_VALUES:
        raise ValueError(f"{expected}, got more than {MAX_VALUES:,} (an endless generator?)")
    if values and all(isinstance(value, Mapping) for value in values):
        keys = list(values[0])
        key = "test_accuracy" if "test_accuracy" in keys else keys[0] if keys else "name"
        raise WrongTypeError(
            f"{expected}, got a list of {len(values)} dicts (run_seeds' results?): "
            f"take one number out of each, e.g. [run[{key!r}] for run in results]"
        )
    if len(values) < 2:
        raise ValueError(
            f"{expected}, got {len(values)} value{'s' if len(values) != 1 else ''}: "
            "a spread needs at least 2 runs (5 or more to trust it)"
        )
    numbers = np.array([check_number(value, f"{name}[{i}]") for i, value in enumerate(values)], dtype=np.float64)
    if percent:
        outside = np.flatnonzero((numbers < 0) | (numbers > 1))
        if outside.size:
            i = int(outside[0])
            hint = ": divide by 100 if these are percentages already" if 1 < numbers[i] <= 100 else ""
            raise ValueError(
                f"with percent=True {name} must be fractions from 0 to 1 (accuracies), shown as percentages; "
                f"got {name}[{i}] = {values[i]!r}{hint}"
            )
    largest = float(np.abs(numbers).max())
    if largest > math.sqrt(sys.float_info.max / len(numbers)):  # their variance would overflow
        raise ValueError(f"{name} holds numbers too large to compute a spread of (up to {largest:.3g})")
    return numbers


def _check_names(names) -> tuple[str, str]:
    """`names` as a pair of non-empty strings."""
    if (
        not isinstance(names, tuple | list)
        or len(names) != 2
        or not all(isinstance(name, str) and name.strip() for name in names)
    ):
        raise WrongTypeError(f"names must be two non-empty strings, e.g. ('learned', 'sincos'), got {describe(names)}")
    return names[0], names[1]


def _check_build_model(build_model) -> Callable[[], nn.Module]:
    """`build_model` if it is a function of no arguments (a built model is refused, with a hint)."""
    if isinstance(build_model, nn.Module):
        raise WrongTypeError(
            "build_model must be a function that builds a fresh model, e.g. lambda: VisionTransformer(config), "
            f"got a built model ({type(build_model).__name__}): its training would carry over from seed to seed"
        )
    if not callable(build_model):
        raise WrongTypeError(
            "build_model must be a function that builds a fresh model, e.g. lambda: VisionTransformer(config), "
            f"got {describe(build_model)}"
        )
    return build_model


def _check_seeds(seeds) -> list[int]:
    """`seeds` as a list of at least one distinct whole number from 0 to MAX_SEED."""
    expected = "seeds must be a list of distinct whole numbers, e.g. range(5) or [0, 1, 2, 3, 4]"
    if isinstance(seeds, bool | np.bool_) or not isinstance(seeds, Iterable) or isinstance(seeds, str | bytes):
        hint = (
            f": for {seeds} seeds pass range({seeds})" if isinstance(seeds, int) and not isinstance(seeds, bool) else ""
        )
        raise WrongTypeError(f"{expected}, got {describe(seeds)}{hint}")
    if isinstance(seeds, torch.Tensor | np.ndarray):
        if seeds.ndim != 1:
            raise ValueError(f"{expected}, got {describe(seeds)}")
        seeds = seeds.tolist()
    seeds = list(itertools.islice(seeds, MAX_SEEDS + 1))
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"{expected}, got more than {MAX_SEEDS:,} (an endless generator?)")
    seeds = [check_whole(seed, f"seeds[{i}]", minimum=0, maximum=MAX_SEED) for i, seed in enumerate(seeds)]
    if not seeds:
        raise ValueError(f"{expected}, got none: give at least one seed (5 or more to compare settings)")
    counts = Counter(seeds)
    repeated = sorted(seed for seed, count in counts.items() if count > 1)
    if repeated:
        raise ValueError(
            f"{expected}; seed {repeated[0]} comes {counts[repeated[0]]} times: the same seed gives the same "
            "run, which would look like agreement between seeds without being any"
        )
    return seeds


def _check_fit_options(fit_options: dict) -> None:
    """Raise if `fit_options` names no option of fit, or one that run_seeds sets itself."""
    known = [name for name in inspect.signature(fit).parameters if name not in ("model", "train", "val")]
    for name in fit_options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise WrongTypeError(f"run_seeds passes its extra options to fit, which has no option {name!r}{hint}")
    taken = [name for name in TAKEN_BY_RUN_SEEDS if name in fit_options]
    if taken:
        raise ValueError(
            f"run_seeds sets fit's {' and '.join(taken)} itself (seed: each of `seeds`; progress: off), "
            f"got {', '.join(f'{name}={fit_options[name]!r}' for name in taken)}: leave "
            f"{'them' if len(taken) > 1 else 'it'} out (run_seeds' own progress=True shows one bar over the seeds)"
        )


# ---- the spread of one set of runs --------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """How a number varies over runs (seeds): str() reads e.g. "98.7 % ± 0.3 (95 % CI 98.3-99.1, 5 seeds)".

    percent=True shows fractions (0.987) as percentages (98.7 %); the fields keep the fractions.
    """

    n: int  # how many runs
    mean: float  # their average
    std: float  # sample standard deviation (ddof=1): how far one run typically lies from the mean
    ci_low: float  # 95 % confidence interval of the mean (Student's t, n - 1 degrees of freedom):
    ci_high: float  # where the mean of infinitely many runs lies, 95 times in 100 (with percent, within 0-1)
    percent: bool = False  # show as percentages

    def _show(self, value: float) -> str:
        return f"{value * 100:.1f}" if self.percent else f"{value:.4g}"

    def __str__(self) -> str:
        low, high = self._show(self.ci_low), self._show(self.ci_high)
        interval = f"{low}-{high}" if self.ci_low >= 0 else f"{low} to {high}"
        unit = " %" if self.percent else ""
        return (
            f"{self._show(self.mean)}{unit} ± {self._show(self.std)} "
            f"({CONFIDENCE * 100:.0f} % CI {interval}, {self.n} seeds)"
        )


def _spread_of(numbers: np.ndarray, percent: bool) -> Spread:
    """The Spread of checked numbers (a 1-D float64 array, n >= 2)."""
    from scipy.stats import t  # imported here: importing utils.experiments stays light

    n = len(numbers)
    mean = float(np.mean(numbers))
    deviations = numbers - mean  # (n,)
    largest = float(np.abs(deviations).max())  # scaled by it, so that tiny deviations do not underflow when squared
    std = largest * math.sqrt(float(np.sum((deviations / largest) ** 2)) / (n - 1)) if largest > 0 else 0.0
    half_width = float(t.ppf((1 + CONFIDENCE) / 2, n - 1)) * std / math.sqrt(n)
    low, high = mean - half_width, mean + half_width
    if percent:  # an accuracy's interval stops at 0 % and 100 %
        low, high = max(low, 0.0), min(high, 1.0)
    return Spread(n=n, mean=mean, std=std, ci_low=low, ci_high=high, percent=percent)


def spread(values, percent: bool = False) -> Spread:
    """n, mean, sample standard deviation and 95 % confidence interval of the mean of `values`.

    Args:
        values: one number per run (seed), at least 2: a list, tuple, 1-D array or 1-D tensor.
        percent: the values are fractions from 0 to 1 (accuracies); str() shows them as percentages.
    Returns:
        a Spread; str(spread(...)) reads "98.7 % ± 0.3 (95 % CI 98.3-99.1, 5 seeds)".
    Raises:
        ValueError or TypeError: fewer than 2 values, NaN or infinity, something that is no number,
        with percent=True a value outside 0-1.
    """
    percent = check_flag(percent, "percent")
    return _spread_of(_check_values(values, "values", percent), percent)


def prediction_interval(values, percent: bool = False) -> tuple[float, float]:
    """Where one more run lands, PREDICTION (99) times in 100, if runs vary as `values` did:
    mean ± t · sd · √(1 + 1/n) (Student's t with n - 1 degrees of freedom; the √(1 + 1/n) adds the
    new run's own noise to the uncertainty of the mean). Wider than spread's interval of the mean.

    Args:
        values: one number per run (seed), at least 2.
        percent: the values are fractions from 0 to 1 (accuracies): the interval stops at 0 and 1.
    Returns:
        (low, high).
    """
    from scipy.stats import t

    percent = check_flag(percent, "percent")
    runs = _spread_of(_check_values(values, "values", percent), percent)
    half_width = float(t.ppf((1 + PREDICTION) / 2, runs.n - 1)) * runs.std * math.sqrt(1 + 1 / runs.n)
    low, high = runs.mean - half_width, runs.mean + half_width
    return (max(low, 0.0), min(high, 1.0)) if percent else (low, high)


# ---- two sets of runs compared ------------------------------------------------------------------


def _p_text(p: float) -> str:
    """p for a sentence: "p = 0.003", "p < 0.001"; rounded never across ALPHA (0.0496 is not "0.05")."""
    if 0 < p < 0.001:
        return "p < 0.001"
    for digits in range(2, 10):
        text = f"{p:.{digits}g}"
        if (float(text) < ALPHA) == (p < ALPHA):
            return f"p = {text}"
    return f"p = {p!r}"


@dataclass(frozen=True)
class Comparison:
    """Welch's t-test of two sets of runs (unequal variances): is the difference of their means
    bigger than the noise between seeds? str() is the verdict in words.

    The signs follow scipy.stats.ttest_ind(a, b, equal_var=False): positive when A's mean is higher.
    """

    a: Spread  # the first set of runs
    b: Spread  # the second
    names: tuple[str, str]  # how the verdict calls them
    difference: float  # mean of A - mean of B
    t: float  # difference / its standard error (±inf when both sets have no spread at all)
    df: float  # the Welch-Satterthwaite degrees of freedom of t
    p: float  # two-sided p-value: how often a difference this large comes from noise alone

    @property
    def significant(self) -> bool:
        """True when p < ALPHA (0.05): the difference is unlikely to be noise."""
        return self.p < ALPHA

    @property
    def verdict(self) -> str:
        """E.g. "B is higher by 1.2 points (p = 0.003, 5 seeds each)" or "no significant difference
        at this size (p = 0.15, 5 seeds each)"."""
        seeds = f"{self.a.n} seeds each" if self.a.n == self.b.n else f"{self.a.n} and {self.b.n} seeds"
        if self.difference == 0 and self.a.std == 0 and self.b.std == 0:
            return f"no difference: every seed gave the same value in both ({seeds})"
        if not self.significant:
            return f"no significant difference at this size ({_p_text(self.p)}, {seeds})"
        higher = self.names[0] if self.difference > 0 else self.names[1]
        size = abs(self.difference)
        amount = f"{size * 100:.2g} points" if self.a.percent else f"{size:.4g}"
        if self.a.percent and size * 100 >= 0.1:
            amount = f"{size * 100:.1f} points"
        if self.a.std == 0 and self.b.std == 0:
            return f"{higher} is higher by {amount}, the same on every seed (p = 0, {seeds})"
        return f"{higher} is higher by {amount} ({_p_text(self.p)}, {seeds})"

    def __str__(self) -> str:
        return self.verdict


def _welch(a: Spread, b: Spread) -> tuple[float, float, float, float]:
    """(difference, t, df, p) of Welch's t-test from two spreads."""
    from scipy.stats import t as student_t  # imported here: importing utils.experiments stays light

    difference = a.mean - b.mean
    error_a, error_b = a.std / math.sqrt(a.n), b.std / math.sqrt(b.n)  # standard error of each mean
    if error_a == 0 and error_b == 0:  # no spread at all: the difference is exact
        t = 0.0 if difference == 0 else math.copysign(math.inf, difference)
        return difference, t, float(a.n + b.n - 2), 1.0 if difference == 0 else 0.0
    t = difference / math.hypot(error_a, error_b)
    largest = max(error_a, error_b)  # scaled by it, so that tiny spreads do not underflow when squared
    share_a, share_b = (error_a / largest) ** 2, (error_b / largest) ** 2
    df = (share_a + share_b) ** 2 / (share_a**2 / (a.n - 1) + share_b**2 / (b.n - 1))
    p = float(2 * student_t.sf(abs(t), df))
    return difference, t, df, p


def compare(a, b, *, percent: bool = False, names=("A", "B")) -> Comparison:
    """Welch's t-test of two independent sets of runs, e.g. the test accuracies of two settings
    over 5 seeds each: the difference of their means, t, its degrees of freedom, the two-sided
    p-value and a verdict in words (significant when p < 0.05).

    Args:
        a, b: one number per run (seed), at least 2 each; the sets need not be the same size.
        percent: the values are fractions from 0 to 1 (accuracies); the verdict speaks of points.
        names: what the verdict calls a and b, e.g. ("learned", "sincos").
    Returns:
        a Comparison; str(compare(...)) reads "B is higher by 1.2 points (p = 0.003, 5 seeds each)".
    """
    percent = check_flag(percent, "percent")
    names = _check_names(names)
    spread_a = _spread_of(_check_values(a, "a", percent), percent)
    spread_b = _spread_of(_check_values(b, "b", percent), percent)
    difference, t, df, p = _welch(spread_a, spread_b)
    return Comparison(a=spread_a, b=spread_b, names=names, difference=difference, t=t, df=df, p=p)


# ---- training over seeds ------------------------------------------------------------------------


def _check_test_fits(model: nn.Module, test: TensorDataset) -> None:
    """Evaluate the untrained `model` on `test` once, so that a test set the model cannot take fails
    before any training, not after it."""
    try:
        evaluate(model, test)
    except ValueError as error:
        raise ValueError(f"the test set does not fit the model built by build_model: {error}") from error


def run_record(model: nn.Module, history, test_accuracy: float, seed: int, image_shape: tuple[int, ...]) -> dict:
    """What run_seeds keeps of one trained model (see run_seeds' Returns): a run trained by hand
    with fit(...) can be put beside run_seeds' runs with it.

    Args:
        model: the trained model; history: what fit returned; test_accuracy: evaluate(model, test)[1];
        seed: the seed of the run; image_shape: (C, H, W) of one image, for the multiply-adds.
    """
    return {
        "seed": seed,
        "val_accuracy": history.final_val_accuracy,
        "test_accuracy": test_accuracy,
        "steps": history.step[-1],
        "epochs": history.epoch[-1],
        "seconds": history.seconds[-1],
        "steps_per_second": history.steps_per_second,
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
        "multiply_adds": multiply_adds(model, image_shape),
    }


def run_seeds(
    build_model: Callable[[], nn.Module],
    train: TensorDataset,
    val: TensorDataset | None,
    test: TensorDataset,
    seeds: Iterable[int],
    *,
    progress: bool = False,
    **fit_options,
) -> list[dict]:
    """Train one fresh model per seed and measure it: set_seed(seed), model = build_model(),
    fit(model, train, val, seed=seed, **fit_options), then one evaluate(model, test).

    Args:
        build_model: a function of no arguments that builds a fresh model, e.g.
            lambda: VisionTransformer(ViTConfig.tiny(...)); set_seed runs right before it.
        train, val, test: datasets of (images, labels); val may be None (val_accuracy is then nan).
        seeds: distinct whole numbers, e.g. range(5).
        progress: show one progress bar over the seeds (fit's own bars stay off).
        **fit_options: passed to fit, e.g. steps=300, lr=1e-3 (not seed or progress).
    Returns:
        one dict per seed, in the order of `seeds`:
            seed: the seed of this run.
            val_accuracy: accuracy on val after the last epoch (a fraction from 0 to 1).
            test_accuracy: accuracy on test, measured once at the end.
            steps: optimiser steps done.
            epochs: passes over train started (the last may be cut short by a budget in steps).
            seconds: wall time of the training (val evaluations included); depends on the machine.
            steps_per_second: steps / seconds; depends on the machine.
            parameters: the model's number of parameters.
            multiply_adds: multiply-adds of one forward pass on one image of train's shape.
        The same seeds give the same numbers on the same machine, except seconds and steps_per_second.
    Raises:
        ValueError or TypeError before any training: build_model that is no function (or returns no
        new model), seeds that are not distinct whole numbers, an option fit does not have (or seed,
        progress), datasets of the wrong kind, a test set the first, untrained model cannot take.
    """
    build_model = _check_build_model(build_model)
    seeds = _check_seeds(seeds)
    progress = check_flag(progress, "progress")
    _check_fit_options(fit_options)
    images, _ = check_dataset(train, "train")
    test_images, _ = check_dataset(test, "test")
    if test_images.shape[1:] != images.shape[1:]:
        raise ValueError(
            f"test's images are {tuple(test_images.shape[1:])} but train's are {tuple(images.shape[1:])}: "
            "both must be the same (C, H, W)"
        )
    image_shape = tuple(images.shape[1:])  # (C, H, W)
    results, previous = [], None
    for seed in tqdm(seeds, desc="seeds", disable=not progress):
        set_seed(seed)
        model = build_model()
        if not isinstance(model, nn.Module):
            raise WrongTypeError(f"build_model must return a torch nn.Module, got {describe(model)}")
        if model is previous:
            raise ValueError(
                "build_model returned the same model as for the previous seed: it must build a new one each "
                "time (lambda: VisionTransformer(config), not lambda: model), or training carries over"
            )
        if previous is None:
            _check_test_fits(model, test)
        history = fit(model, train, val, seed=seed, progress=False, **fit_options)
        _, test_accuracy = evaluate(model, test)
        results.append(run_record(model, history, test_accuracy, seed, image_shape))
        previous = model
    return results
