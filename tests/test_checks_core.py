"""What every checker shares: the call guard, the comparison with the reference, and a blank
exercise's NotImplementedError passing through every checker untouched."""

import _thread
import importlib
import inspect
import pkgutil
import re
import signal
import threading
import time

import numpy as np
import pytest
import torch
from checker_cases import assert_each_named_as_itself
from no_hang import outcome_within

import utils.checks
import utils.checks.core
from utils.checks.core import (
    CheckFailed,
    call_learner,
    compare,
    describe,
    is_blank_exercise,
    match_or_raise,
    python_number,
    raise_if_known_mistake,
    real_number,
    varies_between_calls,
    whole_number,
)
from utils.checks.patches import check_patchify
from utils.patches import patchify


def all_checkers() -> dict[str, object]:
    """Every check_* function defined in a utils.checks submodule, by 'module.name'."""
    checkers = {}
    for module_info in pkgutil.iter_modules(utils.checks.__path__):
        module = importlib.import_module(f"utils.checks.{module_info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and fn.__module__ == module.__name__:
                checkers[f"{module_info.name}.{name}"] = fn
    return checkers


def torch_lacks_it(x):
    return (x > 0).abs()  # torch raises NotImplementedError: "abs_cpu" not implemented for 'Bool'


class NoForward(torch.nn.Module):
    pass


CHECKERS = all_checkers()
LESSONS_1_TO_3 = {
    name: fn for name, fn in CHECKERS.items() if name.split(".")[0] in ("patches", "embeddings", "attention")
}
GARBAGE = [  # (what a learner's function does, the words for it)
    (lambda *args: None, "got None .*forget to `return`"),
    (lambda *args: 1.5, "got float 1.5"),
    (lambda *args: "tokens", "got str 'tokens'"),
    (lambda *args: int("x"), "your function raised ValueError"),
    (lambda *args: [][1], "your function raised IndexError"),
    (lambda *args: torch.ones(2) @ torch.ones(3), "your function raised RuntimeError"),
    (lambda *args: len(5), "your function raised TypeError"),
    (lambda *args: torch_lacks_it(torch.ones(2)), "your function raised NotImplementedError.*no such operation"),
]
GARBAGE_IDS = [
    "None",
    "float",
    "str",
    "ValueError",
    "IndexError",
    "RuntimeError",
    "TypeError",
    "torch's NotImplementedError",
]


def test_the_checkers_are_all_found():
    modules = {name.split(".")[0] for name in CHECKERS}
    lessons = {info.name for info in pkgutil.iter_modules(utils.checks.__path__)} - {"core", "display"}
    assert modules == lessons, f"no check_* function found in {sorted(lessons - modules)}"
    assert len(CHECKERS) >= 19


@pytest.mark.parametrize("checker", CHECKERS.values(), ids=CHECKERS.keys())
def test_a_blank_exercise_raises_not_implemented_error_through_every_checker(checker):
    def blank(*args, **kwargs):
        raise NotImplementedError("write this function")

    with pytest.raises(NotImplementedError, match="^write this function$"):
        checker(blank)


# ---- call_learner -------------------------------------------------------------------------


@pytest.mark.parametrize("checker", CHECKERS.values(), ids=CHECKERS.keys())
@pytest.mark.parametrize("learner, words", GARBAGE, ids=GARBAGE_IDS)
def test_every_checker_turns_garbage_into_a_verdict(checker, learner, words):
    with pytest.raises(CheckFailed):
        checker(learner)


# A checker whose exercise returns a number gets one: it names the number, not its type.
NUMBER_EXERCISES = {("embeddings.check_jigsaw_gap", "float"): "your gap is 1.5; without positions the gap must be 0"}


@pytest.mark.parametrize("name", LESSONS_1_TO_3)
@pytest.mark.parametrize(
    "learner, words, kind", [(*case, kind) for case, kind in zip(GARBAGE, GARBAGE_IDS)], ids=GARBAGE_IDS
)
def test_the_checkers_of_lessons_1_to_3_name_the_garbage(name, learner, words, kind):
    with pytest.raises(CheckFailed, match=NUMBER_EXERCISES.get((name, kind), words)):
        LESSONS_1_TO_3[name](learner)


@pytest.mark.parametrize("checker", LESSONS_1_TO_3.values(), ids=LESSONS_1_TO_3.keys())
def test_the_checkers_ask_for_the_function_not_its_result(checker):
    with pytest.raises(CheckFailed, match="expected your function itself, got Tensor .*without calling it"):
        checker(torch.zeros(2, 3))


def test_call_learner_returns_a_tensor_by_default():
    x = torch.ones(2)
    assert call_learner(lambda a: a + 1, x).tolist() == [2.0, 2.0]
    with pytest.raises(CheckFailed, match=r"^expected a torch.Tensor, got list of 2 \(float, float\)$"):
        call_learner(lambda a: a.tolist(), x)
    with pytest.raises(CheckFailed, match=r"^expected a torch.Tensor, got None \(did your function forget"):
        call_learner(lambda a: None, x)


def test_call_learner_names_a_type_and_a_tuple_of_types():
    assert call_learner(lambda: {"a": 1}, returns=dict) == {"a": 1}
    with pytest.raises(CheckFailed, match=r"^expected a dict, got list of 0 \(\)$"):
        call_learner(lambda: [], returns=dict)
    assert call_learner(lambda: 3, returns=(int, float)) == 3
    with pytest.raises(CheckFailed, match="^expected an int or a float, got str '3' for x$"):
        call_learner(lambda: "3", returns=(int, float), where="for x")


def test_call_learner_takes_a_predicate_and_the_words_for_it():
    def is_pair(result):
        return isinstance(result, tuple) and len(result) == 2

    assert call_learner(lambda: (1, 2), returns=is_pair, expected="a pair (a, b)") == (1, 2)
    with pytest.raises(CheckFailed, match=r"^expected a pair \(a, b\), got tuple of 3 \(int, int, int\)$"):
        call_learner(lambda: (1, 2, 3), returns=is_pair, expected="a pair (a, b)")
    with pytest.raises(CheckFailed, match="^expected a result that passes is_pair, got list of 2"):
        call_learner(lambda: [1, 2], returns=is_pair)


def test_call_learner_turns_the_learners_exception_into_a_failure():
    def crashing(x):
        return x.view(-1, 7)

    with pytest.raises(CheckFailed, match=r"^your function raised RuntimeError: shape '\[-1, 7\]'") as failure:
        call_learner(crashing, torch.ones(3))
    assert isinstance(failure.value.__cause__, RuntimeError)
    with pytest.raises(CheckFailed, match="^your function raised ZeroDivisionError for x = 0: division by zero$"):
        call_learner(lambda x: 1 / x, 0, returns=float, where="for x = 0")


def test_call_learner_cuts_a_very_long_error_message():
    def crashing(x):
        raise ValueError("x" * 5000)

    with pytest.raises(CheckFailed) as failure:
        call_learner(crashing, 0, where="for x = 0")
    message = str(failure.value)
    assert message.startswith("your function raised ValueError for x = 0: xxx") and message.endswith("xxx ...")
    assert len(message) < 400
    with pytest.raises(CheckFailed, match=r": short$"):  # a short message stays whole
        call_learner(lambda: (_ for _ in ()).throw(ValueError("short")))


def test_call_learner_lets_not_implemented_error_through():
    def blank():
        raise NotImplementedError("blank")

    with pytest.raises(NotImplementedError, match="^blank$"):
        call_learner(blank)


def test_call_learner_lets_a_blank_exercise_through_from_a_helper_and_a_module():
    def helper(x):
        raise NotImplementedError("Hint: write the helper")

    class Blank(torch.nn.Module):
        def forward(self, x):
            raise NotImplementedError("Hint: write forward")

    with pytest.raises(NotImplementedError, match="^Hint: write the helper$"):
        call_learner(lambda x: helper(x) + 1, torch.ones(2))
    with pytest.raises(NotImplementedError, match="^Hint: write forward$"):
        call_learner(lambda x: Blank()(x), torch.ones(2))


def test_call_learner_reports_a_not_implemented_error_from_inside_torch():
    with pytest.raises(CheckFailed, match="^your function raised NotImplementedError: .*'Bool'.*no such operation"):
        call_learner(torch_lacks_it, torch.ones(2))
    with pytest.raises(CheckFailed, match='your function raised NotImplementedError: Module .*"forward".*inside torch'):
        call_learner(lambda x: NoForward()(x), torch.ones(2))


def test_is_blank_exercise_tells_a_raise_statement_from_torchs_own_error():
    for fn, blank in [(torch_lacks_it, False), (lambda x: NoForward()(x), False)]:
        with pytest.raises(NotImplementedError) as error:
            fn(torch.ones(2))
        assert is_blank_exercise(error.value) is blank
    assert is_blank_exercise(NotImplementedError("never raised")) is True


def test_call_learner_adds_the_explanation_of_a_crash():
    def explain(error):
        return "divide by something else" if isinstance(error, ZeroDivisionError) else None

    with pytest.raises(CheckFailed, match=r"division by zero \(divide by something else\)$"):
        call_learner(lambda: 1 / 0, returns=float, explain=explain)
    with pytest.raises(CheckFailed, match="^your function raised KeyError: 'a'$"):
        call_learner(lambda: {}["a"], returns=float, explain=explain)


def test_call_learner_asks_for_the_function_itself():
    with pytest.raises(CheckFailed, match="^expected your function itself, got Tensor of dtype float32 and shape"):
        call_learner(torch.ones(2))


# ---- the time limit ---------------------------------------------------------------------------

LIMIT = 0.1  # seconds: the limit the tests below set in place of the 60 s a learner gets
GIVE_UP = 20  # seconds after which a "never-ending" function returns None: a broken limit fails, not hangs


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(utils.checks.core, "TIME_LIMIT", LIMIT)


def never_returns(*args):
    """A `while` whose condition never changes (given up after GIVE_UP seconds)."""
    out, start = [], time.monotonic()
    while len(out) < 1 and time.monotonic() - start < GIVE_UP:  # the learner forgot to append
        pass


def alarm_state():
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)


