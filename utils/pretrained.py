"""Lesson 8: bringing published ViT weights into the course's VisionTransformer.

Our parameter names are timm's, so a timm-layout checkpoint loads as it is (`from_timm`); a
Hugging Face `transformers` checkpoint names the same tensors differently and keeps the query,
key and value projections apart, so it is renamed and fused first (`hf_to_timm`, `from_hf`).
Reading weight files, the cache and the download are `utils.weights`'.
"""

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

from utils.timm_models import TIMM_VIT_CLASSES, named_timm_settings, timm_settings, timm_state_dict
from utils.validation import WrongTypeError, check_whole
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import (
    VIT_B16_REPO,
    TensorEntry,
    check_finite,
    read_safetensors,
    read_safetensors_header,
    vit_b16_path,
)

# Heads of the published ViT/DeiT sizes (every head 64 wide): Ti, S, B, L.
KNOWN_NUM_HEADS = {192: 3, 384: 6, 768: 12, 1024: 16}

# What the published ViT-B/16's config.json (VIT_B16_REPO on the hub) says and its weights file
# cannot (transformers' field names).
VIT_B16_HF_CONFIG = {
    "num_attention_heads": 12,
    "layer_norm_eps": 1e-12,  # transformers' default, kept when the JAX weights were ported; they trained at 1e-6
    "qkv_bias": True,
    "image_size": 224,
    "patch_size": 16,
    "num_channels": 3,
    "hidden_act": "gelu",
}


def check_state_dict(state_dict, caller: str) -> Mapping[str, torch.Tensor]:
    """`state_dict` if it is a mapping of names to tensors; else a TypeError (a path, a model, a
    list) or a ValueError (entries that are no tensors) that says what to pass to `caller` instead."""
    if isinstance(state_dict, (str, Path)):
        raise WrongTypeError(
            f"{caller} takes the tensors, not a file's path ({state_dict}): read them first, "
            "load_checkpoint(path) or read_safetensors(path) from utils.weights"
        )
    if isinstance(state_dict, nn.Module):
        raise WrongTypeError(f"{caller} takes a state dict, got a {type(state_dict).__name__}: pass model.state_dict()")
    if not isinstance(state_dict, Mapping):
        raise WrongTypeError(f"{caller} takes a state dict {{name: tensor}}, got a {type(state_dict).__name__}")
    others = [
        f"{name} ({type(value).__name__})" for name, value in state_dict.items() if not isinstance(value, torch.Tensor)
    ]
    if others:
        raise ValueError(
            f"{caller} takes a state dict of tensors; these entries are no tensors: {', '.join(others[:5])}"
        )
    return state_dict


def _check_num_heads(num_heads, width: int) -> None:
    """A ValueError unless num_heads is a whole number >= 1 that divides the width."""
    if width % check_whole(num_heads, "num_heads"):
        divisors = [h for h in range(1, width + 1) if width % h == 0]
        raise ValueError(
            f"num_heads={num_heads} does not divide the checkpoint's width {width}; every head needs an equal "
            f"share: one of {divisors}"
        )


