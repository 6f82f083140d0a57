"""What an ImageNet classifier expects and says (lesson 8): its 1,000 class names, its input
normalisation, and its top-k answers.

The class list, `imagenet_classes.tsv`, holds ImageNet-1k's WordNet synset ids in the order every
ImageNet-1k checkpoint uses (sorted ids: index 0 is n01440764, "tench") with their WordNet
lemmas; it was taken from timm 1.0.31's `data/_info` files (Apache-2.0), so nothing is fetched.
"""

import math
from functools import cache
from pathlib import Path

import torch

from utils.validation import WrongTypeError

CLASSES_FILE = Path(__file__).parent / "imagenet_classes.tsv"

# A checkpoint comes with its own normalisation. The published ViT-B/16 (google/vit-base-patch16-224)
# was trained on pixels mapped from [0, 1] to [-1, 1]: mean 0.5 and std 0.5 per channel.
VIT_MEAN = (0.5, 0.5, 0.5)
VIT_STD = (0.5, 0.5, 0.5)
# ImageNet's per-channel mean and std, which torchvision's models, DeiT (facebook/deit-*) and
# DINOv2 take instead.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@cache
def imagenet_synsets() -> tuple[tuple[str, str], ...]:
    """The 1,000 (synset id, lemmas) pairs, in class-index order, e.g. ("n02123045", "tabby, tabby cat")."""
    pairs = tuple(tuple(line.split("\t", 1)) for line in CLASSES_FILE.read_text().splitlines())
    if len(pairs) != 1000:
        raise ValueError(f"{CLASSES_FILE} should list 1,000 classes, it lists {len(pairs)}")
    return pairs


def imagenet_classes() -> list[str]:
    """The 1,000 class names in class-index order, each the first WordNet lemma ("tabby", "espresso")."""
    return [lemmas.split(", ")[0] for _, lemmas in imagenet_synsets()]


def normalize(images: torch.Tensor, mean=VIT_MEAN, std=VIT_STD) -> torch.Tensor:
    """(B, 3, H, W) pixels in [0, 1] -> (B, 3, H, W) normalised per channel: (x - mean) / std.

    uint8 pixels (0 .. 255, as `torch.from_numpy(np.asarray(photo))` gives them, once permuted to
    channels first) are divided by 255 first and come back float32; float pixels keep their dtype.
    Refused with a ValueError that says what to do: a numpy array (TypeError), channels last,
    another channel count, other integer dtypes, NaN, and float values far outside [0, 1]
    (above 1.5: 0 .. 255 pixels not divided by 255; below -0.5: images normalised already).
    """
    channels = _check_mean_std(mean, std)
    _check_images(images, channels)
    if images.dtype == torch.uint8:
        images = images.float() / 255  # 0 .. 255 -> [0, 1]
    mean = torch.tensor(mean, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    std = torch.tensor(std, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    return (images - mean) / std


def _check_mean_std(mean, std) -> int:
    """The channel count of mean and std, checked: as many of each, every std > 0."""
    mean, std = tuple(mean), tuple(std)
    if len(mean) != len(std) or not mean:
        raise ValueError(f"expected one mean and one std per channel, got {len(mean)} means and {len(std)} stds")
    if not all(value > 0 for value in std):
        raise ValueError(f"every std must be > 0 (it divides), got {std}")
    return len(mean)


def _check_images(images, channels: int) -> None:
    """A ValueError (TypeError for no tensor) unless `images` is (B, channels, H, W) pixels in [0, 1] or uint8."""
    expected = f"expected images (B, {channels}, H, W) in [0, 1]"
    if not isinstance(images, torch.Tensor):
        hint = (
            ": torch.from_numpy(array).permute(2, 0, 1)[None] for one (H, W, 3) photo"
            if hasattr(images, "shape")
            else ""
        )
        raise WrongTypeError(f"{expected} as a torch.Tensor, got a {type(images).__name__}{hint}")
    shape = tuple(images.shape)
    if images.ndim == 3 and shape[-1] == channels and shape[0] != channels:
        raise ValueError(f"{expected}, got {shape}: one image with its channels last; use .permute(2, 0, 1)[None]")
    if images.ndim == 3:
        raise ValueError(f"{expected}, got {shape}: one image without the batch axis; add it with [None]")
    if images.ndim == 4 and shape[-1] == channels and shape[1] != channels:
        raise ValueError(f"{expected}, got {shape}: the channels are last; use .permute(0, 3, 1, 2)")
    if images.ndim == 4 and shape[1] == 1 and channels == 3:
        raise ValueError(f"{expected}, got {shape}: grey images? repeat the channel, .expand(-1, 3, -1, -1)")
    if images.ndim != 4 or shape[1] != channels:
        raise ValueError(f"{expected}, got {shape}")
    if images.dtype == torch.uint8 or images.numel() == 0:
        return
    if not images.is_floating_point():
        raise ValueError(
            f"{expected}, floats or uint8, got {images.dtype}: convert with .float(), and / 255 for 0 .. 255 pixels"
        )
    low, high = images.min().item(), images.max().item()
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"{expected}, got NaN values")
    if high > 1.5:
        raise ValueError(f"{expected}, got values up to {high:g}: 0 .. 255 pixels? divide them by 255 first")
    if low < -0.5:
        raise ValueError(f"{expected}, got values down to {low:g}: normalised already? normalize only once")


def top_k(logits: torch.Tensor, classes: list[str], k: int = 5) -> list[list[tuple[str, float]]]:
    """(B, num_classes) logits -> for each image its k most probable (class name, probability)
    pairs, most probable first (softmax over all classes). 1 <= k <= num_classes."""
    if not isinstance(classes, (list, tuple)):
        raise WrongTypeError(f"expected classes as a list of names, got a {type(classes).__name__}")
    if not isinstance(logits, torch.Tensor):
        raise WrongTypeError(f"expected logits as a torch.Tensor (B, {len(classes)}), got a {type(logits).__name__}")
    if logits.ndim == 1 and logits.shape[0] == len(classes):
        raise ValueError(
            f"expected logits (B, {len(classes)}), got {tuple(logits.shape)}: add the batch axis, logits[None]"
        )
    if logits.ndim != 2 or logits.shape[1] != len(classes):
        raise ValueError(f"expected logits (B, {len(classes)}), got {tuple(logits.shape)}")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= len(classes):
        raise ValueError(f"k must be a whole number from 1 to the {len(classes)} classes, got {k!r}")
    if logits.isnan().any():
        raise ValueError("the logits hold NaN: the model's output is broken (check its input and its weights)")
    probabilities, indices = logits.float().softmax(dim=-1).topk(k, dim=-1)  # (B, k) each
    return [
        [(classes[i], p) for i, p in zip(row_indices.tolist(), row_probabilities.tolist())]
        for row_indices, row_probabilities in zip(indices, probabilities)
    ]
