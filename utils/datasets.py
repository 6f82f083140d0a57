"""The course's dataset type: images, their labels and the names of their classes.

Every training set (`utils.data`'s bundled ones, `utils.standard_datasets`' downloaded ones) is an
`ImageDataset`; it lives here so that both can import it without importing each other.
"""

import torch
from torch.utils.data import TensorDataset


class ImageDataset(TensorDataset):
    """A TensorDataset of (image, label) pairs that knows its class names.

    Args:
        images: (N, C, H, W) float32 in [0, 1].
        labels: (N,) int64 class indices.
        classes: the name of each class index.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, classes: list[str]):
        if images.ndim != 4 or labels.shape != (images.shape[0],):
            raise ValueError(
                f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and {tuple(labels.shape)}"
            )
        super().__init__(images, labels)
        self.images, self.labels, self.classes = images, labels, list(classes)

    def __repr__(self) -> str:
        return f"ImageDataset({len(self)} images of {tuple(self.images.shape[1:])}, classes={self.classes})"
