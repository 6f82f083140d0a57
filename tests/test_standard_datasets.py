"""MNIST, Fashion-MNIST and CIFAR-10 from their standard files, on tiny files written here in the real formats.

Nothing is downloaded: every test fails if it touches the network, except the download test,
which serves local bytes through a patched `urllib.request.urlopen`.
"""

import gzip
import hashlib
import io
import pickle
import struct
import tarfile
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

import utils.standard_datasets as sd
from utils.data import ImageDataset

IDX_FILES = [  # in the order of mnist_files()'s arrays
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, no VIT_DATA_DIR from the machine, and a home folder of our own."""

    def no_network(*args, **kwargs):
        pytest.fail(f"a test tried to download: urlopen{args}")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.delenv("VIT_DATA_DIR", raising=False)
    monkeypatch.setattr(Path, "home", lambda: tmp_path / "home")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def idx_bytes(array: np.ndarray) -> bytes:
    """A gzipped IDX file of uint8 values, built with struct: magic 0x0000 08 <ndim>, big-endian sizes, values."""
    header = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return gzip.compress(header + array.astype(np.uint8).tobytes())


def mnist_files() -> tuple[dict[str, bytes], dict[str, np.ndarray]]:
    """5 train and 3 test images of 28 x 28 with known pixels, as the four IDX files and as arrays."""
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
        "train_labels": np.array([3, 0, 9, 1, 7], dtype=np.uint8),
        "test_images": rng.integers(0, 256, (3, 28, 28), dtype=np.uint8),
        "test_labels": np.array([2, 8, 5], dtype=np.uint8),
    }
    arrays["train_images"][2, 3, 4] = 200  # image 2, row 3, column 4
    arrays["train_images"][0, 0, 0], arrays["train_images"][1, 27, 27] = 0, 255
    files = dict(zip(IDX_FILES, (idx_bytes(array) for array in arrays.values())))
    return files, arrays


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def cifar_archive() -> tuple[bytes, np.ndarray, np.ndarray]:
    """A cifar-10-python.tar.gz with 5 train batches of 2 images and a test batch of 3, as pickled dicts."""
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, (13, 3072), dtype=np.uint8)  # one row per image: R plane, G plane, B plane
    data[4, :1024], data[4, 1024:2048], data[4, 2048:] = 10, 20, 30  # image 4 is one colour: R 10, G 20, B 30
    data[7, 1024 + 32 * 5 + 6] = 123  # image 7, green, row 5, column 6
    labels = np.arange(13) % 10
    members = {"cifar-10-batches-py/readme.html": b"<html>not a pickle</html>"}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for i, name in enumerate(names):
        rows = slice(2 * i, 2 * i + 2) if i < 5 else slice(10, 13)
        batch = {
            b"batch_label": name.encode(),
            b"labels": [int(label) for label in labels[rows]],
            b"data": data[rows],
            b"filenames": [b"img.png"] * len(labels[rows]),
        }
        members[f"cifar-10-batches-py/{name}"] = pickle.dumps(batch, protocol=2)  # like Python 2's cPickle files
    members["cifar-10-batches-py/batches.meta"] = b"not a pickle either: only the six batches may be unpickled"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        order = ["readme.html", "data_batch_4", "test_batch", "data_batch_3", "batches.meta", "data_batch_2"]
        order += ["data_batch_5", "data_batch_1"]  # scrambled: the real archive is not in batch order either
        for name in order:
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(members[info.name])
            tar.addfile(info, io.BytesIO(members[info.name]))
    return buffer.getvalue(), data, labels


@pytest.fixture
def mnist(monkeypatch, tmp_path):
    """The tiny MNIST files in tmp_path/mnist, with the checksum table patched to match them."""
    files, arrays = mnist_files()
    write_files(tmp_path / "mnist", files)
    monkeypatch.setitem(sd.CHECKSUMS, "mnist", {name: md5(data) for name, data in files.items()})
    return arrays


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
def test_mnist_formats(name, monkeypatch, tmp_path):
    files, arrays = mnist_files()
    write_files(tmp_path / name, files)
    monkeypatch.setitem(sd.CHECKSUMS, name, {file: md5(data) for file, data in files.items()})
    train, test = sd.load_standard_dataset(name, root=tmp_path)
    assert isinstance(train, ImageDataset) and isinstance(test, ImageDataset)
    assert train.images.shape == (5, 1, 28, 28) and test.images.shape == (3, 1, 28, 28)
    assert train.images.dtype == torch.float32 and train.labels.dtype == torch.int64
    assert train.images.min() == 0 and train.images.max() == 1
    assert train.labels.tolist() == [3, 0, 9, 1, 7] and test.labels.tolist() == [2, 8, 5]
    assert train.images[2, 0, 3, 4] == pytest.approx(200 / 255, abs=1e-7)  # row 3, column 4: not transposed
    assert train.images[2, 0, 4, 3] == pytest.approx(arrays["train_images"][2, 4, 3] / 255, abs=1e-7)
    torch.testing.assert_close(test.images[:, 0] * 255, torch.tensor(arrays["test_images"], dtype=torch.float32))
    image, label = train[2]
    assert image.shape == (1, 28, 28) and label == 9


def test_class_names(mnist, tmp_path):
    train, test = sd.load_standard_dataset("mnist", root=tmp_path)
    assert train.classes == test.classes == ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]
    assert sd.CLASSES["fashion_mnist"] == [
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
    ]
    assert sd.CLASSES["cifar10"] == [
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    ]


def test_cifar10(monkeypatch, tmp_path):
    archive, data, labels = cifar_archive()
    write_files(tmp_path / "cifar10", {"cifar-10-python.tar.gz": archive})
    monkeypatch.setitem(sd.CHECKSUMS, "cifar10", {"cifar-10-python.tar.gz": md5(archive)})
    train, test = sd.load_standard_dataset("cifar10", root=tmp_path)
    assert train.images.shape == (10, 3, 32, 32) and test.images.shape == (3, 3, 32, 32)
    assert train.images.dtype == torch.float32 and test.labels.dtype == torch.int64
    assert train.images.min() >= 0 and train.images.max() <= 1
    assert train.labels.tolist() == labels[:10].tolist()  # batches 1..5 in order, whatever the archive's order
    assert test.labels.tolist() == labels[10:].tolist()
    assert train.classes[train.labels[4]] == "deer"
    for channel, value in enumerate([10, 20, 30]):  # planes are R, G, B in that order
        torch.testing.assert_close(train.images[4, channel], torch.full((32, 32), value / 255))
    assert train.images[7, 1, 5, 6] == pytest.approx(123 / 255, abs=1e-7)  # green, row 5, column 6
    expected = torch.tensor(data.reshape(13, 3, 32, 32), dtype=torch.float32) / 255
    torch.testing.assert_close(torch.cat([train.images, test.images]), expected)


def test_corrupted_file_is_rejected(mnist, tmp_path):
    path = tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte flipped in transit
    path.write_bytes(bytes(data))
    actual = md5(path.read_bytes())
    with pytest.raises(ValueError) as error:
        sd.load_standard_dataset("mnist", root=tmp_path)
    message = str(error.value)
    assert "t10k-labels-idx1-ubyte.gz" in message
    assert sd.CHECKSUMS["mnist"]["t10k-labels-idx1-ubyte.gz"] in message and actual in message
    assert "download=True" in message and "Delete it" in message


def test_missing_file_says_what_to_put_where(mnist, tmp_path):
    (tmp_path / "mnist" / "train-labels-idx1-ubyte.gz").unlink()
    (tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError) as error:
        sd.load_standard_dataset("mnist", root=tmp_path)
    message = str(error.value)
    assert "train-labels-idx1-ubyte.gz" in message and "t10k-images-idx3-ubyte.gz" in message
    assert "train-images-idx3-ubyte.gz" not in message  # only what is missing
    assert str(tmp_path / "mnist") in message
    assert sd.URLS["mnist"] in message and "download=True" in message


def test_vit_data_dir_is_honoured(mnist, monkeypatch, tmp_path):
    monkeypatch.setenv("VIT_DATA_DIR", str(tmp_path))
    train, _ = sd.load_standard_dataset("mnist")
    assert len(train) == 5
    assert sd.dataset_dir("mnist") == tmp_path / "mnist"
    assert sd.dataset_dir("mnist", root=tmp_path / "other") == tmp_path / "other" / "mnist"  # root comes first


def test_default_cache_dir(tmp_path):
    assert sd.dataset_dir("cifar10") == tmp_path / "home" / ".cache" / "vit-from-scratch" / "cifar10"
    with pytest.raises(FileNotFoundError, match="vit-from-scratch"):
        sd.load_standard_dataset("fashion_mnist")


@pytest.mark.parametrize("name", ["imagenet", "MNIST", "fashion-mnist"])
def test_unknown_name(name, tmp_path):
    with pytest.raises(ValueError) as error:
        sd.load_standard_dataset(name, root=tmp_path)
    assert repr(name) in str(error.value)
    assert all(repr(known) in str(error.value) for known in ["mnist", "fashion_mnist", "cifar10"])


def test_wrong_idx_magic_is_rejected(monkeypatch, tmp_path):
    files, _ = mnist_files()
    files["t10k-labels-idx1-ubyte.gz"] = files["t10k-images-idx3-ubyte.gz"]  # images where labels belong
    write_files(tmp_path / "mnist", files)
    monkeypatch.setitem(sd.CHECKSUMS, "mnist", {name: md5(data) for name, data in files.items()})
    with pytest.raises(ValueError, match=r"t10k-labels-idx1-ubyte.gz: IDX magic number 0x00000803, expected 0x0+801"):
        sd.load_standard_dataset("mnist", root=tmp_path)


def test_download_skips_files_already_there(mnist, tmp_path):
    train, _ = sd.load_standard_dataset("mnist", root=tmp_path, download=True)  # urlopen fails the test if called
    assert len(train) == 5


def test_download(monkeypatch, tmp_path):
    files, arrays = mnist_files()
    monkeypatch.setitem(sd.CHECKSUMS, "mnist", {name: md5(data) for name, data in files.items()})
    served = {sd.URLS["mnist"] + name: data for name, data in files.items()}
    served[sd.URLS["mnist"] + "t10k-images-idx3-ubyte.gz"] = b"an error page, not the file"
    requested = []

    def fake_urlopen(url, timeout=None):
        requested.append(url)
        return io.BytesIO(served[url])

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    folder = tmp_path / "mnist"

    # A bad download is rejected by its checksum and leaves nothing behind, neither the file nor a .part.
    with pytest.raises(ValueError, match="t10k-images-idx3-ubyte.gz.part .*has MD5 .*try again"):
        sd.load_standard_dataset("mnist", root=tmp_path, download=True)
    assert not (folder / "t10k-images-idx3-ubyte.gz").exists()
    assert sorted(path.name for path in folder.iterdir()) == IDX_FILES[:2]

    # Once the server sends the right bytes, only the missing files are fetched, verified and renamed into place.
    served[sd.URLS["mnist"] + "t10k-images-idx3-ubyte.gz"] = files["t10k-images-idx3-ubyte.gz"]
    requested.clear()
    train, test = sd.load_standard_dataset("mnist", root=tmp_path, download=True)
    assert requested == [sd.URLS["mnist"] + name for name in IDX_FILES[2:]]
    assert sorted(path.name for path in folder.iterdir()) == sorted(IDX_FILES)
    assert all((folder / name).read_bytes() == data for name, data in files.items())
    assert train.labels.tolist() == [3, 0, 9, 1, 7]
    torch.testing.assert_close(test.images[:, 0] * 255, torch.tensor(arrays["test_images"], dtype=torch.float32))


def test_real_urls_and_checksums():
    """The table holds the published values (torchvision's datasets, the CIFAR page)."""
    assert sd.URLS["mnist"] == "https://ossci-datasets.s3.amazonaws.com/mnist/"
    assert sd.URLS["cifar10"] + "cifar-10-python.tar.gz" == "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    assert sd.CHECKSUMS["cifar10"] == {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"}
    assert sorted(sd.CHECKSUMS["mnist"]) == sorted(sd.CHECKSUMS["fashion_mnist"]) == sorted(IDX_FILES)
    checksums = [value for table in sd.CHECKSUMS.values() for value in table.values()]
    assert len(set(checksums)) == 9 and all(len(value) == 32 and int(value, 16) >= 0 for value in checksums)
