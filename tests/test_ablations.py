"""utils/ablations.py: lesson 6's experiments, defined once, and the results `make experiments`
shipped for them (utils/results/lesson6.json): complete, made by today's recipes, and
reproduced by a rerun."""

import json
import math

import pytest
import torch

import utils.ablations as ablations
from utils.ablations import (
    EXPERIMENTS,
    SEEDS,
    Experiment,
    experiment_data,
    inside_shipped,
    results_table,
    run_experiment,
    shipped_results,
    shipped_runs,
    shipped_values,
    versus,
)
from utils.baselines import DeepCNN, SmallCNN
from utils.experiments import compare
from utils.vit import VisionTransformer

# A rerun on the machine and torch build that made the file gives the very same numbers (one thread,
# budgets in steps). Another CPU may round differently in its vector units, and a few hundred steps
# can turn that into a few images either way: the reproduction tests allow this many.
IMAGES_OF_SLACK = 2


@pytest.fixture(scope="module")
def digits():
    return experiment_data("digits")


def test_the_three_parts_are_disjoint_stratified_and_always_the_same(digits):
    assert [len(part) for part in digits] == [1078, 269, 450]
    again = experiment_data("digits")
    assert all(torch.equal(a.images, b.images) for a, b in zip(digits, again))
    train_rows = {tuple(image.flatten().tolist()) for image in digits.train.images}
    assert not any(tuple(image.flatten().tolist()) in train_rows for image in digits.val.images[:50])
    per_class = digits.val.labels.bincount() / digits.train.labels.bincount()
    assert per_class.min() > 0.2 and per_class.max() < 0.3  # a fifth of each digit, give or take one
    pairs = experiment_data("orientation")
    assert [len(part) for part in pairs] == [3200, 800, 1000]
    assert pairs.val.object_boxes.shape == (800, 2, 4)  # the per-image extras follow the split


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_builds_its_model_and_states_a_budget_in_steps(name):
    experiment = EXPERIMENTS[name]
    model = experiment.build()
    kind = {"vit": VisionTransformer, "small_cnn": SmallCNN, "deep_cnn": DeepCNN}[experiment.model]
    assert isinstance(model, kind)
    assert (
        isinstance(experiment.fit["steps"], int)
        and "time_budget" not in experiment.fit
        and "epochs" not in experiment.fit
    )
    assert json.loads(json.dumps(experiment.as_dict())) == experiment.as_dict()  # plain data, as the file stores it
    if experiment.model == "vit":
        assert model.config == experiment.config and str(experiment.config.patch_size) in str(experiment)


def test_the_small_cnn_has_as_many_parameters_as_the_vit_it_faces():
    for data, vit_name in [("digits", "digits"), ("same_colour", "same colour")]:
        cnn = Experiment(data, "small_cnn", {"steps": 1}).build()
        vit = EXPERIMENTS[vit_name].build()
        count = lambda model: sum(p.numel() for p in model.parameters())  # noqa: E731
        assert abs(count(cnn) - count(vit)) / count(vit) < 0.05


def test_an_experiment_refuses_what_it_cannot_build():
    with pytest.raises(ValueError, match=r"data must be one of \['digits', 'mirrored_colour', 'orientation', "):
        Experiment("cifar", "vit")
    with pytest.raises(ValueError, match=r"model must be one of \('vit', 'small_cnn', 'deep_cnn'\)"):
        Experiment("digits", "resnet")
    with pytest.raises(ValueError, match=r"vit options are for the ViT"):
        Experiment("digits", "deep_cnn", {"steps": 1}, {"pool": "mean"})
    with pytest.raises(TypeError):
        EXPERIMENTS["digits"].fit["steps"] = 1  # read-only: every caller shares it


def test_a_misspelt_experiment_is_named_with_the_closest():
    with pytest.raises(ValueError, match=r"no experiment 'digits 600 steps' \(did you mean 'digits, 600 steps'\?\)"):
        run_experiment("digits 600 steps")
    with pytest.raises(TypeError, match=r"name must be the name of an experiment \(a str\), got 3 \(int\)"):
        shipped_runs(3)
    with pytest.raises(TypeError, match=r"data must be the Split that experiment_data\('digits'\) returns"):
        run_experiment("digits", data=(1, 2, 3))
    with pytest.raises(ValueError, match=r"data must be one of"):
        experiment_data("mnist")


# ---- the shipped results -----------------------------------------------------------------------


