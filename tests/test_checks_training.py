"""Lesson 6's checkers pass the reference, name each typical mistake in words, and turn whatever
else comes back into a failure that says what came."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.training import (
    GRADE_CASES,
    WRONG_GRADES,
    WRONG_TABLES,
    check_grade_higher,
    check_match_row_norm,
    check_train_step,
    check_warmup_cosine,
    wrong_train_step,
)
from utils.training import warmup_cosine

# ---- the schedule ---------------------------------------------------------------------------


def schedule(warm_up=lambda p, w: p / w, decay=lambda t: 0.5 * (1 + math.cos(math.pi * t)), rescale=True):
    """A learner's schedule with switches: the warm-up below warmup, the decay of t after it."""

    def factor(progress, warmup):
        if progress < warmup:
            return warm_up(progress, warmup)
        t = (progress - warmup) / (1 - warmup) if rescale else progress - warmup
        return decay(t)

    return factor


def test_check_warmup_cosine_passes_the_reference(capsys):
    check_warmup_cosine(warmup_cosine)
    check_warmup_cosine(schedule())
    check_warmup_cosine(lambda p, w: np.float64(warmup_cosine(p, w)))
    check_warmup_cosine(lambda p, w: 0 if p == 0 else warmup_cosine(p, w))  # an int 0 will do
    check_warmup_cosine(lambda p, w: min(p / w, 0.5 * (1 + math.cos(math.pi * max(0.0, (p - w) / (1 - w))))))
    out = capsys.readouterr().out
    assert out.count("✓ warmup_cosine matches the reference schedule at warm-up, peak, decay and end") == 5


@pytest.mark.parametrize(
    "kind",
    [torch.tensor, lambda v: torch.tensor(v, dtype=torch.float64), np.array, np.float32, lambda v: torch.tensor([v])],
    ids=["0-d tensor", "0-d float64 tensor", "0-d array", "numpy float32", "one-element tensor"],
)
def test_a_factor_of_any_number_kind_passes(kind, capsys):
    check_warmup_cosine(lambda p, w: kind(warmup_cosine(p, w)))
    assert capsys.readouterr().out.startswith("✓ warmup_cosine matches the reference schedule")


def test_a_schedule_written_with_torch_passes(capsys):
    def with_torch(progress, warmup):  # torch.cos of a tensor: a 0-d tensor comes back
        progress = torch.tensor(progress)
        if progress < warmup:
            return progress / warmup
        return 0.5 * (1 + torch.cos(torch.pi * (progress - warmup) / (1 - warmup)))

    check_warmup_cosine(with_torch)
    assert capsys.readouterr().out.startswith("✓ warmup_cosine matches")


SCHEDULE_MISTAKES = [  # the typical wrong schedules, and the words that name each mistake
    (lambda p, w: 0.5 * (1 + math.cos(math.pi * p)), "must start at 0 .*your cosine starts at once"),
    (lambda p, w: 0.5 * (1 + math.cos(math.pi * (p - w) / (1 - w))), "there is no warm-up"),
    (schedule(decay=lambda t: 1 - t), r"a linear decay\? use 0.5 \* \(1 \+ cos\(pi \* t\)\)"),
    (
        lambda p, w: p / w if p < w else 0.5 * (1 + math.cos(math.pi * p)),
        r"at the end of warm-up; it must reach 1 there: .*not t = progress",
    ),
    (schedule(rescale=False), r"must end at 0: t = .*you left out the division by \(1 - warmup\)"),
    (schedule(decay=lambda t: math.cos(math.pi * t)), r"cos\(pi \* t\) alone falls from 1 to -1"),
    (schedule(decay=lambda t: 1 + math.cos(math.pi * t)), r"1 \+ cos\(pi \* t\) falls from 2 to 0 .*halve it"),
    (schedule(decay=lambda t: 0.5 * math.cos(math.pi * t)), "add 1 inside the brackets"),
    (schedule(decay=lambda t: 0.5 * 1 + math.cos(math.pi * t)), "the brackets are missing"),
    (schedule(decay=lambda t: 0.5 * (1 + math.cos(t))), "the cosine needs pi"),
    (schedule(decay=lambda t: max(0.1, 0.5 * (1 + math.cos(math.pi * t)))), "stops at 0.1 .*no floor"),
    (schedule(decay=lambda t: 0.1 + 0.45 * (1 + math.cos(math.pi * t))), "ends at 0.1 instead of 0: .*no floor"),
    (schedule(warm_up=lambda p, w: p), r"the warm-up rises as progress itself, .*reaches only warmup = 0.1"),
    (
        schedule(warm_up=lambda p, w: 0.9 * p / w),
        r"^warm-up must reach 1 at its end: your straight line reaches 0.900 at progress = warmup",
    ),
    (schedule(warm_up=lambda p, w: (p / w) ** 2), r"halfway through warm-up .* is 0.250, expected 0.500"),
    (schedule(warm_up=lambda p, w: 0.5 if p == w / 2 else p), r"just before warm-up ends \(progress 0.099\)"),
]


