"""tools/cpu_kinds.py (`make test-kinds`, run by CI): the reproduction tests again as if on two other
kinds of CPU. Each kind must really lower the code paths and be named by cpu_kind(), or the tier
would only repeat the native run."""

import re
import subprocess
import sys

import pytest
from notebook_cells import ROOT

from tools import cpu_kinds
from utils.runtime import cpu_kind


@pytest.mark.parametrize("name", sorted(cpu_kinds.KINDS))
def test_each_emulated_kind_lowers_torchs_code_path_and_is_named(name):
    pins = cpu_kinds.KINDS[name]
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    env = {"PATH": "/usr/bin:/bin", **pins}
    capability = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert capability.stdout.strip() == pins["ATEN_CPU_CAPABILITY"].upper()
    kind = cpu_kinds.kind_name(pins)
    assert kind != cpu_kind() and all(
        f"{key}={value}" in kind for key, value in pins.items() if key != "ATEN_CPU_CAPABILITY"
    )


def test_the_tier_runs_the_reproduction_tests_or_the_lessons_named():
    assert cpu_kinds.command([])[-3:] == ["tests", "-m", "reproduction"]
    lessons = cpu_kinds.command(["notebooks/05_encoder.ipynb"])
    assert "--nbval" in lessons and lessons[-1] == "notebooks/05_encoder.ipynb" and "reproduction" not in lessons


def test_help_and_a_missing_notebook_run_nothing(capsys):
    with pytest.raises(SystemExit) as done:
        cpu_kinds.main(["--help"])
    assert done.value.code == 0 and "emulated kinds of CPU" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        cpu_kinds.main(["notebooks/99_nowhere.ipynb"])
    assert done.value.code == 2 and "no such notebook: notebooks/99_nowhere.ipynb" in capsys.readouterr().err


def test_every_test_that_reruns_shipped_numbers_is_marked_reproduction():
    """The tier runs what carries the marker: a rerun of shipped numbers without it would never meet
    another kind of CPU."""
    found = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "reproduction",
            "tests",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    marked = {line.split("::")[1].split("[")[0] for line in found.stdout.splitlines() if "::" in line}
    assert marked == {
        "test_a_rerun_of_a_shipped_experiment_reproduces_it",
        "test_a_rerun_reproduces_the_shipped_seed_0",
        "test_a_worker_process_reproduces_a_shipped_run",
        "test_the_claims_suite_runs_lesson_9s_trials_into_its_own_file",
        "test_the_norm_order_suite_runs_lesson_5s_arms_into_its_own_file",
        "test_shipped_model_is_its_recipe_and_reaches_its_stated_accuracy",
    }


def test_ci_runs_the_tier_and_make_test_kinds_runs_this_tool():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test-kinds:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe and "tools/cpu_kinds.py" in recipe[1]
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert steps == ["make test", "make test-kinds", "make test-compat"]
