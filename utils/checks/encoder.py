"""Lesson 5's exercise checkers: a post-norm block, a LayerScale block, and a ViT's parameter count."""

import copy
import itertools
from collections.abc import Callable

import torch
from torch import nn

from utils.checks.core import CheckFailed, call_learner, compare, summarize, varies_between_calls, whole_number
from utils.encoder import EncoderBlock
from utils.patches import to_2tuple
from utils.vit import VisionTransformer, ViTConfig

BLOCK_CASES = [  # (B, T, D, heads, mlp_ratio); T != D, so that a scale on the wrong axis cannot broadcast
    (2, 5, 16, 4, 4.0),
    (1, 9, 24, 3, 2.0),
    (3, 4, 8, 1, 4.0),
]

ATTN_TAKES_TOKENS = (
    "attn takes the normalised tokens only, attn(norm1(x)), and returns the new tokens; it makes "
    "q, k and v itself (unlike torch's nn.MultiheadAttention(q, k, v))"
)
GAMMA_SHAPE = (
    "gamma1 and gamma2 hold one number per feature, shape (D,): multiply a branch's (B, T, D) output "
    "by them as they are, gamma1 * attn(norm1(x)), and they apply to every token of every image"
)


def _random_block(D: int, heads: int, mlp_ratio: float, generator: torch.Generator) -> EncoderBlock:
    """A block with LayerScale and random values in every parameter: the LayerNorms' scales near 1
    (with their default unit scale and zero shift, swapping norm1 and norm2 would go unnoticed),
    the two gammas near 0.5 and different from each other, the rest around 0."""
    return _randomise(EncoderBlock(D, heads, mlp_ratio, layer_scale=1.0).eval(), generator)


def _randomise(block: EncoderBlock, generator: torch.Generator) -> EncoderBlock:
    """Draw every parameter of `block` anew: LayerNorm scales near 1, gammas near 0.5, the rest
    around 0 (a default unit scale and zero shift could hide a swapped or missing norm)."""
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.startswith("norm") and name.endswith("weight"):
                p.copy_(1 + 0.5 * torch.randn(p.shape, generator=generator))
            elif name.endswith("gamma"):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=generator))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=generator))
    return block


