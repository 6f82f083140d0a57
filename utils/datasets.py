"""The course's dataset type: images, their labels and the names of their classes, and the checks
that every function taking images, labels, datasets or sizes uses to refuse bad input clearly.

Every training set (`utils.data`'s bundled ones, `utils.standard_datasets`' downloaded ones) is an
`ImageDataset`; it lives here so that both can import it without importing each other.
"""

import math
import numbers

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


def check_number(
    name: str,
    value,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    meaning: str = "",
) -> None:
    """Raise unless `value` is a finite number (a whole one with integer=True) between the bounds.

    Args:
        name: the argument's name, as the caller wrote it.
        low, high: the bounds (None: none); low_open / high_open exclude the bound itself.
        meaning: what the number is, in a few words, added to the message.
    Raises:
        TypeError for a value that is not a number (True / False and tensors included),
        ValueError for NaN, infinity or a number out of range.
    """
    kind = "a whole number" if integer else "a number"
    wanted = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, wanted):
        hint = " (use .item() to get the number out of a tensor)" if isinstance(value, torch.Tensor) else ""
        raise TypeError(f"{name} must be {kind}{meaning}, got {value!r} ({type(value).__name__}){hint}")
    in_range = isinstance(value, numbers.Integral) or math.isfinite(value)  # a huge int is finite too
    if low is not None:
        in_range = in_range and (value > low if low_open else value >= low)
    if high is not None:
        in_range = in_range and (value < high if high_open else value <= high)
    if not in_range:
        raise ValueError(
            f"{name} must be {kind}{meaning}, {_range_in_words(low, high, low_open, high_open)}, got {value!r}"
        )


def _range_in_words(low, high, low_open: bool, high_open: bool) -> str:
    """E.g. 'from 0 up to (not including) 1', 'greater than 0', 'at least 1'."""
    if low is not None and high is not None:
        if low_open and high_open:
            return f"between {low} and {high} (neither included)"
        if low_open:
            return f"greater than {low} and at most {high}"
        return f"from {low} up to (not including) {high}" if high_open else f"from {low} to {high}"
    if low is not None:
        return f"greater than {low}" if low_open else f"at least {low}"
    if high is not None:
        return f"less than {high}" if high_open else f"at most {high}"
    return "not NaN or infinite"


def check_images(
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
        raise TypeError(f"{name} must be a torch.Tensor (N, C, H, W), got {type(images).__name__}{hint}")
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
        raise TypeError(f"{name} must be a torch.Tensor (N,) of class indices, got {type(labels).__name__}")
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
        raise TypeError(f"{name} must be {DATASET}, got a DataLoader: pass its dataset (loader.dataset)")
    if isinstance(dataset, tuple | list):
        if dataset and all(isinstance(part, Dataset) for part in dataset):
            hint = f"{len(dataset)} datasets; (train, test)? unpack them first: train, test = load_training_set(...)"
        else:
            hint = f"a {type(dataset).__name__}; images and labels? wrap them: TensorDataset(images, labels)"
        raise TypeError(f"{name} must be {DATASET}, got {hint}")
    if isinstance(dataset, torch.Tensor):
        raise TypeError(
            f"{name} must be {DATASET}, got a tensor: put the labels with it, TensorDataset(images, labels)"
        )
    if not isinstance(dataset, TensorDataset):
        raise TypeError(f"{name} must be {DATASET}, got {type(dataset).__name__}")
    if len(dataset.tensors) != 2:
        raise ValueError(f"{name} must hold two tensors, images and labels, got {len(dataset.tensors)}")
    images, labels = dataset.tensors
    if len(images) == 0 and not allow_empty:
        raise ValueError(f"{name} is empty (0 images): there is nothing to train on or evaluate")
    check_images(images, f"{name}'s images", dtype=dtype, allow_empty=allow_empty)
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
                raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
        if images.ndim != 4 or labels.shape != (images.shape[0],):
            raise ValueError(
                f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and {tuple(labels.shape)}"
            )
        if isinstance(classes, str) or not isinstance(classes, list | tuple):
            raise TypeError(f"classes must be a list of class names, e.g. ['cat', 'dog'], got {classes!r}")
        lowest, highest = check_images(images, allow_empty=True) or (0.0, 1.0)
        if lowest < -1e-3 or highest > 1 + 1e-3:
            hint = " (pixels 0-255? divide by 255)" if highest > 2 else ""
            raise ValueError(f"images must be in [0, 1], got values from {lowest:.4g} to {highest:.4g}{hint}")
        check_labels(labels, num_classes=len(classes), why=f"one per name in classes, {len(classes)} of them")
        super().__init__(images, labels)
        self.images, self.labels, self.classes = images, labels, list(classes)

    def __repr__(self) -> str:
        return f"ImageDataset({len(self)} images of {tuple(self.images.shape[1:])}, classes={self.classes})"
