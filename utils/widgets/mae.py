"""Lesson 13's explorer: the mask ratio on a slider, what the encoder sees and what the MAE rebuilds."""

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch

from utils.mae import MaskedAutoencoder, masked_loss
from utils.patches import patchify, to_2tuple
from utils.runtime import eval_mode
from utils.validation import WrongTypeError, check_positive, check_tensor, describe
from utils.viz.core import DPI, check_image_batch, to_numpy_image
from utils.viz.mae import filled, painted
from utils.widgets import StaticPicture, show_in


class MaskRatioExplorer(StaticPicture, widgets.VBox):
    """A trained MAE at any mask ratio: the digit, the visible patches (hidden ones blue) and the
    reconstruction, with the error on the hidden patches beside the error of predicting each
    place's mean pixels.

    Controls (attributes): `hidden` (how many patches are hidden, 0 .. N - 1), `image` (which
    one) and `draw` (the seed of the random mask). `self.loss` is the MSE on the hidden patches
    now (None when none is hidden).

    Args:
        mae: a MaskedAutoencoder (utils.mae), run in eval mode without gradients.
        images: (B, C, H, W) in [0, 1], the size its encoder expects.
        mean_patches: optional (N, C*P*P) the training images' mean patch at each place, the
            baseline of the summary.
    """

    shows = "A digit, the patches its encoder sees (hidden ones blue) and the masked autoencoder's reconstruction"

    def __init__(self, mae, images, mean_patches=None, hidden: int = 12, size: float = 2.0):
        if not isinstance(mae, MaskedAutoencoder):
            raise WrongTypeError(f"mae must be a utils.mae.MaskedAutoencoder, got {describe(mae)}")
        images = check_image_batch(images).detach().float()
        config = mae.encoder.config
        expected = (config.in_channels, *to_2tuple(config.image_size))
        if tuple(images.shape[1:]) != expected:
            raise ValueError(
                f"images must be (B, {', '.join(map(str, expected))}) for this MAE, got {tuple(images.shape)}"
            )
        self.N = mae.encoder.patch_embed.num_patches
        if mean_patches is not None:
            mean_patches = check_tensor(mean_patches, "mean_patches (N, C*P*P)", ndim=2).detach().float()
            if tuple(mean_patches.shape) != (self.N, config.in_channels * config.patch_size**2):
                raise ValueError(
                    f"mean_patches must be (N, C*P*P) = {(self.N, config.in_channels * config.patch_size**2)}, "
                    f"got {tuple(mean_patches.shape)}"
                )
        if not isinstance(hidden, int) or not 0 <= hidden < self.N:
            raise ValueError(f"hidden must be a whole number from 0 to {self.N - 1}, got {hidden!r}")
        check_positive(size, "size")
        self.mae, self.images, self.mean_patches = mae, images, mean_patches
        self.patch_size = config.patch_size
        self.hidden = widgets.IntSlider(value=hidden, min=0, max=self.N - 1, description="hidden")
        self.image = widgets.IntSlider(value=0, min=0, max=len(images) - 1, description="image")
        self.draw = widgets.IntSlider(value=0, min=0, max=99, description="mask seed")
        self.summary = widgets.HTML()
        self.output = widgets.Output()
        self.fig, self.axes = plt.subplots(1, 3, figsize=(3 * size, 1.15 * size), dpi=DPI)
        for ax, title in zip(self.axes, ("image", "visible", "rebuilt")):
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title)
        plt.close(self.fig)
        self.pictures = [
            ax.imshow(to_numpy_image(painted(images[:1], torch.zeros(1, self.N), self.patch_size)[0]))
            for ax in self.axes
        ]
        self.loss = None
        for control in (self.hidden, self.image, self.draw):
            control.observe(lambda change: self.redraw(), names="value")
        super().__init__([widgets.HBox([self.hidden, self.image, self.draw]), self.summary, self.output])
        self.redraw()

    def reconstruct(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(prediction (1, N, C*P*P), mask (1, N)) for the chosen image, ratio and mask seed."""
        image = self.images[self.image.value : self.image.value + 1]
        generator = torch.Generator().manual_seed(self.draw.value)
        with eval_mode(self.mae), torch.no_grad():
            _, prediction, mask = self.mae(image, generator, mask_ratio=self.hidden.value / self.N)
        return prediction, mask

    def redraw(self) -> None:
        image = self.images[self.image.value : self.image.value + 1]  # (1, C, H, W)
        prediction, mask = self.reconstruct()
        self.mask = mask
        pictures = (
            painted(image, torch.zeros_like(mask), self.patch_size)[0],
            painted(image, mask, self.patch_size)[0],
            filled(image, prediction, mask, self.patch_size).expand(-1, 3, -1, -1)[0],
        )
        for artist, picture in zip(self.pictures, pictures):
            artist.set_data(to_numpy_image(picture))
        hidden = int(mask.sum().item())
        if hidden == 0:
            self.loss = None
            self.summary.value = f"nothing hidden: the encoder sees all {self.N} patches, nothing to rebuild"
        else:
            target = patchify(image, self.patch_size)  # (1, N, C*P*P)
            self.loss = masked_loss(prediction, target, mask).item()
            text = f"{hidden} of {self.N} hidden; MSE on them <b>{self.loss:.3f}</b>"
            if self.mean_patches is not None:
                baseline = masked_loss(self.mean_patches[None], target, mask).item()
                text += f", each place's mean pixels {baseline:.3f}"
            self.summary.value = text
        show_in(self.output, self.fig)

    def state_line(self) -> str:
        """E.g. "image 0, 12 of 16 patches hidden, mask seed 0"."""
        return f"image {self.image.value}, {self.hidden.value} of {self.N} patches hidden, mask seed {self.draw.value}"
