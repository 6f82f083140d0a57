"""Lesson 10's checkers pass the hand-written backward passes, name each typical mistake in words, and
turn whatever else comes back into a failure that says what came."""

import math

import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils.checks.backward import (
    check_attention_backward,
    check_layer_norm_backward,
    check_layer_scale_backward,
    check_residual_backward,
    check_rms_norm_backward,
    check_softmax_backward,
)
from utils.checks.core import CheckFailed


def blank(*args):
    raise NotImplementedError("Hint: start from the forward")


# ---- 1. softmax ------------------------------------------------------------------------------


def softmax_backward(probs, grad_probs):
    return probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))


def by_the_jacobian(probs, grad_probs):
    """The same, through the full Jacobian diag(p) - p p^T of each row."""
    jacobian = torch.diag_embed(probs) - probs[..., :, None] * probs[..., None, :]  # (..., T, T)
    return (jacobian @ grad_probs[..., None])[..., 0]


SOFTMAX_MISTAKES = [
    ("no row sum", lambda p, g: p * g, "^you left out the row-sum term"),
    ("wrong axis", lambda p, g: p * (g - (g * p).sum(-2, keepdim=True)), r"^the row sum runs over the wrong axis"),
    ("not times probs", lambda p, g: g - (g * p).sum(-1, keepdim=True), "^the row-sum term is not multiplied by probs"),
    ("sign", lambda p, g: p * (g + (g * p).sum(-1, keepdim=True)), "^the row-sum term has the wrong sign"),
    ("unweighted", lambda p, g: p * (g - g.sum(-1, keepdim=True)), "^the row sum adds up grad_probs alone"),
    ("identity", lambda p, g: g, "^you returned grad_probs unchanged, as if softmax were the identity"),
    ("keepdim", lambda p, g: p * (g - (g * p).sum(-1)), r"^the row sum lost its axis: without keepdim=True"),
    ("diagonal only", lambda p, g: p * (1 - p) * g, r"^you kept only the diagonal of softmax's Jacobian"),
    ("no diagonal term", lambda p, g: -p * (g * p).sum(-1, keepdim=True), "^the diagonal term is missing"),
    ("row sum not times probs", lambda p, g: p * g - (g * p).sum(-1, keepdim=True), "^only grad_probs is multiplied"),
    ("sign of everything", lambda p, g: -softmax_backward(p, g), "^your gradient has the opposite sign everywhere"),
    ("row mean", lambda p, g: p * (g - (g * p).mean(-1, keepdim=True)), r"^the row-sum term is averaged \(.mean\)"),
    ("sum of all", lambda p, g: p * (g - (g * p).sum()), r"^the row sum runs over the whole tensor \(.sum\(\) without"),
    ("softmax again", lambda p, g: softmax_backward(p.softmax(-1), g), "^you applied softmax to probs again"),
    ("log_softmax's", lambda p, g: g - p * g.sum(-1, keepdim=True), "^that is the backward of log_softmax"),
]


def test_check_softmax_backward_passes_the_reference(capsys):
    check_softmax_backward(softmax_backward)
    check_softmax_backward(by_the_jacobian)
    check_softmax_backward(lambda p, g: p * g - p * (p * g).sum(-1, keepdim=True))  # multiplied out
    out = capsys.readouterr().out
    assert out.count("✓ softmax_backward matches torch.autograd on 3 cases, (T_rows, T) and (B, heads, T, S): ") == 3


def test_no_softmax_mistake_is_named_as_another():
    assert_each_named_as_itself(check_softmax_backward, SOFTMAX_MISTAKES)


def test_a_row_sum_without_keepdim_is_named_where_it_cannot_broadcast():
    """The first case is square, where the missing keepdim still runs; on the others it crashes."""
    from utils.checks import backward

    cases = backward.SOFTMAX_CASES
    try:
        backward.SOFTMAX_CASES = cases[1:]
        with pytest.raises(CheckFailed, match=r"^your function raised RuntimeError .*\(the row sum lost its axis"):
            check_softmax_backward(lambda p, g: p * (g - (g * p).sum(-1)))
    finally:
        backward.SOFTMAX_CASES = cases


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda p, g: None, r"^expected a torch.Tensor, got None .* for probs of shape \(6, 6\)"),
        (lambda p, g: softmax_backward(p, g)[..., :-1], r"^expected grad_scores of shape \(6, 6\), .*got \(6, 5\)"),
        (lambda p, g: softmax_backward(p, g).float(), r"^grad_scores: expected a float64 tensor, got float32"),
        (lambda p, g: softmax_backward(p, g) / 0 * 0, r"^grad_scores: 36 of 36 values are NaN for probs of"),
        (lambda p, g: softmax_backward(p, g) + math.inf, r"values are infinite"),
        (lambda p, g: softmax_backward(p, g) * 1.001, r"^grad_scores: values differ from the reference"),
        (lambda p, g: (softmax_backward(p, g),), r"^expected a torch.Tensor, got tuple of 1 \(Tensor\)"),
        (lambda p, g: p.sum(dim=5), r"^your function raised IndexError"),
    ],
)
def test_check_softmax_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_softmax_backward(wrong)


