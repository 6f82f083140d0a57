"""Weight files: reading them, the cache of downloaded weights, the one download (on request),
and the tiny ViTs shipped with the course in utils/checkpoints/.

Turning a file's tensors into a model of another layout is `utils.pretrained`'s job; the recipes
that train the shipped checkpoints are in tools/train_checkpoints.py (`make checkpoints`).
"""

import dataclasses
import json
import math
import os
import pickle
import struct
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from utils.validation import WrongTypeError
from utils.vit import VisionTransformer, ViTConfig

# Where downloaded weights are kept; set VIT_WEIGHTS_DIR to keep them elsewhere.
CACHE_DIR = Path(os.environ.get("VIT_WEIGHTS_DIR", "~/.cache/vit-from-scratch/weights")).expanduser()

# The tiny ViTs trained by lesson 6's recipes, one <name>.pt file each.
CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"

VIT_B16_REPO = "google/vit-base-patch16-224"  # the Hugging Face repository of lesson 8's ViT-B/16

# How a file that should hold weights and does not is described (then what is wrong with it).
NOT_SAFETENSORS = "is not a safetensors file (an HTML page? a git-LFS pointer? a partial download?)"
NOT_TORCH = "is not a torch file (an HTML page? a git-LFS pointer? a partial download?)"


def load_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file, or of a torch file (.pt, .pth, .bin) read with
    weights_only=True (no code runs); a {"model": ...} or {"state_dict": ...} wrapper is opened.

    A file that is no such file (a web page, a git-LFS pointer, a cut download) or that holds
    Python objects besides tensors raises a ValueError that says which."""
    path = _weights_file(path)
    suffix = path.suffix.lower()
    if suffix == ".safetensors":
        read_safetensors_header(path)  # a clear error for a file that is none
        try:
            return load_file(path)
        except SafetensorError as error:
            raise ValueError(f"{path} {NOT_SAFETENSORS}: {error}") from error
    if suffix not in (".pt", ".pth", ".bin"):
        raise ValueError(f"expected a .safetensors, .pt, .pth or .bin file, got {path.name}")
    state = _torch_load(path)
    for wrapper in ("model", "state_dict"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    return _named_tensors(path, state)


def _weights_file(path: str | Path) -> Path:
    """`path` as a Path, if it names a file: FileNotFoundError if nothing is there, ValueError for a folder."""
    if not isinstance(path, (str, Path)):
        raise WrongTypeError(f"expected the path of a weights file (a str or Path), got {type(path).__name__}")
    path = Path(path).expanduser()
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix.lower() in (".safetensors", ".pt", ".pth", ".bin"))
        raise ValueError(f"{path} is a folder, not a weights file; the weights files in it: {inside or 'none'}")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


def _what_it_looks_like(start: bytes) -> str:
    """What the first bytes of a file that is no weights file suggest it is, as a sentence to append."""
    text = start.lstrip().lower()
    if not start:
        return ""
    if text.startswith(b"version https://git-lfs"):
        return (
            " (it is a git-LFS pointer, a small text file standing in for the real one: "
            "run `git lfs pull`, or download the file itself)"
        )
    if text.startswith((b"<!doctype html", b"<html", b"<?xml", b"<")):
        return " (it is an HTML or XML page: the download saved a web page, perhaps a log-in or error page)"
    if start[8:9] == b"{":  # a safetensors header: what is wrong is said already
        return ""
    return f" (it begins {start[:24]!r})"


def _torch_load(path: Path):
    """torch.load(path, weights_only=True), with an error that says what the file is when it fails."""
    with open(path, "rb") as file:
        start = file.read(64)
    is_zip = start.startswith(b"PK\x03\x04")  # torch's format since 1.6
    is_pickle = start[:1] == b"\x80" and start[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")  # the older one
    if not start:
        raise ValueError(f"{path} {NOT_TORCH}: the file is empty (0 bytes)")
    if not (is_zip or is_pickle):
        hint = ""
        if start[8:9] == b"{":
            hint = "; it looks like a safetensors file: name it .safetensors"
        raise ValueError(
            f"{path} {NOT_TORCH}: it is neither a zip archive nor a pickle, torch's two formats"
            f"{_what_it_looks_like(start)}{hint}"
        )
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "Weights only load failed" not in str(error):
            raise ValueError(f"{path} {NOT_TORCH}: {error}") from error
        raise ValueError(
            f"{path} holds Python objects besides tensors, and reading them could run code from the file, "
            "so it was refused (torch.load with weights_only=True). A whole model saved with "
            "torch.save(model)? Save model.state_dict() instead; load it with weights_only=False only "
            "if you made the file yourself or trust where it comes from"
        ) from error
    except (RuntimeError, EOFError) as error:
        raise ValueError(f"{path} {NOT_TORCH}: {error}") from error


def _named_tensors(path: Path, state) -> dict[str, torch.Tensor]:
    """`state` if it is a dict of named tensors, else a ValueError that says what it holds."""
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a {type(state).__name__}, not a dict of named tensors")
    others = {name: type(value).__name__ for name, value in state.items() if not isinstance(value, torch.Tensor)}
    if others:
        raise ValueError(
            f"{path} holds entries that are no tensors: {others}; if the weights sit in one of them, "
            "read the file with torch.load(path, weights_only=True) and take that entry"
        )
    return state


class TensorEntry(NamedTuple):
    """Where one tensor of a safetensors file lies: its dtype, shape and bytes [start, end) in the file."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int
    end: int


