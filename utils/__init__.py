"""ViT from Scratch: the course library. Each module holds what one lesson builds.

pixels -> patches -> tokens -> attention -> blocks -> model; `viz` and `checks` sit on top.
"""

from utils.attention import (
    MultiHeadSelfAttention,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from utils.data import load_sample_image
from utils.embeddings import (
    pos_embed_similarity,
    prepend_cls_token,
    resize_pos_embed,
    sincos_pos_embed_2d,
    trunc_normal_,
)
from utils.encoder import MLP, EncoderBlock
from utils.patches import PatchEmbedding, patchify, unpatchify
from utils.runtime import get_device, set_seed
from utils.vit import VisionTransformer, ViTConfig

__all__ = [
    "MLP",
    "EncoderBlock",
    "MultiHeadSelfAttention",
    "PatchEmbedding",
    "ViTConfig",
    "VisionTransformer",
    "doctor",  # loaded on first use (__getattr__ below)
    "get_device",
    "load_sample_image",
    "merge_heads",
    "patchify",
    "pos_embed_similarity",
    "prepend_cls_token",
    "resize_pos_embed",
    "scaled_dot_product_attention",
    "set_seed",
    "sincos_pos_embed_2d",
    "split_heads",
    "trunc_normal_",
    "unpatchify",
]


def __getattr__(name: str):
    """`utils.doctor()` checks the set-up; its module is loaded on first use, so `import utils` stays as fast."""
    if name == "doctor":
        import utils.doctor  # a callable module: utils.doctor() runs the checks

        return utils.doctor
    raise AttributeError(f"module 'utils' has no attribute {name!r}")
