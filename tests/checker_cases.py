"""What the checker tests share: a list of typical mistakes is run through its checker, and each
must be named as itself and as no other mistake."""

import re
from collections.abc import Callable, Sequence

import pytest

from utils.checks.core import CheckFailed


def assert_each_named_as_itself(checker: Callable, mistakes: Sequence[tuple]) -> list[str]:
    """Run `checker` on every wrong function of `mistakes`; each failure must match the mistake's
    own regex and no other mistake's, unless the two cannot be told apart (the same message, or the
    same regex) or the other is part of it (a mistake named "A + B" may be named as A and as B).

    Args:
        mistakes: (wrong, regex) pairs, or (name, wrong, regex) triples.
    Returns:
        the failure messages, one per mistake.
    """
    cases = [case if len(case) == 3 else (None, *case) for case in mistakes]
    messages = []
    for _, wrong, words in cases:
        with pytest.raises(CheckFailed, match=words) as failure:
            checker(wrong)
        messages.append(str(failure.value))
    for (name, _, words), message in zip(cases, messages, strict=True):
        parts = name.split(" + ") if name else []
        misnamed = [
            other if other is not None else j
            for j, ((other, _, regex), other_message) in enumerate(zip(cases, messages, strict=True))
            if regex != words and other_message != message and other not in parts and re.search(regex, message)
        ]
        assert not misnamed, f"mistake {name or words!r} is also named as {misnamed}: {message}"
    return messages
