"""Lesson 10: a ViT's backward pass by hand, without autograd, one function per forward piece.

Every piece is a pair. `<piece>_forward(...)` returns `(out, cache)`, the cache holding exactly
what the backward needs; `<piece>_backward(grad_out, cache)` returns the gradient of the loss with
respect to each input of the forward, in the forward's order (None for one that takes none).
`vit_forward` / `vit_backward` chain them through a whole `VisionTransformer` and return one
gradient per named parameter, which the tests compare with autograd's.

- `linear_*`, `patch_embed_*`, `layer_norm_*`, `gelu_*`, `softmax_backward`, `attention_*`,
  `multi_head_*`, `mlp_*`, `block_*`, `cross_entropy_*`, `vit_*`: the pieces.
- `manual_function(forward, backward)`: an autograd.Function whose backward is ours, so that
  `torch.autograd.gradcheck` can test it against finite differences.
- `finite_difference_grad(f, x)`: the check by hand, central differences.
- `cache_bytes(cache)`: the memory a backward needs: every tensor the forward had to keep.
"""

import math
from collections.abc import Callable, Iterable

import torch
from torch import nn

from utils.attention import check_mask, check_qkv
from utils.encoder import EncoderBlock
from utils.patches import patchify, unpatchify
from utils.validation import WrongTypeError, check_tensor, describe

# ---- checks shared by every backward ------------------------------------------------------------


def _check_grad(grad_out: torch.Tensor, shape: tuple, name: str) -> None:
    """Raise unless grad_out is a tensor of the forward's output `shape`: a gradient has its
    tensor's shape, one number per number."""
    check_tensor(grad_out, f"the gradient of {name}'s output", str(tuple(shape)))
    if grad_out.shape != shape:
        raise ValueError(
            f"the gradient of {name}'s output must have the output's shape {tuple(shape)}, got {tuple(grad_out.shape)}"
        )


def _sum_to(grad: torch.Tensor, ndim: int) -> torch.Tensor:
    """Sum a gradient over its leading axes until `ndim` remain: a parameter used by every token
    of every image collects the gradient of each use."""
    return grad.sum(dim=tuple(range(grad.ndim - ndim))) if grad.ndim > ndim else grad


# ---- Linear -----------------------------------------------------------------------------------


def linear_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None):
    """y = x W^T + b.

    Args:
        x: (..., in); weight: (out, in), PyTorch's layout; bias: (out,) or None.
    Returns:
        y (..., out) and the cache (x, weight, whether there is a bias).
    """
    check_tensor(x, "x", "(..., in)")
    check_tensor(weight, "weight", "(out, in)", ndim=2)
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"x's last axis must be weight's in = {weight.shape[1]}, got x {tuple(x.shape)}")
    y = x @ weight.T  # (..., out)
    if bias is not None:
        y = y + bias
    return y, (x, weight, bias is not None, y.shape)


def linear_backward(grad_y: torch.Tensor, cache):
    """dL/dx = dL/dy W  (..., in);  dL/dW = dL/dy^T x summed over every token  (out, in);
    dL/db = dL/dy summed over every token  (out,).  Returns (grad_x, grad_weight, grad_bias or None)."""
    x, weight, has_bias, shape = cache
    _check_grad(grad_y, shape, "linear")
    grad_x = grad_y @ weight  # (..., out) @ (out, in) -> (..., in)
    grad_weight = grad_y.reshape(-1, weight.shape[0]).T @ x.reshape(-1, weight.shape[1])  # (out, in)
    grad_bias = _sum_to(grad_y, 1) if has_bias else None  # (out,)
    return grad_x, grad_weight, grad_bias


# ---- the patch embedding ----------------------------------------------------------------------


def patch_embed_forward(images: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None):
    """The patch embedding as lesson 1 wrote it: patchify, then one Linear on every patch.

    Args:
        images: (B, C, H, W); weight: (D, C, P, P), the Conv2d's; bias: (D,) or None.
    Returns:
        tokens (B, N, D) and the cache.
    """
    check_tensor(weight, "weight", "(D, C, P, P)", ndim=4)
    D, C, P, _ = weight.shape
    patches = patchify(images, P)  # (B, N, C*P*P), each patch in (C, P, P) order
    tokens, linear_cache = linear_forward(patches, weight.reshape(D, C * P * P), bias)  # (B, N, D)
    return tokens, (linear_cache, weight.shape, images.shape[-2:])