def _block_variants(x: torch.Tensor, b: EncoderBlock) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible LayerScale-block outputs, each keyed by the sentence that explains it."""
    n1, attn, n2, mlp = b.norm1, b.attn, b.norm2, b.mlp
    g1, g2 = b.ls1.gamma, b.ls2.gamma

    def then_mlp(h: torch.Tensor, norm: nn.Module = n2, scale: torch.Tensor = g2) -> torch.Tensor:
        """The MLP half of the block, on attention's result h."""
        return h + scale * mlp(norm(h))

    x1 = x + g1 * attn(n1(x))  # the right first half
    post = n1(x + g1 * attn(x))
    stream = g1 * (x + attn(n1(x)))
    residual = g1 * x + attn(n1(x))
    before_norm = x + attn(n1(g1 * x))
    after_norm = x + attn(g1 * n1(x))
    added = x + (attn(n1(x)) + g1)
    mlp_first = x + g2 * mlp(n2(x))
    normed = n1(x)
    outputs_normed = x + g1 * n1(attn(x))
    return {
        "you left out gamma1 and gamma2: that is the plain pre-norm block; LayerScale multiplies each "
        "branch's output by its gamma before the residual add: x = x + gamma1 * attn(norm1(x))": then_mlp(
            x + attn(n1(x)), scale=1.0
        ),
        "gamma1 is missing: attention's output is scaled too, x = x + gamma1 * attn(norm1(x))": then_mlp(
            x + attn(n1(x))
        ),
        "gamma2 is missing: the MLP's output is scaled too, x = x + gamma2 * mlp(norm2(x))": then_mlp(x1, scale=1.0),
        "gamma1 and gamma2 are swapped: gamma1 scales attention's output, gamma2 the MLP's": then_mlp(
            x + g2 * attn(n1(x)), scale=g1
        ),
        "you used gamma1 for the MLP too; the MLP has its own scale: x = x + gamma2 * mlp(norm2(x))": then_mlp(
            x1, scale=g1
        ),
        "you used gamma2 for attention too; attention has its own scale: x = x + gamma1 * attn(norm1(x))": then_mlp(
            x + g2 * attn(n1(x))
        ),
        "you scaled the whole stream, the residual too: gamma multiplies only what the branch adds, "
        "x = x + gamma1 * attn(norm1(x)), not gamma1 * (x + attn(norm1(x)))": g2 * (stream + mlp(n2(stream))),
        "you scaled the block's input x instead of the branch: x = x + gamma1 * attn(norm1(x)), "
        "not gamma1 * x + attn(norm1(x))": g2 * residual + mlp(n2(residual)),
        "gamma scales the branch's output, not its input: x + gamma1 * attn(norm1(x)), "
        "not attn(norm1(gamma1 * x))": before_norm + mlp(n2(g2 * before_norm)),
        "gamma scales the branch's output, not its normalised input: x + gamma1 * attn(norm1(x)), "
        "not attn(gamma1 * norm1(x))": after_norm + mlp(g2 * n2(after_norm)),
        "gamma is added to the branch's output; LayerScale multiplies it, feature by feature: "
        "x + gamma1 * attn(norm1(x))": added + (mlp(n2(added)) + g2),
        "that is the post-norm order (norm after the residual add, as in the original Transformer); "
        "CaiT, like ViT, normalises first: x = x + gamma1 * attn(norm1(x)), then "
        "x = x + gamma2 * mlp(norm2(x))": n2(post + g2 * mlp(post)),
        "attention and the MLP both read the block's input x (a parallel block, as in ViT-22B); here "
        "the MLP reads attention's result: x = x + gamma1 * attn(norm1(x)), then "
        "x = x + gamma2 * mlp(norm2(x))": x1 + g2 * mlp(n2(x)),
        "you forgot the residual connection around attention: add the block's input back, "
        "x = x + gamma1 * attn(norm1(x))": then_mlp(g1 * attn(n1(x))),
        "you forgot the residual connection around the MLP: x = x + gamma2 * mlp(norm2(x))": g2 * mlp(n2(x1)),
        "you forgot both residual connections: each scaled branch is added to its input (x = x + ...)": g2
        * mlp(n2(g1 * attn(n1(x)))),
        "the MLP's residual adds the block's input x; add attention's result instead: "
        "h = x + gamma1 * attn(norm1(x)), then h + gamma2 * mlp(norm2(h))": x + g2 * mlp(n2(x1)),
        "you put one residual connection around the whole block; each branch gets its own: "
        "x = x + gamma1 * attn(norm1(x)), then x = x + gamma2 * mlp(norm2(x))": x + g2 * mlp(n2(g1 * attn(n1(x)))),
        "the residual adds the normalised tokens; add the block's raw input instead: "
        "x = x + gamma1 * attn(norm1(x)), not norm1(x) + gamma1 * attn(norm1(x))": then_mlp(normed + g1 * attn(normed)),
        "the norms sit on the branches' outputs; in pre-norm they go on the inputs: "
        "x + gamma1 * attn(norm1(x)), not x + gamma1 * norm1(attn(x))": outputs_normed + g2 * n2(mlp(outputs_normed)),
        "norm1 is missing: attention reads the normalised tokens, x = x + gamma1 * attn(norm1(x))": then_mlp(
            x + g1 * attn(x)
        ),
        "norm2 is missing: the MLP reads the normalised tokens, x = x + gamma2 * mlp(norm2(x))": x1 + g2 * mlp(x1),
        "norm1 and norm2 are swapped: norm1 goes before attention, norm2 before the MLP": then_mlp(
            x + g1 * attn(n2(x)), n1
        ),
        "both norms are missing: x = x + gamma1 * attn(norm1(x)), then x = x + gamma2 * mlp(norm2(x))": then_mlp(
            x + g1 * attn(x), nn.Identity()
        ),
        "the MLP ran before attention: a block first lets the tokens talk (attention), then "
        "processes each token alone (MLP)": mlp_first + g1 * attn(n1(mlp_first)),
        "the MLP half is missing: after x = x + gamma1 * attn(norm1(x)) comes x = x + gamma2 * mlp(norm2(x))": x1,
        "your block returns the tokens unchanged: x = x + gamma1 * attn(norm1(x)), then "
        "x = x + gamma2 * mlp(norm2(x)), and return the new x": x,
        "attn returns the new tokens (B, T, D), not a tuple: [0] kept the first image's tokens only; "
        "x = x + gamma1 * attn(norm1(x))": then_mlp(x + g1 * attn(n1(x))[0]),
    }


