"""Lesson 9's checkers pass the reference, name each typical mistake in words, and turn whatever
else comes back into a failure that says what came."""

import statistics
import warnings
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself
from scipy import stats

from utils.checks.claims import (
    KEYS,
    READOUT_CASES,
    VERDICT_CASES,
    check_holm,
    check_readout_gradient_norm,
    check_verdict,
)
from utils.checks.core import CheckFailed
from utils.experiments import compare
from utils.inspection import readout_gradient_norm
from utils.rubric import holm
from utils.runtime import eval_mode

# ---- the gradient at the readout -------------------------------------------------------------


def learner_readout(
    model,
    images,
    labels,
    *,
    reduction="sum",
    per_image=True,
    at="head",
    evaluate=True,
    restore=True,
    how="autograd",
    remove_hook=True,
):
    """A learner's readout gradient with a switch for each typical mistake (the defaults are right).

    at: where the gradient is taken: "head" (its input), "norm" (the final norm's output, token 0),
    "before_norm" (its input, token 0), "fc_norm" (fc_norm's input), "logits".
    how: "autograd", "backward" (retain_grad and backward, .grad left in the parameters),
    "backward_then_zero" (the same, then model.zero_grad()), "weight" (the head's weight gradient),
    "step" (an optimiser step after the measurement).
    """
    was_training = model.training
    if evaluate:
        model.eval()
    seen = {}
    module, hook_kind = {
        "head": (model.head, "pre"),
        "norm": (model.norm, "post"),
        "before_norm": (model.norm, "pre"),
        "fc_norm": (model.fc_norm, "pre"),
        "logits": (model.head, "post"),
    }[at]
    if hook_kind == "pre":
        handle = module.register_forward_pre_hook(lambda m, args: seen.__setitem__("x", args[0]))
    else:
        handle = module.register_forward_hook(lambda m, args, out: seen.__setitem__("x", out))
    logits = model(images)
    if remove_hook:
        handle.remove()
    if restore:
        model.train(was_training)
    x = seen["x"]
    if at in ("norm", "before_norm"):
        x.retain_grad()
    loss = F.cross_entropy(logits, labels, reduction=reduction)
    if how == "autograd":
        (gradient,) = torch.autograd.grad(loss, x)
    else:
        if how == "weight":
            model.zero_grad()
        x.retain_grad()
        loss.backward()
        gradient = model.head.weight.grad if how == "weight" else x.grad
        if how == "backward_then_zero":
            model.zero_grad()
        if how == "step":
            torch.optim.SGD(model.parameters(), lr=0.1).step()
        if how == "weight":
            return gradient.norm().item()
    if at in ("norm", "before_norm"):
        gradient = gradient[:, 0]  # token 0
    norms = gradient.norm(dim=1) if per_image else gradient.norm()
    return norms.mean().item()


def readout_with(**switches):
    return lambda model, images, labels: learner_readout(model, images, labels, **switches)


def analytic_readout(model, images, labels):
    """(softmax - one-hot) @ head.weight: cross-entropy's gradient at the head's input, by hand."""
    with torch.no_grad(), eval_mode(model):
        logits = model(images)
    error = logits.softmax(dim=-1) - F.one_hot(labels, logits.shape[-1])  # (B, classes)
    return (error @ model.head.weight).norm(dim=1).mean().item()


def test_check_readout_gradient_norm_passes_the_reference(capsys):
    check_readout_gradient_norm(readout_gradient_norm)
    check_readout_gradient_norm(learner_readout)
    check_readout_gradient_norm(analytic_readout)
    check_readout_gradient_norm(lambda *args: np.float32(readout_gradient_norm(*args)))  # NumPy's float will do
    out = capsys.readouterr().out
    assert out.count("✓ readout_gradient_norm matches the reference for pool='cls', pool='mean', fc_norm") == 4


@pytest.mark.parametrize(
    "kind",
    [torch.tensor, lambda v: torch.tensor([v]), np.array, lambda v: np.array([v]), np.float64],
    ids=["0-d tensor", "one-element tensor", "0-d array", "one-element array", "numpy float64"],
)
def test_a_readout_value_of_any_number_kind_passes(kind, capsys):
    check_readout_gradient_norm(lambda *args: kind(readout_gradient_norm(*args)))
    assert capsys.readouterr().out.startswith("✓ readout_gradient_norm matches the reference")


