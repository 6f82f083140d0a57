"""The tiny ViTs shipped in utils/checkpoints load safely and reach their stated accuracy."""

import pytest
import torch

from utils.data import load_training_set
from utils.trained import CHECKPOINT_DIR, RECIPES, load_trained
from utils.training import evaluate


@pytest.mark.parametrize("name, floor", [("digits", 0.97), ("relational", 0.98)])
def test_shipped_model_reaches_its_stated_accuracy(name, floor):
    model, info = load_trained(name)
    data_options, config, _ = RECIPES[name]
    _, test = load_training_set(**data_options)
    _, accuracy = evaluate(model, test)
    assert accuracy == pytest.approx(info["test_accuracy"], abs=0.005)
    assert accuracy >= floor
    assert model.config == config and not model.training
    assert info["classes"] == test.classes


@pytest.mark.parametrize("name", ["digits", "relational"])
def test_checkpoint_is_small_weights_only_and_holds_position_snapshots(name):
    path = CHECKPOINT_DIR / f"{name}.pt"
    assert path.stat().st_size < 5_000_000
    checkpoint = torch.load(path, weights_only=True)  # plain tensors, lists and numbers only
    snapshots = checkpoint["pos_embed_snapshots"]
    assert snapshots["steps"][0] == 0 and snapshots["steps"] == sorted(snapshots["steps"])
    assert len(snapshots["tables"]) == len(snapshots["steps"]) >= 10
    assert snapshots["tables"][0].shape == checkpoint["state_dict"]["pos_embed"].shape
    assert torch.equal(snapshots["tables"][-1], checkpoint["state_dict"]["pos_embed"])  # the last is the end


def test_unknown_model_is_named():
    with pytest.raises(ValueError, match="expected one of \\['digits', 'relational'\\]"):
        load_trained("imagenet")
