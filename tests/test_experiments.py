"""utils.experiments: spreads and Welch's t-test against scipy and hand-computed values, and
run_seeds' determinism on a tiny ViT."""

import functools
import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch

from utils.data import load_training_set, split_validation
from utils.experiments import (
    PREDICTION,
    Comparison,
    Spread,
    check_fraction,
    compare,
    prediction_interval,
    run_record,
    run_seeds,
    spread,
)
from utils.runtime import set_seed
from utils.training import evaluate, fit
from utils.vit import VisionTransformer, ViTConfig

# ---- spread -------------------------------------------------------------------------------------


def test_spread_matches_numpy_and_scipy():
    values = [0.987, 0.990, 0.984, 0.985, 0.989]
    result = spread(values, percent=True)
    assert isinstance(result, Spread) and result.n == 5
    assert result.mean == pytest.approx(np.mean(values), abs=1e-15)
    assert result.std == pytest.approx(np.std(values, ddof=1), abs=1e-15)
    low, high = scipy.stats.t.interval(0.95, 4, loc=np.mean(values), scale=scipy.stats.sem(values))
    assert (result.ci_low, result.ci_high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_prediction_interval_by_hand():
    """[1, 2, 3]: mean 2, sd 1; t(0.995, 2) = 9.924843; half width 9.924843 * sqrt(1 + 1/3) = 11.460221."""
    low, high = prediction_interval([1, 2, 3])
    assert (low, high) == (pytest.approx(2 - 11.460221, abs=1e-6), pytest.approx(2 + 11.460221, abs=1e-6))
    assert prediction_interval([0.5, 0.9, 1.0], percent=True)[1] == 1.0  # an accuracy stops at 100 %
    with pytest.raises(ValueError, match="at least 2"):
        prediction_interval([0.5])


def test_one_more_draw_lands_inside_the_prediction_interval_99_times_in_100():
    """An independent check by simulation: 5 normal draws give an interval, a 6th lands in it."""
    draws = np.random.default_rng(0).normal(size=(20_000, 6))
    inside = [low <= row[5] <= high for row in draws for low, high in [prediction_interval(row[:5])]]
    assert np.mean(inside) == pytest.approx(PREDICTION, abs=0.003)  # 3 standard errors of 20,000 draws


def test_spread_by_hand():
    """[1, 2, 3]: mean 2, std 1, t(0.975, 2) = 4.302653, half width 4.302653 / sqrt(3) = 2.484138."""
    result = spread((1, 2, 3))
    assert (result.mean, result.std) == (2.0, 1.0)
    assert result.ci_low == pytest.approx(2 - 2.484138, abs=1e-6)
    assert result.ci_high == pytest.approx(2 + 2.484138, abs=1e-6)


def test_spread_reads_as_text():
    assert str(spread([0.987, 0.990, 0.984, 0.985, 0.989], percent=True)) == "98.7 % ± 0.3 (95 % CI 98.4-99.0, 5 seeds)"
    assert str(spread([1, 2, 3])) == "2 ± 1 (95 % CI -0.4841 to 4.484, 3 seeds)"


def test_spread_takes_arrays_tensors_and_generators():
    expected = spread([0.5, 0.75])
    assert spread(np.array([0.5, 0.75])) == expected
    assert spread(torch.tensor([0.5, 0.75], dtype=torch.float64)) == expected
    assert spread(x for x in [0.5, 0.75]) == expected
    assert spread([np.float32(0.5), np.int64(1)]).mean == 0.75


def test_an_accuracy_interval_stops_at_100_percent():
    result = spread([0.9999, 1.0], percent=True)
    assert result.ci_high == 1.0 and result.ci_low > 0.99
    assert spread([0.9999, 1.0]).ci_high > 1  # plain numbers are not clipped
    assert spread([0.0, 0.0001], percent=True).ci_low == 0.0


def test_identical_values_have_no_spread():
    result = spread([0.9, 0.9, 0.9])
    assert result.std == 0 and result.ci_low == result.ci_high == pytest.approx(0.9)


@pytest.mark.parametrize(
    "values, words",
    [
        ([0.9], "at least 2 numbers, one per seed, e.g. [0.91"),
        ([], "got 0 values"),
        ([0.9, float("nan")], "values[1] must be a finite number, got nan"),
        ([0.9, math.inf], "values[1] must be a finite number, got inf"),
        ([0.9, "0.8"], "values[1] must be a finite number, got '0.8' (str)"),
        ([True, False], "values[0] must be a finite number, got True"),
        ([0.9, None], "values[1] must be a finite number, got None"),
        ([torch.tensor(0.9), torch.tensor(0.8)], "use .item()"),
        ("0.9 0.8", "got '0.9 0.8' (str)"),
        (0.9, "got 0.9 (float)"),
        (None, "got None"),
        ({"a": 0.9, "b": 0.8}, "(dict)"),
        (np.zeros((5, 2)), "it must be 1-D"),
        (torch.tensor(0.5), "it must be 1-D"),
        ([{"seed": 0, "test_accuracy": 0.9}] * 2, "[run['test_accuracy'] for run in results]"),
        ([1e300, 1.0], "too large"),
        (itertools.count(), "endless generator"),
        (spread([1, 2]), "pass the values it was computed from"),
    ],
)
def test_spread_refuses_bad_values(values, words):
    with pytest.raises(ValueError) as error:
        spread(values)
    assert words in str(error.value)


def test_spread_refuses_wrong_types_with_a_type_error():
    for values in ["0.9", 0.9, [0.9, "x"], [{"seed": 0}] * 2]:
        with pytest.raises(TypeError):
            spread(values)


def test_percent_wants_fractions():
    with pytest.raises(ValueError, match=r"from 0 to 1.*values\[0\] = 98.5: divide by 100"):
        spread([98.5, 99.0], percent=True)
    with pytest.raises(ValueError, match="from 0 to 1"):
        spread([-0.1, 0.5], percent=True)
    with pytest.raises(TypeError, match="percent must be True or False"):
        spread([0.5, 0.6], percent="yes")


def test_check_fraction_takes_an_accuracy_and_refuses_a_percentage():
    """Review finding S2: every run taken from a caller holds its accuracies as fractions."""
    for value in (0, 1, 0.5, np.float64(0.25), np.int64(1)):
        assert check_fraction(value, "accuracy") == float(value)
    with pytest.raises(
        ValueError, match=r"^accuracy must be a fraction from 0 to 1, got 97.0: divide by 100 if it is a percentage$"
    ):
        check_fraction(97.0, "accuracy")
    for value, words in [(float("nan"), "got nan"), (-0.1, "got -0.1"), (101, "got 101")]:
        with pytest.raises(ValueError, match=rf"accuracy must be a fraction from 0 to 1, {words}$"):
            check_fraction(value, "accuracy")
    for value in ("0.9", True, None, torch.tensor(0.9)):
        with pytest.raises(TypeError, match="accuracy must be a"):
            check_fraction(value, "accuracy")


# ---- compare ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_compare_matches_scipy_welch(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(0.9, rng.uniform(0.001, 0.05), size=rng.integers(2, 12))
    b = rng.normal(0.9 + rng.uniform(-0.05, 0.05), rng.uniform(0.001, 0.05), size=rng.integers(2, 12))
    result = compare(a, b)
    reference = scipy.stats.ttest_ind(a, b, equal_var=False)
    assert isinstance(result, Comparison)
    assert result.t == pytest.approx(reference.statistic, abs=1e-10)
    assert result.p == pytest.approx(reference.pvalue, abs=1e-10)
    assert result.difference == pytest.approx(np.mean(a) - np.mean(b), abs=1e-15)
    if hasattr(reference, "df"):
        assert result.df == pytest.approx(reference.df, rel=1e-10)


def test_compare_by_hand():
    """a = [1, 2, 3] (mean 2, var 1), b = [4, 6] (mean 5, var 2): standard error sqrt(1/3 + 2/2) =
    sqrt(4/3), t = -3 / sqrt(4/3) = -2.598076; df = (4/3)^2 / ((1/3)^2 / 2 + 1^2 / 1) = 16/9 / (19/18) = 32/19."""
    result = compare([1, 2, 3], [4, 6])
    assert result.difference == -3
    assert result.t == pytest.approx(-2.598076211, abs=1e-9)
    assert result.df == pytest.approx(32 / 19, abs=1e-12)
    assert result.p == pytest.approx(2 * scipy.stats.t.sf(2.598076211353316, 32 / 19), abs=1e-12)


def test_verdict_names_the_higher_one_when_significant():
    result = compare([0.90, 0.91, 0.92, 0.90, 0.91], [0.95, 0.96, 0.94, 0.95, 0.97], percent=True)
    assert result.significant and result.p < 0.001
    assert str(result) == result.verdict == "B is higher by 4.6 points (p < 0.001, 5 seeds each)"
    named = compare([0.95, 0.96, 0.94], [0.90, 0.91, 0.92, 0.90], percent=True, names=("learned", "sincos"))
    assert (
        named.verdict.startswith("learned is higher by 4.2 points (p = 0.0038, ") and "3 and 4 seeds" in named.verdict
    )


def test_verdict_says_when_the_difference_is_noise():
    result = compare([0.90, 0.93, 0.91, 0.95, 0.92], [0.91, 0.94, 0.90, 0.96, 0.93], percent=True)
    assert not result.significant
    assert result.verdict == f"no significant difference at this size (p = {result.p:.2g}, 5 seeds each)"


def test_p_is_never_rounded_across_the_threshold():
    from utils.experiments import _p_text

    assert _p_text(0.0496) == "p = 0.0496" and _p_text(0.003) == "p = 0.003" and _p_text(0.15) == "p = 0.15"
    assert _p_text(0.0004) == "p < 0.001" and _p_text(1.0) == "p = 1"


def test_zero_variance_equal_means_is_no_difference():
    result = compare([1.0] * 5, [1.0] * 5, percent=True)
    assert (result.difference, result.t, result.p) == (0.0, 0.0, 1.0) and not result.significant
    assert result.verdict == "no difference: every seed gave the same value in both (5 seeds each)"


def test_zero_variance_different_means_is_consistent():
    result = compare([0.9] * 5, [1.0] * 5, percent=True)
    assert result.t == -math.inf and result.p == 0 and result.significant
    assert result.verdict == "B is higher by 10.0 points, the same on every seed (p = 0, 5 seeds each)"


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy's, on the constant sample
def test_one_sample_without_variance_is_finite():
    result = compare([1.0] * 5, [0.9, 0.92, 0.91, 0.93, 0.9])
    reference = scipy.stats.ttest_ind([1.0] * 5, [0.9, 0.92, 0.91, 0.93, 0.9], equal_var=False)
    assert result.t == pytest.approx(reference.statistic, abs=1e-10) and math.isfinite(result.df)


def test_tiny_variances_do_not_underflow():
    result = compare([1e-200, 2e-200, 3e-200], [4e-200, 6e-200])
    assert result.df == pytest.approx(32 / 19) and result.t == pytest.approx(-2.598076211)


@pytest.mark.parametrize(
    "a, b, options, words",
    [
        ([0.9], [0.9, 0.8], {}, "a must be a list of at least 2 numbers"),
        ([0.9, 0.8], [0.9, float("nan")], {}, "b[1] must be a finite number, got nan"),
        ([0.9, 0.8], 0.9, {}, "b must be a list"),
        ([90.0, 80.0], [0.9, 0.8], {"percent": True}, "divide by 100"),
        ([0.9, 0.8], [0.9, 0.7], {"names": "AB"}, "names must be two non-empty strings"),
        ([0.9, 0.8], [0.9, 0.7], {"names": ("A", "")}, "names must be two non-empty strings"),
        ([0.9, 0.8], [0.9, 0.7], {"percent": 1}, "percent must be True or False"),
    ],
)
def test_compare_refuses_bad_input(a, b, options, words):
    with pytest.raises(ValueError) as error:
        compare(a, b, **options)
    assert words in str(error.value)


# ---- run_seeds ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits():
    train, test = load_training_set("digits")
    train, val = split_validation(train.subset(torch.arange(300)), fraction=0.2, seed=0)
    return train, val, test.subset(torch.arange(200))


def tiny_model() -> VisionTransformer:
    return VisionTransformer(
        ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=10, depth=1, embed_dim=16, num_heads=2)
    )