def test_a_readout_tensor_of_the_graph_is_named_not_passed():
    """.norm().mean() without .item() or .detach(): right in value, but it holds the graph alive."""
    with pytest.raises(CheckFailed, match=r"got Tensor of dtype float32 and shape \(\) that still needs grad"):
        check_readout_gradient_norm(analytic_without_item)


def test_the_readout_cases_cover_what_the_mistakes_need():
    pools = {case.overrides.get("pool", "cls") for case in READOUT_CASES}
    assert pools == {"cls", "mean"} and any(case.overrides.get("fc_norm") for case in READOUT_CASES)
    assert any(case.train and case.overrides.get("dropout") for case in READOUT_CASES)
    assert any(case.grads for case in READOUT_CASES)
    assert all(case.batch != 4 for case in READOUT_CASES if case.overrides.get("pool") == "mean")  # B != N


def never_restored_eval(model, images, labels):
    model.eval()
    return learner_readout(model, images, labels)


def always_train_after(model, images, labels):
    value = learner_readout(model, images, labels)
    model.train()
    return value


def analytic_without_item(model, images, labels):
    with torch.no_grad(), eval_mode(model):
        logits = model(images)
    error = logits.softmax(dim=-1) - F.one_hot(labels, logits.shape[-1])
    return (error @ model.head.weight).norm(dim=1).mean()  # head.weight needs grad: so does the result


def under_no_grad(model, images, labels):
    with torch.no_grad():
        return learner_readout(model, images, labels)


def freezes_the_model(model, images, labels):
    model.requires_grad_(False)
    return analytic_readout(model, images, labels)


TOTALS = weakref.WeakKeyDictionary()  # model -> what adds_up returned for it so far


def adds_up(model, images, labels):
    """Right the first time for each model, then the sum of its values so far."""
    TOTALS[model] = TOTALS.get(model, 0.0) + readout_gradient_norm(model, images, labels)
    return TOTALS[model]


READOUT_MISTAKES = [  # the typical wrong functions, and the words that name each mistake
    (readout_with(reduction="mean"), r"the reference's divided by the batch size, 4: the loss was averaged"),
    (readout_with(per_image=False), r"the norm of the whole \(B, D\) gradient, one number for the batch"),
    (readout_with(reduction="mean", per_image=False), r"whole \(B, D\) gradient of the batch's mean loss"),
    (readout_with(at="norm"), r"the gradient at token 0, which in this model is a patch: .*pool='mean'"),
    (readout_with(at="before_norm"), r"at the class token before the final LayerNorm \(model.norm\)"),
    (readout_with(at="fc_norm"), r"at the mean of the patch tokens before fc_norm"),
    (readout_with(at="logits"), r"the gradient at the logits \(the head's output\)"),
    (readout_with(how="weight"), r"^that is the norm of the head's weight gradient \(model.head.weight.grad, a"),
    (
        readout_with(how="weight", reduction="mean"),
        r"head's weight gradient \(model.head.weight.grad\) of the batch's mean",
    ),
    (
        readout_with(evaluate=False),
        r"changes from call to call, .* the model stayed in train mode, where dropout is on",
    ),
    (never_restored_eval, r"the model came in train mode and your function left it in eval mode"),
    (always_train_after, r"the model came in eval mode and your function left it in train mode"),
    (readout_with(how="backward"), r"left gradients in the parameters' .grad .*torch.autograd.grad"),
    (readout_with(how="backward_then_zero"), r"changed the gradients the model held in .grad when it came"),
    (readout_with(how="step"), r"changed the model's parameters .*no optimizer.step\(\)"),
    (readout_with(remove_hook=False), r"left a hook on the model .*handle.remove\(\)"),
    (analytic_without_item, r"return the value as a float \(.item\(\)\), got Tensor .* that still needs grad"),
    (lambda m, x, y: torch.ones(len(y)), r"return one number, the mean over the images, got Tensor .* shape \(4,\)"),
    (under_no_grad, r"raised RuntimeError .*was the forward pass inside torch.no_grad\(\)"),
    (freezes_the_model, r"changed requires_grad of cls_token, pos_embed, patch_embed.proj.weight \(a pool='cls'"),
    (adds_up, r"gave .*, then .* on the same model and images"),
    (lambda *args: 1, r"^expected a float, got int 1"),
    (lambda *args: float("nan"), r"returned nan .*a norm of a gradient is a finite number"),
    (lambda *args: readout_gradient_norm(*args) * 1.5, r"^expected .*, got .*: the readout is the head's input"),
]


