"""Images the course ships with: nothing is downloaded at run time."""

import matplotlib.cbook
import numpy as np
import torch
from PIL import Image


def load_sample_image(size: int = 224) -> torch.Tensor:
    """Grace Hopper's portrait, which ships with matplotlib, as a square RGB tensor.

    The photo (600 x 512) is centre-cropped to a square and resized (bicubic) to size x size.

    Returns:
        image (3, size, size), float32 in [0, 1].
    """
    path = matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)
    with Image.open(path) as photo:
        photo = photo.convert("RGB")
        width, height = photo.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        photo = photo.crop((left, top, left + side, top + side)).resize((size, size), Image.BICUBIC)
        pixels = np.asarray(photo, dtype=np.float32) / 255.0  # (H, W, C)
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()  # (C, H, W)