@pytest.mark.parametrize("checker", CHECKERS.values(), ids=CHECKERS.keys())
def test_every_checker_stops_a_function_that_never_returns(checker, short_limit):
    before = alarm_state()
    with pytest.raises(CheckFailed, match=r"^your function ran for more than 0.1 s .*and was stopped: an endless loop"):
        checker(never_returns)
    assert alarm_state() == before  # the handler is back, and no timer is left running


def test_the_time_limit_names_the_case_and_a_following_check_works(short_limit, capsys):
    def my_patchify(images, patch_size):  # the finding's learner (given up after GIVE_UP seconds)
        out, start = [], time.monotonic()
        while len(out) < images.shape[0] and time.monotonic() - start < GIVE_UP:  # forgot to append
            pass

    start = time.monotonic()
    with pytest.raises(CheckFailed) as failure:
        check_patchify(my_patchify)
    assert time.monotonic() - start < 2
    assert str(failure.value).startswith(
        "your function ran for more than 0.1 s for images of shape (2, 3, 32, 32) and patch size 8 and was "
        "stopped: an endless loop (a `while` whose condition never changes?), or a Python loop over every pixel"
    )
    check_patchify(patchify)  # the same session goes on
    assert capsys.readouterr().out.startswith("✓ patchify matches the reference")


