"""ImageDataset: a TensorDataset of images and labels that knows its class names; the checks of images,
labels and datasets; subsets and the validation split."""

import math

import numpy as np
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


def test_images_without_pixels_are_refused_by_name():
    # used to fail inside torch.aminmax with "cannot compute aminmax over an empty dimension"
    with pytest.raises(ValueError, match=r"images have no pixels \(shape \(2, 3, 0, 0\)\)"):
        check_float_images(torch.zeros(2, 3, 0, 0))
    with pytest.raises(ValueError, match=r"no pixels"):
        ImageDataset(torch.zeros(2, 0, 4, 4), torch.tensor([0, 1]), ["a", "b"])


# ---- subsets and the validation split ------------------------------------------------------------

from utils.datasets import check_index, split_validation  # noqa: E402


def numbered_dataset(counts: list[int]) -> ImageDataset:
    """An ImageDataset whose image i is filled with i / 1024 (so every image says which it is), classes
    in `counts` images each, interleaved, and per-image extras of several kinds."""
    assert sum(counts) <= 1024
    labels = torch.cat([torch.full((count,), c) for c, count in enumerate(counts)])
    labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(1))]  # interleaved
    N = len(labels)
    images = (torch.arange(N) / 1024).reshape(N, 1, 1, 1).expand(N, 1, 2, 2).clone()  # (N, 1, 2, 2)
    dataset = ImageDataset(images, labels, [f"class {c}" for c in range(len(counts))])
    dataset.ids = torch.arange(N)  # a per-image tensor
    dataset.masks = torch.arange(N).reshape(N, 1, 1).expand(N, 3, 3) % 2 == 0  # (N, 3, 3) bool, like object_masks
    dataset.names = [f"image {i}" for i in range(N)]  # a per-image list
    dataset.scores = np.arange(N) * 10  # a per-image array
    dataset.source = "made by hand"  # not per image: shared as it is
    dataset.palette = torch.rand(N + 1, 3)  # another length: not per image
    return dataset


def image_ids(dataset) -> list[int]:
    return torch.round(dataset.tensors[0][:, 0, 0, 0] * 1024).long().tolist()


def test_subset_picks_images_labels_and_every_per_image_extra_together():
    dataset = numbered_dataset([5, 7])
    for index in ([3, 0, 11], range(2, 5), torch.tensor([4, 4, 1]), np.array([6, 2]), dataset.labels == 1):
        picked = dataset.subset(index)
        positions = check_index(index, len(dataset)).tolist()
        assert isinstance(picked, ImageDataset) and picked.classes == dataset.classes
        assert torch.equal(picked.images, dataset.images[positions]) and picked.ids.tolist() == positions
        assert torch.equal(picked.labels, dataset.labels[positions])
        assert torch.equal(picked.masks, dataset.masks[positions])
        assert picked.names == [f"image {i}" for i in positions]
        assert picked.scores.tolist() == [10 * i for i in positions]
        assert picked.source == "made by hand" and picked.palette is dataset.palette
    assert len(dataset.subset([])) == 0


@pytest.mark.parametrize(
    "index, error, match",
    [
        ([0, 12], ValueError, r"index must be positions from 0 to 11 .* got positions from 0 to 12"),
        ([-1], ValueError, r"got positions from -1 to -1"),
        (torch.tensor([0.0, 1.0]), ValueError, r"positions from 0 to 11 .* got a tensor of dtype float32"),
        (torch.zeros(2, 2, dtype=torch.long), ValueError, r"got a tensor of dtype int64 and shape \(2, 2\)"),
        (torch.ones(5, dtype=torch.bool), ValueError, r"a bool mask as index needs one entry per image, shape \(12,\)"),
        ("0:5", TypeError, r"index must be positions .* got '0:5' \(str\)"),
        (3, TypeError, r"got 3 \(int\)"),
        (["a", "b"], TypeError, r"got \['a', 'b'\] \(list\)"),
    ],
)
def test_subset_says_what_positions_it_takes(index, error, match):
    with pytest.raises(error, match=match):
        numbered_dataset([5, 7]).subset(index)


def test_the_validation_split_is_stratified_disjoint_and_complete():
    dataset = numbered_dataset([50, 30, 20])
    train, val = split_validation(dataset, fraction=0.2, seed=0)
    assert val.labels.bincount().tolist() == [10, 6, 4] and train.labels.bincount().tolist() == [40, 24, 16]
    assert isinstance(train, ImageDataset) and isinstance(val, ImageDataset)
    assert train.classes == val.classes == dataset.classes
    assert set(image_ids(train)).isdisjoint(image_ids(val))
    assert sorted(image_ids(train) + image_ids(val)) == list(range(100))
    assert image_ids(train) == sorted(image_ids(train))  # each part keeps the dataset's order
    for part in (train, val):  # labels and extras still belong to their image
        ids = image_ids(part)
        assert part.ids.tolist() == ids and part.names == [f"image {i}" for i in ids]
        assert torch.equal(part.labels, dataset.labels[ids]) and torch.equal(part.masks, dataset.masks[ids])
        assert part.scores.tolist() == [10 * i for i in ids] and part.source == "made by hand"


