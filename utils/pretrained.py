"""Lesson 8: bringing published ViT weights into the course's VisionTransformer.

Our parameter names are timm's, so a timm-layout checkpoint loads as it is (`from_timm`); a
Hugging Face `transformers` checkpoint names the same tensors differently and keeps the query,
key and value projections apart, so it is renamed and fused first (`hf_to_timm`, `from_hf`).
Reading weight files, the cache and the download are `utils.weights`'.
"""

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

from utils.vit import VisionTransformer, ViTConfig
from utils.weights import VIT_B16_REPO, read_safetensors, vit_b16_path

# Heads of the published ViT/DeiT sizes (every head 64 wide): Ti, S, B, L.
KNOWN_NUM_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16}

# What the published ViT-B/16's config.json (VIT_B16_REPO on the hub) says and its weights file
# cannot (transformers' field names).
VIT_B16_HF_CONFIG = {
    "num_attention_heads": 12,
    "layer_norm_eps": 1e-12,
    "qkv_bias": True,
    "image_size": 224,
    "patch_size": 16,
    "num_channels": 3,
    "hidden_act": "gelu",
}


def config_from_state_dict(state_dict: dict[str, torch.Tensor], num_heads: int | None = None, **overrides) -> ViTConfig:
    """Read a ViT's shape off its timm-layout tensors.

    patch_embed.proj.weight (D, C, P, P) gives embed_dim, in_channels and patch_size; the block
    indices give depth; blocks.0.mlp.fc1.weight (hidden, D) gives mlp_ratio; head.weight
    (classes, D) gives num_classes (0 without a head); cls_token gives pool="cls" (else "mean");
    pos_embed (1, prefix + N, D) gives a learned table and a square image of sqrt(N) * P pixels.
    The head count is no tensor's shape: pass num_heads unless the width is a published one
    (192, 384, 768, 1024: heads 64 wide). norm_eps stays timm's 1e-6. `overrides` win over all
    of it (pos_embed="sincos" for a fixed table, image_size for a model without positions).
    """
    if "patch_embed.proj.weight" not in state_dict:
        raise ValueError("not a timm-layout ViT state dict: it has no 'patch_embed.proj.weight'")
    D, C, P, _ = state_dict["patch_embed.proj.weight"].shape  # (D, C, P, P)
    blocks = {int(m[1]) for name in state_dict if (m := re.match(r"blocks\.(\d+)\.", name))}
    hidden = state_dict["blocks.0.mlp.fc1.weight"].shape[0] if blocks else 4 * D  # (hidden, D)
    mlp_ratio = hidden / D
    if int(D * mlp_ratio) != hidden:  # the model builds int(D * mlp_ratio) units: round up a hair
        mlp_ratio = math.nextafter(mlp_ratio, math.inf)
    fields = dict(
        patch_size=P,
        in_channels=C,
        embed_dim=D,
        depth=max(blocks, default=-1) + 1,
        mlp_ratio=mlp_ratio,
        qkv_bias="blocks.0.attn.qkv.bias" in state_dict,
        num_classes=state_dict["head.weight"].shape[0] if "head.weight" in state_dict else 0,
        pool="cls" if "cls_token" in state_dict else "mean",
        pos_embed="learned" if "pos_embed" in state_dict else "none",
        norm_eps=1e-6,
    )
    fields.update(overrides)
    if "image_size" not in fields:
        if "pos_embed" not in state_dict:
            raise ValueError("no pos_embed to read the image size from: pass image_size=...")
        num_patches = state_dict["pos_embed"].shape[1] - (fields["pool"] == "cls")  # N = T - prefix
        side = math.isqrt(num_patches)
        if side * side != num_patches:
            raise ValueError(f"{num_patches} patch positions are no square grid: pass image_size=(H, W)")
        fields["image_size"] = side * P
    if num_heads is None:
        if D not in KNOWN_NUM_HEADS:
            raise ValueError(
                f"the head count cannot be read off the weights and width {D} is no published "
                f"ViT size ({sorted(KNOWN_NUM_HEADS)}): pass num_heads=... (to from_hf: "
                "config={'num_attention_heads': ...})"
            )
        num_heads = KNOWN_NUM_HEADS[D]
    return ViTConfig(num_heads=num_heads, **fields)


