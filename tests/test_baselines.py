"""The yardsticks: a CNN sized to match a model, and scikit-learn's models on the same split."""

import pytest
import torch
from torch.utils.data import TensorDataset

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


@pytest.mark.parametrize(
    "args, error, match",
    [
        ((0, 10), ValueError, r"in_channels must be a whole number \(C of the images\), at least 1, got 0"),
        ((1, 0), ValueError, r"num_classes must be a whole number, at least 1, got 0"),
        ((1, 10, 0), ValueError, r"width must be a whole number \(channels of the first stage\), at least 1"),
        ((1, 10, 2.5), TypeError, r"width must be a whole number"),
        ((1.0, 10), TypeError, r"in_channels must be a whole number"),
    ],
)
def test_small_cnn_refuses_sizes_it_cannot_build(args, error, match):
    with pytest.raises(error, match=match):
        SmallCNN(*args)


@pytest.mark.parametrize(
    "images, match",
    [
        (torch.rand(2, 3, 8, 8), r"this SmallCNN takes images \(B, 1, H, W\), got \(2, 3, 8, 8\)"),
        (torch.rand(1, 8, 8), r"one image\? add the batch axis"),
        (torch.rand(2, 1, 1, 1), r"at least 2 x 2 pixels"),
        (torch.zeros(2, 1, 8, 8, dtype=torch.uint8), r"convert with .float\(\) / 255"),
    ],
)
def test_small_cnn_says_what_images_it_takes(images, match):
    with pytest.raises(ValueError, match=match):
        SmallCNN(1, 10, width=4)(images)


def test_size_matching_and_baselines_refuse_what_they_cannot_use():
    with pytest.raises(ValueError, match=r"target must be a whole number of parameters, at least 1, got 0"):
        SmallCNN.with_parameters(0, in_channels=1, num_classes=10)
    train, test = load_digits()
    with pytest.raises(TypeError, match=r"train must be a dataset of images and labels.*got a tuple"):
        sklearn_baselines(train.tensors, test)
    one_class = TensorDataset(train.images[:5], torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"at least two classes"):
        sklearn_baselines(one_class, test)
