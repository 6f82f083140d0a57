"""Lesson 10: a ViT's backward pass by hand, without autograd, one function per forward piece.

Every piece is a pair. `<piece>_forward(...)` returns `(out, cache)`, the cache holding exactly
what the backward needs; `<piece>_backward(grad_out, cache)` returns the gradient of the loss with
respect to each input of the forward, in the forward's order (None for one that takes none).
A cache is a `Cache`: a tuple (unpack it as one) that also knows which forward made it and the
version of every tensor it relies on, so that a backward refuses another forward's cache, or a
tensor changed in place since (an optimizer step), as autograd does.
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
import numbers
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from utils.attention import check_mask, check_qkv
from utils.encoder import EncoderBlock
from utils.patches import check_images_fit, patchify, unpatchify
from utils.validation import (
    WrongTypeError,
    check_device,
    check_dtype,
    check_positive,
    check_tensor,
    check_whole,
    describe,
)

# ---- the cache, and the checks shared by every backward ------------------------------------------


class Cache(tuple):
    """What a `<piece>_forward` keeps for its backward: a tuple of its items, tagged with the
    forward's name (`forward`) and, in `versions`, one (name, forward, tensor, version) per tensor
    the backward relies on. torch counts a tensor's version up at every in-place change."""

    def __new__(cls, items=(), forward: str = "", versions: tuple = ()):
        cache = super().__new__(cls, items)
        cache.forward = forward
        cache.versions = versions
        return cache

    def __reduce__(self):
        """A copy (copy.deepcopy, pickle) holds copies of the tensors, unchanged so far: their
        versions are taken anew."""
        watched = tuple((name, made_by, tensor) for name, made_by, tensor, _ in self.versions)
        return _rebuilt_cache, (tuple(self), self.forward, watched)


def _rebuilt_cache(items: tuple, forward: str, watched: tuple) -> Cache:
    """A copied Cache, with the versions of its copied tensors as they are now."""
    versions = tuple((name, made_by, tensor, _version(tensor)) for name, made_by, tensor in watched)
    return Cache(items, forward, versions)


def _version(tensor: torch.Tensor) -> int | None:
    """tensor._version; None for an inference tensor (made under torch.inference_mode), which has none."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _root(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor a view was taken from (views share its memory and its version), else the tensor."""
    return tensor if tensor._base is None else tensor._base


def _inner_caches(items) -> Iterable[Cache]:
    """The caches of the pieces a forward ran, inside its items (lists and tuples walked)."""
    for item in items:
        if isinstance(item, Cache):
            yield item
        elif isinstance(item, list | tuple):
            yield from _inner_caches(item)


def _cache(forward: str, items: tuple, watch: Mapping | None = None, names: Mapping | None = None) -> Cache:
    """A Cache of `items` made by `forward`.

    Args:
        watch: {name: tensor} this forward keeps itself: their versions are recorded now.
        names: {name: tensor} of this forward's inputs that the caches inside `items` keep (or a view
            of them): their entries are renamed so that a message names the tensor as the learner passed it.
    """
    versions = [(name, forward, tensor, _version(tensor)) for name, tensor in (watch or {}).items()]
    rename = {id(_root(tensor)): name for name, tensor in (names or {}).items() if isinstance(tensor, torch.Tensor)}
    for inner in _inner_caches(items):
        for name, made_by, tensor, version in inner.versions:
            if id(_root(tensor)) in rename:
                name, made_by = rename[id(_root(tensor))], forward
            versions.append((name, made_by, tensor, version))
    return Cache(items, forward, tuple(versions))


def _open(cache, forward: str) -> Cache:
    """`cache` if `forward` made it and no tensor it relies on changed since; else a ValueError that says which."""
    if not isinstance(cache, Cache) or cache.forward != forward:
        if isinstance(cache, Cache):
            came = f"{cache.forward}'s cache"
        elif isinstance(cache, list | tuple):
            came = f"a {type(cache).__name__} of {len(cache)} items"
        else:
            came = describe(cache)
        raise ValueError(
            f"cache must be what {forward} returned, got {came}: pass each backward the cache of its own forward"
        )
    for name, made_by, tensor, version in cache.versions:
        if _version(tensor) != version:
            raise ValueError(
                f"{name} was changed in place after {made_by} (an optimizer step, or an in-place operation "
                "such as += or add_?): run the forward again before the backward"
            )
    return cache


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
    _check_linear(x, weight, bias)
    y = x @ weight.T  # (..., out)
    if bias is not None:
        y = y + bias
    return y, _cache("linear_forward", (x, weight, bias is not None, y.shape), watch={"x": x, "weight": weight})


