"""Lesson 5's exercise checkers: an encoder block's forward pass, and a ViT's parameter count."""

import numbers
from collections.abc import Callable

import torch
from torch import nn

from utils.checks.core import CheckFailed, call_learner, compare, summarize
from utils.encoder import EncoderBlock
from utils.vit import VisionTransformer, ViTConfig

BLOCK_CASES = [  # (B, T, D, heads, mlp_ratio)
    (2, 5, 16, 4, 4.0),
    (1, 9, 24, 3, 2.0),
    (3, 4, 8, 1, 4.0),
]


def _random_block(D: int, heads: int, mlp_ratio: float, generator: torch.Generator) -> EncoderBlock:
    """An encoder block with random values in every parameter, the two LayerNorms included (with
    their default unit scale and zero shift, swapping norm1 and norm2 would go unnoticed)."""
    block = EncoderBlock(D, heads, mlp_ratio).eval()
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(1 + 0.5 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))
    return block


def _block_variants(x: torch.Tensor, b: EncoderBlock) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible encoder-block outputs, each keyed by the sentence that explains it."""
    n1, attn, n2, mlp = b.norm1, b.attn, b.norm2, b.mlp
    no_attn_res = attn(n1(x))
    mlp_first = x + mlp(n2(x))
    h1 = n1(x)
    x1 = x + attn(n1(x))
    return {
        "you forgot the residual connection around attention: add the block's input back, "
        "x = x + attn(norm1(x))": no_attn_res + mlp(n2(no_attn_res)),
        "you forgot the residual connection around the MLP: x = x + mlp(norm2(x))": mlp(n2(x1)),
        "you forgot both residual connections: each sub-layer's output must be added to its input (x = x + ...)": mlp(
            n2(attn(n1(x)))
        ),
        "that is the post-norm order (norm after the residual add, as in the original Transformer); "
        "ViT normalises first: x = x + attn(norm1(x)), then x = x + mlp(norm2(x))": (
            n2(n1(x + attn(x)) + mlp(n1(x + attn(x))))
        ),
        "norm1 and norm2 are swapped: norm1 goes before attention, norm2 before the MLP": (
            (x + attn(n2(x))) + mlp(n1(x + attn(n2(x))))
        ),
        "the MLP ran before attention: a block first lets the tokens talk (attention), then "
        "processes each token alone (MLP)": mlp_first + attn(n1(mlp_first)),
        "the MLP ran before attention (each with the other's norm): attention comes first, "
        "x = x + attn(norm1(x)), then x = x + mlp(norm2(x))": ((x + mlp(n1(x))) + attn(n2(x + mlp(n1(x))))),
        "the residual adds the normalised tokens; add the block's raw input instead: "
        "x = x + attn(norm1(x)), not norm1(x) + attn(norm1(x))": ((h1 + attn(h1)) + mlp(n2(h1 + attn(h1)))),
        "the norms sit on the sub-layers' outputs; in pre-norm they go on the inputs: "
        "x + attn(norm1(x)), not x + norm1(attn(x))": ((x + n1(attn(x))) + n2(mlp(x + n1(attn(x))))),
    }


def check_encoder_block(
    fn: Callable[[torch.Tensor, nn.Module, nn.Module, nn.Module, nn.Module], torch.Tensor],
) -> None:
    """Check a learner's pre-norm encoder_block(x, norm1, attn, norm2, mlp) -> (B, T, D)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, T, D, heads, mlp_ratio in BLOCK_CASES:
        block = _random_block(D, heads, mlp_ratio, generator)
        x = torch.randn(B, T, D, generator=generator)
        where = f"for tokens of shape {(B, T, D)} and {heads} heads"
        with torch.no_grad():
            expected = block(x)
            got = call_learner(fn, x.clone(), block.norm1, block.attn, block.norm2, block.mlp)
            verdicts.append(
                compare(
                    got,
                    expected,
                    where,
                    any_shape_hint="a block maps (B, T, D) tokens to (B, T, D) tokens",
                    atol=1e-5,
                    mistakes=_block_variants(x, block),
                )
            )
    print(f"✓ encoder_block matches utils.EncoderBlock on {len(verdicts)} random blocks: {summarize(verdicts)}")


COUNT_CASES = [  # ViT-B/16 first, then configs that exercise every field the count depends on
    ViTConfig.vit_b16(),
    ViTConfig.tiny(),
    ViTConfig.vit_b16(image_size=384, patch_size=32, num_classes=10),
    ViTConfig.tiny(pool="mean"),
    ViTConfig.tiny(pos_embed="sincos"),
    ViTConfig.tiny(qkv_bias=False, mlp_ratio=4.0, in_channels=1),
]


def _shape_only_model(config: ViTConfig) -> VisionTransformer:
    """VisionTransformer(config) for counting: a big one on the meta device (shapes only, nothing
    allocated or initialised, so ViT-B/16 costs nothing), a small one on the CPU."""
    big = config.depth * config.embed_dim**2 > 10**6
    with torch.device("meta" if big else "cpu"):
        return VisionTransformer(config)


