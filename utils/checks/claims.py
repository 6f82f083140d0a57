"""Lesson 9's exercise checkers: Holm's adjusted p-values of a family of comparisons, how steep the
loss is at the vector the head reads (the readout gradient norm), and the verdict on two sets of
runs (means, spreads, Welch's test)."""

import copy
import difflib
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from utils.checks.core import CheckFailed, call_learner, describe, python_number, real_number
from utils.experiments import ALPHA, compare
from utils.inspection import readout_gradient_norm
from utils.runtime import torch_threads
from utils.vit import VisionTransformer, ViTConfig

# ---- the gradient at the readout -------------------------------------------------------------

TINY = dict(image_size=8, patch_size=4, in_channels=1, num_classes=10, embed_dim=16, depth=2, num_heads=2)
READOUT_RTOL = 1e-4  # float32, and the fused attention kernel against the explicit one: ~1e-6 apart


@dataclass(frozen=True)
class ReadoutCase:
    """One model and batch the learner's function measures."""

    overrides: dict = field(default_factory=dict)  # ViTConfig fields beyond TINY
    batch: int = 4  # images; with pool='mean' never the patches' number (4): a division by either shows which
    train: bool = False  # handed over in train mode
    grads: bool = False  # handed over with gradients in .grad, as in the middle of a training loop
    seed: int = 0

    @property
    def where(self) -> str:
        """The case in words, for the messages."""
        pool = self.overrides.get("pool", "cls")
        extras = ", fc_norm=True" if self.overrides.get("fc_norm") else ""
        extras += f", dropout={self.overrides['dropout']}" if self.overrides.get("dropout") else ""
        mode = " handed over in train mode" if self.train else ""
        grads = " holding a training loop's gradients in .grad" if self.grads else ""
        return f"(a pool={pool!r} model{extras}{mode}{grads}, {self.batch} images)"

    def build(self) -> tuple[VisionTransformer, torch.Tensor, torch.Tensor]:
        """The model, with random values in every parameter (the norms' scales too), and a batch."""
        with torch.random.fork_rng(devices=[]):  # building draws from the global generator: the learner's is left alone
            model = VisionTransformer(ViTConfig.tiny(**{**TINY, **self.overrides}))
        generator = torch.Generator().manual_seed(self.seed)
        with torch.no_grad():
            for name, p in model.named_parameters():
                centre = 1.0 if "norm" in name and name.endswith("weight") else 0.0
                p.copy_(centre + (0.5 if "norm" in name else 0.3) * torch.randn(p.shape, generator=generator))
        model.train(self.train)
        if self.grads:
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=generator)
        images = torch.rand(self.batch, 1, 8, 8, generator=generator)  # (B, 1, 8, 8)
        labels = torch.randint(0, TINY["num_classes"], (self.batch,), generator=generator)  # (B,)
        return model, images, labels


READOUT_CASES = [
    ReadoutCase(),  # the class token
    ReadoutCase(dict(pool="mean"), batch=3, grads=True, seed=1),  # no class token: the mean of 4 patch tokens
    ReadoutCase(dict(pool="mean", fc_norm=True), batch=5, seed=2),  # the mean, then a LayerNorm
    ReadoutCase(dict(dropout=0.1), train=True, seed=3),  # dropout on until the model is put in eval mode
]

DROPOUT_SEEDS = (1, 2)  # two draws of dropout's masks whose readout norms differ (a test checks it)

CAPTURE = "capture the head's own input with a forward hook on model.head (args[0])"


def _gradient_at(value: torch.Tensor, to_logits: Callable[[torch.Tensor], torch.Tensor], labels) -> torch.Tensor:
    """The gradient of the summed cross-entropy at a copy of `value`, fed through `to_logits`."""
    leaf = value.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = F.cross_entropy(to_logits(leaf), labels, reduction="sum")
    return torch.autograd.grad(loss, leaf)[0]