KEYS = [
    "seed",
    "val_accuracy",
    "test_accuracy",
    "steps",
    "epochs",
    "seconds",
    "steps_per_second",
    "parameters",
    "multiply_adds",
]


def test_run_seeds_is_deterministic(digits):
    train, val, test = digits
    first = run_seeds(tiny_model, train, val, test, [0, 1, 2], steps=5, lr=3e-3, batch_size=64)
    again = run_seeds(tiny_model, train, val, test, range(3), steps=5, lr=3e-3, batch_size=64)
    assert [list(run) for run in first] == [KEYS] * 3
    assert [run["seed"] for run in first] == [0, 1, 2]
    for one, other in zip(first, again):
        for key in ["seed", "val_accuracy", "test_accuracy", "steps", "epochs", "parameters", "multiply_adds"]:
            assert one[key] == other[key], key
    model = tiny_model()
    assert first[0]["epochs"] == 2  # 240 training images in batches of 64: 4 steps a pass, the 5th starts a second
    assert first[0]["steps"] == 5 and first[0]["parameters"] == sum(p.numel() for p in model.parameters())
    assert first[0]["multiply_adds"] > 0 and first[0]["seconds"] > 0
    assert first[0]["steps_per_second"] == pytest.approx(5 / first[0]["seconds"])
    assert all(0 <= run["val_accuracy"] <= 1 and 0 <= run["test_accuracy"] <= 1 for run in first)
    assert len({(run["val_accuracy"], run["test_accuracy"]) for run in first}) > 1, "the seeds should differ"


