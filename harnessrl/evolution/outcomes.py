"""What a committed harness update did: its tasks' learning signal in the groups trained after it, against as
many before it.

:class:`OutcomeTracker` starts measuring when an update is committed (:meth:`OutcomeTracker.expect`: the
changed tasks' groups before it, from the recorder) and is fed every trained step
(:meth:`OutcomeTracker.observe`); an outcome is measured on ``groups`` of the changed tasks' groups after the
update, or on what came within ``steps`` steps of it (a parked task may never come back). The tool service
writes each measured outcome to the training memory (``what_worked`` ranks by it) and to the events.

Locking: the tracker has a lock of its own, a leaf (nothing else is taken while it is held). It is fed from
the training thread inside a step, with the trainer's policy lock held, so it must never wait on the tool
service's lock, which a trial holds while it waits for the policy lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessrl.records.steps import GroupRecord, Recorder, StepRecord

__all__ = ["MeasuredOutcome", "OutcomeTracker", "outcome"]


def outcome(before: Sequence[GroupRecord], after: Sequence[GroupRecord], applied: int, step: int) -> dict[str, Any]:
    """What a committed update did to its tasks' learning signal: the share of their groups that give
    signal (reward std at or above the trainer's flat eps) and their mean reward std, after vs before.
    ``recovered``: more groups give signal than before (None: no group came after, e.g. a parked task)."""

    def share(groups: Sequence[GroupRecord]) -> float | None:
        return round(sum(not g.flat and g.std is not None for g in groups) / len(groups), 4) if groups else None

    def std(groups: Sequence[GroupRecord]) -> float | None:
        vals = [g.std for g in groups if g.std is not None]
        return round(sum(vals) / len(vals), 4) if vals else None

    b, a = share(before), share(after)
    return {
        "applied_step": applied,
        "measured_at_step": step,
        "groups_before": len(before),
        "groups_after": len(after),
        "signal_share_before": b,
        "signal_share_after": a,
        "reward_std_before": std(before),
        "reward_std_after": std(after),
        "recovered": None if a is None else a > (b or 0.0),
    }


@dataclass
class _Pending:
    task_ids: list[str]
    applied_step: int
    before: list[GroupRecord]
    after: list[GroupRecord] = field(default_factory=list)


@dataclass(frozen=True)
class MeasuredOutcome:
    """A committed candidate's outcome, measured at ``step``: its tasks and :func:`outcome`'s fields."""

    candidate_id: str
    task_ids: list[str]
    step: int
    fields: dict[str, Any]


class OutcomeTracker:
    """The outcomes of committed updates, pending until measured (see the module docstring).

    Args:
        recorder: the trainer's recorder (the groups trained before an update).
        groups: an outcome is measured on this many of the changed tasks' groups after the update ...
        steps: ... or on what came within this many steps of it.
    """

    def __init__(self, recorder: Recorder, groups: int = 2, steps: int = 10):
        self.recorder = recorder
        self.groups, self.steps = groups, steps
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}

    def expect(self, candidate_id: str, task_ids: list[str], applied_step: int) -> None:
        """Start measuring the outcome of ``candidate_id``, applied from ``applied_step`` to ``task_ids``: their
        groups before it, now."""
        before = [
            g
            for record in list(self.recorder.steps.values())
            if record.step < applied_step
            for g in record.observed
            if g.task_id in task_ids
        ][-self.groups :]
        with self._lock:
            self._pending[candidate_id] = _Pending(task_ids, applied_step, before)

    def observe(self, record: StepRecord) -> list[MeasuredOutcome]:
        """A trained step's record: its groups of the changed tasks feed the pending outcomes; returns those
        measured now (and no longer pending)."""
        with self._lock:
            done = []
            for cid, p in self._pending.items():
                if record.step < p.applied_step:
                    continue
                p.after.extend(g for g in record.observed if g.task_id in p.task_ids)
                if len(p.after) >= self.groups or record.step >= p.applied_step + self.steps:
                    done.append(cid)
            finished = [(cid, self._pending.pop(cid)) for cid in done]
        return [
            MeasuredOutcome(
                cid, p.task_ids, record.step, outcome(p.before, p.after[: self.groups], p.applied_step, record.step)
            )
            for cid, p in finished
        ]