def _readout_variants(model: VisionTransformer, images: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Wrong-but-plausible values, each keyed by the sentence that names the mistake ({where}: the case)."""
    model = copy.deepcopy(model).eval()
    seen = {}
    hooks = [
        model.norm.register_forward_pre_hook(lambda m, args: seen.__setitem__("tokens", args[0])),  # (B, T, D)
        model.head.register_forward_pre_hook(lambda m, args: seen.__setitem__("readout", args[0])),  # (B, D)
    ]
    with torch.no_grad():
        logits = model(images)  # (B, classes)
    for hook in hooks:
        hook.remove()
    B, P = len(images), model.num_prefix_tokens
    readout = seen["readout"]
    gradient = _gradient_at(readout, model.head, labels)  # (B, D), the right one
    error = logits.softmax(dim=-1) - F.one_hot(labels, logits.shape[-1])  # (B, classes), the gradient at the logits
    weight_gradient = error.T @ readout  # (classes, D), that of the summed loss
    variants = {
        f"your value is the reference's divided by the batch size, {B}: the loss was averaged over the "
        "batch (F.cross_entropy's default), which divides every image's gradient by B; each image's own "
        "loss is wanted: sum them, reduction='sum', and row b of the gradient is d(loss_b)/d(r_b) {where}": (
            gradient.norm(dim=1).mean() / B
        ),
        "that is the norm of the whole (B, D) gradient, one number for the batch: take the norm of each "
        "image's row, gradient.norm(dim=1), then the mean over the images {where}": gradient.norm(),
        f"that is the norm of the whole (B, D) gradient of the batch's mean loss: the loss averaged over "
        f"the batch divides every row by B = {B}, and one norm of the whole matrix mixes the images; sum "
        "the images' own losses (reduction='sum'), then gradient.norm(dim=1).mean() {where}": gradient.norm() / B,
        "that is the gradient at the logits (the head's output), softmax - one-hot; the readout is the "
        "head's input r, where the gradient is (softmax - one-hot) @ head.weight {where}": error.norm(dim=1).mean(),
        "that is the norm of the head's weight gradient (model.head.weight.grad, a (classes, D) matrix); "
        "the gradient wanted is the one at the readout, the (D,) vector the head reads: "
        "torch.autograd.grad(loss, readout) {where}": weight_gradient.norm(),
        "that is the norm of the head's weight gradient (model.head.weight.grad) of the batch's mean loss; "
        "the gradient wanted is the one at the readout, the (D,) vector the head reads, of each image's own "
        "loss: torch.autograd.grad(loss, readout) {where}": weight_gradient.norm() / B,
    }
    if model.config.pool == "cls":
        before_norm = _gradient_at(seen["tokens"][:, 0], lambda t: model.head(model.norm(t)), labels)
        variants[
            "that is the gradient at the class token before the final LayerNorm (model.norm); the head reads "
            f"the normalised token: {CAPTURE} {{where}}"
        ] = before_norm.norm(dim=1).mean()
    else:
        tokens = model.norm(seen["tokens"])  # (B, N, D), what forward_features returns
        at_tokens = _gradient_at(tokens, lambda t: model.head(model.fc_norm(t[:, P:].mean(dim=1))), labels)
        variants[
            "that is the gradient at token 0, which in this model is a patch: with pool='mean' there is no "
            "class token, and the head reads the mean of the patch tokens"
            + (" after fc_norm" if model.config.fc_norm else "")
            + f"; {CAPTURE} {{where}}"
        ] = at_tokens[:, 0].norm(dim=1).mean()
        if model.config.fc_norm:
            mean = tokens[:, P:].mean(dim=1)  # (B, D), before fc_norm
            before_fc_norm = _gradient_at(mean, lambda m: model.head(model.fc_norm(m)), labels)
            variants[
                "that is the gradient at the mean of the patch tokens before fc_norm; the head reads what "
                f"comes out of model.fc_norm: {CAPTURE} {{where}}"
            ] = before_fc_norm.norm(dim=1).mean()
    return {sentence: float(value) for sentence, value in variants.items()}


def _close(got: float, expected: float) -> bool:
    return math.isclose(got, expected, rel_tol=READOUT_RTOL, abs_tol=1e-7)


def _readout_value(result: object, where: str) -> float:
    """The learner's result as a float (a Python or NumPy number, a 0-d tensor or array will do);
    CheckFailed naming what came otherwise."""
    if isinstance(result, torch.Tensor) and result.requires_grad:
        raise CheckFailed(
            f"return the value as a float (.item()), got {describe(result)} that still needs grad {where}: "
            "it keeps the whole computation graph alive, and .item() gives the plain number"
        )
    number = python_number(result, "your value", where)
    if isinstance(number, torch.Tensor | np.ndarray):  # more than one number
        raise CheckFailed(
            f"return one number, the mean over the images, got {describe(result)} {where}: average the "
            "norms, .mean(), then .item()"
        )
    if isinstance(number, bool | int) or not isinstance(number, float):
        raise CheckFailed(f"expected a float, got {describe(result)} {where}")
    value = float(number)
    if not math.isfinite(value):
        raise CheckFailed(f"your function returned {value} {where}; a norm of a gradient is a finite number")
    return value


@dataclass
class _ModelState:
    """What the learner's function must leave as it was: parameters, their .grad and requires_grad, hooks, modes."""

    parameters: dict[str, torch.Tensor]
    grads: dict[str, torch.Tensor | None]
    requires_grad: dict[str, bool]
    hooks: int
    training: bool

    @classmethod
    def of(cls, model: nn.Module) -> "_ModelState":
        named = dict(model.named_parameters())
        return cls(
            parameters={name: p.detach().clone() for name, p in named.items()},
            grads={name: None if p.grad is None else p.grad.clone() for name, p in named.items()},
            requires_grad={name: p.requires_grad for name, p in named.items()},
            hooks=sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules()),
            training=model.training,
        )


