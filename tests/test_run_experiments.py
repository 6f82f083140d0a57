"""tools/run_experiments.py (`make experiments`): runs lesson 6's experiments over the seeds in
worker processes and merges them into the shipped results file."""

import dataclasses
import hashlib
import json
import re
import threading
import time

import pytest
from notebook_cells import ROOT

import tools.run_experiments as R
from tools.run_experiments import main, run_all, write
from utils.ablations import (
    CHECKSUM_KEY,
    EXPERIMENTS,
    RESULTS_FILE,
    SEEDS,
    agrees_with_shipped,
    environment,
    experiment_data,
    experiments_checksum,
    made_here,
    shipped_results,
    shipped_runs,
)
from utils.claims import TRIALS
from utils.files import locked


@pytest.mark.reproduction
def test_a_worker_process_reproduces_a_shipped_run():
    """The cheapest experiment (a DeepCNN on the digits, 600 steps, a few seconds) run as `make
    experiments` runs it, in a worker process: the shipped seed-0 numbers again."""
    name = "digits, 600 steps, DeepCNN"
    (run,) = run_all([name], [0], workers=1, log=lambda line: None)[name]
    stored = shipped_runs(name)[0]
    assert stored["seed"] == run["seed"] == 0
    digits = experiment_data("digits")
    for key in ("val_accuracy", "test_accuracy"):  # exactly, on the kind of CPU that made the file
        agrees = agrees_with_shipped(name, run, digits, key)
        assert agrees and agrees.exact == made_here(name=name), str(agrees)
    assert run["steps"] == stored["steps"] == 600


def test_write_merges_into_the_file_and_keeps_the_experiments_order(tmp_path):
    path = tmp_path / "results.json"
    shipped = shipped_results()
    path.write_text(json.dumps(shipped))
    fake = [{**run, "val_accuracy": 0.5} for run in shipped_runs("digits")]
    write(path, {"digits": fake})
    written = json.loads(path.read_text())
    assert list(written["experiments"]) == list(EXPERIMENTS)  # the order kept
    assert written["experiments"]["digits"]["runs"] == fake
    assert written["experiments"]["digits"]["recipe"] == EXPERIMENTS["digits"].as_dict()
    assert written["experiments"]["same colour"] == shipped["experiments"]["same colour"]  # untouched
    assert written["seeds"] == list(SEEDS) and not list(tmp_path.glob("*.partial"))


def test_write_says_when_one_file_holds_runs_of_two_kinds_of_cpu(tmp_path):
    """Each experiment records the kind of CPU that ran it (made_here asks it); the file's own "cpu"
    then says "mixed: A and B", once, however many merges follow."""
    path = tmp_path / "results.json"
    shipped = shipped_results()
    experiments = {
        name: {key: value for key, value in entry.items() if key != "cpu"}
        for name, entry in shipped["experiments"].items()
    }  # a file from before experiments recorded their kind
    old_file = {**shipped, "experiments": experiments, "cpu": "another processor, torch AVX2"}
    path.write_text(json.dumps({**old_file, CHECKSUM_KEY: experiments_checksum(experiments)}))
    here = environment()["cpu"]
    mixed = "mixed: " + " and ".join(sorted(["another processor, torch AVX2", here]))
    fake = [{**run, "val_accuracy": 0.5} for run in shipped_runs("digits")]
    written = write(path, {"digits": fake})
    assert written["cpu"] == mixed
    assert written["experiments"]["digits"]["cpu"] == here
    assert written["experiments"]["same colour"]["cpu"] == "another processor, torch AVX2"
    assert write(path, {"same colour": shipped_runs("same colour")})["cpu"] == mixed  # no "mixed: mixed:"
    everything = {name: shipped_runs(name) for name in EXPERIMENTS}
    assert write(path, everything)["cpu"] == here  # every run made here: one kind again