# ---- 2. attention ----------------------------------------------------------------------------


def attention_with(
    *,
    grad_k_transposed=True,
    grad_v_transposed=True,
    scales=(1, 1, 0),
    row_sum=True,
    swap=False,
    softmax_backward=True,
    row_sign=-1,
    row_axis=-1,
    times_probs=True,
    grad_v_from="probs",
    sign=1,
    q_from="k",
    k_from="q",
):
    """attention_backward as a learner writes it, with switches for the typical mistakes; scales: the
    power of the scale that grad_q, grad_k and grad_v carry; grad_v_from: "probs", "scores" (softmax's
    input) or "v" (probs^T @ v); q_from, k_from: the tensor grad_q and grad_k multiply dS by."""

    def attention_backward(q, k, v, grad_out):
        scale = q.shape[-1] ** -0.5
        scores = q @ k.transpose(-2, -1) * scale  # (B, heads, T, S)
        probs = scores.softmax(-1)  # (B, heads, T, S)
        weights = {"probs": probs, "scores": scores, "v": probs}[grad_v_from]
        by = v if grad_v_from == "v" else grad_out
        grad_v = (weights.transpose(-2, -1) if grad_v_transposed else weights) @ by * scale ** scales[2]
        grad_probs = grad_out @ v.transpose(-2, -1)  # (B, heads, T, S)
        row = (grad_probs * probs).sum(row_axis, keepdim=True) if row_sum else 0
        grad_scores = (probs if times_probs else 1) * (grad_probs + row_sign * row)
        grad_scores = grad_scores if softmax_backward else grad_probs
        grad_q = grad_scores @ {"k": k, "q": q}[q_from] * scale ** scales[0]
        by_k = {"k": k, "q": q}[k_from]
        grad_k = (grad_scores.transpose(-2, -1) if grad_k_transposed else grad_scores) @ by_k * scale ** scales[1]
        grads = (grad_k, grad_q, grad_v) if swap else (grad_q, grad_k, grad_v)
        return tuple(sign * g for g in grads)

    return attention_backward


attention_backward = attention_with()


def by_einsum(q, k, v, grad_out):
    """The same with einsum, the scale folded into q first."""
    q = q / math.sqrt(q.shape[-1])
    probs = torch.einsum("bhtd,bhsd->bhts", q, k).softmax(-1)
    grad_v = torch.einsum("bhts,bhte->bhse", probs, grad_out)
    grad_probs = torch.einsum("bhte,bhse->bhts", grad_out, v)
    grad_scores = probs * grad_probs - probs * (probs * grad_probs).sum(-1, keepdim=True)
    grad_q = torch.einsum("bhts,bhsd->bhtd", grad_scores, k) / math.sqrt(q.shape[-1])
    grad_k = torch.einsum("bhts,bhtd->bhsd", grad_scores, q)
    return [grad_q, grad_k, grad_v]  # a list is fine too


ATTENTION_MISTAKES = [
    (
        "missing transpose",
        attention_with(grad_k_transposed=False),
        r"^grad_k is wrong: a missing transpose in grad_k: grad_k = dS\^T @ q \* scale",
    ),
    (
        "grad_v",
        attention_with(grad_v_transposed=False),
        r"^grad_v is wrong: grad_v = probs @ grad_out is missing a transpose",
    ),
    ("no scale", attention_with(scales=(0, 0, 0)), "^grad_q and grad_k are wrong: the scale is left out of grad_q and"),
    ("scale twice", attention_with(scales=(2, 2, 0)), "^grad_q and grad_k are wrong: the scale is applied twice"),
    ("scale on v", attention_with(scales=(1, 1, 1)), "^grad_v is wrong: the scale is applied to grad_v as well"),
    ("scale in q only", attention_with(scales=(1, 0, 0)), "^grad_k is wrong: the scale is in grad_q but not in grad_k"),
    ("scale in k only", attention_with(scales=(0, 1, 0)), "^grad_q is wrong: the scale is in grad_k but not in grad_q"),
    (
        "no row sum",
        attention_with(row_sum=False),
        "^grad_q and grad_k are wrong: the softmax backward lacks its row-sum term",
    ),
    ("swapped", attention_with(swap=True), "^grad_q and grad_k are wrong: grad_q and grad_k are swapped"),
    (
        "dP as dS",
        attention_with(softmax_backward=False),
        "^grad_q and grad_k are wrong: the softmax backward is skipped",
    ),
    ("row-sum sign", attention_with(row_sign=1), "^grad_q and grad_k are wrong: the row-sum term has the wrong sign"),
    (
        "row sum over keys",
        attention_with(row_axis=-2),
        r"^grad_q and grad_k are wrong: dS's row sum runs over the wrong",
    ),
    ("dS not times probs", attention_with(times_probs=False), "^grad_q and grad_k are wrong: dS is not multiplied by"),
    ("grad_v from scores", attention_with(grad_v_from="scores"), "^grad_v is wrong: grad_v is built from the scores"),
    ("grad_v from v", attention_with(grad_v_from="v"), "^grad_v is wrong: grad_v multiplies the weights by v"),
    ("every sign", attention_with(sign=-1), "^grad_q, grad_k and grad_v are wrong: every gradient has the opposite"),
    ("times sqrt(d)", attention_with(scales=(-1, -1, 0)), r"^grad_q and grad_k are wrong: .* multiplied by sqrt\(d\)"),
    ("grad_q from q", attention_with(q_from="q"), "^grad_q is wrong: grad_q is built from q"),
    ("grad_k from k", attention_with(k_from="k"), "^grad_k is wrong: grad_k is built from k"),
]


