"""Lesson 6's yardsticks for the ViT: CNNs of the same size (SmallCNN, whose units see a small
window, and DeepCNN, whose last units see the whole image), and scikit-learn's linear model and
SVM on the same split."""

import bisect

import torch
from torch import nn
from torch.utils.data import TensorDataset

from utils.compute import check_module
from utils.datasets import check_dataset, check_float_images
from utils.validation import WrongTypeError, check_device, check_whole

WIDTHS = range(4, 257)  # the widths (channels of the first stage) with_parameters chooses from


def _layer_steps(module: nn.Module) -> tuple[int, int, int] | None:
    """(kernel, stride, dilation) of a square 2-D convolution or pooling layer; None for a layer that
    does not move across the image (an activation, a Linear); a ValueError for one this walk cannot take."""
    name = type(module).__name__
    if isinstance(module, nn.Conv2d | nn.MaxPool2d | nn.AvgPool2d):
        pairs = {
            "kernel_size": module.kernel_size,
            "stride": module.stride if module.stride is not None else module.kernel_size,
            "dilation": getattr(module, "dilation", 1),
        }
        sizes = {key: value if isinstance(value, tuple) else (value, value) for key, value in pairs.items()}
        if any(height != width for height, width in sizes.values()):
            raise ValueError(f"receptive_field takes square kernels, strides and dilations, got {module}")
        return sizes["kernel_size"][0], sizes["stride"][0], sizes["dilation"][0]
    if ("Conv" in name or "Pool" in name) and not any(module.children()):  # a layer, not a block of layers
        raise ValueError(
            f"receptive_field walks Conv2d, MaxPool2d and AvgPool2d layers (and a global pool at the end), got {name}"
        )
    return None


def receptive_field(model: nn.Module) -> int:
    """The side, in pixels, of the window of the image that one unit of `model`'s last convolution
    or pooling layer sees (ignoring the padding at the edges).

    Walks the Conv2d, MaxPool2d and AvgPool2d layers in the order they were registered (the order
    a Sequential runs them in): rf += (kernel - 1) x dilation x jump, then jump *= stride, where
    jump is the distance in pixels between neighbouring units. A global pool (AdaptiveAvgPool2d(1))
    ends the walk: it averages units that each see only their own window.
    """
    check_module(model, "SmallCNN(3, 2)")
    attention = [type(m).__name__ for m in model.modules() if "Attention" in type(m).__name__]
    if attention:
        raise ValueError(
            f"receptive_field walks the convolutions of a CNN; this {type(model).__name__} holds attention "
            f"({attention[0]}), whose every output already sees every token"
        )
    rf, jump, layers = 1, 1, 0
    for module in model.modules():
        if isinstance(module, nn.AdaptiveAvgPool2d | nn.AdaptiveMaxPool2d):
            if module.output_size not in (1, (1, 1)):
                raise ValueError(f"receptive_field takes only a global pool (output size 1), got {module}")
            break
        steps = _layer_steps(module)
        if steps is not None:
            kernel, stride, dilation = steps
            rf += (kernel - 1) * dilation * jump
            jump *= stride
            layers += 1
    if layers == 0:
        raise ValueError(f"this {type(model).__name__} has no Conv2d or pooling layer to walk: it is not a CNN")
    return rf


