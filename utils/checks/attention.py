"""Lesson 3's exercise checkers: attention from q, k, v, a boolean mask applied to the scores, and
causal attention, where token i may only attend to the tokens j <= i."""

import math
import re
from collections.abc import Callable

import torch
import torch.nn.functional as F

from utils.attention import scaled_dot_product_attention
from utils.checks.core import CheckFailed, call_learner, compare, summarize

ATOL = 1e-5  # float32 attention written another way (einsum, scaling q first) differs by ~1e-7

ATTENTION_CASES = [  # (q shape, k shape, v shape)
    ((6, 6), (6, 6), (6, 3)),  # one sequence, N = d: a forgotten transpose still runs
    ((2, 7, 16), (2, 7, 16), (2, 7, 16)),  # (B, N, d)
    ((2, 3, 5, 8), (2, 3, 9, 8), (2, 3, 9, 4)),  # (B, heads, N_q, d), N_q != N_k, d_v != d
    ((1, 2, 10, 64), (1, 2, 10, 64), (1, 2, 10, 64)),  # a ViT-like head width: the scale matters
]


def _weight_variants(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible attention weights, each keyed by the sentence that explains it."""
    d, d_v, N_q = q.shape[-1], v.shape[-1], q.shape[-2]
    scores = q @ k.transpose(-2, -1)  # (..., N_q, N_k), not yet scaled
    scaled = scores / math.sqrt(d)
    variants = {
        "the scores are not scaled: divide q @ k^T by sqrt(d) before the softmax": scores.softmax(-1),
        "the scores are divided by d; divide by sqrt(d)": (scores / d).softmax(-1),
        "the scores are multiplied by sqrt(d); divide by it": (scores * math.sqrt(d)).softmax(-1),
        "the softmax runs over the wrong axis: your columns sum to 1, each row (one query's weights "
        "over the keys) must sum to 1, so use dim=-1": scaled.softmax(-2),
        "q and k are swapped: the scores are q @ k^T, one row per query, not k @ q^T": (
            (k @ q.transpose(-2, -1)) / math.sqrt(d)
        ).softmax(-1),
        "the scale is applied after the softmax: divide the scores by sqrt(d) before it": scores.softmax(-1)
        / math.sqrt(d),
        "the weights are exp(scores) not divided by their row's sum: exp / exp.sum(dim=-1, keepdim=True), "
        "or softmax(dim=-1)": scaled.exp(),
        "the weights are divided by the sum of ALL the exp(scores); each row is divided by its own sum, "
        "exp.sum(dim=-1, keepdim=True)": scaled.exp() / scaled.exp().sum(),
        "you returned the scores as the weights: the weights are their softmax over the keys, "
        "softmax(q @ k^T / sqrt(d), dim=-1)": scaled,
        "you returned the raw scores q @ k^T as the weights: the weights are "
        "softmax(q @ k^T / sqrt(d), dim=-1)": scores,
        "log_softmax gives the logarithm of the weights; use softmax": scaled.log_softmax(-1),
    }
    for dim in range(scores.ndim - 2):  # the leading (batch, head) axes
        variants[
            f"the softmax runs over axis {dim}, a batch or head axis; each row (one query's weights over the keys) "
            "must sum to 1, so use dim=-1"
        ] = scaled.softmax(dim)
    if d_v != d:
        variants["the scores are divided by sqrt(d_v), v's width; the scale is sqrt(d_k), the width of q and k"] = (
            scores / math.sqrt(d_v)
        ).softmax(-1)
    if N_q != d:
        variants[
            "the scores are divided by sqrt(N), the number of tokens; the scale is sqrt(d), the width of q and k "
            "(q.shape[-1])"
        ] = (scores / math.sqrt(N_q)).softmax(-1)
    if N_q == k.shape[-2]:  # a causal mask fits only square scores
        causal = torch.ones(N_q, N_q, dtype=torch.bool).tril()
        variants[
            "the scores are masked (a causal mask?): plain attention lets every query attend to every key, so no "
            "score is hidden"
        ] = scaled.masked_fill(~causal, float("-inf")).softmax(-1)
        variants[
            "your weights are the transpose of the right ones: row i must hold query i's weights over the keys"
        ] = scaled.softmax(-1).transpose(-2, -1)
    if k.shape[-2] == d:  # only then does q @ k run at all
        variants["k is not transposed: the scores are q @ k^T (k.transpose(-2, -1)), not q @ k"] = (
            (q @ k) / math.sqrt(d)
        ).softmax(-1)
    row_sums = scaled.exp().sum(-1)  # (..., N_q), the keepdim forgotten
    if _broadcasts(scaled.shape, row_sums.shape):
        variants[
            "the row sums lost their axis: without keepdim=True, exp / exp.sum(dim=-1) divides by the sums "
            "of other rows; use exp.sum(dim=-1, keepdim=True)"
        ] = scaled.exp() / row_sums
    return variants


def _broadcasts(*shapes: torch.Size) -> bool:
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return False
    return True


def _out_variants(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible outputs built from the right weights (only those whose shapes work)."""
    variants = {
        "you returned the weights as the output: multiply them by v (out = weights @ v)": weights,
        "softmax is applied to the output too; it belongs to the scores only: out = weights @ v": (weights @ v).softmax(
            -1
        ),
        "the output multiplies the scaled scores by v, before the softmax; use the weights, out = weights @ v": (
            q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        )
        @ v,
        "the output is divided by sqrt(d) once more; the scale belongs to the scores only": weights
        @ v
        / math.sqrt(q.shape[-1]),
    }
    N_q, N_k = weights.shape[-2:]
    if N_q == N_k:  # weights @ q and weights^T @ v only run on square weights
        variants["the output averages the queries (weights @ q); it must average the values: weights @ v"] = weights @ q
        variants["the output uses the weights transposed: out = weights @ v"] = weights.transpose(-2, -1) @ v
    return variants


def _is_pair_of_tensors(result) -> bool:
    return isinstance(result, tuple | list) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)


