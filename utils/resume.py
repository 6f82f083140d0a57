"""A training run's state on disk, so that a stopped run resumes where it stopped and ends exactly
as if it had not stopped (on the same machine).

A run's folder holds one folder per saved step, `step-0000300/` with
- `model.safetensors`: the weights (safetensors: tensors only, nothing executed on loading),
- `optimizer.pt`: the optimiser's state (AdamW's moments and step counts), read back with
  `torch.load(..., weights_only=True)`,
- `state.json`: the step and the run's settings,
and `latest.json`, which names the newest complete one. Each step's folder is written under a
temporary name and renamed when complete, and `latest.json` is replaced atomically after it: a
run killed in the middle of a save leaves the previous state readable. Nothing else is needed to
resume exactly: the learning rate is a function of the step, the data order of the epoch, and
every random draw of a step (augmentation, dropout) of the seed, the step and the rank.
"""

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from utils.files import write_text_atomically
from utils.validation import check_whole

LATEST = "latest.json"
KEEP = 2  # the saved steps kept: the newest, and the one before in case the newest is damaged later


def step_folder(run: Path, step: int) -> Path:
    return run / f"step-{step:07d}"


def save_training_state(
    run: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer, step: int, settings: dict
) -> Path:
    """Save the model, the optimiser and the step into `run`/step-NNNNNNN/ and point latest.json at it.

    Args:
        run: the run's folder (made if missing).
        model: the model (not a DistributedDataParallel wrapper: pass its .module).
        settings: the run's settings as JSON values; resuming checks they are the same.
    Returns:
        the step's folder.
    """
    step = check_whole(step, "step", minimum=0)
    if not isinstance(settings, dict):
        raise TypeError(f"settings must be a dict of JSON values, got {type(settings).__name__}")
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    final = step_folder(run, step)
    partial = run / f".{final.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    weights = {name: tensor.detach().cpu().contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, partial / "model.safetensors")
    torch.save(optimizer.state_dict(), partial / "optimizer.pt")
    (partial / "state.json").write_text(json.dumps({"step": step, "settings": settings}, indent=1) + "\n")
    if final.exists():  # the same step saved again (a resumed run that saved it before it stopped)
        shutil.rmtree(final)
    os.replace(partial, final)
    write_text_atomically(run / LATEST, json.dumps({"step": step, "folder": final.name}) + "\n")
    saved = sorted(path for path in run.glob("step-*") if path.is_dir())
    for old in saved[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_step(run: str | os.PathLike) -> int | None:
    """The newest step saved in `run`, or None when nothing has been saved there."""
    pointer = Path(run) / LATEST
    if not pointer.is_file():
        return None
    try:
        return int(json.loads(pointer.read_text())["step"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{pointer} is damaged ({error}): delete it to resume from the step folders' newest") from None


def load_training_state(
    run: str | os.PathLike, model: nn.Module, optimizer: torch.optim.Optimizer, settings: dict
) -> int:
    """Load the newest saved state of `run` into `model` and `optimizer`; return its step.

    Raises ValueError when nothing is saved there, or when it was saved with other `settings`
    (another model, data set, batch or schedule: resuming it would silently train something else).
    """
    run = Path(run)
    step = latest_step(run)
    if step is None:
        raise ValueError(f"nothing to resume in {run}: no {LATEST} (start without --resume)")
    folder = step_folder(run, step)
    if not (folder / "state.json").is_file():
        raise ValueError(
            f"{LATEST} names step {step}, but {folder} is missing or incomplete: delete {LATEST} to start again"
        )
    state = json.loads((folder / "state.json").read_text())
    saved = state["settings"]
    changed = sorted(key for key in set(saved) | set(settings) if saved.get(key) != settings.get(key))
    if changed:
        differences = ", ".join(f"{key}: saved {saved.get(key)!r}, now {settings.get(key)!r}" for key in changed)
        raise ValueError(f"{folder} was saved with other settings ({differences}); resume with the same ones")
    model.load_state_dict(load_file(folder / "model.safetensors"))
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    return int(state["step"])
