"""Lesson 8's exercise checkers: converting one encoder block of the JAX original's layout to the
course's (timm) names, and preparing a photo with a checkpoint's own normalisation; also renaming one
Hugging Face ViT encoder layer with q, k and v fused (the lesson's first edition's exercise)."""

import itertools
from collections.abc import Callable

import numpy as np
import torch

from utils.checks.core import (
    CheckFailed,
    call_learner,
    compare,
    raise_if_known_mistake,
    raise_if_not_like,
    raise_if_wrong_shape,
    summarize,
)
from utils.encoder import EncoderBlock
from utils.imagenet import IMAGENET_MEAN, IMAGENET_STD, VIT_MEAN, VIT_STD, normalize
from utils.pretrained import hf_to_timm

# ---- converting one encoder layer ---------------------------------------------------------

LAYER_CASES = [  # (D, hidden): D != hidden, so a swapped or transposed weight shows in its shape
    (8, 24),
    (12, 20),
]

# The hub files' names inside one layer, and the course's names inside one block, in the order
# the block uses them.
HF_LAYER_KEYS = [
    f"{part}.{kind}"
    for part in [
        "layernorm_before",
        "attention.attention.query",
        "attention.attention.key",
        "attention.attention.value",
        "attention.output.dense",
        "layernorm_after",
        "intermediate.dense",
        "output.dense",
    ]
    for kind in ["weight", "bias"]
]
BLOCK_KEYS = [
    f"{part}.{kind}"
    for part in ["norm1", "attn.qkv", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"]
    for kind in ["weight", "bias"]
]

_LINEAR_HINT = "nn.Linear keeps its weight as (out, in) in both layouts, so copy it as it is (no .T)"


def _random_layer(D: int, hidden: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """One Hugging Face layer's tensors with random values in every one of them, the LayerNorms
    included (with their default ones and zeros, swapping norm1 and norm2 would go unnoticed)."""
    shapes = {
        "layernorm_before": [(D,), (D,)],
        "attention.attention.query": [(D, D), (D,)],
        "attention.attention.key": [(D, D), (D,)],
        "attention.attention.value": [(D, D), (D,)],
        "attention.output.dense": [(D, D), (D,)],
        "layernorm_after": [(D,), (D,)],
        "intermediate.dense": [(hidden, D), (hidden,)],
        "output.dense": [(D, hidden), (D,)],
    }
    return {
        f"{part}.{kind}": torch.randn(shape, generator=generator)
        for part, (weight, bias) in shapes.items()
        for kind, shape in [("weight", weight), ("bias", bias)]
    }


def _reference_block(layer: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """utils.pretrained.hf_to_timm on the layer as layer 0 of a checkpoint, 'blocks.0.' stripped."""
    converted = hf_to_timm({f"encoder.layer.0.{name}": tensor for name, tensor in layer.items()})
    return {name.removeprefix("blocks.0."): tensor for name, tensor in converted.items()}


def _block_variants(layer: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """Per block key, the wrong-but-plausible tensors, each keyed by the sentence that explains it."""
    variants = {}
    for kind in ["weight", "bias"]:
        q, k, v = (layer[f"attention.attention.{part}.{kind}"] for part in ["query", "key", "value"])
        parts = {"q": q, "k": k, "v": v}
        qkv = {}
        for order in itertools.permutations("qkv"):
            if order != ("q", "k", "v"):
                qkv[
                    f"q, k and v are concatenated in the order [{'; '.join(order)}]; MultiHeadSelfAttention "
                    "splits the rows of attn.qkv as [q; k; v], so concatenate them in that order: "
                    "torch.cat([q, k, v])"
                ] = torch.cat([parts[name] for name in order])
        qkv[
            "you used torch.stack, which adds a new dimension in front; torch.cat([q, k, v]) puts q's, "
            "k's and v's rows one under the other"
        ] = torch.stack([q, k, v])
        qkv[f"attn.qkv.{kind} holds q's {kind} three times; concatenate the three: torch.cat([q, k, v])"] = torch.cat(
            [q, q, q]
        )
        if kind == "bias":
            qkv[
                "attn.qkv.bias is all zeros: the query, key and value biases are learned too, torch.cat([q, k, v]) "
                "of the three biases"
            ] = torch.zeros_like(torch.cat([q, k, v]))
        if kind == "weight":
            qkv["your attn.qkv.weight is transposed: " + _LINEAR_HINT] = torch.cat([q, k, v]).T
            qkv[
                "you concatenated q, k and v along dim 1 (side by side); concatenate them along dim 0, "
                "one under the other: torch.cat([q, k, v])"
            ] = torch.cat([q, k, v], dim=1)
            qkv["q, k and v are each transposed before the concatenation: " + _LINEAR_HINT] = torch.cat([q.T, k.T, v.T])
        variants[f"attn.qkv.{kind}"] = qkv

        swapped_norms = (
            "norm1 and norm2 are swapped: layernorm_before is norm1, the norm BEFORE attention, "
            "and layernorm_after is norm2, the norm before the MLP"
        )
        other = "bias" if kind == "weight" else "weight"
        swapped_kinds = (
            "a LayerNorm's weight and bias are swapped: norm.weight comes from .weight, norm.bias from .bias"
        )
        variants[f"norm1.{kind}"] = {
            swapped_norms: layer[f"layernorm_after.{kind}"],
            swapped_kinds: layer[f"layernorm_before.{other}"],
        }
        variants[f"norm2.{kind}"] = {
            swapped_norms: layer[f"layernorm_before.{kind}"],
            swapped_kinds: layer[f"layernorm_after.{other}"],
        }

        mixed_outputs = (
            "attn.proj and mlp.fc2 are mixed up: attention.output.dense is attention's output "
            "projection, attn.proj, and output.dense (the layer's last) is the MLP's mlp.fc2; both names end "
            "in 'output.dense', so match the whole name, not its end"
        )
        swapped_mlp = (
            "mlp.fc1 and mlp.fc2 are swapped: intermediate.dense (D -> hidden) is mlp.fc1, "
            "output.dense (hidden -> D) is mlp.fc2"
        )
        variants[f"attn.proj.{kind}"] = {mixed_outputs: layer[f"output.dense.{kind}"]}
        variants[f"mlp.fc1.{kind}"] = {swapped_mlp: layer[f"output.dense.{kind}"]}
        variants[f"mlp.fc2.{kind}"] = {
            mixed_outputs: layer[f"attention.output.dense.{kind}"],
            swapped_mlp: layer[f"intermediate.dense.{kind}"],
        }
    for key, source in [
        ("attn.proj", "attention.output.dense"),
        ("mlp.fc1", "intermediate.dense"),
        ("mlp.fc2", "output.dense"),
    ]:
        transposed = f"your {key}.weight is transposed: " + _LINEAR_HINT
        variants[f"{key}.weight"][transposed] = layer[f"{source}.weight"].T
    return variants


def _call_converter(fn: Callable, layer: dict[str, torch.Tensor], where: str) -> dict:
    """Run the learner's converter on a copy of the layer (its tensors cloned too, so that
    nothing the function does to them reaches the reference); it must return a dict."""
    layer_copy = {name: tensor.clone() for name, tensor in layer.items()}
    expected = "a dict that maps the course's names to tensors"
    return call_learner(fn, layer_copy, returns=dict, expected=expected, where=where)


def _key_sentences(got: dict) -> tuple[list[str], list, list[str]]:
    """(missing keys, unexpected keys, the sentences that name them) of a converted block."""
    missing = [key for key in BLOCK_KEYS if key not in got]
    unexpected = [key for key in got if key not in BLOCK_KEYS]
    sentences = []
    if missing:
        sentences.append(f"your dict lacks the key(s) {', '.join(missing)}")
    if unexpected:
        whose = "it also has" if missing else "your dict has"
        sentences.append(f"{whose} key(s) that a block does not have: {', '.join(map(str, unexpected))}")
    return missing, unexpected, sentences


def _check_keys(got: dict, where: str) -> None:
    """Raise CheckFailed naming the missing and the unexpected keys, with what likely caused them."""
    missing, unexpected, sentences = _key_sentences(got)
    if not sentences:
        return
    hints = []
    if any(key.startswith("attn.qkv.") for key in missing):
        hints.append(
            "q, k and v must end up in one attn.qkv: attn.qkv.weight = torch.cat([q, k, v]) of "
            "their three weights, attn.qkv.bias likewise of their three biases"
        )
    if any(key in HF_LAYER_KEYS for key in unexpected):
        hints.append("some keys still have their Hugging Face names: return a new dict with the course's names only")
    if unexpected and all(str(key).startswith("blocks.") for key in unexpected):
        hints.append("the names are those inside one block: leave out the 'blocks.0.' in front")
    raise CheckFailed("; ".join(sentences) + f" ({where})" + "".join(f"; {hint}" for hint in hints))


def _shape_hints(key: str, expected: tuple[int, ...], D: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of one converted tensor, each with the sentence that explains it."""
    hints = {}
    if len(expected) == 2:
        hints[expected[::-1]] = "the weight is transposed; " + _LINEAR_HINT
    if key == "attn.qkv.weight":  # (D, 3D) is also the transposed shape: this hint wins
        hints[(D, 3 * D)] = (
            "you concatenated q, k and v along dim 1 (or transposed the result); concatenate them "
            "along dim 0, one under the other: torch.cat([q, k, v])"
        )
    if key.startswith("attn.qkv."):
        hints[(3, D, *expected[1:])] = (  # (3, D, D) or (3, D)
            "torch.stack adds a new dimension; torch.cat([q, k, v]) puts the rows one under the other"
        )
    return hints


def check_convert_layer(fn: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]) -> None:
    """Check a learner's convert_layer(hf_layer): one Hugging Face ViT encoder layer's tensors
    (layernorm_before.weight, attention.attention.query.weight, ...) -> the same tensors under the
    course's names for one block (norm1.weight, attn.qkv.weight with q, k, v fused, ...)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for D, hidden in LAYER_CASES:
        layer = _random_layer(D, hidden, generator)
        expected = _reference_block(layer)
        where = f"for a layer of width D = {D} and MLP width hidden = {hidden}"
        got = _call_converter(fn, layer, where)
        _check_keys(got, where)
        variants = _block_variants(layer)
        for key in BLOCK_KEYS:
            tensor = got[key]
            if not isinstance(tensor, torch.Tensor):
                raise CheckFailed(f"{key} should be a torch.Tensor, got {type(tensor).__name__} ({where})")
            raise_if_not_like(tensor, expected[key], where, name=key)  # float64 will do: loading casts it
            # known mistakes first: some of them (a transposed weight, a stack) also change the shape
            raise_if_known_mistake(tensor.detach(), variants[key], f"{key}, {where}")
            verdicts.append(
                compare(
                    tensor,
                    expected[key],
                    where,
                    shape_wording=f"{key} should have shape {{}}",
                    shape_hints=_shape_hints(key, tuple(expected[key].shape), D),
                    name=key,
                    advice="; check which Hugging Face tensor it comes from",
                )
            )
    print(
        f"✓ convert_layer matches utils.pretrained.hf_to_timm on {len(LAYER_CASES)} random layers "
        f"({len(BLOCK_KEYS)} tensors each): {summarize(verdicts)}"
    )


# ---- converting one block of the JAX original's layout ---------------------------------------

JAX_CASES = [  # (D, heads, hidden): heads != head_dim and hidden != D, so a wrong axis order shows
    (8, 2, 24),
    (12, 3, 30),
]
JAX_NORM_EPS = 1e-6  # flax's LayerNorm default, the JAX original's

# One encoder block of the JAX original (google-research/vision_transformer, flax): the names
# inside "Transformer/encoderblock_{i}/", as its .npz checkpoints store them, and each shape in
# letters. flax's Dense kernels are (in, out); attention's are split per head.
JAX_BLOCK_SHAPES = {
    "LayerNorm_0/scale": "(D,)",
    "LayerNorm_0/bias": "(D,)",
    "MultiHeadDotProductAttention_1/query/kernel": "(D, heads, head_dim)",
    "MultiHeadDotProductAttention_1/query/bias": "(heads, head_dim)",
    "MultiHeadDotProductAttention_1/key/kernel": "(D, heads, head_dim)",
    "MultiHeadDotProductAttention_1/key/bias": "(heads, head_dim)",
    "MultiHeadDotProductAttention_1/value/kernel": "(D, heads, head_dim)",
    "MultiHeadDotProductAttention_1/value/bias": "(heads, head_dim)",
    "MultiHeadDotProductAttention_1/out/kernel": "(heads, head_dim, D)",
    "MultiHeadDotProductAttention_1/out/bias": "(D,)",
    "LayerNorm_2/scale": "(D,)",
    "LayerNorm_2/bias": "(D,)",
    "MlpBlock_3/Dense_0/kernel": "(D, hidden)",
    "MlpBlock_3/Dense_0/bias": "(hidden,)",
    "MlpBlock_3/Dense_1/kernel": "(hidden, D)",
    "MlpBlock_3/Dense_1/bias": "(D,)",
}
_ATTN = "MultiHeadDotProductAttention_1/"


def jax_block_example(D: int = 8, num_heads: int = 2, hidden: int = 24, seed: int = 0) -> dict[str, torch.Tensor]:
    """One block of the JAX original's layout with random values in every tensor (LayerNorms included)."""
    generator = torch.Generator().manual_seed(seed)
    sizes = {"D": D, "heads": num_heads, "head_dim": D // num_heads, "hidden": hidden}
    return {
        name: torch.randn([sizes[axis] for axis in shape.strip("(,)").split(", ")], generator=generator)
        for name, shape in JAX_BLOCK_SHAPES.items()
    }


def _reference_jax_block(block: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The JAX block under the course's names: kernels (in, out) transposed to (out, in), heads flattened."""
    D = block["LayerNorm_0/scale"].shape[0]
    qkv = [block[f"{_ATTN}{part}/kernel"].reshape(D, D).T for part in ("query", "key", "value")]  # (D, D) each
    return {
        "norm1.weight": block["LayerNorm_0/scale"],
        "norm1.bias": block["LayerNorm_0/bias"],
        "attn.qkv.weight": torch.cat(qkv),  # (3D, D), rows [q; k; v]
        "attn.qkv.bias": torch.cat([block[f"{_ATTN}{part}/bias"].reshape(D) for part in ("query", "key", "value")]),
        "attn.proj.weight": block[f"{_ATTN}out/kernel"].reshape(D, D).T,  # (heads * head_dim, D) -> (D, D) (out, in)
        "attn.proj.bias": block[f"{_ATTN}out/bias"],
        "norm2.weight": block["LayerNorm_2/scale"],
        "norm2.bias": block["LayerNorm_2/bias"],
        "mlp.fc1.weight": block["MlpBlock_3/Dense_0/kernel"].T,  # (hidden, D)
        "mlp.fc1.bias": block["MlpBlock_3/Dense_0/bias"],
        "mlp.fc2.weight": block["MlpBlock_3/Dense_1/kernel"].T,  # (D, hidden)
        "mlp.fc2.bias": block["MlpBlock_3/Dense_1/bias"],
    }


def jax_block_forward(block: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """(B, T, D) -> (B, T, D): the JAX original's pre-norm encoder block, computed from its own tensors
    with einsum (no conversion), exact GELU and LayerNorm eps 1e-6: the reference a conversion must meet."""
    D = x.shape[-1]

    def norm(x, name):
        return torch.nn.functional.layer_norm(x, (D,), block[f"{name}/scale"], block[f"{name}/bias"], JAX_NORM_EPS)

    h = norm(x, "LayerNorm_0")
    q, k, v = (
        torch.einsum("btd,dhk->bthk", h, block[f"{_ATTN}{p}/kernel"]) + block[f"{_ATTN}{p}/bias"]  # (B, T, heads, hd)
        for p in ("query", "key", "value")
    )
    scores = torch.einsum("bqhk,bthk->bhqt", q, k) / q.shape[-1] ** 0.5  # (B, heads, T, T)
    out = torch.einsum("bhqt,bthk->bqhk", scores.softmax(dim=-1), v)  # (B, T, heads, hd)
    x = x + torch.einsum("bqhk,hkd->bqd", out, block[f"{_ATTN}out/kernel"]) + block[f"{_ATTN}out/bias"]
    h = norm(x, "LayerNorm_2") @ block["MlpBlock_3/Dense_0/kernel"] + block["MlpBlock_3/Dense_0/bias"]  # (B, T, hidden)
    h = torch.nn.functional.gelu(h) @ block["MlpBlock_3/Dense_1/kernel"] + block["MlpBlock_3/Dense_1/bias"]
    return x + h  # (B, T, D)


_KERNEL_HINT = "flax stores a Dense kernel as (in, out) and nn.Linear its weight as (out, in): transpose it (.T)"


def _jax_variants(block: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """Per block key, the wrong-but-plausible tensors, each keyed by the sentence that explains it."""
    D = block["LayerNorm_0/scale"].shape[0]
    parts = ("query", "key", "value")
    kernels = {p: block[f"{_ATTN}{p}/kernel"] for p in parts}  # (D, heads, head_dim)
    biases = {p: block[f"{_ATTN}{p}/bias"] for p in parts}  # (heads, head_dim)
    right = {p: kernels[p].reshape(D, D).T for p in parts}
    qkv = {
        "you flattened the heads but did not transpose: q, k and v kernels are (in, out); " + _KERNEL_HINT: torch.cat(
            [kernels[p].reshape(D, D) for p in parts]
        ),
        "the heads and head_dim axes are flattened in the wrong order (head_dim first): .reshape(D, D) keeps "
        "(heads, head_dim) as it is, head after head, which is how MultiHeadSelfAttention splits them": torch.cat(
            [kernels[p].transpose(1, 2).reshape(D, D).T for p in parts]
        ),
        "you used torch.stack, which adds a new dimension in front; torch.cat puts q's, k's and v's rows "
        "one under the other": torch.stack([right[p] for p in parts]),
    }
    for order in itertools.permutations(parts):
        if order != parts:
            names = "; ".join(p[0] for p in order)
            qkv[
                f"q, k and v are concatenated in the order [{names}]; MultiHeadSelfAttention splits the rows of "
                "attn.qkv as [q; k; v]"
            ] = torch.cat([right[p] for p in order])
    qkv_bias = {
        "the bias's heads and head_dim axes are flattened in the wrong order; .reshape(D) keeps (heads, "
        "head_dim) as it is": torch.cat([biases[p].T.reshape(D) for p in parts]),
        "attn.qkv.bias is all zeros: the query, key and value biases are learned too": torch.zeros(3 * D),
    }
    for order in itertools.permutations(parts):
        if order != parts:
            names = "; ".join(p[0] for p in order)
            qkv_bias[f"the q, k and v biases are concatenated in the order [{names}]; use [q; k; v]"] = torch.cat(
                [biases[p].reshape(D) for p in order]
            )
    out = block[f"{_ATTN}out/kernel"]  # (heads, head_dim, D)
    proj = {
        "attn.proj.weight is not transposed: out/kernel is (heads, head_dim, D), i.e. (in, out) once flattened; "
        + _KERNEL_HINT: out.reshape(D, D),
        "attn.proj.weight: the heads and head_dim axes are flattened in the wrong order; "
        ".reshape(D, D) keeps them as they are": out.transpose(0, 1).reshape(D, D).T,
    }
    swapped_norms = (
        "norm1 and norm2 are swapped: LayerNorm_0 is norm1, the norm before attention, and LayerNorm_2 "
        "is norm2, the norm before the MLP"
    )
    swapped_kinds = "a LayerNorm's scale and bias are swapped: flax's 'scale' is torch's weight"
    variants = {
        "attn.qkv.weight": qkv,
        "attn.qkv.bias": qkv_bias,
        "attn.proj.weight": proj,
        "attn.proj.bias": {
            "attn.proj.bias and mlp.fc2.bias are mixed up: out/bias is attention's, Dense_1/bias the MLP's": block[
                "MlpBlock_3/Dense_1/bias"
            ]
        },
        "mlp.fc2.bias": {
            "attn.proj.bias and mlp.fc2.bias are mixed up: out/bias is attention's, Dense_1/bias the MLP's": block[
                f"{_ATTN}out/bias"
            ]
        },
    }
    for mine, theirs, other in [("norm1", "LayerNorm_0", "LayerNorm_2"), ("norm2", "LayerNorm_2", "LayerNorm_0")]:
        variants[f"{mine}.weight"] = {swapped_norms: block[f"{other}/scale"], swapped_kinds: block[f"{theirs}/bias"]}
        variants[f"{mine}.bias"] = {swapped_norms: block[f"{other}/bias"], swapped_kinds: block[f"{theirs}/scale"]}
    return variants


def _jax_shape_hints(key: str, expected: tuple[int, ...], D: int, heads: int, hidden: int) -> dict:
    """Wrong shapes of one converted tensor, each with the sentence that explains it."""
    flatten = "flatten the heads: a (D, heads, head_dim) kernel becomes (D, D), a (heads, head_dim) bias (D,)"
    hints = {}
    if key in ("mlp.fc1.weight", "mlp.fc2.weight"):
        hints[expected[::-1]] = "the kernel is not transposed; " + _KERNEL_HINT
    if key in ("mlp.fc1.bias", "mlp.fc2.bias"):
        other = (D,) if expected == (hidden,) else (hidden,)
        hints[other] = "mlp.fc1 and mlp.fc2 are swapped: Dense_0 (D -> hidden) is mlp.fc1, Dense_1 is mlp.fc2"
    if key == "attn.qkv.weight":
        hints[(D, 3 * D)] = "concatenate q, k and v along dim 0, one under the other, each as (out, in) = (D, D)"
        hints[(3 * D, heads, D // heads)] = flatten
    if key == "attn.qkv.bias":
        hints[(3 * heads, D // heads)] = flatten
    if key == "attn.proj.weight":
        hints[(heads, D // heads, D)] = "flatten the heads: out/kernel (heads, head_dim, D) becomes (D, D), then .T"
    return hints


def _check_jax_keys(got: dict, where: str) -> None:
    """Raise CheckFailed naming the missing and the unexpected keys."""
    missing, unexpected, sentences = _key_sentences(got)
    if not sentences:
        return
    hints = []
    if any(key in JAX_BLOCK_SHAPES for key in unexpected):
        hints.append("some keys still have their JAX names: return a new dict with the course's names only")
    if any(key.startswith("attn.qkv.") for key in missing):
        hints.append("query, key and value end up in one attn.qkv (weight and bias), rows [q; k; v]")
    raise CheckFailed("; ".join(sentences) + f" ({where})" + "".join(f"; {hint}" for hint in hints))


def check_convert_jax_block(fn: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]) -> None:
    """Check a learner's convert_jax_block(jax_block): one encoder block of the JAX original's layout
    (LayerNorm_0/scale, MultiHeadDotProductAttention_1/query/kernel (D, heads, head_dim), ...,
    MlpBlock_3/Dense_1/bias) -> the course's block names (norm1.weight, attn.qkv.weight, ...).
    Each tensor is compared with the reference conversion, then the block is proved: an EncoderBlock
    holding the answer computes what the JAX block computes from its own tensors (jax_block_forward)."""
    generator = torch.Generator().manual_seed(1)
    verdicts = []
    for seed, (D, heads, hidden) in enumerate(JAX_CASES):
        block = jax_block_example(D, heads, hidden, seed=seed)
        expected = _reference_jax_block(block)
        where = f"for a block of width D = {D}, {heads} heads of {D // heads}, MLP width hidden = {hidden}"
        got = _call_converter(fn, block, where)
        _check_jax_keys(got, where)
        variants = _jax_variants(block)
        for key in BLOCK_KEYS:
            tensor = got[key]
            if not isinstance(tensor, torch.Tensor):
                raise CheckFailed(f"{key} should be a torch.Tensor, got {type(tensor).__name__} ({where})")
            raise_if_not_like(tensor, expected[key], where, name=key)
            raise_if_known_mistake(tensor.detach(), variants.get(key, {}), f"{key}, {where}")
            verdicts.append(
                compare(
                    tensor,
                    expected[key],
                    where,
                    shape_wording=f"{key} should have shape {{}}",
                    shape_hints=_jax_shape_hints(key, tuple(expected[key].shape), D, heads, hidden),
                    name=key,
                    advice="; check which JAX tensor it comes from, and whether it needs .T",
                )
            )
        ours = EncoderBlock(D, heads, mlp_ratio=hidden / D, norm_eps=JAX_NORM_EPS).eval()
        ours.load_state_dict({key: got[key].detach().float() for key in BLOCK_KEYS})
        x = torch.randn(2, 5, D, generator=generator)  # (B, T, D)
        with torch.no_grad():
            reference = jax_block_forward(block, x)  # (B, T, D)
            difference = (ours(x) - reference).abs().max().item()
        if difference > 1e-5 * (1 + reference.abs().max().item()):
            raise CheckFailed(f"every tensor matches, yet the block computes another function ({where})")
    print(
        f"✓ convert_jax_block matches the reference on {len(JAX_CASES)} random blocks ({len(BLOCK_KEYS)} tensors "
        f"each): {summarize(verdicts)}; an EncoderBlock holding them computes what the JAX block computes"
    )


# ---- preparing a photo ---------------------------------------------------------------------

# (H, W, mean, std): the first photo is not square, so a swapped H and W shows; the two
# normalisations are ViT-B/16's and DeiT's (ImageNet's), so an answer that ignores mean and std fails.
PHOTO_CASES = [(32, 48, VIT_MEAN, VIT_STD), (16, 16, IMAGENET_MEAN, IMAGENET_STD)]
PHOTO_ATOL = 1e-6  # x / 127.5 - 1 and (x / 255 - 0.5) / 0.5 differ by ~1e-7 in float32


def _reference_preprocess(pixels: np.ndarray, mean, std) -> torch.Tensor:
    """(H, W, 3) uint8 -> (1, 3, H, W) float32, (x / 255 - mean) / std, as utils.imagenet.normalize does it."""
    return normalize(torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255, mean, std)


def _stats(name: str, values) -> str:
    return f"{name} ({', '.join(f'{v:g}' for v in values)})"


def _preprocess_variants(pixels: np.ndarray, mean, std) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible inputs for one photo and one normalisation, each keyed by the sentence that explains it."""
    H, W, _ = pixels.shape
    x = torch.from_numpy(pixels).permute(2, 0, 1)[None].double()  # (1, 3, H, W), 0..255
    unit = x / 255  # (1, 3, H, W) in [0, 1]
    m = torch.tensor(mean, dtype=torch.float64).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float64).view(1, 3, 1, 1)
    given = f"the {_stats('mean', mean)} and {_stats('std', std)} you were given"
    memory_order = torch.from_numpy(pixels).double().reshape(1, 3, H, W) / 255  # the numbers in memory order
    variants = {
        "you used reshape (or view) where permute belongs: the shape is right, but reshape keeps the numbers "
        "in memory order, so the channels' values are scrambled across the picture; move the channel axis "
        "with .permute(2, 0, 1)": (memory_order - m) / s,
        f"you did not divide by 255: the pixels go from 0 to 255; scale them to [0, 1] first (x / 255), "
        f"then normalise with {given}": (x - m) / s,
        "your values still go from 0 to 255: divide by 255 to get [0, 1], then normalise with " + given: x,
        "your values are in [0, 1], but not normalised: after dividing by 255, compute (x - mean) / std with "
        + given: unit,
        "you multiplied by the std; divide by it: (x - mean) / std": (unit - m) * s,
        "you subtracted the mean but did not divide by the std: (x - mean) / std": unit - m,
        "you swapped mean and std: (x - mean) / std, not (x - std) / mean": (unit - s) / m,
        "your channels are in BGR order (reversed); keep the photo's order, red, green, blue, as np.asarray gives it": (
            (unit - m) / s
        ).flip(1),
        "you divided by 256 (or computed x / 128); the largest pixel value is 255: x / 255, then (x - mean) / std": (
            (x / 256 - m) / s
        ),
        "you standardised the photo with its own mean and std; the model takes the fixed " + given: (unit - unit.mean())
        / unit.std(),
        "you standardised each channel with its own mean and std; the model takes the fixed " + given: (
            unit - unit.mean(dim=(2, 3), keepdim=True)
        )
        / unit.std(dim=(2, 3), keepdim=True),
    }
    if tuple(mean) != tuple(VIT_MEAN) or tuple(std) != tuple(VIT_STD):
        variants[
            f"you normalised with ViT-B/16's mean 0.5 and std 0.5, not with {given}: use the arguments, "
            "not numbers written into the function"
        ] = (unit - 0.5) / 0.5
        if len(set(mean)) > 1:
            variants[
                "the mean and std are applied to the channels in reverse order: mean[0] and std[0] belong "
                "to the first channel, red"
            ] = (unit - m.flip(1)) / s.flip(1)
    else:
        im = torch.tensor(IMAGENET_MEAN, dtype=torch.float64).view(1, 3, 1, 1)
        ist = torch.tensor(IMAGENET_STD, dtype=torch.float64).view(1, 3, 1, 1)
        variants[
            f"you normalised with ImageNet's {_stats('mean', IMAGENET_MEAN)} and {_stats('std', IMAGENET_STD)}, "
            f"not with {given}: use the arguments, not numbers written into the function"
        ] = (unit - im) / ist
    return variants


def _photo_shape_hints(H: int, W: int) -> dict[tuple[int, ...], str]:
    """Wrong shapes of the prepared photo, each with the sentence that explains it."""
    channels_last = "the channels are still last; the model takes them first, so move them with .permute(2, 0, 1)"
    resized = "the photo is already at the model's size, so do not resize it"
    return {
        (224, 224): resized,
        (3, 224, 224): resized,
        (1, 3, 224, 224): resized,
        (1, 3, W, H): "height and width are swapped; use .permute(2, 0, 1), not .permute(2, 1, 0)",
        (3, H, W): "there is no batch dimension; add one with [None] or .unsqueeze(0)",
        (H, W, 3): channels_last,
        (1, H, W, 3): channels_last,
    }


def _dtype_hint(dtype: torch.dtype) -> str:
    """What to do about a prepared photo of another dtype than float32."""
    return {
        torch.uint8: "it is still the photo's uint8 integers: convert it with .float(), divide by 255, then normalise",
        torch.float64: "float64 comes from NumPy arithmetic or torch.from_numpy of a float64 array; "
        "the model's weights are float32, so convert it with .float()",
    }.get(dtype, "convert it with .float()")


def check_preprocess(fn: Callable[[np.ndarray, tuple, tuple], torch.Tensor]) -> None:
    """Check a learner's preprocess(pixels, mean, std): an (H, W, 3) uint8 photo and a checkpoint's
    per-channel mean and std (three floats each) -> the (1, 3, H, W) float32 tensor
    (x / 255 - mean) / std. Tried with ViT-B/16's normalisation and with DeiT's (ImageNet's)."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for H, W, mean, std in PHOTO_CASES:
        pixels = torch.randint(0, 256, (H, W, 3), dtype=torch.uint8, generator=generator).numpy()
        expected = _reference_preprocess(pixels, mean, std)  # (1, 3, H, W)
        where = f"for a photo of {H} x {W} pixels, an array of shape {(H, W, 3)}, {_stats('mean', mean)}"
        got = call_learner(fn, pixels.copy(), tuple(mean), tuple(std), where=where)
        shape_wording = "expected shape (1, 3, H, W) = {}"
        raise_if_wrong_shape(got, expected, where, shape_wording=shape_wording, shape_hints=_photo_shape_hints(H, W))
        if got.dtype != torch.float32:
            dtype = str(got.dtype).removeprefix("torch.")
            raise CheckFailed(f"expected a float32 tensor, got {dtype} {where}; {_dtype_hint(got.dtype)}")
        verdicts.append(
            compare(
                got,
                expected,
                where,
                atol=PHOTO_ATOL,
                mistakes=_preprocess_variants(pixels, mean, std),
                advice="; go through the steps: channels first (permute), a batch dimension, float, "
                "divide by 255, then (x - mean) / std per channel",
            )
        )
    print(
        f"✓ preprocess matches utils.imagenet.normalize on {len(PHOTO_CASES)} random photos, with ViT-B/16's "
        f"and DeiT's normalisation: {summarize(verdicts)}"
    )