def test_the_default_time_limit_is_a_minute():
    assert utils.checks.core.TIME_LIMIT == 60


def test_the_time_limit_is_not_caught_by_the_learners_except_exception(short_limit):
    def stubborn():
        start = time.monotonic()
        while time.monotonic() - start < GIVE_UP:
            try:  # noqa: SIM105 (as a learner writes it)
                time.sleep(1)
            except Exception:  # swallows every error, not the time limit
                pass

    with pytest.raises(CheckFailed, match="ran for more than 0.1 s and was stopped"):
        call_learner(stubborn, returns=object)


def test_a_ctrl_c_still_raises_keyboard_interrupt(short_limit, monkeypatch):
    monkeypatch.setattr(utils.checks.core, "TIME_LIMIT", 30)
    before = alarm_state()
    timer = threading.Timer(0.1, _thread.interrupt_main)  # Kernel > Interrupt, or Ctrl-C
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            check_patchify(never_returns)
    finally:
        timer.cancel()
    assert alarm_state() == before


def test_an_earlier_handler_and_timer_are_put_back(short_limit):
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        assert call_learner(lambda: 1, returns=int) == 1
        with pytest.raises(CheckFailed, match="was stopped"):
            call_learner(never_returns, returns=object)
        handler, (left, _) = alarm_state()
        assert handler is not signal.SIG_DFL and not fired and 4.0 < left <= 5.0
        signal.setitimer(signal.ITIMER_REAL, 0.02)  # one that falls due while the learner's function runs
        assert call_learner(lambda: time.sleep(0.05), returns=object) is None
        deadline = time.monotonic() + 2
        while not fired and time.monotonic() < deadline:  # it goes off as soon as the function is done
            time.sleep(0.001)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_outside_the_main_thread_the_function_runs_without_a_limit(short_limit):
    def slow():
        time.sleep(3 * LIMIT)
        return "done"

    assert outcome_within(10, lambda: call_learner(slow, returns=str)) == "done"


# ---- describe -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "^None"),
        (1.5, "^float 1.5$"),
        ("x" * 50, "^str$"),
        ((torch.ones(1), None), r"^tuple of 2 \(Tensor, NoneType\)$"),
        (list(range(6)), r"^list of 6 \(int, int, int, int, ...\)$"),
        (torch.ones(2, 3, dtype=torch.float64), r"^Tensor of dtype float64 and shape \(2, 3\)$"),
        ({"a": 1}, "^dict$"),
    ],
)
def test_describe_names_what_came(value, words):
    assert re.search(words, describe(value))


