"""utils/backward.py: every manual backward against autograd (torch's own modules as the forward
reference), on odd sizes, batch 1, masks and several heads; gradcheck on each piece; the
finite-difference check and the cache's memory."""

import dataclasses
import functools

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
