"""The bundled sample image and the two training sets that ship with the course."""

import itertools
import math

import numpy as np
import pytest
import torch
from no_hang import outcome_within, refused

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


@pytest.mark.parametrize("task", ["same_colour", "orientation"])
def test_the_object_boxes_frame_each_object_and_nothing_else(task):
    data = make_relational(60, task=task, seed=2)
    assert data.object_boxes.shape == (60, 2, 4) and data.object_boxes.dtype == torch.int64
    for mask, boxes in zip(data.object_masks, data.object_boxes):
        inside = torch.zeros_like(mask)
        for top, left, bottom, right in boxes.tolist():
            assert bottom - top == right - left == 7  # object_size
            assert mask[top:bottom, left:right].any()  # an object in each box
            inside[top:bottom, left:right] = True
        assert not (mask & ~inside).any()  # no object pixel outside the boxes
        centres = (boxes[:, :2] + boxes[:, 2:]).float() / 2  # (2, 2)
        assert torch.dist(centres[0], centres[1]) >= 14  # min_distance


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


# ---- bad input: a clear error with the numbers, never a hang ------------------------------------

from utils.data import _farthest_apart, load_photos, load_relational, shape_mask  # noqa: E402


@pytest.mark.parametrize(
    "options, match",
    [  # these three looped forever: no placement was far enough apart
        (dict(image_size=8, object_size=7), r"at most 1.4 pixels apart .* images of 8 x 8, less than min_distance=14"),
        (dict(task="orientation", image_size=20), r"one row or one column .* at most 13.3 pixels apart"),
        (dict(min_distance=100), r"at most 35.4 pixels apart .* images of 32 x 32, less than min_distance=100"),
    ],
)
def test_make_relational_refuses_placements_that_cannot_exist(options, match):
    refused(lambda: make_relational(4, **options), ValueError, match)


def test_make_relational_gives_up_on_placements_too_rare_to_find():
    # 35 pixels apart fits (25 * sqrt(2) = 35.36) only with the objects in opposite corners
    refused(lambda: make_relational(4, min_distance=35), ValueError, r"no place .* in 10000 random tries")


@pytest.mark.parametrize("task", ["same_colour", "orientation"])
def test_the_farthest_placement_is_what_the_sampler_can_reach(task):
    """Against every distance between two top-left corners that the placement loop accepts, for small images."""
    for span in range(1, 9):
        apart = list(itertools.product(range(span), repeat=2))  # (rows, cols) between two corners
        if task == "orientation":  # both labels must be possible: nearly one row (0), one column (1)
            reach = [
                max((math.hypot(r, c) for r, c in apart if min(r, c) <= 3 and (r > c) == label), default=-1.0)
                for label in (0, 1)
            ]
            farthest = min(reach)
        else:
            farthest = max(math.hypot(r, c) for r, c in apart)
        assert math.isclose(_farthest_apart(task, span), farthest), span


def test_orientation_images_just_big_enough_are_made():
    data = outcome_within(30, lambda: make_relational(6, task="orientation", image_size=21))  # 14.3 apart at most
    assert isinstance(data, ImageDataset) and len(data) == 6


