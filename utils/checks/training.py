"""Lesson 6's exercise checkers: one training step, the magnitude-matched position table, grading a
comparison by the rubric (utils.rubric), and the warm-up + cosine learning-rate schedule."""

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from utils.checks.core import CheckFailed, call_learner, describe, python_number
from utils.training import train_step, warmup_cosine

# ---- the learning-rate schedule -------------------------------------------------------------

WARMUPS = (0.1, 0.25)


def _points(warmup: float) -> dict[str, float]:
    """Where the schedule is read, by name: the start, inside warm-up, its end, the decay and the end."""
    return {
        "start": 0.0,
        "mid_warmup": warmup / 2,
        "warmup_end": 0.99 * warmup,  # warm-up's last stretch, still below warmup
        "peak": warmup,
        "mid_decay": (1 + warmup) / 2,
        "late": 0.9,
        "end": 1.0,
    }


def _cosine(t: float) -> float:
    """The half cosine from 1 (t = 0) to 0 (t = 1)."""
    return 0.5 * (1 + math.cos(math.pi * t))


def _after_warmup(decay: Callable[[float, float], float]) -> Callable[[float, float], float]:
    """A schedule with the right linear warm-up and the given decay(progress, warmup) after it."""
    return lambda p, w: p / w if p < w else decay(p, w)


def _t(p: float, w: float) -> float:
    """The decay's t, from 0 at the end of warm-up to 1 at the end."""
    return (p - w) / (1 - w)


# The typical wrong schedules, each with the sentence that names it ({where} stands for the case).
WRONG_SCHEDULES = [
    (
        lambda p, w: _cosine(p),
        "the factor is 1.00 at progress 0: warm-up must start at 0 and rise linearly to 1, progress / "
        "warmup; your cosine starts at once {where}",
    ),
    (
        lambda p, w: _cosine(_t(p, w)),
        "there is no warm-up: below warmup the factor must rise linearly from 0 to 1, progress / warmup; "
        "the cosine starts only when warm-up ends {where}",
    ),
    (
        _after_warmup(lambda p, w: 1 - _t(p, w)),
        "your decay is a straight line, 1 - t: a linear decay? use 0.5 * (1 + cos(pi * t)) {where}",
    ),
    (
        _after_warmup(lambda p, w: _cosine(p)),
        "the factor is {peak:.3f} at the end of warm-up; it must reach 1 there: the cosine's t must run from "
        "0 when warm-up ends to 1 at the end, t = (progress - warmup) / (1 - warmup), not t = progress {where}",
    ),
    (
        _after_warmup(lambda p, w: _cosine(p - w)),
        "the factor is {end:.3f} at progress 1; the cosine must end at 0: t = (progress - warmup) / (1 - warmup), "
        "you left out the division by (1 - warmup) {where}",
    ),
    (
        _after_warmup(lambda p, w: math.cos(math.pi * _t(p, w))),
        "cos(pi * t) alone falls from 1 to -1 (yours ends at {end:.2f}); the factor must fall from 1 to 0: "
        "0.5 * (1 + cos(pi * t)) {where}",
    ),
    (
        _after_warmup(lambda p, w: 1 + math.cos(math.pi * _t(p, w))),
        "1 + cos(pi * t) falls from 2 to 0 (yours is {peak:.2f} when warm-up ends); halve it: "
        "0.5 * (1 + cos(pi * t)) {where}",
    ),
    (
        _after_warmup(lambda p, w: 0.5 * math.cos(math.pi * _t(p, w))),
        "0.5 * cos(pi * t) falls from 0.5 to -0.5; add 1 inside the brackets: 0.5 * (1 + cos(pi * t)) {where}",
    ),
    (
        _after_warmup(lambda p, w: 0.5 + math.cos(math.pi * _t(p, w))),
        "the brackets are missing: 0.5 * (1 + cos(pi * t)), not 0.5 * 1 + cos(pi * t) {where}",
    ),
    (
        _after_warmup(lambda p, w: 0.5 * (1 + math.cos(_t(p, w)))),
        "the cosine needs pi: cos(pi * t) falls from 1 to -1 as t goes from 0 to 1, cos(t) only to "
        "cos(1) = 0.54, so your factor ends at {end:.2f} instead of 0 {where}",
    ),
    (
        _after_warmup(lambda p, w: max(0.1, _cosine(_t(p, w)))),
        "the factor stops at 0.1 instead of falling to 0: this schedule has no floor (no minimum learning "
        "rate); 0.5 * (1 + cos(pi * t)) all the way {where}",
    ),
    (
        _after_warmup(lambda p, w: 0.1 + 0.9 * _cosine(_t(p, w))),
        "the factor ends at 0.1 instead of 0: this schedule has no floor (no minimum learning rate); "
        "0.5 * (1 + cos(pi * t)) all the way {where}",
    ),
    (
        lambda p, w: p if p < w else _cosine(_t(p, w)),
        "the warm-up rises as progress itself, so it reaches only warmup = {warmup} at its end: divide by "
        "warmup, progress / warmup, to rise from 0 to 1 {where}",
    ),
]


