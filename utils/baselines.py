"""Lesson 6's yardsticks for the ViT: a small CNN of the same size, and scikit-learn's linear
model and SVM on the same split."""

import torch
from torch import nn
from torch.utils.data import TensorDataset


class SmallCNN(nn.Module):
    """Two stages of two 3x3 convolutions (the second stage twice as wide, after a 2x2 max-pool),
    global average pooling and a linear head.

    Args:
        in_channels: C of the images.
        num_classes: outputs of the head.
        width: channels of the first stage.
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 32):
        super().__init__()
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
        return self.head(self.features(images))

    @classmethod
    def with_parameters(cls, target: int, in_channels: int, num_classes: int) -> "SmallCNN":
        """The SmallCNN whose parameter count is closest to `target` (e.g. a ViT's)."""
        count = lambda width: sum(p.numel() for p in cls(in_channels, num_classes, width).parameters())  # noqa: E731
        width = min(range(4, 257), key=lambda w: abs(count(w) - target))
        return cls(in_channels, num_classes, width)


def sklearn_baselines(train: TensorDataset, test: TensorDataset) -> dict[str, float]:
    """Test accuracy of a logistic regression and an RBF-kernel SVM on the flattened pixels."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    (x_train, y_train), (x_test, y_test) = train.tensors, test.tensors
    x_train, x_test = x_train.flatten(1).numpy(), x_test.flatten(1).numpy()  # (N, C*H*W)
    models = {
        "logistic regression": LogisticRegression(max_iter=2000),
        "SVM (RBF kernel)": SVC(kernel="rbf", C=10.0, gamma="scale"),
    }
    return {
        name: float(model.fit(x_train, y_train.numpy()).score(x_test, y_test.numpy())) for name, model in models.items()
    }