def _mode(training: bool) -> str:
    return "train" if training else "eval"


def _raise_if_model_changed(model: nn.Module, before: _ModelState, where: str) -> None:
    """CheckFailed when the learner's function trained the model, froze or unfroze it, or left a hook on it."""
    after = _ModelState.of(model)
    changed = [name for name, p in after.parameters.items() if not torch.equal(p, before.parameters[name])]
    if changed:
        raise CheckFailed(
            f"your function changed the model's parameters ({', '.join(changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''}) {where}: measuring must not train the model; no "
            "optimizer.step(), no in-place edits of the weights"
        )
    flipped = [name for name, flag in after.requires_grad.items() if flag != before.requires_grad[name]]
    if flipped:
        raise CheckFailed(
            f"your function changed requires_grad of {', '.join(flipped[:3])} {where}: leave the parameters as "
            "they came; the gradient at the readout needs requires_grad only on the readout itself"
        )
    if after.hooks != before.hooks:
        raise CheckFailed(
            f"your function left a hook on the model {where}: remove it when done (handle = "
            "model.head.register_forward_hook(...), then handle.remove()), or it runs in every later forward pass"
        )


def _raise_if_grads_touched(model: nn.Module, before: _ModelState, where: str) -> None:
    """CheckFailed when the learner's function wrote, added to or wiped a parameter's .grad."""
    after = _ModelState.of(model)
    for name, old in before.grads.items():
        new = after.grads[name]
        if old is None and new is not None:
            raise CheckFailed(
                f"your function left gradients in the parameters' .grad ({name}, ...) {where}: loss.backward() "
                "writes them there, and a training step would add its own to them; torch.autograd.grad(loss, "
                "readout) returns the gradient you need and writes no .grad"
            )
        if old is not None and (new is None or not torch.equal(new, old)):
            raise CheckFailed(
                f"your function changed the gradients the model held in .grad when it came ({name}, ...) "
                f"{where}: loss.backward() adds to them and zero_grad() wipes them, so a training loop that "
                "measures between backward() and step() would be broken; torch.autograd.grad(loss, readout) "
                "leaves them alone"
            )


def _explain_readout(error: Exception) -> str | None:
    """Errors of a readout gradient, in words; None for any other."""
    text = str(error)
    if "does not require grad" in text:
        return (
            "the readout has no gradient to follow: was the forward pass inside torch.no_grad(), or the "
            "readout detached without .requires_grad_()?"
        )
    if "appears to not have been used in the graph" in text:
        return f"the tensor you differentiate at is not the one the head read: {CAPTURE}"
    if "backward through the graph a second time" in text:
        return "backward() ran twice on the same graph: compute the gradient once, torch.autograd.grad(loss, readout)"
    return None


