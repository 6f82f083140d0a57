"""Lesson 7's checker passes the reference, accepts equivalent answers and names each typical mistake."""

import functools

import pytest
import torch

from utils.checks.core import CheckFailed
from utils.checks.inspection import check_attention_rollout
from utils.inspection import attention_rollout


def per_layer(attn, heads=lambda a: a.mean(dim=2), residual=True, rows=True):
    """Each layer's (depth, B, T, T) matrix, written out by hand with switches for the mistakes."""
    layers = heads(attn)
    if residual:
        layers = layers + torch.eye(attn.shape[-1])
        if rows:
            layers = layers / layers.sum(dim=-1, keepdim=True)
    return layers


def multiplied(layers, later_left=True):
    """layer_k @ ... @ layer_0 (or, wrongly, layer_0 @ ... @ layer_k)."""
    if later_left:
        return functools.reduce(lambda rollout, layer: layer @ rollout, layers)
    return functools.reduce(lambda rollout, layer: rollout @ layer, layers)


def einsum_rollout(attn):
    """A correct rollout written differently: 0.5 A + 0.5 I (rows of softmax weights sum to 1), einsum,
    and an identity to start from."""
    layers = 0.5 * torch.einsum("lbhqk->lbqk", attn) / attn.shape[2] + 0.5 * torch.eye(attn.shape[-1])
    rollout = torch.eye(attn.shape[-1]).expand_as(layers[0])
    for layer in layers:
        rollout = torch.einsum("bij,bjk->bik", layer, rollout)
    return rollout


def test_check_attention_rollout_passes_the_reference_and_equivalents(capsys):
    check_attention_rollout(attention_rollout)
    assert "✓ attention_rollout matches the reference on 5 cases: exact" in capsys.readouterr().out
    check_attention_rollout(einsum_rollout)
    check_attention_rollout(lambda attn: multiplied(per_layer(attn)))
    assert capsys.readouterr().out.count("✓ attention_rollout") == 2


def wrong_cases():
    def columns(attn):
        layers = attn.mean(dim=2) + torch.eye(attn.shape[-1])
        return multiplied(layers / layers.sum(dim=-2, keepdim=True))

    return [
        (lambda a: multiplied(per_layer(a, residual=False)), "residual identity is missing"),
        (lambda a: multiplied(per_layer(a, rows=False)), "added the identity but did not renormalise"),
        (columns, "renormalised the columns"),
        (lambda a: multiplied(per_layer(a), later_left=False), "multiplied in the wrong order"),
        (lambda a: per_layer(a).prod(dim=0), r"elementwise \(\*\)"),
        (lambda a: per_layer(a)[-1], "only the last layer's matrix"),
        (lambda a: per_layer(a)[0], "only the first layer's matrix"),
        (lambda a: per_layer(a).mean(dim=0), "averaged the layers' matrices"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a.sum(dim=2))), "heads are summed, not averaged"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a[:, :, 0])), "only head 0"),
        (lambda a: attention_rollout(a).transpose(-2, -1), "rollout is transposed"),
        (lambda a: attention_rollout(a) * 1.01, "max difference .* go through the steps"),
    ]


@pytest.mark.parametrize("wrong, words", wrong_cases())
def test_check_attention_rollout_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_rollout(wrong)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda a: per_layer(a), r"expected \(B, T, T\) = \(2, 6, 6\), got \(1, 2, 6, 6\) .* one matrix per layer"),
        (lambda a: multiplied(per_layer(a, heads=lambda a: a)), r"got \(2, 3, 6, 6\) .* heads are still there"),
        (lambda a: attention_rollout(a)[:, 0], r"got \(2, 6\) .* not only the class token's row"),
        (lambda a: attention_rollout(a)[0], r"expected \(B, T, T\) = \(2, 6, 6\), got \(6, 6\) for attn"),
    ],
)
def test_check_attention_rollout_names_a_wrong_shape(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_attention_rollout(wrong)


def test_check_attention_rollout_turns_errors_into_failures():
    with pytest.raises(CheckFailed, match="your function raised RuntimeError"):
        check_attention_rollout(lambda a: a.view(3, 7))
    with pytest.raises(CheckFailed, match="expected a torch.Tensor"):
        check_attention_rollout(lambda a: attention_rollout(a).tolist())


def test_check_attention_rollout_lets_the_blank_exercise_raise():
    def blank(attn):
        raise NotImplementedError("write attention_rollout")

    with pytest.raises(NotImplementedError):
        check_attention_rollout(blank)