def _check_linear(x, weight, bias, x_name: str = "x", weight_name: str = "weight", bias_name: str = "bias") -> None:
    """Raise unless x (..., in), weight (out, in) and bias (out,) or None fit, in weight's dtype;
    the names are the arguments' as the learner passed them."""
    check_tensor(x, x_name, "(..., in)")
    check_tensor(weight, weight_name, "(out, in)", ndim=2)
    out, width = weight.shape
    if x.ndim == 0 or x.shape[-1] != width:
        raise ValueError(f"{x_name}'s last axis must be {weight_name}'s in = {width}, got {x_name} {tuple(x.shape)}")
    check_dtype(x, x_name, weight.dtype)
    if bias is not None:
        check_tensor(bias, bias_name, f"({out},)")
        if bias.shape != (out,):
            raise ValueError(
                f"{bias_name} must hold one number per output, shaped ({out},) like {weight_name}'s out, "
                f"got {tuple(bias.shape)}"
            )
        check_dtype(bias, bias_name, weight.dtype)


def linear_backward(grad_y: torch.Tensor, cache):
    """dL/dx = dL/dy W  (..., in);  dL/dW = dL/dy^T x summed over every token  (out, in);
    dL/db = dL/dy summed over every token  (out,).  Returns (grad_x, grad_weight, grad_bias or None)."""
    x, weight, has_bias, shape = _open(cache, "linear_forward")
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
    check_tensor(weight, "weight", "(D, C, P, P)", ndim=4, nonempty=True)
    D, C, P, Q = weight.shape
    if P != Q:
        raise ValueError(f"weight must be (D, C, P, P), square P x P kernels, got {tuple(weight.shape)}")
    check_images_fit(images, P)
    channels = images.shape[1]
    if channels != C:
        raise ValueError(
            f"images have {channels} channel{'s' * (channels != 1)} but weight {tuple(weight.shape)} expects {C}: "
            "images (B, C, H, W) and weight (D, C, P, P) need the same C"
        )
    check_dtype(images, "images", weight.dtype)
    patches = patchify(images, P)  # (B, N, C*P*P), each patch in (C, P, P) order
    tokens, linear_cache = linear_forward(patches, weight.reshape(D, C * P * P), bias)  # (B, N, D)
    items = (linear_cache, weight.shape, images.shape[-2:])
    return tokens, _cache("patch_embed_forward", items, names={"images": images, "weight": weight})


def patch_embed_backward(grad_tokens: torch.Tensor, cache):
    """The Linear's backward on the patches, then the patches' gradient put back into images
    (unpatchify is patchify's inverse, and a reshape's backward is the reverse reshape).
    Returns (grad_images (B, C, H, W), grad_weight (D, C, P, P), grad_bias (D,) or None)."""
    linear_cache, weight_shape, image_size = _open(cache, "patch_embed_forward")
    grad_patches, grad_weight, grad_bias = linear_backward(grad_tokens, linear_cache)  # (B, N, C*P*P), (D, CPP)
    grad_images = unpatchify(grad_patches, weight_shape[-1], tuple(image_size))  # (B, C, H, W)
    return grad_images, grad_weight.reshape(weight_shape), grad_bias


# ---- LayerNorm and GELU -----------------------------------------------------------------------


