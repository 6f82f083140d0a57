"""fit / evaluate / predict: the schedule, the augmentation, determinism, and that training learns."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from no_hang import refused
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from utils import VisionTransformer, ViTConfig, set_seed
from utils.baselines import SmallCNN
from utils.data import ImageDataset
from utils.runtime import torch_threads
from utils.training import (
    History,
    TrainingClock,
    confusion_matrix,
    evaluate,
    fit,
    label_smoothing_floor,
    parameter_groups,
    predict,
    random_shift,
    train_epoch,
    train_step,
    warmup_cosine,
)


def toy_set(n: int = 256, seed: int = 0) -> ImageDataset:
    """8 x 8 grey images: class 1 has a bright top half, class 0 a bright bottom half."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=generator)
    images = 0.1 * torch.rand(n, 1, 8, 8, generator=generator)
    images[labels == 1, :, :4] += 0.8
    images[labels == 0, :, 4:] += 0.8
    return ImageDataset(images, labels, ["bottom", "top"])


def tiny_model() -> VisionTransformer:
    return VisionTransformer(ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=2, depth=1))


def test_warmup_cosine_shape():
    assert warmup_cosine(0.0) == 0.0
    assert math.isclose(warmup_cosine(0.05), 0.5)
    assert math.isclose(warmup_cosine(0.1), 1.0)
    assert math.isclose(warmup_cosine(0.55), 0.5)
    assert math.isclose(warmup_cosine(1.0), 0.0, abs_tol=1e-12)
    values = [warmup_cosine(p / 100) for p in range(10, 101)]
    assert all(a >= b for a, b in itertools.pairwise(values))  # never rises after the warm-up


def test_random_shift_moves_each_image_by_at_most_max_shift():
    images = torch.zeros(64, 1, 6, 6)
    images[:, :, 2, 3] = 1.0  # one bright pixel
    shifted = random_shift(images, 1, torch.Generator().manual_seed(0))
    assert shifted.shape == images.shape
    where = shifted[:, 0].flatten(1).argmax(1)
    rows, cols = where // 6, where % 6
    assert ((rows - 2).abs() <= 1).all() and ((cols - 3).abs() <= 1).all()
    assert len(set(zip(rows.tolist(), cols.tolist()))) == 9  # all nine shifts occur
    assert torch.equal(shifted.sum((1, 2, 3)), torch.ones(64))  # nothing duplicated or lost
    assert random_shift(images, 0, torch.Generator()) is images


def test_fit_learns_and_records_history():
    train, test = toy_set(256, 0), toy_set(128, 1)
    set_seed(0)
    model = tiny_model()
    _, before = evaluate(model, test)
    history = fit(model, train, test, epochs=12, batch_size=32, lr=1e-3, progress=False)
    assert isinstance(history, History)
    assert history.epoch == list(range(1, 13)) and history.step[-1] == 12 * 8
    assert history.final_val_accuracy > 0.95 > before
    assert history.train_loss[-1] < history.train_loss[0]
    assert history.lr[-1] < 1e-6  # the cosine ended at 0
    assert not model.training  # fit leaves the model in eval mode


def test_fit_is_deterministic_with_epochs():
    train = toy_set(128, 0)
    results = []
    for _ in range(2):
        set_seed(0)
        model = tiny_model()
        fit(model, train, epochs=2, max_shift=1, label_smoothing=0.1, progress=False)
        results.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(results[0], results[1])


def test_fit_stops_at_the_time_budget_and_snapshots_positions():
    train = toy_set(256, 0)
    set_seed(0)
    model = tiny_model()
    history = fit(model, train, time_budget=1.0, snapshot_every=5, progress=False)
    assert 0.9 < history.seconds[-1] < 3.0
    steps = [step for step, _ in history.snapshots]
    assert steps[0] == 0 and steps[-1] == history.step[-1] and all(s % 5 == 0 for s in steps[1:-1])
    assert history.snapshots[0][1].shape == model.pos_embed.shape
    assert not torch.equal(history.snapshots[0][1], history.snapshots[-1][1])  # the table learned


def test_train_step_is_one_step_of_cross_entropy():
    set_seed(0)
    model, reference = tiny_model(), tiny_model()
    reference.load_state_dict(model.state_dict())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    data = toy_set(16, 2)
    for _ in range(3):  # stale gradients would add up over steps if they were not zeroed
        loss = train_step(model, optimizer, data.images, data.labels, label_smoothing=0.2)
        reference_optimizer.zero_grad()
        expected = F.cross_entropy(reference(data.images), data.labels, label_smoothing=0.2)
        expected.backward()
        reference_optimizer.step()
        assert type(loss) is float and loss == expected.item()
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_train_step_can_return_the_logits():
    set_seed(0)
    model = tiny_model()
    before = model(toy_set(16, 2).images).detach()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # a step that changes nothing
    data = toy_set(16, 2)
    loss, logits = train_step(model, optimizer, data.images, data.labels, return_logits=True)
    assert logits.shape == (16, 2) and not logits.requires_grad
    torch.testing.assert_close(logits, before)
    assert math.isclose(loss, F.cross_entropy(before, data.labels).item(), rel_tol=1e-6)