def objects_in_one_window(dataset: TensorDataset, window: int) -> torch.Tensor:
    """(N,) bool: for each image of a make_relational set, whether some `window` x `window` square
    of pixels holds a pixel of each of its two objects: only there can one CNN unit whose receptive
    field is `window` compare the two (global average pooling then only adds units up).

    Two pixels fit in one such square when they are less than `window` apart along both axes, so
    the test is: the smallest max(|rows apart|, |columns apart|) over the pixel pairs < window.

    Args:
        dataset: a make_relational set (it carries object_masks and object_boxes).
        window: the side of the square in pixels, e.g. SmallCNN(...).receptive_field.
    """
    window = check_whole(window, "window", meaning=" of pixels per side")
    masks, boxes = getattr(dataset, "object_masks", None), getattr(dataset, "object_boxes", None)
    if masks is None or boxes is None:
        raise WrongTypeError(
            f"dataset must be a make_relational set, which carries object_masks and object_boxes, got "
            f"{type(dataset).__name__} without them"
        )
    together = torch.zeros(len(masks), dtype=torch.bool)
    for i, (mask, image_boxes) in enumerate(zip(masks, boxes)):  # (H, W), (2, 4)
        pixels = []
        for top, left, bottom, right in image_boxes.tolist():
            inside = torch.zeros_like(mask)
            inside[top:bottom, left:right] = True
            pixels.append((mask & inside).nonzero())  # (P, 2) rows and columns of one object
        apart = (pixels[0][:, None, :] - pixels[1][None, :, :]).abs().amax(dim=-1)  # (P0, P1)
        together[i] = bool(apart.min() < window)
    return together


