"""The tiny ViTs trained by lesson 6's recipes, shipped with the course in utils/checkpoints/.

Each checkpoint is a plain dict (config, weights, test accuracy, class names, position-table
snapshots taken during training) that `torch.load(..., weights_only=True)` reads safely.
Regenerate them, reproducibly on a CPU, with `make checkpoints` (python -m utils.trained).
"""

import dataclasses
import sys
import time
from pathlib import Path

import torch

from utils.data import load_training_set
from utils.runtime import set_seed
from utils.training import evaluate, fit
from utils.vit import ViTConfig, VisionTransformer

CHECKPOINT_DIR = Path(__file__).parent / "checkpoints"

# name -> (training set and its options, model config, fit options); epochs, not seconds, so that
# a rerun gives the same weights
RECIPES = {
    "digits": (
        dict(name="digits"),
        ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, num_classes=10),
        dict(epochs=150, lr=3e-3, max_shift=1, label_smoothing=0.1, snapshot_every=55),
    ),
    "relational": (
        dict(name="relational", task="same_colour"),
        ViTConfig.tiny(image_size=32, patch_size=8, num_classes=2),
        dict(epochs=25, lr=1e-3, snapshot_every=32),
    ),
}


def save_trained(path: Path, model: VisionTransformer, test_accuracy: float, classes: list[str], snapshots) -> None:
    """Write a model and what it learned into one weights-only checkpoint file."""
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


def load_trained(name: str) -> tuple[VisionTransformer, dict]:
    """A shipped tiny ViT ("digits" or "relational") in eval mode, and its checkpoint's info
    (test_accuracy, classes, pos_embed_snapshots: {"steps": [...], "tables": [(1, T, D), ...]})."""
    path = CHECKPOINT_DIR / f"{name}.pt"
    if name not in RECIPES or not path.exists():
        raise ValueError(f"no shipped model {name!r}; expected one of {sorted(RECIPES)} in {CHECKPOINT_DIR}")
    checkpoint = torch.load(path, weights_only=True)
    config = checkpoint["config"]
    if isinstance(config["image_size"], list):
        config["image_size"] = tuple(config["image_size"])
    model = VisionTransformer(ViTConfig(**config))
    model.load_state_dict(checkpoint["state_dict"])
    info = {key: value for key, value in checkpoint.items() if key not in ("config", "state_dict")}
    return model.eval(), info


def train_shipped(name: str, seed: int = 0) -> tuple[VisionTransformer, dict]:
    """Train one recipe from scratch (deterministic on a CPU) and save it; returns (model, info)."""
    data_options, config, fit_options = RECIPES[name]
    train, test = load_training_set(**data_options)
    set_seed(seed)
    model = VisionTransformer(config)
    history = fit(model, train, test, seed=seed, progress=False, **fit_options)
    _, accuracy = evaluate(model, test)
    CHECKPOINT_DIR.mkdir(exist_ok=True)
    save_trained(CHECKPOINT_DIR / f"{name}.pt", model, accuracy, train.classes, history.snapshots)
    return model, {"test_accuracy": accuracy, "steps": history.step[-1]}


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(RECIPES):
        start = time.perf_counter()
        _, info = train_shipped(name)
        print(f"{name}: test accuracy {info['test_accuracy']:.4f} after {info['steps']} steps, "
              f"{time.perf_counter() - start:.0f} s")  # fmt: skip