def _explain_error(error: Exception) -> str | None:
    """A sentence for a broadcasting error: a gamma used on the wrong axis (or with @)."""
    text = str(error)
    if "must match the size of tensor" in text or "cannot be multiplied" in text or "size mismatch" in text:
        return GAMMA_SHAPE
    return None


def _call_block(fn: Callable, x: torch.Tensor, block: EncoderBlock, where: str) -> torch.Tensor:
    """The learner's block on copies of x and of the block's modules and scales (nothing it changes
    sticks); attn called like torch's nn.MultiheadAttention(q, k, v) is named (its own error prints a
    whole tensor)."""
    block = copy.deepcopy(block)
    gamma1, gamma2 = block.ls1.gamma.detach(), block.ls2.gamma.detach()
    modules = (block.norm1, block.attn, gamma1, block.norm2, block.mlp, gamma2)
    try:
        return call_learner(fn, x.clone(), *modules, where=where, explain=_explain_error)
    except CheckFailed as failure:
        error = failure.__cause__
        if "return_attention must be True or False" in str(error) or "need_weights" in str(error):
            raise CheckFailed(f"your function raised {type(error).__name__} {where}: {ATTN_TAKES_TOKENS}") from error
        raise


def check_layer_scale_block(
    fn: Callable[[torch.Tensor, nn.Module, nn.Module, torch.Tensor, nn.Module, nn.Module, torch.Tensor], torch.Tensor],
) -> None:
    """Check a learner's layer_scale_block(x, norm1, attn, gamma1, norm2, mlp, gamma2) -> (B, T, D)
    against utils.EncoderBlock(..., layer_scale=...) holding the same modules and scales."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, T, D, heads, mlp_ratio in BLOCK_CASES:
        block = _random_block(D, heads, mlp_ratio, generator)
        x = torch.randn(B, T, D, generator=generator)
        where = f"for tokens of shape {(B, T, D)} and {heads} heads"
        with torch.no_grad():
            expected = block(x)
            got = _call_block(fn, x, block, where)
            try:
                verdicts.append(
                    compare(
                        got,
                        expected,
                        where,
                        any_shape_hint=f"a block maps (B, T, D) tokens to (B, T, D) tokens; {GAMMA_SHAPE}",
                        atol=1e-5,
                        mistakes=_block_variants(x, block),
                    )
                )
            except CheckFailed:
                if varies_between_calls(lambda: _call_block(fn, x, block, where), got, expected):
                    raise CheckFailed(
                        f"your block gives another result each time on the same tokens {where}: is there a "
                        "dropout (or another random step) in it? F.dropout(x, p) and a new nn.Dropout drop "
                        "values even when the model is evaluated; the block's dropout already sits inside "
                        "attn and mlp"
                    ) from None
                raise
    print(
        f"✓ layer_scale_block matches utils.EncoderBlock(layer_scale=...) on {len(verdicts)} random blocks: "
        f"{summarize(verdicts)}"
    )


COUNT_CASES = [  # ViT-B/16 first, then configs that exercise every field the count depends on
    ViTConfig.vit_b16(),
    ViTConfig.tiny(),
    ViTConfig.vit_b16(image_size=(384, 256), patch_size=32, num_classes=10),  # not square: N = 12 * 8
    ViTConfig.tiny(pool="mean"),
    ViTConfig.tiny(pos_embed="sincos"),
    ViTConfig.tiny(qkv_bias=False, mlp_ratio=4.0, in_channels=1, pos_embed="none"),
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


MEAN_HAS_NO_CLASS_TOKEN = (
    "a class token with pool='mean'",
    "pool='mean' has no class token: no cls_token parameter, and the position table has N rows, not N + 1",
)

# The typical mistakes in counting, each a switch of parameter_count: (what is wrong, in a few
# words; the sentence that explains it).
COUNT_MISTAKES = {
    "no_biases": (
        "no biases",
        "you forgot the biases (every Linear, the patch-embedding Conv2d and every LayerNorm has one)",
    ),
    "no_layer_biases": (
        "no Linear or Conv2d biases",
        "you forgot the biases of the Linear layers and of the patch-embedding Conv2d (one per output)",
    ),
    "no_norm_biases": (
        "no LayerNorm biases",
        "you forgot the LayerNorms' biases: each LayerNorm has a weight and a bias, D numbers each",
    ),
    "no_conv_bias": ("the Conv2d's bias", "you forgot the patch-embedding Conv2d's bias (D numbers, one per output)"),
    "no_cls_token": ("the class token", "you forgot the class token (D numbers)"),
    "no_cls_row": (
        "the class token's position row",
        "the position table has a row for the class token too (T = N + 1 rows): you left it out (D numbers)",
    ),
    "no_pos_table": ("the position table", "you forgot the learned position table (T*D numbers)"),
    "sincos_counted": (
        "a sin-cos table counted",
        "pos_embed='sincos' is a fixed table (a buffer, not a parameter): it adds no parameters",
    ),
    "none_counted": ("a table counted for pos_embed='none'", "pos_embed='none' has no position table"),
    "pos_embed_ignored": (
        "a table counted whatever pos_embed is",
        "only pos_embed='learned' has a position table of parameters: 'sincos' is a fixed table (a buffer), "
        "'none' has none",
    ),
    "mean_cls": MEAN_HAS_NO_CLASS_TOKEN,  # the token and its position row
    "mean_cls_token": MEAN_HAS_NO_CLASS_TOKEN,  # the token alone
    "qkv_single": (
        "qkv as D*D",
        "you counted qkv as D*D; it makes queries, keys and values at once: 3*D*D weights and 3*D biases",
    ),
    "qkv_weights_single": (
        "qkv's weights as D*D",
        "you counted qkv's weights as D*D; it makes queries, keys and values at once: 3*D*D",
    ),
    "qkv_bias_always": ("qkv's bias counted", "qkv_bias=False: the qkv Linear has no bias"),
    "qkv_bias_never": (
        "qkv's bias left out",
        "you left out qkv's bias: with qkv_bias=True the qkv Linear has 3*D biases in every block",
    ),
    "no_proj": ("attention's proj", "you forgot attention's output projection, proj: D*D weights and D biases"),
    "mlp_ratio_ignored": (
        "mlp_ratio ignored",
        "the MLP's hidden width is int(D * mlp_ratio): you used 4 * D whatever mlp_ratio is",
    ),
    "mlp_no_ratio": (
        "an MLP D wide",
        "the MLP's hidden layer is mlp_ratio times wider than D: fc1 is D -> int(D * mlp_ratio), fc2 back to D",
    ),
    "in_channels_ignored": (
        "in_channels ignored",
        "the patch embedding sees in_channels channels, C*P*P*D weights: you used C = 3 whatever in_channels is",
    ),
    "no_channels": (
        "the channels in the patch embedding",
        "each patch holds C*P*P numbers (C = in_channels): the patch embedding has C*P*P*D weights, not P*P*D",
    ),
    "one_norm_per_block": (
        "one LayerNorm per block",
        "each block has two LayerNorms (norm1 and norm2) of 2*D numbers each",
    ),
    "no_final_norm": ("the final LayerNorm", "you forgot the final LayerNorm after the last block (2*D numbers)"),
    "no_norms": (
        "the LayerNorms",
        "you forgot the LayerNorms: two in every block (norm1, norm2) and one after the last, 2*D numbers each",
    ),
    "no_head": (
        "the head",
        "you forgot the classification head (D*num_classes weights and num_classes biases)",
    ),
    "no_head_bias": ("the head's bias", "you forgot the head's bias (num_classes numbers)"),
    "one_block": (
        "one block only",
        "you counted one block; a ViT has depth of them: multiply a block's count by depth",
    ),
    "patches_not_squared": (
        "N = image_size // P",
        "the grid has image_size // P patches on each side, so N = (image_size // P) ** 2 of them",
    ),
    "square_from_height": (
        "N from the height alone",
        "the image need not be square: image_size can be a pair (H, W), and N = (H // P) * (W // P) "
        "(config.num_patches)",
    ),
}


def parameter_count(config: ViTConfig, mistakes: frozenset[str] = frozenset()) -> int:
    """The parameter count of VisionTransformer(config), added up by hand; each switch in `mistakes`
    (a key of COUNT_MISTAKES) makes one typical mistake."""

    def made(*names: str) -> bool:
        return any(name in mistakes for name in names)

    D, P, K = config.embed_dim, config.patch_size, config.num_classes
    C = 1 if made("no_channels") else 3 if made("in_channels_ignored") else config.in_channels
    H, W = to_2tuple(config.image_size)
    N = (H // P) ** 2 if made("square_from_height") else H // P if made("patches_not_squared") else (H // P) * (W // P)
    ratio = 1.0 if made("mlp_no_ratio") else 4.0 if made("mlp_ratio_ignored") else config.mlp_ratio
    hidden = int(D * ratio)
    bias = 0 if made("no_biases", "no_layer_biases") else 1  # per output of a Linear or the Conv2d
    norm = D if made("no_biases", "no_norm_biases") else 2 * D  # one LayerNorm
    has_cls = config.pool == "cls" or made("mean_cls", "mean_cls_token")
    rows = N + ((config.pool == "cls" or made("mean_cls")) and not made("no_cls_row"))
    table = {
        "learned": not made("no_pos_table"),
        "sincos": made("sincos_counted", "pos_embed_ignored"),
        "none": made("none_counted", "pos_embed_ignored"),
    }

    total = C * P * P * D + (0 if made("no_conv_bias") else bias * D)  # the patch embedding
    total += D if has_cls and not made("no_cls_token") else 0  # the class token
    total += rows * D if table[config.pos_embed] else 0  # the position table
    qkv_bias = (config.qkv_bias or made("qkv_bias_always")) and not made("qkv_bias_never")
    block = (D if made("qkv_single", "qkv_weights_single") else 3 * D) * D  # qkv's weights
    block += bias * qkv_bias * (D if made("qkv_single") else 3 * D)  # qkv's biases
    block += 0 if made("no_proj") else D * D + bias * D  # proj
    block += D * hidden + bias * hidden + hidden * D + bias * D  # fc1, fc2
    block += norm * (0 if made("no_norms") else 1 if made("one_norm_per_block") else 2)  # norm1, norm2
    total += block * (1 if made("one_block") else config.depth)
    total += 0 if made("no_final_norm", "no_norms") else norm
    total += norm if config.norm_pre else 0  # timm's norm_pre, after the positions (lesson 9)
    if K > 0 and not made("no_head"):
        total += D * K + (0 if made("no_head_bias") else bias * K)
    return total


def _explanations(configs: list[ViTConfig], got: list[int]) -> list[tuple[str, ...]]:
    """The mistakes (one, else two together) that give exactly the learner's counts on every config."""
    for size in (1, 2):
        found = [
            mistakes
            for mistakes in itertools.combinations(COUNT_MISTAKES, size)
            if all(parameter_count(c, frozenset(mistakes)) == g for c, g in zip(configs, got))
        ]
        sentences = {tuple(COUNT_MISTAKES[m][1] for m in mistakes): mistakes for mistakes in found}
        if sentences:
            return list(sentences.values())  # one per distinct explanation
    return []


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