def _readout_failure(value: float, reference: float, variants: dict[str, float], case: ReadoutCase, fn) -> str:
    """The message for a wrong value: a typical mistake by name, dropout, or the numbers."""
    for sentence, wrong in variants.items():
        if _close(value, wrong):
            return sentence.format(where=case.where)
    if case.train:  # two calls under two seeds of the global generator (the learner's own is left alone)
        values = []
        for seed in DROPOUT_SEEDS:
            model, images, labels = case.build()
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                values.append(
                    _readout_value(
                        call_learner(fn, model, images, labels, returns=object, where=case.where), case.where
                    )
                )
        if not _close(*values):
            return (
                f"your value changes from call to call, {values[0]:.5g} then {values[1]:.5g} {case.where}: the model "
                "stayed in train mode, where dropout is on; measure in eval mode (model.eval()), then put the "
                "model back in the mode it came in"
            )
    return (
        f"expected {reference:.5g}, got {value:.5g} {case.where}: the readout is the head's input (the class "
        "token's output, or the mean of the patch tokens after fc_norm); take each image's own cross-entropy, "
        "its gradient at its readout, the norm of that (D,) vector, and the mean over the images"
    )


def check_readout_gradient_norm(fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], float]) -> None:
    """Check a learner's readout_gradient_norm(model, images, labels) -> float against the reference,
    on a class-token model, two mean-pooling ones (one with fc_norm) and one handed over in train
    mode with dropout; the model must come back as it went in (parameters, .grad, mode, hooks)."""
    with torch_threads(1):  # tiny models: one thread is the fastest, and the same on every machine
        for case in READOUT_CASES:
            model, images, labels = case.build()
            reference = readout_gradient_norm(model, images, labels)  # leaves the model as it came
            variants = _readout_variants(model, images, labels)
            before = _ModelState.of(model)
            result = call_learner(
                fn, model, images.clone(), labels.clone(), returns=object, where=case.where, explain=_explain_readout
            )
            value = _readout_value(result, case.where)
            _raise_if_model_changed(model, before, case.where)
            if not _close(value, reference):
                raise CheckFailed(_readout_failure(value, reference, variants, case, fn))
            _raise_if_grads_touched(model, before, case.where)
            if model.training != before.training:
                raise CheckFailed(
                    f"the model came in {_mode(before.training)} mode and your function left it in "
                    f"{_mode(model.training)} mode {case.where}: note model.training first and restore it at the "
                    "end (utils.runtime.eval_mode does both)"
                )
            again = _readout_value(
                call_learner(fn, model, images.clone(), labels.clone(), returns=object, where=case.where), case.where
            )
            if not _close(again, value):
                raise CheckFailed(
                    f"your function gave {value:.5g}, then {again:.5g} on the same model and images {case.where}: "
                    "the value must not depend on earlier calls (something adding up from call to call?)"
                )
    print(
        "✓ readout_gradient_norm matches the reference for pool='cls', pool='mean', fc_norm and a model in "
        "train mode, and leaves every model as it came"
    )


# ---- the verdict on two sets of runs -------------------------------------------------------------

KEYS = ("mean_a", "std_a", "mean_b", "std_b", "p", "significant")
VERDICT_RTOL = 1e-5  # float32 (torch) sums and scipy's own formulas differ from compare's in the 7th digit
_EXACT = 2.2669579355275196  # b's offset that puts scipy's Welch p of the last case exactly on 0.05


def _numbers(text: str) -> list[float]:
    """'0.9 0.8' -> [0.9, 0.8]: a long list of seeds on one line."""
    return [float(word) for word in text.split()]