# dtype names of the safetensors format -> torch dtypes
_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
_MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit


class _NotSafetensors(ValueError):
    """What is wrong with a file that should be a safetensors file (read_safetensors_header adds the path)."""


def read_safetensors_header(path: str | Path) -> dict[str, TensorEntry]:
    """The tensors a .safetensors file holds, {name: TensorEntry}, from its header alone, checked.

    The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape,
    byte offsets; "__metadata__") and the raw bytes. Anything else (a web page, a git-LFS
    pointer, a cut download) raises a ValueError that names what is wrong: a header length
    longer than the file, no JSON object, an unknown dtype, a shape that is no list of counts,
    offsets outside the file or not numel x itemsize apart, tensors that overlap.
    """
    path = _weights_file(path)
    with open(path, "rb") as file:
        start = file.read(64)
        file.seek(0)
        try:
            return _parse_safetensors_header(file, path.stat().st_size)
        except _NotSafetensors as problem:
            raise ValueError(f"{path} {NOT_SAFETENSORS}: {problem}{_what_it_looks_like(start)}") from None


def _parse_safetensors_header(file, file_size: int) -> dict[str, TensorEntry]:
    """The checked entries of an open safetensors file; _NotSafetensors says what is wrong."""
    length = file.read(8)
    if file_size == 0:
        raise _NotSafetensors("the file is empty (0 bytes)")
    if len(length) < 8:
        raise _NotSafetensors(f"it has {file_size} bytes, fewer than the 8 of the header length it must begin with")
    header_size = struct.unpack("<Q", length)[0]
    if header_size > min(file_size - 8, _MAX_HEADER_BYTES):
        raise _NotSafetensors(
            f"its first 8 bytes give a header of {header_size:,} bytes, but the file has only {file_size:,} bytes"
        )
    try:
        header = json.loads(file.read(header_size).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _NotSafetensors(f"its header is no valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise _NotSafetensors(f"its header is a JSON {type(header).__name__}, not an object {{name: tensor}}")
    if not isinstance(header.pop("__metadata__", {}), dict):
        raise _NotSafetensors("its __metadata__ is no JSON object")
    data_start = 8 + header_size
    entries = {name: _safetensors_entry(name, value, data_start, file_size) for name, value in header.items()}
    in_order = sorted(entries.items(), key=lambda item: (item[1].start, item[1].end))
    for (before, first), (after, second) in pairwise(in_order):
        if second.start < first.end:
            raise _NotSafetensors(f"tensors {before!r} and {after!r} overlap in the file")
    return entries


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _safetensors_entry(name: str, value, data_start: int, file_size: int) -> TensorEntry:
    """One header entry {"dtype", "shape", "data_offsets"} checked and turned into a TensorEntry."""
    if not isinstance(value, dict) or not {"dtype", "shape", "data_offsets"} <= value.keys():
        raise _NotSafetensors(f"its entry {name!r} is no {{dtype, shape, data_offsets}} object: {str(value)[:80]}")
    dtype, shape, offsets = value["dtype"], value["shape"], value["data_offsets"]
    if dtype not in _SAFETENSORS_DTYPES:
        raise _NotSafetensors(f"tensor {name!r} has dtype {dtype!r}, none of {', '.join(_SAFETENSORS_DTYPES)}")
    if not isinstance(shape, list) or not all(_is_count(size) for size in shape):
        raise _NotSafetensors(f"tensor {name!r} has shape {shape!r}, not a list of non-negative whole numbers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets):
        raise _NotSafetensors(f"tensor {name!r} has data_offsets {offsets!r}, not [begin, end] byte counts")
    begin, end = offsets
    data_size = file_size - data_start
    if end > data_size:
        raise _NotSafetensors(
            f"tensor {name!r} runs to byte {end:,} of the data, but the file holds only {data_size:,} bytes of data"
        )
    expected = math.prod(shape) * _SAFETENSORS_DTYPES[dtype].itemsize
    if end - begin != expected:
        raise _NotSafetensors(
            f"tensor {name!r} ({dtype}, shape {tuple(shape)}) needs {expected:,} bytes, its offsets {offsets} "
            f"span {end - begin:,}"
        )
    return TensorEntry(_SAFETENSORS_DTYPES[dtype], tuple(shape), data_start + begin, data_start + end)


def read_safetensors(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of a .safetensors file, one at a time, each read into its own memory.

    The header is checked first (read_safetensors_header), so a file that is no safetensors file
    raises at once. `load_checkpoint` maps the whole file into memory at once;
    reading tensor by tensor with plain reads lets a converter drop what it has used (q, k, v
    once fused), so a 346 MB checkpoint needs 346 MB, not 346 MB plus the parts it fused.
    """
    path = _weights_file(path)
    return _read_tensors(path, read_safetensors_header(path))


def _read_tensors(path: Path, entries: dict[str, TensorEntry]) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors of `entries`, read from `path` in the order they lie in the file."""
    with open(path, "rb") as file:
        for name, entry in sorted(entries.items(), key=lambda item: item[1].start):
            raw = torch.empty(entry.end - entry.start, dtype=torch.uint8)
            file.seek(entry.start)
            if file.readinto(raw.numpy()) != entry.end - entry.start:
                raise ValueError(f"{path} ends inside tensor {name}: a partial download?")
            yield name, raw.view(entry.dtype).reshape(entry.shape)


def vit_b16_path(cache_dir: str | Path = CACHE_DIR) -> Path:
    """Where the ViT-B/16 weights are looked for and downloaded to:
    cache_dir/google--vit-base-patch16-224/model.safetensors."""
    return Path(cache_dir).expanduser() / VIT_B16_REPO.replace("/", "--") / "model.safetensors"


def find_vit_b16(cache_dir: str | Path = CACHE_DIR) -> Path | None:
    """The ViT-B/16 weights file if it is on disk (see vit_b16_path), else None; never downloads."""
    path = vit_b16_path(cache_dir)
    return path if path.is_file() else None


def download_vit_b16(cache_dir: str | Path = CACHE_DIR) -> Path:
    """Path of ViT-B/16's ImageNet weights (Hugging Face layout, 346 MB), downloaded once to
    vit_b16_path(cache_dir); load with `utils.pretrained.load_vit_b16(path)`. Needs the internet
    the first time."""
    path = vit_b16_path(cache_dir)
    if path.is_file():
        return path
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(VIT_B16_REPO, "model.safetensors", local_dir=path.parent))
    except Exception as error:
        raise RuntimeError(
            f"could not download the weights ({type(error).__name__}: {error}). Without internet: "
            f"download model.safetensors from https://huggingface.co/{VIT_B16_REPO}/tree/main "
            f"and put it at {path}"
        ) from error


def shipped_models(checkpoint_dir: str | Path = CHECKPOINT_DIR) -> list[str]:
    """The names of the checkpoints in `checkpoint_dir` (its <name>.pt files), sorted."""
    return sorted(path.stem for path in Path(checkpoint_dir).glob("*.pt"))


def save_trained(
    path: str | Path,
    model: VisionTransformer,
    test_accuracy: float,
    classes: list[str],
    snapshots: list[tuple[int, torch.Tensor]],
) -> None:
    """Write a model and what it learned into one weights-only checkpoint file: a plain dict (config,
    state_dict, test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]})
    that `torch.load(..., weights_only=True)` reads safely. `snapshots` are `History.snapshots`."""
    if not isinstance(model, VisionTransformer):
        raise WrongTypeError(f"expected the course's VisionTransformer as model, got {type(model).__name__}")
    if len(classes) != model.config.num_classes:
        raise ValueError(f"expected {model.config.num_classes} class names, one per output, got {len(classes)}")
    if not 0.0 <= float(test_accuracy) <= 1.0:
        raise ValueError(f"expected test_accuracy as a share in [0, 1], got {test_accuracy}")
    table_shape = None if model.pos_embed is None else tuple(model.pos_embed.shape)
    for step, table in snapshots:
        if not isinstance(table, torch.Tensor) or tuple(table.shape) != table_shape:
            got = tuple(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__
            raise ValueError(f"snapshot of step {step}: expected a position table {table_shape}, got {got}")
    torch.save(
        {
            "config": dataclasses.asdict(model.config),
            "state_dict": {name: tensor.clone() for name, tensor in model.state_dict().items()},
            "test_accuracy": float(test_accuracy),
            "classes": list(classes),
            "pos_embed_snapshots": {"steps": [step for step, _ in snapshots], "tables": [t for _, t in snapshots]},
        },
        path,
    )


def load_trained(name: str, checkpoint_dir: str | Path = CHECKPOINT_DIR) -> tuple[VisionTransformer, dict]:
    """A shipped tiny ViT ("digits", "relational" or "relational_fine") in eval mode, and its checkpoint's info
    (test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]})."""
    available = shipped_models(checkpoint_dir)
    if name not in available:
        raise ValueError(f"no shipped model {name!r}; expected one of {available} in {checkpoint_dir}")
    path = Path(checkpoint_dir) / f"{name}.pt"
    checkpoint = _torch_load(path)
    if not isinstance(checkpoint, dict) or not {"config", "state_dict"} <= checkpoint.keys():
        raise ValueError(f"{path} is no checkpoint written by save_trained (a dict with config and state_dict)")
    config = checkpoint["config"]
    if isinstance(config["image_size"], list):
        config["image_size"] = tuple(config["image_size"])
    model = VisionTransformer(ViTConfig(**config))
    model.load_state_dict(checkpoint["state_dict"])
    info = {key: value for key, value in checkpoint.items() if key not in ("config", "state_dict")}
    return model.eval(), info
