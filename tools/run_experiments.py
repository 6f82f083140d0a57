"""Run a lesson's experiments over seeds 0-4 and ship the results (`make experiments`, `make claims`,
`make norm-order`).

    python tools/run_experiments.py                       # lesson 6's, into utils/results/lesson6.json
    python tools/run_experiments.py "digits" "same colour"  # some of them, merged into the file
    python tools/run_experiments.py --suite claims        # lesson 9's trials, into utils/results/lesson9.json
    python tools/run_experiments.py --suite norm_order    # lesson 5's pre/post-norm arms, into lesson5.json
    python tools/run_experiments.py --suite stability     # lesson 11's (also resolution: 12, mae: 13; make part-two)
    python tools/run_experiments.py --workers 1           # one process (default: one per CPU core)
    python tools/run_experiments.py --suite claims "new" --drop "old"  # run "new"; remove "old", which
                                                          # the suite no longer defines, from the file

Every run trains on one CPU thread (fit's default) with a budget in steps, so the numbers do not
depend on the machine's speed or core count; several runs go side by side, one per core. Lesson
6's take about 25 minutes on 2 cores, lesson 9's just under an hour (59 minutes here), lesson 5's
about 10 minutes, Part II's (lessons 11-13) about 45 minutes together. The lessons read the files
with each suite's shipped_runs (utils.ablations, utils.claims, utils.norm_order, utils.stability,
utils.resolution, utils.mae), which check the sha256 of the experiments that this script stores
beside them.

Before any training the output is checked: a name given twice, an output that is a folder, is not
valid JSON, was changed by hand, holds another suite's results or experiments this suite would
drop are refused. The file is written under its lock (results.json.lock) from the read to the
replace, through a scratch file of its own, so two runs finishing together both keep their results.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

# run as a script from a checkout, the course library needs no install
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utils import ablations, claims, mae, norm_order, resolution, stability
from utils.ablations import (
    CHECKSUM_KEY,
    SEEDS,
    Experiment,
    environment,
    experiment_data,
    experiments_checksum,
    read_results,
    results_problem,
)
from utils.files import check_not_a_link, locked, write_text_atomically


@dataclass(frozen=True)
class Suite:
    """One lesson's experiments: the recipes by name, how one seed runs, where the results go."""

    recipes: Mapping  # name -> a recipe with as_dict() (an Experiment or a claims.Trial)
    experiment: Callable[[str], Experiment]  # name -> its Experiment (data, model, budget)
    run: Callable[..., dict]  # run(name, seed, data) -> one run's dict
    results_file: Path
    command: str
    holds: str  # what its results file holds, in words


def _run_ablation(name: str, seed: int, data) -> dict:
    (run,) = ablations.run_experiment(name, [seed], data=data)
    return run


SUITES = {
    "experiments": Suite(
        ablations.EXPERIMENTS,
        ablations.EXPERIMENTS.__getitem__,
        _run_ablation,
        ablations.RESULTS_FILE,
        "make experiments (python tools/run_experiments.py)",
        "lesson 6's results",
    ),
    "claims": Suite(
        claims.TRIALS,
        lambda name: claims.TRIALS[name].experiment,
        claims.run_trial,
        claims.RESULTS_FILE,
        "make claims (python tools/run_experiments.py --suite claims)",
        "lesson 9's results",
    ),
}


def _lesson_suite(module, holds: str) -> Suite:
    """A lesson's arms as a suite: `module` defines ARMS (name -> an arm with .experiment, an
    Experiment, and .as_dict()), run_arm(name, seed, data), RESULTS_FILE and COMMAND."""
    return Suite(
        module.ARMS,
        lambda name: module.ARMS[name].experiment,
        module.run_arm,
        module.RESULTS_FILE,
        module.COMMAND,
        holds,
    )


