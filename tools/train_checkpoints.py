"""Train the tiny ViTs shipped in utils/checkpoints/ with lesson 6's recipes (`make checkpoints`).

    python tools/train_checkpoints.py               # every recipe
    python tools/train_checkpoints.py digits        # one
    python tools/train_checkpoints.py --force       # replace the files that differ from this run

Epochs, not seconds, so that a rerun on a CPU gives the same weights. The files are read with
`utils.weights.load_trained`. A file that is there already and holds what this run gives is left
as it is; one that differs (another kind of CPU, another torch) is replaced only with --force, which
keeps a copy of it as <name>.pt.bak. Every file is written whole or not at all.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch

# run as a script from a checkout, the course library needs no install
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utils.data import load_training_set
from utils.files import keep_backup
from utils.runtime import set_seed
from utils.training import evaluate, fit
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import CHECKPOINT_DIR, load_trained, save_trained

# name -> (training set and its options, model config, fit options).
# digits and relational, decay_everything=True and threads=None: those two files were trained when
# fit decayed every parameter (biases, norms, pos_embed and cls_token too) and ran on all of torch's
# threads (2 on the machine that made them); both keep a rerun on such a machine giving those very
# weights until the recipes are retrained with fit's parameter groups on one thread.
RECIPES = {
    "digits": (
        dict(name="digits"),
        ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, num_classes=10),
        dict(
            epochs=150,
            lr=3e-3,
            max_shift=1,
            label_smoothing=0.1,
            snapshot_every=55,
            decay_everything=True,
            threads=None,
        ),
    ),
    "relational": (
        dict(name="relational", task="same_colour"),
        ViTConfig.tiny(image_size=32, patch_size=8, num_classes=2),
        dict(epochs=25, lr=1e-3, snapshot_every=32, decay_everything=True, threads=None),
    ),
    # the same task on an 8 x 8 grid (4 px patches, 65 tokens), for lesson 7's maps, deletion test
    # and head distances; fit's defaults (parameter groups, one thread): about 2 minutes on one core
    "relational_fine": (
        dict(name="relational", task="same_colour"),
        ViTConfig.tiny(image_size=32, patch_size=4, num_classes=2),
        dict(epochs=20, lr=1e-3, snapshot_every=64),
    ),
}
# Lesson 7 measures the position tables over seeds: seeds 1 and 2 of the digits and relational recipes
# (on one thread, fit's default, so that a rerun gives the same weights), and lesson 6's orientation
# task, "side by side, or one above the other?" (8 px patches, lr 1e-3 as lesson 6, 1,200 steps as
# lesson 9's longer run: about 95 % on the test set), seeds 0-2.
RECIPE_SEEDS = {}
for _name in ("digits", "relational"):
    for _seed in (1, 2):
        _data, _config, _fit = RECIPES[_name]
        RECIPES[f"{_name}_seed{_seed}"] = (_data, _config, {**_fit, "threads": 1})
        RECIPE_SEEDS[f"{_name}_seed{_seed}"] = _seed
for _seed in (0, 1, 2):
    _suffix = f"_seed{_seed}" if _seed else ""
    RECIPES[f"orientation{_suffix}"] = (
        dict(name="relational", task="orientation"),
        ViTConfig.tiny(image_size=32, patch_size=8, num_classes=2),
        dict(steps=1200, lr=1e-3, snapshot_every=100),
    )
    RECIPE_SEEDS[f"orientation{_suffix}"] = _seed
del _name, _seed, _suffix, _data, _config, _fit


def train_shipped(
    name: str, seed: int = 0, checkpoint_dir: str | Path = CHECKPOINT_DIR, *, force: bool = False
) -> tuple[VisionTransformer, dict]:
    """Train one recipe from scratch (deterministic on a CPU) and save it as checkpoint_dir/<name>.pt.

    The place is checked before training (checkpoint_path). A file there already is left as it is if
    it holds this very run; one that differs is replaced only with force=True (a copy kept by
    utils.files.keep_backup), else a FileExistsError says how the two differ.

    Returns:
        (model, {"test_accuracy": ..., "steps": ..., "file": "new" | "unchanged" | "replaced",
        "backup": the old file's copy or None}).
    """
    if name not in RECIPES:
        raise ValueError(f"no recipe {name!r}; expected one of {sorted(RECIPES)}")
    path = checkpoint_path(name, checkpoint_dir)
    data_options, config, fit_options = RECIPES[name]
    train, test = load_training_set(**data_options)
    set_seed(seed)
    model = VisionTransformer(config)
    # no validation set: the test set is measured once, at the end (evaluating it every epoch, as the
    # shipped files' run did, changed nothing in the weights)
    history = fit(model, train, seed=seed, progress=False, **fit_options)
    _, accuracy = evaluate(model, test)
    info = {"test_accuracy": accuracy, "steps": history.step[-1], "file": "new", "backup": None}
    if path.exists():
        difference = checkpoint_difference(path, model, accuracy, train.classes, history.snapshots)
        if not difference:
            return model, {**info, "file": "unchanged"}
        if not force:
            raise FileExistsError(
                f"{path} exists and differs from this run ({difference}): use --force to replace it "
                f"(the old file is then kept as {path.name}.bak)"
            )
        info.update(file="replaced", backup=keep_backup(path))
    save_trained(path, model, accuracy, train.classes, history.snapshots)  # whole, or not at all
    return model, info


def checkpoint_path(name: str, checkpoint_dir: str | Path) -> Path:
    """checkpoint_dir/<name>.pt, checked before any training: a ValueError if no file can be written there
    (the folder is a file, or lies in one; the place is a folder or a symbolic link; no write permission)."""
    folder = Path(checkpoint_dir).expanduser()
    path = folder / f"{name}.pt"
    existing = next(place for place in (folder, *folder.parents) if place.exists())
    if not existing.is_dir():
        where = "" if existing == folder else f" (it lies in {existing}, a file)"
        raise ValueError(f"checkpoint folder {folder} is not a folder{where}: name a folder (made if missing)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"checkpoint folder {existing} is not writable: name another with --checkpoint-dir")
    if path.is_symlink() or path.is_dir():
        kind = "a symbolic link" if path.is_symlink() else "a folder"
        raise ValueError(f"{path} is {kind}, not a checkpoint file: remove it, or name another folder")
    return path


def checkpoint_difference(
    path: Path, model: VisionTransformer, accuracy: float, classes: list[str], snapshots: list
) -> str:
    """'' if the checkpoint at `path` holds exactly this model, accuracy, classes and snapshots; else how
    it differs, in a few words."""
    try:
        old_model, old_info = load_trained(path.stem, path.parent)
    except ValueError as error:
        return f"it does not read as a checkpoint: {error}"
    accuracies = f"test accuracy {old_info['test_accuracy']:.4f} in the file, {accuracy:.4f} in this run"
    if old_model.config != model.config:
        return f"another model: {old_model.config} in the file; {accuracies}"
    new = {
        "state_dict": model.state_dict(),
        "test_accuracy": float(accuracy),
        "classes": list(classes),
        "pos_embed_snapshots": {"steps": [step for step, _ in snapshots], "tables": [t for _, t in snapshots]},
    }
    if _equal({"state_dict": old_model.state_dict(), **old_info}, new):
        return ""
    gap = max((a - b).abs().max().item() for a, b in zip(old_model.state_dict().values(), new["state_dict"].values()))
    return f"{accuracies}; weights differ by up to {gap:.2g}" if gap else f"{accuracies}; the same weights"


def _equal(a, b) -> bool:
    """a == b for nested dicts and lists of tensors, numbers and strings (tensors equal to the bit)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_equal, a, b))
    return a == b


