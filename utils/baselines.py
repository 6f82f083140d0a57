"""Lesson 6's yardsticks for the ViT: a small CNN of the same size, and scikit-learn's linear
model and SVM on the same split."""

import torch
from torch import nn
from torch.utils.data import TensorDataset

from utils.datasets import check_dataset, check_float_images
from utils.validation import check_whole


class SmallCNN(nn.Module):
    """Two stages of two 3x3 convolutions (the second stage twice as wide, after a 2x2 max-pool),
    global average pooling and a linear head.

    Args:
        in_channels: C of the images.
        num_classes: outputs of the head.
        width: channels of the first stage.
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 32):
        in_channels = check_whole(in_channels, "in_channels", meaning=" (C of the images)")
        num_classes = check_whole(num_classes, "num_classes")
        width = check_whole(width, "width", meaning=" (channels of the first stage)")
        super().__init__()
        self.in_channels = in_channels
        conv = lambda c_in, c_out: [nn.Conv2d(c_in, c_out, 3, padding=1), nn.ReLU()]  # noqa: E731
        self.features = nn.Sequential(
            *conv(in_channels, width),
            *conv(width, width),
            nn.MaxPool2d(2),
            *conv(width, 2 * width),
            *conv(2 * width, 2 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_classes)."""
        check_float_images(images, dtype=self.head.weight.dtype, allow_empty=True)
        _, channels, height, width = images.shape
        if channels != self.in_channels:
            raise ValueError(f"this SmallCNN takes images (B, {self.in_channels}, H, W), got {tuple(images.shape)}")
        if min(height, width) < 2:
            raise ValueError(f"images must be at least 2 x 2 pixels (the CNN halves them once), got {height} x {width}")
        return self.head(self.features(images))

    @classmethod
    def with_parameters(cls, target: int, in_channels: int, num_classes: int) -> "SmallCNN":
        """The SmallCNN whose parameter count is closest to `target` (e.g. a ViT's), its width from 4 to 256."""
        check_whole(target, "target", meaning=" of parameters")
        check_whole(in_channels, "in_channels", meaning=" (C of the images)")
        check_whole(num_classes, "num_classes")
        count = lambda width: sum(p.numel() for p in cls(in_channels, num_classes, width).parameters())  # noqa: E731
        width = min(range(4, 257), key=lambda w: abs(count(w) - target))
        return cls(in_channels, num_classes, width)


def sklearn_baselines(train: TensorDataset, test: TensorDataset) -> dict[str, float]:
    """Test accuracy of a logistic regression and an RBF-kernel SVM on the flattened pixels."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    (x_train, y_train), (x_test, y_test) = check_dataset(train, "train"), check_dataset(test, "test")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ValueError(f"train's images are {tuple(x_train.shape[1:])} but test's {tuple(x_test.shape[1:])}")
    if len(y_train.unique()) < 2:
        raise ValueError(f"train must hold at least two classes to tell apart, got only {y_train.unique().tolist()}")
    x_train, x_test = x_train.flatten(1).numpy(), x_test.flatten(1).numpy()  # (N, C*H*W)
    models = {
        "logistic regression": LogisticRegression(max_iter=2000),
        "SVM (RBF kernel)": SVC(kernel="rbf", C=10.0, gamma="scale"),
    }
    return {
        name: float(model.fit(x_train, y_train.numpy()).score(x_test, y_test.numpy())) for name, model in models.items()
    }
