"""Lesson 9's trials: popular claims about ViTs, each tested by training tiny ViTs over several seeds.

A trial is one arm of an experiment: a lesson-6 `Experiment` (data, model, fit's options with a
budget in steps) plus what lesson 9 varies beyond it (how the class token or the position table
starts) and what it measures on the trained model. `make claims` (tools/run_experiments.py
--suite claims) runs seeds 0-4 of every trial and ships the results in utils/results/lesson9.json;
the lesson runs seed 0 of a few live and prints the rest from the file.

- `TRIALS`: name -> `Trial`; `run_trial(name, seed, data)`: train and measure one seed.
- `MEASURES`: what a trial can measure besides accuracy ("positions", "attention", "readout", "growth").
- `shipped_runs(name)`, `shipped_values(name, key)`: the shipped seeds of one trial.
- `agrees_with_shipped(name, run, data)`: does a live run agree with them (as in lesson 6)?
"""

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

from utils.ablations import (
    PAIRS_FIT,
    Agreement,
    Experiment,
    Split,
    agreement_of_runs,
    check_split,
    experiment_data,
    made_here,
    runs_of_recipe,
    values_of,
)
from utils.embeddings import (
    gaussian_pos_embed,
    grid_distance,
    neighbour_similarity,
    pos_embed_similarity,
)
from utils.experiments import MAX_SEED, Comparison, compare, run_record
from utils.inspection import (
    attention_asymmetry,
    attention_entropy,
    mean_attention_distance,
    prune_heads,
    readout_gradient_norm,
)
from utils.runtime import eval_mode, set_seed, torch_threads
from utils.training import evaluate, fit
from utils.validation import WrongTypeError, check_tensor, check_whole, describe

RESULTS_FILE = Path(__file__).parent / "results" / "lesson9.json"
MEASURE_IMAGES = 256  # validation images the measurements look at (the first ones: the same for every run)
SNAPSHOT_EVERY = 50  # steps between copies of the position table ("positions")
COLLAPSED = 0.15  # validation accuracy at or below this on digits (10 classes): the run learned nothing

# How the class token starts ({"cls_token": kind}); the course's own init is "trunc_normal".
CLS_INITS = {
    "trunc_normal": "trunc-normal, std 0.02 (the course, as timm's other weights)",
    "xavier": "Xavier-uniform on the (1, 1, D) tensor (bound sqrt(6 / 2D))",
    "timm": "normal, std 1e-6 (timm)",
    "zeros": "zeros (the JAX original)",
}
POS_INITS = {
    "trunc_normal": "trunc-normal, std 0.02 (the course)",
    "gaussian": "2-D Gaussian bumps (gaussian_pos_embed)",
}
MEASURES = {
    "positions": "the position table's grid structure every SNAPSHOT_EVERY steps, and its mirror pairs",
    "attention": "attention asymmetry, entropy and distance per head, and what pruning each head costs",
    "readout": "the gradient at the readout and at the patch embedding, at init and after training",
    "growth": "how much each parameter's norm grew during training",
}