@pytest.mark.parametrize(
    "task, masks, pixel_sum",
    [
        ("same_colour", 35044662, 11078.95),
        ("same_shape", 37422830, 11210.56),
        ("orientation", 32257862, 10998.48),
    ],
)
def test_relational_images_are_the_ones_made_before_the_checks(task, masks, pixel_sum):
    """The checks change no valid set: the numbers come from the code before them (the shipped checkpoints and
    the committed lesson outputs were made from these images)."""
    data = make_relational(30, task=task, seed=5)
    where = data.object_masks.flatten(1).nonzero()
    assert data.labels[:10].tolist() == [1, 1, 0, 0, 0, 1, 0, 0, 0, 1]
    assert int((where[:, 0] * 1031 + where[:, 1]).sum()) == masks
    assert math.isclose(data.images.double().sum().item(), pixel_sum, abs_tol=0.01)


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(num_images=0), ValueError, r"num_images must be a whole number, at least 1, got 0"),
        (dict(num_images=-3), ValueError, r"num_images .* got -3"),
        (
            dict(num_images=2.0),
            TypeError,
            r"num_images must be a whole number, at least 1, got 2.0 \(float\): use num_images=2",
        ),
        (dict(task="colour"), ValueError, r"unknown task 'colour'; expected one of"),
        (dict(task=["same_colour"]), TypeError, r"unknown task \['same_colour'\]"),
        (dict(image_size=0), ValueError, r"image_size must be a whole number of pixels per side, at least 1"),
        (dict(object_size=0), ValueError, r"object_size must be a whole number of pixels, from 1 to 32, got 0"),
        (dict(object_size=40), ValueError, r"object_size .* from 1 to 32, got 40"),
        (dict(task="same_shape", object_size=3, min_distance=5), ValueError, r"object_size .* from 5 to 32, got 3"),
        (dict(min_distance=5), ValueError, r"min_distance .* or the objects could overlap\), at least 9.9, got 5"),
        (dict(min_distance=float("nan")), ValueError, r"min_distance .* got nan"),
        (
            dict(noise=-1),
            ValueError,
            r"noise must be a finite number \(the background's standard deviation\), at least 0",
        ),
        (dict(seed=-1), ValueError, r"seed must be a whole number, at least 0, got -1"),
        (dict(num_images=10**7), ValueError, r"make_relational\(num_images=10000000, image_size=32\) would need"),
        (dict(num_images=1, image_size=100_000), ValueError, r"GB of memory to draw, more than 2 GB"),
    ],
)
def test_make_relational_names_the_argument_that_is_wrong(options, error, match):
    options = {"num_images": 4, **options}
    refused(lambda: make_relational(**options), error, match)


def test_load_relational_names_its_own_sizes():
    refused(lambda: load_relational(0), ValueError, r"train_size must be a whole number, at least 1, got 0")
    refused(lambda: load_relational(10, test_size=-1), ValueError, r"test_size .* got -1")


@pytest.mark.parametrize(
    "size, error",
    [(0, ValueError), (-1, ValueError), (10**6, ValueError), (2.5, TypeError), (True, TypeError), ("64", TypeError)],
)
def test_photos_refuse_sizes_that_are_not_a_side(size, error):
    refused(lambda: load_sample_image(size), error, r"size must be a whole number of pixels per side")
    refused(lambda: load_photos(size), error, r"size must be a whole number of pixels per side")


@pytest.mark.parametrize(
    "test_fraction, seed, error, match",
    [
        (0, 0, ValueError, r"test_fraction must be a number, between 0 and 1 \(neither included\), got 0"),
        (1, 0, ValueError, r"test_fraction .* got 1"),
        (1.5, 0, ValueError, r"test_fraction .* got 1.5"),
        (float("nan"), 0, ValueError, r"test_fraction .* got nan"),
        (0.001, 0, ValueError, r"into 1795 train and 2 test images; .* each needs at least 10"),
        (0.995, 0, ValueError, r"into 8 train and 1789 test images"),
        (0.25, -1, ValueError, r"seed must be a whole number, from 0 to 4294967295, got -1"),
        ("0.2", 0, TypeError, r"test_fraction must be a number"),
    ],
)
def test_load_digits_refuses_splits_that_leave_a_part_without_every_digit(test_fraction, seed, error, match):
    refused(lambda: load_digits(test_fraction, seed), error, match)


def test_load_training_set_explains_names_and_options():
    refused(lambda: load_training_set("Digits"), ValueError, r"unknown training set 'Digits'.*did you mean 'digits'")
    refused(lambda: load_training_set(3), TypeError, r"name must be a string, one of \['digits'")
    refused(
        lambda: load_training_set("digits", task="orientation"),
        TypeError,
        r"load_training_set\('digits'\) takes the options \['test_fraction', 'seed'\], got \['task'\]",
    )


def test_shape_mask_refuses_an_empty_object():
    refused(lambda: shape_mask("disc", 0), ValueError, r"size must be a whole number, at least 1, got 0")