def timm_groups(model, weight_decay):
    """timm's rule (param_groups_weight_decay), written out: no decay for ndim <= 1, biases and
    the names the model's no_weight_decay() gives."""
    skip = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        exempt = parameter.ndim <= 1 or name.endswith(".bias") or name in skip
        (no_decay if exempt else decay).append(parameter)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def reference_fit(
    model,
    train,
    val,
    *,
    epochs=None,
    steps=None,
    batch_size,
    lr,
    weight_decay=0.05,
    decay_everything=False,
    warmup=0.1,
    label_smoothing=0.0,
    max_shift=0,
    seed=0,
):
    """fit's loop as it was written in one piece before it was split into helpers (epochs or steps)."""
    images, labels = train.tensors
    total_steps = steps or epochs * math.ceil(len(labels) / batch_size)
    generator = torch.Generator().manual_seed(seed)
    groups = model.parameters() if decay_everything else timm_groups(model, weight_decay)
    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)
    history, step = History(), 0
    model.train()
    while step < total_steps:
        order = torch.randperm(len(labels), generator=generator)
        seen, loss_sum, correct = 0, 0.0, 0
        for batch_start in range(0, len(labels), batch_size):
            if step == total_steps:
                break
            index = order[batch_start : batch_start + batch_size]
            x, y = random_shift(images[index], max_shift, generator), labels[index]
            for group in optimizer.param_groups:
                group["lr"] = lr * warmup_cosine(step / total_steps, warmup)
            logits = model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            seen, loss_sum = seen + len(y), loss_sum + loss.item() * len(y)
            correct += (logits.argmax(dim=-1) == y).sum().item()
        history.step.append(step)
        history.lr.append(optimizer.param_groups[0]["lr"])
        history.train_loss.append(loss_sum / seen)
        history.train_accuracy.append(correct / seen)
        val_loss, val_accuracy = evaluate(model, val)
        history.val_loss.append(val_loss)
        history.val_accuracy.append(val_accuracy)
    return history


@pytest.mark.parametrize(
    "length, steps",
    [(dict(epochs=3), [3, 6, 9]), (dict(steps=7), [3, 6, 7])],  # 96 images in batches of 32: 3 steps an epoch
)
@pytest.mark.parametrize("decay_everything", [False, True])  # True: fit before the parameter groups
def test_fit_gives_the_numbers_of_the_one_piece_loop(length, steps, decay_everything):
    train, val = toy_set(96, 0), toy_set(40, 1)
    options = dict(batch_size=32, lr=2e-3, weight_decay=0.3, label_smoothing=0.1, max_shift=1, seed=3, **length)
    set_seed(0)
    model, reference = tiny_model(), tiny_model()
    reference.load_state_dict(model.state_dict())
    history = fit(model, train, val, progress=False, decay_everything=decay_everything, **options)
    with torch_threads(1):  # fit trains on one thread: the same order of additions, the same bits
        expected = reference_fit(reference, train, val, decay_everything=decay_everything, **options)
    for key in ("step", "lr", "train_loss", "train_accuracy", "val_loss", "val_accuracy"):
        assert getattr(history, key) == getattr(expected, key), key
    assert history.step == steps and history.epoch == [1, 2, 3]
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.equal(ours, theirs)


def test_fit_reports_progress(capsys):
    set_seed(0)
    fit(tiny_model(), toy_set(64, 0), toy_set(16, 1), epochs=2, batch_size=32, progress=True)
    bar = capsys.readouterr().err
    assert "4/4" in bar and "step" in bar and "val_acc=" in bar


def test_fit_needs_a_length():
    with pytest.raises(ValueError, match=r"give fit a length: epochs .* or steps .* time_budget"):
        fit(tiny_model(), toy_set(8), progress=False)
    with pytest.raises(ValueError, match=r"give epochs or steps, not both: got epochs=2 \(int\) and steps=5"):
        fit(tiny_model(), toy_set(8), epochs=2, steps=5, progress=False)
    with pytest.raises(ValueError, match="at least 1"):
        fit(tiny_model(), toy_set(8), epochs=0, progress=False)