# ---- whole_number ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, number",
    [
        (torch.tensor(2.5), 2.5),
        (torch.tensor([2.5], dtype=torch.float64), 2.5),
        (np.array(2.5), 2.5),
        (np.float32(2.5), 2.5),
        (np.bool_(True), True),
        (torch.tensor(True), True),
        (2.5, 2.5),
        ("2.5", "2.5"),
        (torch.ones(2), None),  # several numbers: the tensor itself
    ],
)
def test_python_number_takes_the_number_out_of_a_tensor_or_array(value, number):
    got = python_number(value, "x")
    if number is None:
        assert got is value
    else:
        assert got == number and type(got) is type(number)


@pytest.mark.parametrize("value", [0.25, np.float64(0.25), np.array(0.25), torch.tensor(0.25), torch.tensor([0.25])])
def test_real_number_accepts_one_number_of_any_kind(value):
    assert real_number(value, "p") == 0.25 and type(real_number(value, "p")) is float


@pytest.mark.parametrize(
    "value, words",
    [
        (True, "^p must be a number, got bool True for x$"),
        ("0.5", "^p must be a number, got str '0.5' for x$"),
        (torch.ones(3), r"^p must be a number, got Tensor of dtype float32 and shape \(3,\) for x$"),
        (torch.tensor(0.5, device="meta"), "^p is a tensor on the meta device for x, which keeps shapes but no values"),
    ],
)
def test_real_number_refuses_anything_else_by_name(value, words):
    with pytest.raises(CheckFailed, match=words):
        real_number(value, "p", "for x")


def test_a_count_on_the_meta_device_is_named_not_a_crash():
    with pytest.raises(CheckFailed, match=r"^n is a tensor on the meta device, .*p.numel\(\)"):
        whole_number(torch.tensor(3, device="meta"), "n")


@pytest.mark.parametrize(
    "value", [3, 3.0, np.int64(3), np.float32(3.0), torch.tensor(3), torch.tensor([3.0]), np.array([3])]
)
def test_whole_number_accepts_any_whole_number(value):
    assert whole_number(value, "n") == 3
    assert type(whole_number(value, "n")) is int


@pytest.mark.parametrize(
    "value, words",
    [
        (2.5, "got 2.5"),
        (float("nan"), "got nan"),
        (float("inf"), "got inf"),
        (True, "got bool True"),
        (np.bool_(True), "got bool"),
        ("3", "got str '3'"),
        (None, "got None"),
        (torch.tensor([1, 2]), r"got Tensor of dtype int64 and shape \(2,\)"),
        (torch.tensor(True), "got Tensor of dtype bool"),
        (1 + 2j, "got complex"),
    ],
)
def test_whole_number_refuses_anything_else_by_name(value, words):
    with pytest.raises(CheckFailed, match=f"^n must be a whole number, {words}"):
        whole_number(value, "n")


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


@pytest.mark.parametrize(
    "got, words",
    [
        (torch.ones(2, 3, dtype=torch.int64), "^expected a float32 tensor, got int64 for x: whole numbers"),
        (torch.ones(2, 3, dtype=torch.bool), "^expected a float32 tensor, got bool for x: True/False values"),
        (torch.ones(2, 3, dtype=torch.float16), "^expected a float32 tensor, got float16 for x: half precision"),
        ([[1.0] * 3] * 2, "^expected a torch.Tensor, got list of 2"),
        (None, "^expected a torch.Tensor, got None"),
    ],
)
def test_compare_names_the_wrong_type_or_dtype(got, words):
    with pytest.raises(CheckFailed, match=words):
        compare(got, torch.ones(2, 3), "for x")


@pytest.mark.parametrize(
    "layout, words",
    [
        (lambda x: x.to_sparse(), r"^expected an ordinary \(dense\) tensor, got a sparse_coo one for x: .*to_dense"),
        (lambda x: x.to_sparse_csr(), r"got a sparse_csr one for x"),
        (lambda x: torch.nested.nested_tensor(list(x)), r"got a nested one for x"),
    ],
    ids=["sparse", "sparse_csr", "nested"],
)
@pytest.mark.filterwarnings("ignore::UserWarning")  # sparse CSR and nested tensors are in beta
def test_compare_names_a_tensor_that_is_not_dense(layout, words):
    x = torch.rand(2, 3)
    with pytest.raises(CheckFailed, match=words):
        compare(layout(x), x, "for x")