def _learner_counts(fn: Callable[[ViTConfig], int]) -> tuple[list[ViTConfig], list[int]]:
    """The learner's count for each config, up to the first that raises; that one is reported
    unless an earlier count is already wrong (then the counts so far are diagnosed)."""
    configs, counts = [], []
    for config in COUNT_CASES:
        try:
            got = call_learner(fn, config, returns=object, where=f"for {_describe(config)}")
        except CheckFailed as failure:
            if any(g != reference_parameter_count(c) for c, g in zip(configs, counts)):
                break
            if isinstance(config.image_size, tuple):
                raise CheckFailed(
                    f"{failure}; image_size can be a pair (H, W): N = (H // P) * (W // P) patches "
                    "(config.num_patches has it)"
                ) from failure.__cause__
            raise
        configs.append(config)
        counts.append(whole_number(got, "the parameter count", f"for {_describe(config)}"))
    return configs, counts


def check_count_vit_parameters(fn: Callable[[ViTConfig], int]) -> None:
    """Check a learner's count_vit_parameters(config) -> int against VisionTransformer(config)."""
    configs, counts = _learner_counts(fn)
    expected = [reference_parameter_count(config) for config in configs]
    wrong = [i for i, (g, e) in enumerate(zip(counts, expected)) if g != e]
    if not wrong:
        print(f"✓ count_vit_parameters matches VisionTransformer on {len(COUNT_CASES)} configs, ViT-B/16 included")
        return
    first = wrong[0]
    config, got, right = configs[first], counts[first], expected[first]
    where = f"for {_describe(config)}"
    explanations = _explanations(configs, counts)
    if len(explanations) == 1:
        mistakes = explanations[0]
        sentence = "; and ".join(COUNT_MISTAKES[m][1] for m in mistakes)
        if len(mistakes) == 1:  # other mistakes that give this count here, ruled out by the other configs
            alike = [
                what
                for name, (what, _) in COUNT_MISTAKES.items()
                if name != mistakes[0] and parameter_count(config, frozenset([name])) == got
            ]
            if alike:
                sentence += (
                    f" ({' or '.join(alike)} would give this count here too; your counts on the other "
                    f"configs point to {COUNT_MISTAKES[mistakes[0]][0]})"
                )
        raise CheckFailed(f"{got:,} {where}: {sentence} (expected {right:,})")
    if explanations:
        options = "; or ".join("; and ".join(COUNT_MISTAKES[m][1] for m in mistakes) for mistakes in explanations)
        raise CheckFailed(f"{got:,} {where} (expected {right:,}); these mistakes give your counts alike: {options}")
    D = config.embed_dim
    hint = ""
    if right - got == D:
        hint = (
            f": short by D = {D}, and the class token, its row in the position table and the patch-embedding "
            "Conv2d's bias are D numbers each"
        )
    raise CheckFailed(f"expected {right:,} parameters {where}, got {got:,} (off by {got - right:+,}){hint}")


