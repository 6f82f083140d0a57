"""Images and training sets the course ships with: nothing is downloaded at run time.

- `load_sample_image`: Grace Hopper's portrait, which ships with matplotlib (lessons 1-5).
- `load_digits`: 1,797 real handwritten 8 x 8 digits, which ship with scikit-learn (lesson 6).
- `make_relational`: a synthetic set whose label depends on two objects far apart (lesson 6), the
  two optionally at mirrored places, left and right (lesson 9).
- `load_photos`: four everyday photos for an ImageNet classifier, from matplotlib and
  scikit-image (lesson 8).

Every training set is an `ImageDataset` (from `utils.datasets`, re-exported here with
`split_validation`, which sets a stratified validation part aside).
"""

import importlib.resources
import importlib.util
import inspect
import math
from pathlib import Path

import matplotlib.cbook
import numpy as np
import torch
from PIL import Image

from utils.datasets import ImageDataset  # also re-exported: `from utils.data import ImageDataset` works
from utils.datasets import split_validation as split_validation  # re-exported
from utils.standard_datasets import load_standard_dataset
from utils.validation import WrongTypeError, check_flag, check_number, check_whole, describe

MAX_SIDE = 4096  # pixels: a photo resized larger only gets blurrier, and a 4096 x 4096 RGB image is 200 MB


def _check_side(size) -> int:
    return check_whole(size, "size", maximum=MAX_SIDE, meaning=" of pixels per side")


def load_sample_image(size: int = 224) -> torch.Tensor:
    """Grace Hopper's portrait, which ships with matplotlib, as a square RGB tensor.

    The photo (600 x 512) is centre-cropped to a square and resized (bicubic) to size x size.

    Returns:
        image (3, size, size), float32 in [0, 1].
    """
    size = _check_side(size)
    path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    with Image.open(path) as photo:
        photo = photo.convert("RGB")
        width, height = photo.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        photo = photo.crop((left, top, left + side, top + side)).resize((size, size), Image.BICUBIC)
        pixels = np.asarray(photo, dtype=np.float32) / 255.0  # (H, W, C)
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()  # (C, H, W)


# name -> (package, file) of the photos lesson 8 shows the real ViT-B/16
PHOTOS = {
    "Grace Hopper": ("matplotlib", "grace_hopper.jpg"),
    "Chelsea the cat": ("skimage.data", "chelsea.png"),
    "coffee": ("skimage.data", "coffee.png"),
    "rocket": ("skimage.data", "rocket.jpg"),
}


def load_photos(size: int = 224) -> tuple[torch.Tensor, list[str]]:
    """Four photos that ship inside installed packages: Grace Hopper's portrait (matplotlib) and
    scikit-image's cat, cup of coffee and rocket launch.

    Each is resized whole to size x size (bilinear, aspect ratio not kept), as the published
    ViT-B/16's preprocessing does; normalise with `utils.imagenet.normalize` before that model.

    Returns:
        images (4, 3, size, size) float32 in [0, 1], and their names.
    """
    size = _check_side(size)
    images = []
    for package, name in PHOTOS.values():
        if package == "matplotlib":
            path = matplotlib.cbook.get_sample_data(name, asfileobj=False)
        else:
            path = importlib.resources.files(package) / name
        with Image.open(path) as photo:
            photo = photo.convert("RGB").resize((size, size), Image.BILINEAR)
            images.append(torch.from_numpy(np.asarray(photo, dtype=np.float32) / 255.0).permute(2, 0, 1))  # (C, H, W)
    return torch.stack(images), list(PHOTOS)  # (4, 3, size, size)


# The default split of load_digits (test_fraction 0.25, seed 0) as scikit-learn's
# train_test_split makes it: 1,347 train indices, then 450 test indices. Reading it from this
# file spares the lessons importing scikit-learn (about 70 MB on Binder) just to split;
# tests/test_data.py checks that it equals scikit-learn's split.
DIGITS_SPLIT_FILE = Path(__file__).parent / "digits_split.npy"
DIGITS = 1797  # images in scikit-learn's digits


