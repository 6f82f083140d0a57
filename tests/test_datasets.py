"""ImageDataset: a TensorDataset of images and labels that knows its class names."""

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils.datasets import ImageDataset


def test_image_dataset_holds_images_labels_and_class_names():
    images, labels = torch.rand(5, 3, 4, 6), torch.tensor([0, 1, 1, 0, 1])
    dataset = ImageDataset(images, labels, ("cat", "dog"))
    assert isinstance(dataset, TensorDataset) and len(dataset) == 5
    assert dataset.images is images and dataset.labels is labels and dataset.classes == ["cat", "dog"]
    image, label = dataset[2]
    assert torch.equal(image, images[2]) and label == 1
    batch_images, batch_labels = next(iter(DataLoader(dataset, batch_size=4)))
    assert batch_images.shape == (4, 3, 4, 6) and batch_labels.tolist() == [0, 1, 1, 0]
    assert repr(dataset) == "ImageDataset(5 images of (3, 4, 6), classes=['cat', 'dog'])"


@pytest.mark.parametrize(
    "images, labels",
    [
        (torch.zeros(3, 8, 8), torch.zeros(3, dtype=torch.long)),  # no channel axis
        (torch.zeros(3, 1, 8, 8), torch.zeros(4, dtype=torch.long)),  # one label too many
        (torch.zeros(3, 1, 8, 8), torch.zeros(3, 1, dtype=torch.long)),  # labels not (N,)
    ],
)
def test_image_dataset_rejects_mismatched_shapes(images, labels):
    with pytest.raises(ValueError, match=r"expected images \(N, C, H, W\) and labels \(N,\), got"):
        ImageDataset(images, labels, ["a"])
