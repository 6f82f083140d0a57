"""Lesson 13: a tiny masked autoencoder (He et al. 2021, "Masked Autoencoders Are Scalable Vision
Learners") on the digits, and its experiment: does pre-training without labels help when labels
are few?

The MAE hides most patches of an image (random_masking: per-image noise, argsort, keep the first
25 %), runs the course's ViT encoder on the visible patches only (encode_visible: their own
positions added before the rest are dropped), and a light decoder (MAEDecoder) puts a shared mask
token at every hidden place (the inverse shuffle), adds positions and predicts every patch's
pixels; the loss (masked_loss) is the mean squared error on the hidden patches only, optionally
against per-patch normalised pixels (MAE's code calls it norm_pix_loss).

The experiment (`python tools/run_experiments.py --suite mae`, results in utils/results/lesson13.json):
pre-train on all 1,078 training digits without their labels, then use only LABELS_PER_CLASS
labelled digits per class (100 images) for a linear probe or a short fine-tune; compare with the
same model from random init (probe and fine-tune) and with supervised training from scratch on the
same 100 labels for as many steps as pre-training plus fine-tuning ("equal steps"). Every arm's
compute is stored beside its accuracy (training_multiply_adds).

- `random_masking`, `encode_visible`, `masked_loss`, `MAEDecoder`, `MaskedAutoencoder`, `pretrain`,
  `reconstruction_loss`, `pretraining_multiply_adds`, `block_masking` (exercise 3's reference).
- `ARMS`: name -> `Arm`; `run_arm(name, seed, data)`; `shipped_runs`, `shipped_values`,
  `agrees_with_shipped`, `best_lr(kind)`, `best_arm(kind)`, `results_table`; `CLAIMS` and
  `verdicts()`, the rubric's grades the lesson prints (tests/test_mae.py re-derives them).
- `CHECKPOINT` (utils/checkpoints/mae/digits.pt, about 600 KB): seed 0's pre-trained MAE, made by
  `python -m utils.mae` (save_checkpoint: the suite's seed-0 pre-training); `load_mae()`.
"""

import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from utils.ablations import (
    DIGITS_FIT,
    Experiment,
    ShippedArms,
    Split,
    check_split,
    experiment_data,
)
from utils.compute import multiply_adds
from utils.datasets import ImageDataset, check_float_images
from utils.embeddings import sincos_pos_embed_2d
from utils.encoder import EncoderBlock
from utils.experiments import MAX_SEED, run_record, spread
from utils.patches import patchify
from utils.rubric import grade_family
from utils.runtime import set_seed, torch_threads
from utils.tables import Table
from utils.training import evaluate, fit, random_shift, warmup_cosine
from utils.validation import WrongTypeError, check_flag, check_number, check_tensor, check_whole, describe
from utils.vit import VisionTransformer

RESULTS_FILE = Path(__file__).parent / "results" / "lesson13.json"
# seed 0's pre-trained MAE (python -m utils.mae)
CHECKPOINT = Path(__file__).parent / "checkpoints" / "mae" / "digits.pt"
COMMAND = "python tools/run_experiments.py --suite mae"
MASK_RATIO = 0.75  # the paper's: 75 % of the patches hidden
# The encoder: the tiny ViT on the digits with 2 px patches (a 4 x 4 grid of 16 patches, so that
# 75 % masking leaves 4 visible), mean pooling (no class token) and the fixed sin-cos table (MAE's).
ENCODER = {"patch_size": 2, "pool": "mean", "pos_embed": "sincos"}
DECODER = dict(dim=32, depth=1, num_heads=2, mlp_ratio=2.0)  # light: half as wide, one block
PRETRAIN_STEPS = 1500  # batches of 128 unlabelled digits: 178 epochs of 1,078 images
# set by exploratory runs (not shipped) on the validation images' reconstruction loss: at 600 steps
# no lr from 3e-4 to 1e-2 got clearly below the loss of predicting each place's mean pixels
PRETRAIN_LR = 1e-3
LABELS_PER_CLASS = 10  # the labelled digits: 10 of each class, 100 images
TUNE_STEPS = 300  # optimiser steps on the 100 labelled digits (one batch holds them all)
LRS = (1e-3, 3e-3)  # fine-tuning and supervised learning rates, chosen on validation
PROBE_LRS = (1e-2, 3e-2)  # the linear probe's learning rates, chosen on validation
FIT = {key: value for key, value in DIGITS_FIT.items() if key != "lr"}  # the rest of lesson 6's digits recipe
KINDS = (
    "MAE, linear probe",
    "random init, linear probe",
    "MAE, fine-tune",
    "random init, fine-tune",
    "supervised, equal steps",
)