def layer_norm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (var without Bessel's
    correction, as torch's layer_norm). x: (..., D); weight, bias: (D,). Returns y (..., D), cache."""
    check_tensor(x, "x", "(..., D)")
    check_tensor(weight, "weight", "(D,)")
    check_tensor(bias, "bias", "(D,)")
    eps = check_positive(eps, "eps")
    if x.ndim == 0 or weight.shape != (x.shape[-1],) or bias.shape != weight.shape:
        raise ValueError(
            f"expected x (..., D) with weight and bias (D,), got {tuple(x.shape)}, "
            f"{tuple(weight.shape)}, {tuple(bias.shape)}"
        )
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    rstd = 1 / torch.sqrt(var + eps)  # (..., 1)
    x_hat = (x - mean) * rstd  # (..., D): zero mean, unit variance per token
    cache = _cache("layer_norm_forward", (x_hat, rstd, weight), watch={"x_hat": x_hat, "rstd": rstd, "weight": weight})
    return x_hat * weight + bias, cache


def layer_norm_backward(grad_y: torch.Tensor, cache):
    """Three paths reach x: directly, through the mean and through the variance. With
    g = dL/dy * weight, dL/dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat)) (means over D):
    the mean term because every x_i moves the mean, the x_hat term because it moves the variance.
    Returns (grad_x (..., D), grad_weight (D,), grad_bias (D,))."""
    x_hat, rstd, weight = _open(cache, "layer_norm_forward")
    _check_grad(grad_y, x_hat.shape, "layer_norm")
    g = grad_y * weight  # (..., D): the gradient reaching x_hat
    grad_x = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return grad_x, _sum_to(grad_y * x_hat, 1), _sum_to(grad_y, 1)


def gelu_forward(x: torch.Tensor):
    """The exact GELU, x Phi(x), with Phi the standard normal CDF (nn.GELU()'s default). Returns y, cache."""
    check_tensor(x, "x", "(...)")
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))  # Phi(x)
    return x * cdf, _cache("gelu_forward", (x, cdf), watch={"x": x, "cdf": cdf})


def gelu_backward(grad_y: torch.Tensor, cache):
    """d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the normal density. Returns (grad_x,)."""
    x, cdf = _open(cache, "gelu_forward")
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
    _check_probs(probs)
    _check_grad(grad_probs, probs.shape, "softmax")
    return probs * (grad_probs - (grad_probs * probs).sum(dim=-1, keepdim=True))


def _check_probs(probs: torch.Tensor) -> None:
    """Raise unless every row of probs (..., T) lies in [0, 1] and sums to 1 (within 1e-4, or the
    rounding of a half-precision dtype): the softmax's outputs, not the raw scores."""
    check_tensor(probs, "probs", "(..., T)")
    if probs.ndim == 0:
        raise ValueError("expected probs shaped (..., T), one row of softmax outputs per score row, got a 0-D tensor")
    if probs.numel() == 0:
        return
    tolerance = max(1e-4, 8 * torch.finfo(probs.dtype).eps) if probs.is_floating_point() else 1e-4
    low, high = probs.min().item(), probs.max().item()
    sums = probs.double().sum(dim=-1)  # (...,)
    if not (low >= -tolerance and high <= 1 + tolerance and (sums - 1).abs().max().item() <= tolerance):
        raise ValueError(
            f"probs must be softmax outputs, each row in [0, 1] summing to 1; got values from {low:.3g} to "
            f"{high:.3g}, row sums from {sums.min().item():.3g} to {sums.max().item():.3g} "
            "(the raw scores? pass scores.softmax(-1))"
        )


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
    watch = {"q": q, "k": k, "v": v, "probs": probs}
    return probs @ v, _cache("attention_forward", (q, k, v, probs, scale), watch=watch)


def attention_backward(grad_out: torch.Tensor, cache):
    """Back through out = P v, P = softmax(S), S = q k^T * scale:
    dv = P^T dout (..., S, d_v); dP = dout v^T (..., T, S); dS = softmax_backward(P, dP);
    dq = dS k * scale (..., T, d); dk = dS^T q * scale (..., S, d). A masked score has P = 0, so
    its dS is 0: the mask needs no backward of its own. Returns (grad_q, grad_k, grad_v)."""
    q, k, v, probs, scale = _open(cache, "attention_forward")
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
    _check_tokens(x)
    num_heads = check_whole(num_heads, "num_heads")
    B, T, D = x.shape
    _check_linear(x, qkv_weight, qkv_bias, "x", "qkv_weight", "qkv_bias")
    if qkv_weight.shape[0] != 3 * D:
        raise ValueError(
            f"qkv_weight must be (3D, D) = ({3 * D}, {D}) for tokens of width D = {D} (queries, keys and values "
            f"stacked), got {tuple(qkv_weight.shape)}"
        )
    if D % num_heads:
        raise ValueError(f"width {D} is not divisible by num_heads {num_heads}")
    _check_linear(x, proj_weight, proj_bias, "the merged heads", "proj_weight", "proj_bias")
    qkv, qkv_cache = linear_forward(x, qkv_weight, qkv_bias)  # (B, T, 3D)
    q, k, v = qkv.reshape(B, T, 3, num_heads, D // num_heads).permute(2, 0, 3, 1, 4)  # each (B, heads, T, hd)
    out, attention_cache = attention_forward(q, k, v, mask)  # (B, heads, T, hd)
    merged = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D): the heads side by side
    y, proj_cache = linear_forward(merged, proj_weight, proj_bias)  # (B, T, D)
    names = {"x": x, "qkv_weight": qkv_weight, "proj_weight": proj_weight}
    return y, _cache("multi_head_forward", (qkv_cache, attention_cache, proj_cache, num_heads), names=names)