@pytest.mark.parametrize("wrong, words", SCHEDULE_MISTAKES)
def test_check_warmup_cosine_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_warmup_cosine(wrong)


def test_no_schedule_mistake_is_named_as_another():
    assert_each_named_as_itself(check_warmup_cosine, SCHEDULE_MISTAKES)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda p, w: None, r"^expected a float, got None .* at progress 0 \(warmup = 0.1\)$"),
        (lambda p, w: torch.full((3,), warmup_cosine(p, w)), r"got Tensor .* shape \(3,\) .*: return one number"),
        (lambda p, w: float("nan"), r"^the factor is nan at progress 0 \(warmup = 0.1\)"),
        (lambda p, w: math.inf, r"^the factor is inf at progress 0"),
        (lambda p, w: 1 / 0, r"^your function raised ZeroDivisionError at progress 0 \(warmup = 0.1\)"),
        (lambda p, w: "0.5", r"^expected a float, got str '0.5'"),
        (lambda p, w: p < w, r"^expected a float, got bool True"),
        (lambda p, w: np.bool_(True), r"^expected a float, got bool"),
        (lambda p, w: complex(p), r"^expected a float, got complex"),
        (lambda p, w: [p / w], r"^expected a float, got list"),
        (lambda p, w: math.cos(180 * p), r"^the factor is 1.00 at progress 0: warm-up must start at 0"),
    ],
)
def test_check_warmup_cosine_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_warmup_cosine(wrong)


# ---- one training step ----------------------------------------------------------------------


def reference_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