@pytest.mark.parametrize("wrong, words", READOUT_MISTAKES)
def test_check_readout_gradient_norm_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_readout_gradient_norm(wrong)


def test_no_readout_mistake_is_named_as_another():
    assert_each_named_as_itself(check_readout_gradient_norm, READOUT_MISTAKES)


@pytest.mark.parametrize("state", range(6))
def test_dropout_left_on_is_named_whatever_the_global_generator_holds(state):
    """The dropout masks are drawn under the checker's own seeds: the verdict does not depend on the
    tests (or cells) that ran before (it once did, and two draws happened to agree)."""
    torch.manual_seed(state)
    torch.rand(state * 37)  # any earlier use of the generator
    with pytest.raises(CheckFailed, match=r"changes from call to call, .* where dropout is on"):
        check_readout_gradient_norm(readout_with(evaluate=False))


def test_a_blank_readout_exercise_passes_its_hint_through():
    def blank(model, images, labels):
        raise NotImplementedError("your code here")

    with pytest.raises(NotImplementedError, match="^your code here$"):
        check_readout_gradient_norm(blank)


def test_the_readout_checker_leaves_the_global_generator_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    check_readout_gradient_norm(readout_gradient_norm)
    assert torch.equal(torch.rand(3), expected)


# ---- the verdict on two sets of runs -------------------------------------------------------------


def verdict_with(
    ddof=1,
    equal_var=False,
    alternative="two-sided",
    significant=lambda p, a, b: p < 0.05,
    mean=np.mean,
    swap=False,
    keys=KEYS,
    p_of=None,
    stds=None,
):
    """A learner's verdict with a switch for each typical mistake (the defaults make it right)."""

    def verdict(a, b):
        if swap:
            a, b = b, a
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = stats.ttest_ind(a, b, equal_var=equal_var, alternative=alternative)
        p = float(result.pvalue) if p_of is None else p_of(a, b, result)
        std = stds or (lambda x: float(np.std(x, ddof=ddof)))
        values = [float(mean(a)), std(a), float(mean(b)), std(b), p, significant(p, a, b)]
        return dict(zip(keys, values))

    return verdict


def from_compare(a, b):
    result = compare(a, b)
    return dict(
        mean_a=result.a.mean,
        std_a=result.a.std,
        mean_b=result.b.mean,
        std_b=result.b.std,
        p=result.p,
        significant=result.significant,
    )


def with_statistics(a, b):
    """The standard library and a Welch test by hand (scipy's t distribution only)."""
    mean_a, mean_b = statistics.mean(a), statistics.mean(b)
    std_a, std_b = statistics.stdev(a), statistics.stdev(b)
    se_a, se_b = std_a**2 / len(a), std_b**2 / len(b)
    if se_a + se_b == 0:
        p = 1.0 if mean_a == mean_b else 0.0
    else:
        t = (mean_a - mean_b) / (se_a + se_b) ** 0.5
        df = (se_a + se_b) ** 2 / (se_a**2 / (len(a) - 1) + se_b**2 / (len(b) - 1))
        p = 2 * stats.t.sf(abs(t), df)
    return dict(mean_a=mean_a, std_a=std_a, mean_b=mean_b, std_b=std_b, p=p, significant=bool(p < 0.05))


def in_torch(a, b):
    x, y = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    p = stats.ttest_ind(a, b, equal_var=False).pvalue
    return dict(
        mean_a=x.mean().item(),
        std_a=x.std().item(),
        mean_b=y.mean().item(),
        std_b=y.std().item(),
        p=p,
        significant=p < 0.05,
    )


def test_check_verdict_passes_the_reference(capsys):
    check_verdict(from_compare)
    check_verdict(verdict_with())
    check_verdict(with_statistics)
    check_verdict(in_torch)
    out = capsys.readouterr().out
    assert out.count("✓ verdict matches compare: means, sample stds, Welch's two-sided p and p < 0.05") == 4


def in_torch_kept_as_tensors(a, b):
    """in_torch without the .item() calls: 0-d tensors hold the right numbers, significant a 0-d bool tensor."""
    x, y = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    p = torch.tensor(stats.ttest_ind(a, b, equal_var=False).pvalue)
    return dict(mean_a=x.mean(), std_a=x.std(), mean_b=y.mean(), std_b=y.std(), p=p, significant=p < 0.05)


