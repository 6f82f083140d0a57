"""Lesson 12's experiments: positions beyond the training grid, on the digits (lesson 6's data and
split), five seeds each, budgets in steps.

- Positions: the tiny ViT with 2 px patches (a 4 x 4 grid of 16 tokens) and a learned table, the
  fixed sin-cos table or 2-D RoPE (utils.rope). Each run is also measured at 12 x 12 pixels (a 6 x 6
  grid) two ways: the digit upsampled (the same content, each patch covers less of it) and the 8 x 8
  digit in the middle of a 12 x 12 blank canvas (the same patches, more of them). A table is resized
  (VisionTransformer.set_image_size); RoPE runs as it is, or with its positions scaled into the
  training range ("position interpolation", `scaled_rope`).
- Patch sizes (FlexiViT, Beyer et al. 2023): the digits doubled to 16 x 16 (nearest), one model
  trained with a patch size drawn from FLEXI_PATCHES at every step, one at 4 px only; both run at
  every size with the kernel resized by the pseudo-inverse (`flexi_kernel`) and the table resized.
- Token dropping (NaViT, Dehghani et al. 2023): every positions run is measured with a random share
  of its patch tokens kept (`forward_kept`); one RoPE arm is trained keeping half of them.
- Registers (Darcet et al. 2024): the learned-table model with 4 register tokens; every run stores
  the patch tokens' norm ratio (largest / median) after each block and the class token's attention
  to the registers (`token_norms`).

`python tools/run_experiments.py --suite resolution` runs seeds 0-4 of every arm into
utils/results/lesson12.json (about 25 minutes on a shared 2-core machine, 17 of them training); the
lesson runs seed 0 of "learned" and of "learned + 4 registers" live and reads the rest.

- `ARMS`: name -> `Arm`; `train_arm(name, seed, data)` -> (model, run); `run_arm` -> the run alone.
- `shipped_runs`, `shipped_values`, `agrees_with_shipped`: the shipped seeds (as utils.norm_order).
- `FAMILIES` and `verdicts(question)`: the lesson's claims, declared before the results, graded by
  utils.rubric on the shipped runs (tests/test_resolution.py re-derives each from the file).
"""

import copy
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from utils.ablations import (
    DIGITS_FIT,
    Experiment,
    ShippedArms,
    Split,
    experiment_data,
)
from utils.embeddings import resize_pos_embed
from utils.patches import patch_resize_matrix
from utils.rope import rope_angles, rope_sin_cos
from utils.rubric import grade_family
from utils.training import predict
from utils.validation import WrongTypeError, check_tensor, check_whole, describe
from utils.vit import VisionTransformer

RESULTS_FILE = Path(__file__).parent / "results" / "lesson12.json"
COMMAND = "python tools/run_experiments.py --suite resolution"
STEPS = 300  # optimiser steps of 128 digits: 36 epochs of 1,078 images
FIT = {"steps": STEPS, **DIGITS_FIT}  # lesson 6's digits recipe (utils.ablations)
PATCH = 2  # 8 x 8 digits -> a 4 x 4 grid
TRAIN_SIZE, TEST_SIZE = 8, 12  # pixels: a 4 x 4 grid in training, a 6 x 6 grid at test
KEEPS = (1.0, 0.75, 0.5, 0.25)  # shares of patch tokens kept
TRAIN_KEEP = 0.5  # the token-dropping arm keeps half of its patch tokens in training
FLEXI_SIZE = 16  # pixels: the digits doubled (nearest)
FLEXI_PATCHES = (2, 4, 8)  # 8 x 8, 4 x 4 and 2 x 2 grids of a 16 x 16 image
FLEXI_BASE = 4  # the patch size the kernel and the 4 x 4 table are stored at
REGISTERS = 4
POSITIONS = {"learned": "learned", "sin-cos": "sincos", "RoPE": "rope2d"}  # arm name -> pos_embed
MEASURE_SEED = 1234  # the generator of the tokens kept at measurement: the same draw for every arm


