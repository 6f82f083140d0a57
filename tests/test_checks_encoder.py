"""Lesson 5's checkers pass the reference, name each typical mistake in words, and turn whatever
else comes back into a failure that says what came."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from checker_cases import assert_each_named_as_itself
from torch import nn

from utils import VisionTransformer, ViTConfig
from utils.checks.core import CheckFailed
from utils.checks.encoder import (
    COUNT_CASES,
    COUNT_MISTAKES,
    check_count_vit_parameters,
    check_layer_scale_block,
    check_post_norm_block,
    parameter_count,
    reference_parameter_count,
)

# ---- the LayerScale block --------------------------------------------------------------------


def layer_scale_block(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(norm1(x))
    return x + gamma2 * mlp(norm2(x))


def no_gammas(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + attn(norm1(x))
    return x + mlp(norm2(x))


def no_gamma1(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + attn(norm1(x))
    return x + gamma2 * mlp(norm2(x))


def no_gamma2(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(norm1(x))
    return x + mlp(norm2(x))


def swapped_gammas(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return layer_scale_block(x, norm1, attn, gamma2, norm2, mlp, gamma1)


def gamma1_twice(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return layer_scale_block(x, norm1, attn, gamma1, norm2, mlp, gamma1)


def gamma2_twice(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return layer_scale_block(x, norm1, attn, gamma2, norm2, mlp, gamma2)


def scaled_stream(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = gamma1 * (x + attn(norm1(x)))
    return gamma2 * (x + mlp(norm2(x)))


def scaled_input(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = gamma1 * x + attn(norm1(x))
    return gamma2 * x + mlp(norm2(x))


def scale_before_the_norm(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + attn(norm1(gamma1 * x))
    return x + mlp(norm2(gamma2 * x))


def scale_after_the_norm(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + attn(gamma1 * norm1(x))
    return x + mlp(gamma2 * norm2(x))


def gamma_added(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + (attn(norm1(x)) + gamma1)
    return x + (mlp(norm2(x)) + gamma2)


def post_norm_block(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = norm1(x + gamma1 * attn(x))
    return norm2(x + gamma2 * mlp(x))


def parallel_block(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return x + gamma1 * attn(norm1(x)) + gamma2 * mlp(norm2(x))


def no_attention_residual(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = gamma1 * attn(norm1(x))
    return x + gamma2 * mlp(norm2(x))


def no_mlp_residual(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(norm1(x))
    return gamma2 * mlp(norm2(x))


def no_residual(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return gamma2 * mlp(norm2(gamma1 * attn(norm1(x))))


def one_residual_around_the_block(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return x + gamma2 * mlp(norm2(gamma1 * attn(norm1(x))))


def mlp_residual_adds_the_input(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    h = x + gamma1 * attn(norm1(x))
    return x + gamma2 * mlp(norm2(h))


def normed_residual(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = norm1(x)
    x = x + gamma1 * attn(x)
    return x + gamma2 * mlp(norm2(x))


def norms_on_outputs(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * norm1(attn(x))
    return x + gamma2 * norm2(mlp(x))


def no_norm1(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(x)
    return x + gamma2 * mlp(norm2(x))


def no_norm2(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(norm1(x))
    return x + gamma2 * mlp(x)


def no_norms(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(x)
    return x + gamma2 * mlp(x)


def swapped_norms(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return layer_scale_block(x, norm2, attn, gamma1, norm1, mlp, gamma2)


def mlp_first(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma2 * mlp(norm2(x))
    return x + gamma1 * attn(norm1(x))


def attention_half_only(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    return x + gamma1 * attn(norm1(x))


def attn_as_a_tuple(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * attn(norm1(x))[0]  # as if attn returned (out, weights)
    return x + gamma2 * mlp(norm2(x))


def dropout_in_eval(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1 * F.dropout(attn(norm1(x)), p=0.1)
    return x + gamma2 * F.dropout(mlp(norm2(x)), p=0.1)


def attn_called_like_torch(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    h = norm1(x)
    x = x + gamma1 * attn(h, h, h)[0]  # nn.MultiheadAttention's (query, key, value)
    return x + gamma2 * mlp(norm2(x))


def gamma_on_the_token_axis(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + gamma1[:, None] * attn(norm1(x))  # (D, 1): one scale per token, as if the tokens were features
    return x + gamma2[:, None] * mlp(norm2(x))


def gamma_with_matmul(x, norm1, attn, gamma1, norm2, mlp, gamma2):
    x = x + attn(norm1(x)) @ gamma1  # (B, T): a dot product, not a scale per feature
    return x + mlp(norm2(x)) @ gamma2


BLOCK_MISTAKES = [  # the typical wrong blocks, and the words that name each mistake
    (no_gammas, "^you left out gamma1 and gamma2: that is the plain pre-norm block"),
    (no_gamma1, "^gamma1 is missing: attention's output is scaled too"),
    (no_gamma2, "^gamma2 is missing: the MLP's output is scaled too"),
    (swapped_gammas, "^gamma1 and gamma2 are swapped"),
    (gamma1_twice, "^you used gamma1 for the MLP too"),
    (gamma2_twice, "^you used gamma2 for attention too"),
    (scaled_stream, "^you scaled the whole stream, the residual too"),
    (scaled_input, "^you scaled the block's input x instead of the branch"),
    (scale_before_the_norm, r"^gamma scales the branch's output, not its input: .* not attn\(norm1\(gamma1 \* x\)\)"),
    (scale_after_the_norm, "^gamma scales the branch's output, not its normalised input"),
    (gamma_added, "^gamma is added to the branch's output; LayerScale multiplies it"),
    (post_norm_block, "^that is the post-norm order"),
    (parallel_block, r"^attention and the MLP both read the block's input x \(a parallel block, as in ViT-22B\)"),
    (no_attention_residual, "^you forgot the residual connection around attention"),
    (no_mlp_residual, "^you forgot the residual connection around the MLP"),
    (no_residual, "^you forgot both residual connections"),
    (one_residual_around_the_block, "^you put one residual connection around the whole block"),
    (mlp_residual_adds_the_input, "^the MLP's residual adds the block's input x"),
    (normed_residual, "^the residual adds the normalised tokens"),
    (norms_on_outputs, "^the norms sit on the branches' outputs"),
    (no_norm1, "^norm1 is missing"),
    (no_norm2, "^norm2 is missing"),
    (no_norms, "^both norms are missing"),
    (swapped_norms, "^norm1 and norm2 are swapped"),
    (mlp_first, "^the MLP ran before attention"),
    (attention_half_only, "^the MLP half is missing"),
    (lambda x, *args: x, "^your block returns the tokens unchanged"),
    (attn_as_a_tuple, r"^attn returns the new tokens \(B, T, D\), not a tuple"),
    (dropout_in_eval, "another result each time on the same tokens .* is there a dropout"),
    (attn_called_like_torch, r"^your function raised WrongTypeError .*: attn takes the normalised tokens only"),
    (gamma_on_the_token_axis, r"^your function raised RuntimeError .*\(gamma1 and gamma2 hold one number per feature"),
    (gamma_with_matmul, r"^your function raised RuntimeError .*\(gamma1 and gamma2 hold one number per feature"),
]


@pytest.mark.parametrize("wrong, words", BLOCK_MISTAKES)
def test_check_layer_scale_block_names_the_mistake(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_layer_scale_block(wrong)


def test_no_block_mistake_is_named_as_another():
    assert_each_named_as_itself(check_layer_scale_block, BLOCK_MISTAKES)


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda *args: layer_scale_block(*args)[:, 0], r"expected shape .* \(B, T, D\)"),
        (lambda *args: layer_scale_block(*args) * 1.01, "max difference"),
        (lambda x, *modules: x.view(-1, 7, 3, 5), "your function raised RuntimeError"),
        (lambda *args: layer_scale_block(*args).tolist(), "expected a torch.Tensor"),
        (lambda *args: None, "expected a torch.Tensor, got None"),
        (lambda *args: 1.0, "expected a torch.Tensor, got float"),
        (lambda x, norm1, attn, *rest: attn, "expected a torch.Tensor, got MultiHeadSelfAttention"),
        (lambda *args: layer_scale_block(*args).long(), r"expected a float32 tensor, got int64 for tokens"),
        (lambda *args: layer_scale_block(*args) > 0, r"expected a float32 tensor, got bool"),
        (lambda *args: layer_scale_block(*args) / 0 * 0, r"^160 of 160 values are NaN for tokens"),
        (lambda *args: layer_scale_block(*args) + math.inf, r"values are infinite"),
        (lambda *args: layer_scale_block(*args)[None], r"expected shape .*: a block maps \(B, T, D\) tokens"),
    ],
)
def test_check_layer_scale_block_says_what_came(wrong, words):
    with pytest.raises(CheckFailed, match=words):
        check_layer_scale_block(wrong)


def test_a_blank_exercise_passes_through():
    def blank(x, norm1, attn, gamma1, norm2, mlp, gamma2):
        raise NotImplementedError("Hint: start from the pre-norm block")

    with pytest.raises(NotImplementedError, match="Hint: start from"):
        check_layer_scale_block(blank)


def test_check_layer_scale_block_passes_the_reference(capsys):
    check_layer_scale_block(layer_scale_block)
    check_layer_scale_block(lambda *args: layer_scale_block(*args).requires_grad_())
    check_layer_scale_block(lambda *args: layer_scale_block(*args).double())  # the values are compared

    def with_diagonal_matrices(x, norm1, attn, gamma1, norm2, mlp, gamma2):  # the same scale, as a matrix
        x = x + attn(norm1(x)) @ torch.diag(gamma1)
        return x + mlp(norm2(x)) @ torch.diag(gamma2)

    def in_place(x, norm1, attn, gamma1, norm2, mlp, gamma2):  # changes the copies it was given only
        x += attn(norm1(x)).mul_(gamma1)
        return x.add_(mlp(norm2(x)) * gamma2)

    check_layer_scale_block(with_diagonal_matrices)
    check_layer_scale_block(in_place)
    out = capsys.readouterr().out
    assert out.count("✓ layer_scale_block matches utils.EncoderBlock(layer_scale=...) on 3 random blocks: ") == 5
    assert out.count("random blocks: exact") >= 3


def test_the_reference_is_an_independent_formula():
    """The checker's reference, utils.EncoderBlock(layer_scale=...), equals the formula written out."""
    from utils.checks.encoder import BLOCK_CASES, _random_block

    generator = torch.Generator().manual_seed(1)
    for B, T, D, heads, mlp_ratio in BLOCK_CASES:
        block = _random_block(D, heads, mlp_ratio, generator)
        x = torch.randn(B, T, D, generator=generator)
        with torch.no_grad():
            by_hand = layer_scale_block(
                x, block.norm1, block.attn, block.ls1.gamma, block.norm2, block.mlp, block.ls2.gamma
            )
            torch.testing.assert_close(block(x), by_hand, atol=1e-6, rtol=1e-6)
            assert not torch.allclose(block.ls1.gamma, block.ls2.gamma)


