"""Lesson 9's trials: popular claims about ViTs, each tested by training tiny ViTs over several seeds.

A trial is one arm of an experiment: a lesson-6 `Experiment` (data, model, fit's options with a
budget in steps) plus what lesson 9 varies beyond it (how the class token or the position table
starts) and what it measures on the trained model. `make claims` (tools/run_experiments.py
--suite claims) runs seeds 0-4 of every trial and ships the results in utils/results/lesson9.json;
the lesson runs seed 0 of a few live and prints the rest from the file.

- `TRIALS`: name -> `Trial`; `run_trial(name, seed, data)`: train and measure one seed
  (`run_arm(trial, seed, data)` for a Trial of your own).
- `CLAIMS`, `grade_claim(key)`, `verdict_table(*keys)`: each claim's comparisons graded by utils.rubric.
- `MEASURES`: what a trial can measure besides accuracy ("positions", "attention", "readout", "growth",
  "logits").
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
    DIGITS_FIT,
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
    sincos_pos_embed_2d,
)
from utils.experiments import MAX_SEED, Comparison, compare, run_record
from utils.inspection import (
    attention_asymmetry,
    attention_entropy,
    mean_attention_distance,
    prune_heads,
    readout_gradient_norm,
)
from utils.rubric import verdict_text
from utils.runtime import eval_mode, set_seed, torch_threads
from utils.tables import Table
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
    "sincos_matched": "the 2-D sin-cos table, each row scaled to the learned table's row norm at init",
}
MEASURES = {
    "positions": "the position table's grid structure every SNAPSHOT_EVERY steps, and its mirror pairs",
    "attention": "attention asymmetry, entropy and distance per head, and what pruning each head costs",
    "readout": "the gradient at the readout and at the patch embedding, at init and after training",
    "growth": "how much each parameter's norm grew during training",
    "logits": "the largest attention logit (q . k / sqrt(head_dim)) per block, at init and after training",
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
            elif self.init.get("pos_embed") == "sincos_matched":
                model.pos_embed.copy_(sincos_matched(model))
        return model

    def as_dict(self) -> dict:
        """The recipe as plain data (the shipped file stores it beside the results)."""
        return {**self.experiment.as_dict(), "init": dict(self.init), "measures": list(self.measures)}


def sincos_matched(model: nn.Module) -> torch.Tensor:
    """(1, T, D): the model's 2-D sin-cos table (utils.embeddings.sincos_pos_embed_2d), every patch
    row scaled to the mean row norm of the model's own learned table at init (about 0.14 for D =
    64, where unscaled sin-cos rows have norm sqrt(D / 2) = 5.66). The structure of sin-cos at the
    size of a learned table: the arm that separates the two. The class token's row stays zero."""
    prefix = model.num_prefix_tokens
    table = sincos_pos_embed_2d(model.patch_embed.grid_size, model.config.embed_dim, prefix == 1)  # (1, T, D)
    target = float(model.pos_embed.detach()[:, prefix:].norm(dim=-1).mean())  # the learned rows' norm
    rows = table[:, prefix:]  # (1, N, D)
    return torch.cat([table[:, :prefix], rows * (target / rows.norm(dim=-1, keepdim=True))], dim=1)


def _trial(data: str, steps: int, fit: Mapping, init=None, measures=(), **vit) -> Trial:
    return Trial(Experiment(data, "vit", {"steps": steps, **fit}, vit), init or {}, measures)


