"""The evolver's trial tool, trainer side: ``run_frozen_policy_trial`` measures a candidate on the frozen policy.

A trial runs only while the policy stands still (the training hold's check, passed before the tools' lock is taken;
one that arrives mid-step is refused with the reason), counts toward the evolution point's trials and seconds (its
budget, :class:`~harnessrl.evolution.hold.Point`), and is recorded in the memory (the candidate's trials and
verdict) and the events (``trial``, ``verdict``). A trial that takes or ends a pending test's look has the pending
tests saved (:meth:`~harnessrl.evolution.pending.PendingDecisions.save_pending`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from harnessrl.critic.signal import CHECK_SPLIT_SHARE
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.candidates import CandidateError
from harnessrl.records.event_payloads import TrialPayload, VerdictPayload

if TYPE_CHECKING:
    from harnessrl.evolution.candidates import CandidateRecord
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.pending import PendingDecisions
    from harnessrl.interfaces.tools import RunTrial
    from harnessrl.records.trials import TrialResult

__all__ = ["TrialTool"]


class TrialTool:
    """The trial tool over the service's shared state; its pending tests saved by ``pending``."""

    def __init__(self, ctx: ServiceContext, pending: PendingDecisions):
        self.ctx, self.pending = ctx, pending

    def run_frozen_policy_trial(self, args: RunTrial) -> TrialResult:
        """Measure a candidate on the frozen policy with the trials object; record and return its result."""
        ctx = self.ctx
        with ctx.policy_still("run_frozen_policy_trial", args.candidate_id), ctx.lock:
            cand = ctx.candidate(args.candidate_id)
            if cand.status == "committed":
                raise CandidateError(f"candidate {cand.candidate_id} is already committed (version {cand.version})")
            if ctx.trials is None:
                raise HarnessRLError("this run has no critic trials: give EvolutionService a trials object")
            target = ctx.target_state(cand.update)
            step = ctx.current_step()
            t0 = time.perf_counter()
            try:
                result = ctx.trials.run(cand.update, cand.candidate_id, cand.failure)
            except Exception as e:
                ctx.event(TrialPayload(candidate_id=cand.candidate_id, interface=cand.update.interface, error=str(e)))
                raise
            seconds = time.perf_counter() - t0
            if (point := ctx.hold.point) is not None:
                point.trials += 1
                point.trial_seconds += seconds
            cand.trials.append(result)
            cand.status = "accepted" if result.accepted else "pending" if result.pending else "rejected"
            cand.trial_step, cand.trial_target = step, target
            ctx.counts[f"{cand.status}/{cand.update.interface}"] += 1
            self._record_trial(cand, result, seconds)
            if result.metric == CHECK_SPLIT_SHARE:  # the one kind of trial that takes or ends a pooled look
                self.pending.save_pending()
            return result

    def _record_trial(self, cand: CandidateRecord, result: TrialResult, seconds: float) -> None:
        """A trial's result in the memory (the candidate's trials and verdict) and the events (trial, verdict)."""
        ctx = self.ctx
        cid, interface = cand.candidate_id, cand.update.interface
        ctx.remember(
            f"recording the trial of {cid}",
            ctx.memory.update_candidate if ctx.memory else None,
            cid,
            verdict=cand.status,
            trials=[t.model_dump(mode="json") for t in cand.trials],
        )
        who = {"candidate_id": cid, "interface": interface, "failure_id": cand.failure_id}
        trial = result.model_dump(mode="json")
        kind, remedy = result.verdict_kind, result.remedy
        ctx.event(TrialPayload(**who, remedy=remedy, verdict_kind=kind, result=trial, seconds=round(seconds, 3)))
        verdict = {"verdict": cand.status, "verdict_kind": kind, "remedy": remedy, "covers": result.covers}
        ctx.event(VerdictPayload(**who, **verdict, reason=result.reason))
