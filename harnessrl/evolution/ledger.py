"""How an evolution point closes a failure, or leaves it waiting: the writing side of
:class:`~harnessrl.evolution.handled.HandledFailures`.

:meth:`FailureLedger.mark_handled` records that the current point committed an update for a failure, gave it up,
or that a repair covered it (a ``failure_handled`` event; ``get_failures`` leaves it out from then on, until it
recurs); :meth:`FailureLedger.defer` leaves a failure whose candidate the critic could not decide yet to wait for
more graded groups of the tasks that candidate covers (an audit finding by its own count, and with
``evidence_draws`` asking for its next group).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harnessrl.records.event_payloads import FailureHandledPayload

if TYPE_CHECKING:
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.findings import EarlyFindings

__all__ = ["FailureLedger"]


class FailureLedger:
    """Handled and deferred failures, over the service's shared state and its early findings."""

    def __init__(self, ctx: ServiceContext, findings: EarlyFindings):
        self.ctx, self.findings = ctx, findings

    def mark_handled(self, failure_id: str, outcome: str, candidate_id: str | None = None, reason: str = "") -> None:
        """Record that the current evolution point handled ``failure_id`` (a ``failure_handled`` event)."""
        ctx = self.ctx
        with ctx.lock:
            if ctx.handled.offered_again(failure_id, outcome):  # given up for a refused trial or commit
                return
            failure = self.findings.find_failure(failure_id)
            point = ctx.hold.point
            step = point.step if point is not None else ctx.current_step()
            key = failure.key if failure is not None else None
            ctx.handled.add(failure_id, key, step, outcome)
            if (owner := self.findings.owner(failure_id)) is not None:
                owner.handled(failure_id, outcome)
            if point is not None:
                point.handled += 1
        handled = FailureHandledPayload(
            failure_id=failure_id,
            task_id=key[1] if key else None,
            failure_kind=key[0] if key else None,
            criterion=key[2] if key else None,
            outcome=outcome,
            point_step=step,
            point_mode=point.mode if point is not None else None,
            candidate_id=candidate_id,
            reason=reason,
        )
        ctx.event(handled, step=step)

    def defer(self, failure_id: str, candidate_id: Any) -> dict[str, Any]:
        """``failure_id`` ended pending, not handled: it waits until more groups of the tasks its candidate covers
        are graded (the audit's finding by its own count, a detected failure in the service's ``handled``); what the
        wait needs, for the ``deferred`` event (a resumed run replays it). With ``evidence_draws`` an audit finding's
        next group is asked for (:meth:`EarlyFindings.ask_evidence
        <harnessrl.evolution.findings.EarlyFindings.ask_evidence>`); a detected failure waits for its draw to come
        round."""
        ctx = self.ctx
        with ctx.lock:
            cand = ctx.candidates.get(str(candidate_id)) if candidate_id else None
            covered = ctx.outcome_tasks(cand) if cand is not None else []
            if (owner := self.findings.owner(failure_id)) is not None:
                owner.handled(failure_id, "deferred")
                return self.findings.ask_evidence(covered)
            failure = self.findings.find_failure(failure_id)
            if failure is None:
                return {}
            tasks = covered or [failure.task_id]
            graded = sum(ctx.graded_groups(t) for t in tasks)
            ctx.handled.defer(failure.key, tasks, graded)
            return {"criterion": failure.key[2], "covers": tasks, "graded_groups": graded}