@pytest.mark.parametrize("counts", [[7, 13], [3, 3, 3, 4], [101, 2, 57], [1000, 10]])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.6, 1 / 3])
def test_every_class_is_split_in_proportion_to_within_half_an_image(counts, fraction):
    dataset = numbered_dataset(counts)
    train, val = split_validation(dataset, fraction=fraction, seed=3)
    assert len(train) + len(val) == sum(counts)
    for c, count in enumerate(counts):
        in_val = int((val.labels == c).sum())
        assert abs(in_val - fraction * count) <= 0.5 and 0 < in_val < count
        assert in_val + int((train.labels == c).sum()) == count


@pytest.mark.parametrize("smallest", [2, 3, 7, 40, 333])
def test_the_fractions_the_error_suggests_do_split(smallest):
    """The bounds in the message are safe: the suggested fraction gives every class an image on each side."""
    dataset = numbered_dataset([smallest, 500])
    for fraction in (0.0001, 0.9999):
        with pytest.raises(ValueError, match=r"use a fraction (of at least|below) ([0-9.]+)$") as caught:
            split_validation(dataset, fraction=fraction)
        bound = float(caught.value.args[0].rsplit(" ", 1)[1])
        fraction = bound if fraction < 0.5 else bound - 1e-9
        train, val = split_validation(dataset, fraction=fraction)
        assert val.labels.bincount().min() > 0 and train.labels.bincount().min() > 0


def test_the_split_is_fixed_by_its_seed():
    dataset = numbered_dataset([40, 60])
    first = [image_ids(part) for part in split_validation(dataset, 0.3, seed=7)]
    assert first == [image_ids(part) for part in split_validation(dataset, 0.3, seed=7)]
    assert first != [image_ids(part) for part in split_validation(dataset, 0.3, seed=8)]
    assert first != [image_ids(part) for part in split_validation(dataset, 0.3)]


def test_a_tensor_dataset_splits_into_tensor_datasets():
    dataset = numbered_dataset([6, 4])
    train, val = split_validation(TensorDataset(dataset.images, dataset.labels), fraction=0.5)
    assert type(train) is TensorDataset and type(val) is TensorDataset
    assert val.tensors[1].bincount().tolist() == [3, 2]
    assert torch.equal(train.tensors[1], dataset.labels[image_ids(train)])


@pytest.mark.parametrize(
    "dataset, options, error, match",
    [
        (
            "pairs",
            dict(fraction=0),
            ValueError,
            r"fraction must be a number, between 0 and 1 \(neither included\), got 0",
        ),
        ("pairs", dict(fraction=1), ValueError, r"fraction .* got 1$"),
        ("pairs", dict(fraction=-0.2), ValueError, r"fraction .* got -0.2"),
        ("pairs", dict(fraction=20), ValueError, r"fraction .* got 20"),
        ("pairs", dict(fraction=math.nan), ValueError, r"fraction .* got nan"),
        ("pairs", dict(fraction="0.2"), TypeError, r"fraction must be a number"),
        ("pairs", dict(fraction=True), TypeError, r"fraction must be a number"),
        ("pairs", dict(seed=-1), ValueError, r"seed must be a whole number, from 0 to"),
        ("pairs", dict(seed=1.5), TypeError, r"seed must be a whole number"),
        (
            "pairs",
            dict(fraction=0.01),
            ValueError,
            r"fraction=0.01 puts round\(0.01 x 40\) = 0 of the 40 images of class 'class 0' in val: every class "
            r"needs at least one image on each side; with 40 images in the smallest class, use a fraction of at least "
            r"0.013$",
        ),
        (
            "pairs",
            dict(fraction=0.99),
            ValueError,
            r"= 40 of the 40 images of class 'class 0' in val, none in train: .* use a fraction below 0.987$",
        ),
        ("one of a kind", {}, ValueError, r"class 'class 1' has a single image: it cannot be in both train and val"),
        ("labels only", dict(fraction=0.1), ValueError, r"round\(0.1 x 3\) = 0 of the 3 images of class 7 in val"),
        ("tuple", {}, TypeError, r"dataset must be a dataset of images and labels.*got a tuple"),
        ("both", {}, TypeError, r"got 2 datasets; \(train, test\)\? unpack them first"),
        ("tensor", {}, TypeError, r"got a tensor"),
        ("loader", {}, TypeError, r"pass its dataset \(loader.dataset\)"),
        ("empty", {}, ValueError, r"dataset is empty"),
    ],
)
def test_split_validation_refuses_what_it_cannot_split(dataset, options, error, match):
    pairs = numbered_dataset([40, 60])
    datasets = {
        "pairs": pairs,
        "one of a kind": numbered_dataset([9, 1]),
        "labels only": TensorDataset(torch.rand(3, 1, 2, 2), torch.tensor([7, 7, 7])),
        "tuple": (pairs.images, pairs.labels),
        "both": (pairs, pairs),
        "tensor": pairs.images,
        "loader": DataLoader(pairs),
        "empty": pairs.subset([]),
    }
    with pytest.raises(error, match=match):
        split_validation(datasets[dataset], **options)