def test_check_attention_backward_passes_the_reference(capsys):
    check_attention_backward(attention_backward)
    check_attention_backward(by_einsum)
    out = capsys.readouterr().out
    assert out.count("✓ attention_backward matches torch.autograd on 3 cases (grad_q, grad_k and grad_v; ") == 2


def test_no_attention_mistake_is_named_as_another():
    assert_each_named_as_itself(check_attention_backward, ATTENTION_MISTAKES)


def test_q_and_k_swapped_are_named_where_their_shapes_differ():
    """With T != S the swapped gradients have each other's shapes; they are still named."""
    from utils.checks import backward

    cases = backward.ATTENTION_CASES
    try:
        backward.ATTENTION_CASES = cases[1:]
        with pytest.raises(CheckFailed, match=r"^grad_q and grad_k are wrong: grad_q and grad_k are swapped"):
            check_attention_backward(attention_with(swap=True))
    finally:
        backward.ATTENTION_CASES = cases


def _replace(index, value):
    """attention_backward with output `index` replaced by value(q, k, v, grads)."""

    def wrong(q, k, v, grad_out):
        grads = list(attention_backward(q, k, v, grad_out))
        grads[index] = value(q, k, v, grads)
        return tuple(grads)

    return wrong


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda *args: attention_backward(*args)[:2],
            r"^expected a tuple of 3 tensors \(grad_q, grad_k, grad_v\), got tuple of 2",
        ),
        (lambda *args: attention_backward(*args)[0], r"^expected a tuple of 3 tensors .*, got Tensor of dtype float64"),
        (lambda *args: None, r"^expected a tuple of 3 tensors .*, got None"),
        (_replace(1, lambda q, k, v, g: None), r"^grad_k: expected a torch.Tensor, got None"),
        (_replace(2, lambda q, k, v, g: g[2].float()), r"^grad_v: expected a float64 tensor, got float32"),
        (
            _replace(0, lambda q, k, v, g: g[0][..., :-1]),
            r"^expected grad_q of shape \(1, 2, 6, 4\), the shape of q, got",
        ),
        (_replace(1, lambda q, k, v, g: g[1] / 0 * 0), r"^grad_k: 48 of 48 values are NaN for q \(1, 2, 6, 4\)"),
        (_replace(1, lambda q, k, v, g: g[1] * 1.001), r"^grad_k: values differ .*: grad_k = dS\^T @ q \* scale"),
        (lambda q, k, v, g: (g @ v, q, k), r"^your function raised RuntimeError .*\(check each product's shape"),
    ],
)
def test_check_attention_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_backward(wrong)


# ---- 3. LayerNorm ----------------------------------------------------------------------------