def from_timm(
    state_dict: dict[str, torch.Tensor], num_heads: int | None = None, *, assign: bool = False, **overrides
) -> VisionTransformer:
    """A VisionTransformer shaped by config_from_state_dict, holding exactly these weights.

    With assign=True the model takes the tensors themselves instead of copies (it is built on
    PyTorch's "meta" device, which allocates nothing): half the peak memory for a big checkpoint,
    but the model and `state_dict` then share their memory, so pass a dict nobody else uses.
    Raises a ValueError that lists the missing keys, the unexpected keys and the tensors of
    another shape (named by VisionTransformer.load_state_dict), so nothing loads half-way.
    """
    config = config_from_state_dict(state_dict, num_heads, **overrides)
    if assign:
        with torch.device("meta"):
            model = VisionTransformer(config)
    else:
        model = VisionTransformer(config)
    own = model.state_dict()
    problems = [f"missing: {name}" for name in sorted(own.keys() - state_dict.keys())]
    problems += [f"unexpected: {name}" for name in sorted(state_dict.keys() - own.keys())]
    try:  # raises, naming any tensor of another shape
        model.load_state_dict(state_dict, strict=False, assign=assign)
    except ValueError as error:  # its first line is a header of its own: keep the tensors' lines
        problems += [line.strip() for line in str(error).splitlines()[1:]]
    if problems:
        raise ValueError("the checkpoint does not fit the inferred model:\n  " + "\n  ".join(problems))
    return model.eval()


# Hugging Face names -> timm names, per encoder layer; both the hub files' layout (older
# transformers: encoder.layer.{i}.attention.attention.query, ...) and transformers 5's
# (layers.{i}.attention.q_proj, ...). q, k and v are kept apart here and fused below.
_HF_LAYER_NAMES = {
    "layernorm_before": "norm1",
    "layernorm_after": "norm2",
    "attention.attention.query": "q",
    "attention.attention.key": "k",
    "attention.attention.value": "v",
    "attention.q_proj": "q",
    "attention.k_proj": "k",
    "attention.v_proj": "v",
    "attention.output.dense": "attn.proj",
    "attention.o_proj": "attn.proj",
    "intermediate.dense": "mlp.fc1",
    "mlp.fc1": "mlp.fc1",
    "output.dense": "mlp.fc2",
    "mlp.fc2": "mlp.fc2",
}
_HF_NAMES = {
    "embeddings.cls_token": "cls_token",
    "embeddings.position_embeddings": "pos_embed",
    "embeddings.patch_embeddings.projection.weight": "patch_embed.proj.weight",
    "embeddings.patch_embeddings.projection.bias": "patch_embed.proj.bias",
    "layernorm.weight": "norm.weight",
    "layernorm.bias": "norm.bias",
    "classifier.weight": "head.weight",
    "classifier.bias": "head.bias",
}
_HF_LAYER = re.compile(r"(?:encoder\.layer|layers)\.(\d+)\.(.+)\.(weight|bias)")
# Not on the classification path: ViTModel's pooler (a tanh layer on the class token, unused by
# ViTForImageClassification) and the mask token of masked-image pre-training.
_HF_DROPPED = ("pooler.", "embeddings.mask_token")