@pytest.mark.parametrize(
    "kind",
    [lambda loss: loss.detach(), lambda loss: loss.detach().numpy(), lambda loss: loss.detach().numpy()[()]],
    ids=["detached 0-d tensor", "0-d array", "numpy float32"],
)
def test_a_loss_of_any_number_kind_passes(kind, capsys):
    def step(model, optimizer, images, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return kind(loss)

    check_train_step(step)
    assert capsys.readouterr().out.startswith("✓ train_step matches the reference over 3 steps")


def test_check_train_step_passes_the_reference(capsys):
    check_train_step(reference_step)
    check_train_step(wrong_train_step)  # its defaults make the right step

    def zero_grad_last(model, optimizer, images, labels):
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        model.zero_grad()
        return loss.item()

    check_train_step(zero_grad_last)
    out = capsys.readouterr().out
    assert out.count("✓ train_step matches the reference over 3 steps: same losses, same parameters") == 3


def step_with(**switches):
    return lambda model, optimizer, images, labels: wrong_train_step(model, optimizer, images, labels, **switches)


def no_step(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    return loss.item()


def no_backward(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    optimizer.step()
    return loss.item()


def zero_grad_after_backward(model, optimizer, images, labels):
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.zero_grad()  # wipes what backward just computed
    optimizer.step()
    return loss.item()


def eval_mode(model, optimizer, images, labels):
    model.eval()
    return reference_step(model, optimizer, images, labels)


def returns_the_tensor(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss


def returns_tensor_of_batch(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels, reduction="none")
    loss.mean().backward()
    optimizer.step()
    return loss


def returns_the_method(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item


def backward_twice(model, optimizer, images, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images), labels)
    loss.backward()
    loss.backward()
    optimizer.step()
    return loss.item()


def under_no_grad(model, optimizer, images, labels):
    optimizer.zero_grad()
    with torch.no_grad():
        loss = F.cross_entropy(model(images), labels)
    loss.backward()
    optimizer.step()
    return loss.item()


def forgot_return(model, optimizer, images, labels):
    reference_step(model, optimizer, images, labels)


TRAIN_STEP_MISTAKES = [  # the typical wrong steps, and the words that name each mistake
    (step_with(loss="softmax_first"), "you applied softmax before F.cross_entropy"),
    (step_with(loss="nll_on_logits"), "F.nll_loss expects log-probabilities, and you gave it the raw logits"),
    (step_with(loss="nll_on_probabilities"), "F.nll_loss expects log-probabilities, and you gave it softmax"),
    (step_with(loss="summed"), r"your loss is summed over the batch \(reduction='sum'\)"),
    (step_with(loss="mse_on_logits"), "mean squared error of the logits"),
    (step_with(loss="mse_on_probabilities"), "mean squared error of the probabilities"),
    (step_with(loss="binary"), "that is binary cross-entropy"),
    (step_with(loss="smoothed"), r"you used label smoothing \(label_smoothing=0.1\)"),
    (eval_mode, r"your step left the model in eval mode \(model.eval\(\)\) in step 1"),
    (zero_grad_after_backward, r"between backward\(\) and step\(\)\? It wipes the gradients"),
    (step_with(zero_grad=False), r"after step 2 the parameters differ .*did you forget optimizer.zero_grad\(\)\?"),
    (no_step, r"^the parameters did not change: did you forget optimizer.step\(\)\?$"),
    (no_backward, r"did you forget optimizer.step\(\) or loss.backward\(\)\?"),
    (returns_the_tensor, r"return the loss as a float \(loss.item\(\)\), got Tensor .*keeps the whole"),
    (returns_tensor_of_batch, "one number"),
    (returns_the_method, r"you returned the method loss.item itself; call it, loss.item\(\)"),
    (backward_twice, r"raised RuntimeError in step 1: .*\(backward\(\) ran twice on the same loss"),
    (step_with(backwards=2), r"backward\(\) ran twice and added the gradients up twice"),
    (step_with(steps=2), r"optimizer.step\(\) ran twice"),
    (under_no_grad, r"raised RuntimeError in step 1: .*was the forward pass inside torch.no_grad\(\)"),
    (step_with(loss_after_step=True), "you returned the loss of the model after the update"),
    (forgot_return, r"got None \(did your function forget to `return`"),
]


@pytest.mark.parametrize("wrong, words", TRAIN_STEP_MISTAKES)
def test_check_train_step_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_train_step(wrong)


def test_no_train_step_mistake_is_named_as_another():
    assert_each_named_as_itself(check_train_step, TRAIN_STEP_MISTAKES)


def test_an_optimizer_of_its_own_gets_a_neutral_message():
    def own_optimizer(model, optimizer, images, labels):
        return reference_step(model, torch.optim.Adam(model.parameters(), lr=1e-3), images, labels)

    with pytest.raises(CheckFailed, match=r"^after step 1 the loss is right but the parameters differ"):
        check_train_step(own_optimizer)


@pytest.mark.parametrize(
    "result, words",
    [
        (1, r"return the loss as a float \(loss.item\(\)\), got int 1$"),
        ("1.0", r"got str '1.0'$"),
        (float("nan"), r"^step 1: your step returned nan as the loss"),
        (torch.nn.Linear(1, 1), r"got Linear, a model or a layer$"),
        (math.cos, r"got builtin_function_or_method$"),
    ],
)
def test_check_train_step_says_what_came(result, words):
    def returns(model, optimizer, images, labels):
        reference_step(model, optimizer, images, labels)
        return result

    with pytest.raises(CheckFailed, match=words):
        check_train_step(returns)


# ---- grading a comparison by the rubric ---------------------------------------------------------


def welch_grade(a, b, effect):
    """The rubric written out with scipy (an independent reference for the checker's cases)."""
    from scipy import stats

    test = stats.ttest_ind(a, b, equal_var=False)
    difference = np.mean(a) - np.mean(b)
    low, high = test.confidence_interval(0.95)
    if high < effect:
        return "refuted"
    return "supported" if difference > 0 and test.pvalue < 0.05 else "inconclusive"


def test_check_grade_higher_passes_the_rubric_and_its_variants(capsys):
    from utils.rubric import grade

    check_grade_higher(welch_grade)
    check_grade_higher(lambda a, b, effect: grade(a, b, claim="higher", effect=effect))  # a Grade will do
    check_grade_higher(lambda a, b, effect: welch_grade(a, b, effect).upper())
    out = capsys.readouterr().out
    assert out.count("✓ grade_higher gives the rubric's outcome in all 5 cases") == 3


def test_the_grade_cases_cover_every_outcome_and_welch_decides_each():
    from utils.rubric import grade

    grades = [grade(a, b, claim="higher", effect=effect) for a, b, effect in GRADE_CASES]
    assert {g.outcome for g in grades} == {"supported", "refuted", "inconclusive"}
    assert all(g.decided_by == "Welch" for g in grades)
    assert [welch_grade(a, b, e) for a, b, e in GRADE_CASES] == [g.outcome for g in grades]


def test_check_grade_higher_names_each_mistake():
    named = [(f"mistake {i}", wrong, re.escape(sentence[:40])) for i, (wrong, sentence) in enumerate(WRONG_GRADES)]
    assert_each_named_as_itself(check_grade_higher, named)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda a, b, effect: a, r"return the outcome as a string, .*got list of 5"),
        (
            lambda a, b, effect: "significant",
            r"return one of 'supported', 'refuted', 'inconclusive', got 'significant'",
        ),
        (lambda a, b, effect: None, r"got None"),
        (lambda a, b, effect: "supported", r"the outcome is 'inconclusive', you gave 'supported': the difference is"),
    ],
)
def test_check_grade_higher_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_grade_higher(wrong)


# ---- the magnitude-matched position table -------------------------------------------------------


def test_check_match_row_norm_passes_the_reference_and_its_variants(capsys):
    check_match_row_norm(lambda t, target: t * target / t[0, 1:].norm(dim=-1).mean())
    check_match_row_norm(lambda t, target: torch.cat([t[:, :1], t[:, 1:] * target / t[0, 1:].norm(dim=-1).mean()], 1))
    check_match_row_norm(lambda t, target: t.double() * target / t[0, 1:].double().norm(dim=-1).mean())
    assert capsys.readouterr().out.count("✓ match_row_norm scales the table by one factor") == 3


def test_check_match_row_norm_names_each_mistake():
    def in_place(t, target):
        return t.mul_(target / t[0, 1:].norm(dim=-1).mean())

    named = [(f"mistake {i}", make_wrong(w), re.escape(s[:40])) for i, (w, s) in enumerate(WRONG_TABLES)]
    named += [
        ("in place", in_place, r"you changed the table you were given \(in place"),
        ("the factor", lambda t, target: target / t[0, 1:].norm(dim=-1).mean(), r"return the whole table, shape"),
        ("first parameter", lambda t, target: t, r"the patch rows' mean norm is .* expected 0.14"),
    ]
    assert_each_named_as_itself(check_match_row_norm, named)


def make_wrong(wrong):
    return lambda t, target: wrong(t, target)