# How each outcome of train_shipped is reported, after the accuracy.
_OUTCOMES = {
    "new": "written",
    "unchanged": "the file there holds this very run: left as it was",
    "replaced": "replaced; the old file is kept as {backup}",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="name", help=f"recipes to train (default: {sorted(RECIPES)})")
    parser.add_argument("--checkpoint-dir", type=Path, default=CHECKPOINT_DIR, help="where the .pt files go")
    parser.add_argument(
        "--force", action="store_true", help="replace a file that differs from this run (keeping <name>.pt.bak)"
    )
    args = parser.parse_args(argv)
    if unknown := [name for name in args.names if name not in RECIPES]:
        parser.error(f"no recipe {', '.join(unknown)}; expected some of {sorted(RECIPES)}")
    names = args.names or sorted(RECIPES)
    for name in names:  # every place checked before the first training
        try:
            checkpoint_path(name, args.checkpoint_dir)
        except ValueError as error:
            parser.error(str(error))
    kept = []
    for name in names:
        start = time.perf_counter()
        try:
            _, info = train_shipped(
                name, seed=RECIPE_SEEDS.get(name, 0), checkpoint_dir=args.checkpoint_dir, force=args.force
            )
        except FileExistsError as error:
            print(f"{name}: {error}", file=sys.stderr)
            kept.append(name)
            continue
        print(
            f"{name}: test accuracy {info['test_accuracy']:.4f} after {info['steps']} steps, "
            f"{time.perf_counter() - start:.0f} s; {_OUTCOMES[info['file']].format(**info)}"
        )
    if kept:
        parser.exit(1, f"left as they were: {', '.join(kept)}; rerun with --force to replace them\n")


if __name__ == "__main__":
    main()
