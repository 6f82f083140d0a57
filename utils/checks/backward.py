"""Lesson 10's exercise checkers: the backward pass written by hand for softmax, attention, LayerNorm,
a pre-norm residual half block, RMSNorm and LayerScale, each compared with torch.autograd on the same
forward. The lesson's exercises use the last two (they ask for a backward the lesson did not show);
the first four check the pieces the lesson derives, for instructors who want them as drills.

Every input is a float64 tensor, so a right answer agrees with autograd to ~1e-15; the tolerance,
1e-10 of the gradient's size, leaves room for any order of the operations and none for a mistake.
"""

import math
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from utils.checks.core import CheckFailed, call_learner, compare, describe, raise_if_not_like, summarize

Grads = tuple[torch.Tensor, ...]

MISTAKE_TOL = dict(mistake_atol=1e-8, mistake_rtol=1e-8)  # a known mistake, written another way, is this close
EPS = 1e-5  # LayerNorm's eps, torch's default


def _atol(expected: torch.Tensor) -> float:
    """1e-10 of the gradient's size (at least 1e-10): float64 rounding is ~1e-16, a mistake far above."""
    return 1e-10 * max(1.0, expected.abs().max().item())


def _random(shape: Sequence[int], generator: torch.Generator, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    """A float64 tensor of `shape`, normal around `shift` with spread `scale`."""
    return shift + scale * torch.randn(tuple(shape), generator=generator, dtype=torch.float64)


def _autograd(forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor], grad_out: torch.Tensor) -> Grads:
    """The reference: the gradient of sum(forward(*inputs) * grad_out) with respect to each input, by autograd."""
    inputs = [t.detach().clone().requires_grad_() for t in inputs]
    return tuple(g.detach() for g in torch.autograd.grad(forward(*inputs), inputs, grad_out))


def _listed(names: Sequence[str]) -> str:
    """'grad_k is', 'grad_q and grad_k are': the subject of a sentence about the outputs in `names`."""
    if len(names) == 1:
        return f"{names[0]} is"
    return f"{', '.join(names[:-1])} and {names[-1]} are"


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a equals b, a known mistake or the reference, up to the mistakes' tolerance."""
    tol = dict(atol=MISTAKE_TOL["mistake_atol"], rtol=MISTAKE_TOL["mistake_rtol"])
    return a.shape == b.shape and torch.allclose(a.detach(), b, **tol)


def _call_for_several(
    fn: Callable,
    args: Sequence,
    names: Sequence[str],
    where: str,
    explain: Callable[[Exception], str | None] | None = None,
) -> Grads:
    """The learner's tuple of len(names) gradients, each checked to be a float64 tensor like the inputs."""
    got = call_learner(
        fn,
        *args,
        returns=lambda result: isinstance(result, tuple | list) and len(result) == len(names),
        expected=f"a tuple of {len(names)} tensors ({', '.join(names)})",
        where=where,
        explain=explain,
    )
    for name, tensor in zip(names, got):
        raise_if_not_like(tensor, args[0], where, name)
    return tuple(t.detach() for t in got)


def _raise_if_known_combination(
    got: Grads, mistakes: Mapping[str, Grads], right: Grads, names: Sequence[str], where: str
) -> None:
    """Raise CheckFailed with the first mistake whose every output the learner's equal, saying which
    outputs it makes wrong ("grad_k is wrong: ...")."""
    for reason, wrong in mistakes.items():
        if all(_close(g, w) for g, w in zip(got, wrong)):
            differ = [name for name, w, r in zip(names, wrong, right) if not _close(w, r)]
            raise CheckFailed(f"{_listed(differ)} wrong: {reason} ({where})")


def _compare_gradient(got, expected: torch.Tensor, where: str, name: str, of: str, rule: str, **options) -> str:
    """compare() for one float64 gradient: shaped like `of`, within _atol of the reference, and the
    rule that computes it as the advice of any failure. `options`: mistakes, hints, ...; returns the verdict."""
    return compare(
        got,
        expected,
        where,
        shape_wording=f"expected {name} of shape {{}}, the shape of {of}",
        atol=_atol(expected),
        name=name,
        advice=f": {rule}",
        **options,
    )


# ---- 1. softmax ------------------------------------------------------------------------------

SOFTMAX_CASES = [  # the shape of probs: (T_rows, T), then (B, heads, T, S)
    (6, 6),  # square: a row sum without keepdim still broadcasts (along the wrong axis)
    (2, 3, 5, 7),
    (1, 4, 3, 9),
]
ROW_SUM = "row_sum = (grad_probs * probs).sum(-1, keepdim=True)"
SOFTMAX_RULE = f"grad_scores = probs * (grad_probs - row_sum), {ROW_SUM}"
KEEPDIM = (
    "the row sum lost its axis: without keepdim=True, grad_probs - row_sum lines each row up with the sums of "
    f"other rows; {ROW_SUM}"
)


def _softmax_backward(probs: torch.Tensor, grad_probs: torch.Tensor) -> torch.Tensor:
    """The right rule, for the mistakes built on it: (..., T) -> (..., T)."""
    return probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))


