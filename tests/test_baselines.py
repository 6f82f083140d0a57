"""The yardsticks: a CNN sized to match a model, and scikit-learn's models on the same split."""

import torch

from utils.baselines import SmallCNN, sklearn_baselines
from utils.data import load_digits


def count(model):
    return sum(p.numel() for p in model.parameters())


def test_small_cnn_shapes_and_size_matching():
    cnn = SmallCNN(3, 2, width=8)
    assert cnn(torch.rand(4, 3, 32, 32)).shape == (4, 2)
    assert SmallCNN(1, 10)(torch.rand(2, 1, 8, 8)).shape == (2, 10)
    for target in (20_000, 136_138):
        matched = SmallCNN.with_parameters(target, in_channels=1, num_classes=10)
        width = matched.head.in_features // 2
        neighbours = [count(SmallCNN(1, 10, w)) for w in (width - 1, width + 1)]
        assert all(abs(count(matched) - target) <= abs(n - target) for n in neighbours)
        assert abs(count(matched) - target) / target < 0.06  # widths come in whole channels


def test_sklearn_baselines_on_the_digits():
    train, test = load_digits()
    results = sklearn_baselines(train, test)
    assert set(results) == {"logistic regression", "SVM (RBF kernel)"}
    assert results["logistic regression"] > 0.93 and results["SVM (RBF kernel)"] > 0.97