@dataclass(frozen=True)
class Arm:
    """One arm: an `experiment` (the tiny ViT on the digits) and how it trains: "plain" (fit as it
    is), "flexi" (a FlexiViT drawing its patch size from `patch_sizes` each step) or "drop"
    (keeping TRAIN_KEEP of the patch tokens in training)."""

    experiment: Experiment
    kind: str = "plain"
    patch_sizes: tuple[int, ...] = ()

    def __post_init__(self):
        if not isinstance(self.experiment, Experiment) or self.experiment.model != "vit":
            raise WrongTypeError(
                f"experiment must be a ViT Experiment (utils.ablations), got {describe(self.experiment)}"
            )
        if self.kind not in ("plain", "flexi", "drop"):
            raise ValueError(f"kind must be 'plain', 'flexi' or 'drop', got {self.kind!r}")

    def build(self) -> nn.Module:
        """A fresh, untrained model (seed first: set_seed(seed))."""
        if self.kind == "flexi":
            config = self.experiment.config
            return FlexiViT(
                VisionTransformer(
                    type(config)(**{**_fields(config), "image_size": FLEXI_SIZE, "patch_size": FLEXI_BASE})
                ),
                self.patch_sizes,
            )
        model = self.experiment.build()
        return TokenDrop(model, TRAIN_KEEP) if self.kind == "drop" else model

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return {**self.experiment.as_dict(), "kind": self.kind, "patch_sizes": list(self.patch_sizes)}


def _fields(config) -> dict:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def _digits(**vit) -> Experiment:
    return Experiment("digits", "vit", FIT, vit)


ARMS: dict[str, Arm] = {
    **{name: Arm(_digits(patch_size=PATCH, pos_embed=kind)) for name, kind in POSITIONS.items()},
    "learned + 4 registers": Arm(_digits(patch_size=PATCH, reg_tokens=REGISTERS)),
    "RoPE, trained keeping half": Arm(_digits(patch_size=PATCH, pos_embed="rope2d"), "drop"),
    "FlexiViT": Arm(_digits(patch_size=PATCH), "flexi", FLEXI_PATCHES),
    "4 px patches only": Arm(_digits(patch_size=PATCH), "flexi", (FLEXI_BASE,)),
}


# ---------------------------------------------------------------- images at another size


def upsampled(images: torch.Tensor, size: int = TEST_SIZE) -> torch.Tensor:
    """(B, C, H, W) -> (B, C, size, size): the same content at more pixels (bilinear)."""
    check_tensor(images, "images", "(B, C, H, W)", ndim=4)
    return F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False, antialias=False)


def on_canvas(images: torch.Tensor, size: int = TEST_SIZE) -> torch.Tensor:
    """(B, C, H, W) -> (B, C, size, size): each image in the middle of a blank (0) canvas."""
    check_tensor(images, "images", "(B, C, H, W)", ndim=4)
    H, W = images.shape[-2:]
    if size < max(H, W) or (size - H) % 2 or (size - W) % 2:
        raise ValueError(f"size must be at least the images' sides {H}x{W}, with an even margin, got {size}")
    top, left = (size - H) // 2, (size - W) // 2
    return F.pad(images, (left, size - W - left, top, size - H - top))


# ---------------------------------------------------------------- forward passes by hand