def layer_norm_with(
    *,
    mean_term=True,
    variance_term=True,
    weighted=True,
    reduce="sum",
    unbiased=False,
    eps_used=True,
    eps_inside=True,
    rstd_power=1,
    variance_sign=-1,
    terms_of="g_hat",
    terms_by="mean",
    weight_last=False,
    weight_of="x_hat",
    bias_of="grad_out",
    swap=False,
):
    """layer_norm_backward as a learner writes it, with switches for the typical mistakes; reduce:
    how grad_weight and grad_bias gather the tokens ("sum", "mean" or "none"); rstd_power: the power
    of rstd in grad_x; terms_of: what the mean and variance terms are taken of ("g_hat", "grad_out",
    "mean:grad_out" or "variance:grad_out" for one of them); terms_by: "mean" or "sum" over the
    features; weight_last: weight applied after the bracket; weight_of: what grad_weight multiplies
    grad_out by ("x_hat", "x", or "g_hat" for g_hat * x_hat); bias_of: "grad_out" or "g_hat"."""

    def layer_norm_backward(x, weight, grad_out, eps):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=unbiased)
        eps = eps if eps_used else 0
        rstd = 1 / torch.sqrt(var + eps) if eps_inside else 1 / (torch.sqrt(var) + eps)
        x_hat = (x - mean) * rstd
        g_hat = grad_out * weight if weighted and not weight_last else grad_out
        of_mean = grad_out if terms_of in ("grad_out", "mean:grad_out") else g_hat
        of_variance = grad_out if terms_of in ("grad_out", "variance:grad_out") else g_hat
        gather = (lambda t: t.mean(-1, keepdim=True)) if terms_by == "mean" else (lambda t: t.sum(-1, keepdim=True))
        grad = g_hat
        if mean_term:
            grad = grad - gather(of_mean)
        if variance_term:
            grad = grad + variance_sign * x_hat * gather(of_variance * x_hat)
        grad_x = rstd**rstd_power * grad * (weight if weight_last else 1)
        lead = tuple(range(x.ndim - 1))
        gather = {"sum": lambda t: t.sum(lead), "mean": lambda t: t.mean(lead), "none": lambda t: t}[reduce]
        times = {"x_hat": x_hat, "x": x, "g_hat": x_hat * weight}[weight_of]
        grad_weight = gather(grad_out * times)
        grad_bias = gather(grad_out * (weight if bias_of == "g_hat" else 1))
        return (grad_x, grad_bias, grad_weight) if swap else (grad_x, grad_weight, grad_bias)

    return layer_norm_backward


layer_norm_backward = layer_norm_with()


def by_rows(x, weight, grad_out, eps):
    """The same on the rows of x flattened to (N, D), with sums over D written out."""
    D = x.shape[-1]
    rows, grad_rows = x.reshape(-1, D), grad_out.reshape(-1, D)  # (N, D)
    centred = rows - rows.sum(1, keepdim=True) / D
    rstd = ((centred**2).sum(1, keepdim=True) / D + eps) ** -0.5
    x_hat = centred * rstd
    g_hat = grad_rows * weight
    grad_x = rstd / D * (D * g_hat - g_hat.sum(1, keepdim=True) - x_hat * (g_hat * x_hat).sum(1, keepdim=True))
    return grad_x.reshape(x.shape), (grad_rows * x_hat).sum(0), grad_rows.sum(0)


LAYER_NORM_MISTAKES = [
    ("no mean term", layer_norm_with(mean_term=False), "^the mean term is missing from grad_x"),
    ("no variance term", layer_norm_with(variance_term=False), "^the variance term is missing from grad_x"),
    ("no weight", layer_norm_with(weighted=False), "^weight is not applied to grad_out in grad_x"),
    ("not summed", layer_norm_with(reduce="none"), r"^grad_weight is not summed over the token \(and batch\) axes"),
    ("averaged", layer_norm_with(reduce="mean"), "^grad_weight is averaged over the tokens; sum instead"),
    ("unbiased", layer_norm_with(unbiased=True), r"^you used the unbiased variance \(dividing by D - 1"),
    ("no eps", layer_norm_with(eps_used=False), r"^eps is missing: rstd = 1 / sqrt\(var \+ eps\)"),
    ("eps outside", layer_norm_with(eps_inside=False), "^eps is added outside the square root"),
    ("no terms", layer_norm_with(mean_term=False, variance_term=False), "^both the mean term and the variance term"),
    ("no rstd", layer_norm_with(rstd_power=0), "^rstd is missing from grad_x"),
    ("times std", layer_norm_with(rstd_power=-1), "^grad_x is multiplied by the standard deviation"),
    ("variance sign", layer_norm_with(variance_sign=1), "^the variance term has the wrong sign"),
    ("mean of grad_out", layer_norm_with(terms_of="mean:grad_out"), "^the mean term averages grad_out"),
    ("variance of grad_out", layer_norm_with(terms_of="variance:grad_out"), "^the variance term uses grad_out"),
    ("terms summed", layer_norm_with(terms_by="sum"), "^the mean and variance terms are summed over the features"),
    ("weight last", layer_norm_with(weight_last=True), "^weight multiplies the whole bracket"),
    ("weight by x", layer_norm_with(weight_of="x"), "^grad_weight multiplies grad_out by x;"),
    ("weight by g_hat", layer_norm_with(weight_of="g_hat"), r"^grad_weight multiplies by g_hat = grad_out \* weight"),
    ("bias by g_hat", layer_norm_with(bias_of="g_hat"), "^grad_bias multiplies grad_out by weight"),
    ("swapped", layer_norm_with(swap=True), "^grad_weight and grad_bias are swapped"),
]


