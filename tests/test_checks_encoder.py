"""Lesson 5's checkers pass the reference and name each typical mistake in words."""

import numpy as np
import pytest
import torch

from utils import ViTConfig
from utils.checks.core import CheckFailed
from utils.checks.encoder import (
    COUNT_CASES,
    check_count_vit_parameters,
    check_encoder_block,
    reference_parameter_count,
)

# ---- the encoder block -------------------------------------------------------------------


def pre_norm_block(x, norm1, attn, norm2, mlp):
    x = x + attn(norm1(x))
    return x + mlp(norm2(x))


def no_attention_residual(x, norm1, attn, norm2, mlp):
    x = attn(norm1(x))
    return x + mlp(norm2(x))


def no_mlp_residual(x, norm1, attn, norm2, mlp):
    x = x + attn(norm1(x))
    return mlp(norm2(x))


def no_residual(x, norm1, attn, norm2, mlp):
    return mlp(norm2(attn(norm1(x))))


def post_norm_block(x, norm1, attn, norm2, mlp):
    x = norm1(x + attn(x))
    return norm2(x + mlp(x))


def swapped_norms(x, norm1, attn, norm2, mlp):
    return pre_norm_block(x, norm2, attn, norm1, mlp)


def mlp_first(x, norm1, attn, norm2, mlp):
    x = x + mlp(norm2(x))
    return x + attn(norm1(x))


def mlp_first_norms_in_order(x, norm1, attn, norm2, mlp):
    x = x + mlp(norm1(x))
    return x + attn(norm2(x))


def normed_residual(x, norm1, attn, norm2, mlp):
    x = norm1(x)
    x = x + attn(x)
    return x + mlp(norm2(x))


def norms_on_outputs(x, norm1, attn, norm2, mlp):
    x = x + norm1(attn(x))
    return x + norm2(mlp(x))


@pytest.mark.parametrize(
    "wrong, words",
    [
        (no_attention_residual, "forgot the residual connection around attention"),
        (no_mlp_residual, "forgot the residual connection around the MLP"),
        (no_residual, "forgot both residual connections"),
        (post_norm_block, "post-norm order"),
        (swapped_norms, "norm1 and norm2 are swapped"),
        (mlp_first, "MLP ran before attention"),
        (mlp_first_norms_in_order, "MLP ran before attention"),
        (normed_residual, "residual adds the normalised tokens"),
        (norms_on_outputs, "norms sit on the sub-layers' outputs"),
        (lambda *args: pre_norm_block(*args)[:, 0], r"expected shape .* \(B, T, D\)"),
        (lambda *args: pre_norm_block(*args) * 1.01, "max difference"),
        (lambda x, *modules: x.view(-1, 7, 3, 5), "your function raised RuntimeError"),
        (lambda *args: pre_norm_block(*args).tolist(), "expected a torch.Tensor"),
    ],
)
def test_check_encoder_block_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_encoder_block(wrong)


def test_check_encoder_block_passes_the_reference(capsys):
    check_encoder_block(pre_norm_block)
    assert "exact" in capsys.readouterr().out


# ---- counting parameters -----------------------------------------------------------------


def count(
    config,
    biases=True,
    norm_biases=True,
    cls=True,
    pos=True,
    final_norm=True,
    qkv=3,
    head=True,
    mean_cls=False,
    sincos_pos=False,
    qkv_bias_always=False,
    norms_per_block=2,
):
    """The parameter count of a ViTConfig, with switches that make the typical mistakes."""
    D, C, P, K = config.embed_dim, config.in_channels, config.patch_size, config.num_classes
    H = int(D * config.mlp_ratio)
    b = 1 if biases else 0
    with_cls = config.pool == "cls" or mean_cls
    total = C * P * P * D + b * D  # patch embedding
    total += D if cls and with_cls else 0  # class token
    if pos and (config.pos_embed == "learned" or (sincos_pos and config.pos_embed == "sincos")):
        total += (config.num_patches + with_cls) * D  # position table
    qkv_bias = b * (config.qkv_bias or qkv_bias_always)
    block = qkv * D * D + qkv_bias * qkv * D + D * D + b * D  # attention: qkv, proj
    block += D * H + b * H + H * D + b * D  # MLP: fc1, fc2
    block += norms_per_block * (D + (D if norm_biases else 0))  # norm1, norm2
    total += config.depth * block
    total += (D + (D if norm_biases else 0)) if final_norm else 0
    total += D * K + b * K if head else 0
    return total


def test_the_count_helper_is_right_on_every_case():
    for config in COUNT_CASES:
        assert count(config) == reference_parameter_count(config), config


def test_vit_b16_has_86_567_656_parameters():
    assert reference_parameter_count(ViTConfig.vit_b16()) == 86_567_656


@pytest.mark.parametrize(
    "mistake, words",
    [
        (dict(biases=False, norm_biases=False), r"forgot the biases \(every Linear"),
        (dict(biases=False), "forgot the biases of the Linear layers"),
        (dict(norm_biases=False), "forgot the LayerNorms' biases"),
        (dict(cls=False), "forgot the class token"),
        (dict(pos=False), "forgot the learned position table"),
        (dict(cls=False, pos=False), "forgot the class token and the position table"),
        (dict(final_norm=False), "forgot the final LayerNorm"),
        (dict(qkv=1), r"counted qkv as D\*D"),
        (dict(head=False), "forgot the classification head"),
        (dict(norms_per_block=1), "two LayerNorms"),
        (dict(mean_cls=True), "pool='mean' has no class token"),
        (dict(sincos_pos=True), "'sincos' is a fixed table"),
        (dict(qkv_bias_always=True), "qkv_bias=False"),
    ],
)
def test_check_count_vit_parameters_names_the_mistake(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        check_count_vit_parameters(lambda config: count(config, **mistake))


def test_check_count_vit_parameters_names_qkv_weights_counted_as_d_squared():
    def qkv_weights_d_squared(config):
        D = config.embed_dim
        return count(config) - config.depth * 2 * D * D

    with pytest.raises(CheckFailed, match=r"counted qkv's weights as D\*D"):
        check_count_vit_parameters(qkv_weights_d_squared)


def test_check_count_vit_parameters_reports_an_unknown_error_by_its_size():
    with pytest.raises(CheckFailed, match=r"off by \+1\b"):
        check_count_vit_parameters(lambda config: count(config) + 1)


def test_check_count_vit_parameters_passes_the_right_formula(capsys):
    check_count_vit_parameters(count)
    assert "✓" in capsys.readouterr().out
    check_count_vit_parameters(lambda config: float(count(config)))  # 86567656.0 is fine too
    check_count_vit_parameters(lambda config: np.int64(count(config)))
    check_count_vit_parameters(lambda config: torch.tensor(count(config)))


def test_check_count_vit_parameters_wants_an_int():
    with pytest.raises(CheckFailed, match="expected an int"):
        check_count_vit_parameters(lambda config: f"{count(config):,}")
    with pytest.raises(CheckFailed, match="your function raised ZeroDivisionError"):
        check_count_vit_parameters(lambda config: 1 // 0)