def _softmax_mistakes(probs: torch.Tensor, grad_probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible dL/dscores, each keyed by the sentence that explains it."""
    row_sum = (grad_probs * probs).sum(-1, keepdim=True)  # (..., T_rows, 1)
    mistakes = {
        "you left out the row-sum term: raising one score lowers every other prob of its row (a row sums to 1), "
        f"so {SOFTMAX_RULE}": probs * grad_probs,
        "the row sum runs over the wrong axis (dim=-2): the probs of a row sum to 1, so the sum runs along the "
        f"row, over the last axis: {ROW_SUM}": probs * (grad_probs - (grad_probs * probs).sum(-2, keepdim=True)),
        f"the row-sum term is not multiplied by probs: probs multiplies the whole bracket, {SOFTMAX_RULE}": grad_probs
        - row_sum,
        "the row-sum term has the wrong sign: subtract it, grad_scores = probs * (grad_probs - row_sum)": probs
        * (grad_probs + row_sum),
        f"the row sum adds up grad_probs alone; weigh each by its prob: {ROW_SUM}": probs
        * (grad_probs - grad_probs.sum(-1, keepdim=True)),
        "you returned grad_probs unchanged, as if softmax were the identity: the gradient passes through "
        f"softmax's Jacobian, {SOFTMAX_RULE}": grad_probs,
        "you kept only the diagonal of softmax's Jacobian, probs * (1 - probs) * grad_probs: every prob of a row "
        f"depends on every score of that row, and the off-diagonal terms -p_i p_j give the row sum: {SOFTMAX_RULE}": (
            probs * (1 - probs) * grad_probs
        ),
        "the diagonal term is missing: the Jacobian diag(probs) - probs probs^T gives probs * grad_probs minus "
        f"the row-sum term, {SOFTMAX_RULE}": -probs * row_sum,
        "only grad_probs is multiplied by probs, the row sum is not: probs multiplies the whole bracket, "
        f"{SOFTMAX_RULE}": probs * grad_probs - row_sum,
        f"your gradient has the opposite sign everywhere (a minus sign too many): {SOFTMAX_RULE}": -_softmax_backward(
            probs, grad_probs
        ),
        f"the row-sum term is averaged (.mean) over the row; it is a sum: {ROW_SUM}": probs
        * (grad_probs - (grad_probs * probs).mean(-1, keepdim=True)),
        f"the row sum runs over the whole tensor (.sum() without dim): each row has its own, {ROW_SUM}": probs
        * (grad_probs - (grad_probs * probs).sum()),
        "you applied softmax to probs again: probs already are softmax(scores), so use them as they come, "
        f"{SOFTMAX_RULE}": _softmax_backward(probs.softmax(-1), grad_probs),
        "that is the backward of log_softmax, grad_probs - probs * grad_probs.sum(-1, keepdim=True); softmax's "
        f"own is {SOFTMAX_RULE}": grad_probs - probs * grad_probs.sum(-1, keepdim=True),
    }
    if probs.shape[-2] == probs.shape[-1] and probs.ndim == 2:  # (T,) broadcasts against (T, T)
        mistakes[KEEPDIM] = probs * (grad_probs - row_sum[..., 0])
    return mistakes


def _explain_broadcast(error: Exception) -> str | None:
    """A broadcast failure in softmax's backward: most likely a row sum without keepdim."""
    return KEEPDIM if "must match the size of tensor" in str(error) else None


def check_softmax_backward(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's softmax_backward(probs, grad_probs) -> grad_scores against torch.autograd.

    probs = softmax(scores, dim=-1) and grad_probs = dL/dprobs are (..., T); the answer dL/dscores is too.
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for shape in SOFTMAX_CASES:
        scores = _random(shape, generator, scale=2.0)
        grad_probs = _random(shape, generator)
        probs = scores.softmax(-1)  # (..., T)
        (expected,) = _autograd(lambda s: s.softmax(-1), [scores], grad_probs)
        where = f"for probs of shape {shape}"
        got = call_learner(fn, probs.clone(), grad_probs.clone(), where=where, explain=_explain_broadcast)
        verdicts.append(
            _compare_gradient(
                got,
                expected,
                where,
                "grad_scores",
                "probs",
                SOFTMAX_RULE,
                any_shape_hint="there is one gradient per score, and the scores have the shape of probs",
                mistakes=_softmax_mistakes(probs, grad_probs),
                **MISTAKE_TOL,
                nan_hint="softmax's backward needs no division or exp: " + SOFTMAX_RULE,
            )
        )
    print(
        f"✓ softmax_backward matches torch.autograd on {len(verdicts)} cases, (T_rows, T) and (B, heads, T, S): "
        f"{summarize(verdicts)}"
    )


# ---- 2. attention ----------------------------------------------------------------------------

ATTENTION_CASES = [  # (B, heads, T, S, head_dim, value dim)
    (1, 2, 6, 6, 4, 3),  # T == S first: a missing transpose, or q and k swapped, still runs and is named
    (2, 3, 5, 7, 8, 4),  # T != S
    (1, 4, 3, 9, 16, 5),
]
ATTENTION_NAMES = ("grad_q", "grad_k", "grad_v")
ATTENTION_RULES = {
    "grad_q": "grad_q = dS @ k * scale, dS the gradient of the scores",
    "grad_k": "grad_k = dS^T @ q * scale, dS the gradient of the scores",
    "grad_v": "grad_v = probs^T @ grad_out",
}
DS_RULE = "dS = probs * (dP - (dP * probs).sum(-1, keepdim=True)), dP = grad_out @ v^T"
PRODUCT_SHAPES = (
    "check each product's shape (per image and head): grad_v = probs^T @ grad_out is (S, dv), "
    "dP = grad_out @ v^T is (T, S), grad_q = dS @ k * scale is (T, d), grad_k = dS^T @ q * scale is (S, d)"
)


def _attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q @ k^T * scale) @ v, scale = 1 / sqrt(d): (B, heads, T, dv)."""
    scale = 1 / math.sqrt(q.shape[-1])
    return (q @ k.transpose(-2, -1) * scale).softmax(-1) @ v


def _attention_mistakes(q, k, v, grad_out, right: Grads) -> dict[str, Grads]:
    """Wrong-but-plausible (grad_q, grad_k, grad_v), each keyed by the sentence that explains it."""
    grad_q, grad_k, grad_v = right
    scale = 1 / math.sqrt(q.shape[-1])
    probs = (q @ k.transpose(-2, -1) * scale).softmax(-1)  # (B, heads, T, S)
    grad_probs = grad_out @ v.transpose(-2, -1)  # dP, (B, heads, T, S)
    no_row_sum = probs * grad_probs  # dS without the row-sum term
    row_sum = (grad_probs * probs).sum(-1, keepdim=True)  # (B, heads, T, 1)

    def through(grad_scores: torch.Tensor) -> Grads:
        """The gradients of q, k and v from a (maybe wrong) dS, the rest right."""
        return grad_scores @ k * scale, grad_scores.transpose(-2, -1) @ q * scale, grad_v

    scores = q @ k.transpose(-2, -1) * scale  # (B, heads, T, S)
    mistakes = {
        "the scale is left out of grad_q and grad_k: the scores are q @ k^T * scale, so the gradients of q and k "
        "both carry it: grad_q = dS @ k * scale, grad_k = dS^T @ q * scale": (grad_q / scale, grad_k / scale, grad_v),
        "the scale is applied twice in grad_q and grad_k; it belongs there once: grad_q = dS @ k * scale, "
        "grad_k = dS^T @ q * scale (if dS already holds it, leave it out of the products)": (
            grad_q * scale,
            grad_k * scale,
            grad_v,
        ),
        "the scale is applied to grad_v as well: it sits on the scores only, grad_v = probs^T @ grad_out": (
            grad_q,
            grad_k,
            grad_v * scale,
        ),
        "the scale is in grad_q but not in grad_k: the scores are q @ k^T * scale, so both carry it, "
        "grad_k = dS^T @ q * scale": (grad_q, grad_k / scale, grad_v),
        "the scale is in grad_k but not in grad_q: the scores are q @ k^T * scale, so both carry it, "
        "grad_q = dS @ k * scale": (grad_q / scale, grad_k, grad_v),
        "the softmax backward lacks its row-sum term: dS = probs * (dP - (dP * probs).sum(-1, keepdim=True)), "
        "not probs * dP": (no_row_sum @ k * scale, no_row_sum.transpose(-2, -1) @ q * scale, grad_v),
        "grad_q and grad_k are swapped: grad_q = dS @ k * scale has q's shape, grad_k = dS^T @ q * scale has k's": (
            grad_k,
            grad_q,
            grad_v,
        ),
        f"the softmax backward is skipped: dP, the gradient of the probs, passes through softmax's backward before "
        f"the products, {DS_RULE}": through(grad_probs),
        f"the row-sum term has the wrong sign in dS: subtract it, {DS_RULE}": through(probs * (grad_probs + row_sum)),
        "dS's row sum runs over the wrong axis (dim=-2): each query's row of probs sums to 1, so the sum runs over "
        f"the keys, the last axis: {DS_RULE}": through(
            probs * (grad_probs - (grad_probs * probs).sum(-2, keepdim=True))
        ),
        f"dS is not multiplied by probs: probs multiplies the whole bracket, {DS_RULE}": through(grad_probs - row_sum),
        "grad_v is built from the scores; it comes from the weights, their softmax: grad_v = probs^T @ grad_out": (
            grad_q,
            grad_k,
            scores.transpose(-2, -1) @ grad_out,
        ),
        "every gradient has the opposite sign (a minus sign too many): grad_q = dS @ k * scale, "
        "grad_k = dS^T @ q * scale, grad_v = probs^T @ grad_out": (-grad_q, -grad_k, -grad_v),
        "grad_q and grad_k are multiplied by sqrt(d); the scale is 1 / sqrt(d): grad_q = dS @ k * scale, "
        "grad_k = dS^T @ q * scale": (grad_q / scale**2, grad_k / scale**2, grad_v),
    }
    if q.shape[-2] == k.shape[-2]:  # T == S: these products run, with the wrong values
        grad_scores = probs * (grad_probs - row_sum)  # dS, (B, heads, T, S)
        mistakes["a missing transpose in grad_k: grad_k = dS^T @ q * scale, not dS @ q * scale"] = (
            grad_q,
            grad_scores @ q * scale,
            grad_v,
        )
        mistakes[
            "grad_v = probs @ grad_out is missing a transpose: value j collects grad_out from every query that "
            "attended to it, grad_v = probs^T @ grad_out"
        ] = (grad_q, grad_k, probs @ grad_out)
        mistakes[
            "grad_q is built from q; the scores are q @ k^T, so q's gradient comes through k: grad_q = dS @ k * scale"
        ] = (
            grad_scores @ q * scale,
            grad_k,
            grad_v,
        )
        mistakes["grad_k is built from k; k's gradient comes through q: grad_k = dS^T @ q * scale"] = (
            grad_q,
            grad_scores.transpose(-2, -1) @ k * scale,
            grad_v,
        )
        mistakes[
            "grad_v multiplies the weights by v; it multiplies them by the gradient that reaches out: "
            "grad_v = probs^T @ grad_out"
        ] = (grad_q, grad_k, probs.transpose(-2, -1) @ v)
    return mistakes


def _explain_products(error: Exception) -> str | None:
    """A matrix product whose shapes do not fit: the shapes each product should have; a broadcast that
    fails: most likely dS's row sum without keepdim."""
    text = str(error)
    if "must match the size of tensor" in text:
        return f"dS's row sum lost its axis? Without keepdim=True it does not line up with the rows: {DS_RULE}"
    return PRODUCT_SHAPES if "cannot be multiplied" in text or "batch2 tensor" in text else None


def check_attention_backward(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]],
) -> None:
    """Check a learner's attention_backward(q, k, v, grad_out) -> (grad_q, grad_k, grad_v) against torch.autograd.

    The forward is out = softmax(q @ k^T * scale, dim=-1) @ v with scale = 1 / sqrt(d); q (B, heads, T, d),
    k (B, heads, S, d), v (B, heads, S, dv), grad_out (B, heads, T, dv). Each gradient has its input's shape.
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, heads, T, S, d, dv in ATTENTION_CASES:
        q, k, v = (_random(shape, generator) for shape in ((B, heads, T, d), (B, heads, S, d), (B, heads, S, dv)))
        q, k = 2 * q, 2 * k  # sharper weights than scale * d ~ 1 gives, so that the row-sum term matters
        grad_out = _random((B, heads, T, dv), generator)
        expected = _autograd(_attention_forward, [q, k, v], grad_out)
        where = f"for q {(B, heads, T, d)}, k {(B, heads, S, d)}, v {(B, heads, S, dv)}"
        args = (q.clone(), k.clone(), v.clone(), grad_out.clone())
        got = _call_for_several(fn, args, ATTENTION_NAMES, where, explain=_explain_products)
        mistakes = _attention_mistakes(q, k, v, grad_out, expected)
        _raise_if_known_combination(got, mistakes, expected, ATTENTION_NAMES, where)
        for name, tensor, right, of in zip(ATTENTION_NAMES, got, expected, "qkv"):
            hint = f"a gradient has the shape of what it is the gradient of, here {of}; " + PRODUCT_SHAPES
            verdicts.append(
                _compare_gradient(tensor, right, where, name, of, ATTENTION_RULES[name], any_shape_hint=hint)
            )
    print(
        f"✓ attention_backward matches torch.autograd on {len(ATTENTION_CASES)} cases (grad_q, grad_k and grad_v; "
        f"T != S, several heads): {summarize(verdicts)}"
    )


# ---- 3. LayerNorm ----------------------------------------------------------------------------

LAYER_NORM_CASES = [(5, 8), (2, 3, 6), (1, 4, 7)]  # the shape of x: (T, D), (B, T, D), then batch 1 and D odd
LAYER_NORM_NAMES = ("grad_x", "grad_weight", "grad_bias")
GRAD_X_RULE = (
    "grad_x = rstd * (g_hat - g_hat.mean(-1, keepdim=True) - x_hat * (g_hat * x_hat).mean(-1, keepdim=True)), "
    "g_hat = grad_out * weight"
)
LAYER_NORM_RULES = {
    "grad_x": GRAD_X_RULE,
    "grad_weight": "grad_weight = (grad_out * x_hat) summed over every axis but the last",
    "grad_bias": "grad_bias = grad_out summed over every axis but the last",
}
NOT_SUMMED = (
    "{name} is not summed over the token (and batch) axes: one weight per feature scales every token, so its "
    "gradient adds up over all of them, {rule}, shape (D,)"
)
AVERAGED = "{name} is averaged over the tokens; sum instead: every token adds its own share, {rule}"
UNBIASED = (
    "you used the unbiased variance (dividing by D - 1, torch.var's default); LayerNorm divides by D: "
    "x.var(-1, keepdim=True, unbiased=False), or ((x - mean) ** 2).mean(-1, keepdim=True)"
)
NO_EPS = "eps is missing: rstd = 1 / sqrt(var + eps), as in the forward"
EPS_OUTSIDE = "eps is added outside the square root: rstd = 1 / sqrt(var + eps), as in the forward"
WEIGHT_BIAS_SWAPPED = "grad_weight and grad_bias are swapped: return (grad_x, grad_weight, grad_bias), in that order"


def _normalised(x: torch.Tensor, eps: float, correction: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """x_hat = (x - mean) * rstd (..., D) and rstd = 1 / sqrt(var + eps) (..., 1)."""
    rstd = (x.var(-1, keepdim=True, correction=correction) + eps).rsqrt()
    return (x - x.mean(-1, keepdim=True)) * rstd, rstd


def _layer_norm_mistakes(x, weight, grad_out) -> dict[str, dict[str, torch.Tensor]]:
    """For each output, its wrong-but-plausible values, each keyed by the sentence that explains it."""
    lead = tuple(range(x.ndim - 1))  # every axis but the last

    def grad_x(x_hat, rstd, g_hat, mean_term=True, variance_term=True, mean_of=None, variance_of=None, reduce="mean"):
        """rstd * (g_hat - mean term - variance term), each term switchable, or taken of another gradient."""
        gather = (lambda t: t.mean(-1, keepdim=True)) if reduce == "mean" else (lambda t: t.sum(-1, keepdim=True))
        grad = g_hat - gather(g_hat if mean_of is None else mean_of) if mean_term else g_hat
        if variance_term:
            grad = grad - x_hat * gather((g_hat if variance_of is None else variance_of) * x_hat)
        return rstd * grad

    x_hat, rstd = _normalised(x, EPS)
    unbiased_hat, unbiased_rstd = _normalised(x, EPS, correction=1)
    no_eps_hat, no_eps_rstd = _normalised(x, 0.0)
    outside_rstd = 1 / (x.var(-1, keepdim=True, correction=0).sqrt() + EPS)  # eps outside the square root
    outside_hat = (x - x.mean(-1, keepdim=True)) * outside_rstd
    g_hat = grad_out * weight  # (..., D)
    right_x = grad_x(x_hat, rstd, g_hat)
    weight_rule, bias_rule = LAYER_NORM_RULES["grad_weight"], LAYER_NORM_RULES["grad_bias"]
    return {
        "grad_x": {
            "the mean term is missing from grad_x: every x_i moves the mean, which every output subtracts, so "
            f"subtract g_hat's mean: {GRAD_X_RULE}": grad_x(x_hat, rstd, g_hat, mean_term=False),
            "the variance term is missing from grad_x: every x_i moves the variance, which every output divides "
            f"by, so subtract x_hat * (g_hat * x_hat).mean(-1, keepdim=True): {GRAD_X_RULE}": grad_x(
                x_hat, rstd, g_hat, variance_term=False
            ),
            "weight is not applied to grad_out in grad_x: the forward multiplies x_hat by weight, so the gradient "
            f"reaching x_hat is g_hat = grad_out * weight: {GRAD_X_RULE}": grad_x(x_hat, rstd, grad_out),
            UNBIASED: grad_x(unbiased_hat, unbiased_rstd, g_hat),
            NO_EPS: grad_x(no_eps_hat, no_eps_rstd, g_hat),
            EPS_OUTSIDE: grad_x(outside_hat, outside_rstd, g_hat),
            "both the mean term and the variance term are missing from grad_x: every x_i moves the mean and the "
            f"variance, which every output uses: {GRAD_X_RULE}": grad_x(
                x_hat, rstd, g_hat, mean_term=False, variance_term=False
            ),
            "rstd is missing from grad_x: the forward divides by sqrt(var + eps), so the gradient is divided by "
            f"it too: {GRAD_X_RULE}": right_x / rstd,
            "grad_x is multiplied by the standard deviation sqrt(var + eps); it is divided by it, rstd = "
            f"1 / sqrt(var + eps): {GRAD_X_RULE}": right_x / rstd**2,
            f"the variance term has the wrong sign: subtract it, {GRAD_X_RULE}": rstd
            * (g_hat - g_hat.mean(-1, keepdim=True) + x_hat * (g_hat * x_hat).mean(-1, keepdim=True)),
            "the mean term averages grad_out; it averages g_hat = grad_out * weight, the gradient that reaches "
            f"x_hat: {GRAD_X_RULE}": grad_x(x_hat, rstd, g_hat, mean_of=grad_out),
            "the variance term uses grad_out; it uses g_hat = grad_out * weight, the gradient that reaches "
            f"x_hat: {GRAD_X_RULE}": grad_x(x_hat, rstd, g_hat, variance_of=grad_out),
            "the mean and variance terms are summed over the features; they are means, .mean(-1, keepdim=True) "
            f"(a sum divided by D): {GRAD_X_RULE}": grad_x(x_hat, rstd, g_hat, reduce="sum"),
            "weight multiplies the whole bracket; it goes in first, g_hat = grad_out * weight, since the means "
            f"mix the features: {GRAD_X_RULE}": weight * grad_x(x_hat, rstd, grad_out),
        },
        "grad_weight": {
            NOT_SUMMED.format(name="grad_weight", rule=weight_rule): grad_out * x_hat,
            AVERAGED.format(name="grad_weight", rule=weight_rule): (grad_out * x_hat).mean(lead),
            UNBIASED: (grad_out * unbiased_hat).sum(lead),
            NO_EPS: (grad_out * no_eps_hat).sum(lead),
            EPS_OUTSIDE: (grad_out * outside_hat).sum(lead),
            "grad_weight multiplies grad_out by x; the weight scales the normalised x_hat = (x - mean) * rstd, "
            f"so {weight_rule}": (grad_out * x).sum(lead),
            "grad_weight multiplies by g_hat = grad_out * weight; the weight's own gradient does not hold the "
            f"weight: {weight_rule}": (g_hat * x_hat).sum(lead),
            WEIGHT_BIAS_SWAPPED: grad_out.sum(lead),
        },
        "grad_bias": {
            NOT_SUMMED.format(name="grad_bias", rule=bias_rule): grad_out,
            AVERAGED.format(name="grad_bias", rule=bias_rule): grad_out.mean(lead),
            "grad_bias multiplies grad_out by weight; the bias is added after the weight, so its gradient is "
            f"{bias_rule}": g_hat.sum(lead),
            WEIGHT_BIAS_SWAPPED: (grad_out * x_hat).sum(lead),
        },
    }


def check_layer_norm_backward(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, ...]],
) -> None:
    """Check a learner's layer_norm_backward(x, weight, grad_out, eps) -> (grad_x, grad_weight, grad_bias)
    against torch.autograd through F.layer_norm.

    The forward is y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (the biased
    variance); x and grad_out are (..., D), weight (D,); grad_weight and grad_bias are (D,).
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for shape in LAYER_NORM_CASES:
        D = shape[-1]
        x = _random(shape, generator, scale=2.0, shift=0.5)  # a mean away from 0
        weight = _random((D,), generator, scale=0.5, shift=1.0)  # not all ones: forgetting it shows
        bias = _random((D,), generator)
        grad_out = _random(shape, generator)
        expected = _autograd(lambda t, w, b: F.layer_norm(t, (D,), w, b, EPS), [x, weight, bias], grad_out)
        where = f"for x of shape {shape}"
        args = (x.clone(), weight.clone(), grad_out.clone(), EPS)
        got = _call_for_several(fn, args, LAYER_NORM_NAMES, where)
        mistakes = _layer_norm_mistakes(x, weight, grad_out)
        for name, tensor, right in zip(LAYER_NORM_NAMES, got, expected):
            of = "x" if name == "grad_x" else "weight: one number per feature"
            verdicts.append(
                _compare_gradient(
                    tensor,
                    right,
                    where,
                    name,
                    of,
                    LAYER_NORM_RULES[name],
                    any_shape_hint=None if name == "grad_x" else LAYER_NORM_RULES[name],
                    mistakes=mistakes[name],
                    **MISTAKE_TOL,
                    nan_hint="rstd = 1 / sqrt(var + eps) is finite as long as eps is inside the square root",
                )
            )
    print(
        f"✓ layer_norm_backward matches torch.autograd on {len(LAYER_NORM_CASES)} cases "
        f"(grad_x, grad_weight and grad_bias): {summarize(verdicts)}"
    )


