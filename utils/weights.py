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
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from utils.files import replacing
from utils.validation import WrongTypeError, describe
from utils.vit import LATE_FIELDS, VisionTransformer, ViTConfig

# Where downloaded weights are kept; set VIT_WEIGHTS_DIR to keep them elsewhere.
CACHE_DIR = Path(os.environ.get("VIT_WEIGHTS_DIR", "~/.cache/vit-from-scratch/weights")).expanduser()

# The tiny ViTs trained by lesson 6's recipes, one <name>.pt file each.
CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"

VIT_B16_REPO = "google/vit-base-patch16-224"  # the Hugging Face repository of lesson 8's ViT-B/16

# How a file that should hold weights and does not is described (then what is wrong with it).
NOT_SAFETENSORS = "is not a safetensors file (an HTML page? a git-LFS pointer? a partial download?)"
NOT_TORCH = "is not a torch file (an HTML page? a git-LFS pointer? a partial download?)"

# torch.save stores its records as they are, never compressed: a torch file whose records would unpack
# to more than this many times its size (plus 1 MiB) is refused before anything is unpacked (a zip bomb),
# and so is one whose tensors would span more (views that repeat a few stored numbers).
MAX_UNPACK_RATIO = 4

# How a shipped checkpoint that does not read is put right.
REMAKE = "restore it with git checkout, or train it again with make checkpoints"


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
    if is_zip:
        _check_unpacked_size(path)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        if "Weights only load failed" not in str(error):
            raise ValueError(f"{path} {NOT_TORCH}: {_first_line(error)}") from error
        raise ValueError(
            f"{path} holds Python objects besides tensors, and reading them could run code from the file, "
            "so it was refused (torch.load with weights_only=True). A whole model saved with "
            "torch.save(model)? Save model.state_dict() instead; load it with weights_only=False only "
            "if you made the file yourself or trust where it comes from"
        ) from error
    except MemoryError:
        raise
    except Exception as error:  # a damaged or forged file: RuntimeError, EOFError, TypeError, KeyError, ...
        raise ValueError(f"{path} {NOT_TORCH}: {_first_line(error)}") from error
    _check_tensor_sizes(path, loaded)
    return loaded


def _first_line(error: BaseException) -> str:
    """The first line of an error's message (its type's name if it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_unpacked_size(path: Path) -> None:
    """A ValueError if the zip archive `path` would unpack to far more than its size on disk (a zip
    bomb), read from its table of contents before anything is unpacked."""
    on_disk = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError, OSError) as error:
        raise ValueError(f"{path} {NOT_TORCH}: its zip archive is damaged ({_first_line(error)})") from None
    unpacked = sum(record.file_size for record in records)
    if records and unpacked > MAX_UNPACK_RATIO * on_disk + 2**20:
        biggest = max(records, key=lambda record: record.file_size)
        how = "is compressed and " if biggest.compress_type != zipfile.ZIP_STORED else ""
        raise ValueError(
            f"{path} is not a file torch.save wrote: its record {biggest.filename} {how}unpacks to "
            f"{_in_bytes(biggest.file_size)} from {_in_bytes(on_disk)} on disk (a zip bomb?); refused"
        )


def _check_tensor_sizes(path: Path, loaded) -> None:
    """A ValueError if the tensors in what torch.load read from `path` span far more bytes than the
    file holds: views that repeat a few stored numbers (stride 0), which a copy or a check would
    turn into gigabytes. Tensors torch.save wrote from plain weights span at most the file."""
    tensors, stack, seen = [], [loaded], set()
    while stack:  # without recursion (the pickle may nest deeply), each object once (it may repeat them)
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            tensors.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    spanned = sum(tensor.numel() * tensor.element_size() for tensor in tensors)
    on_disk = path.stat().st_size
    if spanned > MAX_UNPACK_RATIO * on_disk + 2**20:
        biggest = max(tensors, key=lambda tensor: tensor.numel() * tensor.element_size())
        raise ValueError(
            f"{path} is not a file torch.save wrote from plain weights: a tensor of shape {tuple(biggest.shape)} "
            f"spans {_in_bytes(biggest.numel() * biggest.element_size())} but holds "
            f"{_in_bytes(biggest.untyped_storage().nbytes())} of data, from {_in_bytes(on_disk)} on disk "
            "(a view that repeats its numbers: a memory bomb?); refused"
        )


def _in_bytes(count: int) -> str:
    """A byte count in words: '512 bytes', '2.1 MB', '2.1 GB'."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} bytes"


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
    except ValueError as error:  # not UTF-8, not JSON, a number of more than 4,300 digits
        raise _NotSafetensors(f"its header is no valid JSON ({error})") from None
    except RecursionError:
        raise _NotSafetensors("its header nests JSON lists or objects too deeply to read (a forged file?)") from None
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
        raise _NotSafetensors(f"its entry {name!r} is no {{dtype, shape, data_offsets}} object: {describe(value)}")
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


def check_finite(tensors: Mapping[str, torch.Tensor], source: str, hint: str = "a corrupt file?") -> None:
    """A ValueError naming (a few of) the tensors that hold NaN or infinity, and how many do; `source`
    names where they come from ("the checkpoint", a path), `hint` what to do about it."""
    bad = [
        name
        for name, tensor in tensors.items()
        if (tensor.is_floating_point() or tensor.is_complex())  # whole numbers are always finite
        and tensor.device.type != "meta"  # shapes only, no values
        and not torch.isfinite(tensor).all()
    ]
    if bad:
        listed = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        holds = "tensors of {} hold" if len(bad) > 1 else "tensor of {} holds"
        raise ValueError(f"{len(bad)} {holds.format(source)} NaN or infinity ({listed}): {hint}")