VERDICT_CASES = [  # (a, b, the case in words)
    ([0.912, 0.918, 0.915, 0.920, 0.913], [0.890, 0.935, 0.870], "a of 5 seeds, b of 3 with a spread 10 times a's"),
    (
        _numbers("0.957 0.940 0.934 0.921 0.946 0.962 0.950 0.955 0.960 0.941 0.977 0.941 0.954 0.977 0.949 0.951"),
        _numbers(
            "0.935 0.946 0.914 0.934 0.964 0.945 0.939 0.947 0.947 0.944 "
            "0.950 0.920 0.950 0.933 0.952 0.942 0.929 0.941 0.929 0.955"
        ),
        "a of 16 seeds, b of 20: a difference smaller than either spread, yet significant",
    ),
    ([0.75, 0.75, 0.75, 0.75], [0.70, 0.74, 0.72, 0.73, 0.71], "a of 4 seeds without any spread, b of 5"),
    ([0.81, 0.84, 0.80, 0.83, 0.82], [0.81, 0.84, 0.80, 0.83, 0.82], "identical lists of 5 seeds: t = 0, p = 1"),
    ([0.0, 1.0, 2.0], [_EXACT, _EXACT + 1.0, _EXACT + 2.0], "a and b of 3 values, p right at the edge: 0.05"),
]


def _keyed(result: object, where: str) -> Mapping:
    """The learner's dict, with every expected key; CheckFailed naming what is missing or misspelt."""
    if not isinstance(result, Mapping):
        raise CheckFailed(f"expected a dict with the keys {', '.join(KEYS)}, got {describe(result)} {where}")
    missing = [key for key in KEYS if key not in result]
    if missing:
        extra = [key for key in result if key not in KEYS]
        close = difflib.get_close_matches(missing[0], [str(key) for key in extra], n=1, cutoff=0.6)
        hint = f": is {close[0]!r} meant to be {missing[0]!r}?" if close else ""
        raise CheckFailed(f"your dict has no key {missing[0]!r}{hint} {where}; it needs these keys: {', '.join(KEYS)}")
    return result


def _same(got: float, expected: float) -> bool:
    return math.isclose(got, expected, rel_tol=VERDICT_RTOL, abs_tol=1e-12)


@dataclass(frozen=True)
class _Verdict:
    """The reference's numbers for one case, and what the typical mistakes give instead."""

    mean_a: float
    std_a: float
    mean_b: float
    std_b: float
    p: float
    best_a: float
    population_std_a: float
    standard_error_a: float
    p_variants: dict[str, float]

    @classmethod
    def of(cls, a: list, b: list) -> "_Verdict":
        from scipy import stats  # imported here: importing the checkers stays light

        reference = compare(a, b)
        n_a, n_b = len(a), len(b)
        with warnings.catch_warnings():  # a set without spread is one of the cases; scipy warns about it
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
            student = float(stats.ttest_ind(a, b).pvalue)
        t = reference.t
        p_variants = {
            "p is Student's t-test, which assumes both sets vary alike (scipy.stats.ttest_ind's default, "
            "equal_var=True); use Welch's test, which does not: ttest_ind(a, b, equal_var=False)": student,
            "p is one-sided (half the two-sided p): the question is whether the settings "
            "differ in either direction; take the two-sided p, ttest_ind's default alternative": reference.p / 2,
            "p is one-sided (one minus half the two-sided p): the question is whether the settings differ in "
            "either direction; take the two-sided p, ttest_ind's default alternative": 1 - reference.p / 2,
            "p is Welch's t with Student's degrees of freedom (n_a + n_b - 2); Welch's test takes the "
            "Welch-Satterthwaite degrees of freedom: ttest_ind(a, b, equal_var=False)": (
                float(2 * stats.t.sf(abs(t), n_a + n_b - 2)) if math.isfinite(t) else math.nan
            ),
            "p comes from the normal distribution; with a few seeds Welch's t follows Student's t with the "
            "Welch-Satterthwaite degrees of freedom: ttest_ind(a, b, equal_var=False)": (
                float(2 * stats.norm.sf(abs(t))) if math.isfinite(t) else math.nan
            ),
            "that is the t statistic, not its p-value: ttest_ind(a, b, equal_var=False).pvalue": t,
        }
        return cls(
            mean_a=reference.a.mean,
            std_a=reference.a.std,
            mean_b=reference.b.mean,
            std_b=reference.b.std,
            p=reference.p,
            best_a=max(a),
            population_std_a=float(np.std(a)),
            standard_error_a=reference.a.std / math.sqrt(n_a),
            p_variants=p_variants,
        )


