"""fit / evaluate / predict: the schedule, the augmentation, determinism, and that training learns."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from utils import VisionTransformer, ViTConfig, set_seed
from utils.data import ImageDataset
from utils.training import (
    History,
    budget,
    confusion_matrix,
    evaluate,
    fit,
    predict,
    quick_mode,
    random_shift,
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
    assert history.final_test_accuracy > 0.95 > before
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


def reference_fit(
    model,
    train,
    test,
    *,
    epochs,
    batch_size,
    lr,
    weight_decay=0.05,
    warmup=0.1,
    label_smoothing=0.0,
    max_shift=0,
    seed=0,
):
    """fit's loop as it was written in one piece before it was split into helpers (epochs only)."""
    images, labels = train.tensors
    total_steps = epochs * math.ceil(len(labels) / batch_size)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    history, step = History(), 0
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        seen, loss_sum, correct = 0, 0.0, 0
        for batch_start in range(0, len(labels), batch_size):
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
        test_loss, test_accuracy = evaluate(model, test)
        history.test_loss.append(test_loss)
        history.test_accuracy.append(test_accuracy)
    return history


def test_fit_gives_the_numbers_of_the_one_piece_loop():
    train, test = toy_set(96, 0), toy_set(40, 1)
    options = dict(epochs=3, batch_size=32, lr=2e-3, label_smoothing=0.1, max_shift=1, seed=3)
    set_seed(0)
    model, reference = tiny_model(), tiny_model()
    reference.load_state_dict(model.state_dict())
    history = fit(model, train, test, progress=False, **options)
    expected = reference_fit(reference, train, test, **options)
    for key in ("step", "lr", "train_loss", "train_accuracy", "test_loss", "test_accuracy"):
        assert getattr(history, key) == getattr(expected, key), key
    assert history.step == [3, 6, 9] and history.epoch == [1, 2, 3]
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.equal(ours, theirs)


def test_fit_reports_progress(capsys):
    set_seed(0)
    fit(tiny_model(), toy_set(64, 0), toy_set(16, 1), epochs=2, batch_size=32, progress=True)
    bar = capsys.readouterr().err
    assert "4/4" in bar and "step" in bar and "test_acc=" in bar


def test_fit_needs_a_length():
    with pytest.raises(ValueError, match="epochs, time_budget"):
        fit(tiny_model(), toy_set(8), progress=False)
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


def test_budget_follows_quick_mode(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("VIT_QUICK", raising=False)
    assert not quick_mode() and budget(60, 5) == {"time_budget": 60}
    monkeypatch.setenv("CI", "true")
    assert quick_mode() and budget(60, 5) == {"epochs": 5}
    monkeypatch.delenv("CI")
    monkeypatch.setenv("VIT_QUICK", "1")
    assert budget(60, 5) == {"epochs": 5}
