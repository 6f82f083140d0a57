"""ImageDataset: a TensorDataset of images and labels that knows its class names; the shared checks."""

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils.datasets import ImageDataset, check_dataset, check_number


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


# ---- what every function that takes images, labels, datasets or sizes refuses ----------------------


@pytest.mark.parametrize(
    "value, options, error, match",
    [
        (0, dict(integer=True, low=1), ValueError, r"n must be a whole number, at least 1, got 0"),
        (2.0, dict(integer=True, low=1), TypeError, r"n must be a whole number, got 2.0 \(float\)"),
        (True, dict(integer=True, low=0), TypeError, r"got True \(bool\)"),
        (False, dict(low=0), TypeError, r"n must be a number, got False \(bool\)"),
        ("3", dict(low=0), TypeError, r"got '3' \(str\)"),
        (torch.tensor(3.0), dict(low=0), TypeError, r"use .item\(\)"),
        (math.nan, dict(low=0), ValueError, r"at least 0, got nan"),
        (math.inf, dict(low=0), ValueError, r"got inf"),
        (math.nan, dict(), ValueError, r"n must be a number, not NaN or infinite, got nan"),
        (1.0, dict(low=0, high=1, high_open=True), ValueError, r"from 0 up to \(not including\) 1, got 1.0"),
        (0.0, dict(low=0, high=1, low_open=True), ValueError, r"greater than 0 and at most 1, got 0.0"),
        (5, dict(high=4), ValueError, r"at most 4, got 5"),
    ],
)
def test_check_number_names_what_it_wanted_and_what_came(value, options, error, match):
    with pytest.raises(error, match=match):
        check_number("n", value, **options)


def test_check_number_accepts_numbers_of_any_kind_in_range():
    import numpy as np

    for value in (1, 10**400, np.int64(3), 0.5, np.float32(0.5)):
        check_number("n", value, low=0)
    check_number("n", 3, integer=True, low=1, high=3)


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
