"""utils/backward.py: every manual backward against autograd (torch's own modules as the forward
reference), on odd sizes, batch 1, masks and several heads; gradcheck on each piece; the
finite-difference check and the cache's memory."""

import copy
import dataclasses
import functools
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from utils.attention import MultiHeadSelfAttention
from utils.backward import (
    attention_backward,
    attention_forward,
    block_backward,
    block_forward,
    cache_bytes,
    cross_entropy_backward,
    cross_entropy_forward,
    finite_difference_grad,
    gelu_backward,
    gelu_forward,
    layer_norm_backward,
    layer_norm_forward,
    linear_backward,
    linear_forward,
    manual_function,
    mlp_backward,
    mlp_forward,
    multi_head_backward,
    multi_head_forward,
    patch_embed_backward,
    patch_embed_forward,
    softmax_backward,
    vit_backward,
    vit_forward,
)
from utils.encoder import MLP, EncoderBlock
from utils.patches import PatchEmbedding
from utils.vit import VisionTransformer, ViTConfig

TOLERANCE = {torch.float32: dict(atol=2e-5, rtol=1e-4), torch.float64: dict(atol=1e-12, rtol=1e-10)}


def leaves(*tensors):
    """Copies that autograd tracks, for the reference."""
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def autograd_grads(output_of, inputs, grad_out):
    """The reference: autograd's gradients of <output, grad_out> with respect to `inputs`."""
    inputs = leaves(*inputs)
    out = output_of(*inputs)
    return out, torch.autograd.grad(out, inputs, grad_out)


def assert_grads_equal(mine, reference, dtype):
    assert len(mine) == len(reference)
    for got, expected in zip(mine, reference, strict=True):
        torch.testing.assert_close(got, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(7,), (1, 5, 7), (3, 4, 7)])
def test_linear_matches_autograd(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x, w, b = (torch.randn(*s, generator=g, dtype=dtype) for s in (shape, (9, 7), (9,)))
    y, cache = linear_forward(x, w, b)
    grad_y = torch.randn(y.shape, generator=g, dtype=dtype)
    expected, reference = autograd_grads(F.linear, [x, w, b], grad_y)
    torch.testing.assert_close(y, expected)
    assert_grads_equal(linear_backward(grad_y, cache), reference, dtype)
    _, cache = linear_forward(x, w, None)
    assert linear_backward(grad_y, cache)[2] is None


def test_the_patch_embedding_backward_is_a_conv2ds():
    """Non-square images, 3 channels, batch 1 and 2: the manual gradient of patchify + Linear equals
    autograd's through PatchEmbedding's strided Conv2d."""
    torch.manual_seed(0)
    for batch in (1, 2):
        embed = PatchEmbedding((8, 12), patch_size=4, in_channels=3, embed_dim=5).double()
        images = torch.randn(batch, 3, 8, 12, dtype=torch.float64)
        tokens, cache = patch_embed_forward(images, embed.proj.weight, embed.proj.bias)
        grad_tokens = torch.randn_like(tokens)
        params = [embed.proj.weight, embed.proj.bias]
        expected, reference = autograd_grads(
            lambda x, w, b: F.conv2d(x, w, b, stride=4).flatten(2).transpose(1, 2), [images, *params], grad_tokens
        )
        torch.testing.assert_close(tokens, expected)
        assert_grads_equal(patch_embed_backward(grad_tokens, cache), reference, torch.float64)
        assert tokens.shape == embed(images).shape == (batch, 6, 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7), (1, 1, 1)])
def test_layer_norm_matches_autograd(shape, dtype):
    g = torch.Generator().manual_seed(1)
    D = shape[-1]
    x = 3 + 2 * torch.randn(shape, generator=g, dtype=dtype)  # far from zero mean and unit variance
    w, b = 1 + torch.randn(D, generator=g, dtype=dtype), torch.randn(D, generator=g, dtype=dtype)
    y, cache = layer_norm_forward(x, w, b, eps=1e-5)
    grad_y = torch.randn(y.shape, generator=g, dtype=dtype)
    expected, reference = autograd_grads(lambda x, w, b: F.layer_norm(x, (D,), w, b, 1e-5), [x, w, b], grad_y)
    torch.testing.assert_close(y, expected, **TOLERANCE[dtype])
    assert_grads_equal(layer_norm_backward(grad_y, cache), reference, dtype)