# ---- 4. a residual half block ----------------------------------------------------------------

RESIDUAL_CASES = [(2, 5, 8), (1, 3, 6), (4, 12)]  # the shape of x: (B, T, D), batch 1, (T, D)
RESIDUAL_RULE = "grad_x = grad_y + norm_vjp(branch_vjp(grad_y))"


def _half_block(D: int, generator: torch.Generator) -> tuple[Callable, Callable]:
    """A pre-norm half block's two pieces in float64: a LayerNorm with a weight and bias away from
    (1, 0), and a small MLP D -> 2D -> D with random weights."""
    norm_weight, norm_bias = _random((D,), generator, 0.5, 1.0), _random((D,), generator, 0.5)
    w1, b1 = _random((D, 2 * D), generator, D**-0.5), _random((2 * D,), generator, 0.5)
    w2, b2 = _random((2 * D, D), generator, (2 * D) ** -0.5), _random((D,), generator, 0.5)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (D,), norm_weight, norm_bias, EPS)

    def branch(h: torch.Tensor) -> torch.Tensor:
        return F.gelu(h @ w1 + b1) @ w2 + b2

    return norm, branch


def _vjp(f: Callable[[torch.Tensor], torch.Tensor], at: torch.Tensor, name: str) -> Callable:
    """g -> the gradient through f at `at` (a vector-Jacobian product): one tensor shaped like `at` in, one out."""
    _, pull = torch.func.vjp(f, at)

    def vjp(g: torch.Tensor) -> torch.Tensor:
        if not isinstance(g, torch.Tensor) or g.shape != at.shape:
            raise ValueError(f"{name} takes one gradient of shape {tuple(at.shape)}, got {describe(g)}")
        return pull(g)[0]

    vjp.__name__ = vjp.__qualname__ = name
    return vjp