def _check_tokens(x) -> None:
    """Raise unless x is a (B, T, D) tensor."""
    check_tensor(x, "x", "(B, T, D)")
    if x.ndim != 3:
        hint = ": add the batch axis, x[None]" if x.ndim == 2 else ""
        raise ValueError(f"expected x shaped (B, T, D), got a {x.ndim}-D tensor of shape {tuple(x.shape)}{hint}")


def multi_head_backward(grad_y: torch.Tensor, cache):
    """The forward in reverse: the output Linear, the merge undone (a reshape's backward is the
    reverse reshape), attention, the split undone (dq, dk, dv stacked back into one (B, T, 3D)),
    the qkv Linear. Returns (grad_x, grad_qkv_weight, grad_qkv_bias, grad_proj_weight, grad_proj_bias)."""
    qkv_cache, attention_cache, proj_cache, num_heads = _open(cache, "multi_head_forward")
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
    _check_linear(x, fc1_weight, fc1_bias, "x", "fc1_weight", "fc1_bias")
    hidden, fc1_cache = linear_forward(x, fc1_weight, fc1_bias)  # (..., hidden)
    active, gelu_cache = gelu_forward(hidden)
    check_tensor(fc2_weight, "fc2_weight", "(D, hidden)", ndim=2)
    if fc2_weight.shape[1] != hidden.shape[-1]:
        raise ValueError(
            f"fc2_weight must take fc1_weight's {hidden.shape[-1]} outputs, shaped (D, {hidden.shape[-1]}), "
            f"got {tuple(fc2_weight.shape)}"
        )
    _check_linear(active, fc2_weight, fc2_bias, "the hidden layer", "fc2_weight", "fc2_bias")
    y, fc2_cache = linear_forward(active, fc2_weight, fc2_bias)  # (..., D)
    names = {"x": x, "fc1_weight": fc1_weight, "fc2_weight": fc2_weight}
    return y, _cache("mlp_forward", (fc1_cache, gelu_cache, fc2_cache), names=names)


def mlp_backward(grad_y: torch.Tensor, cache):
    """Returns (grad_x, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias)."""
    fc1_cache, gelu_cache, fc2_cache = _open(cache, "mlp_forward")
    grad_active, grad_fc2_weight, grad_fc2_bias = linear_backward(grad_y, fc2_cache)
    (grad_hidden,) = gelu_backward(grad_active, gelu_cache)
    grad_x, grad_fc1_weight, grad_fc1_bias = linear_backward(grad_hidden, fc1_cache)
    return grad_x, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias


def _check_block(block) -> None:
    if not isinstance(block, EncoderBlock):
        raise WrongTypeError(f"expected a utils.encoder.EncoderBlock, got {describe(block)}")
    if isinstance(block.ls1, nn.Module) and not isinstance(block.ls1, nn.Identity):
        raise ValueError("blocks with LayerScale are not covered here: build the block with layer_scale=None")
    if not isinstance(block.attn.q_norm, nn.Identity):
        raise ValueError("blocks with qk_norm (a LayerNorm on queries and keys) are not covered here: qk_norm=False")
    if type(block.mlp).__name__ != "MLP" or not (
        isinstance(block.mlp.act, nn.GELU) and block.mlp.act.approximate == "none"
    ):
        raise ValueError(
            "only the MLP with the exact GELU is covered here (mlp='gelu', act='gelu'): no SwiGLU, "
            "tanh-GELU or QuickGELU"
        )
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
    _check_tokens(x)
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
    items = (block.norm_first, norm1_cache, attn_cache, norm2_cache, mlp_cache)
    return y, _cache("block_forward", items, names={"x": x, **dict(block.named_parameters())})


