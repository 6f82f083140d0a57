"""The course's dataset type: images, their labels and the names of their classes, and the checks
that every function taking images, labels or datasets uses to refuse bad input clearly (numbers
and sizes: `utils.validation`).

Every training set (`utils.data`'s bundled ones, `utils.standard_datasets`' downloaded ones) is an
`ImageDataset`; it lives here so that both can import it without importing each other.
"""

import math

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from utils.validation import WrongTypeError, describe


def check_float_images(
    images, name: str = "images", dtype: torch.dtype | None = None, allow_empty: bool = False
) -> tuple[float, float] | None:
    """Raise unless `images` is a (N, C, H, W) floating-point tensor of finite values.

    Args:
        dtype: the dtype they must have (e.g. the model's weights'), if it matters.
        allow_empty: accept N = 0.
    Returns:
        the smallest and the largest pixel value (None when there are no images).
    """
    if not isinstance(images, torch.Tensor):
        hint = ": pass its images, dataset.images" if isinstance(images, TensorDataset) else ""
        raise WrongTypeError(f"{name} must be a torch.Tensor (N, C, H, W), got {type(images).__name__}{hint}")
    if images.ndim != 4:
        hint = " (one image? add the batch axis: image.unsqueeze(0))" if images.ndim == 3 else ""
        raise ValueError(f"{name} must be a batch (N, C, H, W), got shape {tuple(images.shape)}{hint}")
    if not images.is_floating_point():
        hint = ".float() / 255" if images.dtype == torch.uint8 else ".float()"
        raise ValueError(f"{name} must be floating point (pixels in [0, 1]), got {images.dtype}: convert with {hint}")
    if dtype is not None and images.dtype != dtype:
        fix = ".float()" if dtype == torch.float32 else f".to({dtype})"
        raise ValueError(f"{name} are {images.dtype} but the model's weights are {dtype}: convert with {fix}")
    if len(images) == 0:
        if allow_empty:
            return None
        raise ValueError(f"{name} is empty (shape {tuple(images.shape)}): there are no images to work on")
    lowest, highest = (value.item() for value in torch.aminmax(images))  # no copy of the images
    if not (math.isfinite(lowest) and math.isfinite(highest)):
        raise ValueError(f"{name} contain NaN or infinite values (from {lowest} to {highest})")
    return lowest, highest


def check_labels(labels, name: str = "labels", num_classes: int | None = None, why: str = "") -> None:
    """Raise unless `labels` is a (N,) int64 tensor of class indices from 0 to num_classes - 1.

    Args:
        num_classes: the number of classes, if known; without it only negative labels are refused.
        why: where num_classes comes from, for the message (e.g. "the model gives 10 outputs").
    """
    if not isinstance(labels, torch.Tensor):
        raise WrongTypeError(f"{name} must be a torch.Tensor (N,) of class indices, got {type(labels).__name__}")
    if labels.ndim != 1:
        raise ValueError(f"{name} must be a (N,) tensor of class indices, got shape {tuple(labels.shape)}")
    if labels.dtype != torch.int64:
        hint = " (class indices, not scores or one-hot rows)" if labels.is_floating_point() else ""
        raise ValueError(f"{name} must be int64 class indices, got {labels.dtype}{hint}: convert with .long()")
    if len(labels) == 0:
        return
    lowest, highest = labels.min().item(), labels.max().item()
    if lowest < 0 or (num_classes is not None and highest >= num_classes):
        classes = f"from 0 to {num_classes - 1}" if num_classes is not None else "from 0 up"
        because = f" ({why})" if why else ""
        raise ValueError(f"{name} must be class indices {classes}{because}, got values from {lowest} to {highest}")


DATASET = "a dataset of images and labels: ImageDataset(images, labels, classes) or TensorDataset(images, labels)"


def check_dataset(
    dataset, name: str = "dataset", dtype: torch.dtype | None = None, allow_empty: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raise unless `dataset` is a TensorDataset (an ImageDataset, say) of images (N, C, H, W) and
    labels (N,); return them.

    Args:
        name: the argument's name, for the message.
        dtype: the dtype the images must have (the model's weights'), if it matters.
        allow_empty: accept N = 0.
    """
    if isinstance(dataset, DataLoader):
        raise WrongTypeError(f"{name} must be {DATASET}, got a DataLoader: pass its dataset (loader.dataset)")
    if isinstance(dataset, tuple | list):
        if dataset and all(isinstance(part, Dataset) for part in dataset):
            hint = f"{len(dataset)} datasets; (train, test)? unpack them first: train, test = load_training_set(...)"
        else:
            hint = f"a {type(dataset).__name__}; images and labels? wrap them: TensorDataset(images, labels)"
        raise WrongTypeError(f"{name} must be {DATASET}, got {hint}")
    if isinstance(dataset, torch.Tensor):
        raise WrongTypeError(
            f"{name} must be {DATASET}, got a tensor: put the labels with it, TensorDataset(images, labels)"
        )
    if not isinstance(dataset, TensorDataset):
        raise WrongTypeError(f"{name} must be {DATASET}, got {type(dataset).__name__}")
    if len(dataset.tensors) != 2:
        raise ValueError(f"{name} must hold two tensors, images and labels, got {len(dataset.tensors)}")
    images, labels = dataset.tensors
    if len(images) == 0 and not allow_empty:
        raise ValueError(f"{name} is empty (0 images): there is nothing to train on or evaluate")
    check_float_images(images, f"{name}'s images", dtype=dtype, allow_empty=allow_empty)
    check_labels(labels, f"{name}'s labels")
    if len(labels) != len(images):
        raise ValueError(f"{name} has {len(images)} images but {len(labels)} labels")
    return images, labels


class ImageDataset(TensorDataset):
    """A TensorDataset of (image, label) pairs that knows its class names.

    Args:
        images: (N, C, H, W) float32 in [0, 1] (to within 0.001, for resampling's rounding).
        labels: (N,) int64 class indices, each below len(classes).
        classes: the name of each class index.
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, classes: list[str]):
        for tensor, what in [(images, "images"), (labels, "labels")]:
            if not isinstance(tensor, torch.Tensor):
                raise WrongTypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
        if images.ndim != 4 or labels.shape != (images.shape[0],):
            raise ValueError(
                f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and {tuple(labels.shape)}"
            )
        if isinstance(classes, str) or not isinstance(classes, list | tuple):
            raise WrongTypeError(f"classes must be a list of class names, e.g. ['cat', 'dog'], got {describe(classes)}")
        lowest, highest = check_float_images(images, allow_empty=True) or (0.0, 1.0)
        if lowest < -1e-3 or highest > 1 + 1e-3:
            hint = " (pixels 0-255? divide by 255)" if highest > 2 else ""
            raise ValueError(f"images must be in [0, 1], got values from {lowest:.4g} to {highest:.4g}{hint}")
        check_labels(labels, num_classes=len(classes), why=f"one per name in classes, {len(classes)} of them")
        super().__init__(images, labels)
        self.images, self.labels, self.classes = images, labels, list(classes)

    def __repr__(self) -> str:
        return f"ImageDataset({len(self)} images of {tuple(self.images.shape[1:])}, classes={self.classes})"
