"""utils/ablations.py: lesson 6's experiments, defined once, and the results `make experiments`
shipped for them (utils/results/lesson6.json): complete, made by today's recipes, and
reproduced by a rerun."""

import hashlib
import json
import math

import pytest
import torch

import utils.ablations as ablations
from utils.ablations import (
    EXPERIMENTS,
    IMAGES_OF_SLACK,
    SEEDS,
    Agreement,
    Experiment,
    Split,
    agreement,
    agrees_with_shipped,
    experiment_data,
    made_here,
    results_table,
    run_experiment,
    shipped_results,
    shipped_runs,
    shipped_values,
    versus,
)
from utils.baselines import DeepCNN, SmallCNN
from utils.experiments import compare, prediction_interval
from utils.runtime import cpu_kind
from utils.vit import VisionTransformer


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


@pytest.mark.reproduction
def test_a_rerun_of_a_shipped_experiment_reproduces_it(digits):
    """The reproduction test: seed 0 of the digits ablation baseline, trained again from scratch
    (600 steps, about 10 s). On the kind of CPU that made the file (made_here) it gives the stored
    accuracies bit for bit; on another kind it must land where one more seed would."""
    (run,) = run_experiment("digits, 600 steps", [0], data=digits)
    (stored,) = [run for run in shipped_runs("digits, 600 steps") if run["seed"] == 0]
    for key in ("val_accuracy", "test_accuracy"):
        agrees = agrees_with_shipped("digits, 600 steps", run, digits, key)
        assert agrees, str(agrees)
        assert agrees.exact == made_here(name="digits, 600 steps")
    if made_here(name="digits, 600 steps"):
        assert (run["val_accuracy"], run["test_accuracy"]) == (stored["val_accuracy"], stored["test_accuracy"])
    assert (run["steps"], run["epochs"], run["parameters"], run["multiply_adds"]) == (
        stored["steps"],
        stored["epochs"],
        stored["parameters"],
        stored["multiply_adds"],
    )


def test_the_shipped_files_say_which_kind_of_cpu_made_them():
    results = shipped_results()
    assert results["cpu"] and results["torch"] == "2.13.0" and results["threads"] == 1
    assert made_here() == (results["cpu"] == cpu_kind())  # the pinned torch: the CPU kind decides
    kinds = {entry.get("cpu", results["cpu"]) for entry in results["experiments"].values()}
    if len(kinds) > 1:  # experiments run on several kinds: each says its own, the file says "mixed"
        assert results["cpu"] == "mixed: " + " and ".join(sorted(kinds))
    for name, entry in results["experiments"].items():
        assert made_here(name=name) == (entry.get("cpu", results["cpu"]) == cpu_kind()), name


def test_on_the_cpu_that_made_the_file_only_the_same_number_agrees():
    exact = agreement(0.97, stored=0.97, seeds=[0.95, 0.97, 0.99], exact=True, images=100)
    assert exact and exact.low == exact.high == 0.97 and "the same as the shipped run" in str(exact)
    off_by_one = agreement(0.96, stored=0.97, seeds=[0.95, 0.97, 0.99], exact=True, images=100)
    assert not off_by_one and "NOT the same" in str(off_by_one)


def test_on_another_cpu_a_run_agrees_where_one_more_seed_would_land():
    seeds = [0.95, 0.96, 0.97, 0.98, 0.99]  # mean 0.97, sd 0.0158
    low, high = prediction_interval(seeds, percent=True)
    inside = agreement(0.90, stored=0.95, seeds=seeds, exact=False, images=200)
    assert inside.low == pytest.approx(low - IMAGES_OF_SLACK / 200) and inside.high == 1.0
    assert inside and "inside" in str(inside) and "another kind of CPU" in str(inside)
    assert 0.88 < inside.low < 0.90  # 0.97 - 4.60 * 0.0158 * sqrt(1.2) - 0.01
    outside = agreement(0.85, stored=0.95, seeds=seeds, exact=False, images=200)
    assert not outside and "OUTSIDE" in str(outside)
    # all seeds alike (100 % every time): a couple of images either way still agree, no more
    same = [1.0] * 5
    assert agreement(0.99, 1.0, same, exact=False, images=200) and not agreement(0.98, 1.0, same, False, images=200)
    # a number that is no accuracy: the bare prediction interval, shown as a number
    growth = agreement(2.5, stored=2.0, seeds=[1.9, 2.0, 2.1, 2.0, 2.2], exact=False)
    assert isinstance(growth, Agreement) and not growth.percent and growth and "2.5," in str(growth)


