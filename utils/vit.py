"""The whole Vision Transformer: patch embedding, class token, positions, encoder blocks, head."""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from utils.embeddings import (
    POS_EMBED_KINDS,
    prepend_cls_token,
    resize_pos_embed,
    sincos_pos_embed_2d,
    trunc_normal_,
)
from utils.encoder import ACTIVATIONS, MLP_KINDS, EncoderBlock, mlp_hidden_dim
from utils.patches import PatchEmbedding, check_image_size, to_2tuple
from utils.rope import rope_angles, rope_sin_cos
from utils.validation import WrongTypeError, check_flag, check_positive, check_probability, check_whole

POOLS = ("cls", "mean")
# fields added after the course's first configs: printed only when they differ from their default
LATE_FIELDS = (
    "fc_norm",
    "norm_pre",
    "class_token",
    "reg_tokens",
    "dist_token",
    "no_embed_class",
    "layer_scale",
    "qk_norm",
    "act",
    "mlp",
)
MAX_PARAMETERS = 2_000_000_000  # 8 GB of float32: more than a laptop holds; ViT-H/14 has 0.63 billion


@dataclass(frozen=True)
class ViTConfig:
    """Everything that fixes a ViT's shape. The defaults are ViT-B/16; see the presets."""

    image_size: int | tuple[int, int] = 224  # side of a square input image, or (H, W), in pixels
    patch_size: int = 16  # side P of a square patch; must divide image_size
    in_channels: int = 3  # C: 3 for RGB, 1 for grayscale
    num_classes: int = 1000  # outputs of the classification head (0: no head, return features)
    embed_dim: int = 768  # D: the width of every token
    depth: int = 12  # number of encoder blocks (0: none, the patch tokens go straight to the head)
    num_heads: int = 12  # attention heads per block; must divide embed_dim
    mlp_ratio: float = 4.0  # MLP hidden width = mlp_ratio * embed_dim
    qkv_bias: bool = True  # bias in the fused query/key/value projection
    dropout: float = 0.0  # dropout on the embeddings, the attention output and in the MLP, in [0, 1)
    attn_dropout: float = 0.0  # dropout on the attention weights, in [0, 1)
    pool: str = "cls"  # "cls": classify the class token; "mean": average the patch tokens (no class token)
    pos_embed: str = "learned"  # "learned", "sincos" (fixed 2-D) or "none"
    norm_eps: float = 1e-6  # LayerNorm epsilon, > 0: 1e-6 in the JAX original and timm (transformers: 1e-12)
    fc_norm: bool = False  # pool="mean" only: normalise the average (timm's fc_norm), not every token before it
    norm_pre: bool = False  # a LayerNorm on the tokens after the positions, before block 0 (timm's pre_norm, CLIP)
    # The 2022-2026 options, each named as timm names it, so that timm's checkpoints load as they are:
    class_token: bool | None = None  # None: as pool says (a class token for "cls"); True with pool="mean" too
    reg_tokens: int = 0  # register tokens (Darcet et al. 2024): learned tokens after the class token, never pooled
    dist_token: bool = False  # DeiT's distillation token after the class token; its own head, head_dist, averaged
    no_embed_class: bool = False  # positions for the patches only, added before the prefix tokens are put in front
    layer_scale: float | None = None  # LayerScale's starting value on both branches (timm's init_values), > 0
    qk_norm: bool = False  # a LayerNorm on each head's queries and keys (timm's q_norm, k_norm)
    act: str = "gelu"  # the MLP's activation: "gelu" (exact), "gelu_tanh" (tanh approximation), "quick_gelu" (CLIP)
    mlp: str = "gelu"  # "gelu": fc1, act, fc2; "swiglu": fc2(silu(fc1_g(x)) * fc1_x(x)), timm's SwiGLU

    def __repr__(self) -> str:
        """The fields as a dataclass prints them, the LATE_FIELDS (fc_norm, norm_pre, the modern
        options) only when they differ from their default: they came after the course's first
        configs, whose printed form stays as it was (eval(repr(config)) == config)."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        fields = [
            f
            for f in dataclasses.fields(self)
            if f.name not in LATE_FIELDS or getattr(self, f.name) != defaults[f.name]
        ]
        return f"{type(self).__name__}(" + ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields) + ")"

    def __post_init__(self):
        """Check every field's type and range; sizes are stored as Python ints, other numbers as
        Python floats (so that a config saves and loads with torch.save / torch.load(weights_only=True))."""
        whole = {"patch_size": 1, "in_channels": 1, "num_classes": 0, "embed_dim": 1, "depth": 0, "num_heads": 1}
        for name, minimum in whole.items():
            object.__setattr__(self, name, check_whole(getattr(self, name), name, minimum))
        height, width = to_2tuple(self.image_size, "image_size")
        pair = isinstance(self.image_size, (tuple, list))
        object.__setattr__(self, "image_size", (height, width) if pair else height)  # a list becomes a tuple
        if height % self.patch_size or width % self.patch_size:
            raise ValueError(f"image_size {height}x{width} is not divisible by patch_size {self.patch_size}")
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim {self.embed_dim} is not divisible by num_heads {self.num_heads}: "
                "every head needs an equal share of the width"
            )
        mlp_hidden_dim(self.embed_dim, self.mlp_ratio)  # > 0, and at least one hidden unit
        for name in ("qkv_bias", "fc_norm", "norm_pre", "dist_token", "no_embed_class", "qk_norm"):
            object.__setattr__(self, name, check_flag(getattr(self, name), name))  # a NumPy bool: a plain bool
        if self.class_token is not None:
            object.__setattr__(self, "class_token", check_flag(self.class_token, "class_token"))
        object.__setattr__(self, "reg_tokens", check_whole(self.reg_tokens, "reg_tokens", minimum=0))
        if self.layer_scale is not None:
            scale = check_positive(
                self.layer_scale, "layer_scale", meaning=" (LayerScale's starting value; None: none)"
            )
            if type(self.layer_scale) not in (int, float):
                object.__setattr__(self, "layer_scale", scale)
        checked = {
            "mlp_ratio": check_positive(self.mlp_ratio, "mlp_ratio"),
            "dropout": check_probability(self.dropout, "dropout"),
            "attn_dropout": check_probability(self.attn_dropout, "attn_dropout"),
            "norm_eps": check_positive(self.norm_eps, "norm_eps"),
        }
        for name, number in checked.items():
            if type(getattr(self, name)) not in (int, float):  # a NumPy or other number: a plain float
                object.__setattr__(self, name, number)
        for name, choices in (("pool", POOLS), ("pos_embed", POS_EMBED_KINDS)):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise WrongTypeError(f"{name} must be one of {choices}, got {value!r} of type {type(value).__name__}")
        if self.pool not in POOLS:
            raise ValueError(f"pool must be 'cls' or 'mean', got {self.pool!r}")
        if self.pos_embed not in POS_EMBED_KINDS:
            raise ValueError(f"pos_embed must be one of {POS_EMBED_KINDS}, got {self.pos_embed!r}")
        if self.fc_norm and self.pool != "mean":
            raise ValueError(
                f"fc_norm=True normalises the average of the patch tokens (timm's global_pool='avg' layout): "
                f"it needs pool='mean', got pool={self.pool!r}"
            )
        if self.pos_embed == "sincos" and self.embed_dim % 4:
            raise ValueError(f"pos_embed='sincos' needs embed_dim divisible by 4, got {self.embed_dim}")
        self._check_modern_options()

    def _check_modern_options(self) -> None:
        """The options of the 2022-2026 ViTs: each checked on its own, then how they combine."""
        for name, choices in (("act", ACTIVATIONS), ("mlp", MLP_KINDS)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {value!r}")
        if self.mlp == "swiglu" and self.act != "gelu":
            raise ValueError(
                f"mlp='swiglu' gates with SiLU, its own activation: leave act='gelu' (unused), got act={self.act!r}"
            )
        if self.pool == "cls" and self.class_token is False:
            raise ValueError(
                "pool='cls' classifies the class token, and class_token=False leaves it out: use pool='mean' "
                "(the average of the patch tokens) for a model without one"
            )
        if self.dist_token and not (self.pool == "cls" and self.has_class_token):
            raise ValueError(
                "dist_token=True (DeiT's distillation token) needs the class token and pool='cls': "
                f"the two heads read tokens 0 and 1, got pool={self.pool!r}, class_token={self.class_token!r}"
            )
        if self.no_embed_class and self.pos_embed not in ("learned", "sincos"):
            raise ValueError(
                f"no_embed_class=True leaves the prefix tokens out of a position table; pos_embed={self.pos_embed!r} "
                "has no table: use pos_embed='learned' or 'sincos'"
            )
        if self.pos_embed == "rope2d" and (self.embed_dim // self.num_heads) % 4:
            raise ValueError(
                f"pos_embed='rope2d' needs a head width divisible by 4 (two axes, pairs of channels), got "
                f"embed_dim {self.embed_dim} / num_heads {self.num_heads} = {self.embed_dim // self.num_heads}"
            )

    @property
    def has_class_token(self) -> bool:
        """Whether the sequence starts with a class token: class_token if set, else pool == 'cls'."""
        return self.pool == "cls" if self.class_token is None else self.class_token

    @property
    def num_prefix_tokens(self) -> int:
        """The tokens in front of the patches: the class token, the distillation token, the registers."""
        return int(self.has_class_token) + int(self.dist_token) + self.reg_tokens

    @property
    def num_patches(self) -> int:
        """N, the number of patches per image."""
        height, width = to_2tuple(self.image_size)
        return (height // self.patch_size) * (width // self.patch_size)

    @property
    def num_tokens(self) -> int:
        """T, the sequence length: N patches plus the prefix tokens (one class token when pool == 'cls')."""
        return self.num_patches + self.num_prefix_tokens

    @classmethod
    def tiny(cls, **overrides) -> "ViTConfig":
        """The course's tiny model: 32 px RGB, 4 px patches (64 tokens), 4 blocks of width 64."""
        fields = dict(
            image_size=32,
            patch_size=4,
            in_channels=3,
            num_classes=10,
            embed_dim=64,
            depth=4,
            num_heads=4,
            mlp_ratio=2.0,
        )
        return cls(**{**fields, **overrides})

    @classmethod
    def vit_b16(cls, **overrides) -> "ViTConfig":
        """ViT-B/16 of the ViT paper: 224 px, 16 px patches, 768 wide, 12 deep, 12 heads (86.6 M)."""
        return cls(**overrides)


