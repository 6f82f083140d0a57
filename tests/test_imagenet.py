"""utils.imagenet: the class list is ImageNet-1k's, in the checkpoints' order; normalize and top_k
do what the published ViT-B/16's preprocessing and a softmax do, and refuse the wrong shapes."""

import pytest
import torch

from utils.imagenet import imagenet_classes, imagenet_synsets, normalize, top_k


def test_the_class_list_is_imagenet_1k_in_the_checkpoints_order():
    synsets = imagenet_synsets()
    ids = [synset for synset, _ in synsets]
    assert len(ids) == len(set(ids)) == 1000 and ids == sorted(ids)  # class index = rank of the WordNet id
    classes = imagenet_classes()
    # well-known indices of ImageNet-1k (the order every ImageNet-1k checkpoint's head uses)
    known = {
        0: "tench",
        1: "goldfish",
        281: "tabby",
        285: "Egyptian cat",
        652: "military uniform",
        967: "espresso",
        999: "toilet tissue",
    }
    assert {index: classes[index] for index in known} == known
    assert synsets[281] == ("n02123045", "tabby, tabby cat")


def test_normalize_maps_zero_to_minus_one_and_one_to_one_per_channel():
    images = torch.stack([torch.zeros(3, 2, 2), torch.ones(3, 2, 2), torch.full((3, 2, 2), 0.25)])
    out = normalize(images)
    assert torch.equal(out[0], -torch.ones(3, 2, 2)) and torch.equal(out[1], torch.ones(3, 2, 2))
    assert torch.allclose(out[2], torch.full((3, 2, 2), -0.5))
    other = normalize(images, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    assert torch.allclose(other[1, 2], torch.full((2, 2), (1 - 0.406) / 0.225))
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        normalize(torch.rand(3, 8, 8))


def test_top_k_gives_the_most_probable_classes_with_softmax_probabilities():
    classes = [f"class {i}" for i in range(6)]
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, 0.0, -1.0], [5.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    answers = top_k(logits, classes, k=3)
    probabilities = logits.softmax(dim=-1)
    assert [name for name, _ in answers[0]] == ["class 1", "class 3", "class 2"]
    assert answers[0][0][1] == pytest.approx(probabilities[0, 1].item())
    assert answers[1][0] == ("class 0", pytest.approx(probabilities[1, 0].item()))
    with pytest.raises(ValueError, match=r"\(B, 6\)"):
        top_k(torch.rand(2, 5), classes)
