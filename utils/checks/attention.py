"""Lesson 3's exercise checkers: attention from q, k, v, and a boolean mask applied to the scores."""

import math
from collections.abc import Callable

import torch

from utils.attention import scaled_dot_product_attention
from utils.checks.core import CheckFailed, call_learner, compare, summarize

ATOL = 1e-5  # float32 attention written another way (einsum, scaling q first) differs by ~1e-7

ATTENTION_CASES = [  # (q shape, k shape, v shape)
    ((6, 6), (6, 6), (6, 3)),  # one sequence, N = d: a forgotten transpose still runs
    ((2, 7, 16), (2, 7, 16), (2, 7, 16)),  # (B, N, d)
    ((2, 3, 5, 8), (2, 3, 9, 8), (2, 3, 9, 4)),  # (B, heads, N_q, d), N_q != N_k, d_v != d
    ((1, 2, 10, 64), (1, 2, 10, 64), (1, 2, 10, 64)),  # a ViT-like head width: the scale matters
]


def _weight_variants(q: torch.Tensor, k: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible attention weights, each keyed by the sentence that explains it."""
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1)  # (..., N_q, N_k), not yet scaled
    variants = {
        "the scores are not scaled: divide q @ k^T by sqrt(d) before the softmax": scores.softmax(-1),
        "the scores are divided by d; divide by sqrt(d)": (scores / d).softmax(-1),
        "the scores are multiplied by sqrt(d); divide by it": (scores * math.sqrt(d)).softmax(-1),
        "the softmax runs over the wrong axis: your columns sum to 1, each row (one query's weights "
        "over the keys) must sum to 1, so use dim=-1": (scores / math.sqrt(d)).softmax(-2),
        "q and k are swapped: the scores are q @ k^T, one row per query, not k @ q^T": (
            (k @ q.transpose(-2, -1)) / math.sqrt(d)
        ).softmax(-1),
    }
    if k.shape[-2] == d:  # only then does q @ k run at all
        variants["k is not transposed: the scores are q @ k^T (k.transpose(-2, -1)), not q @ k"] = (
            (q @ k) / math.sqrt(d)
        ).softmax(-1)
    return variants


def _out_variants(weights: torch.Tensor, q: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible outputs built from the right weights (only those whose shapes work)."""
    variants = {"you returned the weights as the output: multiply them by v (out = weights @ v)": weights}
    N_q, N_k = weights.shape[-2:]
    if N_q == N_k:  # weights @ q and weights^T @ v only run on square weights
        variants["the output averages the queries (weights @ q); it must average the values: weights @ v"] = weights @ q
        variants["the output uses the weights transposed: out = weights @ v"] = weights.transpose(-2, -1) @ v
    return variants


def _is_pair_of_tensors(result) -> bool:
    return isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)


def _call_attention(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, where: str):
    """Run the learner's attention; it must return a pair of tensors (out, weights)."""
    try:
        return call_learner(
            fn,
            q.clone(),
            k.clone(),
            v.clone(),
            returns=_is_pair_of_tensors,
            expected="a pair of tensors (out, weights)",
            where=where,
        )
    except CheckFailed as failure:
        error = failure.__cause__
        if isinstance(error, RuntimeError) and ("shape" in str(error) or "size" in str(error)):
            # most often q @ k with k not transposed
            hint = " (the scores are q @ k.transpose(-2, -1): did you forget to transpose k?)"
            raise CheckFailed(f"{failure}{hint}") from error
        raise


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
        out, weights = _call_attention(fn, q, k, v, where)

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
                mistakes=_weight_variants(q, k),
                name="weights",
            )
        )
        verdicts.append(
            compare(
                out,
                expected_out,
                where,
                shape_wording="expected out of shape {} (..., N_q, d_v)",
                atol=ATOL,
                mistakes=_out_variants(expected_weights, q, v),
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


def check_masked_softmax(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's masked_softmax(scores, mask) -> weights: softmax over the keys (last axis),
    where `mask` is boolean, True = may attend, broadcastable to scores (..., N_q, N_k)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for scores, mask, description in _masks(generator):
        expected = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # (..., N_q, N_k)
        where = f"for scores {tuple(scores.shape)} and {description}"
        got = call_learner(fn, scores.clone(), mask.clone())

        def hidden_keys_weighted(got: torch.Tensor) -> str | None:
            """Names weight left on the keys the mask hides."""
            hidden = ~mask.expand_as(got)
            if got[hidden].abs().max() > ATOL:
                return f"hidden keys get weight up to {got[hidden].abs().max():.3g} {where}; they must get 0"
            return None

        variants = {
            "the mask is inverted: True means 'may attend' (torch's convention), so hide the keys "
            "where the mask is False (scores.masked_fill(~mask, -inf))": scores.masked_fill(
                mask, float("-inf")
            ).softmax(-1),
            "hidden keys still get weight: a score of 0 is not 'no attention' (exp(0) = 1); fill the "
            "hidden scores with -inf, so that exp gives exactly 0": scores.masked_fill(~mask, 0.0).softmax(-1),
            "you masked after the softmax without renormalising: the rows no longer sum to 1; mask the "
            "scores with -inf before the softmax": scores.softmax(-1).masked_fill(~mask, 0.0),
            "the softmax runs over the wrong axis: each row (one query's weights over the keys) must "
            "sum to 1, so use dim=-1": scores.masked_fill(~mask, float("-inf")).softmax(-2),
        }
        verdicts.append(
            compare(
                got,
                expected,
                where,
                shape_wording="expected weights of shape {}",
                atol=ATOL,
                mistakes=variants,
                diagnose=hidden_keys_weighted,
            )
        )
    print(f"✓ masked_softmax matches the reference on {len(verdicts)} masks: {summarize(verdicts)}")
