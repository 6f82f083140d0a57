"""Reading a timm ViT's architecture, not only its tensors, without importing timm.

`timm_settings(model)` looks at a timm VisionTransformer (or DeiT's VisionTransformerDistilled)
object: its class names, its modules' types by name and a few of its attributes. It returns the
ViTConfig fields that the state dict cannot show (the head count, the activation, the norms'
epsilon, the pooling, the image size), or raises a ValueError that names the first feature the
course's ViT does not compute (attention pooling, a residual post-norm block, RMSNorm, ...).
`timm_state_dict(state_dict)` rewrites timm's tensors into the course's layout where the two differ
only in storage: SwiGLUPacked's fc1 split into fc1_g and fc1_x, absent biases as zeros.

TIMM_SETTINGS_FILE holds the same settings for every model name of timm's `vision_transformer` and
`deit` modules (timm 1.0.31), written by tests/timm_registry.py from timm's own models, so that
`from_timm(name, state_dict)` works without timm.
"""

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

TIMM_SETTINGS_FILE = Path(__file__).with_name("timm_vit_settings.json")
TIMM_VIT_CLASSES = ("VisionTransformer", "VisionTransformerDistilled")
_POOLS = {"token": "cls", "avg": "mean"}
_OTHER_POOLS = {
    "map": "attention pooling (global_pool='map': a MAP head, a learned query attending to the tokens)",
    "max": "max pooling (global_pool='max')",
    "avgmax": "average-and-max pooling (global_pool='avgmax')",
    "": "no pooling (global_pool='': the head on every token)",
}
_BLOCKS = {
    "ResPostBlock": "residual post-norm blocks (timm's ResPostBlock: x + norm1(attn(x)), then x + norm2(mlp(x)))",
    "ParallelScalingBlock": "parallel attention and MLP branches in one block (timm's ParallelScalingBlock)",
    "DiffParallelScalingBlock": "parallel differential-attention blocks (timm's DiffParallelScalingBlock)",
    "ParallelThingsBlock": "parallel blocks (timm's ParallelThingsBlock, 'Three things everyone should know')",
}


class TimmRefusal(ValueError):
    """A timm model that the course's ViT does not compute; the message names the feature."""


def _kind(module) -> str:
    return type(module).__name__


def _refuse(feature: str) -> None:
    raise TimmRefusal(f"the course's ViT does not compute {feature}")


def _layer_norm_eps(module, where: str) -> float | None:
    """The epsilon of a LayerNorm, None for an Identity; a refusal for another norm (RMSNorm, ...)."""
    kind = _kind(module)
    if kind == "Identity":
        return None
    if kind not in ("LayerNorm", "LayerNorm2d") or not getattr(module, "elementwise_affine", True):
        _refuse(f"a {kind} as {where} (the course's ViT uses LayerNorm)" if kind != "RmsNorm" else f"RMSNorm ({where})")
    return float(module.eps)


def _activation(mlp) -> str:
    act = mlp.act
    kind = _kind(act)
    if kind == "GELU":
        return "gelu_tanh" if getattr(act, "approximate", "none") == "tanh" else "gelu"
    if kind == "GELUTanh":
        return "gelu_tanh"
    if kind == "QuickGELU":
        return "quick_gelu"
    _refuse(f"the activation {kind} in a plain MLP (the options: GELU, tanh-GELU, QuickGELU)")