def check_fits_in_memory(config: ViTConfig) -> None:
    """Raise before anything is allocated if the model's weight matrices would hold more than
    MAX_PARAMETERS numbers (a typo such as embed_dim=76800 would otherwise fill the memory and
    kill the kernel). Models built on the "meta" device allocate nothing and pass."""
    if torch.get_default_device().type == "meta":
        return
    D = config.embed_dim
    per_block = 4 * D * D + 2 * D * mlp_hidden_dim(D, config.mlp_ratio)  # qkv and proj, fc1 and fc2
    weights = config.depth * per_block + config.patch_size**2 * config.in_channels * D + config.num_tokens * D
    if weights > MAX_PARAMETERS:
        raise ValueError(
            f"this config would build about {weights / 1e9:.1f} billion parameters "
            f"({4 * weights / 1e9:.0f} GB of float32), more than the {MAX_PARAMETERS / 1e9:.0f} billion this "
            f"library allows; check embed_dim={D}, depth={config.depth}, mlp_ratio={config.mlp_ratio} for a typo"
        )


class VisionTransformer(nn.Module):
    """A Vision Transformer whose parameter names are those of the reference (timm) ViT.

    The final LayerNorm is `norm`, applied to every token before pooling. With config.fc_norm
    (pool="mean" only) it is timm's `fc_norm` instead, applied to the average of the patch tokens,
    and `norm` is an identity, as in timm with global_pool="avg": LayerNorm then average and
    average then LayerNorm are different functions, so each layout loads only into its own.
    With config.norm_pre, `norm_pre` is one more LayerNorm, on the tokens after the position
    embeddings (and pos_drop), before the first block: timm's pre_norm=True, as in CLIP's ViT.
    Otherwise it is an identity, with no tensors (the state dict is that of a model without it).

    The 2022-2026 options (ViTConfig's later fields, timm's names and layouts, each checked against
    timm's own modules in tests/test_modern_vit.py): `reg_token` (1, R, D) register tokens after the
    class token, pooled never; `dist_token` and `head_dist`, DeiT's distillation token and head, the
    two heads' logits averaged (timm at inference; timm's distilled training mode, which returns both,
    is not kept); positions for the patches only (no_embed_class: the table is added before the prefix
    tokens are put in front); LayerScale `ls1`, `ls2`; `q_norm`, `k_norm`; the activation; SwiGLU's
    `fc1_g`, `fc1_x`; and pos_embed="rope2d", no table, q and k turned by utils.rope in every block
    (timm's RotaryEmbeddingCat layout, the prefix tokens not turned). With none of them set, the model
    computes exactly what it computed before they came (tests/test_modern_vit.py pins it).

    Args:
        config: the shape of the model, a ViTConfig.
    """

    def __init__(self, config: ViTConfig):
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise WrongTypeError(f"expected a ViTConfig, got {type(config).__name__}; e.g. ViTConfig.tiny()")
        check_fits_in_memory(config)
        self.config = config
        D = config.embed_dim
        self.patch_embed = PatchEmbedding(config.image_size, config.patch_size, config.in_channels, D)
        self.num_prefix_tokens = config.num_prefix_tokens  # class, distillation and register tokens
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D)) if config.has_class_token else None
        self.dist_token = nn.Parameter(torch.zeros(1, 1, D)) if config.dist_token else None
        self.reg_token = nn.Parameter(torch.zeros(1, config.reg_tokens, D)) if config.reg_tokens else None
        self.table_prefix = 0 if config.no_embed_class else self.num_prefix_tokens  # prefix rows of the table
        num_tokens = self.table_prefix + self.patch_embed.num_patches
        if config.pos_embed == "learned":
            self.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, D))  # (1, T, D)
        elif config.pos_embed == "sincos":  # fixed: a buffer, saved with the model, never trained
            self.register_buffer("pos_embed", self._sincos_table(self.patch_embed.grid_size))  # (1, T, D)
        else:  # "none", or "rope2d": the positions turn q and k in every block instead
            self.pos_embed = None
        self.pos_drop = nn.Dropout(config.dropout)
        self.norm_pre = nn.LayerNorm(D, eps=config.norm_eps) if config.norm_pre else nn.Identity()
        self.blocks = nn.ModuleList(
            EncoderBlock(
                D,
                config.num_heads,
                config.mlp_ratio,
                config.qkv_bias,
                config.dropout,
                config.attn_dropout,
                norm_first=True,
                norm_eps=config.norm_eps,
                layer_scale=config.layer_scale,
                act=config.act,
                mlp=config.mlp,
                qk_norm=config.qk_norm,
            )
            for _ in range(config.depth)
        )
        if config.fc_norm:  # timm's average-pool layout: no norm on the tokens, one on their average
            self.norm, self.fc_norm = nn.Identity(), nn.LayerNorm(D, eps=config.norm_eps)
        else:  # the reference ViT: every token normalised, nothing after pooling
            self.norm, self.fc_norm = nn.LayerNorm(D, eps=config.norm_eps), nn.Identity()
        self.head = nn.Linear(D, config.num_classes) if config.num_classes > 0 else nn.Identity()
        if config.dist_token:  # DeiT's second head, on the distillation token
            self.head_dist = nn.Linear(D, config.num_classes) if config.num_classes > 0 else nn.Identity()
        self.init_weights()

    def _sincos_table(self, grid_size: tuple[int, int]) -> torch.Tensor:
        """The fixed sin-cos table for this grid, with all-zero rows for the prefix tokens it covers."""
        table = sincos_pos_embed_2d(grid_size, self.config.embed_dim, cls_token=False)  # (1, N, D)
        return torch.cat([table.new_zeros(1, self.table_prefix, self.config.embed_dim), table], dim=1)

    def init_weights(self) -> None:
        """The course's init: trunc-normal(std 0.02, cut at +-2 std) for the Linear weights, the class
        token and the learned positions; zero biases; the patch embedding's Conv2d and the LayerNorms
        keep PyTorch's defaults. The Linear weights and positions take timm's std 0.02 (timm cuts at
        +-2 in absolute terms, lesson 2); the class token differs from both references: timm draws it
        from normal(std 1e-6), the JAX original starts it at zeros. The shipped checkpoints were
        trained from this init."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        if self.cls_token is not None:
            trunc_normal_(self.cls_token.data, std=0.02)
        if isinstance(self.pos_embed, nn.Parameter):
            trunc_normal_(self.pos_embed.data, std=0.02)
        for token in (self.dist_token, self.reg_token):  # drawn after the others: older configs draw as before
            if token is not None:
                trunc_normal_(token.data, std=0.02)

    def no_weight_decay(self) -> set[str]:
        """The parameters that weight decay should leave alone besides the biases and norms (timm's
        names): pulling the class token or the position table towards 0 only erases what they learn."""
        extra = {name for name in ("dist_token", "reg_token") if getattr(self, name) is not None}
        return {"pos_embed", "cls_token"} | extra  # and the distillation and register tokens (timm's names)

    def set_image_size(self, image_size: int | tuple[int, int]) -> None:
        """Run at another image size: resize the learned position table bicubically over the
        patch grid (the class-token entry kept apart), or rebuild the fixed sin-cos one. A size
        that does not fit raises before anything changes."""
        check_image_size(image_size, self.config.patch_size)
        config = dataclasses.replace(self.config, image_size=image_size)
        check_fits_in_memory(config)  # a position table for a huge image would not fit either
        old_grid = self.patch_embed.grid_size
        self.patch_embed.set_image_size(image_size)
        new_grid = self.patch_embed.grid_size
        if isinstance(self.pos_embed, nn.Parameter):
            with torch.no_grad():
                resized = resize_pos_embed(self.pos_embed, old_grid, new_grid, self.table_prefix)
            self.pos_embed = nn.Parameter(resized)
        elif self.pos_embed is not None:
            self.pos_embed = self._sincos_table(new_grid).to(self.pos_embed.device)
        self.config = config

    def forward_features(
        self, images: torch.Tensor, return_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, C, H, W) images -> (B, T, D) tokens after the final norm (with config.fc_norm, as in
        timm, no norm: it comes after pooling); with return_attention, also the attention weights of
        every block stacked as (depth, B, heads, T, T). With config.norm_pre the tokens are
        normalised once more before the first block."""
        check_flag(return_attention, "return_attention")
        x = self.patch_embed(images)  # (B, N, D); checks the images' shape first
        x = self.embed_tokens(x)  # (B, T, D): prefix tokens in front, positions added
        x = self.pos_drop(x)
        x = self.norm_pre(x)  # (B, T, D); an identity unless config.norm_pre
        rope = self.rope(self.patch_embed.grid_size, x)  # None unless pos_embed="rope2d"
        if not return_attention:  # no weights built: the blocks may take attention's fast path
            for block in self.blocks:
                x = block(x) if rope is None else block(x, rope=rope)  # (B, T, D)
            return self.norm(x)  # (B, T, D)
        attentions = []
        for block in self.blocks:
            x, weights = block(x, return_attention=True, rope=rope)  # (B, T, D), (B, heads, T, T)
            attentions.append(weights)
        x = self.norm(x)  # (B, T, D)
        if not attentions:  # depth 0: no block, no weights
            return x, x.new_zeros(0, x.shape[0], self.config.num_heads, x.shape[1], x.shape[1])
        return x, torch.stack(attentions)  # (depth, B, heads, T, T)

    def embed_tokens(self, x: torch.Tensor, table: torch.Tensor | str | None = "own") -> torch.Tensor:
        """(B, N, D) patch tokens -> (B, T, D): the class, distillation and register tokens put in
        front, in that order, and the position table added: to every token, or with
        config.no_embed_class to the patch tokens before the others are put in front (timm's _pos_embed).
        `table`: the model's own position table ("own"), or another one (utils.packing: one per size)."""
        table = self.pos_embed if isinstance(table, str) else table
        prefix = [token for token in (self.dist_token, self.reg_token) if token is not None]
        if not prefix and not self.config.no_embed_class:  # the course's ViT: exactly lesson 2's steps
            if self.cls_token is not None:
                x = prepend_cls_token(x, self.cls_token)  # (B, T = N + 1, D)
            if table is not None:
                x = x + table  # (B, T, D), one position vector added per token
            return x
        if self.cls_token is not None:
            prefix.insert(0, self.cls_token)
        if table is not None and self.config.no_embed_class:
            x = x + table  # (B, N, D): the patches only
        B = x.shape[0]
        x = torch.cat([token.expand(B, -1, -1) for token in prefix] + [x], dim=1)  # (B, T, D)
        if table is not None and not self.config.no_embed_class:
            x = x + table  # (B, T, D), the prefix tokens' rows too
        return x

    def rope(self, grid_size: tuple[int, int], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int] | None:
        """With pos_embed="rope2d", (sin, cos, num_prefix_tokens) for a grid (utils.rope), in x's dtype
        and on its device; else None."""
        if self.config.pos_embed != "rope2d":
            return None
        angles = rope_angles(grid_size, self.config.embed_dim // self.config.num_heads).to(x.device)
        sin, cos = rope_sin_cos(angles)  # each (N, head_dim)
        return sin.to(x.dtype), cos.to(x.dtype), self.num_prefix_tokens

    def forward(
        self, images: torch.Tensor, return_attention: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """(B, C, H, W) images -> logits (B, num_classes); with return_attention, also the
        attention weights (depth, B, heads, T, T)."""
        check_flag(return_attention, "return_attention")
        if return_attention:
            x, attn = self.forward_features(images, return_attention=True)  # (B, T, D), (depth, B, heads, T, T)
        else:
            x = self.forward_features(images)  # (B, T, D)
        if self.config.dist_token:  # DeiT: the two heads' predictions averaged (timm at inference)
            logits = (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2  # (B, num_classes)
            return (logits, attn) if return_attention else logits
        if self.config.pool == "cls":
            pooled = x[:, 0]  # (B, D), the class token
        else:
            pooled = x[:, self.num_prefix_tokens :].mean(dim=1)  # (B, D), mean of the patch tokens
        pooled = self.fc_norm(pooled)  # (B, D); an identity unless config.fc_norm
        logits = self.head(pooled)  # (B, num_classes)
        return (logits, attn) if return_attention else logits

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Like nn.Module.load_state_dict, but a tensor of another shape raises a ValueError that
        names it (a checkpoint of another model size or image size), and so does anything that is
        not a mapping of names to tensors (a whole checkpoint, whose weights sit under one key,
        would otherwise load nothing at all with strict=False)."""
        if not isinstance(state_dict, Mapping):
            raise WrongTypeError(
                f"expected a state dict (a mapping from parameter names to tensors), got {type(state_dict).__name__}"
            )
        not_tensors = [name for name, value in state_dict.items() if not isinstance(value, torch.Tensor)]
        if not_tensors:
            nested = [
                name
                for name in not_tensors
                if isinstance(state_dict[name], Mapping)
                and any(isinstance(value, torch.Tensor) for value in state_dict[name].values())
            ]
            hint = f"; the weights may sit under a key: load checkpoint[{nested[0]!r}]" if nested else ""
            raise ValueError(f"expected a state dict of tensors, got other values under {not_tensors[:5]}{hint}")
        own = self.state_dict()
        mismatched = [
            f"{name}: checkpoint {tuple(tensor.shape)}, model {tuple(own[name].shape)}"
            for name, tensor in state_dict.items()
            if name in own and tuple(tensor.shape) != tuple(own[name].shape)
        ]
        if mismatched:
            hint = ""
            if any(line.startswith("pos_embed") for line in mismatched):
                hint = (
                    " (a position table for another image size: build the model at that size, load, "
                    "then set_image_size)"
                )
            raise ValueError("checkpoint does not fit this model:\n  " + "\n  ".join(mismatched) + hint)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)