class _ConvNet(nn.Module):
    """What the course's CNNs share: `features` then `head`, the checks of the images, the
    receptive field and matching a parameter count."""

    min_side = 1  # pixels per side the features need
    min_side_why = "an image needs pixels"

    def __init__(self, in_channels: int, num_classes: int, width: int):
        in_channels = check_whole(in_channels, "in_channels", meaning=" (C of the images)")
        num_classes = check_whole(num_classes, "num_classes")
        width = check_whole(width, "width", meaning=" (channels of the first stage)")
        super().__init__()
        self.in_channels, self.num_classes, self.width = in_channels, num_classes, width

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, num_classes)."""
        check_float_images(images, dtype=self.head.weight.dtype, allow_empty=True)
        check_device(images, "images", self.head.weight)
        _, channels, height, width = images.shape
        if channels != self.in_channels:
            raise ValueError(
                f"this {type(self).__name__} takes images (B, {self.in_channels}, H, W), got {tuple(images.shape)}"
            )
        if min(height, width) < self.min_side:
            raise ValueError(
                f"images must be at least {self.min_side} x {self.min_side} pixels ({self.min_side_why}), "
                f"got {height} x {width}"
            )
        return self.head(self.features(images))  # (B, num_classes)

    @property
    def receptive_field(self) -> int:
        """The side, in pixels, of the window one unit of the last stage sees (see `receptive_field`)."""
        return receptive_field(self)

    @classmethod
    def count_parameters(cls, in_channels: int, num_classes: int, width: int) -> int:
        """The parameters of cls(in_channels, num_classes, width), counted without allocating them."""
        with torch.device("meta"):
            return sum(p.numel() for p in cls(in_channels, num_classes, width).parameters())

    @classmethod
    def with_parameters(cls, target: int, in_channels: int, num_classes: int) -> "_ConvNet":
        """The model whose parameter count is closest to `target` (e.g. a ViT's), its width from 4 to 256."""
        if isinstance(target, nn.Module):
            raise WrongTypeError(
                f"target must be a whole number of parameters, got a {type(target).__name__}: count them with "
                "sum(p.numel() for p in model.parameters())"
            )
        target = check_whole(target, "target", meaning=" of parameters")
        in_channels = check_whole(in_channels, "in_channels", meaning=" (C of the images)")
        num_classes = check_whole(num_classes, "num_classes")
        count = lambda width: cls.count_parameters(in_channels, num_classes, width)  # noqa: E731
        fewest, most = count(WIDTHS[0]), count(WIDTHS[-1])
        if not fewest <= target <= most:
            raise ValueError(
                f"no {cls.__name__} with width {WIDTHS[0]} to {WIDTHS[-1]} has about target={target:,} parameters: "
                f"they have {fewest:,} to {most:,} (for in_channels={in_channels}, num_classes={num_classes})"
            )
        above = bisect.bisect_left(WIDTHS, target, key=count)  # the first width with at least `target`
        candidates = [WIDTHS[i] for i in (above - 1, above) if 0 <= i < len(WIDTHS)]
        width = min(candidates, key=lambda w: abs(count(w) - target))  # a tie goes to the narrower
        return cls(in_channels, num_classes, width)


def _conv(c_in: int, c_out: int, stride: int = 1) -> list[nn.Module]:
    """A 3x3 convolution (padded: stride 1 keeps the size, stride 2 halves it) and a ReLU."""
    return [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.ReLU()]


class SmallCNN(_ConvNet):
    """Two stages of two 3x3 convolutions (the second stage twice as wide, after a 2x2 max-pool),
    global average pooling and a linear head. Its first stage runs at the full image size.

    Args:
        in_channels: C of the images.
        num_classes: outputs of the head.
        width: channels of the first stage.
    """

    min_side = 2
    min_side_why = "the CNN halves them once"

    def __init__(self, in_channels: int, num_classes: int, width: int = 32):
        super().__init__(in_channels, num_classes, width)
        width = self.width
        self.features = nn.Sequential(
            *_conv(self.in_channels, width),
            *_conv(width, width),
            nn.MaxPool2d(2),  # (B, width, H/2, W/2)
            *_conv(width, 2 * width),
            *_conv(2 * width, 2 * width),
            nn.AdaptiveAvgPool2d(1),  # (B, 2 * width, 1, 1)
            nn.Flatten(),  # (B, 2 * width)
        )
        self.head = nn.Linear(2 * width, self.num_classes)


class DeepCNN(_ConvNet):
    """Eight 3x3 convolutions of widths w, w, 2w, 2w, 4w, 4w, 4w, 4w, with a 2x2 max-pool (halving
    the image, rounding up) after the first, third, fifth and seventh; global average pooling and a
    linear head. He-initialised: with torch's default init, eight ReLU layers deep, it sat at chance
    for many epochs.

    Halving the image four times widens what one unit sees to 106 x 106 pixels: on 32 x 32 images
    the last stage is 2 x 2 units and each of them sees every pixel, so a unit can relate two
    objects wherever they are (a SmallCNN unit sees 14 x 14). Halving early also makes it cheaper.

    Args:
        in_channels: C of the images.
        num_classes: outputs of the head.
        width: channels of the first stage.
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 16):
        super().__init__(in_channels, num_classes, width)
        w = self.width
        halve = lambda: nn.MaxPool2d(2, ceil_mode=True)  # noqa: E731  (an odd side rounds up: 1 pixel stays 1)
        self.features = nn.Sequential(
            *_conv(self.in_channels, w),
            halve(),  # (B, w, H/2, W/2)
            *_conv(w, w),
            *_conv(w, 2 * w),
            halve(),  # (B, 2w, H/4, W/4)
            *_conv(2 * w, 2 * w),
            *_conv(2 * w, 4 * w),
            halve(),  # (B, 4w, H/8, W/8)
            *_conv(4 * w, 4 * w),
            *_conv(4 * w, 4 * w),
            halve(),  # (B, 4w, H/16, W/16)
            *_conv(4 * w, 4 * w),
            nn.AdaptiveAvgPool2d(1),  # (B, 4w, 1, 1)
            nn.Flatten(),  # (B, 4w)
        )
        self.head = nn.Linear(4 * w, self.num_classes)
        self.init_weights()

    def init_weights(self) -> None:
        """He (Kaiming) normal weights for the convolutions, zero biases: the signal keeps its size
        through the ReLUs (torch's default init shrinks it at every layer)."""
        for module in self.features.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
                nn.init.zeros_(module.bias)


def sklearn_baselines(train: TensorDataset, test: TensorDataset) -> dict[str, float]:
    """Test accuracy of a logistic regression and an RBF-kernel SVM on the flattened pixels, both at
    scikit-learn's default settings (nothing chosen, so nothing to validate; the logistic regression
    only gets max_iter=2000 so that its solver converges, which changes no setting of the model)."""
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
        "SVM (RBF kernel)": SVC(),  # scikit-learn's defaults: RBF kernel, C = 1, gamma "scale"
    }
    return {
        name: float(model.fit(x_train, y_train.numpy()).score(x_test, y_test.numpy())) for name, model in models.items()
    }
