"""The verdict rubric (utils.rubric): its interval and tests against scipy's, Holm against its
definition, and each outcome on runs built to give it."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from utils.rubric import (
    INCONCLUSIVE,
    NOT_TESTABLE,
    REFUTED,
    SUPPORTED,
    grade,
    grade_family,
    holm,
    not_testable,
    permutation_p,
    rank_p,
)

# lesson 6's shipped "patch size" test accuracies (4 px and 2 px, 5 seeds): every 4-px seed beats
# every 2-px seed, one 2-px seed far below the rest
FOUR_PX = [0.978, 0.955, 0.971, 0.962, 0.967]
TWO_PX = [0.766, 0.937, 0.925, 0.931, 0.920]


@pytest.mark.parametrize("seed", range(5))
def test_the_interval_and_p_are_scipys_welch(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.9, 0.02, 5), rng.normal(0.88, 0.05, 7)
    g = grade(a, b, claim="higher", effect=0.01)
    reference = stats.ttest_ind(a, b, equal_var=False)
    low, high = reference.confidence_interval(0.95)
    assert g.difference == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    assert (g.low, g.high) == (pytest.approx(low, abs=1e-10), pytest.approx(high, abs=1e-10))
    assert g.p == pytest.approx(reference.pvalue, abs=1e-10) and g.n == (5, 7)


@pytest.mark.parametrize("seed", range(4))
def test_the_permutation_test_is_scipys_exact_one(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 1, 5), rng.normal(0.8, 1, 6)
    reference = stats.permutation_test(
        (a, b),
        lambda x, y: abs(np.mean(x) - np.mean(y)),
        permutation_type="independent",
        n_resamples=np.inf,
        alternative="greater",
        vectorized=False,
    )
    assert permutation_p(a, b) == pytest.approx(reference.pvalue, abs=1e-12)


def test_the_rank_test_is_scipys_exact_mann_whitney():
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.normal(0, 1, 5), rng.normal(1, 1, 5)
        reference = stats.mannwhitneyu(a, b, method="exact", alternative="two-sided")
        assert rank_p(a, b) == pytest.approx(reference.pvalue, abs=1e-12)
    assert rank_p(FOUR_PX, TWO_PX) == pytest.approx(2 / 252)  # every 4-px seed above every 2-px seed


def holm_by_definition(ps):
    """Holm's adjusted p_i: the smallest alpha at which the step-down procedure rejects hypothesis i
    (found by trying every alpha at which a decision can change)."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    candidates = sorted({min(1.0, (m - r) * ps[i]) for r, i in enumerate(order)} | {1.0})
    adjusted = []
    for i in range(m):
        for alpha in candidates:
            rejected = set()
            for r, j in enumerate(order):  # step down: stop at the first that fails
                if ps[j] * (m - r) > alpha + 1e-15:
                    break
                rejected.add(j)
            if i in rejected:
                adjusted.append(alpha)
                break
        else:
            adjusted.append(1.0)
    return adjusted


@pytest.mark.parametrize("ps", [[0.01, 0.04, 0.03, 0.2], [0.001], [0.5, 0.5, 0.01], [0.02, 0.02, 0.02], [0.3, 0.9]])
def test_holm_is_its_definition(ps):
    assert holm(ps) == pytest.approx(holm_by_definition(ps))


def test_holm_refuses_what_is_no_p_value():
    with pytest.raises(ValueError, match="needs at least one"):
        holm([])
    with pytest.raises(ValueError, match=r"p_values\[1\]"):
        holm([0.1, 1.5])
    with pytest.raises(TypeError, match="list of numbers"):
        holm(0.03)


def test_a_clear_win_is_supported_and_a_tiny_one_refuted():
    a, b = [0.95, 0.96, 0.955, 0.962, 0.958], [0.90, 0.91, 0.905, 0.899, 0.903]
    assert grade(a, b, claim="higher", effect=0.01, percent=True).outcome == SUPPORTED
    assert grade(a, b, claim="lower", effect=0.01, percent=True).outcome == REFUTED  # the other way
    assert grade(a, b, claim="higher", effect=0.2, percent=True).outcome == REFUTED  # real, but far below 20 points
    text = str(grade(a, b, claim="higher", effect=0.01, percent=True, names=("new", "old")))
    assert (
        text.startswith("supported: new - old = +5.4 points, 95 % CI [+4.7, +6.0], p < 0.001")
        and "5 seeds each" in text
    )
    assert "smallest effect of interest 1 point)" in text


def test_noise_is_inconclusive_and_equality_needs_a_narrow_interval():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.9, 0.03, 5), rng.normal(0.9, 0.03, 5)
    assert grade(a, b, claim="higher", effect=0.01).outcome == INCONCLUSIVE
    assert grade(a, b, claim="equal", effect=0.01).outcome == INCONCLUSIVE
    assert grade(a, b, claim="equal", effect=0.5).outcome == SUPPORTED
    assert grade([1.0, 1.1, 1.05], [3.0, 3.1, 3.05], claim="equal", effect=0.5).outcome == REFUTED