def test_an_unknown_experiment_or_no_worker_is_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit):
        main(["imagenet"])
    assert "no experiment 'imagenet'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["digits", "--workers", "0"])
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_make_experiments_runs_this_script():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^experiments:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/run_experiments.py" in recipe[1]


@pytest.mark.reproduction
def test_the_claims_suite_runs_lesson_9s_trials_into_its_own_file(tmp_path, capsys):
    """One of lesson 9's cheapest trials (digits, 600 steps) run as `make claims` runs it, in a worker
    process: the shipped seed-0 numbers by the course's rule (exactly on the kind of CPU that made
    lesson9.json, where one more seed would land on another kind)."""
    from tools.run_experiments import SUITES
    from utils.claims import RESULTS_FILE, TRIALS
    from utils.claims import agrees_with_shipped as agrees_with_shipped_trial

    suite = SUITES["claims"]
    assert suite.results_file == RESULTS_FILE and suite.recipes is TRIALS
    name = "digits, class token zeros"
    (run,) = run_all([name], [0], workers=1, log=lambda line: None, suite="claims")[name]
    digits = experiment_data("digits")
    for key in ("val_accuracy", "test_accuracy"):
        agrees = agrees_with_shipped_trial(name, run, digits, key)
        assert agrees and agrees.exact == made_here(RESULTS_FILE, name), str(agrees)
    path = tmp_path / "lesson9.json"
    written = write(path, {name: [run]}, suite="claims")
    assert written["experiments"][name]["recipe"] == TRIALS[name].as_dict()
    assert written["produced_by"].startswith("make claims")
    with pytest.raises(SystemExit):
        main(["digits, 600 steps", "--suite", "claims"])  # a lesson-6 name is no lesson-9 trial
    assert "no experiment 'digits, 600 steps'" in capsys.readouterr().err


def test_make_claims_runs_the_claims_suite():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^claims:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/run_experiments.py --suite claims" in recipe[1]


def test_make_norm_order_runs_lesson_5s_suite():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^norm-order:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/run_experiments.py --suite norm_order" in recipe[1]


# ---- refused runs and safe writes (review findings S17, D3, D4, obscure 15) ---------------------

RUN = dict(
    seed=0,
    val_accuracy=0.9,
    test_accuracy=0.9,
    seconds=1.0,
    steps=1,
    epochs=1,
    steps_per_second=1.0,
    parameters=1,
    multiply_adds=1,
)


def fake_runs(names, value=0.9):
    return {name: [dict(RUN, seed=seed, val_accuracy=value) for seed in SEEDS] for name in names}


@pytest.fixture
def no_training(monkeypatch):
    """run_all that fails the test: what must be refused is refused before any training."""

    def trained(*args, **kwargs):
        raise AssertionError("trained before refusing")

    monkeypatch.setattr(R, "run_all", trained)


@pytest.fixture
def fake_training(monkeypatch):
    """run_all without the minutes of training: every seed at 0.9."""
    monkeypatch.setattr(R, "run_all", lambda names, seeds, workers, log=print, suite="experiments": fake_runs(names))


def refusal(capsys, argv) -> str:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    return capsys.readouterr().err