def hf_to_timm(
    state_dict: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """Rename a Hugging Face ViT state dict to timm's names and fuse q, k, v.

    Takes ViTForImageClassification's keys ("vit." prefix) or a bare ViTModel's, in the hub
    files' layout or transformers 5's: a dict, or (name, tensor) pairs such as
    `read_safetensors` yields. Per layer, q, k, v weights (D, D) become
    blocks.{i}.attn.qkv.weight (3D, D), rows [q; k; v] as MultiHeadSelfAttention splits them;
    their biases (D,) become qkv.bias (3D,) only if the checkpoint has them. Each of q, k, v is
    copied into its third of the fused tensor as it comes, so pairs read one at a time are
    dropped at once: a converted file needs no more memory than the model. Any key it does not
    know raises a ValueError that lists them.
    """
    items = state_dict.items() if isinstance(state_dict, Mapping) else state_dict
    out, qkv, unknown = {}, {}, []
    for name, tensor in items:
        key = name.removeprefix("vit.")
        if key.startswith(_HF_DROPPED):
            continue
        if key in _HF_NAMES:
            out[_HF_NAMES[key]] = tensor
        elif (m := _HF_LAYER.fullmatch(key)) and m[2] in _HF_LAYER_NAMES:
            layer, part, kind = m[1], _HF_LAYER_NAMES[m[2]], m[3]
            if part in ("q", "k", "v"):  # copied into its third of the fused tensor at once
                if (layer, kind) not in qkv:
                    qkv[layer, kind] = (torch.empty((3, *tensor.shape), dtype=tensor.dtype), set())  # (3, D, ...)
                fused, seen = qkv[layer, kind]
                if tensor.shape != fused.shape[1:]:
                    raise ValueError(
                        f"layer {layer}: the {kind}s of q, k and v differ in shape "
                        f"({tuple(fused.shape[1:])} and {tuple(tensor.shape)})"
                    )
                fused["qkv".index(part)] = tensor
                seen.add(part)
                if len(seen) == 3:  # rows [q; k; v]: (3D, D) or (3D,)
                    out[f"blocks.{layer}.attn.qkv.{kind}"] = qkv.pop((layer, kind))[0].flatten(0, 1)
            else:
                out[f"blocks.{layer}.{part}.{kind}"] = tensor
        else:
            unknown.append(name)
    if unknown:
        raise ValueError("keys of no Hugging Face ViT layer known here: " + ", ".join(unknown))
    for (layer, kind), (_, seen) in qkv.items():
        raise ValueError(f"layer {layer} has the {kind} of {sorted(seen)} only; expected q, k and v")
    return out


def from_hf(
    model_or_state_dict: nn.Module | Mapping | Iterable, config=None, *, assign: bool = False
) -> VisionTransformer:
    """A VisionTransformer holding a Hugging Face ViT's weights, computing the same function.

    Args:
        model_or_state_dict: a transformers ViTForImageClassification or ViTModel (its .config
            is read), or its state dict (a checkpoint file's tensors, or their (name, tensor)
            pairs as read_safetensors yields them).
        config: with a state dict, a transformers ViTConfig or a dict with (some of) its fields
            num_attention_heads, layer_norm_eps, qkv_bias, image_size, patch_size, num_channels,
            hidden_act; what it lacks is read off the tensors (layer_norm_eps: HF's 1e-12).
        assign: with a state dict nobody else uses, let the model take its tensors instead of
            copies (see from_timm); ignored for a model, whose weights are always copied.
    """
    if isinstance(model_or_state_dict, nn.Module):
        config = model_or_state_dict.config if config is None else config
        state_dict = model_or_state_dict.state_dict()
        assign = False  # its tensors are the transformers model's own parameters
    else:
        state_dict = model_or_state_dict
    if config is None or isinstance(config, dict):
        fields = dict(config or {})
    else:  # a transformers ViTConfig, or any object with those attributes
        fields = config.to_dict() if hasattr(config, "to_dict") else vars(config)
    if fields.get("hidden_act", "gelu") != "gelu":
        raise ValueError(f"the course's MLP uses the exact GELU ('gelu'), the checkpoint {fields['hidden_act']!r}")
    overrides = {"norm_eps": fields.get("layer_norm_eps", 1e-12)}
    for hf_name, name in [
        ("image_size", "image_size"),
        ("patch_size", "patch_size"),
        ("num_channels", "in_channels"),
        ("qkv_bias", "qkv_bias"),
    ]:
        if hf_name in fields:
            overrides[name] = fields[hf_name]
    return from_timm(hf_to_timm(state_dict), fields.get("num_attention_heads"), assign=assign, **overrides)


def load_vit_b16(path: str | Path | None = None) -> VisionTransformer:
    """The published ViT-B/16 (ImageNet-21k pre-trained, ImageNet-1k fine-tuned, 224 px) in the
    course's VisionTransformer, from its Hugging Face file (default: vit_b16_path()).

    The file holds tensors only; VIT_B16_HF_CONFIG supplies what they cannot say (12 heads,
    LayerNorm eps 1e-12). It is read tensor by tensor and the tensors become the model's
    (assign=True): 346 MB of memory, not twice that. Feed it images normalised with
    utils.imagenet.normalize.
    """
    path = vit_b16_path() if path is None else Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"no ViT-B/16 weights at {path}: run `make weights` (or utils.weights.download_vit_b16()) "
            f"once online, or download model.safetensors from https://huggingface.co/{VIT_B16_REPO} "
            "and put it there"
        )
    return from_hf(read_safetensors(path), VIT_B16_HF_CONFIG, assign=True)  # q, k, v fused as they are read