def _block_settings(block, index: int) -> dict:
    """One block's settings, with the epsilons of its norms under "eps"."""
    if _kind(block) != "Block":
        _refuse(_BLOCKS.get(_kind(block), f"blocks of type {_kind(block)}"))
    attn, mlp = block.attn, block.mlp
    if _kind(attn) != "Attention":
        what = "differential attention (timm's DiffAttention)" if _kind(attn) == "DiffAttention" else _kind(attn)
        _refuse(f"{what} in block {index}")
    if _kind(getattr(attn, "norm", nn.Identity())) != "Identity":
        _refuse("a norm inside attention, before its projection (timm's scale_attn_norm, BEiT-3)")
    if getattr(attn, "gate", None) is not None:
        _refuse("gated attention (timm's Attention with gated=True)")
    if getattr(attn, "attn_dim", attn.num_heads * attn.head_dim) != attn.qkv.in_features:
        _refuse("attention of another width than the tokens (timm's attn_dim)")
    eps = [_layer_norm_eps(block.norm1, "norm1"), _layer_norm_eps(block.norm2, "norm2")]
    q_norm = _layer_norm_eps(attn.q_norm, "the query norm")
    eps.append(q_norm)
    settings = dict(num_heads=int(attn.num_heads), qk_norm=q_norm is not None, eps=eps)
    scales = [_kind(block.ls1), _kind(block.ls2)]
    if scales not in (["Identity", "Identity"], ["LayerScale", "LayerScale"]):
        _refuse(f"LayerScale on one branch only ({scales[0]}, {scales[1]})")
    settings["layer_scale"] = float(getattr(block.ls1, "init_values", 1e-5)) if scales[0] == "LayerScale" else None
    if _kind(getattr(mlp, "norm", nn.Identity())) != "Identity":
        _refuse("a norm inside the MLP (timm's scale_mlp_norm)")
    kind = _kind(mlp)
    if kind == "Mlp":
        if getattr(mlp, "use_conv", False) or _kind(mlp.fc1) != "Linear":
            _refuse("a convolutional MLP")
        settings.update(mlp="gelu", act=_activation(mlp))
    elif kind == "SwiGLU" or (kind == "GluMlp" and not mlp.gate_last and _kind(mlp.fc1) == "Linear"):
        if _kind(mlp.act) != "SiLU":
            _refuse(f"a gated MLP with {_kind(mlp.act)} (SwiGLU gates with SiLU)")
        settings.update(mlp="swiglu", act="gelu")
    else:
        _refuse(f"the MLP {kind}" + (" with the gate last" if kind == "GluMlp" else ""))
    return settings


def timm_settings(model: nn.Module) -> dict:
    """The ViTConfig fields of a timm VisionTransformer that its state dict cannot show, read off
    the model object (no timm import). Raises TimmRefusal (a ValueError) naming the first feature the
    course's ViT does not compute.

    Returns:
        a dict of ViTConfig fields: image_size, num_heads, norm_eps, act, mlp, qk_norm, layer_scale,
        pool, class_token, fc_norm, norm_pre, no_embed_class, reg_tokens, dist_token, pos_embed.
    """
    name = _kind(model)
    if name not in TIMM_VIT_CLASSES:
        _refuse(f"a timm {name} (from_timm reads {' and '.join(TIMM_VIT_CLASSES)})")
    pe = model.patch_embed
    if _kind(pe) != "PatchEmbed" or _kind(pe.proj) != "Conv2d":
        _refuse(f"the patch embedding {_kind(pe)} (the course's is one strided Conv2d)")
    if tuple(pe.proj.kernel_size) != tuple(pe.proj.stride) or pe.proj.kernel_size[0] != pe.proj.kernel_size[1]:
        _refuse(f"overlapping or non-square patches (kernel {pe.proj.kernel_size}, stride {pe.proj.stride})")
    if _kind(pe.norm) != "Identity":
        _refuse("a norm in the patch embedding (timm's embed_norm_layer)")
    if getattr(pe, "dynamic_img_pad", False):
        _refuse("padding images to a multiple of the patch size (timm's dynamic_img_pad)")
    P = int(pe.proj.kernel_size[0])
    height, width = (int(side) for side in pe.img_size)
    if height % P or width % P:
        _refuse(
            f"an image size {height}x{width} that is no multiple of the patch size {P} "
            f"(timm's convolution drops the last {height % P} rows and {width % P} columns of pixels)"
        )
    if getattr(model, "attn_pool", None) is not None or model.global_pool not in _POOLS:
        _refuse(_OTHER_POOLS.get(model.global_pool, f"global_pool={model.global_pool!r}"))
    if getattr(model, "pool_include_prefix", False):
        _refuse("pooling that includes the prefix tokens (timm's pool_include_prefix)")
    eps = [_layer_norm_eps(model.norm_pre, "norm_pre")]
    norm, fc_norm = _layer_norm_eps(model.norm, "the final norm"), _layer_norm_eps(model.fc_norm, "fc_norm")
    if norm is None and fc_norm is None:
        _refuse("a model without a final norm (timm's final_norm=False)")
    eps += [norm, fc_norm]
    pool = _POOLS[model.global_pool]
    distilled = name == "VisionTransformerDistilled"
    if fc_norm is not None and pool == "cls":
        _refuse("a norm after the class token is taken (timm's fc_norm=True with global_pool='token')")
    if _kind(model.head) not in ("Linear", "Identity") or (distilled and _kind(model.head_dist) != _kind(model.head)):
        _refuse(f"the head {_kind(model.head)} (the course's is one Linear layer)")
    blocks = [_block_settings(block, i) for i, block in enumerate(model.blocks)]
    settings = dict(blocks[0]) if blocks else dict(num_heads=1, qk_norm=False, layer_scale=None, mlp="gelu", act="gelu")
    for i, block in enumerate(blocks[1:], 1):
        differs = [key for key in block if key != "eps" and block[key] != blocks[0][key]]
        if differs:
            _refuse(f"blocks that differ from each other (block {i}'s {', '.join(differs)})")
    eps += [e for block in blocks for e in block["eps"]]
    settings.pop("eps", None)
    found = {e for e in eps if e is not None}
    if len(found) > 1:
        _refuse(f"LayerNorms of different epsilons ({sorted(found)})")
    reg = getattr(model, "reg_token", None)
    settings.update(
        image_size=height if height == width else (height, width),
        norm_eps=found.pop() if found else 1e-6,
        pool=pool,
        class_token=model.cls_token is not None,
        fc_norm=fc_norm is not None,
        norm_pre=eps[0] is not None,
        no_embed_class=bool(getattr(model, "no_embed_class", False)),
        reg_tokens=int(reg.shape[1]) if reg is not None else 0,
        dist_token=distilled,
        pos_embed="learned" if getattr(model, "pos_embed", None) is not None else "none",
    )
    if settings["pos_embed"] == "none":
        settings["no_embed_class"] = False
    if settings["class_token"] == (pool == "cls"):  # what the pool implies: left to ViTConfig's default
        settings["class_token"] = None
    return settings