def _digits_file() -> Path:
    """scikit-learn's digits.csv.gz, found without importing scikit-learn."""
    package = importlib.util.find_spec("sklearn")
    if package is None:
        raise ModuleNotFoundError("the digits ship with scikit-learn: pip install scikit-learn")
    return Path(package.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"


def load_digits(test_fraction: float = 0.25, seed: int = 0) -> tuple[ImageDataset, ImageDataset]:
    """scikit-learn's handwritten digits (1,797 images of 8 x 8, grey levels 0-16), split once.

    The split is stratified (every digit in the same proportion in both parts) and fixed by `seed`
    (scikit-learn's train_test_split; the default one is read from DIGITS_SPLIT_FILE).

    Returns:
        (train, test): images (N, 1, 8, 8) float32 in [0, 1], labels 0-9.
    """
    check_number(test_fraction, "test_fraction", low=0, high=1, low_open=True, high_open=True)
    seed = check_whole(seed, "seed", minimum=0, maximum=2**32 - 1)  # what scikit-learn's random_state takes
    test_size = math.ceil(test_fraction * DIGITS)  # as train_test_split counts
    if min(test_size, DIGITS - test_size) < 10:
        raise ValueError(
            f"test_fraction={test_fraction} splits the {DIGITS} digits into {DIGITS - test_size} train and "
            f"{test_size} test images; with every digit in both parts, each needs at least 10"
        )
    table = np.loadtxt(_digits_file(), delimiter=",")  # (1797, 65): 64 pixels, then the digit
    images = torch.tensor(table[:, :64].reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)  # (1797, 1, 8, 8)
    labels = torch.tensor(table[:, 64], dtype=torch.int64)  # (1797,)
    if (test_fraction, seed) == (0.25, 0):
        order = torch.from_numpy(np.load(DIGITS_SPLIT_FILE).astype(np.int64))  # (1797,) train, then test
        train_index, test_index = order[:1347], order[1347:]
    else:
        from sklearn.model_selection import train_test_split

        train_index, test_index = train_test_split(
            np.arange(len(labels)), test_size=test_fraction, stratify=labels.numpy(), random_state=seed
        )
    classes = [str(digit) for digit in range(10)]
    train = ImageDataset(images[train_index], labels[train_index], classes)
    test = ImageDataset(images[test_index], labels[test_index], classes)
    return train, test


COLOURS = {  # RGB in [0, 1], chosen to stay distinct for colour-blind readers too
    "red": (0.90, 0.20, 0.15),
    "yellow": (0.95, 0.85, 0.10),
    "cyan": (0.15, 0.80, 0.90),
    "white": (0.95, 0.95, 0.95),
}
SHAPES = ("square", "disc", "triangle", "cross")
RELATIONAL_TASKS = {
    "same_colour": ["different colours", "same colour"],  # compare what the two objects are
    "same_shape": ["different shapes", "same shape"],
    "orientation": ["side by side", "one above the other"],  # compare where they are
}


def shape_mask(shape: str, size: int) -> np.ndarray:
    """(size, size) bool mask of one object: a square, disc, triangle (pointing up) or cross."""
    size = check_whole(size, "size")
    r = (size - 1) / 2
    yy, xx = np.mgrid[0:size, 0:size]
    if shape == "square":
        return np.ones((size, size), dtype=bool)
    if shape == "disc":
        return (yy - r) ** 2 + (xx - r) ** 2 <= (r + 0.3) ** 2
    if shape == "triangle":
        return np.abs(xx - r) <= (yy + 0.5) / 2 + 0.01
    if shape == "cross":
        return (np.abs(xx - r) <= size / 6) | (np.abs(yy - r) <= size / 6)
    raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")


PLACEMENT_TRIES = 10_000  # per image; the defaults need about 2 tries ("same_*") or 17 ("orientation")
MEMORY_LIMIT = 2 * 2**30  # bytes make_relational may use while it draws (Binder has 1 GB in all)
NOISE_CHUNK = 256  # images whose background noise is drawn at once: float64 draws are twice their float32 size
MIN_SHAPE_SIZE = 5  # below 5 pixels some of the four shapes have the very same pixels


def _farthest_apart(task: str, span: int, mirrored: bool = False) -> float:
    """The largest distance between the two object centres that make_relational's placement allows,
    with `span` positions per axis; for "orientation" the smaller axis differs by at most 3 pixels,
    and "one above the other" needs two different rows; mirrored objects share a row, their left
    edges adding up to span - 1, so they are at most span - 1 apart (both at the sides). -1 when no
    placement exists."""
    if mirrored:
        return float(span - 1)
    if task != "orientation":
        return math.hypot(span - 1, span - 1)
    return math.hypot(span - 1, min(3, span - 2)) if span >= 2 else -1.0


def _check_relational(
    num_images: int,
    task: str,
    image_size: int,
    object_size: int,
    min_distance: float,
    noise: float,
    seed: int,
    mirrored: bool,
) -> None:
    """Raise unless make_relational can draw these images, in bounded time and memory."""
    if not isinstance(task, str) or task not in RELATIONAL_TASKS:
        error = ValueError if isinstance(task, str) else WrongTypeError
        raise error(f"unknown task {task!r}; expected one of {list(RELATIONAL_TASKS)}")
    if check_flag(mirrored, "mirrored") and task == "orientation":
        raise ValueError(
            "mirrored=True puts the two objects side by side, at mirrored places in one row, so every "
            "image of task='orientation' would be 'side by side': use task='same_colour' or 'same_shape'"
        )
    check_whole(num_images, "num_images")
    check_whole(image_size, "image_size", meaning=" of pixels per side")
    smallest = MIN_SHAPE_SIZE if task == "same_shape" else 1
    check_whole(object_size, "object_size", minimum=smallest, maximum=image_size, meaning=" of pixels")
    check_number(noise, "noise", low=0, meaning=" (the background's standard deviation)")
    check_whole(seed, "seed", minimum=0)
    apart = round(object_size * math.sqrt(2), 2)  # centres this far apart: the two objects cannot overlap
    why = " of pixels between the centres (at least object_size x 1.41, or the objects could overlap)"
    check_number(min_distance, "min_distance", low=apart, meaning=why)
    farthest = _farthest_apart(task, image_size - object_size + 1, mirrored)
    if farthest < min_distance:
        how = " nearly in one row or one column (task='orientation')" if task == "orientation" else ""
        how = " at mirrored places, side by side (mirrored=True)" if mirrored else how
        raise ValueError(
            f"two objects of {object_size} x {object_size} pixels{how} can be at most {max(farthest, 0):.1f} pixels "
            f"apart (centre to centre) in images of {image_size} x {image_size}, less than "
            f"min_distance={min_distance}: use a larger image_size, a smaller object_size or a smaller min_distance"
        )
    needed = num_images * image_size**2 * (3 * 4 + 1)  # the float32 images and the masks (the noise comes in chunks)
    if needed > MEMORY_LIMIT:
        raise ValueError(
            f"make_relational(num_images={num_images}, image_size={image_size}) would need about "
            f"{needed / 2**30:.1f} GB of memory to draw, more than {MEMORY_LIMIT / 2**30:.0f} GB: "
            "ask for fewer or smaller images"
        )


def make_relational(
    num_images: int,
    task: str = "same_colour",
    image_size: int = 32,
    object_size: int = 7,
    min_distance: float = 14.0,
    noise: float = 0.05,
    seed: int = 0,
    mirrored: bool = False,
) -> ImageDataset:
    """Images with two objects far apart, labelled by a relation between them.

    Each image holds two small coloured shapes whose centres are at least `min_distance` pixels
    apart, on a dark, slightly noisy background. With task="same_colour" the label is 1 when both
    have the same colour (their shapes are random), with "same_shape" when both have the same
    shape, and with "orientation" when one is above the other (0: side by side; colours and
    shapes random). Half the images are of each class. Only a model that compares the two
    far-apart objects can solve it, and "orientation" needs to know where patches are.
    Deterministic given `seed`.

    With mirrored=True ("same_colour" and "same_shape" only) the two objects always sit at mirrored
    places about the image's vertical centre line: the same top, and left2 = image_size -
    object_size - left1 (the first corner is drawn again until the centres are min_distance
    apart). The default, mirrored=False, draws the very images it drew before the option came.

    min_distance must be at least object_size x sqrt(2) (the objects never overlap) and no more
    than the image leaves room for; "same_shape" needs object_size >= 5 (smaller shapes look
    alike). Settings that cannot be drawn, or only in too many tries or too much memory, raise
    a ValueError with the numbers.

    Returns:
        ImageDataset with images (N, 3, H, W) in [0, 1], labels (N,), `object_masks`
        (N, H, W) bool, True on the objects' pixels (to check where a model looks), and
        `object_boxes` (N, 2, 4) int64, each object's square as (top, left, bottom, right), the
        last two exclusive.
    """
    _check_relational(num_images, task, image_size, object_size, min_distance, noise, seed, mirrored)
    rng = np.random.default_rng(seed)
    colours = np.array(list(COLOURS.values()), dtype=np.float32)  # (4, 3)
    channels_first = np.empty((num_images, 3, image_size, image_size), dtype=np.float32)  # (N, 3, H, W), the result
    images = channels_first.transpose(0, 2, 3, 1)  # (N, H, W, 3): a view of it, drawn in pixel by pixel
    for start in range(0, num_images, NOISE_CHUNK):  # the same draws as one call, without a float64 copy of all
        chunk = images[start : start + NOISE_CHUNK]
        chunk[:] = rng.normal(0.08, noise, size=chunk.shape)
    masks = np.zeros((num_images, image_size, image_size), dtype=bool)
    boxes = np.zeros((num_images, 2, 4), dtype=np.int64)  # (image, object, (top, left, bottom, right))
    labels = np.arange(num_images) % 2  # half and half, then shuffled below
    rng.shuffle(labels)
    span = image_size - object_size + 1
    for i, label in enumerate(labels):
        for _ in range(PLACEMENT_TRIES):  # two top-left corners whose object centres are far enough apart
            if mirrored:  # one corner drawn, the other its mirror image: the same top, left2 = span - 1 - left1
                top, left = rng.integers(0, span, size=2)
                corners = np.array([[top, left], [top, span - 1 - left]])  # (object, (top, left))
            else:
                corners = rng.integers(0, span, size=(2, 2))  # (object, (top, left))
            rows_apart, cols_apart = np.abs(corners[0] - corners[1])
            if np.hypot(rows_apart, cols_apart) < min_distance:
                continue
            if task != "orientation" or (min(rows_apart, cols_apart) <= 3 and (rows_apart > cols_apart) == label):
                break  # for "orientation": nearly in one row (label 0) or one column (label 1)
        else:
            raise ValueError(
                f"found no place for two objects at least min_distance={min_distance} pixels apart in "
                f"{PLACEMENT_TRIES} random tries (image {i}): such places are too rare in a {image_size} x "
                f"{image_size} image; use a smaller min_distance or a larger image_size"
            )
        if task == "orientation":
            colour_ids, shape_ids = rng.integers(0, len(colours), size=2), rng.integers(0, len(SHAPES), size=2)
        else:
            related = rng.choice(len(colours) if task == "same_colour" else len(SHAPES), size=2, replace=False)
            if label:
                related[1] = related[0]
            free = rng.integers(0, len(SHAPES) if task == "same_colour" else len(colours), size=2)
            colour_ids, shape_ids = (related, free) if task == "same_colour" else (free, related)
        boxes[i, :, :2], boxes[i, :, 2:] = corners, corners + object_size
        for (top, left), colour, shape in zip(corners, colour_ids, shape_ids):
            mask = shape_mask(SHAPES[shape], object_size)
            window = (slice(top, top + object_size), slice(left, left + object_size))
            images[i][window][mask] = colours[colour]
            masks[i][window] |= mask
    np.clip(images, 0.0, 1.0, out=images)  # in place: Binder's memory is tight
    images = torch.from_numpy(channels_first)  # (N, 3, H, W), no copy
    dataset = ImageDataset(images, torch.from_numpy(labels).long(), RELATIONAL_TASKS[task])
    dataset.object_masks = torch.from_numpy(masks)
    dataset.object_boxes = torch.from_numpy(boxes)
    return dataset


def load_relational(
    train_size: int = 4000, test_size: int = 1000, task: str = "same_colour", seed: int = 0, mirrored: bool = False
) -> tuple[ImageDataset, ImageDataset]:
    """A train and a test set of `make_relational` images, drawn from different seeds (mirrored=True:
    the two objects at mirrored places, left and right, in both)."""
    check_whole(train_size, "train_size")
    check_whole(test_size, "test_size")
    train = make_relational(train_size, task=task, seed=seed, mirrored=mirrored)
    test = make_relational(test_size, task=task, seed=seed + 1_000_003, mirrored=mirrored)
    return train, test


BUNDLED = {"digits": load_digits, "relational": load_relational}
STANDARD = ("mnist", "fashion_mnist", "cifar10")


def load_training_set(name: str = "digits", **options) -> tuple[ImageDataset, ImageDataset]:
    """(train, test) by name: "digits" and "relational" ship with the course; "mnist",
    "fashion_mnist" and "cifar10" are read from their standard files (see
    `utils.standard_datasets`; pass download=True once, when online).

    Extra keyword arguments go to the loader (e.g. task="same_shape" for "relational").
    """
    names = list(BUNDLED) + list(STANDARD)
    if not isinstance(name, str):
        raise WrongTypeError(f"name must be a string, one of {names}, got {describe(name)}")
    if name not in names:
        hint = f" (did you mean {name.lower()!r}?)" if name.lower() in names else ""
        raise ValueError(f"unknown training set {name!r}; expected one of {names}{hint}")
    loader = BUNDLED.get(name, load_standard_dataset)
    parameters = [p for p in inspect.signature(loader).parameters if p != "name"]
    unknown = [option for option in options if option not in parameters]
    if unknown:
        raise WrongTypeError(f"load_training_set({name!r}) takes the options {parameters}, got {unknown}")
    return loader(**options) if name in BUNDLED else loader(name, **options)