def canonical_sha256(experiments: dict) -> str:
    text = json.dumps(experiments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_help_prints_the_usage_and_runs_nothing(no_training, capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out


def test_a_name_given_twice_is_refused(no_training, capsys):
    """S17: 'digits digits' stored each seed twice, and the lessons counted 10 seeds."""
    assert "'digits' given twice" in refusal(capsys, ["digits", "same colour", "digits"])


def test_another_suites_file_is_refused_before_training(no_training, capsys, tmp_path):
    """D3: --suite claims over lesson6.json deleted most of lesson 6's experiments, after the training."""
    path = tmp_path / "lesson6.json"
    path.write_bytes(RESULTS_FILE.read_bytes())
    lost = sum(name not in TRIALS for name in EXPERIMENTS)
    error = refusal(capsys, ["--suite", "claims", "orientation", "--output", str(path)])
    assert (
        f"lesson6.json holds lesson 6's results (make experiments); --suite claims would delete {lost} of its "
        "experiments: choose another --output" in error
    )
    assert path.read_bytes() == RESULTS_FILE.read_bytes()


def test_a_write_that_would_drop_stored_experiments_is_refused(no_training, capsys, tmp_path):
    shipped = shipped_results()
    experiments = {**shipped["experiments"], "gone": shipped["experiments"]["digits"]}
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps({**shipped, "experiments": experiments, "experiments_sha256": canonical_sha256(experiments)})
    )
    before = path.read_bytes()
    assert "would delete 1 of its experiments ('gone')" in refusal(capsys, ["digits", "--output", str(path)])
    with pytest.raises(ValueError, match=r"would delete 1 of its experiments \('gone'\)"):
        write(path, fake_runs(["digits"]))
    assert path.read_bytes() == before


def test_an_output_that_is_no_json_or_a_folder_is_refused_before_training(no_training, capsys, tmp_path):
    """Obscure 15: both failed after the whole run, its results lost."""
    path = tmp_path / "results.json"
    path.write_text('{"experiments": {x')
    error = refusal(capsys, ["digits", "--output", str(path)])
    assert f"--output {path} is not valid JSON (cut off or edited?" in error and "line 1, column 18" in error
    assert f"--output {tmp_path} is a folder: name a .json file" in refusal(
        capsys, ["digits", "--output", str(tmp_path)]
    )
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert "is a file, not a folder" in refusal(capsys, ["digits", "--output", str(blocker / "results.json")])


def test_a_run_that_finishes_meanwhile_is_kept(fake_training, monkeypatch, tmp_path):
    """D4: another run writing between this run's read and its replace lost its results."""
    path = tmp_path / "results.json"
    real = R.environment

    def other_run_finishes_now():
        monkeypatch.setattr(R, "environment", real)
        write(path, fake_runs(["same colour"], 0.111))
        return real()

    monkeypatch.setattr(R, "environment", other_run_finishes_now)
    main(["digits", "--workers", "1", "--output", str(path)])
    written = shipped_results(path)["experiments"]
    assert written["same colour"]["runs"][0]["val_accuracy"] == 0.111
    assert written["digits"]["runs"][0]["val_accuracy"] == 0.9


def test_write_waits_for_the_lock_of_the_file(tmp_path):
    """D4: two runs finishing together take turns on results.json.lock."""
    path = tmp_path / "results.json"
    thread = threading.Thread(target=write, args=(path, fake_runs(["digits"])))
    with locked(path):
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive() and not path.exists()
    thread.join(timeout=10)
    assert not thread.is_alive() and shipped_results(path)["experiments"]["digits"]["runs"][0]["seed"] == 0


def test_write_uses_a_scratch_file_of_its_own(tmp_path):
    """D4: every writer used results.json.partial; one in the way (here a folder) stopped the write."""
    path = tmp_path / "results.json"
    (tmp_path / "results.json.partial").mkdir()
    write(path, fake_runs(["digits"]))
    assert shipped_results(path)["experiments"]["digits"]["runs"][0]["val_accuracy"] == 0.9
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == ["results.json.partial"]


def test_write_stores_the_checksum_of_its_experiments(tmp_path):
    """S3: the checksum that shipped_results checks."""
    written = write(tmp_path / "results.json", fake_runs(["digits"]))
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored == written and stored["experiments_sha256"] == canonical_sha256(stored["experiments"])


@pytest.mark.parametrize(
    "runs, words",
    [
        (
            fake_runs(["digits"], 97.0),
            r"seed 0 of 'digits' has val_accuracy 97.0; the file holds accuracies from 0 to 1",
        ),
        ({"digits": [RUN, RUN]}, r"'digits' holds seed 0 twice"),
        ({"digits": []}, r"'digits' holds no runs"),
        ({"digits": [{"seed": 0}]}, r"run 0 of 'digits' has no 'val_accuracy'"),
        (fake_runs(["imagenet"]), r"no experiment 'imagenet' in --suite experiments"),
    ],
)
def test_write_refuses_runs_that_are_no_results(tmp_path, runs, words):
    """S2 for the writer: runs taken from a caller are checked as the reader checks them."""
    with pytest.raises(ValueError, match=words):
        write(tmp_path / "results.json", runs)
    assert not (tmp_path / "results.json").exists()


def test_a_damaged_results_file_is_replaced_only_by_a_run_of_every_experiment(monkeypatch, tmp_path):
    """The fix the refusal names ("run make experiments") works: a full run replaces the suite's own
    damaged file as a whole; a partial run, which would merge into it, is refused."""
    path = tmp_path / "lesson6.json"
    path.write_text(RESULTS_FILE.read_text()[:5000])
    monkeypatch.setitem(R.SUITES, "experiments", dataclasses.replace(R.SUITES["experiments"], results_file=path))
    assert R.stored_results(path, list(EXPERIMENTS)) == {"experiments": {}}
    with pytest.raises(ValueError, match=r"lesson6.json is not valid JSON"):
        R.stored_results(path, ["digits"])
    other = tmp_path / "other.json"
    other.write_text(path.read_text())
    with pytest.raises(ValueError, match=r"other.json is not valid JSON"):
        R.stored_results(other, list(EXPERIMENTS))


@pytest.mark.parametrize(
    ("suite", "results"), [("stability", "lesson11.json"), ("resolution", "lesson12.json"), ("mae", "lesson13.json")]
)
def test_make_part_two_runs_each_part_two_suite_into_its_own_file(suite, results):
    """Lessons 11-13's suites are registered from their modules, write their own files, and
    `make part-two` runs all three."""
    import importlib

    lesson = importlib.import_module(f"utils.{suite}")  # each suite is named after its module
    chosen = R.SUITES[suite]
    assert chosen.recipes is lesson.ARMS and chosen.run is lesson.run_arm
    assert chosen.results_file == lesson.RESULTS_FILE and chosen.results_file.name == results
    assert chosen.command == lesson.COMMAND == f"python tools/run_experiments.py --suite {suite}"
    assert len({other.results_file for other in R.SUITES.values()}) == len(R.SUITES)  # no two share a file
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^part-two:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and f"tools/run_experiments.py --suite {suite}" in recipe[1]


@pytest.mark.reproduction
def test_the_norm_order_suite_runs_lesson_5s_arms_into_its_own_file(tmp_path, capsys):
    """One of lesson 5's arms run as `--suite norm_order` runs it, in a worker process: the shipped
    seed-0 numbers by the course's rule, and a file of its own that no other suite may overwrite."""
    from utils.norm_order import ARMS, COMMAND
    from utils.norm_order import RESULTS_FILE as LESSON5
    from utils.norm_order import agrees_with_shipped as agrees_with_shipped_arm

    suite = R.SUITES["norm_order"]
    assert suite.results_file == LESSON5 and suite.recipes is ARMS and suite.command == COMMAND
    name = "post-norm, lr 0.01, warm-up 0 %"
    (run,) = run_all([name], [0], workers=1, log=lambda line: None, suite="norm_order")[name]
    digits = experiment_data("digits")
    for key in ("val_accuracy", "test_accuracy"):
        agrees = agrees_with_shipped_arm(name, run, digits, key)
        assert agrees and agrees.exact == made_here(LESSON5, name), str(agrees)
    path = tmp_path / "lesson5.json"
    written = write(path, {name: [run]}, suite="norm_order")
    assert written["experiments"][name]["recipe"] == ARMS[name].as_dict()
    assert written["produced_by"] == COMMAND
    with pytest.raises(SystemExit):
        main(["digits, 600 steps", "--suite", "norm_order"])  # a lesson-6 name is no lesson-5 arm
    assert "no experiment 'digits, 600 steps'" in capsys.readouterr().err
