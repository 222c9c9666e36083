"""Events: the run's decision trace, one JSON line per event in ``events.jsonl``, and their schema.

One writer, :meth:`~harnessrl.records.run_dir.RunDir.event`, validates every line against
:class:`Event` (a known ``kind``, a ``step``, a time) before appending it, fsynced. The trainer writes
its own kinds (:data:`TRAINER_EVENT_KINDS`); the evolver's steps (:data:`EVENT_KINDS`) reach the same
writer through the trainer's tool service, whether the evolver runs in the training process or as
``harnessrl evolver`` elsewhere: the graph reports each step through an :data:`EventCallback`, and the
evolution client forwards it to the server's ``record_event`` tool (the candidate, trial, verdict and
commit records are written by the tools themselves when they run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ALL_EVENT_KINDS",
    "EVENT_KINDS",
    "TRAINER_EVENT_KINDS",
    "Event",
    "EventCallback",
    "EventKind",
    "EvolverEventKind",
]

EvolverEventKind = Literal["attribution", "proposal", "trial", "verdict", "commit", "give_up", "deferred"]
"""The evolver's steps: the graph reports them; the tools write proposal, trial, verdict and commit. ``deferred``:
the critic could not decide a candidate yet (pending), so its failure comes back with more evidence."""
EventKind = Literal[
    EvolverEventKind,
    # the trainer's
    "run_start",
    "run_end",
    "failure",
    "evaluation",
    "evolution_point",
    "outcome",
    "training_hold",
    "repair_carried",  # written by runs before repairs reached a whole signature (read back, never written now)
    "failure_handled",
    "rubric_audit",
    "audit_probe",  # the rubric audit's probes before step 1 (evolver.audit_probe_tasks): tasks, rollouts, rewards
    "probation",  # a look at a hint committed on probation (kept, reverted or still pending)
    "revert",  # a hint on probation reverted: the rules it replaced are back
    "reference_check",  # the tasks' reference answers graded by their rubrics (before step 1, after rubric edits)
]
EVENT_KINDS: tuple[str, ...] = get_args(EvolverEventKind)
"""The kinds the evolver graph reports through its :data:`EventCallback`."""
TRAINER_EVENT_KINDS: tuple[str, ...] = get_args(EventKind)[len(EVENT_KINDS) :]  # nested Literals flatten
ALL_EVENT_KINDS: tuple[str, ...] = (*EVENT_KINDS, *TRAINER_EVENT_KINDS)

EventCallback = Callable[[str, dict[str, Any]], Awaitable[None] | None]
"""``on_event(kind, payload)``: kind is one of :data:`EVENT_KINDS`; payload is JSON-serialisable."""


class Event(BaseModel):
    """One line of ``events.jsonl``: when, what kind, at which training step, and the kind's own fields
    (a failure's evidence, a trial's measurements, ...), kept as they are."""

    model_config = ConfigDict(extra="allow")

    time: float = Field(description="Unix time it was written.")
    kind: EventKind
    step: int | None = Field(description="The training step it belongs to (None: not tied to one).")