def test_evaluate_predict_and_confusion_matrix_agree():
    test = toy_set(64, 3)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 2))
    predictions = predict(model, test.images)
    loss, accuracy = evaluate(model, test)
    assert math.isclose(accuracy, (predictions == test.labels).float().mean().item())
    matrix = confusion_matrix(predictions, test.labels, 2)
    assert matrix.sum() == 64 and matrix.trace() == (predictions == test.labels).sum()
    assert matrix[1].sum() == (test.labels == 1).sum()  # rows are the true classes
    logits = model(test.images)
    assert math.isclose(loss, nn.functional.cross_entropy(logits, test.labels).item(), rel_tol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_evaluate_and_predict_run_without_dropout_and_restore_the_mode(training):
    test = toy_set(64, 3)
    model = nn.Sequential(nn.Flatten(), nn.Dropout(0.9), nn.Linear(64, 2)).train(training)
    with torch.no_grad():
        expected = model[2](model[0](test.images)).argmax(dim=-1)  # without the dropout
    assert torch.equal(predict(model, test.images), expected)
    evaluate(model, test)
    assert model.training is training and model[1].training is training


# ---- budgets in steps --------------------------------------------------------------------------


def test_fit_trains_for_exactly_the_steps_asked_the_last_epoch_cut_short():
    set_seed(0)
    history = fit(tiny_model(), toy_set(128, 0), toy_set(16, 1), steps=10, batch_size=32, warmup=0.5, progress=False)
    assert history.step == [4, 8, 10] and history.epoch == [1, 2, 3]  # 4 steps an epoch, the third cut at 2
    assert len(history.val_accuracy) == len(history.seconds) == 3 and history.done
    assert history.lr[-1] == 1e-3 * warmup_cosine(9 / 10, 0.5)  # the schedule's progress: steps done / total steps
    assert history.steps_per_second == history.step[-1] / history.seconds[-1] > 0


def test_steps_and_epochs_give_the_same_weights_when_they_agree():
    """3 epochs of 4 steps are 12 steps: same schedule, same batches, same weights (on the CPU)."""
    results = []
    for length in (dict(epochs=3), dict(steps=12), dict(steps=12)):
        set_seed(0)
        model = tiny_model()
        fit(model, toy_set(128, 0), batch_size=32, max_shift=1, seed=5, progress=False, **length)
        results.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(results[0], results[1]) and torch.equal(results[1], results[2])


def test_a_time_budget_on_top_of_steps_ends_whichever_comes_first():
    history = fit(tiny_model(), toy_set(64), steps=3, time_budget=600, batch_size=32, progress=False)
    assert history.step == [2, 3]
    history = fit(tiny_model(), toy_set(64), steps=10**9, time_budget=1e-9, progress=False)
    assert history.step == [1]  # the time ran out at once: one step, then the end


def test_history_without_epochs_has_no_rate_and_names_the_renamed_fields():
    history = History()
    assert math.isnan(history.steps_per_second) and math.isnan(history.final_val_accuracy)
    for old, new in [("final_test_accuracy", "final_val_accuracy"), ("test_accuracy", "val_accuracy")]:
        with pytest.raises(AttributeError, match=rf"History.{old} is now History.{new}: .*evaluate\(model, test\)"):
            getattr(history, old)
    assert not hasattr(history, "test_loss")
    with pytest.raises(AttributeError, match="no attribute 'acuracy'"):
        history.acuracy  # noqa: B018


@pytest.mark.parametrize(
    "steps, time_budget, error, match",
    [
        (0, None, ValueError, r"steps must be a whole number of optimiser steps, at least 1, got 0"),
        (-1, None, ValueError, r"steps .* at least 1, got -1"),
        (0, 5, ValueError, r"steps .* at least 1, got 0"),
        (5, 0, ValueError, r"time_budget .* greater than 0, got 0"),
        (2.5, None, TypeError, r"steps must be a whole number of optimiser steps, at least 1, got 2.5"),
        (100.0, None, TypeError, r"got 100.0 \(float\): use steps=100"),
        (float("nan"), None, TypeError, r"steps .* got nan"),
        (True, None, TypeError, r"steps .* got True"),
        ("3", None, TypeError, r"steps .* got '3'"),
        (torch.tensor(3.0), None, TypeError, r"steps .* got a tensor"),
    ],
)
def test_fit_refuses_steps_that_are_no_length(steps, time_budget, error, match):
    refused(lambda: fit(tiny_model(), toy_set(8), steps=steps, time_budget=time_budget, progress=False), error, match)


# ---- parameter groups: timm's convention --------------------------------------------------------


def group_names(groups) -> list[tuple[float, set[str]]]:
    return sorted((group["weight_decay"], frozenset(group["param_names"])) for group in groups)


def timm_group_names(model, weight_decay) -> list[tuple[float, set[str]]]:
    names = {id(p): name for name, p in model.named_parameters()}
    groups = [
        {"weight_decay": group["weight_decay"], "param_names": [names[id(p)] for p in group["params"]]}
        for group in timm_groups(model, weight_decay)
    ]
    return group_names(groups)


@pytest.mark.parametrize(
    "model",
    [
        VisionTransformer(ViTConfig.tiny(depth=2)),
        VisionTransformer(ViTConfig.tiny(depth=1, pool="mean", pos_embed="sincos")),  # no cls_token, a fixed table
        nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(144, 2), nn.LayerNorm(2)),
    ],
    ids=["vit", "vit-mean-sincos", "sequential"],
)
def test_parameter_groups_follow_timms_rule(model):
    groups = parameter_groups(model, 0.05)
    assert group_names(groups) == timm_group_names(model, 0.05)
    assert all(group["lr_multiplier"] == 1.0 for group in groups)
    grouped = [p for group in groups for p in group["params"]]
    assert len(grouped) == len(list(model.parameters())) == len({id(p) for p in grouped})  # each once
    for group in groups:
        params = dict(model.named_parameters())
        assert all(params[name] is p for name, p in zip(group["param_names"], group["params"]))