def config_from_state_dict(state_dict: dict[str, torch.Tensor], num_heads: int | None = None, **overrides) -> ViTConfig:
    """Read a ViT's shape off its timm-layout tensors.

    patch_embed.proj.weight (D, C, P, P) gives embed_dim, in_channels and patch_size; the block
    indices give depth; blocks.0.mlp.fc1.weight (hidden, D) gives mlp_ratio (blocks.0.mlp.fc1_g.weight:
    mlp="swiglu"); head.weight (classes, D) gives num_classes (0 without a head); cls_token gives
    pool="cls" (else "mean"); dist_token gives dist_token=True (DeiT); reg_token (1, R, D) gives
    reg_tokens=R; blocks.0.attn.q_norm.weight gives qk_norm=True; blocks.0.ls1.gamma gives LayerScale;
    fc_norm.weight gives fc_norm=True (timm's global_pool="avg" layout: LayerNorm after averaging);
    norm_pre.weight gives norm_pre=True (timm's pre_norm, a LayerNorm before the first block, as in
    CLIP); pos_embed (1, T, D) gives a learned table and a square image: of sqrt(T - prefix) * P pixels
    when T - prefix is a square, else of sqrt(T) * P with no_embed_class=True (the table leaves the
    prefix tokens out: DeiT III, DINOv2 with registers).

    What a state dict cannot show, and so is assumed unless `overrides` say otherwise: the head
    count (pass num_heads unless the width is a published one, 192, 384, 768, 1024: heads 64 wide),
    the activation (act="gelu"; SigLIP's is "gelu_tanh", CLIP's "quick_gelu"), the LayerNorms'
    epsilon (timm's 1e-6; CLIP's is 1e-5), the block kind (timm's residual post-norm and parallel
    blocks hold tensors of the same names), the pooling of a model with a class token and an
    fc_norm (refused: two timm layouts fit), the image size of a model without positions, rotary
    positions (no tensors), and LayerScale's starting value (1e-5 here; the weights hold the trained
    scales). `from_timm` given a timm model, or a timm model name, reads all of them.
    `overrides` win over all of it (pos_embed="sincos" for a fixed table, image_size, act, ...).
    """
    check_state_dict(state_dict, "config_from_state_dict")
    if "patch_embed.proj.weight" not in state_dict:
        hint = (
            "; it looks like Hugging Face's layout: use from_hf" if any("embeddings." in k for k in state_dict) else ""
        )
        raise ValueError(f"not a timm-layout ViT state dict: it has no 'patch_embed.proj.weight'{hint}")
    _check_ndim(state_dict, "patch_embed.proj.weight", 4, "(D, C, P, P)")
    if "fc_norm.weight" in state_dict and "cls_token" in state_dict and "pool" not in overrides:
        raise ValueError(
            "a class token and an fc_norm: timm's global_pool='avg' with a class token (MAE-style fine-tuning: "
            "the patch tokens averaged, the class token left out) or global_pool='token' with fc_norm=True. "
            "The state dict cannot tell the two apart: pass pool='mean' for the first (ViTConfig(pool='mean', "
            "class_token=True, fc_norm=True)), or pass the timm model itself to from_timm"
        )
    D, C, P, _ = state_dict["patch_embed.proj.weight"].shape  # (D, C, P, P)
    blocks = {int(m[1]) for name in state_dict if (m := re.match(r"blocks\.(\d+)\.", name))}
    swiglu = "blocks.0.mlp.fc1_g.weight" in state_dict
    fc1 = "blocks.0.mlp.fc1_g.weight" if swiglu else "blocks.0.mlp.fc1.weight"
    if blocks:
        _check_ndim(state_dict, fc1, 2, "(hidden, D)")
    hidden = state_dict[fc1].shape[0] if blocks else 4 * D  # (hidden, D)
    mlp_ratio = hidden / D
    if int(D * mlp_ratio) != hidden:  # the model builds int(D * mlp_ratio) units: round up a hair
        mlp_ratio = math.nextafter(mlp_ratio, math.inf)
    class_token = "cls_token" in state_dict
    reg_tokens = _check_ndim(state_dict, "reg_token", 3, "(1, R, D)")[1] if "reg_token" in state_dict else 0
    fields = dict(
        patch_size=P,
        in_channels=C,
        embed_dim=D,
        depth=max(blocks, default=-1) + 1,
        mlp_ratio=mlp_ratio,
        qkv_bias="blocks.0.attn.qkv.bias" in state_dict,
        num_classes=_check_ndim(state_dict, "head.weight", 2, "(classes, D)")[0] if "head.weight" in state_dict else 0,
        pool="cls" if class_token else "mean",
        fc_norm="fc_norm.weight" in state_dict,
        norm_pre="norm_pre.weight" in state_dict,
        pos_embed="learned" if "pos_embed" in state_dict else "none",
        norm_eps=1e-6,
    )
    late = dict(
        reg_tokens=reg_tokens,
        dist_token="dist_token" in state_dict,
        qk_norm="blocks.0.attn.q_norm.weight" in state_dict,
        layer_scale=1e-5 if "blocks.0.ls1.gamma" in state_dict else None,
        mlp="swiglu" if swiglu else "gelu",
    )
    fields.update({name: value for name, value in late.items() if value})  # the defaults stay unset
    fields.update(overrides)
    if fields.get("pool") == "mean" and class_token and "class_token" not in fields:
        fields["class_token"] = True
    prefix = int(class_token) + int(late["dist_token"]) + reg_tokens
    if "image_size" not in fields:
        if "pos_embed" not in state_dict:
            raise ValueError("no pos_embed to read the image size from: pass image_size=...")
        rows = _check_ndim(state_dict, "pos_embed", 3, "(1, T, D)")[1]  # T
        no_embed_class = fields.get("no_embed_class")
        candidates = [(rows - prefix, False), (rows, True)] if prefix else [(rows, False)]
        if no_embed_class is not None:
            candidates = [(n, flag) for n, flag in candidates if flag == no_embed_class]
        for num_patches, flag in candidates:
            side = math.isqrt(max(num_patches, 0))
            if num_patches > 0 and side * side == num_patches:
                fields["image_size"] = side * P
                if flag:
                    fields["no_embed_class"] = True
                break
        else:
            raise ValueError(
                f"a position table of {rows} rows with {prefix} prefix token(s) (class, distillation, registers) "
                "covers no square grid of patches, with or without the prefix rows: pass image_size=(H, W)"
            )
    elif prefix and "no_embed_class" not in fields and "pos_embed" in state_dict:
        H, W = fields["image_size"] if isinstance(fields["image_size"], (tuple, list)) else (fields["image_size"],) * 2
        if state_dict["pos_embed"].shape[1] == (H // P) * (W // P):
            fields["no_embed_class"] = True
    if num_heads is None:
        if D not in KNOWN_NUM_HEADS:
            raise ValueError(
                f"the head count cannot be read off the weights and width {D} is no published "
                f"ViT size ({sorted(KNOWN_NUM_HEADS)}): pass num_heads=... (to from_hf: "
                "config={'num_attention_heads': ...})"
            )
        num_heads = KNOWN_NUM_HEADS[D]
    _check_num_heads(num_heads, D)
    return ViTConfig(num_heads=num_heads, **fields)


def _check_ndim(state_dict: Mapping[str, torch.Tensor], name: str, ndim: int, shape: str) -> torch.Size:
    """The shape of state_dict[name]; a ValueError if it is missing or not `ndim`-D."""
    if name not in state_dict:
        raise ValueError(f"not a timm-layout ViT state dict: it has no {name!r} {shape}")
    if state_dict[name].ndim != ndim:
        raise ValueError(f"{name} should be {shape}, got shape {tuple(state_dict[name].shape)}")
    return state_dict[name].shape


def as_float32(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors in float32, the dtype of the course's models: float16, bfloat16 and float64
    checkpoints are converted (float32 tensors are kept as they are, not copied). A tensor of
    another kind (integers, bool: a quantised checkpoint?) raises a ValueError naming it."""
    others = [f"{name} ({tensor.dtype})" for name, tensor in state_dict.items() if not tensor.is_floating_point()]
    if others:
        raise ValueError(f"expected floating-point weights; these tensors are not: {', '.join(others[:5])}")
    return {name: tensor.float() for name, tensor in state_dict.items()}


def from_timm(state_dict, num_heads: int | None = None, *, assign: bool = False, **overrides) -> VisionTransformer:
    """A VisionTransformer computing what a timm ViT computes, holding exactly its weights.

    Three ways to call it:
    - from_timm(timm_model): a timm VisionTransformer (or DeiT's VisionTransformerDistilled) object;
      its architecture is read off the object (utils.timm_models.timm_settings: the activation, the
      norms, the pooling, the tokens, the MLP kind, the block kind, ...) without importing timm.
    - from_timm("vit_small_patch14_reg4_dinov2", state_dict): a model name of timm's
      vision_transformer or deit modules and its tensors; the settings come from the table
      utils/timm_vit_settings.json, read from timm 1.0.31's own models.
    - from_timm(state_dict, num_heads): the tensors alone, shaped by config_from_state_dict (its
      docstring lists what a state dict cannot show, and what is assumed for it).
    A model the course's ViT does not compute (attention pooling, RMSNorm, residual post-norm or
    parallel blocks, ...) raises a ValueError (utils.timm_models.TimmRefusal) naming the feature.

    With assign=True the model takes the tensors themselves instead of copies (it is built on
    PyTorch's "meta" device, which allocates nothing): half the peak memory for a big checkpoint,
    but the model and `state_dict` then share their memory, so pass a dict nobody else uses.
    The model is float32 whatever the file's dtype: float16, bfloat16 and float64 tensors are
    converted (as_float32; with assign=True the model then holds the converted copies).
    Raises a ValueError that lists the missing keys, the unexpected keys and the tensors of
    another shape (named by VisionTransformer.load_state_dict), so nothing loads half-way, and one
    that names the tensors holding NaN or infinity (a corrupt file).
    """
    if isinstance(state_dict, nn.Module) and type(state_dict).__module__.startswith("timm."):
        if type(state_dict).__name__ not in TIMM_VIT_CLASSES:
            raise WrongTypeError(
                f"from_timm takes a timm VisionTransformer, a timm model name and its state dict, or a state dict; "
                f"got a {type(state_dict).__module__}.{type(state_dict).__name__}"
            )
        settings = timm_settings(state_dict)
        num_heads, overrides = settings.pop("num_heads"), {**settings, **overrides}
        state_dict = state_dict.state_dict()
    elif isinstance(state_dict, str) and not _looks_like_a_path(state_dict):
        if not isinstance(num_heads, Mapping):
            raise WrongTypeError(
                f"from_timm({state_dict!r}, state_dict): a model name needs its state dict as the second "
                f"argument, got {type(num_heads).__name__}"
            )
        settings = named_timm_settings(state_dict)
        state_dict, num_heads = num_heads, settings.pop("num_heads")
        overrides = {**settings, **overrides}
    state_dict = timm_state_dict(as_float32(check_state_dict(state_dict, "from_timm")))
    check_finite(state_dict, "the checkpoint")
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


def _looks_like_a_path(text: str) -> bool:
    """Whether a str given to from_timm is a file's path (refused: read it first), not a timm model name."""
    return "/" in text or "\\" in text or text.endswith(WEIGHT_SUFFIXES) or Path(text).expanduser().exists()


WEIGHT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors", ".ckpt", ".npz")


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
    if isinstance(state_dict, Iterable) and not isinstance(state_dict, (str, Mapping)):
        items = state_dict  # (name, tensor) pairs, checked as they come
    else:
        items = check_state_dict(state_dict, "hf_to_timm").items()
    out, qkv, unknown = {}, {}, []
    for item in items:
        name, tensor = _named_tensor(item)
        key = name.removeprefix("vit.")
        if key.startswith(_HF_DROPPED):
            continue
        if key in _HF_NAMES:
            out[_HF_NAMES[key]] = tensor
        elif (m := _HF_LAYER.fullmatch(key)) and m[2] in _HF_LAYER_NAMES:
            layer, part, kind = m[1], _HF_LAYER_NAMES[m[2]], m[3]
            if part in ("q", "k", "v"):  # copied into its third of the fused tensor at once
                if (layer, kind) not in qkv:
                    fused = torch.empty((3, *tensor.shape), dtype=tensor.dtype, device=tensor.device)  # (3, D, ...)
                    qkv[layer, kind] = (fused, set())
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
        listed = ", ".join(unknown[:10]) + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
        hint = "; they look like timm's names: use from_timm" if "patch_embed.proj.weight" in unknown else ""
        raise ValueError(f"keys of no Hugging Face ViT layer known here: {listed}{hint}")
    for (layer, kind), (_, seen) in qkv.items():
        raise ValueError(f"layer {layer} has the {kind} of {sorted(seen)} only; expected q, k and v")
    return out


def _named_tensor(item) -> tuple[str, torch.Tensor]:
    """One (name, tensor) pair of a state dict's items, checked."""
    if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
        raise WrongTypeError(f"expected (name, tensor) pairs, got {type(item).__name__} {str(item)[:60]}")
    if not isinstance(item[1], torch.Tensor):
        raise ValueError(f"{item[0]} should be a tensor, got {type(item[1]).__name__}")
    return item


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
    The model is float32 whatever the checkpoint's dtype (float16, bfloat16, float64 converted).
    """
    if isinstance(model_or_state_dict, nn.Module):
        config = getattr(model_or_state_dict, "config", None) if config is None else config
        state_dict = model_or_state_dict.state_dict()
        assign = False  # its tensors are the transformers model's own parameters
    else:
        state_dict = model_or_state_dict
    if isinstance(config, (str, Path)):
        raise WrongTypeError(
            f"config should be a dict or a transformers ViTConfig, got a path: json.load it first ({config})"
        )
    if config is None or isinstance(config, Mapping):
        fields = dict(config or {})
    elif hasattr(config, "to_dict") or hasattr(config, "__dict__"):  # a transformers ViTConfig, or alike
        fields = config.to_dict() if hasattr(config, "to_dict") else vars(config)
    else:
        raise WrongTypeError(f"config should be a dict or a transformers ViTConfig, got {type(config).__name__}")
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
    course's VisionTransformer, from its Hugging Face file (default: vit_b16_path()), or from the
    folder that holds it as model.safetensors.

    The file holds tensors only; VIT_B16_HF_CONFIG supplies what they cannot say (12 heads,
    LayerNorm eps 1e-12), or a config.json beside the file when there is one. The file's shapes
    are checked against ViT-B/16's before any tensor is read: a file of another ViT (ViT-S,
    DeiT-Ti, a 21k model without the 1,000-class head) raises a ValueError that lists what
    differs (load those with from_hf and their head count). It is read tensor by tensor and the
    tensors become the model's (assign=True): 346 MB of memory, not twice that. Feed it images
    normalised with utils.imagenet.normalize.
    """
    if path is not None and not isinstance(path, (str, Path)):
        raise WrongTypeError(f"expected the path of the weights file (a str or Path), got {type(path).__name__}")
    path = vit_b16_path() if path is None else Path(path).expanduser()
    if path.is_dir():  # the hub's folder (a snapshot, a local_dir): its weights file
        path = path / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(
            f"no ViT-B/16 weights at {path}: run `make weights` (or utils.weights.download_vit_b16()) "
            f"once online, or download model.safetensors from https://huggingface.co/{VIT_B16_REPO} "
            "and put it there"
        )
    try:
        entries = read_safetensors_header(path)
    except ValueError as error:
        raise ValueError(f"{error}. Delete it and run `make weights` again") from error
    config = vit_b16_hf_config(path)
    check_vit_b16_shapes(entries, path)
    return from_hf(read_safetensors(path), config, assign=True)  # q, k, v fused as they are read


def vit_b16_hf_config(path: str | Path) -> dict:
    """VIT_B16_HF_CONFIG, updated by the config.json beside the weights file `path` if there is one
    (transformers' field names: num_attention_heads, layer_norm_eps, ...)."""
    beside = Path(path).expanduser().parent / "config.json"
    if not beside.is_file():
        return dict(VIT_B16_HF_CONFIG)
    try:
        fields = json.loads(beside.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{beside} beside the weights is no valid JSON ({error}): fix or delete it") from None
    if not isinstance(fields, dict):
        raise ValueError(f"{beside} beside the weights holds a JSON {type(fields).__name__}, not a config object")
    return {name: fields.get(name, value) for name, value in VIT_B16_HF_CONFIG.items()}


def check_vit_b16_shapes(entries: Mapping[str, TensorEntry], path: str | Path = "the file") -> None:
    """A ValueError unless a Hugging Face file's tensors (read_safetensors_header) have exactly the
    names and shapes of the published ViT-B/16: it lists what differs, and what the file holds."""
    with torch.device("meta"):  # shapes only: nothing is allocated
        expected = VisionTransformer(ViTConfig.vit_b16()).state_dict()
    tensors = ((name, torch.empty(entry.shape, dtype=entry.dtype, device="meta")) for name, entry in entries.items())
    try:
        found = hf_to_timm(tensors)
    except ValueError as error:
        raise ValueError(f"{path} does not hold a ViT in Hugging Face's layout: {error}") from None
    problems = [  # shapes first: they say the most
        f"{name}: file {tuple(found[name].shape)}, ViT-B/16 {tuple(tensor.shape)}"
        for name, tensor in expected.items()
        if name in found and found[name].shape != tensor.shape
    ]
    problems += [f"missing: {name}" for name in sorted(expected.keys() - found.keys())]
    problems += [f"unexpected: {name}" for name in sorted(found.keys() - expected.keys())]
    if problems:
        listed = "\n  ".join(problems[:8]) + (f"\n  ... and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise ValueError(
            f"{path} is not the published ViT-B/16 (224 px, 16 px patches, 768 wide, 12 layers, 1,000 classes); "
            f"it holds {_describe(found)}. What differs, in timm's names:\n  {listed}\nFor another ViT use "
            "from_hf(read_safetensors(path), config={'num_attention_heads': ...}) with its config.json's head count"
        )


def _describe(state_dict: Mapping[str, torch.Tensor]) -> str:
    """A ViT's shape in words, read off its timm-layout tensors (as far as they tell it)."""
    try:
        config = config_from_state_dict(state_dict, num_heads=1)
    except (ValueError, KeyError):
        return "no ViT shape this converter can read"
    return (
        f"{config.image_size} px, {config.patch_size} px patches, {config.embed_dim} wide, "
        f"{config.depth} layer{'s' * (config.depth != 1)}, {config.num_classes:,} classes"
    )
