"""What an ImageNet classifier expects and says (lesson 8): its 1,000 class names, its input
normalisation, and its top-k answers.

The class list, `imagenet_classes.tsv`, holds ImageNet-1k's WordNet synset ids in the order every
ImageNet-1k checkpoint uses (sorted ids: index 0 is n01440764, "tench") with their WordNet
lemmas; it was taken from timm 1.0.31's `data/_info` files (Apache-2.0), so nothing is fetched.
"""

from functools import cache
from pathlib import Path

import torch

CLASSES_FILE = Path(__file__).parent / "imagenet_classes.tsv"

# The published ViT-B/16 (google/vit-base-patch16-224) was trained on pixels mapped from [0, 1]
# to [-1, 1]: mean 0.5 and std 0.5 per channel (not the 0.485/0.229... of torchvision's CNNs).
VIT_MEAN = (0.5, 0.5, 0.5)
VIT_STD = (0.5, 0.5, 0.5)


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
    """(B, 3, H, W) pixels in [0, 1] -> (B, 3, H, W) normalised per channel: (x - mean) / std."""
    if images.ndim != 4 or images.shape[1] != len(mean):
        raise ValueError(f"expected images (B, {len(mean)}, H, W) in [0, 1], got {tuple(images.shape)}")
    mean = torch.tensor(mean, dtype=images.dtype).view(1, -1, 1, 1)
    std = torch.tensor(std, dtype=images.dtype).view(1, -1, 1, 1)
    return (images - mean) / std


def top_k(logits: torch.Tensor, classes: list[str], k: int = 5) -> list[list[tuple[str, float]]]:
    """(B, num_classes) logits -> for each image its k most probable (class name, probability)
    pairs, most probable first (softmax over all classes)."""
    if logits.ndim != 2 or logits.shape[1] != len(classes):
        raise ValueError(f"expected logits (B, {len(classes)}), got {tuple(logits.shape)}")
    probabilities, indices = logits.float().softmax(dim=-1).topk(k, dim=-1)  # (B, k) each
    return [
        [(classes[i], p) for i, p in zip(row_indices.tolist(), row_probabilities.tolist())]
        for row_indices, row_probabilities in zip(indices, probabilities)
    ]