def test_check_layer_norm_backward_passes_the_reference(capsys):
    check_layer_norm_backward(layer_norm_backward)
    check_layer_norm_backward(by_rows)
    out = capsys.readouterr().out
    assert (
        out.count("✓ layer_norm_backward matches torch.autograd on 3 cases (grad_x, grad_weight and grad_bias): ") == 2
    )


def test_no_layer_norm_mistake_is_named_as_another():
    assert_each_named_as_itself(check_layer_norm_backward, LAYER_NORM_MISTAKES)


def test_grad_bias_alone_not_summed_or_averaged_is_named():
    def bias_not_summed(x, weight, grad_out, eps):
        grad_x, grad_weight, _ = layer_norm_backward(x, weight, grad_out, eps)
        return grad_x, grad_weight, grad_out

    def bias_averaged(x, weight, grad_out, eps):
        grad_x, grad_weight, _ = layer_norm_backward(x, weight, grad_out, eps)
        return grad_x, grad_weight, grad_out.mean(tuple(range(x.ndim - 1)))

    with pytest.raises(CheckFailed, match=r"^grad_bias is not summed over the token \(and batch\) axes"):
        check_layer_norm_backward(bias_not_summed)
    with pytest.raises(CheckFailed, match="^grad_bias is averaged over the tokens"):
        check_layer_norm_backward(bias_averaged)


def _ln_replace(index, value):
    """layer_norm_backward with output `index` replaced by value(x, grads)."""

    def wrong(x, weight, grad_out, eps):
        grads = list(layer_norm_backward(x, weight, grad_out, eps))
        grads[index] = value(x, grads)
        return tuple(grads)

    return wrong


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda *args: layer_norm_backward(*args)[0],
            r"^expected a tuple of 3 tensors \(grad_x, grad_weight, grad_bias\)",
        ),
        (lambda *args: layer_norm_backward(*args)[:2], r"^expected a tuple of 3 tensors .*, got tuple of 2"),
        (_ln_replace(1, lambda x, g: None), r"^grad_weight: expected a torch.Tensor, got None"),
        (_ln_replace(0, lambda x, g: g[0].float()), r"^grad_x: expected a float64 tensor, got float32 for x"),
        (_ln_replace(0, lambda x, g: g[0] / 0 * 0), r"^grad_x: 40 of 40 values are NaN for x of shape \(5, 8\)"),
        (_ln_replace(0, lambda x, g: g[0] * 1.001), r"^grad_x: values differ from the reference: .*: grad_x = rstd"),
        (
            _ln_replace(2, lambda x, g: g[2][None]),
            r"^expected grad_bias of shape \(8,\), the shape of weight.*got \(1, 8\)",
        ),
        (_ln_replace(1, lambda x, g: g[1][:-1]), r"^expected grad_weight of shape \(8,\).*: grad_weight = \(grad_out"),
        (_ln_replace(2, lambda x, g: g[2] + 0.1), r"^grad_bias: values differ .*: grad_bias = grad_out summed"),
    ],
)
def test_check_layer_norm_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_layer_norm_backward(wrong)


def test_grad_weight_summed_over_the_batch_only_is_named_by_its_shape():
    def batch_only(x, weight, grad_out, eps):
        grad_x, _, grad_bias = layer_norm_backward(x, weight, grad_out, eps)
        mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        return grad_x, (grad_out * (x - mean) / torch.sqrt(var + eps)).sum(0), grad_bias

    with pytest.raises(
        CheckFailed,
        match=r"^expected grad_weight of shape \(6,\), .*got \(3, 6\) .*: grad_weight = \(grad_out \* x_hat\) summed",
    ):
        check_layer_norm_backward(batch_only)


# ---- 4. a residual half block ----------------------------------------------------------------


def residual_backward(grad_y, norm_vjp, branch_vjp):
    return grad_y + norm_vjp(branch_vjp(grad_y))


