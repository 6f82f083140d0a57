"""tools/train_checkpoints.py (`make checkpoints`): its recipes made the shipped checkpoints, and it
writes files that utils.weights.load_trained reads."""

import re
import shutil

import pytest
import torch
from notebook_cells import ROOT

import tools.train_checkpoints as train_checkpoints
from tools.train_checkpoints import RECIPES, main, train_shipped
from utils.data import load_training_set
from utils.training import History, evaluate
from utils.vit import ViTConfig
from utils.weights import CHECKPOINT_DIR, load_trained, shipped_models


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
    assert re.fullmatch(r"quick: test accuracy 0\.\d{4} after 11 steps, \d+ s; written\n", capsys.readouterr().out)
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
    names = ["digits", "digits_seed1", "digits_seed2", "orientation", "orientation_seed1", "orientation_seed2"]
    names += ["relational", "relational_fine", "relational_seed1", "relational_seed2"]
    with pytest.raises(ValueError, match=re.escape(f"no recipe 'imagenet'; expected one of {names}")):
        train_shipped("imagenet")
    with pytest.raises(SystemExit):
        main(["imagenet"])
    assert "no recipe imagenet" in capsys.readouterr().err


def test_make_checkpoints_runs_this_script():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^checkpoints:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/train_checkpoints.py" in recipe[1]


# ---- a file that is there is compared, kept, or replaced with --force and a backup ----------------


@pytest.fixture
def no_training(monkeypatch):
    """fit skipped: the model keeps its initial weights, as a run on another machine would differ (minutes later)."""
    monkeypatch.setattr(train_checkpoints, "fit", lambda model, train, *args, **kwargs: History(step=[1]))


@pytest.fixture
def shipped_digits(tmp_path):
    """A copy of the shipped digits.pt in tmp_path, and its bytes."""
    shutil.copy(CHECKPOINT_DIR / "digits.pt", tmp_path / "digits.pt")
    return (tmp_path / "digits.pt").read_bytes()


def test_a_checkpoint_that_differs_is_left_as_it_was_without_force(no_training, shipped_digits, tmp_path, capsys):
    """D2: main(['digits']) replaced utils/checkpoints/digits.pt at once, no prompt, no backup."""
    with pytest.raises(SystemExit) as stopped:
        main(["digits", "--checkpoint-dir", str(tmp_path)])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    shipped = load_trained("digits")[1]["test_accuracy"]
    assert re.search(
        rf"digits\.pt exists and differs from this run \(test accuracy {shipped:.4f} in the file, 0\.\d{{4}} in this "
        r"run; weights differ by up to [\d.e+-]+\): use --force to replace it \(the old file is then kept as "
        r"digits\.pt\.bak\)",
        err,
    ), err
    assert "rerun with --force" in err
    assert (tmp_path / "digits.pt").read_bytes() == shipped_digits
    assert sorted(path.name for path in tmp_path.iterdir()) == ["digits.pt"]


def test_force_replaces_a_checkpoint_that_differs_and_keeps_a_backup(no_training, shipped_digits, tmp_path, capsys):
    main(["digits", "--checkpoint-dir", str(tmp_path), "--force"])
    assert re.search(r"digits: .*; replaced; the old file is kept as .*digits\.pt\.bak\n", capsys.readouterr().out)
    assert (tmp_path / "digits.pt.bak").read_bytes() == shipped_digits
    model, info = load_trained("digits", tmp_path)
    assert info["pos_embed_snapshots"]["steps"] == [] and info["test_accuracy"] < 0.5  # the untrained run
    assert not torch.equal(model.pos_embed, load_trained("digits")[0].pos_embed)


def test_a_rerun_that_gives_the_same_checkpoint_leaves_the_file_untouched(quick_recipe, tmp_path, capsys):
    main(["quick", "--checkpoint-dir", str(tmp_path)])
    path = tmp_path / "quick.pt"
    before = path.stat().st_mtime_ns, path.read_bytes()
    main(["quick", "--checkpoint-dir", str(tmp_path), "--force"])
    assert capsys.readouterr().out.splitlines()[-1].endswith("; the file there holds this very run: left as it was")
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quick.pt"]  # no backup of an identical file


