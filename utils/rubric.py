"""Lessons 6 and 9: a verdict rubric. A claim about two settings ("A beats B") is graded on the
interval of the difference of their means, against the smallest effect that would matter, declared
before the results are read:

- "higher" / "lower": **refuted** when the whole 95 % interval falls short of the smallest effect of
  interest in the claimed direction (every difference the runs allow is smaller than the claim
  needs, or goes the other way); **supported** when the difference goes the claimed way with
  p < 0.05 (Holm-adjusted inside a family) and it is not refuted; **inconclusive** otherwise: more
  seeds could still decide it.
- "equal": **supported** when the whole interval lies inside ±effect; **refuted** when it lies
  wholly outside; inconclusive otherwise.
- **not testable here**: the lesson cannot run the claim's regime.

Welch's t-test assumes each arm's mean is roughly normal. With five seeds one outlier, a ceiling
at 0 % or 100 %, or no spread at all breaks that; `grade` then lets an exact permutation test
decide (every way of splitting the runs into two arms, Fisher 1935), and says why.

- `grade(a, b, claim=..., effect=...)`: one comparison, a Grade.
- `grade_family({label: {...}})`: several comparisons that answer one question, Holm inside.
- `holm(p_values)`: Holm's step-down adjusted p-values (Holm 1979).
- `permutation_p(a, b)`, `rank_p(a, b)`: exact two-sided tests that assume no distribution.
- `not_testable(claim_text, reason)`: the fourth outcome, with its reason.
- `verdict_table({label: Grade})`: the grades as a table, one row per comparison (utils.tables).
"""

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from utils.experiments import ALPHA, _check_names, _check_values, _spread_of, _welch
from utils.tables import Table
from utils.validation import check_flag, check_number, check_positive, check_whole

SUPPORTED, REFUTED, INCONCLUSIVE, NOT_TESTABLE = "supported", "refuted", "inconclusive", "not testable here"
CLAIMS = ("higher", "lower", "equal")
CONFIDENCE = 0.95  # of the interval of the difference
OUTLIER_PREDICTION = 0.999  # a run outside this prediction interval of the others in its arm is an outlier
MAX_SPLITS = 200_000  # the exact permutation test enumerates at most this many splits


@dataclass(frozen=True)
class Grade:
    """A claim graded by the rubric; str() is one line, e.g. "supported: A - B = +2.3 points, 95 % CI
    [+0.8, +3.8], Holm p = 0.012 (5 seeds each; smallest effect of interest 1 point)"."""

    outcome: str  # SUPPORTED, REFUTED, INCONCLUSIVE or NOT_TESTABLE
    because: str  # one sentence: why this outcome
    claim: str = ""  # "higher", "lower", "equal", or the claim's words when not testable
    effect: float = math.nan  # the smallest effect of interest, in the values' units
    names: tuple[str, str] = ("A", "B")
    percent: bool = False  # the values are fractions shown as percentages
    n: tuple[int, int] = (0, 0)  # runs (seeds) per arm
    difference: float = math.nan  # mean of A - mean of B
    low: float = math.nan  # Welch's 95 % interval of the difference
    high: float = math.nan
    p: float = math.nan  # Welch's two-sided p
    p_adjusted: float = math.nan  # the deciding p (Welch's or the exact one), Holm-adjusted in its family
    family: int = 1  # comparisons in the family Holm corrected over
    exact_p: float = math.nan  # the exact permutation test's two-sided p
    assumption: str | None = None  # why Welch's test is doubtful here, or None
    decided_by: str = "Welch"  # "Welch" or "exact permutation"

    def __str__(self) -> str:
        if self.outcome == NOT_TESTABLE:
            return f"{NOT_TESTABLE}: {self.because}"
        unit = " points" if self.percent else ""
        seeds = f"{self.n[0]} seeds each" if self.n[0] == self.n[1] else f"{self.n[0]} and {self.n[1]} seeds"
        which = ("Holm " if self.family > 1 else "") + ("exact p" if self.decided_by != "Welch" else "p")
        return (
            f"{self.outcome}: {self.names[0]} - {self.names[1]} = {_amount(self.difference, self.percent)}{unit}, "
            f"{CONFIDENCE * 100:.0f} % CI [{_amount(self.low, self.percent)}, {_amount(self.high, self.percent)}], "
            f"{which} {_p_text(self.p_adjusted)} ({seeds}; smallest effect of interest "
            f"{_effect_text(self.effect, self.percent)})"
        )


