"""Weight files: reading them, the cache of downloaded weights, the one download (on request),
and the tiny ViTs shipped with the course in utils/checkpoints/.

Turning a file's tensors into a model of another layout is `utils.pretrained`'s job; the recipes
that train the shipped checkpoints are in tools/train_checkpoints.py (`make checkpoints`).
"""

import dataclasses
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import load_file

from utils.vit import VisionTransformer, ViTConfig

# Where downloaded weights are kept; set VIT_WEIGHTS_DIR to keep them elsewhere.
CACHE_DIR = Path(os.environ.get("VIT_WEIGHTS_DIR", "~/.cache/vit-from-scratch/weights")).expanduser()

# The tiny ViTs trained by lesson 6's recipes, one <name>.pt file each.
CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"

VIT_B16_REPO = "google/vit-base-patch16-224"  # the Hugging Face repository of lesson 8's ViT-B/16


def load_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file, or of a torch file (.pt, .pth, .bin) read with
    weights_only=True (no code runs); a {"model": ...} or {"state_dict": ...} wrapper is opened."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.suffix == ".safetensors":
        return load_file(path)
    if path.suffix not in (".pt", ".pth", ".bin"):
        raise ValueError(f"expected a .safetensors, .pt, .pth or .bin file, got {path.name}")
    state = torch.load(path, map_location="cpu", weights_only=True)
    for wrapper in ("model", "state_dict"):
        if isinstance(state, dict) and isinstance(state.get(wrapper), dict):
            state = state[wrapper]
    return state


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
}


def read_safetensors(path: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of a .safetensors file, one at a time, each read into its own memory.

    The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape,
    byte offsets) and the raw bytes. `load_checkpoint` maps the whole file into memory at once;
    reading tensor by tensor with plain reads lets a converter drop what it has used (q, k, v
    once fused), so a 346 MB checkpoint needs 346 MB, not 346 MB plus the parts it fused.
    """
    with open(Path(path).expanduser(), "rb") as file:
        size = file.read(8)
        header_size = struct.unpack("<Q", size)[0] if len(size) == 8 else 0
        header = file.read(header_size)
        if len(header) != header_size or not header.startswith(b"{"):
            raise ValueError(f"{path} is no .safetensors file (an 8-byte length, a JSON header): a partial download?")
        header = json.loads(header)
        header.pop("__metadata__", None)
        start = 8 + header_size
        for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
            if entry["dtype"] not in _SAFETENSORS_DTYPES:
                known = ", ".join(_SAFETENSORS_DTYPES)
                raise ValueError(f"{name}: dtype {entry['dtype']} is not one this reader knows ({known})")
            begin, end = entry["data_offsets"]
            raw = torch.empty(end - begin, dtype=torch.uint8)
            file.seek(start + begin)
            if file.readinto(raw.numpy()) != end - begin:
                raise ValueError(f"{path} ends inside tensor {name}: a partial download?")
            yield name, raw.view(_SAFETENSORS_DTYPES[entry["dtype"]]).reshape(entry["shape"])


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
    """A shipped tiny ViT ("digits" or "relational") in eval mode, and its checkpoint's info
    (test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]})."""
    available = shipped_models(checkpoint_dir)
    if name not in available:
        raise ValueError(f"no shipped model {name!r}; expected one of {available} in {checkpoint_dir}")
    checkpoint = torch.load(Path(checkpoint_dir) / f"{name}.pt", weights_only=True)
    config = checkpoint["config"]
    if isinstance(config["image_size"], list):
        config["image_size"] = tuple(config["image_size"])
    model = VisionTransformer(ViTConfig(**config))
    model.load_state_dict(checkpoint["state_dict"])
    info = {key: value for key, value in checkpoint.items() if key not in ("config", "state_dict")}
    return model.eval(), info