def test_the_vit_keeps_its_positions_and_class_token_out_of_the_decay():
    model = tiny_model()
    no_decay = next(g for g in parameter_groups(model, 0.05) if g["weight_decay"] == 0.0)["param_names"]
    assert {"pos_embed", "cls_token", "norm.weight", "head.bias", "blocks.0.attn.qkv.bias"} <= set(no_decay)
    assert "head.weight" not in no_decay and "blocks.0.attn.qkv.weight" not in no_decay


def test_decay_everything_is_one_group_of_every_parameter():
    model = tiny_model()
    (group,) = parameter_groups(model, 0.1, decay_everything=True)
    assert group["params"] == list(model.parameters()) and group["weight_decay"] == 0.1


def test_lr_multipliers_cover_names_and_starts_of_names_the_longest_winning():
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(11)])  # names 0.weight ... 10.bias
    groups = parameter_groups(model, 0.05, {"1": 0.5, "0.weight": 0.0, "10.": 2.0})
    multiplier = {name: g["lr_multiplier"] for g in groups for name in g["param_names"]}
    assert multiplier["1.weight"] == multiplier["1.bias"] == 0.5  # "1" is not the start of "10"
    assert multiplier["10.weight"] == multiplier["10.bias"] == 2.0
    assert multiplier["0.weight"] == 0.0 and multiplier["0.bias"] == 1.0 and multiplier["5.weight"] == 1.0
    vit = tiny_model()
    groups = parameter_groups(vit, 0.05, {"blocks": 0.5, "blocks.0.attn": 0.1})
    multiplier = {name: g["lr_multiplier"] for g in groups for name in g["param_names"]}
    assert multiplier["blocks.0.attn.qkv.weight"] == 0.1 and multiplier["blocks.0.mlp.fc1.weight"] == 0.5
    assert multiplier["head.weight"] == 1.0
    groups = parameter_groups(vit, 0.05, {"blocks.0.": 0.5, "head.weight.": 0.1})  # a dot at the end changes nothing
    multiplier = {name: g["lr_multiplier"] for g in groups for name in g["param_names"]}
    assert multiplier["blocks.0.norm1.weight"] == 0.5 and multiplier["head.weight"] == 0.1


def test_frozen_parameters_are_left_out():
    model = tiny_model()
    model.patch_embed.requires_grad_(False)
    names = {name for group in parameter_groups(model, 0.05) for name in group["param_names"]}
    assert "patch_embed.proj.weight" not in names and "pos_embed" in names
    model.requires_grad_(False)
    refused(lambda: parameter_groups(model, 0.05), ValueError, r"no parameters to train: all have requires_grad")


def test_the_lr_multiplier_reaches_the_optimiser():
    model, data = tiny_model(), toy_set(8)
    optimizer = torch.optim.AdamW(parameter_groups(model, 0.05, {"pos_embed": 0.1, "head": 3.0}), lr=1.0)
    clock = TrainingClock(4, None)
    clock.steps = 2  # half-way
    train_epoch(model, optimizer, [(data.images, data.labels)], clock, lr=2e-3, warmup=0.25)
    factor = warmup_cosine(0.5, 0.25)
    lrs = {name: g["lr"] for g in optimizer.param_groups for name in g["param_names"]}
    assert lrs["pos_embed"] == 2e-3 * 0.1 * factor and lrs["head.weight"] == 2e-3 * 3.0 * factor
    assert lrs["blocks.0.norm1.weight"] == lrs["norm.bias"] == 2e-3 * factor


def test_a_zero_multiplier_holds_the_position_table_still():
    set_seed(0)
    model = tiny_model()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    fit(model, toy_set(64), steps=4, batch_size=16, lr_multipliers={"pos_embed": 0.0}, progress=False)
    assert torch.equal(model.pos_embed, before["pos_embed"])
    moved = [name for name, p in model.named_parameters() if not torch.equal(p, before[name])]
    assert set(moved) == set(before) - {"pos_embed"}


def test_decay_on_everything_trains_another_model():
    models = []
    for decay_everything in (False, True):
        set_seed(0)
        model = tiny_model()
        fit(model, toy_set(64), steps=6, weight_decay=0.5, lr=1e-2, decay_everything=decay_everything, progress=False)
        models.append(model)
    grouped, everything = (dict(m.named_parameters()) for m in models)
    assert not torch.equal(grouped["pos_embed"], everything["pos_embed"])
    assert not torch.equal(grouped["head.bias"], everything["head.bias"])
    # decay pulls towards 0: the table that decayed is the smaller one
    assert everything["pos_embed"].norm() < grouped["pos_embed"].norm()