def _p_text(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _effect_text(effect: float, percent: bool) -> str:
    """The smallest effect of interest for a sentence: "1 point", "0.5 points", "0.02"."""
    if not percent:
        return f"{effect:.3g}"
    points = f"{effect * 100:.3g}"
    return f"{points} point{'' if points == '1' else 's'}"


def _amount(value: float, percent: bool, sign: bool = True) -> str:
    """A difference for a sentence: points for fractions (+2.3), else 3 significant digits."""
    if percent:
        return f"{value * 100:+.1f}" if sign else f"{value * 100:.1f}"
    return f"{value:+.3g}" if sign else f"{value:.3g}"


# ---- the tests ----------------------------------------------------------------------------------


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: sort the m p's, multiply the i-th
    smallest (i from 0) by m - i, keep them non-decreasing, cap at 1. A comparison is significant in
    its family when its adjusted p < 0.05; the chance of any false alarm in the family stays at 5 %.
    """
    ps = [check_number(p, f"p_values[{i}]", low=0, high=1) for i, p in enumerate(_as_list(p_values, "p_values"))]
    if not ps:
        raise ValueError("p_values is empty: Holm's correction needs at least one p-value")
    m = len(ps)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def _as_list(values, name: str) -> list:
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list of numbers, got {type(values).__name__}")
    return list(values)


def _splits(n_a: int, n_b: int) -> int:
    splits = math.comb(n_a + n_b, n_a)
    if splits > MAX_SPLITS:
        raise ValueError(
            f"an exact test of {n_a} and {n_b} runs needs {splits:,} splits, over {MAX_SPLITS:,}: "
            "use Welch's test (compare) or fewer runs"
        )
    return splits


def permutation_p(a, b) -> float:
    """The exact two-sided permutation test of the difference of means: of every way to split the
    pooled runs into arms of the same sizes, the share whose |difference| is at least the observed
    one. Assumes only that, without an effect, the runs are exchangeable.

    Args:
        a, b: one number per run, at least 2 each; at most MAX_SPLITS ways to split them.
    """
    x, y = _check_values(a, "a", False), _check_values(b, "b", False)
    _splits(len(x), len(y))
    pooled, total = np.concatenate([x, y]), float(np.sum(x) + np.sum(y))
    observed = abs(float(np.mean(x) - np.mean(y)))
    n_a, n_b = len(x), len(y)
    tolerance = 1e-12 * max(1.0, float(np.abs(pooled).max()))
    hits = count = 0
    for chosen in itertools.combinations(range(len(pooled)), n_a):
        sum_a = float(pooled[list(chosen)].sum())
        difference = sum_a / n_a - (total - sum_a) / n_b
        hits += abs(difference) >= observed - tolerance
        count += 1
    return hits / count


def rank_p(a, b) -> float:
    """The exact two-sided Mann-Whitney U test (Wilcoxon rank-sum): does one arm tend to rank above
    the other? Ties share their mean rank (the distribution is then enumerated over the actual
    ranks). E.g. five runs that all beat five others: p = 2 / 252 = 0.008."""
    x, y = _check_values(a, "a", False), _check_values(b, "b", False)
    _splits(len(x), len(y))
    from scipy.stats import rankdata  # imported here: importing utils.rubric stays light

    ranks = rankdata(np.concatenate([x, y]))
    n_a = len(x)
    expected = n_a * (len(ranks) + 1) / 2
    observed = abs(float(ranks[:n_a].sum()) - expected)
    hits = count = 0
    for chosen in itertools.combinations(range(len(ranks)), n_a):
        hits += abs(float(ranks[list(chosen)].sum()) - expected) >= observed - 1e-9
        count += 1
    return hits / count


def _outlier(values: np.ndarray) -> tuple[int, float] | None:
    """(index, how many of the others' standard deviations away) of a run that lies outside the
    OUTLIER_PREDICTION prediction interval of the other runs of its arm, or None. Left out, the
    others say where one more run should land (utils.experiments.prediction_interval's idea); a
    run far outside that is one Welch's normal model does not expect. Five runs from a normal
    distribution trip it about once in 200 arms."""
    from scipy.stats import t as student_t

    n = len(values)
    if n < 3:
        return None
    factor = float(student_t.ppf((1 + OUTLIER_PREDICTION) / 2, n - 2)) * math.sqrt(1 + 1 / (n - 1))
    worst = None
    for i in range(n):
        others = np.delete(values, i)
        distance, std = abs(float(values[i] - others.mean())), float(others.std(ddof=1))
        if distance > 0 and distance > factor * std:
            score = distance / std if std > 0 else math.inf
            if worst is None or score > worst[1]:
                worst = (i, score)
    return worst


def _assumption(x: np.ndarray, y: np.ndarray, percent: bool, names: tuple[str, str]) -> str | None:
    """Why Welch's test is doubtful for these runs, or None."""
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return "neither arm varies over seeds, so Welch's standard error is 0"
    for values, name in ((x, names[0]), (y, names[1])):
        if percent and (np.any(values >= 1.0) or np.any(values <= 0.0)):
            edge = "100 %" if np.any(values >= 1.0) else "0 %"
            return f"{name} has runs at the {edge} ceiling, where no normal spread is possible"
        found = _outlier(values)
        if found is not None:
            i, score = found
            shown = f"{values[i] * 100:.1f} %" if percent else f"{values[i]:.4g}"
            away = (
                "while the others agree exactly"
                if math.isinf(score)
                else f"{score:.0f} standard deviations of the others away"
            )
            return f"{name}'s run at {shown} is an outlier ({away})"
    return None


# ---- the rubric ---------------------------------------------------------------------------------


def _check_claim(claim) -> str:
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {', '.join(map(repr, CLAIMS))}, got {claim!r}")
    return claim


def grade(
    a, b, *, claim: str, effect: float, percent: bool = False, names=("A", "B"), p_adjusted=None, family: int = 1
) -> Grade:
    """Grade the claim that A is `claim` than B by at least `effect` ("higher", "lower"), or that
    they are equal within ±`effect` ("equal"), from per-seed values.

    Args:
        a, b: one number per run (seed), at least 2 each.
        claim: "higher", "lower" or "equal".
        effect: the smallest effect of interest, > 0, in the values' units (with percent=True a
            fraction: 0.01 = 1 point). Declare it before reading the results.
        percent: the values are fractions from 0 to 1 (accuracies), shown as points.
        names: what the grade calls A and B.
        p_adjusted, family: the deciding p after Holm's correction over a family of `family`
            comparisons (grade_family passes them); None and 1 when the comparison stands alone.
    Returns:
        a Grade; str() is one line with the outcome, the difference and its interval.
    """
    claim = _check_claim(claim)
    percent = check_flag(percent, "percent")
    names = _check_names(names)
    effect = check_positive(
        effect, "effect", meaning=" (the smallest difference that would matter, declared before looking)"
    )
    if percent and effect >= 1:
        raise ValueError(f"effect must be a fraction with percent=True (0.01 = 1 point), got {effect!r}")
    x, y = _check_values(a, "a", percent), _check_values(b, "b", percent)
    from scipy.stats import t as student_t  # imported here: importing utils.rubric stays light

    spread_a, spread_b = _spread_of(x, False), _spread_of(y, False)
    difference, _, df, p = _welch(spread_a, spread_b)
    error = math.hypot(spread_a.std / math.sqrt(spread_a.n), spread_b.std / math.sqrt(spread_b.n))
    half = float(student_t.ppf((1 + CONFIDENCE) / 2, df)) * error if error > 0 else 0.0
    low, high = difference - half, difference + half
    exact = permutation_p(x, y) if math.comb(len(x) + len(y), len(x)) <= MAX_SPLITS else math.nan
    assumption = _assumption(x, y, percent, names)
    decided_by = "exact permutation" if assumption is not None and not math.isnan(exact) else "Welch"
    deciding = exact if decided_by != "Welch" else p
    family = check_whole(family, "family", minimum=1)
    if p_adjusted is None:
        if family != 1:
            raise ValueError("family > 1 needs the comparison's Holm-adjusted p: use grade_family")
        p_adjusted = deciding
    else:
        p_adjusted = check_number(p_adjusted, "p_adjusted", low=deciding, high=1)
    size = _effect_text(effect, percent)
    if claim == "equal":
        if -effect < low and high < effect:
            outcome, because = SUPPORTED, f"the whole interval lies inside ±{size}"
        elif low >= effect or high <= -effect:
            outcome, because = REFUTED, f"the whole interval lies outside ±{size}"
        else:
            outcome, because = (
                INCONCLUSIVE,
                f"the interval reaches both inside and outside ±{size}: more seeds could decide",
            )
    else:
        sign = 1 if claim == "higher" else -1
        if (high if sign > 0 else -low) < effect:  # the interval's end in the claimed direction
            outcome, because = REFUTED, f"the whole interval stops short of {size} in the claimed direction"
        elif sign * difference > 0 and p_adjusted < ALPHA:
            test = "the exact test" if decided_by != "Welch" else "Welch's test"
            outcome = SUPPORTED
            because = f"{test} puts the difference the claimed way (p < {ALPHA}) and {size} lies inside the interval"
        else:
            outcome = INCONCLUSIVE
            because = f"the interval holds both no difference and {size}: more seeds could decide"
    if decided_by != "Welch":
        because += f"; {assumption}, so the exact permutation test decides"
    return Grade(
        outcome=outcome,
        because=because,
        claim=claim,
        effect=effect,
        names=names,
        percent=percent,
        n=(len(x), len(y)),
        difference=difference,
        low=low,
        high=high,
        p=p,
        p_adjusted=p_adjusted,
        family=family,
        exact_p=exact,
        assumption=assumption,
        decided_by=decided_by,
    )


def grade_family(comparisons: Mapping) -> dict[str, Grade]:
    """Grade comparisons that answer one question together: Holm's correction over the p's that
    decide them (Welch's, or the exact test's where Welch's assumptions fail).

    Args:
        comparisons: {label: dict(a=..., b=..., claim=..., effect=..., names=..., percent=...)}.
    Returns:
        {label: Grade}, in the same order.
    """
    if not isinstance(comparisons, Mapping) or not comparisons:
        raise TypeError("comparisons must be a non-empty dict {label: dict(a=..., b=..., claim=..., effect=...)}")
    for label, options in comparisons.items():
        if not isinstance(options, Mapping):
            raise TypeError(f"comparisons[{label!r}] must be a dict(a=..., b=..., claim=..., effect=...)")
    alone = {label: grade(**options) for label, options in comparisons.items()}
    adjusted = holm([g.p_adjusted for g in alone.values()])  # alone, p_adjusted is the deciding p
    m = len(alone)
    return {
        label: grade(**options, p_adjusted=p, family=m)
        for (label, options), p in zip(comparisons.items(), adjusted, strict=True)
    }


def not_testable(claim_text: str, reason: str) -> Grade:
    """The fourth outcome: the claim cannot be tested here; `reason` says why (e.g. "it is about
    fine-tuning from ImageNet-21k weights, which this lesson does not do")."""
    for value, name in ((claim_text, "claim_text"), (reason, "reason")):
        if not isinstance(value, str) or not value.strip():
            raise TypeError(f"{name} must be a non-empty string, got {value!r}")
    return Grade(outcome=NOT_TESTABLE, because=f"{claim_text}: {reason}", claim=claim_text)


def verdict_text(grade: Grade) -> str:
    """The grade's sentence, with why Welch's test is doubtful where it is (in brackets)."""
    if not isinstance(grade, Grade):
        raise TypeError(f"expected a Grade (from grade or grade_family), got {type(grade).__name__}")
    return f"{grade} [{grade.assumption}]" if grade.assumption else str(grade)


def verdict_table(grades: Mapping[str, Grade], title: str = "comparison") -> Table:
    """{label: Grade} (grade_family's) as a table: one row per comparison, its label and its verdict."""
    if not isinstance(grades, Mapping) or not grades:
        raise TypeError("grades must be a non-empty dict {label: Grade}, e.g. grade_family(...)")
    return Table([title, "verdict"], [[label, verdict_text(g)] for label, g in grades.items()])