def in_numpy_arrays(a, b):
    """The numbers as 0-d NumPy arrays, significant a NumPy bool."""
    result = from_compare(a, b)
    return {key: np.array(value) if key != "significant" else np.bool_(value) for key, value in result.items()}


@pytest.mark.parametrize("right", [in_torch_kept_as_tensors, in_numpy_arrays])
def test_check_verdict_passes_numbers_of_any_kind(right, capsys):
    check_verdict(right)
    assert capsys.readouterr().out.startswith("✓ verdict matches compare")


def test_the_verdict_cases_are_what_the_docstring_says():
    sizes = [(len(a), len(b)) for a, b, _ in VERDICT_CASES]
    assert any(n_a != n_b for n_a, n_b in sizes)
    results = [compare(a, b) for a, b, _ in VERDICT_CASES]
    assert any(r.a.std > 5 * r.b.std or r.b.std > 5 * r.a.std for r in results)  # unequal spreads
    assert any(r.a.std == 0 for r in results)  # a set without spread
    identical = [r for (a, b, _), r in zip(VERDICT_CASES, results) if a == b]
    assert identical and all(r.p == 1.0 and r.t == 0 for r in identical)  # compare: p = 1 for identical lists
    assert any(r.significant and abs(r.difference) < min(r.a.std, r.b.std) for r in results)
    a, b, _ = VERDICT_CASES[-1]
    p = stats.ttest_ind(a, b, equal_var=False).pvalue  # 0.05 exactly with scipy 1.17, 2e-17 below with 1.15
    edge = compare(a, b)
    assert abs(p - 0.05) < 1e-15 and abs(edge.p - 0.05) < 1e-15
    assert edge.significant == (edge.p < 0.05)  # decided by the p compare computed, on any scipy


def round_p(a, b, result):
    return round(float(result.pvalue), 12)  # exactly 0.05 on the last case, whatever the last digits


VERDICT_MISTAKES = [  # the typical wrong verdicts, and the words that name each mistake
    (verdict_with(ddof=0), r"std_a is the population standard deviation \(ddof=0"),
    (verdict_with(stds=lambda x: float(np.var(x, ddof=1))), r"std_a is the variance"),
    (verdict_with(stds=lambda x: float(np.std(x, ddof=1)) / len(x) ** 0.5), r"std_a is the standard error of the mean"),
    (lambda a, b: {**from_compare(a, b), "p": 100 * compare(a, b).p}, r"p is 100 times Welch's p .*not a percentage"),
    (verdict_with(equal_var=True), r"p is Student's t-test, .*equal_var=True"),
    (verdict_with(alternative="greater"), r"p is one-sided"),
    (verdict_with(alternative="less"), r"p is one-sided"),
    (
        verdict_with(p_of=lambda a, b, r: float(2 * stats.t.sf(abs(r.statistic), len(a) + len(b) - 2))),
        r"p is Welch's t with Student's degrees of freedom",
    ),
    (verdict_with(p_of=lambda a, b, r: float(2 * stats.norm.sf(abs(r.statistic)))), r"p comes from the normal"),
    (verdict_with(p_of=lambda a, b, r: float(r.statistic)), r"that is the t statistic, not its p-value"),
    (verdict_with(p_of=lambda a, b, r: float("nan")), r"^p is nan \(for a of 5 seeds, b of 3"),
    (verdict_with(significant=lambda p, a, b: p > 0.05), r"significant is the wrong way round"),
    (verdict_with(significant=lambda p, a, b: p >= 0.05), r"significant is the wrong way round"),
    (
        verdict_with(significant=lambda p, a, b: p <= 0.05, p_of=round_p),
        r"significant is True for p = 0.05 .*not p <= 0.05",
    ),
    (
        verdict_with(
            significant=lambda p, a, b: abs(np.mean(a) - np.mean(b)) > max(np.std(a, ddof=1), np.std(b, ddof=1))
        ),
        r"whether the means differ by more than a standard deviation: .*that is not the test",
    ),
    (
        verdict_with(significant=lambda p, a, b: p < 0.01),
        r"significant is False for p = 0.0324 .*: it must be p < 0.05",
    ),
    (
        verdict_with(significant=lambda p, a, b: "yes" if p < 0.05 else "no"),
        r"significant must be True or False, got str",
    ),
    (
        verdict_with(keys=("mean_a", "std_A", "mean_b", "std_b", "p", "significant")),
        r"no key 'std_a': is 'std_A' meant",
    ),
    (verdict_with(keys=KEYS[:-1]), r"your dict has no key 'significant' .*needs these keys: mean_a, std_a"),
    (verdict_with(mean=max), r"mean_a is the best seed, max\(a\)"),
    (verdict_with(swap=True), r"mean_a and mean_b are swapped"),
    (
        lambda a, b: {**from_compare(a, b), "std_a": compare(a, b).b.std, "std_b": compare(a, b).a.std},
        r"std_a and std_b are swapped",
    ),
    (lambda a, b: {**from_compare(a, b), "mean_a": 100 * np.mean(a)}, r"mean_a is 100 times the mean"),
    (lambda a, b: {**from_compare(a, b), "mean_b": np.median(b)}, r"^mean_b = .*, expected .*sum\(x\) / len\(x\)"),
    (
        lambda a, b: {**from_compare(a, b), "p": torch.tensor([compare(a, b).p] * 2)},
        r"p must be a number, got Tensor .*\(2,\)",
    ),
    (lambda a, b: stats.ttest_rel(a, b), r"raised ValueError .*a paired test \(ttest_rel\)"),
    (
        lambda a, b: tuple(from_compare(a, b).values()),
        r"^expected a dict with the keys mean_a, std_a, .*got tuple of 6",
    ),
]


