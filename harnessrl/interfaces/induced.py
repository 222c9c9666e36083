"""A candidate criterion as induction describes it, and a stated requirement as the prompt reading finds it.

The vocabulary the prompt reading (:mod:`harnessrl.interfaces.requirement_reading`), the reference's criteria
(:mod:`harnessrl.interfaces.reference_criteria`) and the induction (:mod:`harnessrl.interfaces.induction`) share:

- :data:`Found` is a stated requirement as (check, criterion text);
- :class:`InducedCheck` is a candidate criterion: its check, its text, where it came from, how many rollouts pass it.

The checks are those of the check library (:mod:`harnessrl.data.checks`), built, never dicts: the kind of
requirement one states is its :meth:`~harnessrl.data.checks.WordCount.requirement_key`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnessrl.data.checks import Check

__all__ = ["Found", "InducedCheck"]

Found = tuple[Check, str]  # a stated requirement: (check, criterion text)


@dataclass(frozen=True)
class InducedCheck:
    """A candidate criterion: its check, its text, where it came from, and how many of the rollouts pass it."""

    check: Check
    text: str
    source: str  # "prompt": a requirement the prompt states; "reference": a bound the reference answer meets
    passes: int
    total: int

    @property
    def balance(self) -> float:
        """How evenly it splits the rollouts: 1 at half passing, 0 when all pass or all fail."""
        return 2 * min(self.passes, self.total - self.passes) / self.total if self.total else 0.0