RESIDUAL_MISTAKES = [
    (
        "no residual",
        lambda g, norm_vjp, branch_vjp: norm_vjp(branch_vjp(g)),
        "^the residual path is missing; the gradient adds: the identity path carries grad_y straight through",
    ),
    ("no branch", lambda g, norm_vjp, branch_vjp: g, "^the branch is missing"),
    (
        "order",
        lambda g, norm_vjp, branch_vjp: g + branch_vjp(norm_vjp(g)),
        "^backward runs the forward in reverse: the branch's vjp first, then the norm's",
    ),
    ("no norm", lambda g, norm_vjp, branch_vjp: g + branch_vjp(g), "^the LayerNorm is skipped"),
    ("identity through the norm", lambda g, n, b: n(g + b(g)), "^the identity path goes through the norm too"),
    ("the norm on each path", lambda g, n, b: n(g) + n(b(g)), "^the identity path goes through the norm too"),
    ("multiplied", lambda g, n, b: g * n(b(g)), "^the two paths are multiplied"),
    ("subtracted", lambda g, n, b: g - n(b(g)), "^the two paths are subtracted"),
    ("averaged", lambda g, n, b: (g + n(b(g))) / 2, "^the two paths are averaged"),
    ("grad_y twice", lambda g, n, b: 2 * g + n(b(g)), "^grad_y is counted twice"),
    ("vjps added", lambda g, n, b: g + n(g) + b(g), "^the norm's and the branch's vjps are added as if"),
    ("the branch's vjp alone", lambda g, n, b: b(g), "^that is the branch's vjp alone"),
    ("the norm's vjp alone", lambda g, n, b: n(g), "^that is the norm's vjp of grad_y alone"),
    ("forward order, no residual", lambda g, n, b: b(n(g)), "^the residual path is missing and the vjps run in the"),
    ("the two paths apart", lambda g, n, b: (g, n(b(g))), r"^expected one tensor, grad_x, got tuple of 2 .*add them"),
]


def test_check_residual_backward_passes_the_reference(capsys):
    check_residual_backward(residual_backward)
    check_residual_backward(lambda g, norm_vjp, branch_vjp: norm_vjp(branch_vjp(g)).add_(g))
    out = capsys.readouterr().out
    assert out.count("✓ residual_backward matches torch.autograd through x + mlp(LayerNorm(x)) on 3 cases: ") == 2


def test_no_residual_mistake_is_named_as_another():
    assert_each_named_as_itself(check_residual_backward, RESIDUAL_MISTAKES)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda g, n, b: None, r"^expected a torch.Tensor, got None .* for x of shape \(2, 5, 8\)"),
        (lambda g, n, b: (g + n(b(g)),), r"^expected a torch.Tensor, got tuple of 1"),
        (lambda g, n, b: (g + n(b(g))).float(), r"^grad_x: expected a float64 tensor, got float32"),
        (lambda g, n, b: (g + n(b(g)))[0], r"^expected grad_x of shape \(2, 5, 8\), the shape of x .*got \(5, 8\)"),
        (lambda g, n, b: (g + n(b(g))) / 0 * 0, r"^grad_x: 80 of 80 values are NaN"),
        (lambda g, n, b: 1.001 * (g + n(b(g))), r"^grad_x: values differ .*: grad_x = grad_y \+ norm_vjp"),
        (
            lambda g, n, b: g + n(b(g[..., :-1])),
            r"raised ValueError .*branch_vjp takes one gradient of shape \(2, 5, 8\)",
        ),
        (lambda g, n, b: g + n(b), r"raised ValueError .*norm_vjp takes one gradient of shape .*, got function"),
    ],
)
def test_check_residual_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_residual_backward(wrong)


# ---- 5. RMSNorm ------------------------------------------------------------------------------


def rms_norm_with(
    *,
    mean_term=False,
    scale_term=True,
    weighted=True,
    weight_last=False,
    reduce="sum",
    gather="mean",
    centred=False,
    eps_used=True,
    eps_inside=True,
    weight_grad="x_hat",
):
    """An RMSNorm backward with one thing changed: the mistakes below, or the reference with no argument."""

    def rms_norm_backward(x, weight, grad_out, eps):
        eps = eps if eps_used else 0
        if centred:
            x = x - x.mean(-1, keepdim=True)
        mean_square = x.pow(2).mean(-1, keepdim=True)  # (..., 1)
        rrms = 1 / torch.sqrt(mean_square + eps) if eps_inside else 1 / (torch.sqrt(mean_square) + eps)
        x_hat = x * rrms  # (..., D)
        g_hat = grad_out * weight if weighted and not weight_last else grad_out
        over = (lambda t: t.mean(-1, keepdim=True)) if gather == "mean" else (lambda t: t.sum(-1, keepdim=True))
        grad = g_hat - over(g_hat) if mean_term else g_hat
        if scale_term:
            grad = grad - x_hat * over(g_hat * x_hat)
        grad_x = rrms * grad * (weight if weight_last else 1)
        lead = tuple(range(x.ndim - 1))
        per_token = {"x_hat": grad_out * x_hat, "x": grad_out * x, "g_hat": g_hat * x_hat, "bias": grad_out}
        per_token = per_token[weight_grad]
        grad_weight = {"sum": per_token.sum(lead), "mean": per_token.mean(lead), "none": per_token}[reduce]
        return grad_x, grad_weight

    return rms_norm_backward