def _factor(fn: Callable[[float, float], float], progress: float, warmup: float) -> float:
    """The learner's factor at one point as a float (a NumPy number, a 0-d tensor or array will do);
    CheckFailed naming what came otherwise."""
    where = f"at progress {progress:.4g} (warmup = {warmup})"
    value = python_number(call_learner(fn, progress, warmup, returns=object, where=where), "the factor", where)
    if isinstance(value, bool) or not isinstance(value, int | float):
        hint = ""
        if isinstance(value, torch.Tensor):
            hint = ": return one number, the factor at this progress"
        raise CheckFailed(f"expected a float, got {describe(value)} {where}{hint}")
    value = float(value)
    if not math.isfinite(value):
        raise CheckFailed(f"the factor is {value} {where}: a number between 0 and 1 must come back")
    return value


def _close(got: dict[str, float], expected: dict[str, float]) -> bool:
    return all(math.isclose(got[name], expected[name], abs_tol=1e-6) for name in expected)


def _schedule_failure(got: dict[str, float], expected: dict[str, float], warmup: float) -> str:
    """The message for a schedule that differs from the reference: a typical mistake by name, else
    the first landmark it misses (a start above 0, a warm-up that falls short of 1 or is not linear, a
    decay that does not start at 1 or does not end at 0)."""
    where = f"(warmup = {warmup})"
    points = _points(warmup)
    for schedule, sentence in WRONG_SCHEDULES:
        if _close(got, {name: schedule(p, warmup) for name, p in points.items()}):
            return sentence.format(where=where, warmup=warmup, **got)
    if not math.isclose(got["start"], 0.0, abs_tol=1e-6):
        return f"the factor is {got['start']:.2f} at progress 0: warm-up must start at 0 and rise linearly to 1 {where}"
    rise = got["warmup_end"] / points["warmup_end"]  # the warm-up's slope if it is a straight line from 0
    if not math.isclose(got["warmup_end"], expected["warmup_end"], abs_tol=1e-6) and math.isclose(
        got["mid_warmup"], rise * points["mid_warmup"], abs_tol=1e-6
    ):
        return (
            f"warm-up must reach 1 at its end: your straight line reaches {rise * warmup:.3f} at progress = warmup; "
            f"it rises from 0 to 1, progress / warmup {where}"
        )
    for name, when in (("mid_warmup", "halfway through warm-up"), ("warmup_end", "just before warm-up ends")):
        if not math.isclose(got[name], expected[name], abs_tol=1e-6):
            return (
                f"{when} (progress {points[name]:.4g}) the factor is {got[name]:.3f}, expected "
                f"{expected[name]:.3f}: warm-up rises linearly from 0 to 1, progress / warmup {where}"
            )
    if not math.isclose(got["peak"], 1.0, abs_tol=1e-6):
        return f"the factor is {got['peak']:.3f} at the end of warm-up; it must reach 1 there {where}"
    if not math.isclose(got["end"], 0.0, abs_tol=1e-6):
        return f"the factor is {got['end']:.3f} at progress 1; the schedule must end at 0 {where}"
    worst = max(points, key=lambda name: abs(got[name] - expected[name]))
    return (
        f"at progress {points[worst]:.3f} expected {expected[worst]:.4f}, got {got[worst]:.4f} {where}: "
        "after warm-up the factor is 0.5 * (1 + cos(pi * t)), t = (progress - warmup) / (1 - warmup)"
    )


