"""Run a lesson's experiments over seeds 0-4 and ship the results (`make experiments`, `make claims`).

    python tools/run_experiments.py                       # lesson 6's, into utils/results/lesson6.json
    python tools/run_experiments.py "digits" "same colour"  # some of them, merged into the file
    python tools/run_experiments.py --suite claims        # lesson 9's trials, into utils/results/lesson9.json
    python tools/run_experiments.py --workers 1           # one process (default: one per CPU core)

Every run trains on one CPU thread (fit's default) with a budget in steps, so the numbers do not
depend on the machine's speed or core count; several runs go side by side, one per core. Lesson
6's take about 25 minutes on 2 cores, lesson 9's about an hour (59 minutes here). The lessons read the files with
utils.ablations.shipped_runs and utils.claims.shipped_runs.
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

from utils import ablations, claims
from utils.ablations import SEEDS, Experiment, environment, experiment_data


@dataclass(frozen=True)
class Suite:
    """One lesson's experiments: the recipes by name, how one seed runs, where the results go."""

    recipes: Mapping  # name -> a recipe with as_dict() (an Experiment or a claims.Trial)
    experiment: Callable[[str], Experiment]  # name -> its Experiment (data, model, budget)
    run: Callable[..., dict]  # run(name, seed, data) -> one run's dict
    results_file: Path
    command: str


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
    ),
    "claims": Suite(
        claims.TRIALS,
        lambda name: claims.TRIALS[name].experiment,
        claims.run_trial,
        claims.RESULTS_FILE,
        "make claims (python tools/run_experiments.py --suite claims)",
    ),
}
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
    per_model = {"vit": 1.0, "deep_cnn": 1.0, "small_cnn": 8.0}[experiment.model]
    per_data = 1.0 if experiment.data == "digits" else 2.0
    tokens = experiment.config.num_tokens if experiment.config else 1
    return per_model * per_data * max(tokens, 5) / 5


def write(path: Path, runs: dict[str, list[dict]], suite: str = "experiments") -> dict:
    """Merge `runs` into the results file at `path` (other experiments kept) and write it atomically."""
    chosen = SUITES[suite]
    results = {"experiments": {}}
    if path.is_file():
        with open(path, encoding="utf-8") as file:
            results = json.load(file)
    here = environment()
    kept = [name for name in results["experiments"] if name not in runs and name in chosen.recipes]
    if kept and results.get("cpu", here["cpu"]) != here["cpu"]:  # runs of two kinds of CPU in one file
        here["cpu"] = f"mixed: {results['cpu']} and {here['cpu']}"
    results.update({"produced_by": chosen.command, **here})
    for name, found in runs.items():
        results["experiments"][name] = {"recipe": chosen.recipes[name].as_dict(), "runs": found}
    results["experiments"] = {
        name: results["experiments"][name] for name in chosen.recipes if name in results["experiments"]
    }  # today's experiments, in their order; a renamed or removed one is dropped
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".json.partial")
    with open(scratch, "w", encoding="utf-8") as file:
        json.dump(results, file, indent=1)
        file.write("\n")
    os.replace(scratch, path)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="name", help="experiments to run (default: all)")
    parser.add_argument("--suite", choices=list(SUITES), default="experiments", help="lesson 6's or lesson 9's")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="runs side by side")
    parser.add_argument("--output", type=Path, default=None, help="the results file (default: the suite's)")
    args = parser.parse_args(argv)
    suite = SUITES[args.suite]
    if unknown := [name for name in args.names if name not in suite.recipes]:
        parser.error(f"no experiment {', '.join(map(repr, unknown))}; expected some of {list(suite.recipes)}")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    names = args.names or list(suite.recipes)
    output = args.output or suite.results_file
    start = time.perf_counter()
    runs = run_all(names, list(SEEDS), args.workers, suite=args.suite)
    write(output, runs, suite=args.suite)
    print(f"{len(names)} experiments x {len(SEEDS)} seeds in {time.perf_counter() - start:.0f} s -> {output}")


if __name__ == "__main__":
    sys.exit(main())