def reference_parameter_count(config: ViTConfig) -> int:
    """The number of trainable parameters of VisionTransformer(config)."""
    return sum(p.numel() for p in _shape_only_model(config).parameters())


def _count_variants(config: ViTConfig) -> list[tuple[str, int]]:
    """Wrong-but-plausible parameter counts, each with the sentence that explains it (the first
    sentence wins where two mistakes give the same number)."""
    model = _shape_only_model(config)
    total = sum(p.numel() for p in model.parameters())
    D, depth, K, T = config.embed_dim, config.depth, config.num_classes, config.num_tokens
    layer_biases = sum(
        m.bias.numel() for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d)) and m.bias is not None
    )
    norm_biases = sum(m.bias.numel() for m in model.modules() if isinstance(m, nn.LayerNorm))
    variants = []
    if config.pool == "mean":
        no_cls = "pool='mean' has no class token: no cls_token parameter, and the position table has N rows, not N + 1"
        variants += [(no_cls, total + D), (no_cls, total + 2 * D)]
    if config.pos_embed == "sincos":
        variants.append(
            ("pos_embed='sincos' is a fixed table (a buffer, not a parameter): it adds no parameters", total + T * D)
        )
    if config.pos_embed == "none":
        variants.append(("pos_embed='none' has no position table", total + T * D))
    if not config.qkv_bias:
        variants.append(("qkv_bias=False: the qkv Linear has no bias", total + depth * 3 * D))
    variants += [
        (
            "you forgot the biases (every Linear, the patch-embedding Conv2d and every LayerNorm has one)",
            total - layer_biases - norm_biases,
        ),
        (
            "you forgot the biases of the Linear layers and of the patch-embedding Conv2d (one per output)",
            total - layer_biases,
        ),
        (
            "you forgot the LayerNorms' biases: each LayerNorm has a weight and a bias, D numbers each",
            total - norm_biases,
        ),
    ]
    if config.qkv_bias:
        variants.append(
            (
                "you counted qkv as D*D; it makes queries, keys and values at once: 3*D*D weights and 3*D biases",
                total - depth * (2 * D * D + 2 * D),
            )
        )
    variants += [
        (
            "you counted qkv's weights as D*D; it makes queries, keys and values at once: 3*D*D",
            total - depth * 2 * D * D,
        ),
        ("you forgot the final LayerNorm after the last block (2*D numbers)", total - 2 * D),
    ]
    if K > 0:
        variants.append(
            ("you forgot the classification head (D*num_classes weights and num_classes biases)", total - (D * K + K))
        )
    if config.pool == "cls":
        variants.append(
            ("you forgot the class token (D numbers), or its row in the position table (T = N + 1 rows)", total - D)
        )
    if config.pos_embed == "learned":
        variants.append(("you forgot the learned position table (T*D numbers)", total - T * D))
        if config.pool == "cls":
            variants.append(
                ("you forgot the class token and the position table ((T + 1)*D numbers)", total - (T + 1) * D)
            )
    variants.append(("each block has two LayerNorms (norm1 and norm2) of 2*D numbers each", total - depth * 2 * D))
    return variants


def _describe(config: ViTConfig) -> str:
    """A short description of a config for the checker's messages."""
    parts = [
        f"image_size={config.image_size}",
        f"patch_size={config.patch_size}",
        f"in_channels={config.in_channels}",
        f"embed_dim={config.embed_dim}",
        f"depth={config.depth}",
        f"mlp_ratio={config.mlp_ratio}",
        f"num_classes={config.num_classes}",
    ]
    for field, default in (("pool", "cls"), ("pos_embed", "learned"), ("qkv_bias", True)):
        if getattr(config, field) != default:
            parts.append(f"{field}={getattr(config, field)!r}")
    return "ViTConfig(" + ", ".join(parts) + ")"


def check_count_vit_parameters(fn: Callable[[ViTConfig], int]) -> None:
    """Check a learner's count_vit_parameters(config) -> int against VisionTransformer(config)."""
    for config in COUNT_CASES:
        got = call_learner(fn, config, returns=object)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if isinstance(got, numbers.Integral) and not isinstance(got, bool):
            got = int(got)
        else:
            raise CheckFailed(f"expected an int, got {type(got).__name__} {got!r}")
        expected = reference_parameter_count(config)
        if got == expected:
            continue
        where = f"for {_describe(config)}"
        for reason, wrong in _count_variants(config):
            if got == wrong:
                raise CheckFailed(f"{got:,} {where}: {reason} (expected {expected:,})")
        raise CheckFailed(f"expected {expected:,} parameters {where}, got {got:,} (off by {got - expected:+,})")
    print(f"✓ count_vit_parameters matches VisionTransformer on {len(COUNT_CASES)} configs, ViT-B/16 included")