@dataclass(frozen=True)
class Trial:
    """One arm of a claim's experiment.

    experiment: the data, the model and fit's options (utils.ablations.Experiment; a tiny ViT here).
    init: how parameters start, when not as the course's init: {"cls_token": a key of CLS_INITS,
        "pos_embed": a key of POS_INITS}.
    measures: keys of MEASURES, measured on the trained model (some also at init).
    """

    experiment: Experiment
    init: Mapping = field(default_factory=dict)
    measures: tuple[str, ...] = ()

    def __post_init__(self):
        if not isinstance(self.experiment, Experiment):
            raise WrongTypeError(
                f"experiment must be an Experiment (utils.ablations), e.g. Experiment('digits', 'vit', "
                f"{{'steps': 600}}), got {describe(self.experiment)}"
            )
        if not isinstance(self.init, Mapping):
            raise WrongTypeError(f"init must be a dict, e.g. {{'pos_embed': 'gaussian'}}, got {describe(self.init)}")
        example = "measures must be a tuple of names, e.g. ('positions',)"
        if isinstance(self.measures, str):
            raise WrongTypeError(f"{example}, got the string {self.measures!r}")
        if not isinstance(self.measures, tuple | list) or not all(isinstance(name, str) for name in self.measures):
            raise WrongTypeError(f"{example}, got {describe(self.measures)}")
        if self.experiment.model != "vit":
            raise ValueError(f"lesson 9's trials train tiny ViTs, got a {self.experiment.model}")
        choices = {"cls_token": CLS_INITS, "pos_embed": POS_INITS}
        for name, kind in self.init.items():
            if name not in choices or not isinstance(kind, str) or kind not in choices[name]:
                raise ValueError(
                    f"init must map 'cls_token' to one of {list(CLS_INITS)} or 'pos_embed' to one of "
                    f"{list(POS_INITS)}, got {name!r}: {kind!r}"
                )
        if "cls_token" in self.init and self.experiment.config.pool != "cls":
            raise ValueError("a class token init needs pool='cls'")
        if "pos_embed" in self.init and self.experiment.config.pos_embed != "learned":
            raise ValueError("a position table init needs pos_embed='learned'")
        unknown = [name for name in self.measures if name not in MEASURES]
        if unknown:
            raise ValueError(f"unknown measures {unknown}; expected some of {list(MEASURES)}")
        object.__setattr__(self, "init", MappingProxyType(dict(self.init)))
        object.__setattr__(self, "measures", tuple(self.measures))

    def build(self) -> nn.Module:
        """A fresh, untrained tiny ViT with this trial's init (seed first: set_seed(seed))."""
        model = self.experiment.build()
        with torch.no_grad():
            kind = self.init.get("cls_token", "trunc_normal")
            if kind == "xavier":
                nn.init.xavier_uniform_(model.cls_token)
            elif kind == "timm":
                nn.init.normal_(model.cls_token, std=1e-6)
            elif kind == "zeros":
                nn.init.zeros_(model.cls_token)
            if self.init.get("pos_embed") == "gaussian":
                table = gaussian_pos_embed(
                    model.patch_embed.grid_size, model.config.embed_dim, num_prefix_tokens=model.num_prefix_tokens
                )
                model.pos_embed.copy_(table)
        return model

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return {**self.experiment.as_dict(), "init": dict(self.init), "measures": list(self.measures)}


def _trial(data: str, steps: int, fit: Mapping, init=None, measures=(), **vit) -> Trial:
    return Trial(Experiment(data, "vit", {"steps": steps, **fit}, vit), init or {}, measures)


ORIENTATION_STEPS = 400  # as lesson 6: 16 epochs of 3,200 images
LONG_STEPS = 1200  # three times as long, for claims that may depend on the budget
PAIRS_STEPS = 600  # "same colour?": 24 epochs
DIGITS_STEPS = 600  # 67 epochs of 1,078 images
CONVERGED_STEPS = 2000  # digits trained as long as lesson 6's final model
DIGITS = dict(lr=3e-3, max_shift=1, label_smoothing=0.1)  # lesson 6's digits recipe
HIGH_LR = dict(DIGITS, lr=0.1)  # 33 x the recipe's learning rate
POSITIONS = ("positions",)
INSIDE = ("attention", "positions")