def _residual_mistakes(grad_y: torch.Tensor, norm_vjp: Callable, branch_vjp: Callable) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible grad_x, each keyed by the sentence that explains it."""
    through = norm_vjp(branch_vjp(grad_y))  # the branch's path, right
    return {
        "the residual path is missing; the gradient adds: the identity path carries grad_y straight through, so "
        f"{RESIDUAL_RULE}": through,
        "the branch is missing: grad_y reaches x along the identity path and through the branch, and the two add: "
        f"{RESIDUAL_RULE}": grad_y,
        f"backward runs the forward in reverse: the branch's vjp first, then the norm's: {RESIDUAL_RULE}": grad_y
        + branch_vjp(norm_vjp(grad_y)),
        "the LayerNorm is skipped: the branch reads LN(x), so its gradient passes back through the norm too, "
        f"{RESIDUAL_RULE}": grad_y + branch_vjp(grad_y),
        "the identity path goes through the norm too: only the branch reads LN(x); x itself is added "
        f"unchanged, so grad_y comes back as it is: {RESIDUAL_RULE}": norm_vjp(grad_y + branch_vjp(grad_y)),
        "the two paths are multiplied; a sum in the forward (x + f(LN(x))) adds the gradients in the backward: "
        f"{RESIDUAL_RULE}": grad_y * through,
        f"the two paths are subtracted; they add: {RESIDUAL_RULE}": grad_y - through,
        f"the two paths are averaged; they add, each with its full weight: {RESIDUAL_RULE}": (grad_y + through) / 2,
        f"grad_y is counted twice: the identity path carries it once, {RESIDUAL_RULE}": 2 * grad_y + through,
        "the norm's and the branch's vjps are added as if they were two paths; they are chained, since the branch "
        f"reads the norm's output: {RESIDUAL_RULE}": grad_y + norm_vjp(grad_y) + branch_vjp(grad_y),
        "that is the branch's vjp alone: the gradient also passes back through the norm (norm_vjp), and the "
        f"identity path adds grad_y: {RESIDUAL_RULE}": branch_vjp(grad_y),
        "that is the norm's vjp of grad_y alone: the branch's vjp comes first, then the norm's, and the identity "
        f"path adds grad_y: {RESIDUAL_RULE}": norm_vjp(grad_y),
        "the residual path is missing and the vjps run in the forward's order: backward runs the forward in "
        f"reverse, the branch's vjp first, then the norm's; and add grad_y: {RESIDUAL_RULE}": branch_vjp(
            norm_vjp(grad_y)
        ),
    }


def check_residual_backward(fn: Callable[[torch.Tensor, Callable, Callable], torch.Tensor]) -> None:
    """Check a learner's residual_backward(grad_y, norm_vjp, branch_vjp) -> grad_x for y = x + f(LN(x))
    against torch.autograd through the whole half block.

    norm_vjp(g) is the gradient through the LayerNorm at x, branch_vjp(g) through the branch f at LN(x);
    each takes and returns one tensor shaped like x (..., D).
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for shape in RESIDUAL_CASES:
        norm, branch = _half_block(shape[-1], generator)
        x = _random(shape, generator, scale=2.0, shift=0.5)
        grad_y = _random(shape, generator)
        (expected,) = _autograd(lambda t: t + branch(norm(t)), [x], grad_y)
        norm_vjp = _vjp(norm, x, "norm_vjp")
        branch_vjp = _vjp(branch, norm(x), "branch_vjp")
        where = f"for x of shape {shape}"
        got = call_learner(fn, grad_y.clone(), norm_vjp, branch_vjp, returns=object, where=where)
        if isinstance(got, tuple | list) and len(got) > 1 and all(isinstance(t, torch.Tensor) for t in got):
            raise CheckFailed(
                f"expected one tensor, grad_x, got {describe(got)} {where}: the two paths' gradients reach the same "
                f"x, so add them into one, {RESIDUAL_RULE}"
            )
        if not isinstance(got, torch.Tensor):
            raise CheckFailed(f"expected a torch.Tensor, got {describe(got)} {where}")
        verdicts.append(
            _compare_gradient(
                got,
                expected,
                where,
                "grad_x",
                "x (and of grad_y)",
                RESIDUAL_RULE,
                mistakes=_residual_mistakes(grad_y, norm_vjp, branch_vjp),
                **MISTAKE_TOL,
            )
        )
    print(
        f"✓ residual_backward matches torch.autograd through x + mlp(LayerNorm(x)) on {len(RESIDUAL_CASES)} cases: "
        f"{summarize(verdicts)}"
    )