class OddNames(nn.Module):
    def __init__(self, names):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.names = names

    def no_weight_decay(self):
        return self.names


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda m: parameter_groups(m, -0.1),
            ValueError,
            r"weight_decay must be a finite number, at least 0, got -0.1",
        ),
        (lambda m: parameter_groups(m, float("nan")), ValueError, r"weight_decay .* got nan"),
        (lambda m: parameter_groups(m, "0.05"), TypeError, r"weight_decay must be a finite number"),
        (lambda m: parameter_groups(m, 0.05, [("pos_embed", 0.1)]), TypeError, r"lr_multipliers must be a dict"),
        (lambda m: parameter_groups(m, 0.05, {"pos_embed": -1}), ValueError, r"lr_multipliers\['pos_embed'\] .* 0"),
        (lambda m: parameter_groups(m, 0.05, {"pos_embed": float("nan")}), ValueError, r"\['pos_embed'\] .* got nan"),
        (lambda m: parameter_groups(m, 0.05, {"pos_embed": "0.1"}), TypeError, r"\['pos_embed'\] must be a"),
        (lambda m: parameter_groups(m, 0.05, {0: 0.1}), TypeError, r"keys must be parameter names .* got 0 \(int\)"),
        (lambda m: parameter_groups(m, 0.05, {"": 0.1}), TypeError, r"keys must be parameter names .* got ''"),
        (
            lambda m: parameter_groups(m, 0.05, {"pos_embedding": 0.1}),
            ValueError,
            r"'pos_embedding', which names no parameter of this VisionTransformer \(did you mean 'pos_embed'\?\)"
            r".*Its parameters: cls_token, pos_embed, patch_embed.proj.weight, .*blocks.0.attn.qkv.weight",
        ),
        (lambda m: parameter_groups(m, 0.05, {"blocks.9": 0.1}), ValueError, r"'blocks.9', which names no param"),
        (lambda m: parameter_groups(m, 0.05, {"block": 0.1}), ValueError, r"did you mean 'blocks'"),
        (lambda m: parameter_groups(m, 0.05, decay_everything="yes"), TypeError, r"decay_everything must be True"),
        (
            lambda m: parameter_groups(m, 0.05, {"blocks.0": 0.5, "blocks.0.": 0.1}),
            ValueError,
            r"lr_multipliers has both 'blocks.0' and 'blocks.0.', the same names: keep one",
        ),
        (lambda m: parameter_groups(m, 0.05, {".": 0.1}), TypeError, r"keys must be parameter names .* got '\.'"),
        (lambda m: parameter_groups(m, 0.05, {"head": torch.tensor(0.5)}), TypeError, r"\['head'\] .*\.item\(\)"),
        (lambda m: parameter_groups(VisionTransformer, 0.05), TypeError, r"the class VisionTransformer itself"),
        (lambda m: parameter_groups(m.parameters(), 0.05), TypeError, r"model must be a torch nn.Module"),
        (lambda m: parameter_groups(OddNames("pos_embed"), 0.05), TypeError, r"no_weight_decay\(\) must return a set"),
        (lambda m: parameter_groups(OddNames({1}), 0.05), TypeError, r"no_weight_decay\(\) must return parameter"),
    ],
)
def test_parameter_groups_refuse_what_they_cannot_use(call, error, match):
    refused(lambda: call(tiny_model()), error, match)


def test_a_multiplier_for_a_fixed_table_says_it_is_no_parameter():
    model = VisionTransformer(ViTConfig.tiny(depth=1, pos_embed="sincos"))
    refused(lambda: parameter_groups(model, 0.05, {"pos_embed": 0.1}), ValueError, r"pos_embed is a fixed buffer")


def test_fit_refuses_an_unknown_multiplier_before_the_first_step():
    model = tiny_model()
    before = [p.detach().clone() for p in model.parameters()]
    refused(
        lambda: fit(model, toy_set(8), epochs=1, lr_multipliers={"posembed": 0.1}, progress=False),
        ValueError,
        r"'posembed', which names no parameter",
    )
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))


# ---- bad input: a clear error that names the argument, never a hang or a silent wrong number ----


@pytest.mark.parametrize(
    "epochs, time_budget, error, match",
    [
        (0, None, ValueError, r"epochs must be a whole number, at least 1, got 0"),
        (-1, None, ValueError, r"epochs .* at least 1, got -1"),
        (None, 0, ValueError, r"time_budget must be a finite number of seconds, greater than 0, got 0"),
        (None, -5, ValueError, r"time_budget .* greater than 0, got -5"),
        (1, 0, ValueError, r"time_budget .* greater than 0, got 0"),  # "whichever ends first" would be at once
        (0, 5, ValueError, r"epochs .* at least 1, got 0"),
        (None, float("nan"), ValueError, r"time_budget .* got nan"),
        (None, float("inf"), ValueError, r"time_budget .* got inf"),
        (float("nan"), None, TypeError, r"epochs must be a whole number, at least 1, got nan"),
        (2.5, None, TypeError, r"epochs must be a whole number, at least 1, got 2.5"),
        (True, None, TypeError, r"epochs must be a whole number, at least 1, got True"),
        ("3", None, TypeError, r"epochs must be a whole number, at least 1, got '3'"),
    ],
)
def test_fit_refuses_a_budget_that_never_ends_or_is_not_a_number(epochs, time_budget, error, match):
    refused(lambda: fit(tiny_model(), toy_set(8), epochs=epochs, time_budget=time_budget, progress=False), error, match)


