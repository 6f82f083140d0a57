"""tools/train_checkpoints.py (`make checkpoints`): its recipes made the shipped checkpoints, and it
writes files that utils.weights.load_trained reads."""

import re

import pytest
import torch
from lessons import ROOT

import tools.train_checkpoints as train_checkpoints
from tools.train_checkpoints import RECIPES, main, train_shipped
from utils.data import load_training_set
from utils.training import evaluate
from utils.vit import ViTConfig
from utils.weights import load_trained, shipped_models


@pytest.mark.reproduction
@pytest.mark.parametrize("name, floor", [("digits", 0.97), ("relational", 0.98), ("relational_fine", 0.98)])
def test_shipped_model_is_its_recipe_and_reaches_its_stated_accuracy(name, floor):
    model, info = load_trained(name)
    data_options, config, _ = RECIPES[name]
    _, test = load_training_set(**data_options)
    _, accuracy = evaluate(model, test)
    assert accuracy == pytest.approx(info["test_accuracy"], abs=0.005)
    assert accuracy >= floor
    assert model.config == config
    assert info["classes"] == test.classes


def test_every_recipe_is_shipped():
    assert sorted(RECIPES) == shipped_models()


def test_the_first_recipes_decay_every_parameter_as_when_the_shipped_files_were_trained():
    """Without it fit keeps biases, norms and positions out of the decay, and a rerun would not
    give the shipped weights (tests/test_training.py checks that it is fit's old loop)."""
    for name in ("digits", "relational"):
        assert RECIPES[name][2].get("decay_everything") is True, name


def test_the_fine_recipe_uses_fits_defaults_on_an_8_by_8_grid():
    """relational_fine came after fit's parameter groups and its one thread: it keeps both (a rerun
    on any machine gives its weights), and a fixed number of epochs."""
    data_options, config, fit_options = RECIPES["relational_fine"]
    assert "decay_everything" not in fit_options and "threads" not in fit_options
    assert isinstance(fit_options["epochs"], int) and "time_budget" not in fit_options
    assert data_options == RECIPES["relational"][0]  # the same task as the 4 x 4 model
    assert (config.image_size, config.patch_size, config.num_tokens) == (32, 4, 65)


@pytest.fixture
def quick_recipe(monkeypatch):
    """A one-epoch recipe on the digits, "quick", in place of the real ones."""
    recipe = (
        dict(name="digits"),
        ViTConfig.tiny(image_size=8, patch_size=2, in_channels=1, num_classes=10, depth=1),
        dict(epochs=1, lr=3e-3, snapshot_every=5),
    )
    monkeypatch.setattr(train_checkpoints, "RECIPES", {"quick": recipe})
    return recipe


def test_main_trains_and_writes_what_load_trained_reads(quick_recipe, tmp_path, capsys):
    main(["quick", "--checkpoint-dir", str(tmp_path)])
    assert re.fullmatch(r"quick: test accuracy 0\.\d{4} after 11 steps, \d+ s\n", capsys.readouterr().out)
    model, info = load_trained("quick", checkpoint_dir=tmp_path)
    assert model.config == quick_recipe[1]
    assert info["pos_embed_snapshots"]["steps"] == [0, 5, 10, 11]
    _, test = load_training_set("digits")
    assert evaluate(model, test)[1] == info["test_accuracy"]


def test_training_is_reproducible(quick_recipe, tmp_path):
    first, _ = train_shipped("quick", checkpoint_dir=tmp_path / "a")
    second, _ = train_shipped("quick", checkpoint_dir=tmp_path / "b")
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), name


def test_an_unknown_recipe_is_named(capsys):
    with pytest.raises(
        ValueError, match=r"no recipe 'imagenet'; expected one of \['digits', 'relational', 'relational_fine'\]"
    ):
        train_shipped("imagenet")
    with pytest.raises(SystemExit):
        main(["imagenet"])
    assert "no recipe imagenet" in capsys.readouterr().err


def test_make_checkpoints_runs_this_script():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^checkpoints:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/train_checkpoints.py" in recipe[1]