# ---- a validation part of a bundled set ------------------------------------------------------------

from utils.data import COLOURS, split_validation  # noqa: E402


def test_the_relational_set_splits_with_its_object_masks_aligned():
    data = make_relational(120, task="same_colour", seed=2)
    train, val = split_validation(data, fraction=0.25, seed=0)
    assert len(train) == 90 and len(val) == 30 and val.labels.bincount().tolist() == [15, 15]
    assert train.classes == val.classes == ["different colours", "same colour"]
    palette = torch.tensor(list(COLOURS.values()))  # (4, 3)
    for part in (train, val):
        assert part.object_masks.shape == (len(part), 32, 32) and part.object_masks.dtype == torch.bool
        for image, mask, label in zip(part.images, part.object_masks, part.labels):
            pixels = image[:, mask].T  # (pixels, 3): every masked pixel is one of the objects' colours
            assert torch.isclose(pixels[:, None], palette[None]).all(-1).any(-1).all()
            assert (len(pixels.unique(dim=0)) == 1) == bool(label)
            assert not torch.isclose(image[:, ~mask].T[:, None], palette[None]).all(-1).any()  # the rest is noise


def test_digits_split_into_train_and_validation_keep_every_digit():
    train, _ = load_digits()
    fit_on, val = split_validation(train)  # 0.2 of each digit
    assert len(fit_on) + len(val) == 1347 and abs(len(val) - 0.2 * 1347) <= 5
    assert (val.labels.bincount() - 0.2 * train.labels.bincount()).abs().max() <= 0.5


# ---- two objects at mirrored places (lesson 9) ---------------------------------------------------

import hashlib  # noqa: E402


@pytest.mark.parametrize(
    "task, fingerprint",
    [  # SHA-256 of images, labels, object_masks and object_boxes, computed before the option came
        ("same_colour", "61032f56541b65c60d0275cd8d3b10819ee7bfdc9dd5f5b9ccef4dbaa3dceaaa"),
        ("same_shape", "c8e3c2a078f93d8b2849dfac4d5a237cff7e33a81ef01e22c839b8f8e130bdc3"),
        ("orientation", "1b701b46c3282e87298a87eeae2fcf2b7ce8ca092f765daf8b8348a6761224c9"),
    ],
)
def test_mirrored_false_draws_bit_for_bit_the_images_drawn_before_the_option(task, fingerprint):
    for data in (make_relational(64, task=task, seed=3), make_relational(64, task=task, seed=3, mirrored=False)):
        digest = hashlib.sha256()
        for tensor in (data.images, data.labels, data.object_masks, data.object_boxes):
            digest.update(tensor.contiguous().numpy().tobytes())
        assert digest.hexdigest() == fingerprint


def assert_masks_fill_the_boxes(masks: torch.Tensor, boxes: torch.Tensor, object_size: int) -> None:
    """Every box holds object pixels, no object pixel lies outside the boxes."""
    for mask, pair in zip(masks, boxes):
        inside = torch.zeros_like(mask)
        for top, left, bottom, right in pair.tolist():
            assert bottom - top == right - left == object_size
            assert mask[top:bottom, left:right].any()
            inside[top:bottom, left:right] = True
        assert not (mask & ~inside).any()