def test_compare_takes_a_more_precise_float_but_not_a_less_precise_one():
    x = torch.rand(2, 3)
    assert compare(x.double(), x, "for x") == "exact"  # the same numbers in float64: the values are compared
    assert compare(x.double() + 1e-9, x, "for x").startswith("approximate")
    with pytest.raises(CheckFailed, match=r"^expected a float64 tensor, got float32 for x: .*dtype=x.dtype"):
        compare(x.float(), x.double(), "for x")  # float32 cannot hold a float64 reference's digits
    assert compare(torch.ones(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64), "for x") == "exact"
    assert compare(torch.ones(2), torch.ones(2, dtype=torch.int64), "for x") == "exact"  # an integer reference


def test_compare_names_the_dtype_with_the_name():
    with pytest.raises(CheckFailed, match="^out: expected a float32 tensor, got int64 for x"):
        compare(torch.ones(2, dtype=torch.int64), torch.ones(2), "for x", name="out")


def test_compare_counts_nan_and_inf_with_the_hint():
    x = torch.zeros(2, 3)
    got = x.clone()
    got[0, :2] = float("nan")
    with pytest.raises(CheckFailed, match=r"^w: 2 of 6 values are NaN for x: softmax of a hidden row$"):
        compare(got, x, "for x", name="w", nan_hint="softmax of a hidden row")
    with pytest.raises(CheckFailed, match=r"^1 of 6 values are infinite for x$"):
        compare(torch.tensor([[0.0, float("inf"), 0], [0, 0, 0]]), x, "for x")
    expected = torch.tensor([float("-inf"), 1.0])  # where the reference itself is infinite, so may the answer be
    assert compare(expected.clone(), expected, "for x") == "exact"


def test_compare_names_a_mistake_with_nan_before_counting_nan():
    x = torch.rand(2, 3)
    mistake = x.clone()
    mistake[0] = float("nan")
    with pytest.raises(CheckFailed, match=r"^filled with \+inf \(for x\)$"):
        compare(mistake.clone(), x, "for x", mistakes={"filled with +inf": mistake})


def test_a_mistake_that_is_all_nan_names_nothing():
    x = torch.rand(2, 3)
    all_nan = torch.full((2, 3), float("nan"))
    raise_if_known_mistake(all_nan, {"it would name any NaN result": all_nan}, "for x")
    with pytest.raises(CheckFailed, match="^6 of 6 values are NaN for x$"):
        compare(all_nan, x, "for x", mistakes={"it would name any NaN result": all_nan})


# ---- varies_between_calls -------------------------------------------------------------------


def test_varies_between_calls_tells_a_random_result_from_a_fixed_one():
    expected = torch.zeros(2, 3)
    fixed = torch.ones(2, 3)
    assert not varies_between_calls(lambda: fixed.clone(), fixed, expected)
    assert varies_between_calls(lambda: torch.rand(2, 3), torch.rand(2, 3), expected)
    assert varies_between_calls(lambda: torch.ones(3, 2), fixed, expected)  # another shape the second time
    nan = torch.full((2, 3), float("nan"))
    assert not varies_between_calls(lambda: nan.clone(), nan, expected)  # NaN in the same places is the same
    assert not varies_between_calls(lambda: torch.rand(4), torch.rand(4), expected)  # not comparable: not asked


# ---- the shared test helper: each mistake named as itself --------------------------------------


def checker_naming(messages):
    """A checker that fails with messages[wrong]."""

    def checker(wrong):
        raise CheckFailed(messages[wrong])

    return checker


def test_assert_each_named_as_itself_catches_a_mistake_named_as_another():
    apart = checker_naming({"a": "transposed", "b": "not scaled"})
    assert assert_each_named_as_itself(apart, [("a", "transposed"), ("b", "not scaled")]) == [
        "transposed",
        "not scaled",
    ]
    both = checker_naming({"a": "transposed", "b": "transposed and not scaled"})
    with pytest.raises(AssertionError, match=r"'not scaled' is also named as \[0\]"):
        assert_each_named_as_itself(both, [("a", "transposed"), ("b", "not scaled")])
    with pytest.raises(AssertionError, match=r"'S' is also named as \['T'\]"):
        assert_each_named_as_itself(both, [("T", "a", "transposed"), ("S", "b", "not scaled")])
    # unless that one is part of it by name, or the two cannot be told apart
    assert_each_named_as_itself(both, [("T", "a", "transposed"), ("T + S", "b", "not scaled")])
    same = checker_naming({"a": "transposed", "b": "transposed"})
    assert_each_named_as_itself(same, [("a", "^transposed$"), ("b", "transposed")])