def _check_means_and_stds(got: dict[str, float], ref: _Verdict, where: str) -> None:
    """CheckFailed naming the mistake in mean_a, mean_b, std_a or std_b."""
    if not (_same(got["mean_a"], ref.mean_a) and _same(got["mean_b"], ref.mean_b)):
        if _same(got["mean_a"], ref.mean_b) and _same(got["mean_b"], ref.mean_a):
            raise CheckFailed(f"mean_a and mean_b are swapped {where}: the _a values describe a, the first list")
        if _same(got["mean_a"], ref.best_a):
            raise CheckFailed(
                f"mean_a is the best seed, max(a) = {ref.best_a:.4g} {where}: a setting is judged by its mean "
                "over the seeds, sum(a) / len(a); the best seed is the luckiest draw"
            )
        if _same(got["mean_a"], 100 * ref.mean_a):
            raise CheckFailed(f"mean_a is 100 times the mean {where}: return the values as they come, not in percent")
        key = "mean_a" if not _same(got["mean_a"], ref.mean_a) else "mean_b"
        expected = ref.mean_a if key == "mean_a" else ref.mean_b
        raise CheckFailed(
            f"{key} = {got[key]:.6g}, expected {expected:.6g} {where}: the average of the values, sum(x) / len(x)"
        )
    if not (_same(got["std_a"], ref.std_a) and _same(got["std_b"], ref.std_b)):
        if _same(got["std_a"], ref.std_b) and _same(got["std_b"], ref.std_a):
            raise CheckFailed(f"std_a and std_b are swapped {where}: std_a is the spread of a, the first list")
        if _same(got["std_a"], ref.population_std_a):
            raise CheckFailed(
                f"std_a is the population standard deviation (ddof=0, dividing by n: np.std's default) {where}; "
                "the seeds are a sample of all possible runs: the sample standard deviation divides by n - 1, "
                "np.std(a, ddof=1) or statistics.stdev(a)"
            )
        if _same(got["std_a"], ref.standard_error_a):
            raise CheckFailed(
                f"std_a is the standard error of the mean, std / sqrt(n) {where}: the spread of the seeds "
                "themselves is the standard deviation, np.std(a, ddof=1)"
            )
        if _same(got["std_a"], ref.std_a**2):
            raise CheckFailed(f"std_a is the variance {where}: the standard deviation is its square root")
        key = "std_a" if not _same(got["std_a"], ref.std_a) else "std_b"
        expected = ref.std_a if key == "std_a" else ref.std_b
        raise CheckFailed(
            f"{key} = {got[key]:.6g}, expected {expected:.6g} {where}: the sample standard deviation, np.std(x, ddof=1)"
        )


def _check_p(p: float, ref: _Verdict, where: str) -> None:
    """CheckFailed naming the mistake in p."""
    if _same(p, ref.p):
        return
    if math.isnan(p):
        raise CheckFailed(
            f"p is nan {where}: Welch's test gives a number here, since at least one set varies (nan comes "
            "from dividing by a spread of 0)"
        )
    for sentence, wrong in ref.p_variants.items():
        if math.isfinite(wrong) and _same(p, wrong):
            raise CheckFailed(f"{sentence} {where}")
    if _same(p, 100 * ref.p):
        raise CheckFailed(f"p is 100 times Welch's p {where}: a p-value is a probability from 0 to 1, not a percentage")
    raise CheckFailed(
        f"p = {p:.6g}, expected {ref.p:.6g} {where}: the two-sided p-value of Welch's t-test, "
        "scipy.stats.ttest_ind(a, b, equal_var=False).pvalue"
    )


@dataclass(frozen=True)
class _Judged:
    """One case's significance: the learner's, with the numbers it should follow from."""

    significant: bool
    p: float  # the learner's own p (already found right)
    difference: float
    std_a: float
    std_b: float
    where: str


SPREAD_RULES: list[Callable[[float, float], float]] = [  # (std_a, std_b) -> what "bigger than a std" may mean
    lambda sa, sb: sa,
    lambda sa, sb: sb,
    max,
    min,
    lambda sa, sb: sa + sb,
    lambda sa, sb: (sa + sb) / 2,
    math.hypot,
]


