"""The evolution point's side of the service: when a point is due, what a step boundary settles, what a trained step
feeds, the graph's events, and the replay of a resumed run's decisions.

:meth:`PointOrchestration.point_due` says why a point should come out of its schedule (a finding with newly graded
groups, a failure of a kind no point has seen on its group of the data); :meth:`PointOrchestration.step_boundary`
settles the probations decided since the last boundary and then lets the training hold wait;
:meth:`PointOrchestration.observe_step` (a trainer step listener, on the training thread) feeds the probations and
the outcomes of committed updates; :meth:`PointOrchestration.on_event` records what the evolver's graph reports
(attributions, deferrals, give-ups; never a kind the tools write themselves); :meth:`PointOrchestration.replay_events`
rebuilds, for a resumed run, the evolver's counts, the handled failures and the open probations from its events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from harnessrl.data.schema import task_group
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.context import dump
from harnessrl.interfaces.harness import parse_update
from harnessrl.interfaces.tools import EventRecorded
from harnessrl.records.event_payloads import (
    AttributionPayload,
    CommitPayload,
    DeferredPayload,
    GiveUpPayload,
    OutcomePayload,
    ProposalPayload,
    VerdictPayload,
    parse_payload,
)

if TYPE_CHECKING:
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.findings import EarlyFindings
    from harnessrl.evolution.ledger import FailureLedger
    from harnessrl.evolution.pending import PendingDecisions
    from harnessrl.interfaces.tools import RecordEvent
    from harnessrl.records.events import Event
    from harnessrl.records.steps import StepRecord

__all__ = ["PointOrchestration"]

logger = logging.getLogger(__name__)

# kinds the service writes itself when a tool runs: the graph reporting them again would duplicate them
_WRITTEN_BY_TOOLS = frozenset({"proposal", "trial", "verdict", "commit"})
# the decisions a resumed run counts again, and what each counts (a verdict: its verdict)
_COUNTED = {"attribution": "attributed", "proposal": "proposed", "verdict": "", "commit": "committed"}
_DECISIONS = (AttributionPayload, ProposalPayload, VerdictPayload, CommitPayload)
# an attribution's fields that record_attribution takes by name
_ATTRIBUTION_ARGS = frozenset({"failure_id", "interface", "rationale", "task_id", "evidence"})


class PointOrchestration:
    """Points, boundaries, steps, events and replay, over the service's shared state and its other parts."""

    def __init__(self, ctx: ServiceContext, findings: EarlyFindings, ledger: FailureLedger, pending: PendingDecisions):
        self.ctx, self.findings, self.ledger, self.pending = ctx, findings, ledger, pending

    # ------------------------------------------------------------------------------------ when to evolve
    def point_due(self, step: int) -> str | None:
        """Why an evolution point should come now, out of its schedule (None: no reason): a finding of the rubric
        audit has newly graded groups, or a failure of a kind no point has seen on its group of the data (family,
        tag or domain) was detected at this step. Off with ``first_evidence=False``."""
        ctx = self.ctx
        if not ctx.first_evidence:
            return None
        with ctx.lock:
            ready = self.findings.ready()
            if ready:
                return f"the rubric audit's finding {ready[0].evidence.subject} has graded groups"
            for f in ctx.failures():
                task = ctx.harness.tasks.get(f.task_id)
                if f.step == step and task is not None and (f.kind, task_group(task)) not in ctx.seen:
                    return f"first {f.kind} on {task_group(task)}"
        return None

    def saw_failures(self) -> None:
        """An evolution point ran: every failure kind detected so far counts as seen on its group."""
        ctx = self.ctx
        with ctx.lock:
            for f in ctx.failures():
                task = ctx.harness.tasks.get(f.task_id)
                if task is not None:
                    ctx.seen.add((f.kind, task_group(task)))

    # ------------------------------------------------------------------------------------ steps
    def step_boundary(self, step: int) -> None:
        """The trainer at the end of ``step`` (main process): while an evolver holds training, wait here
        (the policy stays as it is); a lease that runs out lets training go on, with an event saying so,
        once the trial or commit in flight (if any) has ended. The hold is an evolution point of the run:
        an ``evolution_point`` event records it (mode external) with its held seconds and trials."""
        self.pending.settle_probations(step)
        self.ctx.hold.step_boundary(step)

    def observe_step(self, record: StepRecord) -> None:
        """A trained step's record (a trainer step listener): feeds the outcomes of committed updates, and
        writes each to the memory (``what_worked`` ranks by it) and the events once measured.

        It runs on the training thread, inside the step (the policy lock held): it takes only the outcome
        tracker's own lock, never the tools' lock a trial holds while it waits for the policy."""
        ctx = self.ctx
        for look in ctx.probation.observe(record):
            ctx.event(look.payload, step=look.step)
        for m in ctx.outcomes.observe(record):
            cid = m.candidate_id
            ctx.remember(
                f"recording the outcome of {cid}", ctx.memory.record_outcome if ctx.memory else None, cid, m.fields
            )
            ctx.event(OutcomePayload(candidate_id=cid, task_ids=m.task_ids, **m.fields), step=m.step)

    # ------------------------------------------------------------------------------------ graph events
    def record_attribution(
        self,
        failure_id: str | None,
        interface: str,
        rationale: str = "",
        task_id: str | None = None,
        evidence: Any = None,
        **extra: Any,
    ) -> None:
        """Record the attributor's decision: an ``attribution`` event, and the failure's interface in memory.
        Candidates later built for ``failure_id`` carry the rationale into the memory."""
        ctx = self.ctx
        with ctx.lock:
            failure = self.findings.find_failure(failure_id) if failure_id else None
            if task_id is None and failure is not None:
                task_id = failure.task_id
            if failure_id:
                ctx.attributions[failure_id] = {"interface": interface, "rationale": rationale}
            ctx.counts[f"attributed/{interface}"] += 1
        ctx.event(
            AttributionPayload(
                failure_id=failure_id,
                task_id=task_id,
                interface=interface,
                rationale=rationale,
                evidence=evidence,
                **extra,
            )
        )
        if failure_id and ctx.memory is not None:
            try:
                ctx.memory.set_failure_interface(failure_id, interface)
            except HarnessRLError:
                logger.debug("failure %s is not in the training memory; its attribution is in the events", failure_id)
            except Exception:
                logger.exception("training memory: recording the attribution of %s failed", failure_id)

    def record_event(self, args: RecordEvent) -> EventRecorded:
        """The ``record_event`` tool: one step the evolver's graph reports, recorded by :meth:`on_event`."""
        self.on_event(args.kind, args.payload)
        return EventRecorded(kind=args.kind, written=args.kind not in _WRITTEN_BY_TOOLS)

    def on_event(self, kind: str, payload: Mapping[str, Any] | BaseModel | None = None) -> None:
        """The graph's ``on_event(kind, payload)`` callback. ``attribution`` is recorded by
        :meth:`record_attribution`; proposals, trials, verdicts and commits are already written by the
        tools (ignored here, not written twice); any other kind is written to the events as it is."""
        if kind in _WRITTEN_BY_TOOLS:
            return
        data = parse_payload(kind, dump(payload))  # the edge: the graph's fields as the kind's model
        if isinstance(data, AttributionPayload):
            rest = {k: v for k, v in data.written().items() if k not in _ATTRIBUTION_ARGS}
            self.record_attribution(
                data.failure_id,
                str(data.interface or ""),
                str(data.rationale or ""),
                task_id=data.task_id,
                evidence=data.evidence,
                **rest,
            )
            return
        if isinstance(data, DeferredPayload) and data.failure_id:
            wait = self.ledger.defer(data.failure_id, data.candidate_id)
            data = DeferredPayload.model_validate({**data.written(), **wait})
        self.ctx.event(kind, **data.written())
        if isinstance(data, GiveUpPayload) and data.failure_id:
            self.ledger.mark_handled(data.failure_id, "gave_up", data.candidate_id, str(data.reason or ""))

    # ------------------------------------------------------------------------------------ resume
    def replay_events(self, events: Iterable[Event], through_step: int) -> None:
        """Replay a resumed run's events (not :meth:`Interface.restore`, which reads an interface's saved state):
        rebuild what earlier processes of a resumed run decided, from their ``events``: the evolver's
        counts (attributed, proposed, accepted, rejected, revisions, committed per interface), the failures
        handled by evolution points at or before ``through_step`` (the checkpoint the run goes on from: the
        steps after it are trained again, and what they show is new), and the probations still open there
        (:meth:`Probation.from_events <harnessrl.evolution.probation.Probation.from_events>`)."""
        ctx = self.ctx
        events = list(events)
        with ctx.lock:
            for e in events:
                if e.kind in _COUNTED and isinstance(p := e.payload(), _DECISIONS):
                    self._count(p)
                else:
                    ctx.handled.replay_event(e, through_step)
        extra = ctx.harness.extra
        ctx.probation.replay(events, through_step, lambda u: parse_update(u, extra))

    def _count(self, p: AttributionPayload | ProposalPayload | VerdictPayload | CommitPayload) -> None:
        """The evolver's count of one replayed decision (an attribution, proposal, verdict or commit)."""
        what = p.verdict if isinstance(p, VerdictPayload) else _COUNTED[p.KIND]
        if not p.interface or what not in ("attributed", "proposed", "committed", "accepted", "rejected", "pending"):
            return
        self.ctx.counts[f"{what}/{p.interface}"] += 1
        if isinstance(p, ProposalPayload) and p.revision:
            self.ctx.counts[f"revisions/{p.interface}"] += 1