# ---- masking ---------------------------------------------------------------------------------


def random_masking(
    batch: int, num_patches: int, mask_ratio: float = MASK_RATIO, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which patches each image keeps, as in MAE: one uniform noise per patch, argsort (a random
    shuffle per image), keep the first int(N * (1 - mask_ratio)).

    Returns:
        keep (B, n_keep): the indices of the visible patches, in shuffled order;
        restore (B, N): the inverse shuffle, so that gathering [visible, hidden] tokens by it puts
            every token back at its patch's place;
        mask (B, N): 1.0 where the patch is hidden, 0.0 where it is visible (the paper's convention).
    """
    batch = check_whole(batch, "batch")
    num_patches = check_whole(num_patches, "num_patches")
    ratio = check_number(mask_ratio, "mask_ratio", low=0, high=1, high_open=True)
    n_keep = int(num_patches * (1 - ratio))
    if n_keep < 1:
        raise ValueError(f"mask_ratio={mask_ratio} leaves no patch of {num_patches} visible; keep at least one")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise WrongTypeError(f"generator must be a torch.Generator or None, got {describe(generator)}")
    noise = torch.rand(batch, num_patches, generator=generator)  # (B, N) in [0, 1)
    shuffle = noise.argsort(dim=1)  # (B, N): patch indices, the low-noise ones first
    restore = shuffle.argsort(dim=1)  # (B, N): where each patch went in the shuffle
    keep = shuffle[:, :n_keep]  # (B, n_keep)
    mask = torch.ones(batch, num_patches)
    mask[:, :n_keep] = 0  # (B, N) in shuffled order: the first n_keep visible
    mask = mask.gather(1, restore)  # (B, N) in patch order
    return keep, restore, mask


def block_masking(rows: int, cols: int, top: int, left: int, size: int) -> torch.Tensor:
    """(rows * cols,) a mask (1.0 hidden) hiding one size x size square of patches at (top, left)
    (the reference of lesson 13's block-mask exercise)."""
    rows, cols, size = check_whole(rows, "rows"), check_whole(cols, "cols"), check_whole(size, "size")
    top = check_whole(top, "top", minimum=0, maximum=rows - size)
    left = check_whole(left, "left", minimum=0, maximum=cols - size)
    grid = torch.zeros(rows, cols)
    grid[top : top + size, left : left + size] = 1.0
    return grid.flatten()  # (N,), row-major like patchify


def gather_tokens(tokens: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """(B, N, D) tokens, (B, K) indices -> (B, K, D): tokens[b, index[b, k]] for each b, k."""
    check_tensor(tokens, "tokens", "(B, N, D)", ndim=3)
    check_tensor(index, "index", "(B, K)", ndim=2)
    if index.shape[0] != tokens.shape[0]:
        raise ValueError(f"index must have one row per image ({tokens.shape[0]}), got {tuple(index.shape)}")
    return tokens.gather(1, index.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))  # (B, K, D)


def encode_visible(encoder: VisionTransformer, images: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The MAE encoder: embed every patch and add its position, keep the visible ones (`keep`,
    (B, n_keep)), run the blocks and the final norm on those only -> (B, n_keep, D)."""
    if not isinstance(encoder, VisionTransformer):
        raise WrongTypeError(f"encoder must be a VisionTransformer, got {describe(encoder)}")
    if encoder.num_prefix_tokens or encoder.config.pos_embed == "rope2d":
        raise ValueError("encode_visible takes a ViT without class or register tokens and with a position table")
    x = encoder.patch_embed(images)  # (B, N, D)
    x = encoder.embed_tokens(x)  # (B, N, D): positions added while every token is at its place
    x = gather_tokens(x, keep)  # (B, n_keep, D): the visible ones
    for block in encoder.blocks:
        x = block(x)  # (B, n_keep, D)
    return encoder.norm(x)  # (B, n_keep, D)


def masked_loss(
    prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, norm_pix: bool = False
) -> torch.Tensor:
    """MAE's loss: the mean squared error per patch, averaged over the hidden patches only.

    Args:
        prediction, target: (B, N, C*P*P) pixels of every patch (target: patchify(images, P)).
        mask: (B, N), 1.0 where hidden.
        norm_pix: compare with each target patch normalised to mean 0, variance 1 (eps 1e-6).
    """
    check_tensor(prediction, "prediction", "(B, N, C*P*P)", ndim=3)
    if target.shape != prediction.shape or mask.shape != prediction.shape[:2]:
        raise ValueError(
            f"expected target {tuple(prediction.shape)} and mask {tuple(prediction.shape[:2])}, "
            f"got {tuple(target.shape)} and {tuple(mask.shape)}"
        )
    if check_flag(norm_pix, "norm_pix"):
        mean = target.mean(dim=-1, keepdim=True)  # (B, N, 1)
        var = target.var(dim=-1, keepdim=True)  # (B, N, 1), unbiased as in MAE's code
        target = (target - mean) / (var + 1e-6) ** 0.5
    per_patch = ((prediction - target) ** 2).mean(dim=-1)  # (B, N)
    return (per_patch * mask).sum() / mask.sum()


# ---- the model -------------------------------------------------------------------------------


class MAEDecoder(nn.Module):
    """MAE's light decoder: project the visible tokens to its width, put the mask token at every
    hidden place (the inverse shuffle), add its own fixed sin-cos positions, run its blocks and
    predict every patch's pixels.

    Args:
        encoder_dim: the encoder's width D; grid_size: (rows, cols) of patches; patch_pixels: C*P*P.
        dim, depth, num_heads, mlp_ratio: the decoder's own shape (DECODER).
    """

    def __init__(
        self,
        encoder_dim: int,
        grid_size: tuple[int, int],
        patch_pixels: int,
        dim=32,
        depth=1,
        num_heads=2,
        mlp_ratio=2.0,
    ):
        super().__init__()
        self.embed = nn.Linear(encoder_dim, dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.register_buffer("pos_embed", sincos_pos_embed_2d(grid_size, dim, cls_token=False))  # (1, N, dim)
        self.blocks = nn.ModuleList(EncoderBlock(dim, num_heads, mlp_ratio) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pred = nn.Linear(dim, patch_pixels)
        nn.init.normal_(self.mask_token, std=0.02)  # as MAE
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02, a=-0.04, b=0.04)
                nn.init.zeros_(module.bias)

    def forward(self, latent: torch.Tensor, restore: torch.Tensor) -> torch.Tensor:
        """(B, n_keep, D) encoded visible tokens, (B, N) inverse shuffle -> (B, N, C*P*P) pixels."""
        x = self.embed(latent)  # (B, n_keep, dim)
        B, n_keep, dim = x.shape
        hidden = self.mask_token.expand(B, restore.shape[1] - n_keep, dim)  # (B, N - n_keep, dim)
        x = torch.cat([x, hidden], dim=1)  # (B, N, dim) in shuffled order
        x = gather_tokens(x, restore)  # (B, N, dim) back in patch order
        x = x + self.pos_embed  # (B, N, dim)
        for block in self.blocks:
            x = block(x)
        return self.pred(self.norm(x))  # (B, N, C*P*P)


class MaskedAutoencoder(nn.Module):
    """The course's ViT as MAE's encoder (`encoder`, its head unused while pre-training) and a
    MAEDecoder. forward(images) -> (loss, prediction (B, N, C*P*P), mask (B, N))."""

    def __init__(self, encoder: VisionTransformer, mask_ratio: float = MASK_RATIO, norm_pix: bool = False, **decoder):
        super().__init__()
        if not isinstance(encoder, VisionTransformer):
            raise WrongTypeError(f"encoder must be a VisionTransformer, got {describe(encoder)}")
        config = encoder.config
        self.encoder = encoder
        self.patch_size = config.patch_size
        self.mask_ratio = check_number(mask_ratio, "mask_ratio", low=0, high=1, high_open=True)
        self.norm_pix = check_flag(norm_pix, "norm_pix")
        pixels = config.in_channels * config.patch_size**2
        self.decoder = MAEDecoder(config.embed_dim, encoder.patch_embed.grid_size, pixels, **{**DECODER, **decoder})

    def forward(self, images: torch.Tensor, generator: torch.Generator | None = None, mask_ratio: float | None = None):
        check_float_images(images)
        ratio = self.mask_ratio if mask_ratio is None else mask_ratio
        target = patchify(images, self.patch_size)  # (B, N, C*P*P)
        keep, restore, mask = random_masking(len(images), target.shape[1], ratio, generator)
        latent = encode_visible(self.encoder, images, keep)  # (B, n_keep, D)
        prediction = self.decoder(latent, restore)  # (B, N, C*P*P)
        return masked_loss(prediction, target, mask, self.norm_pix), prediction, mask


class _FixedMaskForward(nn.Module):
    """One MAE forward pass with the first 25 % of the patches visible and no random numbers drawn:
    what multiply_adds counts for a pre-training step."""

    def __init__(self, mae: MaskedAutoencoder):
        super().__init__()
        self.mae = mae

    def forward(self, images):
        N = self.mae.encoder.patch_embed.num_patches
        n_keep = int(N * (1 - self.mae.mask_ratio))
        keep = torch.arange(n_keep).expand(len(images), -1)  # (B, n_keep)
        restore = torch.arange(N).expand(len(images), -1)  # (B, N)
        return self.mae.decoder(encode_visible(self.mae.encoder, images, keep), restore)


def pretraining_multiply_adds(mae: MaskedAutoencoder, image_shape: tuple[int, ...]) -> dict:
    """Multiply-adds of one pre-training forward pass on one image: {"encoder": on the visible
    tokens only, "decoder": on all of them, "total"}."""
    total = multiply_adds(_FixedMaskForward(mae), image_shape)
    N = mae.encoder.patch_embed.num_patches
    n_keep = int(N * (1 - mae.mask_ratio))
    restore = torch.arange(N).expand(1, -1)

    class _Decoder(nn.Module):
        def __init__(self, decoder):
            super().__init__()
            self.decoder = decoder

        def forward(self, latent):
            return self.decoder(latent, restore)

    decoder = multiply_adds(_Decoder(mae.decoder), (n_keep, mae.encoder.config.embed_dim))
    return {"encoder": total - decoder, "decoder": decoder, "total": total}


def pretrain(
    mae: MaskedAutoencoder,
    images: torch.Tensor,
    steps: int = PRETRAIN_STEPS,
    lr: float = PRETRAIN_LR,
    batch_size: int = 128,
    seed: int = 0,
    warmup: float = 0.1,
    weight_decay: float = 0.05,
    max_shift: int = 0,
    threads: int | None = 1,
) -> list[float]:
    """Train `mae` on unlabelled `images` (N, C, H, W) for `steps` batches: AdamW (betas 0.9, 0.95
    as MAE), warm-up then cosine, optional random shifts (off by default, as the suite runs);
    returns the loss of every step."""
    check_float_images(images)
    steps = check_whole(steps, "steps")
    check_number(lr, "lr", low=0, low_open=True)
    batch_size = check_whole(batch_size, "batch_size")
    generator = torch.Generator().manual_seed(check_whole(seed, "seed", minimum=0, maximum=MAX_SEED))
    decay = [p for n, p in mae.named_parameters() if p.ndim > 1 and "token" not in n]
    rest = [p for n, p in mae.named_parameters() if not (p.ndim > 1 and "token" not in n)]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    losses = []
    mae.train()
    with torch_threads(threads):
        while len(losses) < steps:
            order = torch.randperm(len(images), generator=generator)
            for start in range(0, len(images), batch_size):
                if len(losses) == steps:
                    break
                factor = warmup_cosine(len(losses) / steps, warmup)
                for group in optimizer.param_groups:
                    group["lr"] = lr * factor
                batch = random_shift(images[order[start : start + batch_size]], max_shift, generator)
                loss, _, _ = mae(batch, generator)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
    mae.eval()
    return losses


@torch.no_grad()
def reconstruction_loss(mae: MaskedAutoencoder, images: torch.Tensor, seed: int = 0, threads: int | None = 1) -> float:
    """The masked loss on `images` (eval mode), with masks drawn from `seed`: a validation number."""
    generator = torch.Generator().manual_seed(seed)
    with torch_threads(threads):
        was = mae.training
        mae.eval()
        loss, _, _ = mae(images, generator)
        mae.train(was)
    return loss.item()


# ---- the experiment --------------------------------------------------------------------------


def few_labels(train: ImageDataset, per_class: int = LABELS_PER_CLASS) -> ImageDataset:
    """The first `per_class` images of each class in `train` (the labelled few; the same for every
    arm and seed: the split is part of the data, not of the seed)."""
    per_class = check_whole(per_class, "per_class")
    labels = train.tensors[1]
    index = torch.cat([torch.nonzero(labels == c).flatten()[:per_class] for c in range(len(train.classes))])
    index = index.sort().values
    subset = ImageDataset(train.tensors[0][index], labels[index], train.classes)
    return subset


@dataclass(frozen=True)
class Arm:
    """One arm: `experiment` is the labelled training (fit's options: steps, lr, ...) of the digits'
    encoder; `pretrain_steps` MAE steps come first (0: random init); `probe`: train the head only."""

    experiment: Experiment
    pretrain_steps: int
    probe: bool

    def __post_init__(self):
        if not isinstance(self.experiment, Experiment) or self.experiment.model != "vit":
            raise WrongTypeError(
                f"experiment must be a ViT Experiment (utils.ablations), got {describe(self.experiment)}"
            )
        check_whole(self.pretrain_steps, "pretrain_steps", minimum=0)
        check_flag(self.probe, "probe")

    def build(self) -> tuple[VisionTransformer, MaskedAutoencoder]:
        """A fresh encoder and the MAE around it (seed first: the encoder is drawn first, so every
        arm of one seed starts from the same encoder)."""
        encoder = self.experiment.build()
        return encoder, MaskedAutoencoder(encoder)

    def as_dict(self) -> dict:
        recipe = {**self.experiment.as_dict(), "pretrain_steps": self.pretrain_steps, "probe": self.probe}
        if self.probe:
            recipe["probe_head"] = "BatchNorm1d(affine=False), Linear"
        if self.pretrain_steps:
            recipe["pretrain"] = {"lr": PRETRAIN_LR, "mask_ratio": MASK_RATIO, "decoder": DECODER}
        recipe["labels_per_class"] = LABELS_PER_CLASS
        return recipe


def arm_name(kind: str, lr: float) -> str:
    """e.g. arm_name("MAE, fine-tune", 1e-3) -> "MAE, fine-tune, lr 0.001"."""
    return f"{kind}, lr {lr:g}"


def _arm(kind: str, lr: float) -> Arm:
    steps = TUNE_STEPS + PRETRAIN_STEPS if kind == "supervised, equal steps" else TUNE_STEPS
    fit_options = {"steps": steps, "lr": lr, "batch_size": 128, **FIT}
    return Arm(
        Experiment("digits", "vit", fit_options, ENCODER),
        PRETRAIN_STEPS if kind.startswith("MAE") else 0,
        "probe" in kind,
    )


ARMS: dict[str, Arm] = {
    arm_name(kind, lr): _arm(kind, lr) for kind in KINDS for lr in (PROBE_LRS if "probe" in kind else LRS)
}


_PRETRAINED: dict[int, tuple[dict, float, float]] = {}  # seed -> (encoder weights, loss, seconds), per process


def probe_head(dim: int, num_classes: int) -> nn.Sequential:
    """MAE's linear-probe head: a BatchNorm without affine parameters (it only standardises each
    feature), then a Linear layer."""
    return nn.Sequential(nn.BatchNorm1d(dim, affine=False, eps=1e-6), nn.Linear(dim, num_classes))


def pretrained_encoder(
    arm: Arm, seed: int, data: Split, pretrained: dict | None = None
) -> tuple[VisionTransformer, MaskedAutoencoder, float, float]:
    """set_seed(seed), build the arm's encoder and MAE, and pre-train it (PRETRAIN_STEPS on every
    training image, no labels) when the arm asks: (encoder, mae, validation reconstruction loss or
    None, seconds). The pre-trained weights of a seed are kept for this process's other MAE arms
    (the same computation: their runs are the same either way). `pretrained`: the MAE's weights
    to load instead of pre-training (load_checkpoint()["state_dict"], seed 0's)."""
    set_seed(seed)
    encoder, mae = arm.build()
    if not arm.pretrain_steps:
        return encoder, mae, None, 0.0
    if pretrained is not None:
        mae.load_state_dict(pretrained)
        mae.eval()
        return encoder, mae, reconstruction_loss(mae, data.val.tensors[0]), 0.0
    if seed not in _PRETRAINED:
        start = time.perf_counter()
        pretrain(mae, data.train.tensors[0], arm.pretrain_steps, PRETRAIN_LR, seed=seed)
        loss = reconstruction_loss(mae, data.val.tensors[0])
        _PRETRAINED[seed] = ({k: v.clone() for k, v in mae.state_dict().items()}, loss, time.perf_counter() - start)
    weights, loss, seconds = _PRETRAINED[seed]
    mae.load_state_dict(weights)
    mae.eval()
    return encoder, mae, loss, seconds


SHIPPED = ShippedArms(ARMS, RESULTS_FILE, COMMAND)  # the arms' shipped seeds (utils.ablations)
shipped_runs, shipped_values, agrees_with_shipped = SHIPPED.runs, SHIPPED.values, SHIPPED.agrees


def run_arm(name: str, seed: int, data: Split | None = None, pretrained: dict | None = None) -> dict:
    """Train seed `seed` of arm `name` and measure it: run_record's dict (val_accuracy on all
    validation digits, test_accuracy, ...) plus "pretrain_steps", "pretrain_loss" (the validation
    digits' masked reconstruction loss after pre-training; None without), "labelled_images",
    "training_multiply_adds" (forward-pass multiply-adds of all training: pre-training images x
    steps at MAE's cost, with the encoder on the visible 25 %; labelled images x steps at the
    full encoder's; a backward pass costs about twice more where weights train),
    "pretrain_multiply_adds" (that pre-training share) and "pretrain_seconds" (the time of the
    seed's pre-training, shared by the MAE arms of one seed). `pretrained`: MAE weights to start
    from instead of pre-training (the lesson passes the shipped checkpoint, seed 0's)."""
    arm = SHIPPED.arm(name)
    seed = check_whole(seed, "seed", minimum=0, maximum=MAX_SEED)
    data = experiment_data("digits") if data is None else check_split(data, "digits", name, "trains on")
    labelled = few_labels(data.train)
    encoder, mae, pretrain_loss, pretrain_seconds = pretrained_encoder(arm, seed, data, pretrained)
    shape = tuple(data.train.tensors[0].shape[1:])
    pretrain_cost = pretraining_multiply_adds(mae, shape)["total"] * 128 * arm.pretrain_steps
    if arm.probe:
        encoder.requires_grad_(False)
        encoder.head = probe_head(encoder.config.embed_dim, encoder.config.num_classes)
    options = dict(arm.experiment.fit)
    history = fit(encoder, labelled, None, seed=seed, progress=False, **options)
    _, val_accuracy = evaluate(encoder, data.val)
    _, test_accuracy = evaluate(encoder, data.test)
    record = run_record(encoder, history, test_accuracy, seed, shape)
    tune_images = min(options["batch_size"], len(labelled)) * history.step[-1]
    record.update(
        val_accuracy=val_accuracy,
        seconds=record["seconds"] + pretrain_seconds,
        pretrain_seconds=pretrain_seconds,
        pretrain_steps=arm.pretrain_steps,
        pretrain_loss=pretrain_loss,
        labelled_images=len(labelled),
        pretrain_multiply_adds=pretrain_cost,
        training_multiply_adds=pretrain_cost + record["multiply_adds"] * tune_images,
    )
    return record


def best_lr(kind: str) -> float:
    """The learning rate whose shipped runs of `kind` have the highest mean validation accuracy."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    lrs = PROBE_LRS if "probe" in kind else LRS
    return max(lrs, key=lambda lr: sum(shipped_values(arm_name(kind, lr))) / len(shipped_values(arm_name(kind, lr))))


def best_arm(kind: str) -> str:
    """The name of `kind`'s arm at its best_lr."""
    return arm_name(kind, best_lr(kind))


# The claims, and the smallest effects that would matter, declared before the results were read:
# label -> (arm kind A, arm kind B, claim, effect as a fraction of the test images).
CLAIMS = {
    "MAE's features beat random ones (linear probe)": (
        "MAE, linear probe",
        "random init, linear probe",
        "higher",
        0.05,
    ),
    "MAE then fine-tuning beats the same model from random init": (
        "MAE, fine-tune",
        "random init, fine-tune",
        "higher",
        0.02,
    ),
    "MAE then fine-tuning beats supervised training at equal steps": (
        "MAE, fine-tune",
        "supervised, equal steps",
        "higher",
        0.02,
    ),
}


def verdicts(key: str = "test_accuracy") -> dict:
    """The rubric's grades of CLAIMS (utils.rubric.grade_family: Holm over the three), each arm at
    its learning rate chosen on validation (best_lr), on the shipped seeds' `key`."""
    comparisons = {}
    for label, (a, b, claim, effect) in CLAIMS.items():
        comparisons[label] = dict(
            a=shipped_values(best_arm(a), key),
            b=shipped_values(best_arm(b), key),
            claim=claim,
            effect=effect,
            names=(a, b),
            percent=True,
        )
    return grade_family(comparisons)


def results_table(live: dict | None = None, key: str = "test_accuracy") -> Table:
    """One row per kind of arm at its chosen learning rate: seed 0 here (from `live`, kind -> run),
    the shipped seeds' spread of `key`, the labelled images, and the training compute: images
    through the encoder (pre-training's at a quarter of the tokens) and forward multiply-adds. A
    utils.tables.Table: text, and HTML in Jupyter."""
    live = live or {}
    what = {"val_accuracy": "validation", "test_accuracy": "test"}.get(key, key)
    header = ["", "lr", "here", f"{what} accuracy, seeds 0-4", "labels", "pre-train imgs", "labelled imgs"]
    rows = []
    for kind in KINDS:
        name = best_arm(kind)
        runs = shipped_runs(name)
        values = [run[key] for run in runs]
        shown = spread(values, percent=True)
        summary = f"{shown.mean:.1%} ± {100 * shown.std:.1f} ({min(values):.1%}-{max(values):.1%})"
        here = f"{live[kind][key]:.1%}" if kind in live else "-"
        first = runs[0]
        pre_images = 128 * first["pretrain_steps"]
        tuned = first["labelled_images"] * first["steps"]
        lr = f"{ARMS[name].experiment.fit['lr']:g}"
        cost = f"{first['training_multiply_adds'] / 1e9:.0f} G"
        rows.append([kind, lr, here, summary, first["labelled_images"], f"{pre_images:,}", f"{tuned:,}", cost])
    return Table([*header, "mult-adds"], rows, align="lrrlrrrr")


def build_mae() -> tuple[VisionTransformer, MaskedAutoencoder]:
    """A fresh encoder and the MAE around it, as every arm builds them (seed first: set_seed)."""
    return ARMS[arm_name("MAE, fine-tune", LRS[0])].build()


def load_checkpoint(path: str | Path = CHECKPOINT) -> dict:
    """The shipped pre-trained MAE: {"state_dict", "pretrain_loss", "steps", "seed", "made_by"}."""
    return torch.load(Path(path), map_location="cpu", weights_only=True)


def load_mae(path: str | Path = CHECKPOINT) -> MaskedAutoencoder:
    """The shipped MAE (seed 0, PRETRAIN_STEPS), in eval mode."""
    mae = build_mae()[1]
    mae.load_state_dict(load_checkpoint(path)["state_dict"])
    return mae.eval()


def save_checkpoint(path: str | Path = CHECKPOINT) -> dict:
    """Pre-train seed 0 exactly as the suite does and save the MAE (about 600 KB)."""
    data = experiment_data("digits")
    arm = ARMS[arm_name("MAE, fine-tune", LRS[0])]
    _, mae, loss, _ = pretrained_encoder(arm, 0, data)
    checkpoint = {
        "state_dict": mae.state_dict(),
        "pretrain_loss": loss,
        "steps": PRETRAIN_STEPS,
        "seed": 0,
        "made_by": "python -m utils.mae (utils.mae.save_checkpoint: seed 0 of the suite's pre-training)",
    }
    torch.save(checkpoint, Path(path))
    return checkpoint


if __name__ == "__main__":
    saved = save_checkpoint()
    print(f"saved {CHECKPOINT}: validation reconstruction loss {saved['pretrain_loss']:.4f}")
