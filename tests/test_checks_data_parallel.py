"""Lesson 14's checkers: a right answer passes, and each typical mistake is named as itself."""

import pytest
import torch
from checker_cases import assert_each_named_as_itself

from utils.checks.core import CheckFailed
from utils.checks.data_parallel import check_combine_gradients, check_plan_batch


def combine(gradients, sizes):
    weights = torch.tensor(sizes, dtype=gradients[0].dtype)
    return sum(w * g for w, g in zip(weights, gradients)) / weights.sum()


def plan(global_batch, world_size, max_per_process):
    if global_batch % world_size:
        raise ValueError(f"{world_size} processes cannot take equal shares of {global_batch}")
    share = global_batch // world_size
    for accumulate in range(1, share + 1):
        if share % accumulate == 0 and share // accumulate <= max_per_process:
            return share // accumulate, accumulate
    raise ValueError("no plan")


def test_right_answers_pass(capsys):
    check_combine_gradients(combine)
    check_combine_gradients(lambda g, n: (torch.stack(g).double() * torch.tensor(n)[:, None, None]).sum(0) / sum(n))
    check_plan_batch(plan)
    out = capsys.readouterr().out
    assert out.count("✓") == 3


def test_the_combine_mistakes_are_named():
    stack = torch.stack
    assert_each_named_as_itself(
        check_combine_gradients,
        [
            ("plain mean", lambda g, n: stack(g).mean(0), "a share of n images must count n times"),
            ("sum", lambda g, n: stack(g).sum(0), "you summed the shares' gradients"),
            (
                "weighted sum",
                lambda g, n: sum(k * x for k, x in zip(n, g)),
                "not divided by the total number of images",
            ),
            ("by shares", lambda g, n: sum(k * x for k, x in zip(n, g)) / len(n), "divided by the number of shares"),
            ("divided", lambda g, n: sum(x / k for k, x in zip(n, g)) / len(n), "you divided each gradient by its"),
            ("a list", lambda g, n: [x * k for k, x in zip(n, g)], "expected a torch.Tensor"),
            ("one share", lambda g, n: g[0], "values differ"),
        ],
    )


def test_the_plan_mistakes_are_named():
    def one_process(G, W, M):
        return plan(G, 1, M)

    def not_minimal(G, W, M):
        micro, accumulate = plan(G, W, M)
        return (micro // 2, accumulate * 2) if micro % 2 == 0 else (micro, accumulate)

    def ceiling(G, W, M):
        accumulate = -(-G // (W * M))
        return G // (W * accumulate), accumulate

    assert_each_named_as_itself(
        check_plan_batch,
        [
            ("swapped", lambda G, W, M: plan(G, W, M)[::-1], "the wrong way round"),
            ("one process", one_process, "each takes only 1/"),
            ("ceiling", ceiling, "every image of the global batch must be in exactly one micro-batch"),
            ("too big", lambda G, W, M: (G // W, 1), "more than the .* a process can hold"),
            ("not minimal", not_minimal, "fewer micro-batches do too"),
            ("a list", lambda G, W, M: list(plan(G, W, M)), "expected a pair"),
        ],
    )


def test_an_impossible_plan_must_raise_value_error():
    def returns_something(G, W, M):
        try:
            return plan(G, W, M)
        except ValueError:
            return (G // W, 1)

    with pytest.raises(CheckFailed, match="so raise ValueError saying why"):
        check_plan_batch(returns_something)

    def wrong_error(G, W, M):
        if G % W:
            raise ZeroDivisionError("no")
        return plan(G, W, M)

    with pytest.raises(CheckFailed, match="expected ValueError.*ZeroDivisionError"):
        check_plan_batch(wrong_error)