# ---- 5. RMSNorm (a transfer exercise: LayerNorm's derivation without the mean) ------------------

RMS_NORM_CASES = [(5, 8), (2, 3, 6), (1, 4, 7)]  # the shape of x: (T, D), (B, T, D), then batch 1 and D odd
RMS_NORM_NAMES = ("grad_x", "grad_weight")
RMS_GRAD_X_RULE = (
    "grad_x = rrms * (g_hat - x_hat * (g_hat * x_hat).mean(-1, keepdim=True)), g_hat = grad_out * weight, "
    "x_hat = x * rrms"
)
RMS_NORM_RULES = {
    "grad_x": RMS_GRAD_X_RULE,
    "grad_weight": "grad_weight = (grad_out * x_hat) summed over every axis but the last, x_hat = x * rrms",
}
RMS_NO_EPS = "eps is missing: rrms = 1 / sqrt(mean(x ** 2) + eps), as in the forward"
RMS_EPS_OUTSIDE = "eps is added outside the square root: rrms = 1 / sqrt(mean(x ** 2) + eps), as in the forward"
RMS_CENTRED = (
    "you centred x, as LayerNorm does: RMSNorm subtracts no mean, x_hat = x * rrms with "
    "rrms = 1 / sqrt(mean(x ** 2) + eps)"
)