FORGOT_TRANSPOSE = "the scores are q @ k.transpose(-2, -1): did you forget to transpose k?"


def _explain_attention_crash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Callable[[Exception], str | None]:
    """error -> what a failed matrix product in attention most likely means."""
    N_q, N_k, d = q.shape[-2], k.shape[-2], q.shape[-1]

    def explain(error: Exception) -> str | None:
        text = str(error)
        factors = re.search(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", text)
        batched = re.search(r"batch2 tensor to be: \[\d+, (\d+)\] but got: \[\d+, (\d+)\]", text)
        if factors:
            first, second = (int(factors[1]), int(factors[2])), (int(factors[3]), int(factors[4]))
            if first == tuple(q.shape[-2:]) and second == tuple(k.shape[-2:]):
                return FORGOT_TRANSPOSE
            if first == tuple(v.shape[-2:]) and second == (N_q, N_k):
                return "out = weights @ v, (N_q, N_k) @ (N_k, d_v); not v @ weights"
        if batched and (int(batched[1]), int(batched[2])) == (d, N_k):
            return FORGOT_TRANSPOSE
        if "must match the size of tensor b" in text and "non-singleton dimension" in text:
            return (
                "the leading (batch, head) axes of a product do not line up: transpose only the last two axes, "
                "k.transpose(-2, -1); k.T, transpose(0, 1) or transpose(1, 2) move other axes once there are "
                "batch or head axes"
            )
        if isinstance(error, IndexError) and "Dimension out of range" in text:
            return "k.transpose(-2, -1) counts from the end, so it works with or without batch and head axes"
        if factors or batched:
            return (
                "check the matrix products: scores = q @ k.transpose(-2, -1) is (..., N_q, N_k), "
                "out = weights @ v is (..., N_q, d_v)"
            )
        return None

    return explain


def _raise_if_scaled_after_softmax(out, weights, q, k, v, where: str) -> None:
    """Names the scale applied to the output instead of the scores (weights unscaled, out divided)."""
    unscaled = (q @ k.transpose(-2, -1)).softmax(-1)  # (..., N_q, N_k)
    scaled_out = unscaled @ v / math.sqrt(q.shape[-1])
    same = lambda a, b: a.shape == b.shape and torch.allclose(a.detach().double(), b.double(), atol=ATOL)  # noqa: E731
    if same(weights, unscaled) and same(out, scaled_out):
        raise CheckFailed(
            f"the scale is applied after the softmax (to the output): divide the scores by sqrt(d) before the "
            f"softmax ({where})"
        )


def check_attention(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> None:
    """Check a learner's attention(q, k, v) -> (out (..., N_q, d_v), weights (..., N_q, N_k))."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for q_shape, k_shape, v_shape in ATTENTION_CASES:
        q, k, v = (torch.randn(shape, generator=generator) for shape in (q_shape, k_shape, v_shape))
        expected_out, expected_weights = scaled_dot_product_attention(q, k, v)
        where = f"for q {q_shape}, k {k_shape}, v {v_shape}"
        out, weights = call_learner(
            fn,
            q.clone(),
            k.clone(),
            v.clone(),
            returns=_is_pair_of_tensors,
            expected="a pair of tensors (out, weights)",
            where=where,
            explain=_explain_attention_crash(q, k, v),
        )
        _raise_if_scaled_after_softmax(out, weights, q, k, v, where)
        weight_hints = {  # where two shapes coincide, the later entry wins
            (*k_shape[:-1], q_shape[-2]): "q and k are swapped: the scores are q @ k^T, one row per query, not k @ q^T",
            (*q_shape[:-2], q_shape[-1], k_shape[-1]): "the scores are q @ k^T (N_q x N_k), not q^T @ k (d x d)",
        }
        if out.shape == expected_weights.shape:
            weight_hints[tuple(expected_out.shape)] = "you returned (weights, out); return (out, weights)"
        verdicts.append(
            compare(
                weights,
                expected_weights,
                where,
                shape_wording="expected weights of shape {} (..., N_q, N_k)",
                shape_hints=weight_hints,
                atol=ATOL,
                mistakes=_weight_variants(q, k, v),
                name="weights",
                nan_hint="softmax(dim=-1) never gives NaN; exp without subtracting the row's maximum can overflow",
            )
        )
        verdicts.append(
            compare(
                out,
                expected_out,
                where,
                shape_wording="expected out of shape {} (..., N_q, d_v)",
                atol=ATOL,
                mistakes=_out_variants(expected_weights, q, k, v),
                name="out",
                advice=": out = weights @ v",
            )
        )
    print(f"✓ attention matches the reference on {len(ATTENTION_CASES)} cases (out and weights): {summarize(verdicts)}")


def _masks(generator: torch.Generator) -> list[tuple[torch.Tensor, torch.Tensor, str]]:
    """(scores, mask, description): every row keeps at least one key and hides at least one."""
    cases = []
    # key padding: 3 sequences of 6 slots holding 4, 2 and 5 real tokens, mask (B, 1, 1, N_k)
    lengths = torch.tensor([4, 2, 5])
    keep = torch.arange(6)[None, :] < lengths[:, None]  # (B, N_k)
    cases.append(
        (torch.randn(3, 2, 6, 6, generator=generator), keep[:, None, None, :], "a padding mask (B, 1, 1, N_k)")
    )
    # causal: each query sees itself and the tokens before it, mask (N, N); the last row keeps all, so
    # hide the first key from the last query too
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    causal[-1, 0] = False
    cases.append((torch.randn(2, 5, 5, generator=generator), causal, "a causal-like mask (N_q, N_k)"))
    # a random mask of the full shape, rows fixed up to keep one key and hide one
    mask = torch.rand(2, 4, 7, generator=generator) < 0.5  # (B, N_q, N_k)
    mask[..., 0] = True
    mask[..., 1] = False
    cases.append((3 * torch.randn(2, 4, 7, generator=generator), mask, "a random mask (B, N_q, N_k)"))
    return cases


def _masked_softmax_variants(scores: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible masked softmax results, each keyed by the sentence that explains it."""
    masked = scores.masked_fill(~mask, float("-inf"))  # (..., N_q, N_k)
    variants = {
        "the mask is inverted: True means 'may attend' (torch's convention), so hide the keys "
        "where the mask is False (scores.masked_fill(~mask, -inf))": scores.masked_fill(mask, float("-inf")).softmax(
            -1
        ),
        "hidden keys still get weight: a score of 0 is not 'no attention' (exp(0) = 1); fill the "
        "hidden scores with -inf, so that exp gives exactly 0": scores.masked_fill(~mask, 0.0).softmax(-1),
        "you masked after the softmax without renormalising: the rows no longer sum to 1; mask the "
        "scores with -inf before the softmax": scores.softmax(-1).masked_fill(~mask, 0.0),
        "the softmax runs over the wrong axis: each row (one query's weights over the keys) must "
        "sum to 1, so use dim=-1": masked.softmax(-2),
        "the hidden scores are filled with +inf, which gives NaN (inf - inf); fill them with float('-inf'), "
        "so that exp gives exactly 0": scores.masked_fill(~mask, float("inf")).softmax(-1),
        "you returned the masked scores; apply the softmax over the keys (dim=-1) to them": masked,
        "log_softmax gives the logarithm of the weights; use softmax": masked.log_softmax(-1),
    }
    for dim in range(scores.ndim - 2):  # the leading (batch, head) axes
        variants[
            f"the softmax runs over axis {dim}, a batch or head axis; each row (one query's weights over the keys) "
            "must sum to 1, so use dim=-1"
        ] = masked.softmax(dim)
    transposed = mask.transpose(-2, -1)
    if _broadcasts(scores.shape, transposed.shape):
        variants[
            "the mask is transposed: mask[..., i, j] says whether query i may attend to key j, so the keys are "
            "the mask's last axis, as in the scores"
        ] = scores.masked_fill(~transposed, float("-inf")).softmax(-1)
    return variants


def _explain_masking_crash(error: Exception) -> str | None:
    """Names boolean indexing with a mask that only broadcasts to the scores."""
    if "The shape of the mask" in str(error):
        return (
            "scores[~mask] needs a mask of the scores' full shape; scores.masked_fill(~mask, float('-inf')) "
            "broadcasts the mask"
        )
    return None


def check_masked_softmax(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's masked_softmax(scores, mask) -> weights: softmax over the keys (last axis),
    where `mask` is boolean, True = may attend, broadcastable to scores (..., N_q, N_k)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for scores, mask, description in _masks(generator):
        expected = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # (..., N_q, N_k)
        where = f"for scores {tuple(scores.shape)} and {description}"
        got = call_learner(fn, scores.clone(), mask.clone(), where=where, explain=_explain_masking_crash)

        def hidden_keys_weighted(got: torch.Tensor) -> str | None:
            """Names weight left on the keys the mask hides."""
            hidden = ~mask.expand_as(got)
            if got[hidden].abs().max() > ATOL:
                return f"hidden keys get weight up to {got[hidden].abs().max():.3g} {where}; they must get 0"
            return None

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected weights of shape {}",
                atol=ATOL,
                mistakes=_masked_softmax_variants(scores, mask),
                diagnose=hidden_keys_weighted,
                nan_hint="softmax gives NaN for a row whose keys are all hidden, or for +inf in the scores; "
                "fill the hidden scores with float('-inf'), and keep the keys on the last axis",
            )
        )
    print(f"✓ masked_softmax matches the reference on {len(verdicts)} masks: {summarize(verdicts)}")


CAUSAL_CASES = [  # (q shape, k shape, v shape): self-attention, so q, k and v have the same N tokens
    ((6, 8), (6, 8), (6, 8)),  # one sequence, N != d: a mask built from the width d does not fit
    ((2, 7, 16), (2, 7, 16), (2, 7, 5)),  # (B, N, d), d_v != d
    ((2, 3, 9, 64), (2, 3, 9, 64), (2, 3, 9, 64)),  # (B, heads, N, d) at a ViT head width: the scale matters
]


def _causal_weight_variants(q: torch.Tensor, k: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible causal attention weights, each keyed by the sentence that explains it."""
    N, d = q.shape[-2], q.shape[-1]
    allowed = torch.ones(N, N, dtype=torch.bool).tril()  # (N, N): True where j <= i
    scores = q @ k.transpose(-2, -1)  # (..., N, N), not yet scaled
    scaled = scores / math.sqrt(d)
    minus_inf = float("-inf")
    return {
        "the future keys are hidden after the softmax: zeroing them (weights * mask, torch.tril(weights)) leaves "
        "rows that no longer sum to 1; set the scores of the keys j > i to -inf before the softmax": scaled.softmax(-1)
        * allowed,
        "the mask is transposed: it keeps the keys j >= i (the upper triangle, torch.triu) and hides the past; "
        "query i may attend to the keys j <= i, the lower triangle (torch.tril)": scaled.masked_fill(
            ~allowed.T, minus_inf
        ).softmax(-1),
        "the hidden scores are set to 0, not -inf (masked_fill with 0, scores * mask, or torch.tril(scores)): "
        "exp(0) = 1, so the future keys still get weight; fill them with float('-inf')": scaled.masked_fill(
            ~allowed, 0.0
        ).softmax(-1),
        "the scores are not scaled: divide q @ k^T by sqrt(d) before the softmax, as in exercise 1": scores.masked_fill(
            ~allowed, minus_inf
        ).softmax(-1),
        "the scale is applied after the softmax: divide the scores by sqrt(d) before it": scores.masked_fill(
            ~allowed, minus_inf
        ).softmax(-1)
        / math.sqrt(d),
        "the mask is inverted: it hides the keys j <= i and keeps the future ones; True means 'may attend', so "
        "hide the scores where the mask is False (masked_fill(~mask, -inf))": scaled.masked_fill(
            allowed, minus_inf
        ).softmax(-1),
        "each token hides itself too: j <= i includes j = i, the diagonal (torch.tril(..., diagonal=0)); "
        "the first token, with no earlier key, gets NaN": scaled.masked_fill(~allowed.tril(-1), minus_inf).softmax(-1),
        "your weights have no causal mask: query i still gives weight to the later keys j > i; set their scores "
        "to -inf before the softmax": scaled.softmax(-1),
        "the softmax runs over the wrong axis: each row (one query's weights over the keys) must sum to 1, "
        "so use dim=-1": scaled.masked_fill(~allowed, minus_inf).softmax(-2),
        "you returned the masked scores as the weights: the weights are their softmax over the keys (dim=-1)": (
            scaled.masked_fill(~allowed, minus_inf)
        ),
    }


def _causal_out_variants(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Wrong-but-plausible outputs of causal attention, built from the right (masked) weights."""
    unmasked = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(-1)  # (..., N, N)
    return {
        **_out_variants(weights, q, k, v),
        "your out ignores the mask: compute it from the masked weights, out = weights @ v": unmasked @ v,
    }


def _explain_causal_crash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Callable[[Exception], str | None]:
    """error -> what a failure while building or applying a causal mask most likely means."""
    N, d = q.shape[-2], q.shape[-1]
    matmul = _explain_attention_crash(q, k, v)

    def explain(error: Exception) -> str | None:
        text = str(error)
        if "only supports boolean masks" in text or "only implemented on integer and Boolean" in text:
            return (
                "the mask must be boolean, True where attention is allowed: "
                "torch.ones(N, N, dtype=torch.bool).tril(), or mask == 1 for a float mask"
            )
        sizes = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", text)
        if sizes and {int(sizes[1]), int(sizes[2])} == {N, d}:
            return (
                f"the mask is {d} x {d}: build it from the number of tokens N = q.shape[-2] ({N}), "
                f"not from the width d = q.shape[-1] ({d})"
            )
        return matmul(error)

    return explain


def check_causal_attention(
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
) -> None:
    """Check a learner's causal_attention(q, k, v) -> (out (..., N, d_v), weights (..., N, N)): attention in
    which query i may only attend to the keys j <= i. The reference is checked against torch's
    F.scaled_dot_product_attention(q, k, v, is_causal=True)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for q_shape, k_shape, v_shape in CAUSAL_CASES:
        q, k, v = (torch.randn(shape, generator=generator) for shape in (q_shape, k_shape, v_shape))
        N = q.shape[-2]
        allowed = torch.ones(N, N, dtype=torch.bool).tril()  # (N, N): True where key j <= query i
        expected_out, expected_weights = scaled_dot_product_attention(q, k, v, mask=allowed)
        torch_out = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # the independent reference
        if not torch.allclose(expected_out, torch_out, atol=ATOL):  # the course's own bug, not the learner's
            raise RuntimeError("the reference differs from F.scaled_dot_product_attention(is_causal=True)")
        where = f"for q {q_shape}, k {k_shape}, v {v_shape}"
        out, weights = call_learner(
            fn,
            q.clone(),
            k.clone(),
            v.clone(),
            returns=_is_pair_of_tensors,
            expected="a pair of tensors (out, weights)",
            where=where,
            explain=_explain_causal_crash(q, k, v),
        )
        weight_hints = {}
        if out.shape == expected_weights.shape:
            weight_hints[tuple(expected_out.shape)] = "you returned (weights, out); return (out, weights)"

        def future_weighted(got: torch.Tensor) -> str | None:
            """Names weight on the keys after the query, which the causal mask hides."""
            future = ~allowed.expand_as(got)
            if got[future].abs().max() > ATOL:
                return (
                    f"weights: query i gives weight up to {got[future].abs().max():.3g} to later keys j > i {where}; "
                    "the causal mask must give them exactly 0"
                )
            return None

        verdicts.append(
            compare(
                weights,
                expected_weights,
                where,
                shape_wording="expected weights of shape {} (..., N, N)",
                shape_hints=weight_hints,
                atol=ATOL,
                mistakes=_causal_weight_variants(q, k),
                diagnose=future_weighted,
                name="weights",
                nan_hint="a row of NaN is a query whose keys are all hidden: query i must keep the keys j <= i, "
                "itself included",
            )
        )
        verdicts.append(
            compare(
                out,
                expected_out,
                where,
                shape_wording="expected out of shape {} (..., N, d_v)",
                atol=ATOL,
                mistakes=_causal_out_variants(expected_weights, q, k, v),
                name="out",
                advice=": out = weights @ v",
            )
        )
    print(
        f"✓ causal_attention matches the reference on {len(CAUSAL_CASES)} cases (out and weights): "
        f"{summarize(verdicts)}; the reference equals F.scaled_dot_product_attention(q, k, v, is_causal=True)"
    )