def test_gelu_matches_autograd_and_its_derivative_is_phi_plus_x_times_the_density():
    x = torch.linspace(-6, 6, 241, dtype=torch.float64)
    y, cache = gelu_forward(x)
    ones = torch.ones_like(x)
    expected, (reference,) = autograd_grads(F.gelu, [x], ones)
    torch.testing.assert_close(y, expected)
    (mine,) = gelu_backward(ones, cache)
    torch.testing.assert_close(mine, reference)
    assert mine[0] == pytest.approx(0, abs=1e-6) and mine[-1] == pytest.approx(1, abs=1e-6)  # 0 far left, 1 far right
    assert mine[120] == pytest.approx(0.5)  # at 0: Phi(0) = 1/2


@pytest.mark.parametrize("shape", [(1, 1), (4, 6), (2, 3, 5, 4)])
def test_softmax_backward_matches_autograd_and_each_row_sums_to_zero(shape):
    g = torch.Generator().manual_seed(2)
    scores = torch.randn(shape, generator=g, dtype=torch.float64)
    grad_probs = torch.randn(shape, generator=g, dtype=torch.float64)
    _, (reference,) = autograd_grads(lambda s: s.softmax(dim=-1), [scores], grad_probs)
    mine = softmax_backward(scores.softmax(dim=-1), grad_probs)
    torch.testing.assert_close(mine, reference)
    torch.testing.assert_close(mine.sum(dim=-1), torch.zeros(shape[:-1], dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T, S, d, dv, masked", [(5, 5, 4, 4, False), (3, 7, 2, 5, True), (1, 1, 3, 3, False)])
def test_attention_matches_autograd_with_and_without_a_mask(T, S, d, dv, masked, dtype):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, n, w, generator=g, dtype=dtype) for n, w in ((T, d), (S, d), (S, dv)))
    mask = torch.rand(2, 3, T, S, generator=g) > 0.4 if masked else None
    if mask is not None:
        mask[..., 0] = True  # every query keeps a key
    out, cache = attention_forward(q, k, v, mask)
    grad_out = torch.randn(out.shape, generator=g, dtype=dtype)
    expected, reference = autograd_grads(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), [q, k, v], grad_out
    )
    torch.testing.assert_close(out, expected, **TOLERANCE[dtype])
    assert_grads_equal(attention_backward(grad_out, cache), reference, dtype)


@pytest.mark.parametrize("implementation", ["explicit", "fused"])
@pytest.mark.parametrize("heads, qkv_bias, masked", [(1, True, False), (3, True, True), (3, False, False)])
def test_multi_head_matches_the_course_module(heads, qkv_bias, masked, implementation):
    torch.manual_seed(4)
    attn = MultiHeadSelfAttention(12, heads, qkv_bias=qkv_bias).double()
    attn.implementation = implementation
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = torch.rand(2, heads, 5, 5) > 0.3 if masked else None
    if mask is not None:
        mask[..., 0] = True
    params = [attn.qkv.weight, attn.qkv.bias, attn.proj.weight, attn.proj.bias]
    y, cache = multi_head_forward(x, *params, heads, mask)
    grad_y = torch.randn_like(y)
    x_ref = x.clone().requires_grad_(True)
    expected = attn(x_ref, mask)
    tracked = [x_ref] + [p for p in params if p is not None]
    reference = torch.autograd.grad(expected, tracked, grad_y)
    torch.testing.assert_close(y, expected)
    mine = [grad for grad in multi_head_backward(grad_y, cache) if grad is not None]
    assert_grads_equal(mine, reference, torch.float64)


def test_the_mlp_matches_the_course_module():
    torch.manual_seed(5)
    mlp = MLP(6, 10).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    params = [mlp.fc1.weight, mlp.fc1.bias, mlp.fc2.weight, mlp.fc2.bias]
    y, cache = mlp_forward(x, *params)
    grad_y = torch.randn_like(y)
    x_ref = x.clone().requires_grad_(True)
    expected = mlp(x_ref)
    torch.testing.assert_close(y, expected)
    assert_grads_equal(
        mlp_backward(grad_y, cache), torch.autograd.grad(expected, [x_ref, *params], grad_y), torch.float64
    )