@pytest.mark.parametrize(
    "task, image_size, object_size, min_distance",
    [
        ("same_colour", 32, 7, 14.0),
        ("same_shape", 32, 7, 14.0),
        ("same_colour", 40, 5, 20.0),
        ("same_shape", 21, 7, 14),  # just big enough: only the two sides are 14 apart
    ],
)
def test_mirrored_objects_sit_at_mirror_images_far_enough_apart(task, image_size, object_size, min_distance):
    options = dict(task=task, image_size=image_size, object_size=object_size, min_distance=min_distance)
    data = outcome_within(30, lambda: make_relational(120, seed=4, mirrored=True, **options))
    boxes = data.object_boxes  # (120, 2, 4): (top, left, bottom, right)
    assert torch.equal(boxes[:, 0, 0], boxes[:, 1, 0])  # the same top
    assert ((boxes[:, 0, 1] + boxes[:, 1, 1]) == image_size - object_size).all()  # left2 + left1
    centres = (boxes[:, :, :2] + boxes[:, :, 2:]).float() / 2  # (120, 2, (row, col))
    assert ((centres[:, 0] - centres[:, 1]).norm(dim=-1) >= min_distance).all()
    assert (boxes[:, 0, 1] < boxes[:, 1, 1]).any() and (boxes[:, 0, 1] > boxes[:, 1, 1]).any()  # either on the left
    assert data.labels.float().mean() == 0.5 and data.images.shape == (120, 3, image_size, image_size)
    assert_masks_fill_the_boxes(data.object_masks, boxes, object_size)
    assert torch.equal(make_relational(120, seed=4, mirrored=True, **options).images, data.images)  # deterministic


def test_mirrored_labels_are_what_the_pixels_show():
    """All four shapes are symmetric left to right: two mirrored objects of one shape make a mask that is its own
    mirror image, two of different shapes do not. Same colour: one colour on every object pixel."""
    shapes = make_relational(100, task="same_shape", seed=6, mirrored=True)
    for mask, label in zip(shapes.object_masks, shapes.labels):
        assert torch.equal(mask, mask.flip(-1)) == bool(label)
    colours = make_relational(100, task="same_colour", seed=6, mirrored=True)
    for image, mask, label in zip(colours.images, colours.object_masks, colours.labels):
        assert (len(image[:, mask].T.unique(dim=0)) == 1) == bool(label)
    assert not torch.equal(colours.images, make_relational(100, task="same_colour", seed=6).images)


def test_the_farthest_mirrored_placement_is_what_the_sampler_can_reach():
    for span in range(1, 12):
        farthest = max(abs((span - 1 - left) - left) for left in range(span))  # left2 = span - 1 - left1
        for task in ("same_colour", "same_shape"):
            assert _farthest_apart(task, span, mirrored=True) == farthest


@pytest.mark.parametrize(
    "options, error, match",
    [
        (
            dict(task="orientation"),
            ValueError,
            r"mirrored=True puts the two objects side by side, .* so every image of task='orientation' would be",
        ),
        (dict(image_size=20), ValueError, r"at mirrored places, side by side \(mirrored=True\) can be at most 13.0"),
        (dict(object_size=9, min_distance=24), ValueError, r"at most 23.0 pixels apart .* less than min_distance=24"),
        (dict(image_size=7), ValueError, r"can be at most 0.0 pixels apart .* images of 7 x 7"),
        (dict(mirrored="yes"), TypeError, r"mirrored must be True or False, got 'yes' \(str\)"),
        (dict(mirrored=1), TypeError, r"mirrored must be True or False, got 1 \(int\)"),
    ],
)
def test_mirrored_placements_that_cannot_exist_are_refused(options, error, match):
    options = {"num_images": 4, "mirrored": True, **options}
    refused(lambda: make_relational(**options), error, match)


def test_mirrored_needs_more_room_than_objects_anywhere():
    assert len(make_relational(4, image_size=20)) == 4  # 18.4 pixels apart at most, corner to corner
    refused(lambda: make_relational(4, image_size=20, mirrored=True), ValueError, r"at most 13.0 pixels apart")


def test_load_relational_and_load_training_set_pass_mirrored_on():
    for train, test in (
        load_relational(40, 20, task="same_shape", mirrored=True),
        load_training_set("relational", task="same_colour", mirrored=True, train_size=40, test_size=20),
    ):
        assert (len(train), len(test)) == (40, 20)
        for part in (train, test):
            boxes = part.object_boxes
            assert torch.equal(boxes[:, 0, 0], boxes[:, 1, 0]) and ((boxes[:, 0, 1] + boxes[:, 1, 1]) == 25).all()
        assert not torch.equal(train.images[:20], test.images)  # different seeds
    refused(lambda: load_relational(4, 4, task="orientation", mirrored=True), ValueError, r"would be 'side by side'")
