"""The course's dataset type: images, their labels and the names of their classes, and the checks
that every function taking images, labels or datasets uses to refuse bad input clearly (numbers
and sizes: `utils.validation`).

Every training set (`utils.data`'s bundled ones, `utils.standard_datasets`' downloaded ones) is an
`ImageDataset`; it lives here so that both can import it without importing each other. So do the
operations on one: `ImageDataset.subset` and `split_validation`.
"""

import math

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from utils.validation import WrongTypeError, check_number, check_whole, describe


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
    if images.numel() == 0:
        raise ValueError(f"{name} have no pixels (shape {tuple(images.shape)}): each image needs a channel and a pixel")
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

    def subset(self, index) -> "ImageDataset":
        """The images at `index`, with their labels, the class names and every extra per-image
        attribute (a tensor, array or list with one entry per image, such as the relational set's
        `object_masks`) picked at the same positions; other attributes are shared as they are.

        Args:
            index: (M,) positions from 0 to N - 1 (a tensor, list or range), or a (N,) bool mask.
        """
        index = check_index(index, len(self))
        picked = ImageDataset(self.images[index], self.labels[index], self.classes)
        for name, value in vars(self).items():
            if name not in ("tensors", "images", "labels", "classes"):
                setattr(picked, name, _pick_per_image(value, index, len(self)))
        return picked


def check_index(index, size: int, name: str = "index") -> torch.Tensor:
    """`index` as a (M,) int64 tensor of positions from 0 to size - 1; a (size,) bool mask gives the
    positions where it is True. Lists, tuples, ranges and NumPy arrays are converted."""
    expected = (
        f"{name} must be positions from 0 to {size - 1} (a tensor, list or range of whole numbers) or a bool mask"
    )
    if isinstance(index, list | tuple | range | np.ndarray):
        try:
            index = torch.as_tensor(index)
        except (TypeError, ValueError, RuntimeError):
            raise WrongTypeError(f"{expected}, got {describe(index)}") from None
    if not isinstance(index, torch.Tensor):
        raise WrongTypeError(f"{expected}, got {describe(index)}")
    if index.dtype == torch.bool:
        if index.shape != (size,):
            raise ValueError(
                f"a bool mask as {name} needs one entry per image, shape ({size},), got {tuple(index.shape)}"
            )
        return index.nonzero().flatten().cpu()  # (M,)
    if index.numel() == 0 and index.ndim == 1:
        return torch.zeros(0, dtype=torch.int64)  # nothing picked (an empty list comes as float32)
    if index.is_floating_point() or index.is_complex() or index.ndim != 1:
        raise ValueError(f"{expected}, got {describe(index)}")
    index = index.long().cpu()
    if len(index) and (index.min() < 0 or index.max() >= size):
        raise ValueError(f"{expected}, got positions from {index.min().item()} to {index.max().item()}")
    return index


def _pick_per_image(value, index: torch.Tensor, size: int):
    """value[index] if `value` holds one entry per image (a tensor, NumPy array, list or tuple of
    length `size`); else `value` itself."""
    if isinstance(value, torch.Tensor) and value.ndim > 0 and len(value) == size:
        return value[index.to(value.device)]
    if isinstance(value, np.ndarray) and value.ndim > 0 and len(value) == size:
        return value[index.numpy()]
    if isinstance(value, list | tuple) and len(value) == size:
        picked = [value[i] for i in index.tolist()]
        return picked if isinstance(value, list) else tuple(picked)
    return value


def _check_both_sides(counts: list[int], to_val: list[int], fraction: float, names: list[str]) -> None:
    """Raise unless every class (counts[i] images, to_val[i] of them for val) keeps an image on each side."""
    if 1 in counts:
        raise ValueError(
            f"class {names[counts.index(1)]} has a single image: it cannot be in both train and val; "
            "add images of it or leave it out"
        )
    smallest = min(counts)
    for i, (count, val) in enumerate(zip(counts, to_val)):
        if 0 < val < count:
            continue
        fix = (
            f"of at least {math.ceil(500 / smallest) / 1000}"
            if val == 0
            else f"below {(1000 - math.ceil(500 / smallest)) / 1000}"
        )
        raise ValueError(
            f"fraction={fraction} puts round({fraction} x {count}) = {val} of the {count} images of class {names[i]} "
            f"in val{', none in train' if val else ''}: every class needs at least one image on each side; with "
            f"{smallest} images in the smallest class, use a fraction {fix}"
        )


def split_validation(
    dataset: TensorDataset, fraction: float = 0.2, seed: int = 0
) -> tuple[TensorDataset, TensorDataset]:
    """Set aside a validation part of a training set, stratified: round(fraction x its images) of
    each class go to validation, the rest to train, chosen at random but fixed by `seed`.
    Choose settings on the validation part; keep the test set for the final number.

    Args:
        dataset: an ImageDataset (each part keeps its class names and per-image extras, see
            ImageDataset.subset) or a TensorDataset(images, labels).
        fraction: the share of each class that goes to validation, between 0 and 1.
        seed: which random choice; the same seed gives the same split.
    Returns:
        (train, val), disjoint and together the whole dataset, each in the dataset's order.
    """
    images, labels = check_dataset(dataset)
    labels = labels.cpu()  # (N,)
    fraction = check_number(fraction, "fraction", low=0, high=1, low_open=True, high_open=True)
    seed = check_whole(seed, "seed", minimum=0, maximum=2**63 - 1)
    values, counts = labels.unique(return_counts=True)  # the classes present, and their sizes
    to_val = torch.floor(fraction * counts.double() + 0.5).long()  # (classes,) rounded, a half up
    names = [repr(dataset.classes[v]) if isinstance(dataset, ImageDataset) else str(v) for v in values.tolist()]
    _check_both_sides(counts.tolist(), to_val.tolist(), fraction, names)
    generator = torch.Generator().manual_seed(seed)
    shuffled = torch.randperm(len(labels), generator=generator)  # (N,)
    in_val = torch.zeros(len(labels), dtype=torch.bool)
    for value, count in zip(values.tolist(), to_val.tolist()):
        in_val[shuffled[labels[shuffled] == value][:count]] = True  # the first `count` of the class, shuffled
    if isinstance(dataset, ImageDataset):
        return dataset.subset(~in_val), dataset.subset(in_val)
    in_val = in_val.to(images.device)
    return TensorDataset(images[~in_val], labels[~in_val]), TensorDataset(images[in_val], labels[in_val])
