"""Lesson 5: the MLP and the encoder block (attention and MLP, each with a norm and a residual)."""

import torch
from torch import nn

from utils.attention import MultiHeadSelfAttention


class MLP(nn.Module):
    """Two Linear layers with a GELU between them, applied to every token on its own.

    Args:
        dim: token width D (in and out).
        hidden_dim: width of the hidden layer, usually 4 * D.
        dropout: dropout after the activation and after the second layer.
    """

    def __init__(self, dim: int, hidden_dim: int, dropout: float = 0.0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(dropout)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.drop2 = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D)."""
        x = self.drop1(self.act(self.fc1(x)))  # (B, T, hidden_dim)
        return self.drop2(self.fc2(x))  # (B, T, D)


class EncoderBlock(nn.Module):
    """One Transformer encoder block: tokens talk (attention), then think alone (MLP).

    Pre-norm (ViT): x + attn(norm1(x)), then x + mlp(norm2(x)).
    Post-norm (original Transformer): norm1(x + attn(x)), then norm2(x + mlp(x)).

    Args:
        dim: token width D.
        num_heads: attention heads; must divide dim.
        mlp_ratio: MLP hidden width as a multiple of D.
        qkv_bias: bias in the query/key/value projection.
        dropout: dropout after the attention projection and in the MLP.
        attn_dropout: dropout on the attention weights.
        norm_first: pre-norm (True, as in ViT) or post-norm (False).
        norm_eps: LayerNorm epsilon.
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
    ):
        super().__init__()
        self.norm_first = norm_first
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = MultiHeadSelfAttention(dim, num_heads, qkv_bias, attn_dropout, dropout)
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = MLP(dim, int(dim * mlp_ratio), dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        return_attention: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) -> (B, T, D); with return_attention, also the weights (B, heads, T, T)."""
        # the weights are built only when asked for; otherwise attention may take its fast path
        attended = self.attn(self.norm1(x) if self.norm_first else x, mask, return_attention=return_attention)
        if return_attention:
            attended, weights = attended  # (B, T, D), (B, heads, T, T)
        if self.norm_first:
            x = x + attended  # (B, T, D)
            x = x + self.mlp(self.norm2(x))  # (B, T, D)
        else:
            x = self.norm1(x + attended)  # (B, T, D)
            x = self.norm2(x + self.mlp(x))  # (B, T, D)
        return (x, weights) if return_attention else x
