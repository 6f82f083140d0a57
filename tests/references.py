"""Independent references for the tests: torch's own modules holding our modules' weights, and
the Hugging Face hub files' tensor names."""

import re

import torch
from torch import nn

from utils.attention import MultiHeadSelfAttention
from utils.encoder import EncoderBlock


def randomize_(module: nn.Module, std: float = 0.3) -> nn.Module:
    """Random values in every parameter (biases, LayerNorm affines, tokens), so that no default
    init (a zero bias, a unit scale) can hide a mistake."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, std)
    return module


def copy_attention_(mha: nn.MultiheadAttention, ours: MultiHeadSelfAttention) -> nn.MultiheadAttention:
    """Put our weights into torch's attention: in_proj <- qkv, out_proj <- proj."""
    with torch.no_grad():
        mha.in_proj_weight.copy_(ours.qkv.weight)
        if ours.qkv.bias is not None:
            mha.in_proj_bias.copy_(ours.qkv.bias)
        else:
            mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(ours.proj.weight)
        mha.out_proj.bias.copy_(ours.proj.bias)
    return mha


def torch_mha_from(ours: MultiHeadSelfAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention (batch first) holding our weights, in eval mode."""
    mha = nn.MultiheadAttention(ours.dim, ours.num_heads, bias=True, batch_first=True)
    return copy_attention_(mha, ours).eval()


def torch_layer_from(block: EncoderBlock) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer holding the block's weights (same pre/post-norm, same eps)."""
    dim, hidden = block.mlp.fc1.in_features, block.mlp.fc1.out_features
    layer = nn.TransformerEncoderLayer(
        dim,
        block.attn.num_heads,
        dim_feedforward=hidden,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=block.norm_first,
        layer_norm_eps=block.norm1.eps,
    )
    copy_attention_(layer.self_attn, block.attn)
    layer.linear1.load_state_dict(block.mlp.fc1.state_dict())
    layer.linear2.load_state_dict(block.mlp.fc2.state_dict())
    layer.norm1.load_state_dict(block.norm1.state_dict())
    layer.norm2.load_state_dict(block.norm2.state_dict())
    return layer.eval()


# transformers 5's names for a layer's tensors -> those of the hub's checkpoint files (transformers 4's)
V5_TO_HUB = {
    "attention.q_proj": "attention.attention.query",
    "attention.k_proj": "attention.attention.key",
    "attention.v_proj": "attention.attention.value",
    "attention.o_proj": "attention.output.dense",
    "mlp.fc1": "intermediate.dense",
    "mlp.fc2": "output.dense",
}
LAYER_NAME = re.compile(r"(vit\.)?(?:layers|encoder\.layer)\.(\d+)\.(.+)\.(weight|bias)")


def _renamed(state_dict: dict, layers: str, renames: dict) -> dict:
    """The state dict with each layer tensor named `<vit.>{layers}.<i>.<renamed part>.<kind>`."""
    out = {}
    for name, tensor in state_dict.items():
        if m := LAYER_NAME.fullmatch(name):
            name = f"{m[1] or ''}{layers}.{m[2]}.{renames.get(m[3], m[3])}.{m[4]}"
        out[name] = tensor
    return out


def to_hub_file_layout(state_dict: dict) -> dict:
    """transformers 5.24's names -> those of the hub's checkpoint files (older transformers)."""
    return _renamed(state_dict, "encoder.layer", V5_TO_HUB)


def to_v5_names(state_dict: dict) -> dict:
    """The hub files' names (transformers 4 uses them too) -> transformers 5's; names already in
    transformers 5's layout pass unchanged, so a test reads the same keys on either version."""
    return _renamed(state_dict, "layers", {hub: v5 for v5, hub in V5_TO_HUB.items()})