def random_block(norm_first: bool, qkv_bias: bool = True) -> EncoderBlock:
    """A block whose LayerNorms are not at their defaults, so that a swapped or skipped one shows."""
    block = EncoderBlock(12, 3, mlp_ratio=2.0, qkv_bias=qkv_bias, norm_first=norm_first).double()
    with torch.no_grad():
        for name, p in block.named_parameters():
            p.copy_((1 if "norm" in name and name.endswith("weight") else 0) + 0.3 * torch.randn_like(p))
    return block


@pytest.mark.parametrize(
    "norm_first, qkv_bias, masked", [(True, True, False), (True, False, True), (False, True, False)]
)
def test_a_whole_block_matches_autograd_for_every_parameter(norm_first, qkv_bias, masked):
    torch.manual_seed(6)
    block = random_block(norm_first, qkv_bias)
    x = torch.randn(2, 5, 12, dtype=torch.float64)
    mask = torch.rand(2, 3, 5, 5) > 0.3 if masked else None
    if mask is not None:
        mask[..., 0] = True
    y, cache = block_forward(block, x, mask)
    grad_y = torch.randn_like(y)
    x_ref = x.clone().requires_grad_(True)
    expected = block(x_ref, mask)
    torch.testing.assert_close(y, expected)
    names = [name for name, _ in block.named_parameters()]
    reference = torch.autograd.grad(expected, [x_ref, *block.parameters()], grad_y)
    grad_x, grads = block_backward(grad_y, cache)
    assert sorted(grads) == sorted(names)
    assert_grads_equal([grad_x, *(grads[name] for name in names)], reference, torch.float64)


def test_cross_entropy_matches_autograd():
    torch.manual_seed(7)
    logits, labels = torch.randn(4, 3, dtype=torch.float64), torch.tensor([0, 2, 2, 1])
    loss, cache = cross_entropy_forward(logits, labels)
    expected, (reference,) = autograd_grads(lambda z: F.cross_entropy(z, labels), [logits], torch.tensor(1.0))
    torch.testing.assert_close(loss, expected)
    grad_logits, _ = cross_entropy_backward(1.0, cache)
    torch.testing.assert_close(grad_logits, reference)
    torch.testing.assert_close(grad_logits.sum(dim=1), torch.zeros(4, dtype=torch.float64))