# ---- counting parameters -----------------------------------------------------------------


def count(
    config,
    biases=True,
    norm_biases=True,
    conv_bias=True,
    cls=True,
    cls_row=True,
    pos=True,
    final_norm=True,
    qkv=3,
    qkv_bias_always=False,
    qkv_bias_never=False,
    proj=True,
    head=True,
    head_bias=True,
    mean_cls=False,
    sincos_pos=False,
    none_pos=False,
    norms_per_block=2,
    mlp_ratio=None,
    in_channels=None,
    depth=None,
    square=False,
):
    """The parameter count of a ViTConfig as a learner writes it, with switches that make the typical
    mistakes (mlp_ratio, in_channels, depth: a fixed value used whatever the config says; square:
    (image_size // P) ** 2 patches)."""
    D, P, K = config.embed_dim, config.patch_size, config.num_classes
    C = in_channels or config.in_channels
    H = int(D * (mlp_ratio or config.mlp_ratio))
    N = (config.image_size // P) ** 2 if square else config.num_patches
    b = 1 if biases else 0
    with_cls = config.pool == "cls" or mean_cls
    total = C * P * P * D + (b * D if conv_bias else 0)  # patch embedding
    total += D if cls and with_cls else 0  # class token
    counted = {"learned": pos, "sincos": sincos_pos, "none": none_pos}[config.pos_embed]
    total += (N + (with_cls and cls_row)) * D if counted else 0  # position table
    qkv_bias = b * (config.qkv_bias or qkv_bias_always) * (not qkv_bias_never)
    block = qkv * D * D + qkv_bias * qkv * D + (D * D + b * D if proj else 0)  # attention: qkv, proj
    block += D * H + b * H + H * D + b * D  # MLP: fc1, fc2
    block += norms_per_block * (D + (D if norm_biases else 0))  # norm1, norm2
    total += (depth or config.depth) * block
    total += (D + (D if norm_biases else 0)) if final_norm else 0
    total += D * K + (b * K if head_bias else 0) if head else 0
    return total


def test_the_count_helpers_are_right_on_every_case():
    for config in COUNT_CASES:
        assert count(config) == reference_parameter_count(config), config
        assert parameter_count(config) == reference_parameter_count(config), config


def test_the_cases_include_a_rectangular_image_and_every_pos_embed():
    assert any(isinstance(config.image_size, tuple) for config in COUNT_CASES)
    assert {config.pos_embed for config in COUNT_CASES} == {"learned", "sincos", "none"}
    assert {config.pool for config in COUNT_CASES} == {"cls", "mean"}


def test_vit_b16_has_86_567_656_parameters():
    assert reference_parameter_count(ViTConfig.vit_b16()) == 86_567_656


def test_every_counting_mistake_changes_some_count():
    right = [reference_parameter_count(config) for config in COUNT_CASES]
    for name in COUNT_MISTAKES:
        assert [parameter_count(config, frozenset([name])) for config in COUNT_CASES] != right, name


def height_only(config):
    """N from the height alone, (H // P) ** 2, as if every image were square."""
    side = config.image_size[0] if isinstance(config.image_size, tuple) else config.image_size
    tokens = (side // config.patch_size) ** 2 + (config.pool == "cls")
    return count(config) + (tokens - config.num_tokens) * config.embed_dim * (config.pos_embed == "learned")


COUNT_LEARNERS = [  # (the switches of a learner's count, the words that name the mistake)
    (dict(biases=False, norm_biases=False), r"forgot the biases \(every Linear"),
    (dict(biases=False), "forgot the biases of the Linear layers"),
    (dict(norm_biases=False), "forgot the LayerNorms' biases"),
    (dict(conv_bias=False), r"you forgot the patch-embedding Conv2d's bias \(D numbers.*the class token or the class "),
    (dict(cls=False), r"^\S+ for .*: you forgot the class token \(D numbers\) \(the Conv2d's bias or"),
    (dict(cls_row=False), r"^\S+ for .*\): the position table has a row for the class token too"),
    (dict(pos=False), r"^\S+ for .*: you forgot the learned position table"),
    (dict(cls=False, pos=False), "forgot the class token .*; and you forgot the learned position table"),
    (dict(final_norm=False), "forgot the final LayerNorm"),
    (dict(norms_per_block=0, final_norm=False), r"you forgot the LayerNorms: two in every block"),
    (dict(norms_per_block=1), "two LayerNorms"),
    (dict(qkv=1), r"counted qkv as D\*D"),
    (dict(qkv_bias_never=True), "you left out qkv's bias"),
    (dict(qkv_bias_always=True), "qkv_bias=False: the qkv Linear has no bias"),
    (dict(proj=False), "you forgot attention's output projection"),
    (dict(head=False), "forgot the classification head"),
    (dict(head_bias=False), r"you forgot the head's bias \(num_classes numbers\)"),
    (dict(mean_cls=True), "pool='mean' has no class token"),
    (dict(sincos_pos=True), r"pos_embed='sincos' is a fixed table \(a buffer, not a parameter\)"),
    (dict(none_pos=True), "pos_embed='none' has no position table"),
    (dict(none_pos=True, sincos_pos=True), r"^\S+ for .*\): only pos_embed='learned' has a position table"),
    (  # the class token's row left out instead gives the same counts: both are offered
        dict(none_pos=True, sincos_pos=True, cls=False),
        r"these mistakes give your counts alike: you forgot the class token .*; and only pos_embed='learned'.*; or ",
    ),
    (dict(mlp_ratio=4.0), r"you used 4 \* D whatever mlp_ratio is"),
    (dict(in_channels=3), "you used C = 3 whatever in_channels is"),
    (dict(depth=1), "you counted one block"),
    (dict(square=True), r"raised TypeError .*image_size can be a pair \(H, W\): N = \(H // P\) \* \(W // P\)"),
]


@pytest.mark.parametrize("mistake, words", COUNT_LEARNERS)
def test_check_count_vit_parameters_names_the_mistake(mistake, words):
    with pytest.raises(CheckFailed, match=words):
        check_count_vit_parameters(lambda config: count(config, **mistake))


def test_no_counting_mistake_is_named_as_another():
    learners = [(lambda config, mistake=mistake: count(config, **mistake), words) for mistake, words in COUNT_LEARNERS]
    assert_each_named_as_itself(check_count_vit_parameters, learners)


def test_check_count_vit_parameters_names_a_square_image_assumed():
    with pytest.raises(CheckFailed, match=r"the image need not be square: image_size can be a pair \(H, W\)"):
        check_count_vit_parameters(height_only)


def test_check_count_vit_parameters_names_qkv_weights_counted_as_d_squared():
    def qkv_weights_d_squared(config):
        D = config.embed_dim
        return count(config) - config.depth * 2 * D * D

    with pytest.raises(CheckFailed, match=r"counted qkv's weights as D\*D"):
        check_count_vit_parameters(qkv_weights_d_squared)


def test_a_count_short_by_d_lists_the_three_d_sized_candidates():
    """Short by D on ViT-B/16 and right on the other configs: no single mistake does that, so the
    checker names no mistake but lists the three D-sized things."""

    def short_on_vit_b16(config):
        return count(config) - (config.embed_dim if config == ViTConfig.vit_b16() else 0)

    with pytest.raises(CheckFailed) as failure:
        check_count_vit_parameters(short_on_vit_b16)
    message = str(failure.value)
    assert "(off by -768): short by D = 768" in message
    assert "the class token, its row in the position table and the patch-embedding Conv2d's bias" in message


def test_two_mistakes_that_give_the_same_counts_are_both_offered():
    with pytest.raises(CheckFailed, match="these mistakes give your counts alike: .*; or "):
        check_count_vit_parameters(lambda config: count(config, norm_biases=False, conv_bias=False))


def test_check_count_vit_parameters_reports_an_unknown_error_by_its_size():
    with pytest.raises(CheckFailed, match=r"off by \+1\)$"):
        check_count_vit_parameters(lambda config: count(config) + 1)


def test_check_count_vit_parameters_passes_the_right_formula(capsys):
    check_count_vit_parameters(count)
    assert "✓ count_vit_parameters matches VisionTransformer on 6 configs, ViT-B/16 included" in capsys.readouterr().out
    check_count_vit_parameters(lambda config: float(count(config)))  # 86567656.0 is fine too
    check_count_vit_parameters(lambda config: np.int64(count(config)))
    check_count_vit_parameters(lambda config: torch.tensor(count(config)))
    check_count_vit_parameters(lambda config: sum(p.numel() for p in nn.Linear(1, 1).parameters()) * 0 + count(config))
    check_count_vit_parameters(lambda config: torch.tensor([count(config)]))
    check_count_vit_parameters(lambda config: np.array(count(config)))
    assert capsys.readouterr().out.count("✓ count_vit_parameters matches VisionTransformer on 6 configs") == 6


def count_on_the_meta_device(config):
    """As lesson 5 counts ViT-B/16: the model built on the meta device (shapes only, no memory)."""
    with torch.device("meta"):
        model = VisionTransformer(config)
    return sum(p.numel() for p in model.parameters())


def test_a_count_of_a_model_built_on_the_meta_device_passes(capsys):
    check_count_vit_parameters(count_on_the_meta_device)
    assert capsys.readouterr().out.startswith("✓ count_vit_parameters matches VisionTransformer on 6 configs")


def test_a_count_that_is_a_tensor_on_the_meta_device_is_named():
    def on_meta(config):
        with torch.device("meta"):
            return torch.tensor(count(config))

    with pytest.raises(
        CheckFailed, match=r"^the parameter count is a tensor on the meta device for ViTConfig\(.*p.numel"
    ):
        check_count_vit_parameters(on_meta)


@pytest.mark.parametrize(
    "learner, words",
    [
        (lambda config: f"{count(config):,}", r"^the parameter count must be a whole number, got str '86,567,656' for"),
        (lambda config: 1 // 0, "your function raised ZeroDivisionError"),
        (lambda config: None, r"^the parameter count must be a whole number, got None"),
        (lambda config: True, r"^the parameter count must be a whole number, got bool True"),
        (lambda config: count(config) + 0.5, r"^the parameter count must be a whole number, got 86567656.5 for"),
        (lambda config: math.nan, r"^the parameter count must be a whole number, got nan for"),
        (lambda config: torch.zeros(3), r"^the parameter count must be a whole number, got Tensor .*\(3,\)"),
        (lambda config: nn.Linear(2, 2), r"^the parameter count must be a whole number, got Linear"),
    ],
)
def test_check_count_vit_parameters_wants_an_int(learner, words):
    with pytest.raises(CheckFailed, match=words):
        check_count_vit_parameters(learner)


def test_a_crash_after_a_wrong_count_reports_the_wrong_count():
    def crashes_on_the_pair(config):
        if isinstance(config.image_size, tuple):
            raise TypeError("unsupported operand type(s) for //: 'tuple' and 'int'")
        return count(config, head_bias=False)

    with pytest.raises(CheckFailed, match="you forgot the head's bias"):
        check_count_vit_parameters(crashes_on_the_pair)


def test_a_block_that_changes_its_modules_is_not_called_random():
    """Each call gets its own copies of the modules and scales: what a learner's block does to them
    does not make a second call differ, so it is not taken for a dropout."""

    def doubles_norm1(x, norm1, attn, gamma1, norm2, mlp, gamma2):
        norm1.weight.data.mul_(2)
        gamma2.mul_(3)
        return layer_scale_block(x, norm1, attn, gamma1, norm2, mlp, gamma2)

    with pytest.raises(CheckFailed, match="^values differ from the reference"):
        check_layer_scale_block(doubles_norm1)


# ---- the post-norm block ---------------------------------------------------------------------


def post_norm_block(x, norm1, attn, norm2, mlp):
    x = norm1(x + attn(x))
    return norm2(x + mlp(x))


def post_norm_block_in_steps(x, norm1, attn, norm2, mlp):  # a legitimate variant: named steps
    attended = attn(x)
    h = norm1(attended + x)
    return norm2(mlp(h) + h)


POST_NORM_MISTAKES = [
    ("pre-norm order", lambda x, n1, a, n2, m: (lambda h: h + m(n2(h)))(x + a(n1(x))), r"that is the pre-norm block"),
    (
        "norm on the branch",
        lambda x, n1, a, n2, m: (lambda h: h + n2(m(h)))(x + n1(a(x))),
        r"normalised the branch's output before the add",
    ),
    (
        "norms before and after",
        lambda x, n1, a, n2, m: (lambda h: n2(h + m(n2(h))))(n1(x + a(n1(x)))),
        r"kept the pre-norm LayerNorms",
    ),
    ("no final norm2", lambda x, n1, a, n2, m: (lambda h: h + m(h))(n1(x + a(x))), r"norm2 is missing at the end"),
    ("no norm1", lambda x, n1, a, n2, m: (lambda h: n2(h + m(h)))(x + a(x)), r"norm1 is missing"),
    (
        "norms swapped",
        lambda x, n1, a, n2, m: (lambda h: n1(h + m(h)))(n2(x + a(x))),
        r"norm1 and norm2 are swapped",
    ),
    (
        "no attention residual",
        lambda x, n1, a, n2, m: (lambda h: n2(h + m(h)))(n1(a(x))),
        r"residual connection around attention",
    ),
    ("no MLP residual", lambda x, n1, a, n2, m: n2(m(n1(x + a(x)))), r"residual connection around the MLP"),
    (
        "MLP residual from the input",
        lambda x, n1, a, n2, m: n2(x + m(n1(x + a(x)))),
        r"the MLP's residual adds the block's input x",
    ),
    (
        "MLP residual before norm1",
        lambda x, n1, a, n2, m: n2(x + a(x) + m(n1(x + a(x)))),
        r"the MLP's residual adds the sum before norm1",
    ),
    ("MLP first", lambda x, n1, a, n2, m: (lambda h: n2(h + a(h)))(n1(x + m(x))), r"the MLP ran before attention"),
    ("no MLP half", lambda x, n1, a, n2, m: n1(x + a(x)), r"the MLP half is missing"),
    ("unchanged", lambda x, n1, a, n2, m: x, r"returns the tokens unchanged"),
]


def test_check_post_norm_block_passes_the_reference_and_a_variant(capsys):
    check_post_norm_block(post_norm_block)
    check_post_norm_block(post_norm_block_in_steps)
    assert capsys.readouterr().out.count("✓ post_norm_block matches") == 2


def test_check_post_norm_block_names_each_mistake_as_itself():
    assert_each_named_as_itself(check_post_norm_block, POST_NORM_MISTAKES)


def test_check_post_norm_block_names_attention_called_like_torchs():
    def like_torch(x, norm1, attn, norm2, mlp):
        x = norm1(x + attn(x, x, x)[0])
        return norm2(x + mlp(x))

    with pytest.raises(CheckFailed, match=r"attn takes the tokens only"):
        check_post_norm_block(like_torch)


def test_check_post_norm_block_names_a_random_step():
    def with_dropout(x, norm1, attn, norm2, mlp):
        x = norm1(x + F.dropout(attn(x), 0.5))
        return norm2(x + mlp(x))

    with pytest.raises(CheckFailed, match=r"another result each time"):
        check_post_norm_block(with_dropout)
