"""The library's import graph: read from the source with ast, every module's imports of other
`utils` modules (lazy ones inside functions too) form no cycle."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

UTILS = Path(__file__).resolve().parents[1] / "utils"


def module_name(path: Path) -> str:
    parts = path.relative_to(UTILS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(UTILS.rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The utils modules that `path` imports anywhere in its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from utils.viz import core` imports the module utils.viz.core; `from utils.data import X` utils.data
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            if name in MODULES and not (name + ".").startswith(module_name(path) + "."):
                found.add(name)
    # a module that names a submodule also imports its package first; keep only the most specific
    return {name for name in found if not any(other.startswith(name + ".") for other in found)}


GRAPH = {name: imported_modules(path) for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a list of modules (first == last), or None."""
    state: dict[str, str] = {}  # "open" while on the stack, "done" after

    def visit(node: str, path: list[str]) -> list[str] | None:  # path: the modules leading to node
        state[node] = "open"
        path = [*path, node]
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":  # back to a module on the path: a cycle
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target, path)):
                return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


def test_the_graph_is_read_from_the_source():
    assert "utils.datasets" in GRAPH["utils.data"]
    assert "utils.datasets" in GRAPH["utils.standard_datasets"]
    assert "utils.vit" in GRAPH["utils.weights"]


def test_the_argument_checks_import_no_other_module_of_utils():
    """utils.validation sits at the very start of the data flow: every module may import it."""
    assert GRAPH["utils.validation"] == set()
    assert "utils.validation" in GRAPH["utils.patches"] and "utils.validation" in GRAPH["utils.datasets"]


def test_find_cycle_finds_a_cycle_and_only_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_module_of_utils_imports_itself_in_a_circle():
    assert find_cycle(GRAPH) is None, " -> ".join(find_cycle(GRAPH))


@pytest.mark.parametrize(
    "name", ["utils.data", "utils.standard_datasets", "utils.datasets", "utils.weights", "utils.validation"]
)
def test_each_module_imports_on_its_own(name):
    """In a fresh interpreter, so that no module another test imported first can hide a cycle."""
    result = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