def patch_embed_backward(grad_tokens: torch.Tensor, cache):
    """The Linear's backward on the patches, then the patches' gradient put back into images
    (unpatchify is patchify's inverse, and a reshape's backward is the reverse reshape).
    Returns (grad_images (B, C, H, W), grad_weight (D, C, P, P), grad_bias (D,) or None)."""
    linear_cache, weight_shape, image_size = cache
    grad_patches, grad_weight, grad_bias = linear_backward(grad_tokens, linear_cache)  # (B, N, C*P*P), (D, CPP)
    grad_images = unpatchify(grad_patches, weight_shape[-1], tuple(image_size))  # (B, C, H, W)
    return grad_images, grad_weight.reshape(weight_shape), grad_bias


# ---- LayerNorm and GELU -----------------------------------------------------------------------


def layer_norm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (var without Bessel's
    correction, as torch's layer_norm). x: (..., D); weight, bias: (D,). Returns y (..., D), cache."""
    check_tensor(x, "x", "(..., D)")
    if x.ndim == 0 or weight.shape != (x.shape[-1],) or bias.shape != weight.shape:
        raise ValueError(
            f"expected x (..., D) with weight and bias (D,), got {tuple(x.shape)}, "
            f"{tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    rstd = 1 / torch.sqrt(var + eps)  # (..., 1)
    x_hat = (x - mean) * rstd  # (..., D): zero mean, unit variance per token
    return x_hat * weight + bias, (x_hat, rstd, weight)


def layer_norm_backward(grad_y: torch.Tensor, cache):
    """Three paths reach x: directly, through the mean and through the variance. With
    g = dL/dy * weight, dL/dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) (means over D):
    the mean term because every x_i moves the mean, the x_hat term because it moves the variance.
    Returns (grad_x (..., D), grad_weight (D,), grad_bias (D,))."""
    x_hat, rstd, weight = cache
    _check_grad(grad_y, x_hat.shape, "layer_norm")
    g = grad_y * weight  # (..., D): the gradient reaching x_hat
    grad_x = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return grad_x, _sum_to(grad_y * x_hat, 1), _sum_to(grad_y, 1)


def gelu_forward(x: torch.Tensor):
    """The exact GELU, x Phi(x), with Phi the standard normal CDF (nn.GELU()'s default). Returns y, cache."""
    check_tensor(x, "x", "(...)")
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))  # Phi(x)
    return x * cdf, (x, cdf)