def test_run_seeds_without_val(digits):
    train, _, test = digits
    (run,) = run_seeds(tiny_model, train, None, test, [7], steps=1)
    assert math.isnan(run["val_accuracy"]) and 0 <= run["test_accuracy"] <= 1


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"build_model": tiny_model()}, "got a built model"),
        ({"build_model": "vit"}, "build_model must be a function"),
        ({"seeds": 5}, "pass range(5)"),
        ({"seeds": []}, "got none"),
        ({"seeds": [0, 1, 1]}, "seed 1 comes 2 times"),
        ({"seeds": [0, -1]}, "seeds[1] must be a whole number"),
        ({"seeds": [0, 1.0]}, "seeds[1] must be a whole number"),
        ({"seeds": [2**40]}, "seeds[0] must be a whole number"),
        ({"seeds": itertools.count()}, "endless generator"),
        ({"seed": 3}, "run_seeds sets fit's seed itself"),
        ({"step": 3}, "fit, which has no option 'step' (did you mean steps?)"),
        ({"val": None, "test": None}, "test must be a dataset"),
        ({"progress": "yes"}, "progress must be True or False"),
        ({"test": "test"}, "test must be a dataset"),
        ({"train": None}, "train must be a dataset"),
        ({"build_model": lambda: "model"}, "build_model must return a torch nn.Module"),
    ],
)
def test_run_seeds_refuses_bad_input_before_training(digits, changes, words):
    train, val, test = digits
    arguments = dict(build_model=tiny_model, train=train, val=val, test=test, seeds=[0, 1], steps=1)
    arguments.update(changes)
    with pytest.raises(ValueError) as error:
        run_seeds(**arguments)
    assert words in str(error.value)


