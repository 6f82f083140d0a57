"""Lesson 3's exercise checkers: attention pooling (one learned query attends over the tokens), a local
3 x 3 mask on a grid of tokens, and causal attention, where token i may only attend to the tokens j <= i.
Two earlier exercises' checkers stay for instructors who set them: attention from q, k, v
(check_attention) and a boolean mask applied to the scores (check_masked_softmax)."""

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
        "the scores are not scaled: divide q @ k^T by sqrt(d) before the softmax, as in section 5": scores.masked_fill(
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


# ---- attention pooling: one learned query attends over the tokens (cross-attention, N_q = 1) ----

POOL_CASES = [  # (B, N, D): N, B and D all differ, so an axis mixed up shows
    (2, 6, 8),
    (3, 10, 16),
    (1, 5, 64),  # a ViT head width: the scale matters
]


def _reference_pool(tokens: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(pooled (B, D), weights (B, N)): the query, one per image, attends over the tokens (keys = values)."""
    B, N, D = tokens.shape
    queries = query.expand(B, 1, D)  # (B, 1, D): the same learned query for every image
    out, weights = scaled_dot_product_attention(queries, tokens, tokens)  # (B, 1, D), (B, 1, N)
    return out[:, 0], weights[:, 0]  # (B, D), (B, N)


def _pool_weight_variants(tokens: torch.Tensor, query: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible pooling weights (B, N), each keyed by the sentence that explains it."""
    B, N, D = tokens.shape
    scores = tokens @ query  # (B, N), not yet scaled
    scaled = scores / math.sqrt(D)
    first = (tokens @ tokens[:, 0, :, None])[..., 0] / math.sqrt(D)  # (B, N): the first token as the query
    return {
        "the scores are not scaled: divide each token's score (query . token) by sqrt(D), the width of the "
        "query and the keys, before the softmax": scores.softmax(-1),
        "the scores are divided by D; divide by sqrt(D)": (scores / D).softmax(-1),
        "the scores are divided by sqrt(N), the number of tokens; the scale is sqrt(D), the width of the query "
        "and the keys": (scores / math.sqrt(N)).softmax(-1),
        "the softmax runs over the images (axis 0): each image's weights over its N tokens must sum to 1, "
        "so use dim=-1": scaled.softmax(0),
        "you returned the scores as the weights: the weights are their softmax over the tokens (dim=-1)": scaled,
        "every token gets the same weight 1/N (mean pooling): attention pooling weights each token by the "
        "softmax of its score with the query, softmax(tokens @ query / sqrt(D))": torch.full_like(scores, 1 / N),
        "the query is the first token (tokens[:, 0]), as with a class token: here the query is the learned "
        "vector `query`, which is not one of the tokens": first.softmax(-1),
    }


def _pool_out_variants(weights: torch.Tensor, tokens: torch.Tensor, query: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible pooled vectors (B, D), built from the right weights."""
    D = tokens.shape[-1]
    pooled = (weights[:, :, None] * tokens).sum(1)  # (B, D)
    return {
        "the pooled vector is the plain mean of the tokens: weight each token by its attention weight, "
        "pooled = sum over n of weights[:, n] * tokens[:, n]": tokens.mean(1),
        "the pooled vector is the sum of the tokens: weight each token by its attention weight before "
        "summing": tokens.sum(1),
        "the pooled vector is divided by sqrt(D) once more; the scale belongs to the scores only": pooled
        / math.sqrt(D),
        "the query is added to the pooled vector: the output is the weighted average of the values (the "
        "tokens) alone": pooled + query,
        "softmax is applied to the pooled vector too; it belongs to the scores only": pooled.softmax(-1),
        "the pooled vector is the largest value of each feature (max pooling): take the weighted average of "
        "the tokens, sum over n of weights[:, n] * tokens[:, n]": tokens.max(1).values,
    }


def _explain_pool_crash(tokens: torch.Tensor, query: torch.Tensor) -> Callable[[Exception], str | None]:
    """error -> what a failed product in attention pooling most likely means."""
    B, N, D = tokens.shape

    def explain(error: Exception) -> str | None:
        text = str(error)
        products = ("cannot be multiplied", "size mismatch", "must match the size", "batch2 tensor")
        if any(words in text for words in products):
            return (
                f"score every token against the one query: tokens @ query, (B, N, D) @ (D,) -> (B, N); then "
                f"the weights (B, N) average the tokens over N (B = {B}, N = {N}, D = {D} here)"
            )
        if isinstance(error, IndexError) and "Dimension out of range" in text:
            return "query is one vector (D,): give it a query axis with query[None] or query.reshape(1, 1, D)"
        return None

    return explain


def check_attention_pool(fn: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Check a learner's attention_pool(tokens (B, N, D), query (D,)) -> (pooled (B, D), weights (B, N)):
    one learned query attends over each image's tokens, which serve as keys and values; then check that
    shuffling the tokens leaves the pooled vector alone and shuffles the weights alike."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, N, D in POOL_CASES:
        tokens, query = torch.randn(B, N, D, generator=generator), torch.randn(D, generator=generator)
        expected_pooled, expected_weights = _reference_pool(tokens, query)
        where = f"for tokens {(B, N, D)} and query {(D,)}"
        pooled, weights = call_learner(
            fn,
            tokens.clone(),
            query.clone(),
            returns=_is_pair_of_tensors,
            expected="a pair of tensors (pooled, weights)",
            where=where,
            explain=_explain_pool_crash(tokens, query),
        )
        weight_hints = {
            (B, 1, N): "drop the query axis: with one query, the weights are (B, N) (weights[:, 0] or squeeze(1))",
            (B, N + 1): "the query is among the keys (it attends to itself): the keys and values are the N tokens "
            "only, the query comes from outside (cross-attention)",
            (B, N, D): "one weight per token, not per feature: a token's score is the dot product of the query "
            "with the whole token, summed over its D features",
            (N,): "keep the batch axis: one row of N weights per image, (B, N)",
        }
        pooled_hints = {
            (B, 1, D): "drop the query axis: one pooled vector per image, (B, D) (out[:, 0] or squeeze(1))",
            (B, N, D): "you returned the weighted tokens without summing them: the pooled vector sums "
            "weights[:, n] * tokens[:, n] over the N tokens (axis 1)",
            (D,): "keep the batch axis: one pooled vector per image, (B, D)",
        }
        if tuple(pooled.shape) == (B, N) and tuple(weights.shape) == (B, D):
            raise CheckFailed(f"you returned (weights, pooled); return (pooled, weights) ({where})")
        verdicts.append(
            compare(
                weights,
                expected_weights,
                where,
                shape_wording="expected weights of shape {} (B, N)",
                shape_hints=weight_hints,
                atol=ATOL,
                mistakes=_pool_weight_variants(tokens, query),
                name="weights",
                nan_hint="softmax(dim=-1) of finite scores never gives NaN",
            )
        )
        verdicts.append(
            compare(
                pooled,
                expected_pooled,
                where,
                shape_wording="expected pooled of shape {} (B, D)",
                shape_hints=pooled_hints,
                atol=ATOL,
                mistakes=_pool_out_variants(expected_weights, tokens, query),
                name="pooled",
                advice=": pooled = sum over the tokens of weights[:, n] * tokens[:, n] (weights @ tokens per image)",
            )
        )
    B, N, D = POOL_CASES[-1]  # the tokens of the last case, shuffled: a set has no order
    order = torch.randperm(N, generator=generator)
    pooled_shuffled, weights_shuffled = call_learner(
        fn,
        tokens[:, order].clone(),
        query.clone(),
        returns=_is_pair_of_tensors,
        expected="a pair of tensors (pooled, weights)",
        where="for the tokens shuffled",
    )
    if not torch.allclose(pooled_shuffled.detach().double(), pooled.detach().double(), atol=ATOL):
        raise CheckFailed(
            "pooled: shuffling the tokens changed the pooled vector; attention pooling treats the tokens as a set "
            "(did the function read their order or position?)"
        )
    if not torch.allclose(weights_shuffled.detach().double(), weights[:, order].detach().double(), atol=ATOL):
        raise CheckFailed("weights: shuffling the tokens must shuffle their weights alike")
    print(
        f"✓ attention_pool matches the reference on {len(POOL_CASES)} cases (pooled and weights): "
        f"{summarize(verdicts)}; shuffling the tokens leaves the pooled vector unchanged"
    )


# ---- a local 3 x 3 attention mask on a grid of tokens --------------------------------------------

LOCAL_GRIDS = [(3, 4), (5, 3), (14, 14)]  # (rows, cols): not square, then lesson 1's 14 x 14 patches


def _grid_positions(rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, column) of every token in row-major order (token i = r * cols + c), each (rows * cols,)."""
    index = torch.arange(rows * cols)
    return index // cols, index % cols


def local_mask_reference(rows: int, cols: int) -> torch.Tensor:
    """(rows * cols, rows * cols) boolean: True where query token i may attend to key token j, i.e. j lies in
    the 3 x 3 window centred on i (itself included), on the grid of patches in row-major order."""
    r, c = _grid_positions(rows, cols)
    near_rows = (r[:, None] - r[None, :]).abs() <= 1  # (T, T)
    near_cols = (c[:, None] - c[None, :]).abs() <= 1
    return near_rows & near_cols


def _local_mask_variants(rows: int, cols: int) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible local masks, each keyed by the sentence that explains it."""
    r, c = _grid_positions(rows, cols)
    dr, dc = (r[:, None] - r[None, :]).abs(), (c[:, None] - c[None, :]).abs()  # (T, T) distances
    i = torch.arange(rows * cols)
    di = (i[:, None] - i[None, :]).abs()  # (T, T) distance in the sequence
    right = local_mask_reference(rows, cols)
    wrap_r, wrap_c = torch.minimum(dr, rows - dr), torch.minimum(dc, cols - dc)  # distances on a torus
    mixed_r, mixed_c = i % rows, i // rows  # column-major: (row, column) of token i read the other way
    mixed = ((mixed_r[:, None] - mixed_r[None, :]).abs() <= 1) & ((mixed_c[:, None] - mixed_c[None, :]).abs() <= 1)
    return {
        "the window is 5 x 5 (two steps each way): a 3 x 3 window reaches one row and one column each way, "
        "|row_i - row_j| <= 1 and |col_i - col_j| <= 1": (dr <= 2) & (dc <= 2),
        "each token hides itself (a ring of 8): the 3 x 3 window includes the token at its centre, so the "
        "diagonal of the mask is True": right & (dr + dc > 0),
        "the mask is inverted: True must mark the tokens inside the window (may attend), False the rest": ~right,
        "the diagonal neighbours are missing (a cross of 5): a 3 x 3 window includes its corners, so both "
        "|row_i - row_j| <= 1 and |col_i - col_j| <= 1, not their sum": (dr + dc) <= 1,
        "these are neighbours in the sequence (i - 1, i, i + 1), not on the grid: the tokens above and below "
        "are i - cols and i + cols": di <= 1,
        "the mask wraps around the edges: token i's neighbours are not simply i ± 1 and i ± cols (± 1), "
        "since the last token of a row is not next to the first of the next row; compare the rows and the "
        "columns of the two tokens (i // cols, i % cols)": (di <= 1) | ((di - cols).abs() <= 1),
        "the window wraps around the grid (the top row sees the bottom row, the left column the right one): a "
        "token on an edge has fewer neighbours, 6 (4 in a corner)": (wrap_r <= 1) & (wrap_c <= 1),
        "rows and columns are mixed up: in row-major order (lesson 1) token i sits in row i // cols and "
        "column i % cols": mixed,
    }


def _explain_local_crash(rows: int, cols: int) -> Callable[[Exception], str | None]:
    def explain(error: Exception) -> str | None:
        if isinstance(error, IndexError) and "out of" in str(error):
            return (
                f"an index ran off the grid: check that a neighbour's row lies in 0..{rows - 1} and its column in "
                f"0..{cols - 1} before using it"
            )
        return None

    return explain


def check_local_mask(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Check a learner's local_mask(rows, cols) -> (T, T) boolean mask, T = rows * cols tokens in row-major
    order, True where key j lies in the 3 x 3 window around query i (itself included, nothing wrapped)."""
    verdicts = []
    for rows, cols in LOCAL_GRIDS:
        T = rows * cols
        expected = local_mask_reference(rows, cols)
        where = f"for a {rows} x {cols} grid (rows x cols, T = {T})"
        got = call_learner(fn, rows, cols, where=where, explain=_explain_local_crash(rows, cols))
        if isinstance(got, torch.Tensor) and got.dtype != torch.bool:
            raise CheckFailed(
                f"expected a boolean mask (True = may attend, as masked_fill(~mask, -inf) needs), got "
                f"{str(got.dtype).removeprefix('torch.')} {where}: build it from comparisons such as "
                "(distance <= 1), which give True/False, or convert a 0/1 mask with .bool()"
            )

        def count_window(got: torch.Tensor) -> str | None:
            """Names the corner, edge or inner token whose window is wrong, with what it sees."""
            seen = got.sum(dim=-1)  # (T,) keys each query may attend to
            places = [("the top-left corner token (0, 0)", 0, 4), ("the top edge token (0, 1)", 1, 6)]
            if rows > 2 and cols > 2:
                places.append(("the inner token (1, 1)", cols + 1, 9))
            for name, index, wanted in places:
                if int(seen[index]) != wanted or not torch.equal(got[index], expected[index]):
                    keys = [divmod(j, cols) for j in got[index].nonzero().flatten().tolist()][:12]
                    return (
                        f"{name} may attend to {int(seen[index])} tokens {where}, at (row, col) {keys}; in a 3 x 3 "
                        f"window it sees {wanted}: itself and its neighbours on the grid, nothing beyond an edge"
                    )
            return None

        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected a mask of shape {} (T, T): one row per query token, one column per key",
                shape_hints={
                    (rows, cols, rows, cols): "flatten the grid: the mask is (T, T) with T = rows * cols, query "
                    "token i = r * cols + c on the rows, key token j on the columns",
                    (rows, cols): "one row per query token and one column per key token: (T, T), T = rows * cols",
                    (T,): "one row per query token: the mask is (T, T), each row saying which keys it may see",
                },
                atol=0,
                mistakes=_local_mask_variants(rows, cols),
                diagnose=count_window,
            )
        )
    print(
        f"✓ local_mask matches the reference on {len(LOCAL_GRIDS)} grids (3 x 4, 5 x 3, 14 x 14): "
        f"{summarize(verdicts)}; a corner token sees 4 tokens, an edge token 6, an inner one 9"
    )