def save_trained(
    path: str | Path,
    model: VisionTransformer,
    test_accuracy: float,
    classes: list[str],
    snapshots: list[tuple[int, torch.Tensor]],
) -> None:
    """Write a model and what it learned into one weights-only checkpoint file: a plain dict (config,
    state_dict, test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]})
    that `torch.load(..., weights_only=True)` reads safely. `snapshots` are `History.snapshots`.

    The file is written under a scratch name and then moved into place in one step: a save cut short
    (Ctrl-C, a full disk) leaves the file that was there whole."""
    if not isinstance(path, (str, Path)):
        raise WrongTypeError(f"expected the path of the checkpoint to write (a str or Path), got {describe(path)}")
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
    check_finite(model.state_dict(), "the model", "a run that diverged? Train it again with a smaller lr")
    checkpoint = {
        "config": dataclasses.asdict(model.config),
        "state_dict": {name: tensor.clone() for name, tensor in model.state_dict().items()},
        "test_accuracy": float(test_accuracy),
        "classes": list(classes),
        "pos_embed_snapshots": {"steps": [step for step, _ in snapshots], "tables": [t for _, t in snapshots]},
    }
    path = Path(path).expanduser()
    with replacing(path) as scratch, tempfile.TemporaryDirectory(prefix=".", dir=path.parent) as folder:
        torch.save(checkpoint, Path(folder) / path.name)  # torch names the archive inside after the file
        os.replace(Path(folder) / path.name, scratch)


# ViTConfig fields added after the first checkpoints were written: a file without one gets the default,
# the option off (the plain ViT), which is the model it was trained as. Any other field it lacks is refused.
_FIELDS_ADDED_LATER = LATE_FIELDS


def load_trained(name: str, checkpoint_dir: str | Path = CHECKPOINT_DIR) -> tuple[VisionTransformer, dict]:
    """A shipped tiny ViT ("digits", "relational" or "relational_fine") in eval mode, and its checkpoint's info
    (test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]}).

    A file that does not read as such a checkpoint (another ViTConfig's fields, class names that do not
    match the outputs, weights that do not fit the config or hold NaN) raises a ValueError that says so."""
    available = shipped_models(checkpoint_dir)
    if name not in available:
        raise ValueError(f"no shipped model {name!r}; expected one of {available} in {checkpoint_dir}")
    path = Path(checkpoint_dir) / f"{name}.pt"
    checkpoint = _torch_load(path)
    if not isinstance(checkpoint, dict) or not {"config", "state_dict"} <= checkpoint.keys():
        raise ValueError(f"{path} is no checkpoint written by save_trained (a dict with config and state_dict)")
    config = _trained_config(path, checkpoint["config"])
    state_dict = _named_tensors(path, checkpoint["state_dict"])
    check_finite({**state_dict, **_snapshot_tables(checkpoint)}, str(path), f"a corrupt file? {REMAKE}")
    classes = checkpoint.get("classes")
    if not isinstance(classes, list) or len(classes) != config.num_classes:
        named = f"{len(classes)} classes" if isinstance(classes, list) else f"classes {describe(classes)}"
        raise ValueError(
            f"{path} names {named} for a model of {config.num_classes} outputs: it was edited or written by "
            f"another version; {REMAKE}"
        )
    model = VisionTransformer(config)
    try:
        model.load_state_dict(state_dict)
    except (ValueError, RuntimeError) as error:  # a tensor of another shape; missing or unexpected tensors
        raise ValueError(f"{path}: its weights do not fit its config ({_first_line(error)}); {REMAKE}") from error
    info = {key: value for key, value in checkpoint.items() if key not in ("config", "state_dict")}
    return model.eval(), info


def _trained_config(path: Path, fields) -> ViTConfig:
    """The ViTConfig a checkpoint's config dict describes; a ValueError naming unknown and missing fields."""
    if not isinstance(fields, dict):
        raise ValueError(f"{path} holds a config of {describe(fields)}, not a dict of ViTConfig fields; {REMAKE}")
    known = [field.name for field in dataclasses.fields(ViTConfig)]
    unknown = [repr(name) for name in fields if name not in known]
    missing = [name for name in known if name not in fields and name not in _FIELDS_ADDED_LATER]
    if unknown or missing:
        differences = [f"unknown field{'s' * (len(unknown) > 1)} {', '.join(unknown)}"] if unknown else []
        differences += [f"missing {', '.join(missing)}"] if missing else []
        raise ValueError(f"{path} was written for another version of ViTConfig ({'; '.join(differences)}): {REMAKE}")
    if isinstance(fields["image_size"], list):  # an (H, W) tuple comes back from the file as a list
        fields = {**fields, "image_size": tuple(fields["image_size"])}
    try:
        return ViTConfig(**fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} holds a config ViTConfig refuses ({error}); {REMAKE}") from error


def _snapshot_tables(checkpoint: dict) -> dict[str, torch.Tensor]:
    """The position tables a checkpoint keeps as snapshots, named pos_embed_snapshots.tables.{i}."""
    snapshots = checkpoint.get("pos_embed_snapshots")
    tables = snapshots.get("tables") if isinstance(snapshots, dict) else None
    if not isinstance(tables, list):
        return {}
    return {f"pos_embed_snapshots.tables.{i}": t for i, t in enumerate(tables) if isinstance(t, torch.Tensor)}