def test_the_shipped_file_holds_every_experiment_with_every_seed_and_how_it_was_made():
    results = shipped_results()
    assert list(results["experiments"]) == list(EXPERIMENTS)
    assert results["seeds"] == list(SEEDS) and len(SEEDS) >= 5
    assert results["torch"] == torch.__version__.split("+")[0]  # the pinned torch made them
    assert results["threads"] == 1 and "make experiments" in results["produced_by"]
    for name in EXPERIMENTS:
        runs = shipped_runs(name)  # raises if the stored recipe is not today's
        assert [run["seed"] for run in runs] == list(SEEDS)
        assert {run["steps"] for run in runs} == {EXPERIMENTS[name].fit["steps"]}
        assert all(0 <= run["val_accuracy"] <= 1 and 0 <= run["test_accuracy"] <= 1 for run in runs)
        assert len({run["multiply_adds"] for run in runs}) == 1 and runs[0]["multiply_adds"] > 0


def test_results_of_another_recipe_are_refused(monkeypatch):
    changed = dict(EXPERIMENTS)
    changed["digits"] = Experiment("digits", "vit", {**EXPERIMENTS["digits"].fit, "lr": 1e-4})
    monkeypatch.setattr(ablations, "EXPERIMENTS", changed)
    with pytest.raises(ValueError, match=r"made with another recipe .* run `make experiments` again"):
        shipped_runs("digits")


def test_a_missing_results_file_says_how_to_make_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="make experiments"):
        shipped_results(tmp_path / "nowhere.json")


def test_a_rerun_of_a_shipped_experiment_reproduces_it(digits):
    """The reproduction test: seed 0 of the digits ablation baseline, trained again from scratch
    (600 steps, about 10 s), gives the validation and test accuracy the shipped file stores, to
    within IMAGES_OF_SLACK images (exactly, on the machine and torch build that made the file)."""
    (run,) = run_experiment("digits, 600 steps", [0], data=digits)
    (stored,) = [run for run in shipped_runs("digits, 600 steps") if run["seed"] == 0]
    assert run["val_accuracy"] == pytest.approx(stored["val_accuracy"], abs=IMAGES_OF_SLACK / len(digits.val))
    assert run["test_accuracy"] == pytest.approx(stored["test_accuracy"], abs=IMAGES_OF_SLACK / len(digits.test))
    assert (run["steps"], run["epochs"], run["parameters"], run["multiply_adds"]) == (
        stored["steps"],
        stored["epochs"],
        stored["parameters"],
        stored["multiply_adds"],
    )


def test_inside_shipped_uses_the_range_of_the_seeds_widened_by_the_slack():
    values = shipped_values("orientation, none")
    low, high = min(values), max(values)
    assert inside_shipped("orientation, none", {"val_accuracy": low})
    assert inside_shipped("orientation, none", {"val_accuracy": high})
    assert not inside_shipped("orientation, none", {"val_accuracy": high + 0.01})
    assert inside_shipped("orientation, none", {"val_accuracy": high + 0.01}, slack=0.011)
    with pytest.raises(ValueError, match=r"not 'loss'"):
        shipped_values("orientation, none", "loss")


def test_versus_is_welchs_test_of_the_shipped_seeds():
    verdict = versus("orientation, sincos", "orientation, none", names=("sincos", "none"))
    expected = compare(shipped_values("orientation, sincos"), shipped_values("orientation, none"), percent=True)
    assert verdict.p == expected.p and verdict.difference == expected.difference
    assert str(verdict).startswith("sincos is higher by")


def test_the_results_table_shows_the_run_here_the_shipped_spread_and_the_compute():
    live = {"orientation, none": {"val_accuracy": 0.5}}
    table = results_table({"orientation, none": "none", "orientation, sincos": "sin-cos"}, live).splitlines()
    assert len(table) == 3 and "validation accuracy, shipped seeds 0-4" in table[0]
    assert table[1].split()[:2] == ["none", "50.0%"]
    assert table[2].split()[:3] == ["sin-cos", "not", "run"]
    stored = shipped_runs("orientation, sincos")[0]
    assert f"{stored['multiply_adds'] / 1e6:.2f} M" in table[2] and f"{stored['parameters']:,}" in table[2]
    values = shipped_values("orientation, sincos")
    assert f"range {min(values):.1%}-{max(values):.1%}" in table[2]
    assert math.isclose(sum(values) / len(values), float(table[2].split()[3].rstrip("%")) / 100, abs_tol=0.0005)


def test_the_data_of_another_task_is_refused(digits):
    orientation = experiment_data("orientation")
    with pytest.raises(ValueError, match=r"'same colour' trains on 'same_colour', but data holds the classes"):
        run_experiment("same colour", data=orientation)  # same shapes, another question: it would train silently
    with pytest.raises(ValueError, match=r"pass experiment_data\('digits'\)"):
        run_experiment("digits", data=orientation)
