"""MNIST, Fashion-MNIST and CIFAR-10 read from their standard files, for learners who are online.

The lessons train on the sets in `utils.data`, which ship with the course. To train on a
standard benchmark instead, change one argument:

    train, test = load_standard_dataset("cifar10", download=True)

Where the files live (the cache): `<base>/<name>/`, where `<base>` is the `root` argument,
else the environment variable `VIT_DATA_DIR`, else `~/.cache/vit-from-scratch`. Every dataset
gets its own folder because MNIST and Fashion-MNIST use the same file names. Offline, copy the
files listed in `CHECKSUMS` into that folder yourself (as they are: still gzipped / tarred).

Every file is checked against its published MD5 before it is read. The files are parsed with
numpy only (no torchvision). CIFAR-10's python version stores its batches as Python pickles:
`pickle` is used on exactly those six members of the verified archive and on nothing else.
"""

import gzip
import hashlib
import os
import pickle
import tarfile
import urllib.request
from pathlib import Path

import numpy as np
import torch

from utils.datasets import ImageDataset

# Where each dataset's files are published; a file's URL is the base URL + its name.
URLS = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist/",  # PyTorch's mirror of LeCun's files
    "fashion_mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "cifar10": "https://www.cs.toronto.edu/~kriz/",
}

# The files each dataset needs and their published MD5 checksums (as in torchvision's
# datasets/mnist.py and datasets/cifar.py; CIFAR-10's also on https://www.cs.toronto.edu/~kriz/cifar.html).
CHECKSUMS = {
    "mnist": {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    },
    "cifar10": {
        "cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a",
    },
}

CLASSES = {
    "mnist": [str(digit) for digit in range(10)],
    "fashion_mnist": [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ],
    "cifar10": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"],
}

CIFAR10_TRAIN_BATCHES = [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)]
CIFAR10_TEST_BATCHES = ["cifar-10-batches-py/test_batch"]


def dataset_dir(name: str, root: str | os.PathLike | None = None) -> Path:
    """The folder that holds `name`'s files: `<root or $VIT_DATA_DIR or ~/.cache/vit-from-scratch>/<name>`."""
    _check_name(name)
    base = root or os.environ.get("VIT_DATA_DIR") or Path.home() / ".cache" / "vit-from-scratch"
    return Path(base).expanduser() / name


def load_standard_dataset(
    name: str, root: str | os.PathLike | None = None, download: bool = False
) -> tuple[ImageDataset, ImageDataset]:
    """MNIST, Fashion-MNIST or CIFAR-10, read from the standard files in the cache.

    Args:
        name: "mnist", "fashion_mnist" or "cifar10".
        root: the cache's base folder; the files go in `<root>/<name>/` (see `dataset_dir`).
        download: fetch missing files from their official URL (needs a network connection).

    Returns:
        (train, test) ImageDatasets: images float32 in [0, 1], (N, 1, 28, 28) for the MNISTs
        (60,000 train, 10,000 test), (N, 3, 32, 32) RGB for CIFAR-10 (50,000 and 10,000);
        labels (N,) int64; the class names in `dataset.classes`.
    """
    folder = dataset_dir(name, root)
    _fetch(name, folder, download)
    datasets = []
    for split in ("train", "test"):
        if name == "cifar10":
            batches = CIFAR10_TRAIN_BATCHES if split == "train" else CIFAR10_TEST_BATCHES
            pixels, labels = _read_cifar(folder / "cifar-10-python.tar.gz", batches)  # (N, 3, 32, 32), (N,)
        else:
            prefix = "train" if split == "train" else "t10k"
            pixels = _read_idx(folder / f"{prefix}-images-idx3-ubyte.gz", ndim=3)[:, None]  # (N, 1, 28, 28)
            labels = _read_idx(folder / f"{prefix}-labels-idx1-ubyte.gz", ndim=1)  # (N,)
        if len(pixels) != len(labels):
            raise ValueError(f"{name} {split}: {len(pixels)} images but {len(labels)} labels")
        images = torch.from_numpy(pixels.astype(np.float32) / np.float32(255))  # (N, C, H, W) in [0, 1]
        datasets.append(ImageDataset(images, torch.from_numpy(labels.astype(np.int64)), CLASSES[name]))
    return datasets[0], datasets[1]


