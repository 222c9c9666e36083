"""Failures an evolution point has handled: committed an update for, or given up on.

A handled failure is left out of ``get_failures`` from then on: by its id, and by its key (kind, task,
criterion or feature) up to the step of the point that handled it, so the same failure detected again at
a later step is a recurrence and is offered again. A failure given up only because its trial or commit was
refused for want of a hold (*interrupted*) is not handled: it is offered again at the next point. The tool
service writes each record as a ``failure_handled`` event; :meth:`HandledFailures.replay_event` rebuilds the
record from those events when a run resumes (:mod:`harnessrl.trainer.resume` asks the service to replay them).

A failure *deferred* (its candidate pending: the critic's data cannot decide yet) is not handled either, but it
**waits**: it is offered again only once a group of a task its candidate covers has been graded since, because the
critic would otherwise look at the same evidence again and decide nothing (gold-bench seed 4 at ef48919 offered a
pending `nocomma` failure at four evolution points in a row on the one group of step 1, each a proposal, a trial
and a verdict that changed nothing, each taking one of the point's failure slots). The rubric audit's findings
wait the same way, by their own count (:meth:`harnessrl.evolution.audit.RubricAudit.ready`). A ``deferred`` event
records what the wait needs (the tasks and their graded groups), and a resumed run replays it.

The record takes no lock of its own: the tool service calls it under its lock, except
:meth:`HandledFailures.interrupt`, which the training hold calls under its condition (a set's ``add``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harnessrl.records.event_payloads import DeferredPayload, FailureHandledPayload

if TYPE_CHECKING:
    from harnessrl.records.events import Event
    from harnessrl.records.failures import Failure

__all__ = ["FailureKey", "HandledFailures"]

FailureKey = tuple[str, str, str | None]
"""(kind, task, criterion or feature): :attr:`harnessrl.records.failures.Failure.key`."""


class HandledFailures:
    """Which failures evolution points handled (see the module docstring)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}  # a handled failure's id -> its outcome (committed, covered, gave_up)
        self._through: dict[FailureKey, int] = {}  # a failure's key: handled up to the step of this point
        self._interrupted: set[str] = set()  # failures whose trial or commit was refused for want of a hold
        # a deferred failure's key: the tasks its pending candidate covers, and their groups graded when deferred
        self._deferred: dict[FailureKey, tuple[tuple[str, ...], int]] = {}

    def is_handled(self, failure: Failure) -> bool:
        """Whether an evolution point handled ``failure`` already (a later recurrence is not handled)."""
        through = self._through.get(failure.key)
        return failure.id in self._ids or (through is not None and failure.step <= through)

    def defer(self, key: FailureKey, tasks: Sequence[str], graded: int) -> None:
        """The failure with ``key`` was deferred when ``tasks`` (those its pending candidate covers) had ``graded``
        groups graded in all."""
        self._deferred[key] = (tuple(tasks), graded)

    def waiting(self, failure: Failure, graded: Callable[[str], int]) -> bool:
        """Whether ``failure`` was deferred and no group of the tasks its candidate covered has been graded since
        (``graded``: a task's groups graded so far, a count that only grows)."""
        deferred = self._deferred.get(failure.key)
        return deferred is not None and sum(graded(t) for t in deferred[0]) <= deferred[1]

    def interrupt(self, failure_id: str) -> None:
        """``failure_id``'s trial or commit was refused for want of a hold."""
        self._interrupted.add(failure_id)

    def offered_again(self, failure_id: str, outcome: str) -> bool:
        """Whether ``failure_id``, ending with ``outcome``, stays unhandled: given up (not committed) after its
        trial or commit was refused for want of a hold. Clears the refusal either way."""
        interrupted = failure_id in self._interrupted
        self._interrupted.discard(failure_id)
        return interrupted and outcome != "committed"

    def outcome(self, failure_id: str) -> str | None:
        """How an evolution point handled ``failure_id`` (None: not handled)."""
        return self._ids.get(failure_id)

    def add(self, failure_id: str, key: FailureKey | None, step: int, outcome: str = "handled") -> None:
        """Record ``failure_id`` (with ``key``, when the failure is known) as handled by the point at ``step``."""
        self._ids.setdefault(failure_id, outcome)
        if key is not None:
            self._through[key] = max(step, self._through.get(key, step))

    def replay_event(self, event: Event, through_step: int) -> None:
        """Take in one event of a resumed run: a ``failure_handled`` by a point at or before ``through_step``
        (the checkpoint the run goes on from: the steps after it are trained again, and what they show is new), or a
        ``deferred`` with what its wait needs."""
        if event.kind not in ("failure_handled", "deferred"):
            return
        p = event.payload()
        if not isinstance(p, FailureHandledPayload | DeferredPayload) or not p.failure_id:
            return
        step = (
            p.point_step if isinstance(p, FailureHandledPayload) and "point_step" in p.model_fields_set else event.step
        )
        if step is None or step > through_step:
            return
        key = (p.failure_kind, p.task_id, p.criterion) if p.failure_kind and p.task_id else None
        if isinstance(p, FailureHandledPayload):
            self.add(p.failure_id, key, step, p.outcome or "handled")
        elif key is not None and p.graded_groups is not None and p.covers:
            self.defer(key, p.covers, p.graded_groups)
