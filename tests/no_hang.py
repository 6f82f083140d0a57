"""Calls that once looped forever, run so that a regression fails its test instead of hanging the suite."""

import re
import threading


def outcome_within(seconds: float, call):
    """What `call()` returned or raised, from a daemon thread given `seconds`; fails if it is still running."""
    outcome = []

    def run():
        try:
            outcome.append(call())
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still running after {seconds} s: it hangs"
    return outcome[0]


def refused(call, error: type[Exception], match: str, seconds: float = 30) -> None:
    """Assert that `call()` raises `error` with a message matching `match`, within `seconds`."""
    got = outcome_within(seconds, call)
    assert isinstance(got, error), f"expected {error.__name__}, got {got!r}"
    assert re.search(match, str(got)), f"{match!r} not in {str(got)!r}"