def gelu_backward(grad_y: torch.Tensor, cache):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the normal density. Returns (grad_x,)."""
    x, cdf = cache
    _check_grad(grad_y, x.shape, "gelu")
    pdf = torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)  # phi(x)
    return (grad_y * (cdf + x * pdf),)


# ---- softmax and attention --------------------------------------------------------------------


def softmax_backward(probs: torch.Tensor, grad_probs: torch.Tensor) -> torch.Tensor:
    """The gradient through p = softmax(s) over the last axis, without the (T, T) Jacobian per row:
    J = diag(p) - p p^T, so dL/ds = J^T dL/dp = p * (dL/dp - sum(dL/dp * p)), one row sum per row.

    Args:
        probs: (..., T), rows summing to 1; grad_probs: dL/dp, the same shape.
    Returns:
        dL/ds (..., T); each row sums to 0 (adding a constant to a row of scores changes nothing).
    """
    _check_grad(grad_probs, probs.shape, "softmax")
    return probs * (grad_probs - (grad_probs * probs).sum(dim=-1, keepdim=True))


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None):
    """out = softmax(q k^T / sqrt(d), masked) v, as utils.attention.scaled_dot_product_attention.

    Args:
        q: (..., T, d); k: (..., S, d); v: (..., S, d_v); mask: boolean, True where allowed,
        broadcastable to (..., T, S).
    Returns:
        out (..., T, d_v) and the cache (q, k, v, the weights (..., T, S), the scale).
    """
    check_qkv(q, k, v)
    scale = 1 / math.sqrt(q.shape[-1])
    scores = q @ k.transpose(-2, -1) * scale  # (..., T, S)
    if mask is not None:
        check_mask(mask, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = scores.softmax(dim=-1)  # (..., T, S); 0 where masked
    return probs @ v, (q, k, v, probs, scale)


def attention_backward(grad_out: torch.Tensor, cache):
    """Back through out = P v, P = softmax(S), S = q k^T * scale:
    dv = P^T dout (..., S, d_v); dP = dout v^T (..., T, S); dS = softmax_backward(P, dP);
    dq = dS k * scale (..., T, d); dk = dS^T q * scale (..., S, d). A masked score has P = 0, so
    its dS is 0: the mask needs no backward of its own. Returns (grad_q, grad_k, grad_v)."""
    q, k, v, probs, scale = cache
    _check_grad(grad_out, probs.shape[:-1] + v.shape[-1:], "attention")
    grad_v = probs.transpose(-2, -1) @ grad_out  # (..., S, T) @ (..., T, d_v)
    grad_scores = softmax_backward(probs, grad_out @ v.transpose(-2, -1))  # (..., T, S)
    grad_q = grad_scores @ k * scale  # (..., T, S) @ (..., S, d)
    grad_k = grad_scores.transpose(-2, -1) @ q * scale  # (..., S, T) @ (..., T, d)
    return grad_q, grad_k, grad_v


def multi_head_forward(
    x: torch.Tensor,
    qkv_weight: torch.Tensor,
    qkv_bias: torch.Tensor | None,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor,
    num_heads: int,
    mask: torch.Tensor | None = None,
):
    """MultiHeadSelfAttention's forward: the fused qkv Linear, the split into heads, attention in
    each, the heads merged, the output Linear. x: (B, T, D); qkv_weight (3D, D). Returns (B, T, D), cache."""
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError(f"width {D} is not divisible by num_heads {num_heads}")
    qkv, qkv_cache = linear_forward(x, qkv_weight, qkv_bias)  # (B, T, 3D)
    q, k, v = qkv.reshape(B, T, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4)  # each (B, heads, T, hd)
    out, attention_cache = attention_forward(q, k, v, mask)  # (B, heads, T, hd)
    merged = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D): the heads side by side
    y, proj_cache = linear_forward(merged, proj_weight, proj_bias)  # (B, T, D)
    return y, (qkv_cache, attention_cache, proj_cache, num_heads)


def multi_head_backward(grad_y: torch.Tensor, cache):
    """The forward in reverse: the output Linear, the merge undone (a reshape's backward is the
    reverse reshape), attention, the split undone (dq, dk, dv stacked back into one (B, T, 3D)),
    the qkv Linear. Returns (grad_x, grad_qkv_weight, grad_qkv_bias, grad_proj_weight, grad_proj_bias)."""
    qkv_cache, attention_cache, proj_cache, num_heads = cache
    grad_merged, grad_proj_weight, grad_proj_bias = linear_backward(grad_y, proj_cache)  # (B, T, D)
    B, T, D = grad_merged.shape
    grad_out = grad_merged.reshape(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, heads, T, hd)
    grad_q, grad_k, grad_v = attention_backward(grad_out, attention_cache)  # each (B, heads, T, hd)
    grad_qkv = torch.stack([grad_q, grad_k, grad_v]).permute(1, 3, 0, 2, 4).reshape(B, T, 3 * D)  # (B, T, 3D)
    grad_x, grad_qkv_weight, grad_qkv_bias = linear_backward(grad_qkv, qkv_cache)  # (B, T, D)
    return grad_x, grad_qkv_weight, grad_qkv_bias, grad_proj_weight, grad_proj_bias


# ---- the MLP and the encoder block ------------------------------------------------------------


def mlp_forward(x: torch.Tensor, fc1_weight, fc1_bias, fc2_weight, fc2_bias):
    """fc2(GELU(fc1(x))), token by token. x: (..., D) -> (..., D). Returns y, cache."""
    hidden, fc1_cache = linear_forward(x, fc1_weight, fc1_bias)  # (..., hidden)
    active, gelu_cache = gelu_forward(hidden)
    y, fc2_cache = linear_forward(active, fc2_weight, fc2_bias)  # (..., D)
    return y, (fc1_cache, gelu_cache, fc2_cache)


def mlp_backward(grad_y: torch.Tensor, cache):
    """Returns (grad_x, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias)."""
    fc1_cache, gelu_cache, fc2_cache = cache
    grad_active, grad_fc2_weight, grad_fc2_bias = linear_backward(grad_y, fc2_cache)
    (grad_hidden,) = gelu_backward(grad_active, gelu_cache)
    grad_x, grad_fc1_weight, grad_fc1_bias = linear_backward(grad_hidden, fc1_cache)
    return grad_x, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias


def _check_block(block) -> None:
    if not isinstance(block, EncoderBlock):
        raise WrongTypeError(f"expected a utils.encoder.EncoderBlock, got {describe(block)}")
    if isinstance(block.ls1, nn.Module) and not isinstance(block.ls1, nn.Identity):
        raise ValueError("blocks with LayerScale are not covered here: build the block with layer_scale=None")
    if block.training and (block.mlp.drop1.p > 0 or block.attn.attn_drop > 0 or block.attn.proj_drop.p > 0):
        raise ValueError("dropout in training draws random masks the manual backward does not keep: call .eval()")


def _norm(x: torch.Tensor, norm: nn.LayerNorm):
    return layer_norm_forward(x, norm.weight, norm.bias, norm.eps)


def _attend(x: torch.Tensor, block: EncoderBlock, mask: torch.Tensor | None):
    attn = block.attn
    return multi_head_forward(x, attn.qkv.weight, attn.qkv.bias, attn.proj.weight, attn.proj.bias, attn.num_heads, mask)


def _mlp(x: torch.Tensor, block: EncoderBlock):
    mlp = block.mlp
    return mlp_forward(x, mlp.fc1.weight, mlp.fc1.bias, mlp.fc2.weight, mlp.fc2.bias)


BLOCK_PARAMETERS = (  # the order of a block's gradients, with EncoderBlock's (timm's) names
    "norm1.weight",
    "norm1.bias",
    "attn.qkv.weight",
    "attn.qkv.bias",
    "attn.proj.weight",
    "attn.proj.bias",
    "norm2.weight",
    "norm2.bias",
    "mlp.fc1.weight",
    "mlp.fc1.bias",
    "mlp.fc2.weight",
    "mlp.fc2.bias",
)


def block_forward(block: EncoderBlock, x: torch.Tensor, mask: torch.Tensor | None = None):
    """An EncoderBlock's forward from its weights, pre-norm (x + attn(norm1(x)), then
    x + mlp(norm2(x))) or post-norm (norm1(x + attn(x)), then norm2(x + mlp(x))).
    x: (B, T, D) -> (B, T, D). Returns y, cache."""
    _check_block(block)
    if block.norm_first:
        normed1, norm1_cache = _norm(x, block.norm1)
        attended, attn_cache = _attend(normed1, block, mask)
        x1 = x + attended  # (B, T, D)
        normed2, norm2_cache = _norm(x1, block.norm2)
        branch, mlp_cache = _mlp(normed2, block)
        y = x1 + branch  # (B, T, D)
    else:
        attended, attn_cache = _attend(x, block, mask)
        x1, norm1_cache = _norm(x + attended, block.norm1)
        branch, mlp_cache = _mlp(x1, block)
        y, norm2_cache = _norm(x1 + branch, block.norm2)
    return y, (block.norm_first, norm1_cache, attn_cache, norm2_cache, mlp_cache)


def block_backward(grad_y: torch.Tensor, cache):
    """Back through the block. At each residual add the gradient is copied to both summands: the
    identity path carries it on unchanged, the branch adds its own. Pre-norm: dx1 = dy + norm2's
    backward of the MLP's backward of dy; dx = dx1 + norm1's backward of attention's backward of
    dx1. Returns (grad_x, {name: gradient} for BLOCK_PARAMETERS)."""
    norm_first, norm1_cache, attn_cache, norm2_cache, mlp_cache = cache
    grads = {}
    if norm_first:
        grad_x1 = grad_y  # the identity path
        grad_normed2, *mlp_grads = mlp_backward(grad_y, mlp_cache)
        grad_x1_branch, *norm2_grads = layer_norm_backward(grad_normed2, norm2_cache)
        grad_x1 = grad_x1 + grad_x1_branch  # both paths meet
        grad_normed1, *attn_grads = multi_head_backward(grad_x1, attn_cache)
        grad_x_branch, *norm1_grads = layer_norm_backward(grad_normed1, norm1_cache)
        grad_x = grad_x1 + grad_x_branch
    else:
        grad_sum2, *norm2_grads = layer_norm_backward(grad_y, norm2_cache)  # dL/d(x1 + mlp(x1))
        grad_x1_branch, *mlp_grads = mlp_backward(grad_sum2, mlp_cache)
        grad_sum1, *norm1_grads = layer_norm_backward(grad_sum2 + grad_x1_branch, norm1_cache)
        grad_x_branch, *attn_grads = multi_head_backward(grad_sum1, attn_cache)
        grad_x = grad_sum1 + grad_x_branch
    for name, grad in zip(BLOCK_PARAMETERS, [*norm1_grads, *attn_grads, *norm2_grads, *mlp_grads], strict=True):
        if grad is not None:  # None: a qkv Linear without bias
            grads[name] = grad
    return grad_x, grads


# ---- the loss and the whole ViT ---------------------------------------------------------------


def cross_entropy_forward(logits: torch.Tensor, labels: torch.Tensor):
    """The mean cross-entropy of (B, classes) logits against (B,) integer labels. Returns the loss (0-d), cache."""
    check_tensor(logits, "logits", "(B, classes)", ndim=2)
    if not isinstance(labels, torch.Tensor) or labels.shape != logits.shape[:1] or labels.is_floating_point():
        raise ValueError(f"expected integer labels shaped ({logits.shape[0]},), got {describe(labels)}")
    log_probs = logits.log_softmax(dim=-1)  # (B, classes)
    loss = -log_probs.gather(1, labels[:, None]).mean()
    return loss, (log_probs.exp(), labels)


def cross_entropy_backward(grad_loss: torch.Tensor | float, cache):
    """dL/dlogits = (softmax(logits) - one_hot(labels)) / B: the softmax's Jacobian and the log's
    derivative cancel into one subtraction. Returns (grad_logits (B, classes), None for the labels)."""
    probs, labels = cache
    one_hot = torch.zeros_like(probs).scatter_(1, labels[:, None], 1.0)  # (B, classes)
    return (probs - one_hot) * (grad_loss / probs.shape[0]), None


def _check_vit(model) -> None:
    from utils.vit import VisionTransformer  # imported here: utils.vit imports the encoder, as this module does

    if not isinstance(model, VisionTransformer):
        raise WrongTypeError(f"expected a utils.vit.VisionTransformer, got {describe(model)}")
    if model.config.num_classes == 0:
        raise ValueError("the model has no head (num_classes=0): the loss needs logits")
    if model.training and model.config.dropout > 0:
        raise ValueError("dropout in training draws random masks the manual backward does not keep: call .eval()")
    for block in model.blocks:
        _check_block(block)


def vit_forward(model, images: torch.Tensor, labels: torch.Tensor):
    """The whole VisionTransformer and its loss, piece by piece from its weights: the patch
    embedding, the class token, the position table, norm_pre, the blocks, the final norm, the
    pooling, fc_norm, the head and the cross-entropy.

    Args:
        model: a utils.vit.VisionTransformer without dropout (or in eval mode).
        images: (B, C, H, W); labels: (B,) class indices.
    Returns:
        the mean loss (0-d) and the cache that vit_backward needs.
    """
    _check_vit(model)
    config, steps = model.config, []
    x, patch_cache = patch_embed_forward(images, model.patch_embed.proj.weight, model.patch_embed.proj.bias)
    if model.cls_token is not None:
        x = torch.cat([model.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, T, D)
    if model.pos_embed is not None:
        x = x + model.pos_embed  # (B, T, D)
    norm_pre_cache = None
    if isinstance(model.norm_pre, nn.LayerNorm):
        x, norm_pre_cache = _norm(x, model.norm_pre)
    for block in model.blocks:
        x, block_cache = block_forward(block, x)  # (B, T, D)
        steps.append(block_cache)
    norm_cache = None
    if isinstance(model.norm, nn.LayerNorm):
        x, norm_cache = _norm(x, model.norm)
    prefix = model.num_prefix_tokens
    pooled = x[:, 0] if config.pool == "cls" else x[:, prefix:].mean(dim=1)  # (B, D)
    fc_norm_cache = None
    if isinstance(model.fc_norm, nn.LayerNorm):
        pooled, fc_norm_cache = _norm(pooled, model.fc_norm)
    logits, head_cache = linear_forward(pooled, model.head.weight, model.head.bias)  # (B, classes)
    loss, loss_cache = cross_entropy_forward(logits, labels)
    shape = x.shape
    return loss, (model, patch_cache, norm_pre_cache, steps, norm_cache, shape, fc_norm_cache, head_cache, loss_cache)


def vit_backward(cache) -> dict[str, torch.Tensor]:
    """Every parameter's gradient of the loss vit_forward returned, by hand, in reverse order.

    Pooling's backward hands the pooled gradient to the tokens it came from: all of it to the class
    token's row (pool="cls"), or an equal 1/N share to each patch token (pool="mean"); the other rows
    get zeros. The class token and the position table are used once per image, so their gradients
    are sums over the batch. Returns {name: gradient} with the names of model.named_parameters()
    (those that require a gradient; a fixed sin-cos table has none).
    """
    model, patch_cache, norm_pre_cache, steps, norm_cache, shape, fc_norm_cache, head_cache, loss_cache = cache
    grads = {}
    grad_logits, _ = cross_entropy_backward(1.0, loss_cache)  # (B, classes)
    grad_pooled, grads["head.weight"], grads["head.bias"] = linear_backward(grad_logits, head_cache)  # (B, D)
    if fc_norm_cache is not None:
        grad_pooled, grads["fc_norm.weight"], grads["fc_norm.bias"] = layer_norm_backward(grad_pooled, fc_norm_cache)
    grad_x = grad_pooled.new_zeros(shape)  # (B, T, D)
    prefix = model.num_prefix_tokens
    if model.config.pool == "cls":
        grad_x[:, 0] = grad_pooled
    else:
        grad_x[:, prefix:] = grad_pooled[:, None] / (shape[1] - prefix)
    if norm_cache is not None:
        grad_x, grads["norm.weight"], grads["norm.bias"] = layer_norm_backward(grad_x, norm_cache)
    for index in reversed(range(len(steps))):
        grad_x, block_grads = block_backward(grad_x, steps[index])
        grads.update({f"blocks.{index}.{name}": grad for name, grad in block_grads.items()})
    if norm_pre_cache is not None:
        grad_x, grads["norm_pre.weight"], grads["norm_pre.bias"] = layer_norm_backward(grad_x, norm_pre_cache)
    if isinstance(model.pos_embed, nn.Parameter):
        grads["pos_embed"] = grad_x.sum(dim=0, keepdim=True)  # (1, T, D)
    if model.cls_token is not None:
        grads["cls_token"] = grad_x[:, :1].sum(dim=0, keepdim=True)  # (1, 1, D)
        grad_x = grad_x[:, 1:]  # (B, N, D): the patch tokens
    _, grads["patch_embed.proj.weight"], grads["patch_embed.proj.bias"] = patch_embed_backward(grad_x, patch_cache)
    names = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    return {name: grads[name] for name in names}


# ---- checking a backward ----------------------------------------------------------------------


def manual_function(forward: Callable, backward: Callable) -> Callable:
    """An autograd.Function built from a forward/backward pair: forward's output, with our
    backward in place of autograd's. torch.autograd.gradcheck(manual_function(f, b), inputs)
    then compares our backward with finite differences (in float64). Non-tensor arguments (eps,
    num_heads) go in with functools.partial first; the backward must return one gradient (or
    None) per tensor input."""

    class Manual(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            out, cache = forward(*inputs)
            ctx.cache = cache
            return out

        @staticmethod
        def backward(ctx, grad_out):
            grads = backward(grad_out, ctx.cache)
            return grads if isinstance(grads, tuple) else (grads,)

    return Manual.apply


def finite_difference_grad(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, h: float = 1e-6) -> torch.Tensor:
    """dL/dx of a scalar function, one number at a time: (f(x + h e_i) - f(x - h e_i)) / 2h.
    Error O(h^2) plus rounding O(eps / h): use float64, where h = 1e-6 leaves about 1e-9.
    Costs 2 calls of f per number of x, so only for small x."""
    check_tensor(x, "x", "(...)")
    if x.dtype != torch.float64:
        raise ValueError(f"finite differences need float64 (float32 rounding swamps them), got {x.dtype}")
    grad = torch.zeros_like(x)
    flat_x, flat_grad = x.detach().clone().reshape(-1), grad.reshape(-1)
    for i in range(flat_x.numel()):
        original = flat_x[i].item()
        flat_x[i] = original + h
        up = float(f(flat_x.reshape(x.shape)))
        flat_x[i] = original - h
        down = float(f(flat_x.reshape(x.shape)))
        flat_x[i] = original
        flat_grad[i] = (up - down) / (2 * h)
    return grad


def _tensors(cache) -> Iterable[torch.Tensor]:
    """Every tensor inside a (nested) cache."""
    if isinstance(cache, torch.Tensor):
        yield cache
    elif isinstance(cache, list | tuple):
        for item in cache:
            yield from _tensors(item)


def cache_bytes(cache, exclude: Iterable[torch.Tensor] = ()) -> int:
    """The memory a backward needs besides the parameters: the bytes of every distinct storage
    in the cache (a tensor kept twice, or a view of one, counted once), leaving out `exclude`
    (the parameters, which exist anyway)."""
    excluded = {tensor.untyped_storage().data_ptr() for tensor in exclude}
    storages = {}
    for tensor in _tensors(cache):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())
