"""Checkers for lesson 14's exercises: the gradient of a batch from its unequal shares, and a global
batch planned over processes and micro-batches."""

from collections.abc import Callable

import torch

from utils.checks.core import CheckFailed, call_learner, compare, describe, summarize, whole_number

# (sizes of the shares): unequal as an epoch's last batch is, then equal, then one share alone
SHARE_CASES = [(40, 24), (3, 5, 8), (16, 16, 16, 16), (7,)]


def check_combine_gradients(fn: Callable[[list[torch.Tensor], list[int]], torch.Tensor]) -> None:
    """Check combine_gradients(gradients, sizes) -> the gradient of the mean loss over every image,
    from each share's gradient of its own mean loss (gradients[r], any shape) and its size."""
    generator = torch.Generator().manual_seed(14)
    verdicts = []
    for sizes in SHARE_CASES:
        gradients = [torch.randn(4, 3, generator=generator) for _ in sizes]
        weights = torch.tensor(sizes, dtype=torch.float32)
        stacked = torch.stack(gradients)  # (W, 4, 3)
        expected = (weights[:, None, None] * stacked).sum(0) / weights.sum()
        where = f"for shares of {list(sizes)} images"
        got = call_learner(fn, [g.clone() for g in gradients], list(sizes), where=where)
        world = len(sizes)
        mistakes = {
            "a share of n images must count n times: weight each share's gradient by its size, then divide "
            "by the total number of images (a plain mean of the shares is right only when they are equal)": (
                stacked.mean(0)
            ),
            "you summed the shares' gradients: each is already a mean over its share, so weight them by "
            "their sizes and divide by the total number of images": stacked.sum(0),
            "weighted by the sizes, but not divided by the total number of images: that is the gradient of "
            "the summed loss, not of the mean": (weights[:, None, None] * stacked).sum(0),
            "weighted by the sizes but divided by the number of shares: divide by the total number of images instead": (
                weights[:, None, None] * stacked
            ).sum(0)
            / world,
            "you divided each gradient by its share's size: a share's gradient is already a mean, so "
            "multiply by the size to get its sum": (stacked / weights[:, None, None]).sum(0) / world,
        }
        if world == 1 or len(set(sizes)) == 1:
            mistakes = {reason: wrong for reason, wrong in mistakes.items() if not torch.allclose(wrong, expected)}
        verdicts.append(
            compare(
                got,
                expected,
                where,
                mistakes=mistakes,
                atol=1e-5,
                shape_wording="expected the shape of one gradient, {}",
            )
        )
    print(
        f"✓ combine_gradients matches the whole batch's gradient on {len(SHARE_CASES)} ways to share it: "
        f"{summarize(verdicts)}"
    )


# (global batch, processes, most images one process can hold at once) -> (micro-batch, accumulate)
PLAN_CASES = {
    (256, 4, 64): (64, 1),
    (256, 4, 48): (32, 2),
    (96, 2, 20): (16, 3),
    (128, 1, 128): (128, 1),
    (60, 3, 7): (5, 4),
}
IMPOSSIBLE = [(100, 3, 50), (90, 4, 30)]  # the processes cannot take equal shares: W does not divide G


def _plan(global_batch: int, world_size: int, max_per_process: int) -> tuple[int, int] | None:
    for accumulate in range(1, global_batch + 1):
        shares = world_size * accumulate
        if global_batch % shares == 0 and global_batch // shares <= max_per_process:
            return global_batch // shares, accumulate
    return None


def check_plan_batch(fn: Callable[[int, int, int], tuple[int, int]]) -> None:
    """Check plan_batch(global_batch, world_size, max_per_process) -> (micro_batch, accumulate): the
    fewest micro-batches per process per step such that every process's micro-batch holds the same
    whole number of images, at most max_per_process; ValueError when there is none."""
    for case, expected in PLAN_CASES.items():
        assert _plan(*case) == expected, case  # the table above is the rule's
        G, W, M = case
        where = f"for a global batch of {G} on {W} process(es), at most {M} images at once"
        got = call_learner(fn, G, W, M, returns=tuple, expected="a pair (micro_batch, accumulate)", where=where)
        if len(got) != 2:
            raise CheckFailed(f"expected a pair (micro_batch, accumulate), got {describe(got)} {where}")
        micro, accumulate = (
            whole_number(value, name, where) for value, name in zip(got, ("micro_batch", "accumulate"))
        )
        if (micro, accumulate) == expected:
            continue
        if (accumulate, micro) == expected:
            raise CheckFailed(f"the pair is the wrong way round: return (micro_batch, accumulate) {where}")
        if micro * accumulate == G and micro <= M:
            raise CheckFailed(
                f"you got (micro_batch {micro}, accumulate {accumulate}): that splits the batch for one process; "
                f"with {W} processes each takes only 1/{W} of every global batch {where}"
            )
        if micro * accumulate * W != G:
            raise CheckFailed(
                f"{W} processes x {accumulate} micro-batches x {micro} images is {W * accumulate * micro}, not the "
                f"global batch of {G}: every image of the global batch must be in exactly one micro-batch {where}"
            )
        if micro > M:
            raise CheckFailed(
                f"a micro-batch of {micro} images is more than the {M} a process can hold at once: "
                f"accumulate more micro-batches {where}"
            )
        raise CheckFailed(
            f"(micro_batch {micro}, accumulate {accumulate}) works, but fewer micro-batches do too: "
            f"the expected plan is {expected} (more, smaller micro-batches only make a step slower) {where}"
        )
    for G, W, M in IMPOSSIBLE:
        where = f"for a global batch of {G} on {W} process(es), at most {M} images at once"
        try:
            got = fn(G, W, M)
        except ValueError:
            continue
        except NotImplementedError:
            raise
        except Exception as error:
            raise CheckFailed(
                f"expected ValueError {where}, your function raised {type(error).__name__}: {error}"
            ) from None
        raise CheckFailed(
            f"no plan splits that evenly (try every accumulate: none gives equal whole micro-batches within "
            f"the limit), so raise ValueError saying why; you returned {describe(got)} {where}"
        )
    print(
        f"✓ plan_batch finds the fewest micro-batches on {len(PLAN_CASES)} plans "
        f"and refuses {len(IMPOSSIBLE)} impossible ones"
    )