ORIENTATION_STEPS = 400  # as lesson 6: 16 epochs of 3,200 images
LONG_STEPS = 1200  # three times as long, for claims that may depend on the budget
PAIRS_STEPS = 600  # "same colour?": 24 epochs
DIGITS_STEPS = 600  # 67 epochs of 1,078 images
CONVERGED_STEPS = 2000  # digits trained as long as lesson 6's final model
DIGITS = dict(DIGITS_FIT)  # lesson 6's digits recipe (utils.ablations)
HIGH_LR = dict(DIGITS, lr=0.1)  # 33 x the recipe's learning rate
DIVERGENCE = ("growth", "logits")
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
    # claims 2, 3: the confound under sin-cos's lead (its rows are ~40 x the learned table's at init):
    # the sin-cos table at the learned table's scale, frozen (position lr x0), so only its structure differs
    **{
        f"{prefix}, sincos at learned scale": _trial(
            data,
            ORIENTATION_STEPS,
            {**PAIRS_FIT, "lr_multipliers": {"pos_embed": 0.0}},
            init={"pos_embed": "sincos_matched"},
        )
        for prefix, data in (("orientation", "orientation"), ("orientation 1000", "orientation_1000"))
    },
    # claim 4: a Gaussian position table
    "orientation, gaussian init": _trial(
        "orientation", ORIENTATION_STEPS, PAIRS_FIT, init={"pos_embed": "gaussian"}, measures=POSITIONS
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
    "digits": _trial("digits", DIGITS_STEPS, DIGITS, measures=DIVERGENCE),
    "digits, lr 0.1, no warm-up": _trial("digits", DIGITS_STEPS, {**HIGH_LR, "warmup": 0.0}, measures=DIVERGENCE),
    "digits, lr 0.1": _trial("digits", DIGITS_STEPS, HIGH_LR, measures=DIVERGENCE),
    "digits, lr 0.1, no warm-up, norm_pre": _trial(
        "digits", DIGITS_STEPS, {**HIGH_LR, "warmup": 0.0}, norm_pre=True, measures=DIVERGENCE
    ),
    "digits, lr 0.1, norm_pre": _trial("digits", DIGITS_STEPS, HIGH_LR, norm_pre=True, measures=DIVERGENCE),
    # claim 10: how the class token starts (claim 9's class-token side is "digits")
    **{
        f"digits, class token {kind}": _trial("digits", DIGITS_STEPS, DIGITS, init={"cls_token": kind})
        for kind in ("xavier", "zeros")
    },
    **{
        f"orientation, class token {kind}": _trial(
            "orientation", ORIENTATION_STEPS, PAIRS_FIT, init={"cls_token": kind}
        )
        for kind in ("xavier", "zeros")
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


def attention_logits(model: nn.Module, images: torch.Tensor) -> list[torch.Tensor]:
    """Per block, the attention logits q . k / sqrt(head_dim) before the softmax, (B, heads, T, T):
    the softmax of each is the block's attention (model(images, return_attention=True)).

    Args:
        model: a VisionTransformer (blocks with attn.qkv, num_heads, head_dim; qk-norm applied
            where the model has it).
        images: (B, C, H, W).
    """
    inputs = []
    hooks = [block.attn.register_forward_pre_hook(lambda m, args: inputs.append(args[0])) for block in model.blocks]
    try:
        with eval_mode(model), torch.no_grad(), torch_threads(1):
            model(images)
            logits = []
            for block, x in zip(model.blocks, inputs, strict=True):
                attn = block.attn
                B, T, _ = x.shape
                qkv = attn.qkv(x).reshape(B, T, 3, attn.num_heads, attn.head_dim)  # (B, T, 3, heads, head_dim)
                q, k, _ = qkv.permute(2, 0, 3, 1, 4)  # each (B, heads, T, head_dim)
                if hasattr(attn, "q_norm"):  # qk-norm, where the model has it: the logits it bounds
                    q, k = attn.q_norm(q), attn.k_norm(k)
                logits.append(q @ k.transpose(-2, -1) / attn.head_dim**0.5)  # (B, heads, T, T)
    finally:
        for hook in hooks:
            hook.remove()
    return logits


def max_attention_logits(model: nn.Module, images: torch.Tensor) -> list[float | None]:
    """Per block, the largest attention logit (attention_logits) over the images, heads, queries and
    keys: the quantity whose growth ViT-22B (Dehghani et al. 2023) and Wortsman et al. (2023) tie
    to divergence at high learning rates, and that qk-layernorm bounds. None where not finite."""
    largest = [float(logits.max()) for logits in attention_logits(model, images)]
    return [value if value == value and abs(value) != float("inf") else None for value in largest]


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
            logits: {"max_logit": {"init": [per block], "end": [per block]}} (max_attention_logits)
    """
    return run_arm(_check_name(name), seed, data, name)


def run_arm(trial: Trial, seed: int, data: Split | None = None, name: str = "this trial") -> dict:
    """run_trial for a Trial of your own (not in TRIALS): train seed `seed` and measure it, e.g.
    run_arm(Trial(Experiment("digits", "vit", {"steps": 200, "lr": 3e-3})), seed=0)."""
    if not isinstance(trial, Trial):
        raise WrongTypeError(f"trial must be a Trial (utils.claims), got {describe(trial)}")
    experiment = trial.experiment
    seed = check_whole(seed, "seed", minimum=0, maximum=MAX_SEED)
    data = experiment_data(experiment.data) if data is None else check_split(data, experiment.data, name, "trains on")
    set_seed(seed)
    model = trial.build()
    measured, before = {}, _norms(model)
    if "logits" in trial.measures:
        measured["max_logit"] = {"init": max_attention_logits(model, _measure_images(data)[0])}
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
    if "logits" in trial.measures:
        measured["max_logit"]["end"] = max_attention_logits(model, _measure_images(data)[0])
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
    if this kind of CPU made its runs in lesson9.json, else inside where one more seed lands (see
    utils.ablations.agrees_with_shipped). `data`: the trial's Split (another trial's is refused)."""
    runs = shipped_runs(name)
    check_split(data, _check_name(name).experiment.data, name)
    return agreement_of_runs(runs, run, key, made_here(RESULTS_FILE, name), data, name)


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


# ---- the verdicts: each claim's comparisons, graded by utils.rubric ----------------------------

# The smallest effects of interest, fixed from what each claim says (never from its results): a
# recipe change worth following moves validation accuracy by 2 points; a "slower start" costs 0.05
# nats of validation or training loss; "symmetric" attention means an asymmetry within 0.05 of the
# untrained model's; a position-table structure worth the name adds 0.05 to a cosine similarity.
ACCURACY = 0.02  # 2 points
LOSS = 0.05  # nats
ASYMMETRY = 0.05
SIMILARITY = 0.05
GRADIENT_RATIO = 0.5  # "larger": at least 1.5 times
PIXELS = 2.0  # attention distance, in pixels


def _accuracy(a: str, b: str, claim: str, names: tuple[str, str]) -> dict:
    return dict(a=shipped_values(a), b=shipped_values(b), claim=claim, effect=ACCURACY, names=names, percent=True)


def _seed_means(name: str, *path: str) -> list[float]:
    """Per seed, the mean of a nested per-block, per-head measurement."""
    return [float(torch.tensor(value, dtype=torch.float64).mean()) for value in per_seed(name, *path)]


def _structure(name: str, key: str, at: int) -> list[float]:
    """Per seed, a position-structure number at snapshot `at` (0: step 0, -1: the end)."""
    return [
        s[at][key] if key != "near_far" else s[at]["near"] - s[at]["far"]
        for s in per_seed(name, "positions", "structure")
    ]


def uniform_attention_distance(grid: int = 4, patch_size: int = 8) -> float:
    """The mean attention distance (pixels) of attention spread evenly over every token of a grid."""
    tokens = grid * grid + 1
    uniform = torch.full((1, 1, 1, tokens, tokens), 1 / tokens)  # (depth, B, heads, T, T)
    return float(mean_attention_distance(uniform, grid, patch_size))


def _family_1() -> dict:
    return {
        f"{label}": _accuracy(f"{base}, position lr x0.1", base, "higher", ("x0.1", "x1"))
        for label, base in [
            ("side by side?, 400 steps", "orientation"),
            ("side by side?, 1,200 steps", "orientation, 1200 steps"),
            ("digits, 2 px patches", "digits, patch 2"),
        ]
    }


def _family_1_x10() -> dict:
    return {
        f"{label}": _accuracy(f"{base}, position lr x10", base, "higher", ("x10", "x1"))
        for label, base in [
            ("side by side?, 400 steps", "orientation"),
            ("side by side?, 1,200 steps", "orientation, 1200 steps"),
            ("digits, 2 px patches", "digits, patch 2"),
        ]
    }


def _family_3() -> dict:
    family = {}
    for size, base in (("1,000 images", "orientation 1000"), ("3,200 images", "orientation")):
        for arm, label in (
            ("frozen", "frozen random"),
            ("sincos at learned scale", "sin-cos, learned scale"),
            ("sincos", "sin-cos"),
        ):
            family[f"{size}, {label}"] = _accuracy(f"{base}, {arm}", base, "higher", (label, "learned"))
    return family


def _family_3_scale() -> dict:
    return {
        size: _accuracy(f"{base}, sincos", f"{base}, sincos at learned scale", "higher", ("norm 5.66", "norm 0.14"))
        for size, base in (("1,000 images", "orientation 1000"), ("3,200 images", "orientation"))
    }


def _family_5() -> dict:
    return {
        label: _accuracy(f"{base}, norm_pre", base, "higher", ("norm_pre", "without"))
        for label, base in (("lr 0.1, no warm-up", "digits, lr 0.1, no warm-up"), ("lr 0.1, warm-up", "digits, lr 0.1"))
    }


def _family_8() -> dict:
    return {
        f"lr {lr}, {pool}": _accuracy(
            f"digits converged, class token, lr {lr}",
            f"digits converged, {pool}, lr {lr}",
            "higher",
            ("class token", pool),
        )
        for lr in ("0.001", "0.003", "0.01")
        for pool in ("mean", "mean + fc_norm")
    }


def _loss(a: str, b: str, curve: str, epoch: int, names: tuple[str, str]) -> dict:
    return dict(
        a=after_epoch(a, curve, epoch), b=after_epoch(b, curve, epoch), claim="higher", effect=LOSS, names=names
    )


def _family_10() -> dict:
    names = ("Xavier", "trunc-normal")
    return {
        "digits, validation loss after epoch 1": _loss("digits, class token xavier", "digits", "val_loss", 1, names),
        "digits, validation loss after epoch 2": _loss("digits, class token xavier", "digits", "val_loss", 2, names),
        "digits, final accuracy": _accuracy("digits, class token xavier", "digits", "lower", names),
        "side by side?, final accuracy": _accuracy("orientation, class token xavier", "orientation", "lower", names),
    }


SYMMETRY_TASKS = {"same colour": "same colour?", "orientation": "side by side?", "digits, patch 2": "digits"}


def _family_11() -> dict:
    return {
        label: dict(
            a=_seed_means(name, "attention", "asymmetry"),
            b=_seed_means(name, "asymmetry_init"),
            claim="equal",
            effect=ASYMMETRY,
            names=("trained", "at init"),
        )
        for name, label in SYMMETRY_TASKS.items()
    }


def _ratio_family() -> dict:
    cls = per_seed("digits converged, class token, lr 0.003", "readout", "end", "patch_embed")
    mean = per_seed("digits converged, mean, lr 0.003", "readout", "end", "patch_embed")
    ratios = [c / m for c, m in zip(cls, mean, strict=True)]
    return {
        "patch embedding, trained": dict(
            a=ratios, b=[1.0] * len(ratios), claim="higher", effect=GRADIENT_RATIO, names=("class token / mean", "1")
        )
    }


def _heads_family() -> dict:
    costs = 100 * torch.tensor(per_seed("same colour", "attention", "pruning_cost")).flatten(1)  # (seeds, heads)
    return {
        "same colour?, points of accuracy lost when one head is pruned": dict(
            a=costs.max(dim=1).values.tolist(),
            b=costs.median(dim=1).values.tolist(),
            claim="higher",
            effect=100 * ACCURACY,
            names=("costliest head", "median head"),
        )
    }


def _distance_family() -> dict:
    first = _seed_means_of_block("orientation", 0)  # block 1's mean attention distance per seed (pixels)
    return {
        "side by side?, block 1 (pixels)": dict(
            a=first,
            b=[uniform_attention_distance()] * len(first),
            claim="equal",
            effect=PIXELS,
            names=("block 1", "uniform attention"),
        )
    }


def _seed_means_of_block(name: str, block: int) -> list[float]:
    return [sum(run[block]) / len(run[block]) for run in per_seed(name, "attention", "distance")]


@dataclass(frozen=True)
class Claim:
    """A claim on trial: its words, its public source (or "hypothesis"), the regime the source speaks
    of and whether this lesson tests it there, and the comparisons that grade it here."""

    words: str
    source: str
    regime: str
    family: object  # () -> {label: grade()'s keyword arguments}, or a str: why it is not testable here


CLAIMS: dict[str, Claim] = {
    "1": Claim(
        "the position table needs a ~10x smaller learning rate than the rest",
        "MAE's fine-tuning code (util/lr_decay.py, after BEiT) puts pos_embed in layer 0, whose learning "
        "rate layer-wise decay shrinks most",
        "fine-tuning a pre-trained ViT; tested here from scratch only",
        _family_1,
    ),
    "1, x10": Claim(
        "(the other way) a 10x larger position learning rate helps",
        "this lesson: the other direction of claim 1",
        "training from scratch, as here",
        _family_1_x10,
    ),
    "2": Claim(
        "with learned positions the loss falls more slowly at first than with sin-cos",
        "hypothesis",
        "any; tested here on one task",
        lambda: {
            "side by side?, training loss at step 100": _loss(
                "orientation", "orientation, sincos", "train_loss", 4, ("learned", "sin-cos")
            )
        },
    ),
    "3": Claim(
        "on small data, a frozen position table beats a learned one",
        "hypothesis",
        "small data from scratch, as here",
        _family_3,
    ),
    "3, scale": Claim(
        "(the confound) sin-cos's lead comes from its size, not only its structure",
        "this lesson: sin-cos rows have norm 5.66 at init, learned ones 0.14",
        "as here",
        _family_3_scale,
    ),
    "4": Claim(
        "a 2-D Gaussian position init speeds up convergence",
        "hypothesis",
        "any; tested here on one task",
        lambda: {
            "side by side?, 3,200 images": _accuracy(
                "orientation, gaussian init", "orientation", "higher", ("Gaussian", "trunc-normal")
            )
        },
    ),
    "5": Claim(
        "a LayerNorm after the positions (norm_pre) fixes a run that diverges",
        "hypothesis; the documented fix is a LayerNorm on queries and keys (ViT-22B; Wortsman et al. 2023)",
        "large or high-learning-rate runs; tested here at 33x the learning rate",
        _family_5,
    ),
    "5, NaN": Claim(
        "the NaN came from exploding position embeddings",
        "hypothesis",
        "float16 training on accelerators; not run here",
        "no loss became NaN in 20 runs at 33x the learning rate in float32 on a CPU; float16 overflow, where "
        "real runs go NaN, needs mixed precision on an accelerator",
    ),
    "6": Claim(
        "learned position tables keep 2-D neighbourhoods",
        'ViT paper, section 4.5: "closer patches tend to have more similar position embeddings"',
        "ViT-L/32 after large-scale pre-training; tested here on tiny models",
        lambda: {
            "side by side?, 400 steps": dict(
                a=_structure("orientation", "near_far", -1),
                b=_structure("orientation", "near_far", 0),
                claim="higher",
                effect=SIMILARITY,
                names=("trained", "at init"),
            )
        },
    ),
    "7": Claim(
        "position tables learn semantic relations (mirror positions alike)",
        "hypothesis",
        "any; tested here with objects always at mirrored places",
        lambda: {
            "mirror advantage": dict(
                a=_structure("mirrored colour", "mirror_advantage", -1),
                b=_structure("same colour", "mirror_advantage", -1),
                claim="higher",
                effect=SIMILARITY,
                names=("mirrored", "anywhere"),
            )
        },
    ),
    "8": Claim(
        "mean pooling does worse than the class token",
        'ViT paper, App. D.3: GAP at first "performed very poorly", a difference "fully explained by the '
        'requirement for a different learning-rate"',
        "ImageNet-scale pre-training; tested here on 8 x 8 digits at three learning rates",
        _family_8,
    ),
    "9": Claim(
        "the class token's gradient is larger than mean pooling's",
        "hypothesis",
        "any; tested here at the patch embedding of trained digit models",
        _ratio_family,
    ),
    "10": Claim(
        "a Xavier-uniform class token makes the first epochs slow (and noisy)",
        "hypothesis; timm starts the class token at normal(std 1e-6)",
        "any; tested here on two tasks",
        _family_10,
    ),
    "11": Claim(
        "the attention matrix is symmetric",
        "hypothesis",
        "any trained ViT; tested here on tiny ones",
        _family_11,
    ),
    "12": Claim(
        "a few heads do the heavy lifting; the rest can be pruned",
        "Voita et al. 2019, title (machine translation)",
        "trained Transformers; tested here on a tiny ViT",
        _heads_family,
    ),
    "13": Claim(
        "the first layer already attends across most of the image",
        'ViT paper, section 4.5: "some heads attend to most of the image already in the lowest layers"',
        "ViT-L/16 on 224 px images; tested here on 32 px ones",
        _distance_family,
    ),
}
CORE = ("1", "3", "5", "8", "10", "11")  # the claims the lesson takes in depth; the others are a gallery


def grade_claim(key: str) -> dict:
    """{label: Grade} for one claim of CLAIMS: its comparisons graded together (Holm inside the
    family, utils.rubric.grade_family), or the one not-testable Grade."""
    from utils.rubric import grade_family, not_testable  # the rubric sits beside this module

    if key not in CLAIMS:
        raise ValueError(f"no claim {key!r}; the claims: {', '.join(map(repr, CLAIMS))}")
    claim = CLAIMS[key]
    if isinstance(claim.family, str):
        return {"": not_testable(claim.words, claim.family)}
    return grade_family(claim.family())


def outcome_of(grades: Mapping) -> str:
    """One claim's outcome in words: the shared outcome, or how many comparisons came out which way."""
    outcomes = [grade.outcome for grade in grades.values()]
    if len(set(outcomes)) == 1:
        return outcomes[0] + ("" if len(outcomes) == 1 else f" ({len(outcomes)} of {len(outcomes)})")
    counts = {outcome: outcomes.count(outcome) for outcome in dict.fromkeys(outcomes)}
    return "mixed: " + ", ".join(f"{count} {outcome}" for outcome, count in counts.items())


def verdict_table(*keys: str) -> Table:
    """The verdicts of one or more claims as the lesson shows them: a row per comparison, named
    "claim 1, side by side?, 400 steps", and its grade (utils.rubric.verdict_text)."""
    if not keys:
        raise ValueError("name at least one claim, e.g. verdict_table('1')")
    rows = [
        [f"claim {key}" + (f", {label}" if label else ""), verdict_text(grade)]
        for key in keys
        for label, grade in grade_claim(key).items()
    ]
    return Table(["comparison", "verdict"], rows)