def test_agrees_with_shipped_names_what_it_needs(digits):
    with pytest.raises(ValueError, match="'seed'"):
        agrees_with_shipped("digits, 600 steps", {"val_accuracy": 0.9}, digits)
    with pytest.raises(ValueError, match="seed 7"):
        agrees_with_shipped("digits, 600 steps", {"seed": 7, "val_accuracy": 0.9}, digits)
    with pytest.raises(TypeError, match="Split"):
        agrees_with_shipped("digits, 600 steps", {"seed": 0, "val_accuracy": 0.9}, digits.val)
    with pytest.raises(ValueError, match="no experiment"):
        agrees_with_shipped("digits, 601 steps", {"seed": 0, "val_accuracy": 0.9}, digits)


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
    with pytest.raises(
        ValueError, match=r"'same colour' trains on experiment_data\('same_colour'\) \(classes .*\), but data"
    ):
        run_experiment("same colour", data=orientation)  # same shapes, another question: it would train silently
    with pytest.raises(ValueError, match=r"pass experiment_data\('digits'\)"):
        run_experiment("digits", data=orientation)


# ---- refused inputs and damaged files (review findings S1-S4, obscure 1-3) ----------------------


def canonical_sha256(experiments: dict) -> str:
    """The checksum recomputed here, independently of the library: sha256 of the sorted, compact JSON."""
    text = json.dumps(experiments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


SHIPPED = ablations.RESULTS_FILE  # lesson6.json, even where a test sets ablations.RESULTS_FILE elsewhere


def copy_of_shipped(tmp_path, change=None, name="lesson6.json"):
    """A copy of lesson6.json in tmp_path, changed by change(results) if given (checksum kept)."""
    results = json.loads(SHIPPED.read_text())
    if change:
        change(results)
    path = tmp_path / name
    path.write_text(json.dumps(results, indent=1))
    return path


def test_agrees_with_shipped_refuses_the_data_of_another_experiment(digits):
    """S1: 'digits' held to the split of "same colour?" used 800 validation images for its slack."""
    pairs = experiment_data("same_colour")
    with pytest.raises(ValueError, match=r"'digits' is measured on experiment_data\('digits'\)") as refused:
        agrees_with_shipped("digits", dict(shipped_runs("digits")[0]), pairs)
    assert "['different colours', 'same colour']" in str(refused.value)
    part = Split(digits.train, digits.val.subset(range(100)), digits.test)  # a part cut short
    with pytest.raises(ValueError, match=r"data.val holds 100 images, not the 269 of experiment_data\('digits'\)"):
        agrees_with_shipped("digits", dict(shipped_runs("digits")[0]), part)


def test_a_percentage_is_refused_where_a_fraction_is_expected(digits):
    """S2: 97.0 (a percentage) was taken as 9700 %."""
    with pytest.raises(
        ValueError, match=r"run\['val_accuracy'\] must be a fraction from 0 to 1, got 97.0: divide by 100"
    ):
        agrees_with_shipped("digits", {"seed": 0, "val_accuracy": 97.0}, digits)
    with pytest.raises(ValueError, match=r"run\['test_accuracy'\] must be a number"):
        agrees_with_shipped("digits", {"seed": 0, "test_accuracy": "0.9"}, digits, "test_accuracy")
    with pytest.raises(ValueError, match=r"run\['seed'\] must be a whole number"):
        agrees_with_shipped("digits", {"seed": 0.5, "val_accuracy": 0.9}, digits)
    with pytest.raises(ValueError, match=r"value must be a fraction from 0 to 1, got 97.0: divide by 100"):
        agreement(97.0, 0.97, [0.95, 0.97, 0.99], exact=False, images=100)
    with pytest.raises(ValueError, match=r"live\['orientation, none'\]\['val_accuracy'\] must be a fraction"):
        results_table({"orientation, none": "none"}, {"orientation, none": {"val_accuracy": 50.0}})


def test_the_shipped_files_carry_the_checksum_of_their_experiments():
    for name in ("lesson6.json", "lesson9.json", "lesson5.json"):
        path = ablations.RESULTS_FILE.with_name(name)
        stored = json.loads(path.read_text())
        assert stored["experiments_sha256"] == canonical_sha256(stored["experiments"]), path
        assert shipped_results(path) == stored


def test_a_changed_results_file_is_refused_with_how_to_restore_it(tmp_path, monkeypatch):
    """S3: seed 3 set to 0.5 by hand moved the lesson's spreads and verdicts without a word."""

    def edit(results):
        results["experiments"]["digits"]["runs"][3]["val_accuracy"] = 0.5

    path = copy_of_shipped(tmp_path, edit, "results.json")
    with pytest.raises(ValueError, match=r"results.json was changed after it was written \(checksum differs\)"):
        shipped_results(path)
    monkeypatch.setattr(ablations, "RESULTS_FILE", tmp_path / "lesson6.json")  # as if it were the shipped file
    path = copy_of_shipped(tmp_path, edit)
    with pytest.raises(ValueError, match=r"restore it with git checkout .*lesson6.json, or run make experiments"):
        shipped_results(path)

    def unsigned(results):
        del results["experiments_sha256"]

    with pytest.raises(ValueError, match=r"holds no checksum"):
        shipped_results(copy_of_shipped(tmp_path, unsigned, "unsigned.json"))


def test_a_rewritten_results_file_is_read_again(tmp_path):
    """S4: the results were cached per path forever; a file rewritten (by make experiments) is read again."""
    results = json.loads(ablations.RESULTS_FILE.read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert shipped_results(path)["experiments"]["digits"]["runs"][0]["val_accuracy"] != 0.123
    results["experiments"]["digits"]["runs"][0]["val_accuracy"] = 0.123
    results["experiments_sha256"] = canonical_sha256(results["experiments"])
    path.write_text(json.dumps(results))
    assert shipped_results(path)["experiments"]["digits"]["runs"][0]["val_accuracy"] == 0.123


def test_a_results_file_that_is_no_json_names_the_file_and_the_fix(tmp_path):
    """Obscure 1: a file cut off gave a bare JSONDecodeError."""
    path = tmp_path / "results.json"
    path.write_text(ablations.RESULTS_FILE.read_text()[:5000])
    with pytest.raises(
        ValueError, match=r"results.json is not valid JSON \(cut off or edited\? .*line \d+, column \d+\)"
    ):
        shipped_results(path)


@pytest.mark.parametrize(
    "change, words",
    [
        (
            lambda r: r["experiments"]["digits"]["runs"][0].pop("seed"),
            r"run 0 of 'digits' has no 'seed' \(expected seed, ",
        ),
        (lambda r: r["experiments"]["digits"].update(runs=[]), r"'digits' holds no runs"),
        (lambda r: r.pop("experiments"), r"has no 'experiments'"),
        (lambda r: r.pop("seeds"), r"has no 'seeds'"),
        (
            lambda r: r["experiments"]["digits"]["runs"][2].update(val_accuracy=float("nan")),
            r"seed 2 of 'digits' has val_accuracy nan; the file holds accuracies from 0 to 1",
        ),
        (
            lambda r: r["experiments"]["digits"]["runs"][2].update(test_accuracy="0.9"),
            r"seed 2 of 'digits' has test_accuracy '0.9'",
        ),
        (lambda r: r["experiments"]["digits"]["runs"][1].update(seed=0), r"'digits' holds seed 0 twice"),
    ],
)
def test_a_results_file_missing_keys_or_holding_no_accuracy_says_what_is_wrong(tmp_path, change, words):
    """Obscure 2, 3: a KeyError, an IndexError, or an error about an argument `a` nobody passed."""
    path = copy_of_shipped(tmp_path, change, "results.json")
    with pytest.raises(ValueError, match=words) as refused:
        shipped_results(path)
    assert str(path) in str(refused.value) and "remove it" in str(refused.value)


# ---- the magnitude-matched position arms, the CNNs' reach, the rubric on shipped results -------


def test_pos_norm_scales_the_position_table_to_the_other_kinds_magnitude():
    from utils import set_seed
    from utils.ablations import LEARNED_ROW_NORM, SINCOS_ROW_NORM

    set_seed(0)
    learned = EXPERIMENTS["orientation, learned"].build().pos_embed.detach()
    sincos = EXPERIMENTS["orientation, sincos"].build().pos_embed
    assert learned[0, 1:].norm(dim=-1).mean().item() == pytest.approx(LEARNED_ROW_NORM, abs=0.005)
    assert sincos[0, 1:].norm(dim=-1).mean().item() == pytest.approx(SINCOS_ROW_NORM, abs=0.005)
    small = EXPERIMENTS["orientation, sincos, norm 0.14"].build().pos_embed  # still a fixed buffer
    assert not isinstance(small, torch.nn.Parameter)
    torch.testing.assert_close(small, sincos * 0.14 / sincos[0, 1:].norm(dim=-1).mean())
    set_seed(0)
    large = EXPERIMENTS["orientation, learned, norm 5.66"].build().pos_embed  # the same draw, scaled
    assert isinstance(large, torch.nn.Parameter)
    torch.testing.assert_close(large.detach(), learned * 5.66 / learned[0, 1:].norm(dim=-1).mean())
    assert "pos_norm" not in EXPERIMENTS["orientation, learned"].as_dict()  # the other recipes unchanged
    assert EXPERIMENTS["orientation, learned, norm 5.66"].as_dict()["pos_norm"] == 5.66
    with pytest.raises(ValueError, match=r"pos_norm scales a ViT's position table"):
        Experiment("orientation", "vit", {"steps": 1}, {"pos_embed": "none"}, pos_norm=1.0)
    with pytest.raises(ValueError, match=r"pos_norm must be"):
        Experiment("orientation", "vit", {"steps": 1}, pos_norm=-1.0)


def test_accuracy_by_reach_splits_the_test_set_by_the_cnns_windows():
    from utils.ablations import accuracy_by_reach
    from utils.baselines import objects_in_one_window
    from utils.training import predict

    pairs = experiment_data("same_colour")
    cnn = EXPERIMENTS["same colour, SmallCNN"].build()
    found = accuracy_by_reach(cnn, pairs.test)
    together = objects_in_one_window(pairs.test, cnn.receptive_field)
    right = (predict(cnn, pairs.test.images) == pairs.test.labels).float()
    assert found["in_reach"] == int(together.sum()) == 697
    assert found["accuracy_in_reach"] == pytest.approx(right[together].mean().item())
    assert found["accuracy_out_of_reach"] == pytest.approx(right[~together].mean().item())
    deep = accuracy_by_reach(EXPERIMENTS["same colour, DeepCNN"].build(), pairs.test)
    assert deep["in_reach"] == 1000 and deep["accuracy_out_of_reach"] is None
    with pytest.raises(TypeError, match="receptive_field"):
        accuracy_by_reach(EXPERIMENTS["same colour"].build(), pairs.test)


def test_the_shipped_small_cnn_runs_hold_their_reach_and_training_accuracy():
    for run in shipped_runs("same colour, SmallCNN"):
        assert run["in_reach"] == 697 and 0 <= run["train_accuracy"] <= 1
        whole = (run["in_reach"] * run["accuracy_in_reach"] + 303 * run["accuracy_out_of_reach"]) / 1000
        assert whole == pytest.approx(run["test_accuracy"], abs=1e-6)


def test_grade_shipped_is_the_rubric_on_the_shipped_values():
    from utils.ablations import grade_shipped
    from utils.rubric import grade_family

    family = {
        "x": dict(a="orientation, sincos", b="orientation, learned", claim="higher", effect=0.02),
        "y": dict(a="orientation, learned", b="orientation, none", claim="higher", effect=0.02, names=("l", "n")),
    }
    found = grade_shipped(family)
    values = {
        label: dict(options, a=shipped_values(options["a"]), b=shipped_values(options["b"]), percent=True)
        for label, options in family.items()
    }
    values["x"]["names"] = ("orientation, sincos", "orientation, learned")
    expected = grade_family(values)
    assert {k: str(v) for k, v in found.items()} == {k: str(v) for k, v in expected.items()}
    assert found["y"].names == ("l", "n") and found["x"].family == 2
    with pytest.raises(ValueError, match=r"family\['z'\] must be a dict with a, b, claim and effect"):
        grade_shipped({"z": dict(a="orientation, sincos")})