# ---- exercise: a post-norm block written from the pre-norm one ----------------------------------

POST_ATTN_TAKES_TOKENS = (
    "attn takes the tokens only, attn(x), and returns the new tokens; it makes q, k and v itself "
    "(unlike torch's nn.MultiheadAttention(q, k, v))"
)


def _random_post_block(D: int, heads: int, mlp_ratio: float, generator: torch.Generator) -> EncoderBlock:
    """A post-norm block with random values in every parameter (the LayerNorms' scales near 1 and
    their shifts non-zero, so that swapping norm1 and norm2, or leaving one out, shows)."""
    return _randomise(EncoderBlock(D, heads, mlp_ratio, norm_first=False).eval(), generator)


def _post_block_variants(x: torch.Tensor, b: EncoderBlock) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible post-norm block outputs, each keyed by the sentence that explains it."""
    n1, attn, n2, mlp = b.norm1, b.attn, b.norm2, b.mlp
    h = n1(x + attn(x))  # the right first half

    def then_mlp(h: torch.Tensor, first: nn.Module = n2) -> torch.Tensor:
        return first(h + mlp(h))

    pre_h = x + attn(n1(x))
    both_h = n1(x + attn(n1(x)))
    branch_h = x + n1(attn(x))
    mlp_first = n1(x + mlp(x))
    return {
        "that is the pre-norm block (ViT's order): in post-norm the LayerNorm comes after the residual add, "
        "x = norm1(x + attn(x)), then x = norm2(x + mlp(x))": pre_h + mlp(n2(pre_h)),
        "you normalised the branch's output before the add, x + norm1(attn(x)): post-norm normalises the "
        "sum, norm1(x + attn(x))": branch_h + n2(mlp(branch_h)),
        "you kept the pre-norm LayerNorms in front of the branches and added the post-norm ones: each "
        "LayerNorm appears once, after its add, norm1(x + attn(x))": n2(both_h + mlp(n2(both_h))),
        "norm2 is missing at the end: the block ends on a LayerNorm, x = norm2(x + mlp(x))": h + mlp(h),
        "norm1 is missing: attention's sum is normalised too, x = norm1(x + attn(x))": then_mlp(x + attn(x)),
        "norm1 and norm2 are swapped: norm1 follows attention's add, norm2 the MLP's": n1(
            n2(x + attn(x)) + mlp(n2(x + attn(x)))
        ),
        "you forgot the residual connection around attention: x = norm1(x + attn(x)), not norm1(attn(x))": then_mlp(
            n1(attn(x))
        ),
        "you forgot the residual connection around the MLP: x = norm2(x + mlp(x)), not norm2(mlp(x))": n2(mlp(h)),
        "the MLP's residual adds the block's input x; add the normalised result of the attention half "
        "instead: h = norm1(x + attn(x)), then norm2(h + mlp(h))": n2(x + mlp(h)),
        "the MLP's residual adds the sum before norm1; add the normalised one: h = norm1(x + attn(x)), "
        "then norm2(h + mlp(h))": n2(x + attn(x) + mlp(h)),
        "the MLP ran before attention: a block first lets the tokens talk (attention), then processes "
        "each token alone (MLP)": n2(mlp_first + attn(mlp_first)),
        "the MLP half is missing: after x = norm1(x + attn(x)) comes x = norm2(x + mlp(x))": h,
        "your block returns the tokens unchanged: x = norm1(x + attn(x)), then x = norm2(x + mlp(x)), and "
        "return the new x": x,
    }


def check_post_norm_block(
    fn: Callable[[torch.Tensor, nn.Module, nn.Module, nn.Module, nn.Module], torch.Tensor],
) -> None:
    """Check a learner's post_norm_block(x, norm1, attn, norm2, mlp) -> (B, T, D) against
    utils.EncoderBlock(..., norm_first=False) holding the same modules."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for B, T, D, heads, mlp_ratio in BLOCK_CASES:
        block = _random_post_block(D, heads, mlp_ratio, generator)
        x = torch.randn(B, T, D, generator=generator)
        where = f"for tokens of shape {(B, T, D)} and {heads} heads"

        def call(block=block, x=x, where=where):
            copied = copy.deepcopy(block)  # nothing the learner's function changes sticks
            modules = (copied.norm1, copied.attn, copied.norm2, copied.mlp)
            try:
                return call_learner(fn, x.clone(), *modules, where=where)
            except CheckFailed as failure:
                error = failure.__cause__
                if "return_attention must be True or False" in str(error) or "need_weights" in str(error):
                    raise CheckFailed(
                        f"your function raised {type(error).__name__} {where}: {POST_ATTN_TAKES_TOKENS}"
                    ) from error
                raise

        with torch.no_grad():
            expected = block(x)
            got = call()
            try:
                verdicts.append(
                    compare(
                        got,
                        expected,
                        where,
                        any_shape_hint="a block maps (B, T, D) tokens to (B, T, D) tokens",
                        atol=1e-5,
                        mistakes=_post_block_variants(x, block),
                    )
                )
            except CheckFailed:
                if varies_between_calls(call, got, expected):
                    raise CheckFailed(
                        f"your block gives another result each time on the same tokens {where}: is there a "
                        "dropout (or another random step) in it? The block's dropout already sits inside attn "
                        "and mlp"
                    ) from None
                raise
    print(
        f"✓ post_norm_block matches utils.EncoderBlock(norm_first=False) on {len(verdicts)} random blocks: "
        f"{summarize(verdicts)}"
    )
