"""What every plot of the course shares: figure resolution and tensor-to-picture conversion.

Every plotting function takes tensors (never notebook globals) and returns its matplotlib Figure.
Call it before a cell's prints, not as the cell's last line (IPython would draw it twice).
"""

import numpy as np
import torch

DPI = 80  # small figures keep the committed notebooks small


def to_numpy_image(image: torch.Tensor) -> np.ndarray:
    """(C, H, W) tensor in [0, 1] -> (H, W, C) or (H, W) array for imshow."""
    if image.ndim != 3:
        raise ValueError(f"expected one image shaped (C, H, W), got {tuple(image.shape)}")
    array = image.detach().cpu().float().clamp(0, 1).permute(1, 2, 0).numpy()  # (H, W, C)
    return array[..., 0] if array.shape[-1] == 1 else array
