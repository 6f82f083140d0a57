"""Lesson 5: the MLP and the encoder block (attention and MLP, each with a norm and a residual), in
pre-norm or post-norm order, and LayerScale, the per-feature scale that CaiT puts on each branch.
Lesson 5's pre- vs post-norm experiment is in utils/norm_order.py."""

import torch
from torch import nn

from utils.attention import MultiHeadSelfAttention, check_tokens
from utils.validation import check_flag, check_positive, check_probability, check_whole


def mlp_hidden_dim(dim: int, mlp_ratio: float) -> int:
    """The MLP's hidden width int(dim * mlp_ratio); an error unless mlp_ratio > 0 gives at least one unit."""
    hidden = int(dim * check_positive(mlp_ratio, "mlp_ratio"))
    if hidden < 1:
        raise ValueError(f"mlp_ratio {mlp_ratio} gives int({dim} * {mlp_ratio}) = 0 hidden units; it needs at least 1")
    return hidden


ACTIVATIONS = ("gelu", "gelu_tanh", "quick_gelu")  # timm's act_layer names
MLP_KINDS = ("gelu", "swiglu")  # two Linear layers with an activation; or SwiGLU's gated pair


class QuickGELU(nn.Module):
    """x * sigmoid(1.702 x): the sigmoid approximation of GELU that OpenAI's CLIP trained with
    (timm's QuickGELU, act_layer="quick_gelu")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


def activation(name: str) -> nn.Module:
    """The module of an activation named as timm names it: "gelu" (exact, erf), "gelu_tanh" (the
    tanh approximation: the ViT paper's JAX code, SigLIP) or "quick_gelu" (CLIP)."""
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ValueError(f"act must be one of {ACTIVATIONS}, got {name!r}")
    if name == "gelu":
        return nn.GELU()
    return nn.GELU(approximate="tanh") if name == "gelu_tanh" else QuickGELU()


class MLP(nn.Module):
    """Two Linear layers with a GELU between them, applied to every token on its own.

    The GELU is the exact (erf) one, as in timm and Hugging Face; the ViT paper's JAX code uses
    flax's `nn.gelu`, the tanh approximation, which differs from it by less than 5e-4.

    Args:
        dim: token width D (in and out).
        hidden_dim: width of the hidden layer, usually 4 * D.
        dropout: dropout after the activation and after the second layer, in [0, 1).
        act: the activation, "gelu" (default), "gelu_tanh" or "quick_gelu" (see `activation`).
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0, act: str = "gelu"):
        super().__init__()
        dim, hidden_dim = check_whole(dim, "dim"), check_whole(hidden_dim, "hidden_dim")
        dropout = check_probability(dropout, "dropout")
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = activation(act)
        self.drop1 = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D); any leading axes work, (..., D) -> (..., D)."""
        check_tokens(x, self.fc1.weight, any_leading=True)
        x = self.drop1(self.act(self.fc1(x)))  # (B, T, hidden_dim)
        return self.drop2(self.fc2(x))  # (B, T, D)


class SwiGLU(nn.Module):
    """The gated MLP of "GLU Variants Improve Transformer" (Shazeer 2020), in timm's SwiGLU layout:
    fc2(silu(fc1_g(x)) * fc1_x(x)), two D -> hidden projections, the gate and the value, then one back.
    timm's SwiGLUPacked (DINOv2's giant) holds fc1_g and fc1_x stacked as one fc1, the gate first:
    utils.timm_models splits it when it loads one.

    Args:
        dim: token width D (in and out).
        hidden_dim: width of the gate and of the value (timm's hidden_features).
        dropout: dropout after the gating and after fc2, in [0, 1).
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0):
        super().__init__()
        dim, hidden_dim = check_whole(dim, "dim"), check_whole(hidden_dim, "hidden_dim")
        dropout = check_probability(dropout, "dropout")
        self.fc1_g = nn.Linear(dim, hidden_dim)
        self.fc1_x = nn.Linear(dim, hidden_dim)
        self.act = nn.SiLU()
        self.drop1 = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., D)."""
        check_tokens(x, self.fc1_x.weight, any_leading=True)
        x = self.drop1(self.act(self.fc1_g(x)) * self.fc1_x(x))  # (B, T, hidden_dim): gate times value
        return self.drop2(self.fc2(x))  # (B, T, D)


LAYER_SCALE_MEANING = " (LayerScale's starting value; None for no LayerScale)"


class LayerScale(nn.Module):
    """Multiply each feature of a branch's output by its own learned scale (CaiT, Touvron et al.
    2021, "Going deeper with image transformers"); timm's name for the scale, `gamma`.

    Args:
        dim: token width D: one scale per feature.
        init_value: every scale's starting value, > 0 (CaiT: 0.1 up to 18 blocks, 1e-5 at 24,
            1e-6 deeper), so that each branch starts almost silent at any width.
    """

    def __init__(self, dim: int, init_value: float = 1e-5):
        super().__init__()
        dim = check_whole(dim, "dim")
        init_value = check_positive(init_value, "layer_scale", meaning=LAYER_SCALE_MEANING)
        self.gamma = nn.Parameter(torch.full((dim,), init_value))  # (D,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (..., D): feature d times gamma[d]."""
        return x * self.gamma  # (B, T, D) * (D,), broadcast over B and T


class EncoderBlock(nn.Module):
    """One Transformer encoder block: tokens talk (attention), then think alone (MLP).

    Pre-norm (ViT): x + attn(norm1(x)), then x + mlp(norm2(x)).
    Post-norm (original Transformer): norm1(x + attn(x)), then norm2(x + mlp(x)).
    With layer_scale (CaiT): each branch's output is multiplied by its LayerScale first,
    x + ls1(attn(norm1(x))), then x + ls2(mlp(norm2(x))).

    Args:
        dim: token width D.
        num_heads: attention heads; must divide dim.
        mlp_ratio: MLP hidden width as a multiple of D (> 0, at least one hidden unit).
        qkv_bias: bias in the query/key/value projection.
        dropout: dropout after the attention projection and in the MLP, in [0, 1).
        attn_dropout: dropout on the attention weights, in [0, 1).
        norm_first: pre-norm (True, as in ViT: x + attn(norm1(x)), then x + mlp(norm2(x))) or
            post-norm (False, the original Transformer: norm1(x + attn(x)), then norm2(x + mlp(x)));
            a post-norm model needs no final LayerNorm (utils.norm_order.Arm.build).
        norm_eps: LayerNorm epsilon, > 0 (1e-6 as in the ViT paper's JAX code; Hugging Face's
            ports use 1e-12).
        layer_scale: None (ViT: no LayerScale), or the starting value (> 0) of a LayerScale on
            each branch, `ls1` and `ls2` (timm's names; their scales are `ls1.gamma`, `ls2.gamma`).
        act: the MLP's activation, "gelu", "gelu_tanh" or "quick_gelu" (mlp="gelu" only).
        mlp: "gelu", the ViT's two-layer MLP; or "swiglu", SwiGLU's gated MLP (SwiGLU above).
        qk_norm: a LayerNorm on each head's queries and keys (MultiHeadSelfAttention's qk_norm).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        norm_first: bool = True,
        norm_eps: float = 1e-6,
        layer_scale: float | None = None,
        act: str = "gelu",
        mlp: str = "gelu",
        qk_norm: bool = False,
    ):
        super().__init__()
        if not isinstance(mlp, str) or mlp not in MLP_KINDS:
            raise ValueError(f"mlp must be one of {MLP_KINDS}, got {mlp!r}")
        if mlp == "swiglu" and act != "gelu":
            raise ValueError(f"mlp='swiglu' gates with SiLU, its own activation: leave act='gelu', got act={act!r}")
        dim, hidden_dim = check_whole(dim, "dim"), mlp_hidden_dim(dim, mlp_ratio)
        norm_eps = check_positive(norm_eps, "norm_eps")
        check_probability(dropout, "dropout")  # checked here too, so that the errors name this block's arguments
        check_probability(attn_dropout, "attn_dropout")
        self.norm_first = check_flag(norm_first, "norm_first")
        scaled = layer_scale is not None
        if scaled:  # checked before anything is built
            check_positive(layer_scale, "layer_scale", meaning=LAYER_SCALE_MEANING)
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = MultiHeadSelfAttention(dim, num_heads, qkv_bias, attn_dropout, dropout, qk_norm, norm_eps)
        self.ls1 = LayerScale(dim, layer_scale) if scaled else nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = SwiGLU(dim, hidden_dim, dropout) if mlp == "swiglu" else MLP(dim, hidden_dim, dropout, act)
        self.ls2 = LayerScale(dim, layer_scale) if scaled else nn.Identity()

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        return_attention: bool = False,
        rope: tuple[torch.Tensor, torch.Tensor, int] | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D); with return_attention, also the weights (B, heads, T, T).
        rope: (sin, cos, num_prefix_tokens) for rotary positions (utils.rope), passed to attention."""
        check_tokens(x, self.attn.qkv.weight)  # before norm1: pre- and post-norm blocks refuse alike
        # the weights are built only when asked for; otherwise attention may take its fast path
        attended = self.attn(
            self.norm1(x) if self.norm_first else x, mask, return_attention=return_attention, rope=rope
        )
        if return_attention:
            attended, weights = attended  # (B, T, D), (B, heads, T, T)
        attended = self.ls1(attended)  # (B, T, D); unchanged without LayerScale
        if self.norm_first:
            x = x + attended  # (B, T, D)
            x = x + self.ls2(self.mlp(self.norm2(x)))  # (B, T, D)
        else:
            x = self.norm1(x + attended)  # (B, T, D)
            x = self.norm2(x + self.ls2(self.mlp(x)))  # (B, T, D)
        return (x, weights) if return_attention else x