VIT_VARIANTS = {
    "class token, learned positions": {},
    "mean pooling": {"pool": "mean"},
    "mean pooling with fc_norm": {"pool": "mean", "fc_norm": True},
    "norm_pre": {"norm_pre": True},
    "fixed sin-cos table": {"pos_embed": "sincos"},
    "no positions, no qkv bias": {"pos_embed": "none", "qkv_bias": False},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("variant", list(VIT_VARIANTS))
def test_every_gradient_of_a_whole_vit_equals_autograds(variant, dtype):
    """A tiny ViT on 8 x 12 images (6 patches, 3 heads): every parameter's manual gradient against
    autograd's, with parameters moved away from their init (zero biases would hide mistakes)."""
    torch.manual_seed(8)
    config = ViTConfig(
        image_size=(8, 12),
        patch_size=4,
        in_channels=2,
        num_classes=5,
        embed_dim=12,
        depth=2,
        num_heads=3,
        mlp_ratio=2.0,
    )
    model = VisionTransformer(dataclasses.replace(config, **VIT_VARIANTS[variant])).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    images, labels = torch.randn(3, 2, 8, 12, dtype=dtype), torch.tensor([0, 4, 2])
    loss, cache = vit_forward(model, images, labels)
    grads = vit_backward(cache)
    expected = F.cross_entropy(model(images), labels)
    expected.backward()
    torch.testing.assert_close(loss, expected, **TOLERANCE[dtype])
    assert list(grads) == [name for name, p in model.named_parameters() if p.requires_grad]
    for name, p in model.named_parameters():
        torch.testing.assert_close(grads[name], p.grad, **TOLERANCE[dtype], msg=lambda m, name=name: f"{name}: {m}")


def test_an_optimiser_step_on_the_manual_gradients_lands_where_autograds_does():
    torch.manual_seed(9)
    config = ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=10)
    manual, automatic = VisionTransformer(config).double(), VisionTransformer(config).double()
    automatic.load_state_dict(manual.state_dict())
    images, labels = torch.randn(4, 1, 8, 8, dtype=torch.float64), torch.tensor([1, 2, 3, 4])
    for model in (manual, automatic):
        model.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _, cache = vit_forward(manual, images, labels)
    grads = vit_backward(cache)
    for name, p in manual.named_parameters():
        p.grad = grads[name]
    F.cross_entropy(automatic(images), labels).backward()
    manual.optimizer.step()
    automatic.optimizer.step()
    for (name, a), b in zip(manual.named_parameters(), automatic.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize(
    "piece, make_inputs",
    [
        (
            "linear",
            lambda g: (torch.randn(2, 3, 4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, generator=g)),
        ),
        (
            "layer_norm",
            lambda g: (torch.randn(2, 3, 4, generator=g), torch.randn(4, generator=g), torch.randn(4, generator=g)),
        ),
        ("gelu", lambda g: (torch.randn(3, 4, generator=g),)),
        (
            "attention",
            lambda g: (
                torch.randn(2, 3, 2, generator=g),
                torch.randn(2, 4, 2, generator=g),
                torch.randn(2, 4, 3, generator=g),
            ),
        ),
        (
            "mlp",
            lambda g: (
                torch.randn(2, 3, generator=g),
                torch.randn(5, 3, generator=g),
                torch.randn(5, generator=g),
                torch.randn(3, 5, generator=g),
                torch.randn(3, generator=g),
            ),
        ),
        (
            "patch_embed",
            lambda g: (
                torch.randn(1, 2, 4, 6, generator=g),
                torch.randn(3, 2, 2, 2, generator=g),
                torch.randn(3, generator=g),
            ),
        ),
    ],
)
def test_gradcheck_passes_for_each_piece(piece, make_inputs):
    """torch.autograd.gradcheck compares our backward with finite differences in float64."""
    pieces = {
        "linear": (linear_forward, linear_backward),
        "layer_norm": (functools.partial(layer_norm_forward, eps=1e-5), layer_norm_backward),
        "gelu": (gelu_forward, gelu_backward),
        "attention": (attention_forward, attention_backward),
        "mlp": (mlp_forward, mlp_backward),
        "patch_embed": (patch_embed_forward, patch_embed_backward),
    }
    inputs = [t.double().requires_grad_(True) for t in make_inputs(torch.Generator().manual_seed(10))]
    assert torch.autograd.gradcheck(manual_function(*pieces[piece]), inputs)


def test_gradcheck_catches_a_wrong_backward():
    """The check itself can fail: a LayerNorm backward without its mean term does not pass."""

    def no_mean_term(grad_y, cache):
        x_hat, rstd, weight = cache
        g = grad_y * weight
        return rstd * (g - x_hat * (g * x_hat).mean(-1, keepdim=True)), (grad_y * x_hat).sum(0), grad_y.sum(0)

    inputs = [torch.randn(3, 4, dtype=torch.float64, requires_grad=True)]
    inputs += [torch.randn(4, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    wrong = manual_function(functools.partial(layer_norm_forward, eps=1e-5), no_mean_term)
    assert not torch.autograd.gradcheck(wrong, inputs, raise_exception=False)


def test_finite_differences_by_hand_agree_with_autograd():
    x = torch.randn(3, 4, dtype=torch.float64)
    w = torch.randn(4, dtype=torch.float64)

    def loss(t):
        return (F.layer_norm(t, (4,), w) ** 3).sum()

    _, (reference,) = autograd_grads(loss, [x], torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(finite_difference_grad(loss, x), reference, atol=1e-7, rtol=1e-6)
    with pytest.raises(ValueError, match="float64"):
        finite_difference_grad(loss, x.float())


def test_cache_bytes_counts_each_storage_once_and_leaves_out_what_is_excluded():
    a = torch.zeros(10, 10)  # 400 bytes
    view = a[:5]  # the same storage
    b = torch.zeros(3, dtype=torch.float64)  # 24 bytes
    assert cache_bytes((a, [view, (b, 3, "text")])) == 424
    assert cache_bytes((a, b), exclude=[b]) == 400
    block = random_block(True)
    _, cache = block_forward(block, torch.randn(2, 5, 12, dtype=torch.float64))
    assert cache_bytes(cache, exclude=block.parameters()) > 0


def test_bad_input_gets_a_clear_error():
    x, w = torch.randn(2, 4), torch.randn(3, 5)
    with pytest.raises(ValueError, match="in = 5"):
        linear_forward(x, w)
    _, cache = linear_forward(torch.randn(2, 5), w)
    with pytest.raises(ValueError, match=r"output's shape \(2, 3\)"):
        linear_backward(torch.randn(3, 2), cache)
    with pytest.raises(ValueError, match="weight and bias"):
        layer_norm_forward(torch.randn(2, 4), torch.ones(3), torch.zeros(3))
    with pytest.raises(ValueError, match="integer labels"):
        cross_entropy_forward(torch.randn(2, 3), torch.tensor([0.0, 1.0]))
    model = VisionTransformer(ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, dropout=0.1))
    with pytest.raises(ValueError, match="eval"):
        vit_forward(model, torch.randn(1, 1, 8, 8), torch.tensor([0]))
    vit_forward(model.eval(), torch.randn(1, 1, 8, 8), torch.tensor([0]))  # no dropout in eval mode: fine
    with pytest.raises(TypeError, match="VisionTransformer"):
        vit_forward(nn.Linear(2, 2), torch.randn(1, 2), torch.tensor([0]))
    with pytest.raises(ValueError, match="LayerScale"):
        block_forward(EncoderBlock(8, 2, layer_scale=0.1), torch.randn(1, 3, 8))


# ---- caches that no longer match, and bad input (issue #28) -------------------------------------


def tiny_vit(**options) -> VisionTransformer:
    """An 8 x 8 one-channel ViT with 10 classes (4 patches), float64."""
    config = ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=10, **options)
    return VisionTransformer(config).double()


def test_a_backward_refuses_a_cache_whose_weight_or_input_changed_in_place():
    """S6, S8: linear_backward after the weight (an optimizer step) or x changed in place gave
    gradients off by 6.9 or 9.6 without a word; autograd refuses the same situation."""
    x, w, g = torch.randn(2, 5, 8), torch.randn(6, 8), torch.randn(2, 5, 6)
    _, cache = linear_forward(x, w)
    w.add_(1.0)
    with pytest.raises(ValueError, match=r"^weight was changed in place after linear_forward .*run the forward again"):
        linear_backward(g, cache)
    _, cache = linear_forward(x, w)
    x.mul_(2)
    with pytest.raises(ValueError, match=r"^x was changed in place after linear_forward"):
        linear_backward(g, cache)


def test_a_change_the_backward_does_not_depend_on_is_fine():
    """As with autograd: a bias is not kept (dL/dW needs x, not b), so changing it refuses nothing,
    and the gradients are those of the forward's point."""
    x, w, b, g = torch.randn(2, 5, 8), torch.randn(6, 8), torch.randn(6), torch.randn(2, 5, 6)
    _, cache = linear_forward(x, w, b)
    right = [t.clone() for t in linear_backward(g, cache)]
    b.add_(1.0)
    assert_grads_equal(linear_backward(g, cache), right, torch.float32)


def test_a_copied_cache_and_an_inference_mode_forward_still_work():
    """A deep copy or a pickle holds fresh tensors (their versions start anew): nothing was changed
    in place; tensors made under torch.inference_mode have no version to compare."""
    x, w, g = torch.randn(2, 5, 8), torch.randn(6, 8), torch.randn(2, 5, 6)
    x.add_(1)  # a version above 0, which a copy does not inherit
    _, cache = linear_forward(x, w)
    right = linear_backward(g, cache)
    for copied in (copy.deepcopy(cache), pickle.loads(pickle.dumps(cache))):
        assert_grads_equal(linear_backward(g, copied)[:2], right[:2], torch.float32)
    with torch.inference_mode():
        _, cache = linear_forward(torch.randn(2, 5, 8), w)
        linear_backward(g, cache)


def test_vit_backward_refuses_a_cache_after_an_optimiser_step_and_names_the_parameter():
    """S7: the lesson's flow, vit_backward, one AdamW step, then vit_backward(cache) again (a cell
    run twice) moved the gradients by 0.44 without a word."""
    torch.manual_seed(11)
    model = tiny_vit()
    _, cache = vit_forward(model, torch.rand(4, 1, 8, 8, dtype=torch.float64), torch.tensor([1, 2, 3, 4]))
    grads = vit_backward(cache)
    for name, p in model.named_parameters():
        p.grad = grads[name]
    torch.optim.AdamW(model.parameters(), lr=1e-2).step()
    with pytest.raises(ValueError, match=r"^patch_embed\.proj\.weight was changed in place after vit_forward"):
        vit_backward(cache)


def _changed_after(piece: str):
    """(backward, cache, grad_out, the tensor to change in place, its name) for each forward/backward pair."""
    g = torch.Generator().manual_seed(12)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    if piece == "linear":
        x, w = randn(3, 4), randn(5, 4)
        return linear_backward, linear_forward(x, w)[1], randn(3, 5), w, "weight"
    if piece == "patch_embed":
        w = randn(3, 2, 2, 2)
        return patch_embed_backward, patch_embed_forward(randn(1, 2, 4, 4), w)[1], randn(1, 4, 3), w, "weight"
    if piece == "layer_norm":
        w = randn(4)
        return layer_norm_backward, layer_norm_forward(randn(3, 4), w, randn(4))[1], randn(3, 4), w, "weight"
    if piece == "gelu":
        x = randn(3, 4)
        return gelu_backward, gelu_forward(x)[1], randn(3, 4), x, "x"
    if piece == "attention":
        q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 6)
        return attention_backward, attention_forward(q, k, v)[1], randn(2, 3, 6), k, "k"
    if piece == "multi_head":
        x, qkv, proj = randn(2, 3, 4), randn(12, 4), randn(4, 4)
        return (
            multi_head_backward,
            multi_head_forward(x, qkv, None, proj, randn(4), 2)[1],
            randn(2, 3, 4),
            qkv,
            "qkv_weight",
        )
    if piece == "mlp":
        x, w1, w2 = randn(3, 4), randn(6, 4), randn(4, 6)
        return mlp_backward, mlp_forward(x, w1, randn(6), w2, randn(4))[1], randn(3, 4), w2, "fc2_weight"
    if piece == "block":
        block = random_block(True)
        return (
            block_backward,
            block_forward(block, randn(2, 5, 12))[1],
            randn(2, 5, 12),
            block.mlp.fc1.weight,
            "mlp.fc1.weight",
        )
    if piece == "cross_entropy":
        labels = torch.tensor([0, 2, 1])
        return cross_entropy_backward, cross_entropy_forward(randn(3, 4), labels)[1], 1.0, labels, "labels"
    model = tiny_vit()
    cache = vit_forward(model, torch.rand(2, 1, 8, 8, dtype=torch.float64), torch.tensor([3, 7]))[1]
    return (lambda _, cache: vit_backward(cache)), cache, None, model.blocks[1].norm2.weight, "blocks.1.norm2.weight"


PAIRS = [
    "linear",
    "patch_embed",
    "layer_norm",
    "gelu",
    "attention",
    "multi_head",
    "mlp",
    "block",
    "cross_entropy",
    "vit",
]


@pytest.mark.parametrize("piece", PAIRS)
def test_every_backward_refuses_a_tensor_its_forward_kept_that_changed_since(piece):
    """S6-S8 for every pair: each *_forward records the version of what it keeps (torch counts up
    a tensor's version at each in-place change), each *_backward compares, naming the tensor as
    the learner passed it."""
    backward, cache, grad_out, tensor, name = _changed_after(piece)
    backward(grad_out, cache)  # unchanged: fine, and as often as wanted
    backward(grad_out, cache)
    with torch.no_grad():
        tensor.add_(1)  # as an optimizer step does
    with pytest.raises(ValueError, match=rf"^{name} was changed in place after {piece}_forward \(an optimizer step"):
        backward(grad_out, cache)


def test_layer_norm_eps_must_be_a_positive_number():
    """S9: a negative eps gave all NaN without a word."""
    x, w, b = torch.zeros(2, 8), torch.ones(8), torch.zeros(8)
    with pytest.raises(ValueError, match=r"^eps must be a finite number, greater than 0, got -1e-05$"):
        layer_norm_forward(x, w, b, eps=-1e-5)
    with pytest.raises(ValueError, match="eps must be a finite number"):
        layer_norm_forward(x, w, b, eps=float("nan"))
    with pytest.raises(TypeError, match="eps must be"):
        layer_norm_forward(x, w, b, eps="1e-5")


def test_softmax_backward_refuses_raw_scores():
    """S10: passing the scores, not their softmax, was off by 15.4 without a word."""
    g = torch.Generator().manual_seed(13)
    scores, grad = torch.randn(3, 4, generator=g) * 3, torch.randn(3, 4, generator=g)
    with pytest.raises(
        ValueError, match=r"^probs must be softmax outputs, each row in \[0, 1\] summing to 1.*scores\.softmax\(-1\)"
    ):
        softmax_backward(scores, grad)
    with pytest.raises(ValueError, match="row sums from 0.5"):
        softmax_backward(torch.full((2, 4), 0.125), torch.zeros(2, 4))  # in [0, 1], but the rows sum to 0.5
    softmax_backward(torch.full((2, 4), 0.25), torch.zeros(2, 4))  # fine
    softmax_backward(scores.softmax(-1).half(), grad.half())  # half precision rounds the sums: fine too


def test_cache_bytes_walks_dicts_and_refuses_other_containers():
    """S11: a learner's cache kept in a dict measured 0 bytes."""
    assert cache_bytes({"x": torch.ones(1000), "y": torch.ones(1000)}) == 8000
    assert cache_bytes([{"x": torch.ones(10)}, (torch.ones(5), None, 2.0, "text")]) == 60
    with pytest.raises(TypeError, match=r"^cache holds a set: expected tensors in tuples, lists or dicts"):
        cache_bytes({torch.ones(3)})


def test_finite_differences_refuse_a_huge_x_and_a_function_that_returns_no_single_number():
    """H10: a million numbers meant two million calls of f; Obscure 10: f returning a vector."""
    calls = []

    def loss(t):
        calls.append(1)
        return (t**2).sum()

    with pytest.raises(ValueError, match=r"^x has 1,000,000 numbers: .* \(2,000,000 calls\); pass at most 10,000"):
        finite_difference_grad(loss, torch.rand(1000, 1000, dtype=torch.float64))
    assert not calls  # refused before the first call
    x = torch.rand(3, 5, dtype=torch.float64)
    with pytest.raises(ValueError, match="at most 10"):
        finite_difference_grad(loss, x, max_numbers=10)
    torch.testing.assert_close(finite_difference_grad(loss, x, max_numbers=15), 2 * x)
    with pytest.raises(
        ValueError, match=r"^f must return one number \(a scalar loss\), got a tensor of shape \(3, 5\): sum it"
    ):
        finite_difference_grad(lambda t: t * 2, x)
    with pytest.raises(TypeError, match=r"^f must return one number .*got None"):
        finite_difference_grad(lambda t: None, x)


def test_cross_entropy_labels_must_be_class_indices():
    """Obscure 4: label 99 of 10 classes raised torch's 'index 99 is out of bounds'; -1 likewise."""
    logits = torch.randn(4, 10)
    with pytest.raises(
        ValueError,
        match=r"^labels must be class indices from 0 to 9 \(logits have 10 classes\), got values from 1 to 99$",
    ):
        cross_entropy_forward(logits, torch.tensor([1, 2, 99, 4]))
    with pytest.raises(ValueError, match="got values from -1 to 4"):
        cross_entropy_forward(logits, torch.tensor([1, -1, 3, 4]))


@pytest.mark.parametrize(
    "backward, forward",
    [
        (linear_backward, "linear_forward"),
        (patch_embed_backward, "patch_embed_forward"),
        (layer_norm_backward, "layer_norm_forward"),
        (attention_backward, "attention_forward"),
        (multi_head_backward, "multi_head_forward"),
        (mlp_backward, "mlp_forward"),
        (block_backward, "block_forward"),
        (cross_entropy_backward, "cross_entropy_forward"),
        (lambda _, cache: vit_backward(cache), "vit_forward"),
    ],
)
def test_each_backward_names_another_forwards_cache(backward, forward):
    """Obscure 5: linear_backward given gelu_forward's cache said 'not enough values to unpack'."""
    y, cache = gelu_forward(torch.randn(2, 3))
    with pytest.raises(
        ValueError, match=rf"^cache must be what {forward} returned, got gelu_forward's cache: pass each backward"
    ):
        backward(torch.randn(2, 3), cache)
    with pytest.raises(ValueError, match=rf"cache must be what {forward} returned, got a tuple of 2 items"):
        backward(torch.randn(2, 3), tuple(cache))
    with pytest.raises(ValueError, match=rf"cache must be what {forward} returned, got None"):
        backward(torch.randn(2, 3), None)


def test_multi_head_forward_checks_its_shapes_and_num_heads():
    """Obscure 6 and 7: a 2-D x, num_heads=0 or '2' raised unpacking, modulo and operand errors."""
    torch.manual_seed(14)
    qkv, proj = torch.randn(24, 8), torch.randn(8, 8)
    with pytest.raises(
        ValueError,
        match=r"^expected x shaped \(B, T, D\), got a 2-D tensor of shape \(5, 8\): add the batch axis, x\[None\]",
    ):
        multi_head_forward(torch.randn(5, 8), qkv, None, proj, None, 2)
    x = torch.randn(1, 5, 8)
    with pytest.raises(ValueError, match=r"^num_heads must be a whole number, at least 1, got 0$"):
        multi_head_forward(x, qkv, None, proj, None, 0)
    with pytest.raises(TypeError, match=r"^num_heads must be a whole number, at least 1, got '2' \(str\)"):
        multi_head_forward(x, qkv, None, proj, None, "2")
    with pytest.raises(ValueError, match=r"qkv_weight must be \(3D, D\) = \(24, 8\)"):
        multi_head_forward(x, torch.randn(16, 8), None, proj, None, 2)
    with pytest.raises(ValueError, match=r"x's last axis must be qkv_weight's in = 6"):
        multi_head_forward(x, torch.randn(18, 6), None, proj, None, 2)


def test_vit_forward_says_which_image_size_the_model_wants():
    """Obscure 8: 12 x 12 images on an 8 px model raised a broadcast error deep in the positions."""
    model = tiny_vit()
    with pytest.raises(ValueError, match=r"expected 8x8 images \(the size the model was built for\), got 12x12"):
        vit_forward(model, torch.rand(2, 1, 12, 12, dtype=torch.float64), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"expected images of dtype torch.float64 .*images.double\(\)"):
        vit_forward(model, torch.rand(2, 1, 8, 8), torch.tensor([0, 1]))


def test_patch_embed_forward_names_images_and_weight_on_a_channel_mismatch():
    """Obscure 14: the message named an x (1, 4, 16) the learner never passed."""
    with pytest.raises(
        ValueError,
        match=r"^images have 1 channel but weight \(16, 3, 4, 4\) expects 3: "
        r"images \(B, C, H, W\) and weight \(D, C, P, P\) need the same C$",
    ):
        patch_embed_forward(torch.rand(1, 1, 8, 8), torch.randn(16, 3, 4, 4))
    with pytest.raises(ValueError, match=r"expected images shaped \(B, C, H, W\), got a 3-D tensor"):
        patch_embed_forward(torch.rand(3, 8, 8), torch.randn(16, 3, 4, 4))


def test_linear_forward_checks_the_bias_and_the_dtype():
    """Obscure: a bias of the wrong size or a float64 x raised raw torch broadcast and dtype errors."""
    x, w = torch.randn(2, 4), torch.randn(3, 4)
    with pytest.raises(
        ValueError, match=r"^bias must hold one number per output, shaped \(3,\) like weight's out, got \(4,\)$"
    ):
        linear_forward(x, w, torch.randn(4))
    with pytest.raises(
        ValueError, match=r"expected x of dtype torch.float32 .*got torch.float64; convert with `x.float\(\)`"
    ):
        linear_forward(x.double(), w)
    with pytest.raises(ValueError, match=r"expected bias of dtype torch.float32"):
        linear_forward(x, w, torch.randn(3, dtype=torch.float64))
    with pytest.raises(
        ValueError, match=r"^fc2_weight must take fc1_weight's 6 outputs, shaped \(D, 6\), got \(4, 5\)$"
    ):
        mlp_forward(x, torch.randn(6, 4), None, torch.randn(4, 5), None)
    with pytest.raises(ValueError, match=r"^fc2_bias must hold one number per output, shaped \(4,\)"):
        mlp_forward(x, torch.randn(6, 4), None, torch.randn(4, 6), torch.randn(6))