def test_run_seeds_refuses_the_same_model_twice(digits):
    train, val, test = digits
    model = tiny_model()
    with pytest.raises(ValueError, match="same model as for the previous seed"):
        run_seeds(lambda: model, train, val, test, [0, 1], steps=1)


def test_a_test_set_the_model_cannot_take_fails_before_training(digits, monkeypatch):
    import utils.experiments

    train, val, test = digits
    wide = utils.data.ImageDataset(test.tensors[0].repeat(1, 3, 1, 1), test.tensors[1], test.classes)
    with pytest.raises(ValueError, match="test's images are"):
        run_seeds(tiny_model, train, val, wide, [0], steps=1)
    bad_labels = torch.utils.data.TensorDataset(test.tensors[0], test.tensors[1] + 10)

    @functools.wraps(utils.experiments.fit)  # fit's signature, for the check of fit's options
    def no_training(*args, **kwargs):
        raise AssertionError("fit ran before the test set was checked")

    monkeypatch.setattr(utils.experiments, "fit", no_training)
    with pytest.raises(ValueError, match="the test set does not fit the model"):
        run_seeds(tiny_model, train, val, bad_labels, [0], steps=1)


def test_a_run_trained_by_hand_is_recorded_as_run_seeds_records_it(digits):
    """run_record puts a run made with fit(...) beside run_seeds' runs: the same dict, the same numbers."""
    train, val, test = digits
    (by_seeds,) = run_seeds(tiny_model, train, val, test, [4], steps=5, lr=3e-3, batch_size=64)
    set_seed(4)
    model = tiny_model()
    history = fit(model, train, val, steps=5, lr=3e-3, batch_size=64, seed=4, progress=False)
    by_hand = run_record(model, history, evaluate(model, test)[1], seed=4, image_shape=(1, 8, 8))
    assert list(by_hand) == KEYS
    for key in ["seed", "val_accuracy", "test_accuracy", "steps", "epochs", "parameters", "multiply_adds"]:
        assert by_hand[key] == by_seeds[key], key
