"""The bundled sample image and the two training sets that ship with the course."""

import numpy as np
import pytest
import torch

from utils.data import load_sample_image


def test_sample_image_default():
    image = load_sample_image()
    assert image.shape == (3, 224, 224)
    assert image.dtype == torch.float32
    assert image.min() >= 0 and image.max() <= 1
    assert image.std() > 0.05  # a photo, not a constant
    assert image.max() - image.min() > 0.5
    assert not torch.equal(image[0], image[2])  # colour channels differ: RGB, not gray copies
    assert image.is_contiguous()


@pytest.mark.parametrize("size", [64, 32])
def test_sample_image_size(size):
    image = load_sample_image(size)
    assert image.shape == (3, size, size)
    assert image.dtype == torch.float32
    assert image.min() >= 0 and image.max() <= 1
    assert image.std() > 0.05


def test_sample_image_is_the_same_every_time():
    assert torch.equal(load_sample_image(64), load_sample_image(64))


def test_photos_ship_with_matplotlib_and_scikit_image_resized_whole():
    from utils.data import PHOTOS, load_photos

    images, names = load_photos(64)
    assert images.shape == (4, 3, 64, 64) and images.dtype == torch.float32 and names == list(PHOTOS)
    assert images.min() >= 0.0 and images.max() <= 1.0 and images.std() > 0.1
    assert not torch.equal(images[0], images[1])
    # Grace Hopper's photo (512 x 600), squeezed whole to a square: not load_sample_image's centre crop
    assert not torch.allclose(images[0], load_sample_image(64), atol=0.05)


# ---- training sets -----------------------------------------------------------------------

from utils.data import ImageDataset, load_digits, load_training_set, make_relational  # noqa: E402


def test_digits_split_is_fixed_stratified_and_complete():
    train, test = load_digits()
    assert len(train) == 1347 and len(test) == 450
    assert train.images.shape[1:] == (1, 8, 8) and train.images.dtype == torch.float32
    assert train.images.min() == 0.0 and train.images.max() == 1.0
    counts = test.labels.bincount()
    assert counts.min() >= 43 and counts.max() <= 46  # every digit in proportion (174-183 of each)
    again, _ = load_digits()
    assert torch.equal(again.images, train.images)
    assert train.classes == [str(d) for d in range(10)]


@pytest.mark.parametrize("test_fraction, seed", [(0.25, 0), (0.2, 1)])
def test_digits_equal_scikit_learns_own_loader_and_split(test_fraction, seed):
    # the default split is read from a file, the others made by train_test_split: both must be
    # scikit-learn's, image for image, or lessons 6-8 and the shipped checkpoint change
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    digits = sklearn_digits()
    train_index, test_index = train_test_split(
        np.arange(1797), test_size=test_fraction, stratify=digits.target, random_state=seed
    )
    train, test = load_digits(test_fraction, seed)
    for part, index in [(train, train_index), (test, test_index)]:
        expected = torch.tensor(digits.images[index] / 16.0, dtype=torch.float32).unsqueeze(1)
        assert torch.equal(part.images, expected)
        assert torch.equal(part.labels, torch.tensor(digits.target[index]))


def test_the_default_digits_split_needs_no_scikit_learn_import():
    import subprocess
    import sys

    code = "import sys; from utils.data import load_digits; load_digits(); print('sklearn' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("task", ["same_colour", "same_shape", "orientation"])
def test_relational_images_hold_two_far_apart_objects_and_balanced_labels(task):
    data = make_relational(200, task=task, seed=3)
    assert data.images.shape == (200, 3, 32, 32) and data.labels.float().mean() == 0.5
    again = make_relational(200, task=task, seed=3)
    assert torch.equal(again.images, data.images)  # deterministic
    for mask, label in zip(data.object_masks[:40], data.labels[:40]):
        rows, cols = mask.nonzero(as_tuple=True)
        assert 2 * 15 <= len(rows) <= 2 * 49  # two objects of up to 7 x 7 pixels
        # the two objects: split the pixels where the gap between them is largest
        points = torch.stack([rows, cols], 1).float()
        far = torch.cdist(points, points).max()
        assert far >= 14 - 7  # centres at least 14 apart, so some pixels are at least 7 apart
        if task == "orientation":
            spread_rows, spread_cols = rows.max() - rows.min(), cols.max() - cols.min()
            assert (spread_rows > spread_cols) == bool(label)


def test_same_colour_labels_match_the_pixels():
    data = make_relational(100, task="same_colour", seed=1)
    for image, mask, label in zip(data.images, data.object_masks, data.labels):
        colours = {tuple(image[:, r, c].tolist()) for r, c in mask.nonzero().tolist()}
        assert (len(colours) == 1) == bool(label)


def test_load_training_set_by_name():
    train, _ = load_training_set("relational", task="orientation", train_size=10, test_size=4)
    assert len(train) == 10 and train.classes == ["side by side", "one above the other"]
    with pytest.raises(ValueError, match="expected one of .*digits.*cifar10"):
        load_training_set("imagenet")
    assert isinstance(train, ImageDataset)


def test_image_dataset_is_still_importable_from_here():
    import utils.datasets

    assert ImageDataset is utils.datasets.ImageDataset
