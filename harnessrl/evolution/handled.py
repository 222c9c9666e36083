"""Failures an evolution point has handled: committed an update for, or given up on.

A handled failure is left out of ``get_failures`` from then on: by its id, and by its key (kind, task,
criterion or feature) up to the step of the point that handled it, so the same failure detected again at
a later step is a recurrence and is offered again. A failure given up only because its trial or commit was
refused for want of a hold (*interrupted*) is not handled: it is offered again at the next point. The tool
service writes each record as a ``failure_handled`` event; :meth:`HandledFailures.replay_event` rebuilds the
record from those events when a run resumes (:mod:`harnessrl.trainer.resume` asks the service to replay them).

The record takes no lock of its own: the tool service calls it under its lock, except
:meth:`HandledFailures.interrupt`, which the training hold calls under its condition (a set's ``add``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessrl.records.failures import Failure

__all__ = ["FailureKey", "HandledFailures"]

FailureKey = tuple[str, str, str | None]
"""(kind, task, criterion or feature): :attr:`harnessrl.records.failures.Failure.key`."""


class HandledFailures:
    """Which failures evolution points handled (see the module docstring)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._through: dict[FailureKey, int] = {}  # a failure's key: handled up to the step of this point
        self._interrupted: set[str] = set()  # failures whose trial or commit was refused for want of a hold

    def is_handled(self, failure: Failure) -> bool:
        """Whether an evolution point handled ``failure`` already (a later recurrence is not handled)."""
        through = self._through.get(failure.key)
        return failure.id in self._ids or (through is not None and failure.step <= through)

    def interrupt(self, failure_id: str) -> None:
        """``failure_id``'s trial or commit was refused for want of a hold."""
        self._interrupted.add(failure_id)

    def offered_again(self, failure_id: str, outcome: str) -> bool:
        """Whether ``failure_id``, ending with ``outcome``, stays unhandled: given up (not committed) after its
        trial or commit was refused for want of a hold. Clears the refusal either way."""
        interrupted = failure_id in self._interrupted
        self._interrupted.discard(failure_id)
        return interrupted and outcome != "committed"

    def add(self, failure_id: str, key: FailureKey | None, step: int) -> None:
        """Record ``failure_id`` (with ``key``, when the failure is known) as handled by the point at ``step``."""
        self._ids.add(failure_id)
        if key is not None:
            self._through[key] = max(step, self._through.get(key, step))

    def replay_event(self, event: Mapping[str, Any], through_step: int) -> None:
        """Take in one event of a resumed run: a ``failure_handled`` by a point at or before ``through_step``
        (the checkpoint the run goes on from: the steps after it are trained again, and what they show is new)."""
        if event.get("kind") != "failure_handled" or not event.get("failure_id"):
            return
        step = event.get("point_step", event.get("step"))
        if not isinstance(step, int) or step > through_step:
            return
        known = event.get("failure_kind") and event.get("task_id")
        key = (event["failure_kind"], event["task_id"], event.get("criterion")) if known else None
        self.add(str(event["failure_id"]), key, step)