@pytest.fixture
def no_fit(monkeypatch):
    """fit fails the test: what is checked before training must stop the run before it."""
    monkeypatch.setattr(train_checkpoints, "fit", lambda *args, **kwargs: pytest.fail("trained before checking"))


def test_a_checkpoint_dir_that_is_a_file_stops_the_run_before_training(no_fit, tmp_path, capsys):
    """Obscure: --checkpoint-dir a_file failed with FileExistsError only after the training."""
    (tmp_path / "a_file").write_text("notes")
    for folder, says in [
        (tmp_path / "a_file", r"checkpoint folder .*a_file is not a folder: name a folder"),
        (tmp_path / "a_file" / "sub", r"checkpoint folder .*sub is not a folder \(it lies in .*a_file, a file\)"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            main(["digits", "--checkpoint-dir", str(folder)])
        assert stopped.value.code == 2
        assert re.search(says, capsys.readouterr().err)
        with pytest.raises(ValueError, match=says):
            train_shipped("digits", checkpoint_dir=folder)


def test_a_checkpoint_that_is_a_link_or_a_folder_stops_the_run_before_training(no_fit, tmp_path, capsys):
    (tmp_path / "digits.pt").symlink_to(CHECKPOINT_DIR / "digits.pt")
    (tmp_path / "relational.pt").mkdir()
    for name, kind in [("digits", "a symbolic link"), ("relational", "a folder")]:
        with pytest.raises(SystemExit):
            main([name, "--checkpoint-dir", str(tmp_path), "--force"])
        assert f"{name}.pt is {kind}, not a checkpoint file" in capsys.readouterr().err


def test_help_only_prints_and_an_unknown_flag_is_an_error(no_fit, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--help"])
    assert stopped.value.code == 0 and "--force" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stopped:
        main(["digits", "--forse"])
    assert stopped.value.code == 2 and "unrecognized arguments: --forse" in capsys.readouterr().err


def test_the_extra_seeds_are_the_first_recipes_on_one_thread():
    """Lesson 7 measures the position tables over seeds: seeds 1 and 2 of the digits and relational
    recipes, changed only in running on one thread (so that a rerun gives the same weights)."""
    for name in ("digits", "relational"):
        data, config, fit_options = RECIPES[name]
        for seed in (1, 2):
            extra = f"{name}_seed{seed}"
            assert RECIPES[extra][:2] == (data, config), extra
            assert RECIPES[extra][2] == {**fit_options, "threads": 1}, extra
            assert train_checkpoints.RECIPE_SEEDS[extra] == seed


@pytest.mark.parametrize("name", ["orientation", "orientation_seed1", "orientation_seed2"])
def test_the_orientation_models_are_lesson_6s_task_and_reach_their_stated_accuracy(name):
    model, info = load_trained(name)
    data_options, config, fit_options = RECIPES[name]
    assert data_options == dict(name="relational", task="orientation")
    assert model.config == config and config.patch_size == 8
    assert fit_options["steps"] == 1200 and fit_options["lr"] == 1e-3
    _, test = load_training_set(**data_options)
    assert info["classes"] == test.classes
    _, accuracy = evaluate(model, test)
    assert accuracy == pytest.approx(info["test_accuracy"], abs=0.005)
    assert accuracy >= 0.9


def test_main_gives_each_recipe_its_seed(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(
        train_checkpoints, "train_shipped", lambda name, seed, **_: seen.append((name, seed)) or (None, _info())
    )
    main(["orientation_seed2", "digits", "--checkpoint-dir", str(tmp_path)])
    assert seen == [("orientation_seed2", 2), ("digits", 0)]


def _info():
    return {"test_accuracy": 1.0, "steps": 1, "file": "new", "backup": None}