SUITES["norm_order"] = _lesson_suite(norm_order, "lesson 5's results")
SUITES["stability"] = _lesson_suite(stability, "lesson 11's results")
SUITES["resolution"] = _lesson_suite(resolution, "lesson 12's results")
SUITES["mae"] = _lesson_suite(mae, "lesson 13's results")
COMMAND = SUITES["experiments"].command


@cache
def _data(data: str):
    return experiment_data(data)  # once per worker process and training set


def run_one(suite: str, name: str, seed: int) -> tuple[str, dict]:
    """One seed of one experiment of `suite` (in a worker process)."""
    chosen = SUITES[suite]
    return name, chosen.run(name, seed, _data(chosen.experiment(name).data))


def run_all(
    names: list[str], seeds: list[int], workers: int, log=print, suite: str = "experiments"
) -> dict[str, list[dict]]:
    """{name: runs sorted by seed} for every name and seed, `workers` runs at a time."""
    experiment = SUITES[suite].experiment
    jobs = [(name, seed) for name in names for seed in seeds]
    # the slowest first, so that no worker is left with a long run at the end
    jobs.sort(key=lambda job: -experiment(job[0]).fit["steps"] * _cost(experiment(job[0])))
    runs: dict[str, list[dict]] = {name: [] for name in names}
    start = time.perf_counter()
    # spawned, not forked: a fork of a process that already runs threads (torch's, a test server's)
    # can inherit a held lock and hang forever
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_one, suite, name, seed) for name, seed in jobs]
        for done, future in enumerate(futures, 1):
            name, run = future.result()
            runs[name].append(run)
            log(
                f"[{done}/{len(jobs)}, {time.perf_counter() - start:.0f} s] {name}, seed {run['seed']}: "
                f"val {run['val_accuracy']:.4f}, test {run['test_accuracy']:.4f}, {run['seconds']:.0f} s"
            )
    return {name: sorted(found, key=lambda run: run["seed"]) for name, found in runs.items()}


def _cost(experiment: Experiment) -> float:
    """A rough cost per step, only to order the jobs: multiply-adds per image, by model and data."""
    per_model = {"small_cnn": 8.0}.get(experiment.model, 1.0)
    per_data = 1.0 if experiment.data == "digits" else 2.0
    tokens = experiment.config.num_tokens if experiment.config else 1
    return per_model * per_data * max(tokens, 5) / 5