def test_one_outlier_hands_the_decision_to_the_exact_test():
    welch = stats.ttest_ind(FOUR_PX, TWO_PX, equal_var=False).pvalue
    g = grade(FOUR_PX, TWO_PX, claim="higher", effect=0.01, percent=True, names=("4 px", "2 px"))
    assert welch > 0.05 and g.decided_by == "exact permutation" and "outlier" in g.assumption
    assert g.exact_p == pytest.approx(2 / 252) and g.outcome == SUPPORTED
    assert "exact p = 0.008" in str(g) and "76.6 %" in g.because and "standard deviations" in g.because


def test_a_ceiling_and_no_spread_are_named():
    g = grade([1.0, 1.0, 0.998, 1.0, 0.999], [0.95, 0.96, 0.94, 0.97, 0.95], claim="higher", effect=0.01, percent=True)
    assert "100 % ceiling" in g.assumption
    same = grade([0.5, 0.5, 0.5], [0.4, 0.4, 0.4], claim="higher", effect=0.05)
    assert "neither arm varies" in same.assumption and same.decided_by == "exact permutation"
    assert (same.low, same.high) == (pytest.approx(0.1), pytest.approx(0.1))
    assert same.exact_p == pytest.approx(2 / 20) and same.outcome == INCONCLUSIVE  # 3 vs 3: p >= 0.1 always


def test_a_family_is_corrected_with_holm():
    rng = np.random.default_rng(3)
    arms = {f"arm {i}": rng.normal(0.9 + 0.01 * i, 0.01, 5) for i in range(4)}
    base = rng.normal(0.9, 0.01, 5)
    family = {
        label: dict(a=values, b=base, claim="higher", effect=0.005, names=(label, "base"))
        for label, values in arms.items()
    }
    graded = grade_family(family)
    alone = [grade(**options).p_adjusted for options in family.values()]  # the deciding p's
    assert [g.p_adjusted for g in graded.values()] == pytest.approx(holm(alone))
    assert all(g.family == 4 and "Holm p" in str(g) for g in graded.values())
    assert list(graded) == list(family)


def test_holm_can_turn_a_lone_support_inconclusive():
    a, b = [0.52, 0.55, 0.49, 0.56, 0.53], [0.48, 0.52, 0.45, 0.51, 0.47]
    alone = grade(a, b, claim="higher", effect=0.01)
    assert alone.outcome == SUPPORTED and 0.01 < alone.p < 0.05
    family = {f"c{i}": dict(a=a, b=b, claim="higher", effect=0.01) for i in range(5)}
    assert {g.outcome for g in grade_family(family).values()} == {INCONCLUSIVE}


def test_not_testable_carries_its_reason():
    g = not_testable("layer-wise lr decay helps", "it is a fine-tuning practice and no lesson fine-tunes")
    assert g.outcome == NOT_TESTABLE and str(g).startswith("not testable here: layer-wise lr decay helps: it is")
    with pytest.raises(TypeError, match="reason"):
        not_testable("a claim", "")


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        (dict(claim="better"), ValueError, "claim must be one of 'higher', 'lower', 'equal'"),
        (dict(effect=0), ValueError, "effect must be"),
        (dict(effect=-0.1), ValueError, "effect must be"),
        (dict(effect=2.0, percent=True), ValueError, "0.01 = 1 point"),
        (dict(a=[0.9]), ValueError, "at least 2"),
        (dict(a=[97.0, 98.0]), ValueError, "divide by 100"),
        (dict(family=3), ValueError, "use grade_family"),
    ],
)
def test_bad_input_is_named(options, error, match):
    arguments = dict(a=[0.9, 0.91], b=[0.8, 0.82], claim="higher", effect=0.01, percent=True) | options
    with pytest.raises(error, match=match):
        grade(**arguments)


def test_too_many_runs_for_the_exact_test_are_refused_by_name():
    with pytest.raises(ValueError, match="splits"):
        permutation_p(list(range(20)), list(range(20)))
    g = grade(list(np.linspace(0, 1, 20)), list(np.linspace(0.1, 1.1, 20)), claim="equal", effect=0.5)
    assert math.isnan(g.exact_p) and g.decided_by == "Welch"


def test_every_split_is_counted_once():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0]
    hits = sum(
        abs(np.mean(c) - np.mean([v for v in a + b if v not in c])) >= abs(np.mean(a) - np.mean(b)) - 1e-12
        for c in itertools.combinations(a + b, 3)
    )
    assert permutation_p(a, b) == pytest.approx(hits / 10)