TRIALS: dict[str, Trial] = {
    # claims 1, 2, 6: the position table's learning rate, early loss, grid structure ("side by side?")
    "orientation": _trial("orientation", ORIENTATION_STEPS, PAIRS_FIT, measures=INSIDE),
    "orientation, position lr x0.1": _trial(
        "orientation", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.1}}, measures=POSITIONS
    ),
    "orientation, position lr x10": _trial(
        "orientation", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 10.0}}, measures=POSITIONS
    ),
    "orientation, 1200 steps": _trial("orientation", LONG_STEPS, PAIRS_FIT, measures=POSITIONS),
    "orientation, 1200 steps, position lr x0.1": _trial(
        "orientation", LONG_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.1}}, measures=POSITIONS
    ),
    "orientation, 1200 steps, position lr x10": _trial(
        "orientation", LONG_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 10.0}}, measures=POSITIONS
    ),
    # claims 2, 3: fixed tables (sin-cos, or the random init frozen: position lr x0)
    "orientation, sincos": _trial("orientation", ORIENTATION_STEPS, PAIRS_FIT, pos_embed="sincos"),
    "orientation, frozen": _trial(
        "orientation", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.0}}
    ),
    "orientation 1000": _trial("orientation_1000", ORIENTATION_STEPS, PAIRS_FIT, measures=POSITIONS),
    "orientation 1000, sincos": _trial("orientation_1000", ORIENTATION_STEPS, PAIRS_FIT, pos_embed="sincos"),
    "orientation 1000, frozen": _trial(
        "orientation_1000", ORIENTATION_STEPS, {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.0}}
    ),
    # claim 4: a Gaussian position table
    "orientation, gaussian init": _trial(
        "orientation", ORIENTATION_STEPS, PAIRS_FIT, init={"pos_embed": "gaussian"}, measures=POSITIONS
    ),
    "orientation 1000, gaussian init": _trial(
        "orientation_1000", ORIENTATION_STEPS, PAIRS_FIT, init={"pos_embed": "gaussian"}, measures=POSITIONS
    ),
    # claims 2, 6, 7, 11-13: "same colour?", objects anywhere or at mirrored places
    "same colour": _trial("same_colour", PAIRS_STEPS, PAIRS_FIT, measures=INSIDE),
    "same colour, sincos": _trial("same_colour", PAIRS_STEPS, PAIRS_FIT, pos_embed="sincos"),
    "mirrored colour": _trial("mirrored_colour", PAIRS_STEPS, PAIRS_FIT, measures=INSIDE),
    "digits, patch 2": _trial("digits", DIGITS_STEPS, DIGITS, patch_size=2, measures=INSIDE),
    "digits, patch 2, position lr x0.1": _trial(
        "digits", DIGITS_STEPS, {**DIGITS, "lr_multipliers": {"pos_embed": 0.1}}, patch_size=2, measures=POSITIONS
    ),
    "digits, patch 2, position lr x10": _trial(
        "digits", DIGITS_STEPS, {**DIGITS, "lr_multipliers": {"pos_embed": 10.0}}, patch_size=2, measures=POSITIONS
    ),
    # claim 5: what makes a tiny ViT diverge, and what stops it
    "digits": _trial("digits", DIGITS_STEPS, DIGITS, measures=("growth",)),
    "digits, lr 0.1, no warm-up": _trial("digits", DIGITS_STEPS, {**HIGH_LR, "warmup": 0.0}, measures=("growth",)),
    "digits, lr 0.1": _trial("digits", DIGITS_STEPS, HIGH_LR, measures=("growth",)),
    "digits, lr 0.1, no warm-up, norm_pre": _trial(
        "digits", DIGITS_STEPS, {**HIGH_LR, "warmup": 0.0}, norm_pre=True, measures=("growth",)
    ),
    "digits, lr 0.1, norm_pre": _trial("digits", DIGITS_STEPS, HIGH_LR, norm_pre=True, measures=("growth",)),
    # claim 10: how the class token starts (claim 9's class-token side is "digits")
    **{
        f"digits, class token {kind}": _trial("digits", DIGITS_STEPS, DIGITS, init={"cls_token": kind})
        for kind in CLS_INITS
        if kind != "trunc_normal"
    },
    **{
        f"orientation, class token {kind}": _trial(
            "orientation", ORIENTATION_STEPS, PAIRS_FIT, init={"cls_token": kind}
        )
        for kind in CLS_INITS
        if kind != "trunc_normal"
    },
    # claims 8, 9: class token or mean pooling, trained to convergence at three learning rates
    **{
        f"digits converged, {pool}, lr {lr:g}": _trial(
            "digits", CONVERGED_STEPS, {**DIGITS, "lr": lr}, measures=("readout",), **vit
        )
        for lr in (1e-3, 3e-3, 1e-2)
        for pool, vit in (
            ("class token", {}),
            ("mean", {"pool": "mean"}),
            ("mean + fc_norm", {"pool": "mean", "fc_norm": True}),
        )
    },
}


