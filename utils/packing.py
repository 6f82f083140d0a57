"""Packing: several images of different sizes in one sequence (NaViT, Dehghani et al. 2023, "Patch
n' Pack"), each image's tokens attending only to each other through a block-diagonal mask.

`pack` embeds each image as the model would at its own size (its prefix tokens, its position table
resized to its grid as VisionTransformer.set_image_size resizes it, or its RoPE angles) and puts
the sequences one after the other; `packed_forward` runs the blocks once on the packed sequence
with the mask, then pools and classifies each image's segment. The result equals running the
images one by one (to float32 rounding: tests/test_packing.py).
"""

from dataclasses import dataclass

import torch

from utils.embeddings import resize_pos_embed
from utils.patches import check_images_fit
from utils.rope import rope_angles, rope_sin_cos
from utils.validation import WrongTypeError, check_tensor
from utils.vit import VisionTransformer


@dataclass(frozen=True)
class Packed:
    """A packed sequence: tokens (1, T, D), the (T, T) boolean mask (True: may attend), each image's
    (start, length) in the sequence, and the RoPE (sin, cos, 0) of every token (None without RoPE)."""

    tokens: torch.Tensor
    mask: torch.Tensor
    segments: tuple[tuple[int, int], ...]
    rope: tuple[torch.Tensor, torch.Tensor, int] | None


def _check_model(model) -> VisionTransformer:
    if not isinstance(model, VisionTransformer):
        raise WrongTypeError(f"expected a utils.vit.VisionTransformer, got {type(model).__name__}")
    return model


def _embed_one(model: VisionTransformer, image: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
    """(C, H, W) -> its (T_i, D) tokens as model.forward_features builds them at its own size."""
    P = model.patch_embed.patch_size
    check_tensor(image, "image", "(C, H, W)", ndim=3)
    check_images_fit(image.unsqueeze(0), P, model.patch_embed.in_channels)
    grid = (image.shape[1] // P, image.shape[2] // P)
    x = model.patch_embed.proj(image.unsqueeze(0)).flatten(2).transpose(1, 2)  # (1, N_i, D)
    table = model.pos_embed
    if table is not None:
        old_grid = model.patch_embed.grid_size
        if model.config.pos_embed == "learned":
            table = resize_pos_embed(table, old_grid, grid, model.table_prefix)  # as set_image_size
        else:
            table = model._sincos_table(grid).to(x.device, x.dtype)
    x = model.embed_tokens(x, table)  # (1, T_i, D)
    return model.norm_pre(model.pos_drop(x))[0], grid  # (T_i, D)


def pack(model: VisionTransformer, images: list[torch.Tensor]) -> Packed:
    """Embed each (C, H, W) image at its own size (sides multiples of the patch size) and pack them.

    Returns:
        Packed: tokens (1, sum T_i, D) and the block-diagonal mask (sum T_i, sum T_i).
    """
    _check_model(model)
    if not isinstance(images, (list, tuple)) or not images:
        raise WrongTypeError(f"expected a non-empty list of (C, H, W) images, got {type(images).__name__}")
    sequences, segments, sins, coss, start = [], [], [], [], 0
    rope = model.config.pos_embed == "rope2d"
    head_dim = model.config.embed_dim // model.config.num_heads
    for image in images:
        tokens, grid = _embed_one(model, image)  # (T_i, D)
        sequences.append(tokens)
        segments.append((start, tokens.shape[0]))
        start += tokens.shape[0]
        if rope:  # the prefix tokens' angles are 0: sin 0, cos 1, so they are not turned
            angles = torch.cat([torch.zeros(model.num_prefix_tokens, head_dim // 2), rope_angles(grid, head_dim)])
            sin, cos = rope_sin_cos(angles.to(tokens.device))
            sins.append(sin.to(tokens.dtype))
            coss.append(cos.to(tokens.dtype))
    T = start
    mask = torch.zeros(T, T, dtype=torch.bool, device=sequences[0].device)
    for begin, length in segments:
        mask[begin : begin + length, begin : begin + length] = True  # each image sees only itself
    rope_args = (torch.cat(sins), torch.cat(coss), 0) if rope else None
    return Packed(torch.cat(sequences).unsqueeze(0), mask, tuple(segments), rope_args)


def packed_forward(model: VisionTransformer, images: list[torch.Tensor]) -> torch.Tensor:
    """The logits of images of different sizes, in one pass of the blocks over one packed sequence.

    Returns:
        (len(images), num_classes): row i equals model(images[i]) at image i's size (set_image_size),
        to float32 rounding.
    """
    packed = pack(model, images)
    x = packed.tokens  # (1, T, D)
    for block in model.blocks:
        x = block(x, mask=packed.mask, rope=packed.rope)  # (1, T, D), attention inside each image only
    x = model.norm(x)[0]  # (T, D)
    logits = []
    for begin, length in packed.segments:
        tokens = x[begin : begin + length]  # (T_i, D)
        if model.config.dist_token:
            logits.append((model.head(tokens[0]) + model.head_dist(tokens[1])) / 2)
            continue
        pooled = tokens[0] if model.config.pool == "cls" else tokens[model.num_prefix_tokens :].mean(dim=0)
        logits.append(model.head(model.fc_norm(pooled)))
    return torch.stack(logits)  # (images, num_classes)