@pytest.mark.parametrize("wrong, words", VERDICT_MISTAKES)
def test_check_verdict_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_verdict(wrong)


def test_no_verdict_mistake_is_named_as_another():
    assert_each_named_as_itself(check_verdict, VERDICT_MISTAKES)


def test_significance_is_judged_on_the_learners_own_p():
    """A p a few units in the last place off compare's, on the case at 0.05, is right, and so is the
    significance that follows from it: p = 0.05 itself is not significant."""
    check_verdict(verdict_with(p_of=round_p))  # p exactly 0.05 there, significant False


def test_a_blank_verdict_exercise_passes_its_hint_through():
    def blank(a, b):
        raise NotImplementedError("your code here")

    with pytest.raises(NotImplementedError, match="^your code here$"):
        check_verdict(blank)


# ---- Holm's correction ---------------------------------------------------------------------------


def _step_down(p, multiplier=lambda m, rank: m - rank, monotone=True, cap=True, keep_order=True):
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        value = multiplier(m, rank) * p[i]
        value = min(1.0, value) if cap else value
        running = max(running, value) if monotone else value
        adjusted[i] = running
    return adjusted if keep_order else [adjusted[i] for i in order]


def holm_in_numpy(p):
    p = np.asarray(p, dtype=float)
    order = np.argsort(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order]))
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out  # an array, not a list: fine


@pytest.mark.parametrize(
    "right", [holm, holm_in_numpy, lambda p: tuple(_step_down(p)), lambda p: torch.tensor(holm(p))]
)
def test_check_holm_passes_the_reference_and_its_variants(right, capsys):
    check_holm(right)
    assert capsys.readouterr().out.startswith("✓ holm matches")


def test_check_holm_names_each_mistake():
    messages = assert_each_named_as_itself(
        check_holm,
        [
            ("raw", lambda p: list(p), r"these are the p-values unchanged"),
            ("bonferroni", lambda p: [min(1.0, len(p) * x) for x in p], r"that is Bonferroni's correction"),
            ("reversed", lambda p: _step_down(p, multiplier=lambda m, rank: rank + 1), r"the other way round"),
            ("not monotone", lambda p: _step_down(p, monotone=False), r"keep the adjusted p's\s+non-decreasing"),
            ("no cap", lambda p: _step_down(p, cap=False), r"cap each at 1"),
            ("sorted", lambda p: _step_down(p, keep_order=False), r"came back sorted"),
            ("one short", lambda p: holm(p)[:-1], r"expected \d adjusted p-values, one per p given"),
            ("a number", lambda p: min(holm(p)), r"expected a list of \d adjusted p-values, got float"),
            ("off", lambda p: [min(1.0, x * 1.5) for x in holm(p)], r"sort the p's, multiply the i-th smallest"),
        ],
    )
    assert all("(for the p's [" in message for message in messages)