def rms_by_the_jacobian(x, weight, grad_out, eps):
    """The same, through dx_hat_j/dx_i = rrms (delta_ij - x_hat_i x_hat_j / D), built per token."""
    D = x.shape[-1]
    rrms = (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt()  # (..., 1)
    x_hat = x * rrms
    jacobian = rrms[..., None] * (torch.eye(D, dtype=x.dtype) - x_hat[..., :, None] * x_hat[..., None, :] / D)
    grad_x = (jacobian @ (grad_out * weight)[..., None])[..., 0]  # the Jacobian is symmetric
    return grad_x, (grad_out * x_hat).reshape(-1, D).sum(0)


RMS_NORM_MISTAKES = [
    ("LayerNorm's mean term", rms_norm_with(mean_term=True), "^you kept LayerNorm's mean term"),
    ("no scale term", rms_norm_with(scale_term=False), "^the term of the root mean square is missing from grad_x"),
    ("no weight", rms_norm_with(weighted=False), "^weight is not applied to grad_out in grad_x"),
    ("weight last", rms_norm_with(weight_last=True), "^weight multiplies the whole bracket"),
    ("no eps", rms_norm_with(eps_used=False), "^eps is missing: rrms = 1 / sqrt"),
    ("eps outside", rms_norm_with(eps_inside=False), "^eps is added outside the square root"),
    ("centred", rms_norm_with(centred=True), "^you centred x, as LayerNorm does"),
    ("LayerNorm's backward", rms_norm_with(centred=True, mean_term=True), "^LayerNorm's backward, mean term"),
    ("sum, not mean", rms_norm_with(gather="sum"), "^the term of the root mean square is summed over the features"),
    ("not summed", rms_norm_with(reduce="none"), r"^grad_weight is not summed over the token \(and batch\) axes"),
    ("averaged", rms_norm_with(reduce="mean"), "^grad_weight is averaged over the tokens; sum instead"),
    ("x for x_hat", rms_norm_with(weight_grad="x"), "^grad_weight multiplies grad_out by x;"),
    ("g_hat", rms_norm_with(weight_grad="g_hat"), r"^grad_weight multiplies by g_hat = grad_out \* weight"),
    ("a bias's", rms_norm_with(weight_grad="bias"), "^grad_weight sums grad_out alone, as a bias's gradient"),
]


def test_check_rms_norm_backward_passes_the_reference(capsys):
    check_rms_norm_backward(rms_norm_with())
    check_rms_norm_backward(rms_by_the_jacobian)
    out = capsys.readouterr().out
    assert out.count("✓ rms_norm_backward matches torch.autograd on 3 cases (grad_x and grad_weight): ") == 2


def test_no_rms_norm_mistake_is_named_as_another():
    assert_each_named_as_itself(check_rms_norm_backward, RMS_NORM_MISTAKES)


def test_rms_norm_missing_rrms_and_the_wrong_sign_are_named():
    def no_rrms(x, weight, grad_out, eps):
        grad_x, grad_weight = rms_norm_with()(x, weight, grad_out, eps)
        return grad_x * torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps), grad_weight

    with pytest.raises(CheckFailed, match="^rrms is missing from grad_x"):
        check_rms_norm_backward(no_rrms)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda x, w, g, eps: x, r"^expected a tuple of 2 tensors \(grad_x, grad_weight\), got"),
        (lambda x, w, g, eps: (x, w, g), r"^expected a tuple of 2 tensors"),
        (lambda x, w, g, eps: (g.float(), w), r"^grad_x: expected a float64 tensor, got float32"),
        (
            lambda x, w, g, eps: (
                rms_norm_with()(x, w, g, eps)[0],
                g.reshape(-1, g.shape[-1])[:2].sum(0, keepdim=True),
            ),
            r"^expected grad_weight of shape \(8,\), the shape of weight",
        ),
        (lambda x, w, g, eps: (1.001 * rms_norm_with()(x, w, g, eps)[0], w), r"^grad_x: values differ .*: grad_x ="),
    ],
)
def test_check_rms_norm_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_rms_norm_backward(wrong)


# ---- 6. LayerScale in a residual half block --------------------------------------------------


