"""Train the tiny ViTs shipped in utils/checkpoints/ with lesson 6's recipes (`make checkpoints`).

    python tools/train_checkpoints.py               # every recipe
    python tools/train_checkpoints.py digits        # one

Epochs, not seconds, so that a rerun on a CPU gives the same weights. The files are read with
`utils.weights.load_trained`.
"""

import argparse
import time
from pathlib import Path

from utils.data import load_training_set
from utils.runtime import set_seed
from utils.training import evaluate, fit
from utils.vit import VisionTransformer, ViTConfig
from utils.weights import CHECKPOINT_DIR, save_trained

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


def train_shipped(
    name: str, seed: int = 0, checkpoint_dir: str | Path = CHECKPOINT_DIR
) -> tuple[VisionTransformer, dict]:
    """Train one recipe from scratch (deterministic on a CPU) and save it as checkpoint_dir/<name>.pt.

    Returns:
        (model, {"test_accuracy": ..., "steps": ...}).
    """
    if name not in RECIPES:
        raise ValueError(f"no recipe {name!r}; expected one of {sorted(RECIPES)}")
    data_options, config, fit_options = RECIPES[name]
    train, test = load_training_set(**data_options)
    set_seed(seed)
    model = VisionTransformer(config)
    # no validation set: the test set is measured once, at the end (evaluating it every epoch, as the
    # shipped files' run did, changed nothing in the weights)
    history = fit(model, train, seed=seed, progress=False, **fit_options)
    _, accuracy = evaluate(model, test)
    checkpoint_dir = Path(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    save_trained(checkpoint_dir / f"{name}.pt", model, accuracy, train.classes, history.snapshots)
    return model, {"test_accuracy": accuracy, "steps": history.step[-1]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="name", help=f"recipes to train (default: {sorted(RECIPES)})")
    parser.add_argument("--checkpoint-dir", type=Path, default=CHECKPOINT_DIR, help="where the .pt files go")
    args = parser.parse_args(argv)
    if unknown := [name for name in args.names if name not in RECIPES]:
        parser.error(f"no recipe {', '.join(unknown)}; expected some of {sorted(RECIPES)}")
    for name in args.names or sorted(RECIPES):
        start = time.perf_counter()
        _, info = train_shipped(name, checkpoint_dir=args.checkpoint_dir)
        print(
            f"{name}: test accuracy {info['test_accuracy']:.4f} after {info['steps']} steps, "
            f"{time.perf_counter() - start:.0f} s"
        )


if __name__ == "__main__":
    main()