@pytest.mark.parametrize(
    "options, error, match",
    [
        (dict(batch_size=0), ValueError, r"batch_size must be a whole number of images per step, at least 1, got 0"),
        (dict(batch_size=-3), ValueError, r"batch_size .* got -3"),
        (dict(batch_size=2.0), TypeError, r"batch_size must be a whole number"),
        (dict(lr=0), ValueError, r"lr must be a finite number \(the peak learning rate\), greater than 0, got 0"),
        (dict(lr=float("nan")), ValueError, r"lr .* got nan"),
        (dict(lr=-1e-3), ValueError, r"lr .* got -0.001"),
        (dict(weight_decay=-0.1), ValueError, r"weight_decay must be a finite number, at least 0, got -0.1"),
        (dict(warmup=1.0), ValueError, r"warmup must be .* from 0 up to \(not including\) 1, got 1.0"),
        (dict(warmup=-0.1), ValueError, r"warmup .* got -0.1"),
        (dict(label_smoothing=1.0), ValueError, r"label_smoothing must be a number, from 0 up to \(not incl"),
        (dict(label_smoothing=-0.1), ValueError, r"label_smoothing .* got -0.1"),
        (dict(max_shift=-1), ValueError, r"max_shift must be a whole number of pixels, at least 0, got -1"),
        (dict(max_shift=8), ValueError, r"max_shift must be smaller than the images \(8 x 8\)"),
        (dict(max_shift=1.5), TypeError, r"max_shift must be a whole number"),
        (dict(seed=1.5), TypeError, r"seed must be a whole number"),
        (dict(snapshot_every=0), ValueError, r"snapshot_every must be a whole number of steps .* at least 1, got 0"),
        (dict(snapshot_every=-2), ValueError, r"snapshot_every .* got -2"),
        (dict(on_epoch="plot"), TypeError, r"on_epoch must be a function"),
        (dict(decay_everything=1), TypeError, r"decay_everything must be True or False, got 1"),
        (dict(weight_decay=float("inf")), ValueError, r"weight_decay .* got inf"),
        (dict(lr_multipliers={"head": -0.5}), ValueError, r"lr_multipliers\['head'\] must be .* at least 0"),
        (dict(lr_multipliers="pos_embed"), TypeError, r"lr_multipliers must be a dict"),
    ],
)
def test_fit_names_the_argument_that_is_out_of_range(options, error, match):
    refused(lambda: fit(tiny_model(), toy_set(8), epochs=1, progress=False, **options), error, match)


def test_fit_wants_progress_as_true_or_false():
    refused(lambda: fit(tiny_model(), toy_set(8), epochs=1, progress="no"), TypeError, r"progress must be True or")


def test_fit_accepts_the_edges_of_the_ranges():
    history = fit(tiny_model(), toy_set(8), epochs=1, time_budget=60, warmup=0.0, max_shift=7, progress=False)
    assert history.step == [1]  # one epoch: the epochs ended first


def test_a_budget_shorter_than_one_step_still_takes_one():
    """An empty history (no epoch, test accuracy nan, history.step[-1] an IndexError) taught nothing."""
    history = fit(tiny_model(), toy_set(8), toy_set(4, 1), time_budget=1e-9, progress=False)
    assert history.step == [1] and len(history.val_accuracy) == 1 and history.done
    assert history.lr == [0.0]  # the budget was over: the schedule had reached its end


@pytest.mark.parametrize(
    "train, error, match",
    [
        ((toy_set(8).images, toy_set(8).labels), TypeError, r"train must be a dataset .* got a tuple.*TensorDataset"),
        ([toy_set(8).images, toy_set(8).labels], TypeError, r"got a list"),
        ((toy_set(8), toy_set(4)), TypeError, r"got 2 datasets; \(train, test\)\? unpack them first"),
        (DataLoader(toy_set(8), batch_size=4), TypeError, r"got a DataLoader: pass its dataset \(loader.dataset\)"),
        (toy_set(8).images, TypeError, r"got a tensor: put the labels with it"),
        (ImageDataset(torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long), ["a", "b"]), ValueError, r"empty"),
        (TensorDataset(torch.zeros(4, 1, 8, 8)), ValueError, r"two tensors, images and labels, got 1"),
        (TensorDataset(torch.rand(4, 8, 8), torch.zeros(4, dtype=torch.long)), ValueError, r"\(N, C, H, W\)"),
    ],
)
def test_fit_wants_a_dataset_of_images_and_labels(train, error, match):
    refused(lambda: fit(tiny_model(), train, epochs=1, progress=False), error, match)


def test_fit_wants_a_model_object():
    refused(lambda: fit(VisionTransformer, toy_set(8), epochs=1), TypeError, r"the class VisionTransformer itself")
    refused(lambda: fit(toy_set(8), tiny_model(), epochs=1), TypeError, r"model must be a torch nn.Module")
    refused(lambda: fit(toy_set(8), tiny_model(), epochs=1), ValueError, r"model must be")  # except ValueError too
    refused(lambda: fit(nn.Flatten(), toy_set(8), epochs=1), ValueError, r"no floating-point parameters")