def _rms_normalised(x: torch.Tensor, eps: float, outside: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x_hat = x * rrms (..., D) and rrms = 1 / sqrt(mean(x^2) + eps) (..., 1); eps outside the root if asked."""
    mean_square = x.pow(2).mean(-1, keepdim=True)
    rrms = 1 / (mean_square.sqrt() + eps) if outside else (mean_square + eps).rsqrt()
    return x * rrms, rrms


def _rms_norm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """y = x / sqrt(mean(x^2) + eps) * weight over the last axis: (..., D) -> (..., D)."""
    return _rms_normalised(x, eps)[0] * weight


def _rms_norm_mistakes(x, weight, grad_out) -> dict[str, dict[str, torch.Tensor]]:
    """For each output, its wrong-but-plausible values, each keyed by the sentence that explains it."""
    lead = tuple(range(x.ndim - 1))  # every axis but the last

    def grad_x(x_hat, rrms, g_hat, mean_term=False, scale_term=True, reduce="mean"):
        """rrms * (g_hat [- mean(g_hat)] - x_hat * mean(g_hat * x_hat)), each term switchable."""
        gather = (lambda t: t.mean(-1, keepdim=True)) if reduce == "mean" else (lambda t: t.sum(-1, keepdim=True))
        grad = g_hat - gather(g_hat) if mean_term else g_hat
        if scale_term:
            grad = grad - x_hat * gather(g_hat * x_hat)
        return rrms * grad

    x_hat, rrms = _rms_normalised(x, EPS)
    no_eps_hat, no_eps_rrms = _rms_normalised(x, 0.0)
    outside_hat, outside_rrms = _rms_normalised(x, EPS, outside=True)
    centred_hat, centred_rstd = _normalised(x, EPS)  # LayerNorm's x_hat and 1 / std
    g_hat = grad_out * weight  # (..., D)
    right_x = grad_x(x_hat, rrms, g_hat)
    weight_rule = RMS_NORM_RULES["grad_weight"]
    return {
        "grad_x": {
            "you kept LayerNorm's mean term: RMSNorm subtracts no mean, so no x_i reaches the output through a "
            f"mean, and only the path through the root mean square is left: {RMS_GRAD_X_RULE}": grad_x(
                x_hat, rrms, g_hat, mean_term=True
            ),
            "the term of the root mean square is missing from grad_x: every x_i moves mean(x ** 2), which every "
            f"output is divided by, so subtract x_hat * (g_hat * x_hat).mean(-1, keepdim=True): {RMS_GRAD_X_RULE}": (
                grad_x(x_hat, rrms, g_hat, scale_term=False)
            ),
            "weight is not applied to grad_out in grad_x: the forward multiplies x_hat by weight, so the gradient "
            f"reaching x_hat is g_hat = grad_out * weight: {RMS_GRAD_X_RULE}": grad_x(x_hat, rrms, grad_out),
            RMS_NO_EPS: grad_x(no_eps_hat, no_eps_rrms, g_hat),
            RMS_EPS_OUTSIDE: grad_x(outside_hat, outside_rrms, g_hat),
            RMS_CENTRED: grad_x(centred_hat, centred_rstd, g_hat),
            f"LayerNorm's backward, mean term and centring included: RMSNorm has neither; {RMS_GRAD_X_RULE}": grad_x(
                centred_hat, centred_rstd, g_hat, mean_term=True
            ),
            "rrms is missing from grad_x: the forward divides by the root mean square, so the gradient is divided "
            f"by it too: {RMS_GRAD_X_RULE}": right_x / rrms,
            "the term of the root mean square is summed over the features; it is a mean, .mean(-1, keepdim=True) "
            f"(the D of mean(x ** 2)): {RMS_GRAD_X_RULE}": grad_x(x_hat, rrms, g_hat, reduce="sum"),
            f"the term of the root mean square has the wrong sign: subtract it, {RMS_GRAD_X_RULE}": rrms
            * (g_hat + x_hat * (g_hat * x_hat).mean(-1, keepdim=True)),
            "weight multiplies the whole bracket; it goes in first, g_hat = grad_out * weight, since the mean "
            f"mixes the features: {RMS_GRAD_X_RULE}": weight * grad_x(x_hat, rrms, grad_out),
        },
        "grad_weight": {
            "grad_weight is not summed over the token (and batch) axes: one weight per feature scales every "
            f"token, so its gradient adds up over all of them, {weight_rule}, shape (D,)": grad_out * x_hat,
            f"grad_weight is averaged over the tokens; sum instead: every token adds its own share, {weight_rule}": (
                grad_out * x_hat
            ).mean(lead),
            RMS_NO_EPS: (grad_out * no_eps_hat).sum(lead),
            RMS_EPS_OUTSIDE: (grad_out * outside_hat).sum(lead),
            RMS_CENTRED: (grad_out * centred_hat).sum(lead),
            "grad_weight multiplies grad_out by x; the weight scales the normalised x_hat = x * rrms, "
            f"so {weight_rule}": (grad_out * x).sum(lead),
            "grad_weight multiplies by g_hat = grad_out * weight; the weight's own gradient does not hold the "
            f"weight: {weight_rule}": (g_hat * x_hat).sum(lead),
            "grad_weight sums grad_out alone, as a bias's gradient would; the weight multiplies x_hat, so "
            f"{weight_rule}": grad_out.sum(lead),
        },
    }


def check_rms_norm_backward(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], tuple[torch.Tensor, ...]],
) -> None:
    """Check a learner's rms_norm_backward(x, weight, grad_out, eps) -> (grad_x, grad_weight) against
    torch.autograd through RMSNorm's forward, y = x / sqrt(mean(x^2) + eps) * weight over the last axis.

    x and grad_out are (..., D), weight (D,); grad_x is (..., D), grad_weight (D,).
    """
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for shape in RMS_NORM_CASES:
        D = shape[-1]
        x = _random(shape, generator, scale=2.0, shift=0.5)  # a mean away from 0: centring x shows
        weight = _random((D,), generator, scale=0.5, shift=1.0)  # not all ones: forgetting it shows
        grad_out = _random(shape, generator)
        expected = _autograd(lambda t, w: _rms_norm_forward(t, w, EPS), [x, weight], grad_out)
        where = f"for x of shape {shape}"
        args = (x.clone(), weight.clone(), grad_out.clone(), EPS)
        got = _call_for_several(fn, args, RMS_NORM_NAMES, where)
        mistakes = _rms_norm_mistakes(x, weight, grad_out)
        for name, tensor, right in zip(RMS_NORM_NAMES, got, expected):
            of = "x" if name == "grad_x" else "weight: one number per feature"
            verdicts.append(
                _compare_gradient(
                    tensor,
                    right,
                    where,
                    name,
                    of,
                    RMS_NORM_RULES[name],
                    any_shape_hint=None if name == "grad_x" else RMS_NORM_RULES[name],
                    mistakes=mistakes[name],
                    **MISTAKE_TOL,
                    nan_hint="rrms = 1 / sqrt(mean(x ** 2) + eps) is finite as long as eps is inside the square root",
                )
            )
    print(
        f"✓ rms_norm_backward matches torch.autograd on {len(RMS_NORM_CASES)} cases (grad_x and grad_weight): "
        f"{summarize(verdicts)}"
    )


# ---- 6. LayerScale in a residual half block (a transfer exercise: a per-channel gain) ------------

LAYER_SCALE_CASES = [(2, 5, 8), (1, 3, 6), (4, 12)]  # the shape of x: (B, T, D), batch 1, (T, D)
LAYER_SCALE_NAMES = ("grad_x", "grad_gamma")
LAYER_SCALE_RULES = {
    "grad_x": "grad_x = grad_y + norm_vjp(branch_vjp(gamma * grad_y))",
    "grad_gamma": "grad_gamma = (grad_y * branch_out) summed over every axis but the last",
}
SCALE_X_RULE, SCALE_GAMMA_RULE = LAYER_SCALE_RULES["grad_x"], LAYER_SCALE_RULES["grad_gamma"]


def _layer_scale_mistakes(grad_y, gamma, branch_out, norm_vjp, branch_vjp) -> dict[str, dict[str, torch.Tensor]]:
    """For each output, its wrong-but-plausible values, each keyed by the sentence that explains it."""
    lead = tuple(range(grad_y.ndim - 1))  # every axis but the last
    through = norm_vjp(branch_vjp(gamma * grad_y))  # the branch's path, right
    return {
        "grad_x": {
            "gamma is left out of the branch's path: the branch's output is multiplied by gamma, so the gradient "
            f"that reaches it is gamma * grad_y: {SCALE_X_RULE}": grad_y + norm_vjp(branch_vjp(grad_y)),
            "gamma scales the identity path too: only the branch is multiplied by gamma, x is added unchanged, "
            f"so grad_y comes back as it is: {SCALE_X_RULE}": gamma * grad_y + through,
            "gamma is applied after the vjps; it is the last thing the forward does to the branch, so the backward "
            "applies it first (the vjps mix the channels, so the order matters): "
            f"{SCALE_X_RULE}": grad_y + gamma * norm_vjp(branch_vjp(grad_y)),
            f"the residual path is missing; the gradient adds: the identity path carries grad_y, {SCALE_X_RULE}": (
                through
            ),
            "the branch is missing: grad_y reaches x along the identity path and through the scaled branch, and the "
            f"two add: {SCALE_X_RULE}": grad_y,
            f"backward runs the forward in reverse: the branch's vjp first, then the norm's: {SCALE_X_RULE}": grad_y
            + branch_vjp(norm_vjp(gamma * grad_y)),
            "grad_x is divided by gamma; the forward multiplies the branch by gamma, so the backward multiplies "
            f"too: {SCALE_X_RULE}": grad_y + norm_vjp(branch_vjp(grad_y / gamma)),
        },
        "grad_gamma": {
            "grad_gamma is not summed over the batch and token axes: one gamma per channel scales every token of "
            f"every image, so its gradient adds up over all of them, {SCALE_GAMMA_RULE}, shape (D,)": (
                grad_y * branch_out
            ),
            "grad_gamma is averaged over the tokens; sum instead: every token adds its own share, "
            f"{SCALE_GAMMA_RULE}": (grad_y * branch_out).mean(lead),
            "grad_gamma sums grad_y alone, as a bias's gradient would; gamma multiplies the branch's output, so "
            f"{SCALE_GAMMA_RULE}": grad_y.sum(lead),
            f"grad_gamma holds gamma; the gradient of gamma * b with respect to gamma is b alone: {SCALE_GAMMA_RULE}": (
                gamma * grad_y * branch_out
            ).sum(lead),
            "grad_gamma sums over the channels: there is one gamma per channel, so the sum runs over every "
            f"other axis, {SCALE_GAMMA_RULE}, shape (D,)": (grad_y * branch_out).sum(-1),
        },
    }


def check_layer_scale_backward(fn: Callable[..., tuple[torch.Tensor, ...]]) -> None:
    """Check a learner's layer_scale_backward(grad_y, gamma, branch_out, norm_vjp, branch_vjp) ->
    (grad_x, grad_gamma) for y = x + gamma * f(LN(x)) against torch.autograd through the half block.

    grad_y and branch_out = f(LN(x)) are (..., D), gamma (D,); norm_vjp(g) is the gradient through the
    LayerNorm at x, branch_vjp(g) through f at LN(x), each one tensor shaped like x in and out.
    """
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for shape in LAYER_SCALE_CASES:
        D = shape[-1]
        norm, branch = _half_block(D, generator)
        x = _random(shape, generator, scale=2.0, shift=0.5)
        gamma = _random((D,), generator, scale=0.3, shift=0.5)  # one gain per channel, all different
        grad_y = _random(shape, generator)
        expected = _autograd(lambda t, g: t + g * branch(norm(t)), [x, gamma], grad_y)
        branch_out = branch(norm(x))  # (..., D)
        norm_vjp = _vjp(norm, x, "norm_vjp")
        branch_vjp = _vjp(branch, norm(x), "branch_vjp")
        where = f"for x of shape {shape}"
        args = (grad_y.clone(), gamma.clone(), branch_out.clone(), norm_vjp, branch_vjp)
        got = _call_for_several(fn, args, LAYER_SCALE_NAMES, where)
        mistakes = _layer_scale_mistakes(grad_y, gamma, branch_out, norm_vjp, branch_vjp)
        for name, tensor, right in zip(LAYER_SCALE_NAMES, got, expected):
            of = "x" if name == "grad_x" else "gamma: one number per channel"
            verdicts.append(
                _compare_gradient(
                    tensor,
                    right,
                    where,
                    name,
                    of,
                    LAYER_SCALE_RULES[name],
                    any_shape_hint=None if name == "grad_x" else SCALE_GAMMA_RULE,
                    mistakes=mistakes[name],
                    **MISTAKE_TOL,
                )
            )
    print(
        f"✓ layer_scale_backward matches torch.autograd through x + gamma * mlp(LayerNorm(x)) on "
        f"{len(LAYER_SCALE_CASES)} cases (grad_x and grad_gamma): {summarize(verdicts)}"
    )