def timm_state_dict(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm's tensors in the course's layout, the function unchanged: SwiGLUPacked's fc1 (2h, D),
    gate rows first, split into fc1_g and fc1_x (h, D); the biases an architecture leaves out (of
    the attention's projection or the MLP in every block: proj_bias=False; of the patch embedding in
    pre-norm and proj_bias=False models) as zeros. A bias only some blocks lack stays missing, so
    that loading names it."""
    out = dict(state_dict)
    for name in list(out):
        if name.endswith(".mlp.fc1.weight"):
            block = name.removesuffix("fc1.weight")
            fc2 = out.get(block + "fc2.weight")
            if fc2 is not None and fc2.shape[1] * 2 == out[name].shape[0]:  # packed: fc2 reads half of fc1
                for kind in ("weight", "bias"):
                    if block + f"fc1.{kind}" in out:
                        gate, value = out.pop(block + f"fc1.{kind}").chunk(2, dim=0)
                        out[block + f"fc1_g.{kind}"], out[block + f"fc1_x.{kind}"] = gate, value
    # A bias is read as zeros only where the architecture has none: absent from every block (a
    # proj_bias=False model), never where some blocks have it (a damaged file, named as missing)
    bias_free = set()
    for layer in (".attn.proj", ".mlp.fc2", ".mlp.fc1", ".mlp.fc1_g", ".mlp.fc1_x"):
        weights = [name for name in out if name.endswith(layer + ".weight")]
        if weights and not any(name.removesuffix("weight") + "bias" in out for name in weights):
            bias_free.add(layer)
            for name in weights:
                out[name.removesuffix("weight") + "bias"] = out[name].new_zeros(out[name].shape[0])
    # the patch embedding's bias: left out by pre-norm (CLIP) and proj_bias=False models
    bias_free_model = "norm_pre.weight" in out or ".attn.proj" in bias_free
    if "patch_embed.proj.weight" in out and "patch_embed.proj.bias" not in out and bias_free_model:
        weight = out["patch_embed.proj.weight"]
        out["patch_embed.proj.bias"] = weight.new_zeros(weight.shape[0])
    return out


def named_timm_settings(name: str) -> dict:
    """The settings of a timm model name (a pretrained tag after '.' is ignored), from
    TIMM_SETTINGS_FILE; a TimmRefusal naming the feature, or a ValueError for a name it does not hold."""
    if not isinstance(name, str):
        raise TypeError(f"expected a timm model name (a str), got {type(name).__name__}")
    table = json.loads(TIMM_SETTINGS_FILE.read_text())
    architecture = name.split(".")[0]
    if architecture not in table["models"]:
        raise ValueError(
            f"{architecture!r} is no model of timm {table['timm']}'s vision_transformer or deit modules: "
            "pass the timm model itself, or its state dict with num_heads=..."
        )
    entry = table["models"][architecture]
    if "refused" in entry:
        raise TimmRefusal(entry["refused"])
    return dict(entry["settings"])