def test_fit_refuses_labels_the_model_cannot_predict():
    data = toy_set(8)
    for labels, match in [
        (data.labels + 1, r"train's labels must be class indices from 0 to 1 \(the model gives 2 outputs\), got "),
        (data.labels - 1, r"train's labels must be class indices from 0 up, got values from -1"),
        (torch.full((8,), -100), r"from 0 up, got values from -100"),  # cross_entropy would skip them silently
    ]:
        refused(
            lambda: fit(tiny_model(), TensorDataset(data.images, labels), epochs=1, progress=False), ValueError, match
        )
    val = TensorDataset(data.images, data.labels + 5)
    refused(lambda: fit(tiny_model(), data, val, epochs=1, progress=False), ValueError, r"val's labels .* 0 to 1")


@pytest.mark.parametrize(
    "images, labels, match",
    [
        ((255 * torch.rand(8, 1, 8, 8)).to(torch.uint8), None, r"got torch.uint8: convert with .float\(\) / 255"),
        (torch.rand(8, 1, 8, 8, dtype=torch.float64), None, r"float64 but the model's weights are torch.float32"),
        (None, torch.zeros(8), r"int64 class indices, got torch.float32 .*\.long\(\)"),
        (None, torch.zeros(8, dtype=torch.int32), r"int64 class indices, got torch.int32: convert with .long\(\)"),
        (torch.full((8, 1, 8, 8), float("nan")), None, r"NaN or infinite"),
    ],
)
def test_fit_refuses_images_and_labels_of_the_wrong_kind(images, labels, match):
    data = toy_set(8)
    train = TensorDataset(data.images if images is None else images, data.labels if labels is None else labels)
    refused(lambda: fit(tiny_model(), train, epochs=1, progress=False), ValueError, match)


def test_fit_refuses_a_validation_set_of_other_images():
    val = TensorDataset(torch.rand(4, 1, 16, 16), torch.zeros(4, dtype=torch.long))
    refused(lambda: fit(tiny_model(), toy_set(8), val, epochs=1), ValueError, r"val's images are \(1, 16, 16\)")


def test_snapshots_need_a_position_table():
    cnn = SmallCNN(1, 2, width=4)
    refused(lambda: fit(cnn, toy_set(8), epochs=1, snapshot_every=1), ValueError, r"this SmallCNN has no position")
    no_table = VisionTransformer(
        ViTConfig.tiny(image_size=8, patch_size=4, in_channels=1, num_classes=2, pos_embed="none")
    )
    refused(lambda: fit(no_table, toy_set(8), epochs=1, snapshot_every=1), ValueError, r"leave snapshot_every out")


def test_a_clock_without_an_end_is_refused():
    for total_steps, time_budget in [(None, None), (0, None), (None, 0), (None, -1.0)]:
        refused(lambda: TrainingClock(total_steps, time_budget), ValueError, r"total_steps|time_budget")


def test_train_epoch_without_batches_says_so():
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    refused(
        lambda: train_epoch(model, optimizer, [], TrainingClock(1, None), lr=0.1, warmup=0.1), ValueError, "no batches"
    )


def test_train_step_refuses_what_cross_entropy_would_get_wrong():
    model, data = tiny_model(), toy_set(8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    refused(lambda: train_step(model, optimizer, data.images, torch.full((8,), -100)), ValueError, r"from 0 up")
    refused(lambda: train_step(model, optimizer, data.images, data.labels[:3]), ValueError, r"8 images, 3 labels")
    refused(lambda: train_step(model, optimizer, data.images, data.labels, label_smoothing=2), ValueError, "label_sm")
    refused(lambda: train_step(model, optimizer, data.images.double(), data.labels), ValueError, r"\.float\(\)")
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))  # no step was taken


def test_evaluate_and_predict_refuse_what_they_cannot_use():
    model, data = tiny_model(), toy_set(8)
    empty = ImageDataset(torch.zeros(0, 1, 8, 8), torch.zeros(0, dtype=torch.long), ["a", "b"])
    refused(lambda: evaluate(model, empty), ValueError, r"dataset is empty")
    refused(lambda: evaluate(model, data, batch_size=0), ValueError, r"batch_size .* at least 1")
    refused(lambda: evaluate(model, (data.images, data.labels)), TypeError, r"got a tuple")
    refused(lambda: evaluate(model, TensorDataset(data.images, data.labels + 2)), ValueError, r"model gives 2 outputs")
    refused(lambda: predict(model, data.images[:0]), ValueError, r"images is empty")
    refused(lambda: predict(model, data), TypeError, r"pass its images, dataset.images")
    refused(lambda: predict(model, data.images[0]), ValueError, r"one image\? add the batch axis")
    refused(lambda: predict(model, (255 * data.images).to(torch.uint8)), ValueError, r"\.float\(\) / 255")
    refused(lambda: predict(model, data.images, batch_size=-1), ValueError, r"batch_size")


