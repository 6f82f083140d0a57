"""Lesson 7's exercise checker: attention rollout through all the layers of a ViT."""

from collections.abc import Callable

import torch

from utils.checks.core import CheckFailed, call_learner, describe_match, name_known_mistake, summarize
from utils.inspection import attention_rollout

ATOL = 1e-5  # float32 products written another way (einsum, a reduce) differ by ~1e-7

ROLLOUT_CASES = [  # (depth, B, heads, T): depth, B and heads differ, so a wrong shape says which axis
    (1, 2, 3, 6),  # one layer: the heads, the identity and the renormalisation show
    (2, 1, 2, 4),
    (4, 2, 3, 7),  # four layers that do not commute: the order shows
    (3, 1, 1, 10),
    (3, 2, 2, 3),
]


def _with_residual(layers: torch.Tensor) -> torch.Tensor:
    """Add the identity and renormalise the rows: (..., T, T) -> (..., T, T)."""
    layers = layers + torch.eye(layers.shape[-1])
    return layers / layers.sum(dim=-1, keepdim=True)


def _chain(layers: torch.Tensor, later_left: bool = True) -> torch.Tensor:
    """Multiply (depth, B, T, T) into (B, T, T), later layers on the left (or, wrongly, on the right)."""
    rollout = layers[0]
    for layer in layers[1:]:
        rollout = layer @ rollout if later_left else rollout @ layer
    return rollout


def _rollout_variants(attn: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible rollouts, each keyed by the sentence that explains it."""
    mean = attn.mean(dim=2)  # (depth, B, T, T)
    fixed = _with_residual(mean)  # the right per-layer matrices
    plus_eye = mean + torch.eye(attn.shape[-1])
    return {
        "the residual identity is missing: add torch.eye(T) to each layer's head-averaged weights "
        "(the skip connection carries every token's own state on), then renormalise the rows": _chain(mean),
        "you added the identity but did not renormalise: each row of (A + I) sums to 2; divide "
        "every row by its sum (dim=-1) so that it sums to 1 again": _chain(plus_eye),
        "you renormalised the columns: divide each row by its own sum, .sum(dim=-1, keepdim=True)":
            _chain(plus_eye / plus_eye.sum(dim=-2, keepdim=True)),
        "the layers are multiplied in the wrong order: the first layer acts first, so it sits on "
        "the right (rollout = layer @ rollout, not rollout @ layer)": _chain(fixed, later_left=False),
        "you multiplied the layers elementwise (*); chain them with the matrix product @": fixed.prod(dim=0),
        "you returned only the last layer's matrix: multiply all the layers together": fixed[-1],
        "you returned only the first layer's matrix: the loop must update it (rollout = layer @ rollout)":
            fixed[0],
        "you averaged the layers' matrices; rollout multiplies them (rollout = layer @ rollout)": fixed.mean(dim=0),
        "the heads are summed, not averaged: use .mean(dim=2)": _chain(_with_residual(attn.sum(dim=2))),
        "you used only head 0: average all the heads, .mean(dim=2)": _chain(_with_residual(attn[:, :, 0])),
        "your rollout is transposed: row i must hold how much token i draws on each token, and sum to 1":
            _chain(fixed).transpose(-2, -1),
    }  # fmt: skip


def check_attention_rollout(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Check a learner's attention_rollout(attn): (depth, B, heads, T, T) -> (B, T, T)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for depth, B, heads, T in ROLLOUT_CASES:
        scores = 2 * torch.randn(depth, B, heads, T, T, generator=generator)  # peaked rows, like a trained ViT
        attn = scores.softmax(dim=-1)  # (depth, B, heads, T, T), each row sums to 1
        expected = attention_rollout(attn)  # (B, T, T)
        got = call_learner(fn, attn.clone())
        where = f"for attn of shape {(depth, B, heads, T, T)}"
        if got.shape != expected.shape:
            shape = tuple(got.shape)
            hint = ""
            if shape == (depth, B, T, T):
                hint = ": you kept one matrix per layer; multiply the layers into one"
            elif shape == (B, heads, T, T):
                hint = ": the heads are still there; average them (dim=2) before multiplying the layers"
            elif shape == (B, T):
                hint = ": return the whole rollout, not only the class token's row"
            raise CheckFailed(f"expected (B, T, T) = {tuple(expected.shape)}, got {shape} {where}{hint}")
        try:
            verdicts.append(describe_match(got, expected, atol=ATOL))
        except CheckFailed as failure:
            name_known_mistake(got, _rollout_variants(attn), where)
            raise CheckFailed(
                f"{failure} {where}; go through the steps: average the heads, add the identity, "
                "renormalise the rows, multiply the layers with later ones on the left"
            ) from None
    print(f"✓ attention_rollout matches the reference on {len(verdicts)} cases: {summarize(verdicts)}")