def stored_results(path: Path, names: list[str], suite: str = "experiments", drop=()) -> dict:
    """The results at `path` that a run of `names` of `suite` merges into ({"experiments": {}} for a
    new file, or for the suite's own file, damaged, when every experiment runs again).

    Raises ValueError (before any training, in main) when writing there would lose something: a
    folder or a link, a file that is not valid results or was changed by hand (utils.ablations.
    read_results), another suite's results, or experiments this suite does not know (dropped),
    unless `drop` names them: experiments removed from the suite on purpose, left out of the file.
    """
    chosen, path = SUITES[suite], Path(path)
    check_not_a_link(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: name a .json file")
    folder = next(parent for parent in path.absolute().parents if parent.exists())  # the nearest that exists
    if not folder.is_dir():
        raise ValueError(f"{path} cannot be written: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"{path} cannot be written: no permission to write in {folder}")
    if not path.exists():
        return {"experiments": {}}
    try:
        results = read_results(path)
    except ValueError:
        if path.resolve() == chosen.results_file.resolve() and set(names) >= set(chosen.recipes):
            return {"experiments": {}}  # every experiment runs again: the damaged file is replaced whole
        raise
    if defined := [name for name in drop if name in chosen.recipes]:
        raise ValueError(f"--drop {defined[0]!r}: --suite {suite} still defines it; only removed experiments drop")
    lost = [name for name in results["experiments"] if name not in chosen.recipes and name not in drop]
    listed = ", ".join(map(repr, lost[:3])) + (", ..." if len(lost) > 3 else "")
    if results["produced_by"] != chosen.command:
        owner = next((other for other in SUITES.values() if other.command == results["produced_by"]), None)
        holds = f"{owner.holds} ({owner.command.split(' (')[0]})" if owner else repr(results["produced_by"])
        harm = f"would delete {len(lost)} of its experiments" if lost else "would mix its runs into them"
        raise ValueError(f"{path} holds {holds}; --suite {suite} {harm}: choose another --output")
    if lost:
        raise ValueError(
            f"{path}: --suite {suite} would delete {len(lost)} of its experiments ({listed}), which it does not "
            "know (renamed or removed?): choose another --output, or move the file away to start afresh"
        )
    return results


def write(path: Path, runs: dict[str, list[dict]], suite: str = "experiments", drop=()) -> dict:
    """Merge `runs` into the results file at `path` (its other experiments kept, those in `drop` left
    out) with the checksum of its experiments; holds path's lock from the read to the replace, which
    is atomic."""
    chosen, path = SUITES[suite], Path(path)
    if unknown := [name for name in runs if name not in chosen.recipes]:
        raise ValueError(f"no experiment {unknown[0]!r} in --suite {suite}; expected some of {list(chosen.recipes)}")
    here = environment()  # before the lock: nothing but the read and the write happen under it
    with locked(path):
        results = stored_results(path, list(runs), suite, drop)
        for experiment in results["experiments"].values():  # each experiment keeps the kind that ran it
            experiment.setdefault("cpu", results.get("cpu", here["cpu"]))
        for name, found in runs.items():
            results["experiments"][name] = {"recipe": chosen.recipes[name].as_dict(), "runs": found, "cpu": here["cpu"]}
        kinds = sorted(
            {results["experiments"][name]["cpu"] for name in results["experiments"] if name in chosen.recipes}
        )
        results.update({"produced_by": chosen.command, **here})
        if len(kinds) > 1:  # runs of several kinds of CPU in one file: made_here asks each experiment
            results["cpu"] = "mixed: " + " and ".join(kinds)
        results["experiments"] = {
            name: results["experiments"][name] for name in chosen.recipes if name in results["experiments"]
        }  # today's experiments, in their order
        results[CHECKSUM_KEY] = experiments_checksum(results["experiments"])
        if problem := results_problem(results):
            raise ValueError(f"not writing {path}: {problem}")
        write_text_atomically(path, json.dumps(results, indent=1) + "\n")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="name", help="experiments to run (default: all)")
    parser.add_argument(
        "--suite",
        choices=list(SUITES),
        default="experiments",
        help="whose: lesson 6's, 9's (claims), 5's (norm_order), 11's (stability), 12's (resolution), 13's (mae)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="runs side by side")
    parser.add_argument("--output", type=Path, default=None, help="the results file (default: the suite's)")
    parser.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="name",
        help="an experiment removed from the suite: leave it out of the results file (repeatable)",
    )
    args = parser.parse_args(argv)
    suite = SUITES[args.suite]
    if twice := [name for i, name in enumerate(args.names) if name in args.names[:i]]:
        parser.error(f"{twice[0]!r} given twice: each experiment runs once per seed")
    if unknown := [name for name in args.names if name not in suite.recipes]:
        parser.error(f"no experiment {', '.join(map(repr, unknown))}; expected some of {list(suite.recipes)}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    names = args.names or list(suite.recipes)
    output = args.output or suite.results_file
    try:
        stored_results(output, names, args.suite, args.drop)
    except (ValueError, OSError) as error:
        parser.error(f"{'--output ' if args.output else ''}{error}")
    start = time.perf_counter()
    runs = run_all(names, list(SEEDS), args.workers, suite=args.suite)
    write(output, runs, suite=args.suite, drop=args.drop)
    print(f"{len(names)} experiments x {len(SEEDS)} seeds in {time.perf_counter() - start:.0f} s -> {output}")


if __name__ == "__main__":
    sys.exit(main())