def _check_significance(judged: list[_Judged]) -> None:
    """CheckFailed unless every `significant` is its own p < ALPHA, naming the rule it follows instead."""
    wrong = [row for row in judged if row.significant != (row.p < ALPHA)]
    if not wrong:
        return
    first = wrong[0]
    if all(row.significant == (row.p <= ALPHA) for row in judged):
        raise CheckFailed(
            f"significant is True for p = {first.p!r} {first.where}: p = 0.05 is not significant; the rule is "
            "p < 0.05, not p <= 0.05"
        )
    if all(row.significant == (row.p > ALPHA) for row in judged) or all(
        row.significant == (row.p >= ALPHA) for row in judged
    ):
        raise CheckFailed(
            f"significant is the wrong way round: {first.significant} for p = {first.p:.3g} {first.where}; a "
            "small p means a difference unlikely to be noise: significant = p < 0.05"
        )
    for threshold in SPREAD_RULES:
        if all(row.significant == (abs(row.difference) > threshold(row.std_a, row.std_b)) for row in judged):
            raise CheckFailed(
                f"significant says whether the means differ by more than a standard deviation: {first.significant} "
                f"for p = {first.p:.3g} {first.where}; that is not the test: with few seeds a large difference "
                "can be noise, with many a small one is real; significant = p < 0.05"
            )
    raise CheckFailed(
        f"significant is {first.significant} for p = {first.p:.3g} {first.where}: it must be p < 0.05, "
        "with the p you return"
    )


def _explain_verdict(error: Exception) -> str | None:
    """Errors of a verdict, in words; None for any other."""
    if "broadcast" in str(error) or "shape" in str(error):
        return (
            "the two sets have different sizes: a paired test (ttest_rel) or a difference seed by seed needs "
            "equal ones; the seeds of two settings are independent runs: ttest_ind(a, b, equal_var=False)"
        )
    return None


def check_verdict(fn: Callable[[list, list], dict]) -> None:
    """Check a learner's verdict(a, b) -> {"mean_a", "std_a", "mean_b", "std_b", "p", "significant"}
    against utils.experiments.compare: sample standard deviations, Welch's two-sided p, p < 0.05.

    The cases have unequal sizes and spreads, a set without spread, two identical lists (t = 0:
    compare, like scipy, gives p = 1; only when neither set varies at all does scipy give nan
    where compare gives 1, a corner the cases leave out) and a p of exactly 0.05 by scipy. Each
    `significant` is judged against the learner's own p, so that a p a few digits off the
    reference's at 0.05 is not held against it.
    """
    judged = []
    for a, b, words in VERDICT_CASES:
        where = f"(for {words})"
        with warnings.catch_warnings():  # scipy's, on the set without spread: the case is made on purpose
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
            result = call_learner(fn, list(a), list(b), returns=object, where=where, explain=_explain_verdict)
        result = _keyed(result, where)
        got = {key: real_number(result[key], key, where) for key in KEYS if key != "significant"}
        significant = python_number(result["significant"], "significant", where)  # np.bool_, a 0-d tensor: bool
        if not isinstance(significant, bool):
            raise CheckFailed(f"significant must be True or False, got {describe(significant)} {where}")
        reference = _Verdict.of(a, b)
        _check_means_and_stds(got, reference, where)
        _check_p(got["p"], reference, where)
        judged.append(
            _Judged(bool(significant), got["p"], reference.mean_a - reference.mean_b, got["std_a"], got["std_b"], where)
        )
    _check_significance(judged)
    print("✓ verdict matches compare: means, sample stds, Welch's two-sided p and p < 0.05, on 5 pairs of runs")


# ---- Holm's correction of a family of p-values ----------------------------------------------------

HOLM_CASES = (
    ((0.01, 0.04, 0.03, 0.2), "4 p's, two of them swapped in size"),
    ((0.3, 0.001, 0.02), "3 p's, the smallest in the middle"),
    ((0.04, 0.6, 0.5, 0.45, 0.02), "5 p's, some adjusted past 1"),
    ((0.012,), "a family of one"),
)
HOLM_RTOL = 1e-6  # float32 arrays and tensors are fine


