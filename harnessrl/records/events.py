"""Events: the run's decision trace, one JSON line per event in ``events.jsonl``, and their schema.

One writer, :meth:`~harnessrl.records.run_dir.RunDir.event`, validates every line against
:class:`Event` (a known ``kind``, a ``step``, a time) before appending it, fsynced. The trainer writes
its own kinds (:data:`TRAINER_EVENT_KINDS`); the evolver's steps (:data:`EVENT_KINDS`) reach the same
writer through the trainer's tool service, whether the evolver runs in the training process or as
``harnessrl evolver`` elsewhere: the graph reports each step through an :data:`EventCallback`, and the
evolution client forwards it to the server's ``record_event`` tool (the candidate, trial, verdict and
commit records are written by the tools themselves when they run).

Each kind's own fields are a typed model (:mod:`harnessrl.records.event_payloads`): a writer builds it, and a reader
gets it back from :meth:`Event.payload` (or :meth:`Event.payload_as`, where it reads one kind), never a dict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harnessrl.errors import HarnessRLError
from harnessrl.records.event_payloads import EVENT_PAYLOADS, EventPayload, parse_payload

__all__ = [
    "ALL_EVENT_KINDS",
    "EVENT_KINDS",
    "EVENT_PAYLOADS",
    "TRAINER_EVENT_KINDS",
    "Event",
    "EventCallback",
    "EventKind",
    "EventPayload",
    "EvolverEventKind",
]

P = TypeVar("P", bound=EventPayload)

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
    (a failure's evidence, a trial's result, ...), kept as they are and read as the kind's model
    (:meth:`payload`)."""

    model_config = ConfigDict(extra="allow")

    time: float = Field(description="Unix time it was written.")
    kind: EventKind
    step: int | None = Field(description="The training step it belongs to (None: not tied to one).")
    _payload: EventPayload | None = PrivateAttr(default=None)

    def payload(self) -> EventPayload:
        """The kind's own fields as its model (:data:`~harnessrl.records.event_payloads.EVENT_PAYLOADS`), parsed once;
        one that does not fit raises :class:`~harnessrl.errors.HarnessRLError` naming the kind, the step and the
        field."""
        if self._payload is None:
            try:
                self._payload = parse_payload(self.kind, self.model_extra)
            except HarnessRLError as e:
                raise HarnessRLError(f"events.jsonl, step {self.step}: {e}") from None
        return self._payload

    def payload_as(self, model: type[P]) -> P:
        """:meth:`payload` where the reader knows the kind: its model is ``model`` (a ``ValueError`` names both when
        it is not, a reader's mistake rather than the file's)."""
        payload = self.payload()
        if not isinstance(payload, model):
            raise ValueError(f"a {self.kind!r} event's payload is {type(payload).__name__}, not {model.__name__}")
        return payload
