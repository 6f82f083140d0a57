"""ImageDataset: a TensorDataset of images and labels that knows its class names; the checks of images,
labels and datasets."""

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils.datasets import ImageDataset, check_dataset, check_float_images, check_labels
from utils.validation import WrongTypeError


def test_image_dataset_holds_images_labels_and_class_names():
    images, labels = torch.rand(5, 3, 4, 6), torch.tensor([0, 1, 1, 0, 1])
    dataset = ImageDataset(images, labels, ("cat", "dog"))
    assert isinstance(dataset, TensorDataset) and len(dataset) == 5
    assert dataset.images is images and dataset.labels is labels and dataset.classes == ["cat", "dog"]
    image, label = dataset[2]
    assert torch.equal(image, images[2]) and label == 1
    batch_images, batch_labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert batch_images.shape == (4, 3, 4, 6) and batch_labels.tolist() == [0, 1, 1, 0]
    assert repr(dataset) == "ImageDataset(5 images of (3, 4, 6), classes=['cat', 'dog'])"


@pytest.mark.parametrize(
    "images, labels",
    [
        (torch.zeros(3, 8, 8), torch.zeros(3, dtype=torch.long)),  # no channel axis
        (torch.zeros(3, 1, 8, 8), torch.zeros(4, dtype=torch.long)),  # one label too many
        (torch.zeros(3, 1, 8, 8), torch.zeros(3, 1, dtype=torch.long)),  # labels not (N,)
    ],
)
def test_image_dataset_rejects_mismatched_shapes(images, labels):
    with pytest.raises(ValueError, match=r"expected images \(N, C, H, W\) and labels \(N,\), got"):
        ImageDataset(images, labels, ["a"])


# ---- what every function that takes images, labels or datasets refuses ---------------------------


@pytest.mark.parametrize(
    "images, labels, classes, error, match",
    [
        (
            torch.zeros(2, 1, 4, 4, dtype=torch.uint8),
            [0, 1],
            ["a", "b"],
            ValueError,
            r"uint8: convert with .float\(\) / 255",
        ),
        (255 * torch.rand(2, 1, 4, 4) + 2, [0, 1], ["a", "b"], ValueError, r"in \[0, 1\].*divide by 255"),
        (torch.full((2, 1, 4, 4), math.nan), [0, 1], ["a", "b"], ValueError, r"NaN or infinite"),
        (torch.rand(2, 1, 4, 4), [0, 2], ["a", "b"], ValueError, r"from 0 to 1 \(one per name in classes, 2 of them\)"),
        (torch.rand(2, 1, 4, 4), [0, -1], ["a", "b"], ValueError, r"got values from -1 to 0"),
        (torch.rand(2, 1, 4, 4), [0.0, 1.0], ["a", "b"], ValueError, r"int64 class indices, got torch.float32"),
        (torch.rand(2, 1, 4, 4), [0, 1], "ab", TypeError, r"classes must be a list of class names"),
        ([[0.0]], [0], ["a"], TypeError, r"images must be a torch.Tensor, got list"),
    ],
)
def test_image_dataset_refuses_what_training_would_get_wrong(images, labels, classes, error, match):
    labels = torch.tensor(labels)
    with pytest.raises(error, match=match):
        ImageDataset(images, labels, classes)


def test_image_dataset_forgives_resampling_just_past_one_and_may_be_empty():
    ImageDataset(torch.full((1, 1, 2, 2), 1.0004), torch.tensor([0]), ["a"])
    assert len(ImageDataset(torch.zeros(0, 3, 4, 4), torch.zeros(0, dtype=torch.long), ["a"])) == 0


@pytest.mark.parametrize(
    "dataset, error, match",
    [
        ((torch.rand(2, 1, 4, 4), torch.tensor([0, 1])), TypeError, r"got a tuple; images and labels\? wrap them"),
        (DataLoader(TensorDataset(torch.rand(2, 1, 4, 4), torch.tensor([0, 1]))), TypeError, r"loader.dataset"),
        (torch.rand(2, 1, 4, 4), TypeError, r"got a tensor"),
        ({"images": 1}, TypeError, r"got dict"),
        (TensorDataset(torch.rand(0, 1, 4, 4), torch.zeros(0, dtype=torch.long)), ValueError, r"data is empty"),
    ],
)
def test_check_dataset_says_what_a_dataset_is(dataset, error, match):
    with pytest.raises(error, match=match):
        check_dataset(dataset, "data")


@pytest.mark.parametrize(
    "call",
    [
        lambda: check_dataset([torch.rand(2, 1, 4, 4), torch.tensor([0, 1])]),
        lambda: check_float_images([[0.0]]),
        lambda: check_labels([0, 1]),
        lambda: ImageDataset(torch.rand(2, 1, 4, 4), torch.tensor([0, 1]), "ab"),
    ],
    ids=["dataset", "images", "labels", "classes"],
)
def test_a_wrong_type_is_caught_as_a_type_error_and_as_a_value_error(call):
    with pytest.raises(WrongTypeError):
        call()
    with pytest.raises(ValueError):
        call()


def test_a_tensor_given_as_class_names_is_described_not_printed():
    with pytest.raises(WrongTypeError, match=r"got a tensor of dtype int64 and shape \(1000,\)$"):
        ImageDataset(torch.rand(2, 1, 4, 4), torch.tensor([0, 1]), torch.arange(1000))
