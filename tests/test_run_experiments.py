"""tools/run_experiments.py (`make experiments`): runs lesson 6's experiments over the seeds in
worker processes and merges them into the shipped results file."""

import json
import re

import pytest
from lessons import ROOT

from tools.run_experiments import main, run_all, write
from utils.ablations import (
    EXPERIMENTS,
    SEEDS,
    agrees_with_shipped,
    environment,
    experiment_data,
    made_here,
    shipped_results,
    shipped_runs,
)


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
        assert agrees and agrees.exact == made_here(), str(agrees)
    assert run["steps"] == stored["steps"] == 600


def test_write_merges_into_the_file_keeps_the_experiments_order_and_drops_unknown_ones(tmp_path):
    path = tmp_path / "results.json"
    shipped = shipped_results()
    path.write_text(json.dumps({**shipped, "experiments": {**shipped["experiments"], "gone": {"runs": []}}}))
    fake = [{**run, "val_accuracy": 0.5} for run in shipped_runs("digits")]
    write(path, {"digits": fake})
    written = json.loads(path.read_text())
    assert list(written["experiments"]) == list(EXPERIMENTS)  # "gone" dropped, the order kept
    assert written["experiments"]["digits"]["runs"] == fake
    assert written["experiments"]["digits"]["recipe"] == EXPERIMENTS["digits"].as_dict()
    assert written["experiments"]["same colour"] == shipped["experiments"]["same colour"]  # untouched
    assert written["seeds"] == list(SEEDS) and not list(tmp_path.glob("*.partial"))


def test_write_says_when_one_file_holds_runs_of_two_kinds_of_cpu(tmp_path):
    path = tmp_path / "results.json"
    shipped = shipped_results()
    path.write_text(json.dumps({**shipped, "cpu": "another processor, torch AVX2"}))
    fake = [{**run, "val_accuracy": 0.5} for run in shipped_runs("digits")]
    assert write(path, {"digits": fake})["cpu"] == f"mixed: another processor, torch AVX2 and {environment()['cpu']}"
    everything = {name: shipped_runs(name) for name in EXPERIMENTS}
    assert write(path, everything)["cpu"] == environment()["cpu"]  # every run made here: one kind again


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
        assert agrees and agrees.exact == made_here(RESULTS_FILE), str(agrees)
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