def _check_name(name) -> Trial:
    if not isinstance(name, str):
        raise WrongTypeError(f"name must be the name of a trial (a str), got {describe(name)}")
    if name not in TRIALS:
        close = difflib.get_close_matches(name, list(TRIALS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; the names: {', '.join(map(repr, TRIALS))}"
        raise ValueError(f"no trial {name!r}{hint}")
    return TRIALS[name]


# ---- measurements -----------------------------------------------------------------------------


def _check_finite(tensor: torch.Tensor, name: str) -> None:
    """Raise unless every number of `tensor` is finite: a diverged run's table has no structure."""
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} holds NaN or infinity (a diverged run?): its structure cannot be measured")


def mirror_pairs(rows: int, cols: int) -> torch.Tensor:
    """(N,) index of each position's mirror image about the grid's vertical centre line (row-major)."""
    index = torch.arange(rows * cols).reshape(rows, cols)
    return index.flip(dims=[1]).reshape(-1)


def mirror_advantage(similarity: torch.Tensor, grid_size: tuple[int, int]) -> float:
    """How much more similar each position is to its mirror image than to the other positions
    equally far away: the mean over positions off the centre line of cos(i, mirror(i)) minus the
    mean cos(i, j) over the j != mirror(i) at the same grid distance (positions without such a j
    are left out). 0: mirror pairs are nothing special."""
    _check_finite(check_tensor(similarity, "similarity", "(N, N)", ndim=2), "similarity")
    rows, cols = grid_size
    mirror, distance = mirror_pairs(rows, cols), grid_distance(rows, cols)
    gaps = []
    for i in range(rows * cols):
        m = int(mirror[i])
        same = (distance[i] - distance[i, m]).abs() < 1e-6
        same[m] = False
        if m != i and same.any():
            gaps.append(similarity[i, m] - similarity[i][same].mean())
    return float(torch.stack(gaps).mean())


def nearest_is_neighbour(similarity: torch.Tensor, grid_size: tuple[int, int]) -> float:
    """The fraction of positions whose most similar other position is one of its grid neighbours
    (up, down, left, right). By chance: the mean neighbour count / (N - 1)."""
    _check_finite(check_tensor(similarity, "similarity", "(N, N)", ndim=2), "similarity")
    distance = grid_distance(*grid_size)
    others = similarity.clone().fill_diagonal_(-float("inf"))
    nearest = others.argmax(dim=1)  # (N,)
    return float((distance[torch.arange(len(nearest)), nearest] == 1).float().mean())


def position_structure(table: torch.Tensor, grid_size: tuple[int, int], num_prefix_tokens: int) -> dict:
    """One position table's 2-D structure: near / far similarity (neighbour_similarity), the
    fraction of positions nearest a neighbour, and the mirror advantage. A table holding NaN or
    infinity (a diverged run) is refused."""
    _check_finite(check_tensor(table, "table"), "the position table")
    similarity = pos_embed_similarity(table, num_prefix_tokens)  # (N, N)
    near, far = neighbour_similarity(similarity, grid_size)
    return {
        "near": near,
        "far": far,
        "nearest_is_neighbour": nearest_is_neighbour(similarity, grid_size),
        "mirror_advantage": round(mirror_advantage(similarity, grid_size), 4),
    }


def _measure_images(data: Split) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = data.val.tensors
    return images[:MEASURE_IMAGES], labels[:MEASURE_IMAGES]


def measure_attention(model: nn.Module, data: Split) -> dict:
    """Per block and head (lists of lists): asymmetry, entropy (nats), mean attention distance
    (pixels), and the validation accuracy lost when that head alone is pruned."""
    images, _ = _measure_images(data)
    with eval_mode(model), torch.no_grad(), torch_threads(1):
        _, attn = model(images, return_attention=True)  # (depth, B, heads, T, T)
    config = model.config
    _, base = evaluate(model, data.val)
    pruned = [
        [base - _pruned_accuracy(model, data, block, head) for head in range(config.num_heads)]
        for block in range(config.depth)
    ]
    grid = model.patch_embed.grid_size
    distance = mean_attention_distance(attn, grid, config.patch_size, model.num_prefix_tokens)
    return {
        "asymmetry": attention_asymmetry(attn).tolist(),
        "entropy": attention_entropy(attn).tolist(),
        "distance": distance.tolist(),
        "pruning_cost": pruned,
    }


def _pruned_accuracy(model: nn.Module, data: Split, block: int, head: int) -> float:
    with prune_heads(model, [(block, head)]):
        return evaluate(model, data.val)[1]


def measure_gradients(model: nn.Module, data: Split) -> dict:
    """The readout's gradient per image (readout_gradient_norm) and the norm of the gradient of the
    batch's mean loss at the patch embedding's weight, on the measurement images."""
    images, labels = _measure_images(data)
    with torch_threads(1):
        readout = readout_gradient_norm(model, images, labels)
        with eval_mode(model):
            weight = model.patch_embed.proj.weight
            loss = F.cross_entropy(model(images), labels)
            (grad,) = torch.autograd.grad(loss, weight)
    return {"readout": readout, "patch_embed": float(grad.norm())}


def _norms(model: nn.Module) -> dict[str, float]:
    return {name: float(parameter.detach().norm()) for name, parameter in model.named_parameters()}


def run_trial(name: str, seed: int, data: Split | None = None) -> dict:
    """Train seed `seed` of trial `name` and measure it.

    Returns:
        run_record's dict (seed, val_accuracy, test_accuracy, steps, epochs, seconds, parameters,
        multiply_adds, ...) plus the curves (per epoch: "step", "train_loss", "val_loss",
        "val_curve"), "finite" (every loss a number) and the trial's measures:
            positions: {"steps": [...], "structure": [position_structure at each step]}
            attention: measure_attention at the end, "asymmetry_init" at init
            readout: {"init": measure_gradients, "end": measure_gradients}
            growth: {parameter name: final norm / initial norm}
    """
    trial = _check_name(name)
    experiment = trial.experiment
    seed = check_whole(seed, "seed", minimum=0, maximum=MAX_SEED)
    data = experiment_data(experiment.data) if data is None else check_split(data, experiment.data, name, "trains on")
    set_seed(seed)
    model = trial.build()
    measured, before = {}, _norms(model)
    if "readout" in trial.measures:
        measured["readout"] = {"init": measure_gradients(model, data)}
    if "attention" in trial.measures:
        images, _ = _measure_images(data)
        with eval_mode(model), torch.no_grad():
            _, attn = model(images, return_attention=True)
        measured["asymmetry_init"] = attention_asymmetry(attn).tolist()
    options = dict(experiment.fit)
    if "positions" in trial.measures:
        options["snapshot_every"] = SNAPSHOT_EVERY
    history = fit(model, data.train, data.val, seed=seed, progress=False, **options)
    _, test_accuracy = evaluate(model, data.test)
    record = run_record(model, history, test_accuracy, seed, tuple(data.train.tensors[0].shape[1:]))
    losses = history.train_loss + history.val_loss
    record |= {
        "step": history.step,
        "train_loss": history.train_loss,
        "val_loss": history.val_loss,
        "val_curve": history.val_accuracy,
        "finite": all(loss == loss and abs(loss) != float("inf") for loss in losses),
    }
    if "positions" in trial.measures:
        grid, prefix = model.patch_embed.grid_size, model.num_prefix_tokens
        measured["positions"] = {
            "steps": [step for step, _ in history.snapshots],
            "structure": [position_structure(table, grid, prefix) for _, table in history.snapshots],
        }
    if "attention" in trial.measures:
        measured["attention"] = measure_attention(model, data)
    if "readout" in trial.measures:
        measured["readout"]["end"] = measure_gradients(model, data)
    if "growth" in trial.measures:
        after = _norms(model)
        measured["growth"] = {name: after[name] / max(before[name], 1e-12) for name in after}
    return record | measured


# ---- the shipped results ------------------------------------------------------------------------


def shipped_runs(name: str, path: str | Path = RESULTS_FILE) -> list[dict]:
    """The shipped runs of trial `name`, one dict per seed (as run_trial returns them); a
    ValueError when the file's recipe is not today's TRIALS[name] (run `make claims` again)."""
    return runs_of_recipe(path, name, _check_name(name).as_dict(), "make claims")


def shipped_values(name: str, key: str = "val_accuracy") -> list:
    """One value per shipped seed, e.g. shipped_values("orientation", "val_accuracy")."""
    return values_of(shipped_runs(name), name, key)


def agrees_with_shipped(name: str, run: dict, data: Split, key: str = "val_accuracy") -> Agreement:
    """Whether a live run of trial `name` (run_trial's dict) agrees with the shipped seeds: exactly,
    if this kind of CPU made lesson9.json, else inside where one more seed lands (see
    utils.ablations.agrees_with_shipped). `data`: the trial's Split (another trial's is refused)."""
    runs = shipped_runs(name)
    check_split(data, _check_name(name).experiment.data, name)
    return agreement_of_runs(runs, run, key, made_here(RESULTS_FILE), data, name)


def versus(name_a: str, name_b: str, key: str = "val_accuracy", names: tuple[str, str] | None = None) -> Comparison:
    """Welch's t-test of two shipped trials over their seeds (utils.experiments.compare): str() is
    the verdict in words. Accuracies (keys ending in "accuracy") are shown as percentages."""
    a, b = shipped_values(name_a, key), shipped_values(name_b, key)
    return compare(a, b, percent=key.endswith("accuracy"), names=names or (name_a, name_b))


def after_epoch(name: str, curve: str, epoch: int) -> list[float]:
    """Per seed, a per-epoch curve ("train_loss", "val_loss", "val_curve") after epoch `epoch`
    (1: the first), e.g. after_epoch("orientation", "val_loss", 1)."""
    if curve not in ("train_loss", "val_loss", "val_curve"):
        raise ValueError(f"curve must be 'train_loss', 'val_loss' or 'val_curve', got {curve!r}")
    curves = values_of(shipped_runs(name), name, curve)
    epoch = check_whole(epoch, "epoch", minimum=1, maximum=min(len(values) for values in curves))
    return [values[epoch - 1] for values in curves]


def per_seed(name: str, *path: str) -> list:
    """Per seed, a measurement found under `path` in the run, e.g. per_seed("same colour",
    "attention", "asymmetry") -> one (depth, heads) list per seed."""
    if not all(isinstance(key, str) for key in path):
        raise WrongTypeError(f"path must be names of keys, e.g. 'attention', 'asymmetry', got {describe(path)}")
    values = []
    for run in shipped_runs(name):
        value = run
        for key in path:
            if not isinstance(value, Mapping) or key not in value:
                held = sorted(value) if isinstance(value, Mapping) else type(value).__name__
                raise ValueError(f"the shipped runs of {name!r} hold no {list(path)} (at {key!r}: {held})")
            value = value[key]
        values.append(value)
    return values