@pytest.mark.parametrize(
    "predictions, labels, num_classes, match",
    [
        (
            [0, 2],
            [0, 0],
            2,
            r"predictions must be class indices from 0 to 1 \(num_classes is 2\), got values from 0 to 2",
        ),
        ([0, -1], [0, 1], 2, r"predictions .* got values from -1 to 0"),  # once counted in another cell
        ([0, 1], [1, 3], 2, r"labels must be class indices from 0 to 1"),
        ([0, 1, 1], [0, 1], 2, r"one per image, got 3 and 2"),
        ([0, 1], [0, 1], 0, r"num_classes must be a whole number, at least 1, got 0"),
    ],
)
def test_confusion_matrix_refuses_what_it_would_miscount(predictions, labels, num_classes, match):
    refused(lambda: confusion_matrix(torch.tensor(predictions), torch.tensor(labels), num_classes), ValueError, match)


def test_confusion_matrix_wants_class_indices():
    labels = torch.tensor([0, 1])
    refused(lambda: confusion_matrix(torch.rand(2, 2), labels, 2), ValueError, r"got scores \(2, 2\): use .argmax")
    refused(lambda: confusion_matrix(torch.tensor([0.0, 1.0]), labels, 2), ValueError, r"int64 class indices")
    refused(lambda: confusion_matrix([0, 1], labels, 2), TypeError, r"predictions must be a torch.Tensor")
    empty = torch.zeros(0, dtype=torch.long)
    assert confusion_matrix(empty, empty, 3).sum() == 0  # no images: an honest matrix of zeros


@pytest.mark.parametrize(
    "progress, warmup, error, match",
    [
        (-0.5, 0.1, ValueError, r"progress must be from 0 to 1 .* got -0.5"),  # it gave -5
        (1.5, 0.1, ValueError, r"progress must be from 0 to 1 .* got 1.5"),
        (float("nan"), 0.1, ValueError, r"progress .* got nan"),
        (
            "0.5",
            0.1,
            TypeError,
            r"progress must be a finite number \(the fraction of training done\), got .0.5. \(str\)",
        ),
        (0.5, 1.0, ValueError, r"warmup must be .* from 0 up to \(not including\) 1, got 1.0"),
        (0.5, -0.1, ValueError, r"warmup .* got -0.1"),
    ],
)
def test_warmup_cosine_refuses_progress_and_warmup_out_of_range(progress, warmup, error, match):
    refused(lambda: warmup_cosine(progress, warmup), error, match)


def test_warmup_cosine_forgives_float_rounding_at_the_ends():
    assert warmup_cosine(1 + 1e-12) == 0.0 and warmup_cosine(-1e-12) == 0.0
    assert math.isclose(warmup_cosine(sum([0.1] * 10)), 0.0, abs_tol=1e-12)  # 0.9999999999999999
    assert math.isclose(warmup_cosine(0.5, 0.0), 0.5)  # no warm-up at all


def test_random_shift_refuses_bad_shifts():
    images, generator = torch.rand(2, 1, 6, 6), torch.Generator()
    refused(lambda: random_shift(images, -1, generator), ValueError, r"max_shift .* at least 0")
    refused(lambda: random_shift(images, 6, generator), ValueError, r"smaller than the images \(6 x 6\)")
    refused(lambda: random_shift(images[0], 1, generator), ValueError, r"\(N, C, H, W\)")


@pytest.mark.parametrize("smoothing, classes", [(0.1, 10), (0.1, 2), (0.3, 5), (0.0, 10)])
def test_the_label_smoothing_floor_is_the_loss_of_predicting_the_smoothed_target(smoothing, classes):
    """Against torch's own loss: predicting exactly the smoothed target gives the floor, and any
    other prediction gives more."""
    target = torch.full((classes,), smoothing / classes)
    target[0] += 1 - smoothing
    floor = label_smoothing_floor(smoothing, classes)
    at_target = F.cross_entropy(target.log()[None], torch.tensor([0]), label_smoothing=smoothing).item()
    assert floor == pytest.approx(at_target, abs=1e-6)
    for _ in range(20):
        other = torch.randn(1, classes)
        assert F.cross_entropy(other, torch.tensor([0]), label_smoothing=smoothing).item() >= floor - 1e-6


def test_the_label_smoothing_floor_names_a_wrong_argument():
    smoothing = r"label_smoothing must be a number, from 0 up to \(not including\) 1, got 1\.0"
    refused(lambda: label_smoothing_floor(1.0, 10), ValueError, smoothing)
    refused(lambda: label_smoothing_floor(0.1, 1), ValueError, r"num_classes must be a whole number, at least 2, got 1")


def test_fit_evaluate_and_predict_refuse_a_thread_count_that_is_no_count():
    model, data = tiny_model(), toy_set(16)
    refused(lambda: fit(model, data, steps=1, threads=0, progress=False), ValueError, r"threads must be a whole number")
    refused(lambda: evaluate(model, data, threads=2.5), TypeError, r"threads must be a whole number")
    refused(lambda: predict(model, data.images, threads="1"), TypeError, r"threads must be a whole number")
    before = torch.get_num_threads()
    fit(model, data, steps=1, threads=None, progress=False)  # None: torch's own count, untouched
    assert torch.get_num_threads() == before
