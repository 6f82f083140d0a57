"""Lessons 3 and 4: scaled dot-product attention, and self-attention split into heads."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils.rope import apply_rope
from utils.validation import (
    WrongTypeError,
    check_device,
    check_dtype,
    check_flag,
    check_positive,
    check_probability,
    check_tensor,
    check_whole,
)


def check_mask(mask: torch.Tensor, scores_shape: torch.Size) -> None:
    """Raise a ValueError unless `mask` is boolean, broadcasts to the scores and hides no whole row."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        if not isinstance(mask, torch.Tensor):
            raise WrongTypeError(
                f"expected a boolean mask tensor (True where attention is allowed), got {type(mask).__name__}"
            )
        how = "an additive 0/-inf mask: `mask == 0`" if mask.is_floating_point() else "a 0/1 mask: `mask.bool()`"
        raise ValueError(f"expected a boolean mask (True where attention is allowed), got {mask.dtype}; from {how}")
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores "
            f"(..., N_q, N_k) = {tuple(scores_shape)}"
        )
    if not mask.any(dim=-1).all():
        raise ValueError(
            "the mask hides every key from at least one query; each query must be allowed "
            "to attend to at least one token (its softmax would be 0/0)"
        )


def check_tokens(x: torch.Tensor, weight: torch.Tensor, any_leading: bool = False) -> None:
    """Raise unless `x` holds tokens of the width D, dtype and device of `weight` (the (out, D)
    weight of the first Linear they meet): shaped (B, N, D) with N >= 1, or (..., D) with any_leading."""
    D = weight.shape[-1]
    shape = f"(..., D={D})" if any_leading else f"(B, N, D={D})"
    check_tensor(x, "tokens", shape)
    if x.ndim == 0 or x.shape[-1] != D or not (any_leading or (x.ndim == 3 and x.shape[1] > 0)):
        at_least = "" if any_leading else " with at least one token"
        raise ValueError(f"expected tokens shaped {shape}{at_least}, got {tuple(x.shape)}")
    check_dtype(x, "tokens", weight.dtype)
    check_device(x, "tokens", weight)


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise unless q (..., N_q, d), k (..., N_k, d), v (..., N_k, d_v) are floating-point tensors
    of one dtype and device that fit together: the same leading axes (no silent broadcasting),
    the same width d >= 1 for q and k, and at least one key."""
    for name, tensor in (("q", q), ("k", k), ("v", v)):
        check_tensor(tensor, name, "(..., N, d)")
        check_dtype(tensor, name)
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(
            f"expected q, k, v with the same number of axes (..., N, d), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(
            f"q, k and v need the same leading axes (batch, heads) before (N, d), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same width d, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v need one row per key, got {k.shape[-2]} and {v.shape[-2]} rows")
    if q.shape[-1] == 0 or k.shape[-2] == 0:
        raise ValueError(
            f"expected at least one key and a width d >= 1 (the softmax over no keys, or a scale "
            f"1/sqrt(0), is 0/0), got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if not q.dtype == k.dtype == v.dtype and not torch.is_autocast_enabled(q.device.type):
        raise ValueError(f"q, k and v need one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(f"q, k and v need to be on one device, got {q.device}, {k.device} and {v.device}")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d)) v, written out so that the weights can be returned and drawn.

    Being written out, it builds the (..., N_q, N_k) weights, and when gradients are recorded autograd
    keeps them for the backward pass (4 N_q N_k bytes per head in float32); torch's fused
    F.scaled_dot_product_attention, which MultiHeadSelfAttention runs when no weights are asked for,
    keeps no weights (lesson 3, section 8).

    Args:
        q: (..., N_q, d) queries.
        k: (..., N_k, d) keys.
        v: (..., N_k, d_v) values.
        mask: boolean, True where attention is allowed, broadcastable to (..., N_q, N_k).
        dropout_p: dropout on the weights, a probability in [0, 1) (used by the model in training only).
    Returns:
        out (..., N_q, d_v) and weights (..., N_q, N_k), each row summing to 1 (before dropout).
    Raises:
        ValueError for tensors that do not fit together (see check_qkv), a mask that is not
        boolean, does not broadcast or hides a whole row (check_mask), or a dropout_p outside [0, 1).
        For a query whose every key is hidden the formula gives NaN (0/0) and torch's
        F.scaled_dot_product_attention returns zeros (torch 2.13); this function refuses the mask.
    """
    check_qkv(q, k, v)
    dropout_p = check_probability(dropout_p, "dropout_p")
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (..., N_q, N_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (..., N_q, N_k), rows sum to 1
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., N_q, d_v), (..., N_q, N_k)


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Cut the width of every token into `num_heads` equal slices, one per head.

    Args:
        x: (B, N, D), D divisible by num_heads.
    Returns:
        (B, heads, N, D // heads): each head sees every token, in its own slice of the width.
    """
    check_tensor(x, "x", "(B, N, D)", ndim=3)
    num_heads = check_whole(num_heads, "num_heads")
    B, N, D = x.shape
    if D % num_heads:
        raise ValueError(f"width {D} is not divisible by num_heads {num_heads}")
    return x.reshape(B, N, num_heads, D // num_heads).transpose(1, 2)  # (B, heads, N, head_dim)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Undo split_heads: put the heads' slices side by side again.

    Args:
        x: (B, heads, N, head_dim).
    Returns:
        (B, N, heads * head_dim).
    """
    check_tensor(x, "x", "(B, heads, N, head_dim)", ndim=4)
    B, heads, N, head_dim = x.shape
    return x.transpose(1, 2).reshape(B, N, heads * head_dim)  # (B, N, D)


ATTENTION_IMPLEMENTATIONS = ("auto", "explicit", "fused")


class MultiHeadSelfAttention(nn.Module):
    """Self-attention run in `num_heads` independent subspaces, then merged.

    Two implementations compute the same thing (to float32 rounding, outputs and gradients):
    - "explicit": `scaled_dot_product_attention` above, which builds the (B, heads, N, N)
      softmax weights; it always runs when they are asked for (`return_attention=True`), so the
      weights returned are exactly those softmax weights.
    - "fused": torch's `F.scaled_dot_product_attention`, which never materialises the weights.

    The attribute `implementation` picks one: "explicit", "fused", or "auto" (the default),
    which runs the fused kernel whenever no weights are asked for, in training and in inference
    alike. In `python -m utils.bench` the fused kernel was never slower beyond noise, kept less
    memory for the backward pass (no (N, N) weights) and made the course's ViT at least as fast as
    Hugging Face's; the measurements are in docs/performance.md. So plain inference
    and return_attention=True's output differ by float32 rounding (about 1e-7), not bit for bit;
    compare them with a tolerance. torch's FlopCounterMode has no formula for the CPU fused kernel;
    utils.compute.multiply_adds adds one.

    Args:
        dim: token width D; must be divisible by num_heads.
        num_heads: number of heads; each works in D // num_heads dimensions.
        qkv_bias: bias in the fused query/key/value projection.
        attn_drop: dropout on the attention weights (training only).
        proj_drop: dropout after the output projection.
        qk_norm: a LayerNorm over each head's width on the queries and on the keys, after the split
            into heads and before the scores (timm's `q_norm` and `k_norm`, ViT-22B's qk-layernorm);
            False: none (no tensors).
        norm_eps: the epsilon of those LayerNorms, > 0.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        qk_norm: bool = False,
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        dim, num_heads = check_whole(dim, "dim"), check_whole(num_heads, "num_heads")
        if dim % num_heads:
            divisors = [h for h in range(1, min(dim, 32) + 1) if dim % h == 0]
            raise ValueError(
                f"embed_dim {dim} is not divisible by num_heads {num_heads}: every head needs an "
                f"equal share of the width; head counts that fit: {divisors}"
            )
        self.dim = dim
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.attn_drop = check_probability(attn_drop, "attn_drop")
        self.implementation = "auto"  # "auto", "explicit" or "fused": which code computes attention
        self.qkv = nn.Linear(dim, 3 * dim, bias=check_flag(qkv_bias, "qkv_bias"))  # q, k, v of all heads in one matmul
        self.proj = nn.Linear(dim, dim)  # mixes the heads' outputs
        self.proj_drop = nn.Dropout(check_probability(proj_drop, "proj_drop"))
        if check_flag(qk_norm, "qk_norm"):  # one LayerNorm over the head width, shared by the heads (timm's)
            self.q_norm = nn.LayerNorm(self.head_dim, eps=check_positive(norm_eps, "norm_eps"))
            self.k_norm = nn.LayerNorm(self.head_dim, eps=norm_eps)
        else:
            self.q_norm, self.k_norm = nn.Identity(), nn.Identity()

    def uses_fused(self, return_attention: bool = False) -> bool:
        """Whether forward runs torch's fused kernel: never when the weights are requested, else
        unless implementation is "explicit" ("auto" and "fused": in training and inference alike)."""
        if self.implementation not in ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {ATTENTION_IMPLEMENTATIONS}, got {self.implementation!r}")
        return not return_attention and self.implementation != "explicit"

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        return_attention: bool = False,
        rope: tuple[torch.Tensor, torch.Tensor, int] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, N, D) tokens -> (B, N, D); with return_attention, also the weights (B, heads, N, N).
        rope: None, or (sin, cos, num_prefix_tokens) of utils.rope: q and k of the patch tokens are
        turned by their positions (after qk_norm, before the scores)."""
        check_tokens(x, self.qkv.weight)
        check_flag(return_attention, "return_attention")
        B, N, D = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim)  # (B, N, 3, heads, head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, heads, N, head_dim)
        q, k = self.q_norm(q), self.k_norm(k)  # (B, heads, N, head_dim); identities without qk_norm
        if rope is not None:
            sin, cos, num_prefix_tokens = rope
            q, k = apply_rope(q, sin, cos, num_prefix_tokens), apply_rope(k, sin, cos, num_prefix_tokens)
        dropout_p = check_probability(self.attn_drop, "attn_drop") if self.training else 0.0
        if self.uses_fused(return_attention):
            if mask is not None:
                check_mask(mask, torch.Size((B, self.num_heads, N, N)))
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p
            )  # (B, heads, N, head_dim); the (N, N) weights are never materialised
        else:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, dropout_p=dropout_p
            )  # (B, heads, N, head_dim), (B, heads, N, N)
        out = merge_heads(out)  # heads side by side again: (B, N, D)
        out = self.proj_drop(self.proj(out))  # (B, N, D)
        return (out, weights) if return_attention else out

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}"
