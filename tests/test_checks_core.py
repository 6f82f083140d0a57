"""What every checker shares: the call guard, the comparison with the reference, and a blank
exercise's NotImplementedError passing through every checker untouched."""

import importlib
import inspect
import pkgutil

import pytest
import torch

import utils.checks
from utils.checks.core import CheckFailed, call_learner, compare, match_or_raise, raise_if_known_mistake


def all_checkers() -> dict[str, object]:
    """Every check_* function defined in a utils.checks submodule, by 'module.name'."""
    checkers = {}
    for module_info in pkgutil.iter_modules(utils.checks.__path__):
        module = importlib.import_module(f"utils.checks.{module_info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                checkers[f"{module_info.name}.{name}"] = fn
    return checkers


CHECKERS = all_checkers()


def test_the_checkers_are_all_found():
    modules = {name.split(".")[0] for name in CHECKERS}
    lessons = {info.name for info in pkgutil.iter_modules(utils.checks.__path__)} - {"core"}
    assert modules == lessons, f"no check_* function found in {sorted(lessons - modules)}"
    assert len(CHECKERS) >= 19


@pytest.mark.parametrize("checker", CHECKERS.values(), ids=CHECKERS.keys())
def test_a_blank_exercise_raises_not_implemented_error_through_every_checker(checker):
    def blank(*args, **kwargs):
        raise NotImplementedError("write this function")

    with pytest.raises(NotImplementedError, match="^write this function$"):
        checker(blank)


# ---- call_learner -------------------------------------------------------------------------


def test_call_learner_returns_a_tensor_by_default():
    x = torch.ones(2)
    assert call_learner(lambda a: a + 1, x).tolist() == [2.0, 2.0]
    with pytest.raises(CheckFailed, match="^expected a torch.Tensor, got list$"):
        call_learner(lambda a: a.tolist(), x)


def test_call_learner_names_a_type_and_a_tuple_of_types():
    assert call_learner(lambda: {"a": 1}, returns=dict) == {"a": 1}
    with pytest.raises(CheckFailed, match="^expected a dict, got list$"):
        call_learner(lambda: [], returns=dict)
    assert call_learner(lambda: 3, returns=(int, float)) == 3
    with pytest.raises(CheckFailed, match="^expected an int or a float, got str$"):
        call_learner(lambda: "3", returns=(int, float))


def test_call_learner_takes_a_predicate_and_the_words_for_it():
    def is_pair(result):
        return isinstance(result, tuple) and len(result) == 2

    assert call_learner(lambda: (1, 2), returns=is_pair, expected="a pair (a, b)") == (1, 2)
    with pytest.raises(CheckFailed, match=r"^expected a pair \(a, b\), got tuple$"):
        call_learner(lambda: (1, 2, 3), returns=is_pair, expected="a pair (a, b)")
    with pytest.raises(CheckFailed, match="^expected a result that passes is_pair, got list$"):
        call_learner(lambda: [1, 2], returns=is_pair)


def test_call_learner_turns_the_learners_exception_into_a_failure():
    def crashing(x):
        return x.view(-1, 7)

    with pytest.raises(CheckFailed, match=r"^your function raised RuntimeError: shape '\[-1, 7\]'") as failure:
        call_learner(crashing, torch.ones(3))
    assert isinstance(failure.value.__cause__, RuntimeError)
    with pytest.raises(CheckFailed, match="^your function raised ZeroDivisionError for x = 0: division by zero$"):
        call_learner(lambda x: 1 / x, 0, returns=float, where="for x = 0")


def test_call_learner_lets_not_implemented_error_through():
    def blank():
        raise NotImplementedError("blank")

    with pytest.raises(NotImplementedError, match="^blank$"):
        call_learner(blank)


# ---- match_or_raise, raise_if_known_mistake -----------------------------------------------


def test_match_or_raise_grades_exact_approximate_and_wrong():
    x = torch.rand(5, 5)
    assert match_or_raise(x, x.clone()) == "exact"
    assert match_or_raise(x + 1e-7, x).startswith("approximate")
    with pytest.raises(CheckFailed, match="max difference 0.5"):
        match_or_raise(x + 0.5, x)


def test_raise_if_known_mistake_names_the_first_mistake_of_the_same_shape():
    x = torch.rand(3, 4)
    mistakes = {"transposed": x.T, "doubled": 2 * x, "also doubled": 2 * x}
    raise_if_known_mistake(x, mistakes, "for x")  # none made: nothing raised
    with pytest.raises(CheckFailed, match=r"^doubled \(for x\)$"):
        raise_if_known_mistake(2 * x, mistakes, "for x")
    with pytest.raises(CheckFailed, match=r"^transposed \(for x\)$"):
        raise_if_known_mistake(x.T.clone(), mistakes, "for x")


# ---- compare ------------------------------------------------------------------------------


def test_compare_grades_the_match():
    x = torch.rand(2, 3)
    assert compare(x.clone(), x, "for x") == "exact"
    assert compare(x + 1e-7, x, "for x").startswith("approximate (max difference")
    assert compare(x + 1e-5, x, "for x", atol=1e-4).startswith("approximate")


def test_compare_gives_the_hint_for_a_known_wrong_shape():
    x = torch.rand(2, 3)
    hints = {(3, 2): "transpose it"}
    with pytest.raises(CheckFailed, match=r"^expected shape \(2, 3\), got \(3, 2\) for x: transpose it$"):
        compare(x.T, x, "for x", shape_hints=hints)
    with pytest.raises(CheckFailed, match=r"^expected shape \(2, 3\), got \(6,\) for x$"):
        compare(x.flatten(), x, "for x", shape_hints=hints)


def test_compare_words_a_wrong_shape_as_told():
    x = torch.rand(2, 3)
    with pytest.raises(
        CheckFailed,
        match=r"^expected \(B, D\) = \(2, 3\), got \(6,\) for x: the right numbers, "
        r"but not in the shape \(B, D\)$",
    ):
        compare(x.flatten(), x, "for x", shape_wording="expected (B, D) = {}", layout="(B, D)")
    with pytest.raises(CheckFailed, match=r"^expected shape \(2, 3\), got \(2,\) for x: keep every row$"):
        compare(x[:, 0], x, "for x", layout="(B, D)", any_shape_hint="keep every row")


def test_compare_names_a_known_mistake():
    x = torch.rand(2, 3)
    mistakes = {"you doubled it": 2 * x, "you returned the row sums": x.sum(-1)}
    with pytest.raises(CheckFailed, match=r"^you doubled it \(for x\)$"):
        compare(2 * x, x, "for x", mistakes=mistakes)
    with pytest.raises(CheckFailed, match=r"^you returned the row sums \(for x\)$"):  # a mistake of another shape
        compare(x.sum(-1), x, "for x", mistakes=mistakes)


def test_compare_says_how_far_off_with_the_name_and_the_advice():
    x = torch.zeros(2, 3)
    with pytest.raises(CheckFailed, match=r"^values differ from the reference: max difference 0.5 for x$"):
        compare(x + 0.5, x, "for x", mistakes={"you doubled it": 2 * x})
    with pytest.raises(CheckFailed, match=r"^out: values differ from the reference: max difference 0.5 for x: add 0$"):
        compare(x + 0.5, x, "for x", name="out", advice=": add 0")


def test_compare_asks_diagnose_after_the_mistakes():
    x = torch.zeros(2, 3)

    def negative(got):
        return "it is negative (for x)" if got.min() < 0 else None

    with pytest.raises(CheckFailed, match=r"^it is negative \(for x\)$"):
        compare(x - 1, x, "for x", diagnose=negative)
    with pytest.raises(CheckFailed, match=r"^minus one \(for x\)$"):
        compare(x - 1, x, "for x", mistakes={"minus one": x - 1}, diagnose=negative)
    with pytest.raises(CheckFailed, match="^values differ"):
        compare(x + 1, x, "for x", diagnose=negative)


def test_compare_accepts_a_tensor_that_needs_grad():
    x = torch.rand(2, 3, requires_grad=True)
    assert compare(x * 1, x.detach(), "for x") == "exact"