def check_warmup_cosine(fn: Callable[[float, float], float]) -> None:
    """Check a learner's warmup_cosine(progress, warmup) -> factor in [0, 1]."""
    for warmup in WARMUPS:
        points = _points(warmup)
        got = {name: _factor(fn, p, warmup) for name, p in points.items()}
        expected = {name: warmup_cosine(p, warmup) for name, p in points.items()}
        if not _close(got, expected):
            raise CheckFailed(_schedule_failure(got, expected, warmup))
    print("✓ warmup_cosine matches the reference schedule at warm-up, peak, decay and end")


# ---- one training step ----------------------------------------------------------------------

STEPS = 3


def _classifier() -> nn.Module:
    """A small classifier of (B, 1, 3, 4) images into 3 classes, the same every time."""
    generator = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 8), nn.GELU(), nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.5 * torch.randn(p.shape, generator=generator))
    return model


def _optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum: a step taken twice then differs from a gradient counted twice."""
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """STEPS batches of 6 images (1, 3, 4) and their labels in 0..2."""
    generator = torch.Generator().manual_seed(0)
    return [
        (torch.randn(6, 1, 3, 4, generator=generator), torch.randint(0, 3, (6,), generator=generator))
        for _ in range(STEPS)
    ]


LOSSES = {  # name -> (logits, labels) -> the loss
    "cross_entropy": F.cross_entropy,
    "softmax_first": lambda z, y: F.cross_entropy(z.softmax(dim=-1), y),
    "nll_on_logits": F.nll_loss,
    "nll_on_probabilities": lambda z, y: F.nll_loss(z.softmax(dim=-1), y),
    "summed": lambda z, y: F.cross_entropy(z, y, reduction="sum"),
    "mse_on_logits": lambda z, y: F.mse_loss(z, F.one_hot(y, z.shape[-1]).float()),
    "mse_on_probabilities": lambda z, y: F.mse_loss(z.softmax(dim=-1), F.one_hot(y, z.shape[-1]).float()),
    "binary": lambda z, y: F.binary_cross_entropy_with_logits(z, F.one_hot(y, z.shape[-1]).float()),
    "smoothed": lambda z, y: F.cross_entropy(z, y, label_smoothing=0.1),
}


def wrong_train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    loss: str = "cross_entropy",
    zero_grad: bool = True,
    backwards: int = 1,
    steps: int = 1,
    loss_after_step: bool = False,
) -> float:
    """One training step with a switch for each typical mistake (the defaults make the right step).

    loss: a key of LOSSES; zero_grad: zero the gradients first; backwards: how often backward()
    runs (retaining the graph); steps: how often optimizer.step() runs; loss_after_step: return
    the loss of the updated model instead.
    """
    if zero_grad:
        optimizer.zero_grad()
    value = LOSSES[loss](model(images), labels)
    for _ in range(backwards):
        value.backward(retain_graph=True)
    for _ in range(steps):
        optimizer.step()
    if loss_after_step:
        with torch.no_grad():
            value = LOSSES[loss](model(images), labels)
    return value.item()


WRONG_STEPS = [  # (switches of wrong_train_step, the sentence that names the mistake; {step} is its number)
    (
        dict(loss="softmax_first"),
        "step {step}: you applied softmax before F.cross_entropy, which takes the log-softmax itself: "
        "pass it the raw logits, F.cross_entropy(model(images), labels)",
    ),
    (
        dict(loss="nll_on_logits"),
        "step {step}: F.nll_loss expects log-probabilities, and you gave it the raw logits: use "
        "F.cross_entropy(logits, labels), which takes the log-softmax itself",
    ),
    (
        dict(loss="nll_on_probabilities"),
        "step {step}: F.nll_loss expects log-probabilities, and you gave it softmax probabilities: use "
        "F.cross_entropy(logits, labels), which takes the log-softmax itself",
    ),
    (
        dict(loss="summed"),
        "step {step}: your loss is summed over the batch (reduction='sum'); the step averages it over the "
        "images, F.cross_entropy's default reduction='mean'",
    ),
    (
        dict(loss="mse_on_logits"),
        "step {step}: that is a mean squared error of the logits against one-hot labels; a classifier trains "
        "with cross-entropy: F.cross_entropy(model(images), labels)",
    ),
    (
        dict(loss="mse_on_probabilities"),
        "step {step}: that is a mean squared error of the probabilities against one-hot labels; a classifier "
        "trains with cross-entropy: F.cross_entropy(model(images), labels)",
    ),
    (
        dict(loss="binary"),
        "step {step}: that is binary cross-entropy, one yes/no per class; with one label per image use "
        "F.cross_entropy(model(images), labels)",
    ),
    (
        dict(loss="smoothed"),
        "step {step}: you used label smoothing (label_smoothing=0.1); this exercise's step takes the plain "
        "cross-entropy, F.cross_entropy(model(images), labels)",
    ),
    (
        dict(zero_grad=False),
        "after step {step} the parameters differ from the reference: did you forget optimizer.zero_grad()? "
        "Gradients add up across steps otherwise",
    ),
    (
        dict(backwards=2),
        "after step {step} the parameters moved twice as far as the reference's: backward() ran twice and "
        "added the gradients up twice; call loss.backward() once per step",
    ),
    (
        dict(steps=2),
        "after step {step} the parameters differ from the reference: optimizer.step() ran twice; call it once per step",
    ),
    (
        dict(loss_after_step=True),
        "step {step}: you returned the loss of the model after the update; return the loss that the "
        "gradients came from, computed before optimizer.step()",
    ),
]


@dataclass
class _Step:
    """What one training step left behind: the loss it returned, the parameters, whether they hold gradients."""

    loss: float
    parameters: list[torch.Tensor]
    has_gradients: bool

    def matches(self, other: "_Step") -> bool:
        """The same loss and the same parameters, to float32 rounding."""
        same_loss = math.isclose(self.loss, other.loss, rel_tol=1e-5, abs_tol=1e-6)
        return same_loss and all(torch.allclose(p, q, atol=1e-6) for p, q in zip(self.parameters, other.parameters))


def _after(model: nn.Module, loss: float) -> _Step:
    """What a step on `model` that returned `loss` left behind."""
    parameters = [p.detach().clone() for p in model.parameters()]
    has_gradients = any(p.grad is not None and bool(p.grad.any()) for p in model.parameters())
    return _Step(loss, parameters, has_gradients)


def _trace(step: Callable, **switches) -> list[_Step]:
    """What `step` leaves behind after each of the STEPS batches, from the same model and optimizer."""
    model = _classifier()
    optimizer = _optimizer(model)
    return [_after(model, step(model, optimizer, images, labels, **switches)) for images, labels in _batches()]


def _loss_value(result: object, step: int) -> float:
    """The learner's returned loss as a float (a NumPy number, a detached 0-d tensor or array will do);
    CheckFailed naming what came otherwise."""
    where = f"in step {step}"
    if isinstance(result, torch.Tensor | np.ndarray) and math.prod(result.shape) != 1:
        raise CheckFailed(
            f"return the loss as one number, got {describe(result)} {where}: the batch's mean loss, .mean().item()"
        )
    if isinstance(result, torch.Tensor) and result.requires_grad:
        raise CheckFailed(
            f"return the loss as a float (loss.item()), got {describe(result)} {where}: a tensor that needs "
            "grad keeps the whole computation graph of the step alive, and .item() gives the plain number"
        )
    if isinstance(result, nn.Module):
        raise CheckFailed(f"return the loss as a float (loss.item()), got {describe(result)}, a model or a layer")
    if (inspect.ismethod(result) or inspect.isbuiltin(result)) and result.__name__ == "item":
        raise CheckFailed(
            f"return the loss as a float (loss.item()), got {describe(result)}: you returned the method "
            "loss.item itself; call it, loss.item()"
        )
    value = python_number(result, "the loss", where)
    if not isinstance(value, float):
        raise CheckFailed(f"return the loss as a float (loss.item()), got {describe(result)}")
    if not math.isfinite(value):
        raise CheckFailed(f"step {step}: your step returned {value} as the loss; a cross-entropy is a finite number")
    return value


def _explain(error: Exception) -> str | None:
    """Two errors of a training step, in words; None for any other."""
    text = str(error)
    if "backward through the graph a second time" in text:
        return "backward() ran twice on the same loss: call loss.backward() once per step"
    if "does not require grad" in text:
        return (
            "the loss has no gradient to follow back: was the forward pass inside torch.no_grad(), "
            "or the loss made from .item() or .detach()?"
        )
    return None


def _step_failure(learner: list[_Step], reference: list[_Step], start: list[torch.Tensor]) -> str:
    """The message for the learner's steps where they first differ from the reference's: a typical
    mistake by name, else what differs (a parameter that did not move, the loss, the parameters)."""
    step = next(i for i, (ours, theirs) in enumerate(zip(learner, reference)) if not ours.matches(theirs))
    got, expected = learner[step], reference[step]
    if step == 0 and all(torch.equal(p, s) for p, s in zip(got.parameters, start)):
        if got.has_gradients:
            return "the parameters did not change: did you forget optimizer.step()?"
        return (
            "the parameters did not change, and they hold no gradients: did you forget optimizer.step() or "
            "loss.backward()? Or is optimizer.zero_grad() between backward() and step()? It wipes the "
            "gradients before the update."
        )
    for switches, sentence in WRONG_STEPS:
        wrong = _trace(wrong_train_step, **switches)
        if all(ours.matches(theirs) for ours, theirs in zip(learner[: step + 1], wrong)):
            return sentence.format(step=step + 1)
    if not math.isclose(got.loss, expected.loss, rel_tol=1e-5, abs_tol=1e-6):
        return (
            f"step {step + 1}: loss {got.loss:.5f}, expected {expected.loss:.5f}: the loss is "
            "F.cross_entropy(model(images), labels), averaged over the batch, of the model before the update"
        )
    return (
        f"after step {step + 1} the loss is right but the parameters differ from the reference: one "
        "optimizer.step() of the optimizer you are given, on the gradients of this loss alone, makes the update"
    )


def check_train_step(fn: Callable[[nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor], float]) -> None:
    """Check a learner's train_step(model, optimizer, images, labels) -> loss (a float), over
    three steps on a small classifier, against the reference step on an identical one."""
    model = _classifier()
    optimizer = _optimizer(model)
    start = [p.detach().clone() for p in model.parameters()]
    learner = []
    for step, (images, labels) in enumerate(_batches(), start=1):
        model.train()
        result = call_learner(
            fn,
            model,
            optimizer,
            images.clone(),
            labels.clone(),
            returns=object,
            where=f"in step {step}",
            explain=_explain,
        )
        if not model.training:
            raise CheckFailed(
                f"your step left the model in eval mode (model.eval()) in step {step}: training runs in train "
                "mode, where dropout is on; call model.eval() only to evaluate"
            )
        learner.append(_after(model, _loss_value(result, step)))
    reference = _trace(train_step)
    if not all(ours.matches(theirs) for ours, theirs in zip(learner, reference)):
        raise CheckFailed(_step_failure(learner, reference, start))
    print("✓ train_step matches the reference over 3 steps: same losses, same parameters")


# ---- grading a comparison by the rubric ---------------------------------------------------------

# Per-seed accuracies in points and a smallest effect of interest, chosen so that the rubric's
# outcome and every typical mistake's differ somewhere, and Welch's test decides each (no outlier).
GRADE_CASES = [
    ([92.2, 92.7, 92.6, 92.8, 92.8], [94.4, 84.7, 86.9, 94.1, 89.9], 1.0),
    ([89.5, 89.9, 89.6, 90.0, 89.0], [87.1, 87.6, 87.3], 2.0),
    ([89.0, 88.4, 89.0, 88.4], [87.3, 87.6, 87.1, 88.7], 2.0),
    ([89.9, 88.7, 89.3, 89.8, 89.1, 88.7], [87.9, 87.7, 88.1], 2.0),
    ([87.3, 89.2, 88.1, 87.8, 88.3, 88.1], [90.6, 88.1, 88.0], 1.0),
]
OUTCOMES = ("supported", "refuted", "inconclusive")


def _interval(a, b, ddof: int = 1, pooled: bool = False) -> tuple[float, float, float]:
    """(difference of means, its standard error, degrees of freedom): Welch's, or Student's pooled."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    difference = float(a.mean() - b.mean())
    if pooled:
        df = len(a) + len(b) - 2
        variance = ((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / df
        return difference, math.sqrt(variance * (1 / len(a) + 1 / len(b))), df
    va, vb = a.var(ddof=ddof) / len(a), b.var(ddof=ddof) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return difference, math.sqrt(va + vb), df


def _wrong_grade(ddof=1, pooled=False, z=False, one_sided=False, reverse=False, against=None, supported_when=None):
    """A rubric with one typical mistake switched on (the defaults make the right one)."""
    from scipy.stats import t as student_t

    def grade_higher(a, b, effect):
        if reverse:
            a, b = b, a
        difference, error, df = _interval(a, b, ddof, pooled)
        p = 2 * float(student_t.sf(abs(difference / error), df)) / (2 if one_sided else 1)
        half = (1.959964 if z else float(student_t.ppf(0.975, df))) * error
        low, high = difference - half, difference + half
        if supported_when == "whole interval":
            return "refuted" if high < effect else "supported" if low >= effect else "inconclusive"
        if supported_when == "not significant":
            return "supported" if difference > 0 and p < 0.05 else "refuted"
        if supported_when == "difference":
            return "supported" if difference >= effect else "refuted"
        if high < (0.0 if against == "zero" else effect):
            return "refuted"
        return "supported" if difference > 0 and p < 0.05 else "inconclusive"

    return grade_higher


WRONG_GRADES = [  # (a rubric with one typical mistake, the sentence that names it)
    (
        _wrong_grade(z=True),
        "your interval uses 1.96, the normal distribution's 97.5 % point; with a few seeds Welch's interval "
        "takes Student's t at Welch's degrees of freedom, scipy.stats.t.ppf(0.975, df), 2.3 to 2.8 for five "
        "seeds each: your interval is too narrow",
    ),
    (
        _wrong_grade(pooled=True),
        "you pooled the two arms' variances (Student's t-test, equal_var=True); the rubric uses Welch's test, "
        "where each arm keeps its own spread: standard error sqrt(sa**2 / na + sb**2 / nb), Welch's df",
    ),
    (
        _wrong_grade(ddof=0),
        "your standard deviations divide by n (NumPy's default, ddof=0); a sample's divides by n - 1: "
        "np.std(x, ddof=1) or statistics.stdev",
    ),
    (
        _wrong_grade(one_sided=True),
        "your p-value is one-sided (half the two-sided one); the rubric asks for the two-sided p < 0.05",
    ),
    (
        _wrong_grade(reverse=True),
        "you graded B against A: the difference is mean(a) - mean(b), and 'higher' claims A above B",
    ),
    (
        _wrong_grade(supported_when="not significant"),
        "you called every comparison that is not significant refuted; refuted needs the whole interval below "
        "the smallest effect of interest (high < effect); a non-significant one whose interval still reaches "
        "the effect is inconclusive",
    ),
    (
        _wrong_grade(supported_when="difference"),
        "you compared the difference of means itself with the effect; the rubric judges its 95 % interval: "
        "refuted when high < effect, supported when p < 0.05 and the difference is positive, else inconclusive",
    ),
    (
        _wrong_grade(against="zero"),
        "you called it refuted only when the interval lies below 0; refuted means it lies below the smallest "
        "effect of interest: high < effect",
    ),
    (
        _wrong_grade(supported_when="whole interval"),
        "you called it supported only when the whole interval clears the effect; the rubric's supported needs "
        "p < 0.05 with the difference positive (and not refuted): the effect may sit inside the interval",
    ),
]


def _outcome(result: object, where: str) -> str:
    """The learner's outcome as one of OUTCOMES (a Grade's .outcome, any case and spaces will do);
    CheckFailed naming what came otherwise."""
    outcome = getattr(result, "outcome", result)
    if not isinstance(outcome, str):
        raise CheckFailed(
            f"return the outcome as a string, one of {', '.join(map(repr, OUTCOMES))}; got {describe(result)} {where}"
        )
    cleaned = outcome.strip().lower()
    if cleaned not in OUTCOMES:
        raise CheckFailed(f"return one of {', '.join(map(repr, OUTCOMES))}, got {outcome!r} {where}")
    return cleaned


def _grade_where(a, b, effect) -> str:
    return f"for a = {a}, b = {b}, effect = {effect}"


def check_grade_higher(fn: Callable[[list, list, float], str]) -> None:
    """Check a learner's grade_higher(a, b, effect) -> "supported" | "refuted" | "inconclusive", the
    rubric's outcome for the claim that A beats B by at least `effect`, on cases where Welch decides."""
    from utils.rubric import grade

    got, expected = [], []
    for a, b, effect in GRADE_CASES:
        where = _grade_where(a, b, effect)
        result = call_learner(fn, list(a), list(b), effect, returns=object, where=where)
        got.append(_outcome(result, where))
        expected.append(grade(a, b, claim="higher", effect=effect).outcome)
    if got == expected:
        print(f"✓ grade_higher gives the rubric's outcome in all {len(GRADE_CASES)} cases")
        return
    for wrong, sentence in WRONG_GRADES:
        if got == [wrong(list(a), list(b), effect) for a, b, effect in GRADE_CASES]:
            raise CheckFailed(sentence)
    i = next(i for i, (ours, theirs) in enumerate(zip(got, expected)) if ours != theirs)
    a, b, effect = GRADE_CASES[i]
    truth = grade(a, b, claim="higher", effect=effect)
    raise CheckFailed(
        f"{_grade_where(a, b, effect)} the outcome is {expected[i]!r}, you gave {got[i]!r}: the difference is "
        f"{truth.difference:+.2f}, Welch's 95 % interval [{truth.low:+.2f}, {truth.high:+.2f}], p = {truth.p:.3f}; "
        "refuted when high < effect, supported when p < 0.05 and the difference is positive, else inconclusive"
    )


# ---- the magnitude-matched position table -------------------------------------------------------


def _sincos_table() -> torch.Tensor:
    from utils.embeddings import sincos_pos_embed_2d

    return sincos_pos_embed_2d(4, 64, True)  # (1, 17, 64): a zero class-token row, then 16 patch rows


def _random_table() -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(1, 5, 8, generator=generator) * torch.tensor([3.0, 1.0, 2.0, 0.5, 1.0])[None, :, None]


NORM_CASES = [(_sincos_table, 0.14), (_random_table, 2.0)]


def _mean_row_norm(rows: torch.Tensor) -> torch.Tensor:
    return rows.norm(dim=-1).mean()


WRONG_TABLES = [  # (table, target) -> a typical wrong table, and the sentence that names it
    (
        lambda t, target: t / t.norm(dim=-1, keepdim=True).clamp_min(1e-12) * target,
        "you scaled every row to the target norm on its own; that changes the table's structure (how far "
        "rows are from each other): one factor for the whole table, target / (mean norm of the patch rows)",
    ),
    (
        lambda t, target: t * target / _mean_row_norm(t[0]),
        "you averaged the norms over every row, the class token's too; the target is the mean norm of the "
        "patch rows, table[0, 1:]",
    ),
    (
        lambda t, target: t * target / t[0, 1:].std(),
        "you matched the standard deviation of the numbers; the target is the mean norm of the patch rows: "
        "table[0, 1:].norm(dim=-1).mean()",
    ),
    (
        lambda t, target: t * target / t[0, 1:].norm(),
        "you divided by the norm of all patch rows together; the target is the mean of the rows' norms: "
        "table[0, 1:].norm(dim=-1).mean()",
    ),
    (
        lambda t, target: t * target / t[0, 1:].norm(dim=-1).max(),
        "you divided by the largest row norm; the target is the mean of the patch rows' norms",
    ),
    (
        lambda t, target: t * _mean_row_norm(t[0, 1:]) / target,
        "your factor is upside down: multiply by target / (mean norm of the patch rows)",
    ),
]


def check_match_row_norm(fn: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Check a learner's match_row_norm(table, target) -> the (1, T, D) table scaled by one factor so
    that its patch rows (after the class-token row) have mean norm `target`. The class-token row may
    be scaled with the rest or left as it is."""
    for make, target in NORM_CASES:
        table = make()
        where = f"for a table {tuple(table.shape)} and target {target}"
        before = table.clone()
        result = call_learner(fn, table, target, returns=object, where=where)
        if not torch.equal(table, before):
            raise CheckFailed(
                f"you changed the table you were given (in place, e.g. mul_) {where}: return a new tensor, "
                "table * factor, so that the original arm keeps its table"
            )
        if not isinstance(result, torch.Tensor):
            raise CheckFailed(f"return the scaled table, a tensor {tuple(table.shape)}; got {describe(result)} {where}")
        if result.shape != table.shape:
            raise CheckFailed(f"return the whole table, shape {tuple(table.shape)}; got {describe(result)} {where}")
        expected = table * target / _mean_row_norm(table[0, 1:])
        result = result.to(expected.dtype)
        rows_right = torch.allclose(result[0, 1:], expected[0, 1:], atol=1e-6, rtol=1e-5)
        cls_right = torch.allclose(result[0, :1], expected[0, :1], atol=1e-6) or torch.equal(
            result[0, :1], table[0, :1]
        )
        if rows_right and cls_right:
            continue
        for wrong, sentence in WRONG_TABLES:
            if torch.allclose(result[0, 1:], wrong(table, target)[0, 1:], atol=1e-6, rtol=1e-5):
                raise CheckFailed(f"{sentence} ({where})")
        if rows_right:
            raise CheckFailed(f"the patch rows are right but the class-token row is neither scaled nor kept {where}")
        got = _mean_row_norm(result[0, 1:]).item()
        raise CheckFailed(
            f"the patch rows' mean norm is {got:.4g}, expected {target} {where}, and the rows are not the "
            "table's rows times one factor: table * target / table[0, 1:].norm(dim=-1).mean()"
        )
    print("✓ match_row_norm scales the table by one factor to the target mean row norm (a sin-cos and a random table)")