def block_backward(grad_y: torch.Tensor, cache):
    """Back through the block. At each residual add the gradient is copied to both summands: the
    identity path carries it on unchanged, the branch adds its own. Pre-norm: dx1 = dy + norm2's
    backward of the MLP's backward of dy; dx = dx1 + norm1's backward of attention's backward of
    dx1. Returns (grad_x, {name: gradient} for BLOCK_PARAMETERS)."""
    norm_first, norm1_cache, attn_cache, norm2_cache, mlp_cache = _open(cache, "block_forward")
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


_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def cross_entropy_forward(logits: torch.Tensor, labels: torch.Tensor):
    """The mean cross-entropy of (B, classes) logits against (B,) integer labels. Returns the loss (0-d), cache."""
    check_tensor(logits, "logits", "(B, classes)", ndim=2, nonempty=True)
    if not isinstance(labels, torch.Tensor) or labels.shape != logits.shape[:1] or labels.dtype not in _INTEGER_DTYPES:
        raise ValueError(f"expected integer labels shaped ({logits.shape[0]},), got {describe(labels)}")
    classes = logits.shape[1]
    low, high = labels.min().item(), labels.max().item()
    if low < 0 or high >= classes:
        raise ValueError(
            f"labels must be class indices from 0 to {classes - 1} (logits have {classes} classes), "
            f"got values from {low} to {high}"
        )
    labels = labels.long()  # gather and scatter take int64 indices
    log_probs = logits.log_softmax(dim=-1)  # (B, classes)
    loss = -log_probs.gather(1, labels[:, None]).mean()
    probs = log_probs.exp()  # (B, classes)
    return loss, _cache("cross_entropy_forward", (probs, labels), watch={"probs": probs, "labels": labels})


def cross_entropy_backward(grad_loss: torch.Tensor | float, cache):
    """dL/dlogits = (softmax(logits) - one_hot(labels)) / B: the softmax's Jacobian and the log's
    derivative cancel into one subtraction. Returns (grad_logits (B, classes), None for the labels)."""
    probs, labels = _open(cache, "cross_entropy_forward")
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
    config = model.config
    uncovered = [
        (config.reg_tokens > 0, "register tokens (reg_tokens)"),
        (config.dist_token, "a distillation token (dist_token)"),
        (
            config.class_token is not None and config.class_token != (config.pool == "cls"),
            "class_token with pool='mean'",
        ),
        (config.no_embed_class, "positions that leave the class token out (no_embed_class)"),
        (config.pos_embed == "rope2d", "rotary positions (pos_embed='rope2d')"),
    ]
    for found, feature in uncovered:
        if found:
            raise ValueError(f"the manual backward does not cover {feature}: lesson 10 builds the plain ViT")
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
    embed = model.patch_embed
    check_images_fit(images, embed.patch_size, embed.in_channels, embed.image_size)
    check_dtype(images, "images", embed.proj.weight.dtype)
    check_device(images, "images", embed.proj.weight)
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
    names = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    layout = (config.pool, prefix, model.cls_token is not None, isinstance(model.pos_embed, nn.Parameter), names)
    items = (layout, patch_cache, norm_pre_cache, steps, norm_cache, x.shape, fc_norm_cache, head_cache, loss_cache)
    return loss, _cache("vit_forward", items, names={"images": images, **dict(model.named_parameters())})


