"""fit / evaluate / predict: the schedule, the augmentation, determinism, and that training learns."""

import math

import pytest
import torch
from torch import nn

from utils import ViTConfig, VisionTransformer, set_seed
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
    assert all(a >= b for a, b in zip(values, values[1:]))  # never rises after the warm-up


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


def test_fit_needs_a_length():
    with pytest.raises(ValueError, match="epochs, time_budget"):
        fit(tiny_model(), toy_set(8), progress=False)


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


def test_budget_follows_quick_mode(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("VIT_QUICK", raising=False)
    assert not quick_mode() and budget(60, 5) == {"time_budget": 60}
    monkeypatch.setenv("CI", "true")
    assert quick_mode() and budget(60, 5) == {"epochs": 5}
    monkeypatch.delenv("CI")
    monkeypatch.setenv("VIT_QUICK", "1")
    assert budget(60, 5) == {"epochs": 5}