def _head(model: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """(B, T, D) tokens after the blocks -> (B, classes), as VisionTransformer.forward pools."""
    x = model.norm(x)
    pooled = x[:, 0] if model.config.pool == "cls" else x[:, model.num_prefix_tokens :].mean(dim=1)
    return model.head(model.fc_norm(pooled))


def scaled_rope(model: VisionTransformer, grid: tuple[int, int], scale: float):
    """(sin, cos, prefix) of a RoPE model's grid with every position multiplied by `scale`
    (position interpolation: scale = training grid / new grid keeps the angles in the trained range)."""
    head_dim = model.config.embed_dim // model.config.num_heads
    sin, cos = rope_sin_cos(rope_angles(grid, head_dim) * scale)  # each (N, head_dim)
    return sin, cos, model.num_prefix_tokens


def forward_with_rope(model: VisionTransformer, images: torch.Tensor, rope) -> torch.Tensor:
    """A RoPE model's logits with the given (sin, cos, prefix) instead of its own angles."""
    x = model.norm_pre(model.embed_tokens(model.patch_embed(images)))  # (B, T, D)
    for block in model.blocks:
        x = block(x, rope=rope)
    return _head(model, x)


def forward_tokens(model: VisionTransformer, images: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """Logits from only the patch tokens `kept` ((B, k) or (k,) indices into the N patches, row-major):
    the positions are added (or the RoPE angles chosen) before the others are dropped; the prefix
    tokens always stay."""
    x = model.norm_pre(model.embed_tokens(model.patch_embed(images)))  # (B, T, D)
    B, T, D = x.shape
    prefix = model.num_prefix_tokens
    kept = kept.expand(B, -1) if kept.ndim == 1 else kept  # (B, k)
    k = kept.shape[1]
    patches = x[:, prefix:].gather(1, kept.unsqueeze(-1).expand(B, k, D))  # (B, k, D)
    x = torch.cat([x[:, :prefix], patches], dim=1)  # (B, prefix + k, D)
    rope = None
    if model.config.pos_embed == "rope2d":
        sin, cos, _ = model.rope(model.patch_embed.grid_size, x)  # each (N, head_dim)
        rope = (sin[kept].unsqueeze(1), cos[kept].unsqueeze(1), prefix)  # each (B, 1, k, head_dim)
    for block in model.blocks:
        x = block(x, rope=rope)
    return _head(model, x)


def forward_kept(
    model: VisionTransformer, images: torch.Tensor, keep: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Logits with only a random share `keep` of each image's patch tokens (NaViT's token dropping),
    `generator` drawing which stay (None: torch's global one); see forward_tokens."""
    if not (isinstance(keep, (int, float)) and 0 < keep <= 1):
        raise ValueError(f"keep must be a share of the tokens in (0, 1], got {describe(keep)}")
    N = model.patch_embed.num_patches
    k = max(1, round(keep * N))
    noise = torch.rand(len(images), N, generator=generator)
    kept = noise.argsort(dim=1)[:, :k].sort(dim=1).values  # (B, k): which patches stay, in order
    return forward_tokens(model, images, kept.to(images.device))


def middle_patches(grid: int, inner: int) -> torch.Tensor:
    """The (inner * inner,) row-major indices of the middle inner x inner patches of a grid x grid."""
    start = (grid - inner) // 2
    rows = torch.arange(start, start + inner)
    return (rows.unsqueeze(1) * grid + rows).reshape(-1)


class TokenDrop(nn.Module):
    """A ViT that keeps a random share `keep` of its patch tokens while training, all at eval."""

    def __init__(self, vit: VisionTransformer, keep: float):
        super().__init__()
        self.vit, self.keep = vit, keep

    def no_weight_decay(self) -> set[str]:
        return {f"vit.{name}" for name in self.vit.no_weight_decay()}

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return forward_kept(self.vit, images, self.keep) if self.training else self.vit(images)


def flexi_kernel(weight: torch.Tensor, new_patch_size: int) -> torch.Tensor:
    """utils.patches.resize_patch_embed, differentiable: the (D, C, P, P) kernel times pinv(R^T),
    R the bilinear resize of a patch from P to new_patch_size pixels. Gradients reach `weight`."""
    D, C, P, _ = weight.shape
    Q = check_whole(new_patch_size, "new_patch_size")
    if Q == P:
        return weight
    inverse = torch.linalg.pinv(patch_resize_matrix(P, Q).T).to(weight.dtype)  # (Q*Q, P*P)
    return (weight.reshape(D * C, P * P) @ inverse.T).reshape(D, C, Q, Q)


class FlexiViT(nn.Module):
    """A ViT that runs at any patch size of 16 x 16 images (Beyer et al. 2023): its kernel is stored
    at FLEXI_BASE px and its table at FLEXI_BASE's grid, both resized on the fly. In training each
    step draws a patch size from `patch_sizes`; at eval it uses `patch_size` (set_patch_size).
    8 x 8 digits are doubled to 16 x 16 first (nearest: each pixel becomes 2 x 2)."""

    def __init__(self, vit: VisionTransformer, patch_sizes: tuple[int, ...]):
        super().__init__()
        self.vit, self.patch_sizes = vit, tuple(patch_sizes)
        self.patch_size = vit.config.patch_size

    def no_weight_decay(self) -> set[str]:
        return {f"vit.{name}" for name in self.vit.no_weight_decay()}

    def set_patch_size(self, patch_size: int) -> None:
        if FLEXI_SIZE % check_whole(patch_size, "patch_size"):
            raise ValueError(f"patch_size must divide {FLEXI_SIZE}, got {patch_size}")
        self.patch_size = patch_size

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[-1] != FLEXI_SIZE:
            images = F.interpolate(images, size=(FLEXI_SIZE, FLEXI_SIZE), mode="nearest")
        if self.training and len(self.patch_sizes) > 1:
            P = self.patch_sizes[int(torch.randint(len(self.patch_sizes), ()))]
        else:
            P = self.patch_size
        vit = self.vit
        proj = vit.patch_embed.proj
        x = F.conv2d(images, flexi_kernel(proj.weight, P), proj.bias, stride=P)  # (B, D, H/P, W/P)
        grid = (x.shape[-2], x.shape[-1])
        x = x.flatten(2).transpose(1, 2)  # (B, N, D)
        table = resize_pos_embed(vit.pos_embed, vit.patch_embed.grid_size, grid, vit.table_prefix)
        x = vit.embed_tokens(x, table)
        for block in vit.blocks:
            x = block(x)
        return _head(vit, x)


# ---------------------------------------------------------------- what a run measures


def _accuracy(logits_of, images: torch.Tensor, labels: torch.Tensor, batch: int = 512) -> float:
    with torch.no_grad():
        right = sum(
            (logits_of(images[i : i + batch]).argmax(-1) == labels[i : i + batch]).sum().item()
            for i in range(0, len(images), batch)
        )
    return right / len(images)


def token_norms(model: VisionTransformer, images: torch.Tensor) -> dict:
    """What registers are said to change (Darcet et al. 2024), on these images:

    - "norm_ratio": after each block, the largest patch token's norm over the median one's,
      averaged over the images (a few high-norm "artefact" tokens push it up);
    - "cls_to_registers": the share of the class token's attention, last block, heads averaged,
      that goes to the register tokens (0 without registers).
    """
    model.eval()
    with torch.no_grad():
        x = model.norm_pre(model.embed_tokens(model.patch_embed(images)))
        rope = model.rope(model.patch_embed.grid_size, x)
        prefix, ratios = model.num_prefix_tokens, []
        for block in model.blocks:
            x = block(x, rope=rope)
            norms = x[:, prefix:].norm(dim=-1)  # (B, N)
            ratios.append((norms.max(dim=1).values / norms.median(dim=1).values).mean().item())
        _, attention = model(images, return_attention=True)  # (depth, B, heads, T, T)
        start = 1 if model.cls_token is not None else 0
        share = attention[-1][:, :, 0, start : start + model.config.reg_tokens].sum(-1).mean().item()
    return {"norm_ratio": ratios, "cls_to_registers": share}


def measure(model: nn.Module, data: Split, arm: Arm) -> dict:
    """The measures beyond the training size of one trained model, on validation and test."""
    out = {}
    model.eval()
    for part in ("val", "test"):
        images, labels = getattr(data, part).tensors
        if arm.kind == "flexi":
            for P in FLEXI_PATCHES:
                model.set_patch_size(P)
                out[f"{part}_patch_{P}"] = _accuracy(model, images, labels)
            model.set_patch_size(FLEXI_BASE)
            continue
        vit = model.vit if isinstance(model, TokenDrop) else model
        for keep in KEEPS[1:]:
            generator = torch.Generator().manual_seed(MEASURE_SEED)
            out[f"{part}_keep_{keep:g}"] = _accuracy(
                lambda x, g=generator, k=keep: forward_kept(vit, x, k, g), images, labels
            )
        if arm.kind == "drop" or vit.config.reg_tokens:
            continue
        grid = (TRAIN_SIZE // PATCH, TRAIN_SIZE // PATCH)
        new_grid = (TEST_SIZE // PATCH, TEST_SIZE // PATCH)
        vit = copy.deepcopy(vit)  # resized here, never resized back (a resize there and back is lossy)
        vit.set_image_size(TEST_SIZE)  # a table resized (learned) or rebuilt (sin-cos); RoPE: as is
        if vit.config.pos_embed == "rope2d":
            rope = scaled_rope(vit, new_grid, grid[0] / new_grid[0])
            out[f"{part}_upsampled_scaled"] = _accuracy(
                lambda x: forward_with_rope(vit, x, rope), upsampled(images), labels
            )
        out[f"{part}_upsampled"] = _accuracy(vit, upsampled(images), labels)
        out[f"{part}_canvas"] = _accuracy(vit, on_canvas(images), labels)
        digit = middle_patches(new_grid[0], grid[0])  # the canvas's 16 patches that hold the digit
        out[f"{part}_canvas_digit_only"] = _accuracy(lambda x: forward_tokens(vit, x, digit), on_canvas(images), labels)
    if arm.kind == "plain":
        out.update(token_norms(model, data.val.tensors[0]))
    return out


def train_arm(name: str, seed: int, data: Split | None = None) -> tuple[nn.Module, dict]:
    """Train seed `seed` of arm `name`: the trained model (eval mode) and run_arm's dict."""
    data = experiment_data("digits") if data is None else data
    model, record = SHIPPED.train(name, seed, data)  # fit, evaluated, run_record's dict
    answers = predict(model, data.val.tensors[0])  # (images,): the digit the model says for each
    record["same_answer"] = answers.bincount().max().item() / len(answers)
    record.update(measure(model, data, SHIPPED.arm(name)))
    return model.eval(), record


SHIPPED = ShippedArms(ARMS, RESULTS_FILE, COMMAND)  # the arms' shipped seeds (utils.ablations)
shipped_runs, shipped_values, agrees_with_shipped = SHIPPED.runs, SHIPPED.values, SHIPPED.agrees


def run_arm(name: str, seed: int, data: Split | None = None) -> dict:
    """Train seed `seed` of arm `name`: run_record's dict (seed, val_accuracy, test_accuracy, steps,
    seconds, ...) plus measure's keys: accuracies at 12 x 12 ("val_upsampled", "val_canvas",
    "val_upsampled_scaled", "val_canvas_digit_only"), with tokens dropped ("val_keep_0.5", ...), at
    other patch sizes ("val_patch_2", ...), and the token norms ("norm_ratio", "cls_to_registers")."""
    return train_arm(name, seed, data)[1]


# ---------------------------------------------------------------- the lesson's verdicts

EFFECT = 0.02  # 2 points of validation accuracy: the smallest difference the lesson cares about
# {question: {label: (arm A, key A, arm B, key B, claim, effect)}}, declared before the results
FAMILIES = {
    "positions": {
        "RoPE = learned at 8 x 8": ("RoPE", "val_accuracy", "learned", "val_accuracy", "equal", EFFECT),
        "RoPE = sin-cos at 8 x 8": ("RoPE", "val_accuracy", "sin-cos", "val_accuracy", "equal", EFFECT),
    },
    "canvas": {
        "RoPE > learned, 12 x 12 canvas": ("RoPE", "val_canvas", "learned", "val_canvas", "higher", EFFECT),
        "RoPE > sin-cos, 12 x 12 canvas": ("RoPE", "val_canvas", "sin-cos", "val_canvas", "higher", EFFECT),
    },
    "upsampled": {
        "learned > RoPE, upsampled": ("learned", "val_upsampled", "RoPE", "val_upsampled", "higher", EFFECT),
        "scaled RoPE > RoPE, upsampled": (
            "RoPE",
            "val_upsampled_scaled",
            "RoPE",
            "val_upsampled",
            "higher",
            EFFECT,
        ),
    },
    "flexi": {
        f"FlexiViT > 4 px only, at {P} px": (
            "FlexiViT",
            f"val_patch_{P}",
            "4 px patches only",
            f"val_patch_{P}",
            "higher",
            EFFECT,
        )
        for P in (2, 8)
    }
    | {
        "FlexiViT = 4 px only, at 4 px": (
            "FlexiViT",
            "val_patch_4",
            "4 px patches only",
            "val_patch_4",
            "equal",
            EFFECT,
        )
    },
    "dropping": {
        "trained keeping half > RoPE, half kept": (
            "RoPE, trained keeping half",
            "val_keep_0.5",
            "RoPE",
            "val_keep_0.5",
            "higher",
            EFFECT,
        ),
    },
    "registers": {
        "registers lower the norm ratio": (
            "learned + 4 registers",
            "last_norm_ratio",
            "learned",
            "last_norm_ratio",
            "lower",
            0.25,
        ),
        "registers = none, accuracy": (
            "learned + 4 registers",
            "val_accuracy",
            "learned",
            "val_accuracy",
            "equal",
            EFFECT,
        ),
    },
}


def _values(name: str, key: str) -> list[float]:
    if key == "last_norm_ratio":
        return [ratios[-1] for ratios in shipped_values(name, "norm_ratio")]
    return shipped_values(name, key)


def verdicts(question: str) -> dict:
    """{label: utils.rubric.Grade} of one question of FAMILIES, from the shipped runs (Holm inside)."""
    if question not in FAMILIES:
        raise ValueError(f"question must be one of {list(FAMILIES)}, got {question!r}")
    comparisons = {}
    for label, (a, key_a, b, key_b, claim, effect) in FAMILIES[question].items():
        percent = key_a != "last_norm_ratio"
        comparisons[label] = dict(
            a=_values(a, key_a),
            b=_values(b, key_b),
            claim=claim,
            effect=effect,
            percent=percent,
            names=(f"{a} ({key_a})", f"{b} ({key_b})"),
        )
    return grade_family(comparisons)


def mean(values) -> float:
    values = list(values)
    return math.fsum(values) / len(values)