def layer_scale_with(x_path="right", gamma_path="right"):
    """A LayerScale half block's backward with one thing changed (each path by name), or the reference."""

    def layer_scale_backward(grad_y, gamma, branch_out, norm_vjp, branch_vjp):
        grad_x = {
            "right": lambda: grad_y + norm_vjp(branch_vjp(gamma * grad_y)),
            "no gamma": lambda: grad_y + norm_vjp(branch_vjp(grad_y)),
            "gamma on both": lambda: gamma * grad_y + norm_vjp(branch_vjp(gamma * grad_y)),
            "gamma last": lambda: grad_y + gamma * norm_vjp(branch_vjp(grad_y)),
            "no identity": lambda: norm_vjp(branch_vjp(gamma * grad_y)),
            "no branch": lambda: grad_y,
            "forward order": lambda: grad_y + branch_vjp(norm_vjp(gamma * grad_y)),
            "divided": lambda: grad_y + norm_vjp(branch_vjp(grad_y / gamma)),
        }[x_path]()
        lead = tuple(range(grad_y.ndim - 1))
        grad_gamma = {
            "right": lambda: (grad_y * branch_out).sum(lead),
            "not summed": lambda: grad_y * branch_out,
            "averaged": lambda: (grad_y * branch_out).mean(lead),
            "a bias's": lambda: grad_y.sum(lead),
            "with gamma": lambda: (gamma * grad_y * branch_out).sum(lead),
            "over channels": lambda: (grad_y * branch_out).sum(-1),
        }[gamma_path]()
        return grad_x, grad_gamma

    return layer_scale_backward


def layer_scale_by_rows(grad_y, gamma, branch_out, norm_vjp, branch_vjp):
    """The same, grad_gamma as a sum over rows laid end to end, gamma folded into the branch's vjp."""
    D = grad_y.shape[-1]
    grad_gamma = torch.einsum("nd,nd->d", grad_y.reshape(-1, D), branch_out.reshape(-1, D))
    return norm_vjp(branch_vjp(grad_y * gamma)) + grad_y, grad_gamma


LAYER_SCALE_MISTAKES = [
    ("no gamma", layer_scale_with("no gamma"), "^gamma is left out of the branch.s path"),
    ("gamma on both", layer_scale_with("gamma on both"), "^gamma scales the identity path too"),
    ("gamma last", layer_scale_with("gamma last"), "^gamma is applied after the vjps"),
    ("no identity", layer_scale_with("no identity"), "^the residual path is missing; the gradient adds"),
    ("no branch", layer_scale_with("no branch"), "^the branch is missing: grad_y reaches x"),
    ("forward order", layer_scale_with("forward order"), "^backward runs the forward in reverse"),
    ("divided", layer_scale_with("divided"), "^grad_x is divided by gamma"),
    ("not summed", layer_scale_with(gamma_path="not summed"), "^grad_gamma is not summed over the batch and token"),
    ("averaged", layer_scale_with(gamma_path="averaged"), "^grad_gamma is averaged over the tokens"),
    ("a bias's", layer_scale_with(gamma_path="a bias's"), "^grad_gamma sums grad_y alone, as a bias's gradient"),
    ("with gamma", layer_scale_with(gamma_path="with gamma"), "^grad_gamma holds gamma"),
    ("over channels", layer_scale_with(gamma_path="over channels"), "^grad_gamma sums over the channels"),
]


def test_check_layer_scale_backward_passes_the_reference(capsys):
    check_layer_scale_backward(layer_scale_with())
    check_layer_scale_backward(layer_scale_by_rows)
    out = capsys.readouterr().out
    expected = "✓ layer_scale_backward matches torch.autograd through x + gamma * mlp(LayerNorm(x)) on 3 cases"
    assert out.count(expected) == 2


def test_no_layer_scale_mistake_is_named_as_another():
    assert_each_named_as_itself(check_layer_scale_backward, LAYER_SCALE_MISTAKES)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda g, gamma, b, n, v: g, r"^expected a tuple of 2 tensors \(grad_x, grad_gamma\), got"),
        (lambda g, gamma, b, n, v: (g, gamma.float()), r"^grad_gamma: expected a float64 tensor, got float32"),
        (
            lambda g, gamma, b, n, v: (1.001 * layer_scale_with()(g, gamma, b, n, v)[0], gamma),
            r"^grad_x: values differ .*: grad_x = grad_y \+ norm_vjp\(branch_vjp\(gamma \* grad_y\)\)",
        ),
        (
            lambda g, gamma, b, n, v: (g + n(v(gamma)), gamma),
            r"raised ValueError .*branch_vjp takes one gradient of shape \(2, 5, 8\)",
        ),
    ],
)
def test_check_layer_scale_backward_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_layer_scale_backward(wrong)


# ---- every checker ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "checker",
    [
        check_softmax_backward,
        check_attention_backward,
        check_layer_norm_backward,
        check_residual_backward,
        check_rms_norm_backward,
        check_layer_scale_backward,
    ],
)
def test_a_blank_exercise_passes_through(checker):
    with pytest.raises(NotImplementedError, match="Hint: start from the forward"):
        checker(blank)


@pytest.mark.parametrize(
    "checker",
    [
        check_softmax_backward,
        check_attention_backward,
        check_layer_norm_backward,
        check_residual_backward,
        check_rms_norm_backward,
        check_layer_scale_backward,
    ],
)
def test_a_called_function_is_refused(checker):
    with pytest.raises(CheckFailed, match="^expected your function itself"):
        checker(torch.zeros(3))