def vit_backward(cache) -> dict[str, torch.Tensor]:
    """Every parameter's gradient of the loss vit_forward returned, by hand, in reverse order.

    Pooling's backward hands the pooled gradient to the tokens it came from: all of it to the class
    token's row (pool="cls"), or an equal 1/N share to each patch token (pool="mean"); the other rows
    get zeros. The class token and the position table are used once per image, so their gradients
    are sums over the batch. Returns {name: gradient} with the names of model.named_parameters()
    (those that require a gradient; a fixed sin-cos table has none).
    """
    layout, patch_cache, norm_pre_cache, steps, norm_cache, shape, fc_norm_cache, head_cache, loss_cache = _open(
        cache, "vit_forward"
    )
    pool, prefix, has_cls_token, learned_positions, names = layout
    grads = {}
    grad_logits, _ = cross_entropy_backward(1.0, loss_cache)  # (B, classes)
    grad_pooled, grads["head.weight"], grads["head.bias"] = linear_backward(grad_logits, head_cache)  # (B, D)
    if fc_norm_cache is not None:
        grad_pooled, grads["fc_norm.weight"], grads["fc_norm.bias"] = layer_norm_backward(grad_pooled, fc_norm_cache)
    grad_x = grad_pooled.new_zeros(shape)  # (B, T, D)
    if pool == "cls":
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
    if learned_positions:
        grads["pos_embed"] = grad_x.sum(dim=0, keepdim=True)  # (1, T, D)
    if has_cls_token:
        grads["cls_token"] = grad_x[:, :1].sum(dim=0, keepdim=True)  # (1, 1, D)
        grad_x = grad_x[:, 1:]  # (B, N, D): the patch tokens
    _, grads["patch_embed.proj.weight"], grads["patch_embed.proj.bias"] = patch_embed_backward(grad_x, patch_cache)
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


def finite_difference_grad(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, h: float = 1e-6, *, max_numbers: int = 10_000
) -> torch.Tensor:
    """dL/dx of a scalar function, one number at a time: (f(x + h e_i) - f(x - h e_i)) / 2h.
    Error O(h^2) plus rounding O(eps / h): use float64, where h = 1e-6 leaves about 1e-9.
    Costs 2 calls of f per number of x, so only for small x: more than `max_numbers` numbers raise."""
    if not callable(f):
        raise WrongTypeError(f"f must be a function of x that returns one number (a scalar loss), got {describe(f)}")
    check_tensor(x, "x", "(...)")
    h = check_positive(h, "h")
    max_numbers = check_whole(max_numbers, "max_numbers")
    if x.numel() > max_numbers:
        raise ValueError(
            f"x has {x.numel():,} numbers: finite differences call f twice per number ({2 * x.numel():,} calls); "
            f"pass at most {max_numbers:,}, e.g. a slice or a small layer (or raise max_numbers=)"
        )
    if x.dtype != torch.float64:
        raise ValueError(f"finite differences need float64 (float32 rounding swamps them), got {x.dtype}")
    grad = torch.zeros_like(x)
    flat_x, flat_grad = x.detach().clone().reshape(-1), grad.reshape(-1)
    for i in range(flat_x.numel()):
        original = flat_x[i].item()
        flat_x[i] = original + h
        up = _one_number(f(flat_x.reshape(x.shape)))
        flat_x[i] = original - h
        down = _one_number(f(flat_x.reshape(x.shape)))
        flat_x[i] = original
        flat_grad[i] = (up - down) / (2 * h)
    return grad


def _one_number(value) -> float:
    """What f returned, as a float: a one-element tensor or a real number; anything else raises."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"f must return one number (a scalar loss), got a tensor of shape {tuple(value.shape)}: "
                "sum it, or take one output"
            )
        return float(value)
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise WrongTypeError(f"f must return one number (a scalar loss), got {describe(value)}")


def _tensors(cache) -> Iterable[torch.Tensor]:
    """Every tensor inside a (nested) cache of tuples, lists and dicts; numbers, strings and None
    hold none; any other container raises (its tensors could not be counted)."""
    if isinstance(cache, torch.Tensor):
        yield cache
    elif isinstance(cache, list | tuple):
        for item in cache:
            yield from _tensors(item)
    elif isinstance(cache, Mapping):
        for item in cache.values():
            yield from _tensors(item)
    elif not (cache is None or isinstance(cache, numbers.Number | str | bytes | torch.dtype | torch.device)):
        raise WrongTypeError(f"cache holds a {type(cache).__name__}: expected tensors in tuples, lists or dicts")


def cache_bytes(cache, exclude: Iterable[torch.Tensor] = ()) -> int:
    """The memory a backward needs besides the parameters: the bytes of every distinct storage
    in the cache (a tensor kept twice, or a view of one, counted once), leaving out `exclude`
    (the parameters, which exist anyway)."""
    excluded = {check_tensor(tensor, "each of exclude").untyped_storage().data_ptr() for tensor in exclude}
    storages = {}
    for tensor in _tensors(cache):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())
