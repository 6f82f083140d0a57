"""Lesson 8's exercise checkers: renaming one Hugging Face ViT encoder layer to the course's
(timm) names with q, k and v fused, and preparing a photo the way the published ViT-B/16 takes it."""

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
from utils.imagenet import normalize
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


def _check_keys(got: dict, where: str) -> None:
    """Raise CheckFailed naming the missing and the unexpected keys, with what likely caused them."""
    missing = [key for key in BLOCK_KEYS if key not in got]
    unexpected = [key for key in got if key not in BLOCK_KEYS]
    if not missing and not unexpected:
        return
    sentences = []
    if missing:
        sentences.append(f"your dict lacks the key(s) {', '.join(missing)}")
    if unexpected:
        whose = "it also has" if missing else "your dict has"
        sentences.append(f"{whose} key(s) that a block does not have: {', '.join(map(str, unexpected))}")
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


# ---- preparing a photo ---------------------------------------------------------------------

PHOTO_CASES = [(32, 48), (16, 16)]  # (H, W): the first is not square, so a swapped H and W shows
PHOTO_ATOL = 1e-6  # x / 127.5 - 1 and (x / 255 - 0.5) / 0.5 differ by ~1e-7 in float32

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # torchvision's, for its CNNs; not this ViT's
IMAGENET_STD = (0.229, 0.224, 0.225)


def _reference_preprocess(pixels: np.ndarray) -> torch.Tensor:
    """(H, W, 3) uint8 -> (1, 3, H, W) float32 in [-1, 1], as utils.imagenet.normalize does it."""
    return normalize(torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255)


def _preprocess_variants(pixels: np.ndarray) -> dict[str, torch.Tensor]:
    """Wrong-but-plausible inputs, each keyed by the sentence that explains it."""
    x = torch.from_numpy(pixels).permute(2, 0, 1)[None].double()  # (1, 3, H, W), 0..255
    unit = x / 255  # (1, 3, H, W) in [0, 1]
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=torch.float64).view(1, 3, 1, 1)
    return {
        "you did not divide by 255: the pixels go from 0 to 255; scale them to [0, 1] first (x / 255), "
        "then normalise with mean 0.5 and std 0.5": (x - 0.5) / 0.5,
        "your values still go from 0 to 255: divide by 255 to get [0, 1], then normalise with mean 0.5 and std 0.5": x,
        "your values are in [0, 1], but the model takes [-1, 1]: after dividing by 255, normalise "
        "with mean 0.5 and std 0.5, (x - 0.5) / 0.5 (utils.imagenet.normalize does it)": unit,
        "you normalised with torchvision's ImageNet mean (0.485, 0.456, 0.406) and std (0.229, 0.224, "
        "0.225); this ViT was trained with mean 0.5 and std 0.5 in every channel": (unit - mean) / std,
        "you multiplied by the std; divide by it: (x - 0.5) / 0.5": (unit - 0.5) * 0.5,
        "you subtracted the mean but did not divide by the std: (x - 0.5) / 0.5": unit - 0.5,
        "your channels are in BGR order (reversed); keep the photo's order, red, green, blue, as np.asarray gives it": (
            (unit - 0.5) / 0.5
        ).flip(1),
        "you divided by 256 (or computed x / 128 - 1); the largest pixel value is 255: x / 255, then "
        "(x - 0.5) / 0.5 (or x / 127.5 - 1 in one step)": x / 128 - 1,
        "you standardised the photo with its own mean and std; this ViT takes the fixed mean 0.5 and "
        "std 0.5 in every channel: (x / 255 - 0.5) / 0.5": (unit - unit.mean()) / unit.std(),
        "you standardised each channel with its own mean and std; this ViT takes the fixed mean 0.5 and "
        "std 0.5 in every channel: (x / 255 - 0.5) / 0.5": (unit - unit.mean(dim=(2, 3), keepdim=True))
        / unit.std(dim=(2, 3), keepdim=True),
    }


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


def check_preprocess(fn: Callable[[np.ndarray], torch.Tensor]) -> None:
    """Check a learner's preprocess(pixels): an (H, W, 3) uint8 photo -> the (1, 3, H, W) float32
    tensor, in [-1, 1] (mean 0.5, std 0.5 per channel), that the published ViT-B/16 takes."""
    generator = torch.Generator().manual_seed(0)
    verdicts = []
    for H, W in PHOTO_CASES:
        pixels = torch.randint(0, 256, (H, W, 3), dtype=torch.uint8, generator=generator).numpy()
        expected = _reference_preprocess(pixels)  # (1, 3, H, W)
        where = f"for a photo of {H} x {W} pixels, an array of shape {(H, W, 3)}"
        got = call_learner(fn, pixels.copy(), where=where)
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
                mistakes=_preprocess_variants(pixels),
                advice="; go through the steps: channels first, a batch dimension, float, "
                "divide by 255, then (x - 0.5) / 0.5",
            )
        )
    print(f"✓ preprocess matches utils.imagenet.normalize on {len(PHOTO_CASES)} random photos: {summarize(verdicts)}")