def _holm_variants(p: tuple) -> dict[str, tuple[list[float], str]]:
    """What the usual mistakes give for `p`, each with its message."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])

    def step_down(multiplier, monotone=True, cap=True, keep_order=True):
        adjusted, running = [0.0] * m, 0.0
        for rank, i in enumerate(order):
            value = multiplier(rank) * p[i]
            value = min(1.0, value) if cap else value
            running = max(running, value) if monotone else value
            adjusted[i] = running
        return adjusted if keep_order else [adjusted[i] for i in order]

    return {
        "raw": (
            list(p),
            "these are the p-values unchanged: Holm multiplies the i-th smallest p (i from 0) by m - i, "
            "so a family of m comparisons cannot keep its raw p's",
        ),
        "bonferroni": (
            [min(1.0, m * value) for value in p],
            "every p was multiplied by m: that is Bonferroni's correction; Holm multiplies only the smallest "
            "by m, the next by m - 1, and so on down to 1 for the largest",
        ),
        "reversed": (
            step_down(lambda rank: rank + 1),
            "the smallest p was multiplied by 1 and the largest by m: the other way round; the smallest p "
            "faces the most comparisons (m), the largest the fewest (1)",
        ),
        "not monotone": (
            step_down(lambda rank: m - rank, monotone=False),
            "a larger p came out with a smaller adjusted p than a smaller one: keep the adjusted p's "
            "non-decreasing in the order of the raw p's (each at least the one before it: a running maximum)",
        ),
        "no cap": (
            step_down(lambda rank: m - rank, cap=False),
            "an adjusted p came out above 1: a p-value is a probability; cap each at 1",
        ),
        "sorted": (
            step_down(lambda rank: m - rank, keep_order=False),
            "the adjusted p's came back sorted, not in the order the p's were given: put each back at its "
            "comparison's place",
        ),
    }


def _as_floats(result: object, m: int, where: str) -> list[float]:
    if isinstance(result, torch.Tensor | np.ndarray):
        result = result.tolist()
    if isinstance(result, str | bytes | Mapping) or not hasattr(result, "__iter__"):
        raise CheckFailed(f"expected a list of {m} adjusted p-values, got {describe(result)} {where}")
    values = list(result)
    if len(values) != m:
        raise CheckFailed(
            f"expected {m} adjusted p-values, one per p given, got {len(values)} {where}: "
            "Holm adjusts every p of the family, the significant ones and the others"
        )
    return [real_number(value, f"adjusted p {i}", where) for i, value in enumerate(values)]


def check_holm(fn: Callable[[list], list]) -> None:
    """Check a learner's holm(p_values) -> adjusted p-values (a list, tuple, array or tensor), in the
    order given, against utils.rubric.holm (Holm 1979), on families with swapped sizes, adjusted
    p's past 1, and a family of one; a wrong answer that is a usual mistake is named as it."""
    from utils.rubric import holm  # the library's reference

    for p, words in HOLM_CASES:
        where = f"(for the p's {list(p)}: {words})"
        result = call_learner(fn, list(p), returns=object, where=where)
        got, reference = _as_floats(result, len(p), where), holm(p)
        if all(math.isclose(g, r, rel_tol=HOLM_RTOL, abs_tol=1e-12) for g, r in zip(got, reference, strict=True)):
            continue
        for values, message in _holm_variants(p).values():
            if values != reference and all(
                math.isclose(g, v, rel_tol=HOLM_RTOL, abs_tol=1e-12) for g, v in zip(got, values, strict=True)
            ):
                raise CheckFailed(f"{message} {where}")
        shown = ", ".join(f"{value:.4g}" for value in got)
        expected = ", ".join(f"{value:.4g}" for value in reference)
        raise CheckFailed(
            f"got [{shown}], Holm gives [{expected}] {where}: sort the p's, multiply the i-th smallest "
            "(i from 0) by m - i, keep them non-decreasing, cap at 1, and return them in the order given"
        )
    print(f"✓ holm matches Holm's step-down correction on {len(HOLM_CASES)} families, in the order given")
