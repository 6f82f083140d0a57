"""The bundled sample image."""

import pytest
import torch

from utils.data import load_sample_image


def test_sample_image_default():
    image = load_sample_image()
    assert image.shape == (3, 224, 224)
    assert image.dtype == torch.float32
    assert image.min() >= 0 and image.max() <= 1
    assert image.std() > 0.05  # a photo, not a constant
    assert image.max() - image.min() > 0.5
    assert not torch.equal(image[0], image[2])  # colour channels differ: RGB, not gray copies
    assert image.is_contiguous()


@pytest.mark.parametrize("size", [64, 32])
def test_sample_image_size(size):
    image = load_sample_image(size)
    assert image.shape == (3, size, size)
    assert image.dtype == torch.float32
    assert image.min() >= 0 and image.max() <= 1
    assert image.std() > 0.05


def test_sample_image_is_the_same_every_time():
    assert torch.equal(load_sample_image(64), load_sample_image(64))