def _check_name(name: str) -> None:
    if name not in CHECKSUMS:
        raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(map(repr, CHECKSUMS))}")


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _verify(path: Path, expected: str, advice: str) -> None:
    """Raise a ValueError that says what to do if `path`'s MD5 is not `expected`."""
    actual = _md5(path)
    if actual != expected:
        raise ValueError(
            f"{path.name} in {path.parent} has MD5 {actual}, expected {expected}: the file is damaged, "
            f"incomplete or not the official one. {advice}"
        )


def _fetch(name: str, folder: Path, download: bool) -> None:
    """Make sure every file of `name` is in `folder` and has its published checksum."""
    files, url = CHECKSUMS[name], URLS[name]
    missing = [file for file in files if not (folder / file).exists()]
    if missing and not download:
        raise FileNotFoundError(
            f"{name}: missing {', '.join(missing)} in {folder}. Put the files there unchanged (still "
            f"compressed; official copies at {url}), or pass download=True when you are online."
        )
    for file in missing:
        _download(url + file, folder / file, files[file])
    for file, md5 in files.items():
        _verify(folder / file, md5, f"Delete it and load again with download=True, or copy the file from {url + file}.")


def _download(url: str, path: Path, md5: str) -> None:
    """Fetch `url` to `path` atomically: into `path.part` first, renamed only once its MD5 is right."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    print(f"Downloading {url} to {path.parent}")
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(part, "wb") as file:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                file.write(chunk)
        _verify(part, md5, f"The download from {url} went wrong; try again later.")
        os.replace(part, path)  # atomic: `path` is either absent or complete and verified
    finally:
        part.unlink(missing_ok=True)


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """Read a gzipped IDX file of unsigned bytes: (N, 28, 28) images (ndim 3) or (N,) labels (ndim 1).

    IDX layout, all integers big-endian: a 4-byte magic number 0x00 0x00 <type> <ndim> (type 0x08
    is uint8, so 0x00000803 for images, 0x00000801 for labels), then ndim uint32 sizes, then the
    values in row-major order.
    """
    with gzip.open(path, "rb") as file:
        data = file.read()
    magic = int.from_bytes(data[:4], "big")
    if magic != 0x0800 + ndim:
        raise ValueError(f"{path.name}: IDX magic number {magic:#010x}, expected {0x0800 + ndim:#010x}")
    shape = tuple(int(size) for size in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    values = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if values.size != np.prod(shape):
        raise ValueError(f"{path.name}: header says {shape}, but {values.size} values follow")
    return values.reshape(shape)


def _read_cifar(archive: Path, members: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Read CIFAR-10 batches straight out of the (verified) tar.gz: images (N, 3, 32, 32) uint8, labels (N,).

    Each batch is a pickled dict: b"data" a (10000, 3072) uint8 array whose row is one image as
    three 32 x 32 planes, red, green then blue, each row-major; b"labels" a list of 10000 ints.
    The archive is read in one pass (its members are not in batch order); nothing is written to disk.
    """
    batches = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name in members:  # pickle is used on these members only, after the MD5 check
                batches[member.name] = pickle.load(tar.extractfile(member), encoding="bytes")
    missing = [member for member in members if member not in batches]
    if missing:
        raise ValueError(f"{archive.name} has no {', '.join(missing)}: it is not CIFAR-10's python version")
    images = [np.asarray(batches[m][b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32) for m in members]  # (n, C, H, W)
    labels = [np.asarray(batches[m][b"labels"], dtype=np.int64) for m in members]  # (n,)
    return np.concatenate(images), np.concatenate(labels)
