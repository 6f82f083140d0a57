"""The learner's exercise checkers, one module per lesson (`utils.checks.patches` for lesson 1, ...).

Each checker compares the learner's function with the course's reference on random inputs and
names the mistake in words; `core` holds what they share (`call_learner`, `compare`, `CheckFailed`)
and `claim`, with which a lesson asserts what it prints. Imported in IPython, it makes a failed check
show its sentence instead of a traceback (`display`).
"""

from utils.checks.core import CheckFailed, claim
from utils.checks.display import show_verdicts_plainly

show_verdicts_plainly()

__all__ = ["CheckFailed", "claim"]
