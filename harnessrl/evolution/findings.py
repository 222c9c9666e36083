"""The findings the service offers before any detector fires: the rubric audit's
(:mod:`harnessrl.evolution.audit`: a requirement the training prompts state and their rubrics do not check) and the
reference witness's (:mod:`harnessrl.evolution.reference`: a criterion the task's own reference answer fails).

:class:`EarlyFindings` runs them before step 1 (:meth:`~EarlyFindings.run_audit`, the reference graded first), probes
their tasks with the initial policy (:meth:`~EarlyFindings.probe_audit`), grades the references again after every
rubric edit (:meth:`~EarlyFindings.check_references`), and offers each finding as a failure once its tasks have graded
groups, ahead of the detected failures (:meth:`~EarlyFindings.all_failures`). A finding whose test cannot decide yet
may ask task sampling for its tasks' next group (:meth:`~EarlyFindings.ask_evidence`, within
:data:`EVIDENCE_SHARE`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harnessrl.evolution.reference import event_payload
from harnessrl.records.event_payloads import AuditFindingView, AuditProbePayload, RubricAuditPayload

if TYPE_CHECKING:
    from harnessrl.evolution.audit import RubricAudit
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.reference import SuspectFindings
    from harnessrl.records.failures import Failure

__all__ = ["EVIDENCE_SHARE", "EarlyFindings"]

logger = logging.getLogger(__name__)

EVIDENCE_SHARE = 0.25
"""Evidence draws (``evolver.evidence_draws``) a run asks for: at most this share of its training tasks and the groups
graded so far together (each audit finding's first group fits before step 1 on a suite of a few findings, and a
pending test that keeps asking cannot take over the batch)."""


class EarlyFindings:
    """The rubric audit's and the reference witness's findings, over the service's shared state."""

    def __init__(self, ctx: ServiceContext):
        self.ctx = ctx

    def ready(self) -> list[Failure]:
        """The findings offered before any detector fires: the rubric audit's and the reference witness's."""
        ctx = self.ctx
        step = ctx.current_step()
        return [
            *ctx.audit.ready(ctx.graded_groups, step, ctx.kept_groups),
            *ctx.suspect_findings.ready(ctx.graded_groups, step, ctx.kept_groups),
        ]

    def owner(self, failure_id: str) -> RubricAudit | SuspectFindings | None:
        """The audit or the witness's findings, when ``failure_id`` is one of their failures."""
        return next((f for f in (self.ctx.audit, self.ctx.suspect_findings) if f.owns(failure_id)), None)

    def all_failures(self) -> list[Failure]:
        """The rubric audit's findings whose tasks have new graded groups, then the detected failures."""
        return [*self.ready(), *self.ctx.failures()]

    def find_failure(self, failure_id: str) -> Failure | None:
        for f in reversed(self.all_failures()):
            if f.id == failure_id:
                return f
        return None

    def run_audit(self, record: bool = True) -> list[AuditFindingView]:
        """The rubric audit before step 1 (:mod:`harnessrl.evolution.audit`): its findings, also written as a
        ``rubric_audit`` event when ``record`` (a resumed run audits again, quietly: what was committed since is
        checked by the rubrics now, so its findings are closed); none when the audit is off. The reference witness
        grades every training task's reference first (:meth:`check_references`)."""
        ctx = self.ctx
        self.check_references(step=0, record=record)
        if not ctx.audit.enabled:
            return []
        with ctx.lock:
            findings = [f.view() for f in ctx.audit.run()]
            if not record:
                return findings
            first_draws = {}
            if ctx.evidence_draws:
                asked = [{"key": f.key, **self.ask_evidence(f.tasks)} for f in findings]
                first_draws = {"evidence_draws": [d for d in asked if "evidence_draw" in d]}
        audit = RubricAuditPayload(
            findings=findings,
            tasks=len(ctx.harness.tasks),
            covered=sorted({t for f in findings for t in f.tasks}),
            **first_draws,
        )
        ctx.event(audit, step=0)
        return findings

    def check_references(self, task_ids: Sequence[str] | None = None, *, step: int | None = None, record: bool = True):
        """Grade the references of ``task_ids`` (None: every training task) under their current rubric versions not
        graded yet (:class:`~harnessrl.evolution.reference.ReferenceWitness`), written as a ``reference_check`` event
        when ``record`` and something was graded; before step 1 the witness's exact suspects become findings."""
        ctx = self.ctx
        if not ctx.witness.enabled:
            return []
        with ctx.lock:
            grades = ctx.witness.check(task_ids)
            if task_ids is None:
                ctx.suspect_findings.run()
        if grades and record:
            ctx.event(event_payload(grades, len(ctx.harness.tasks), ctx.witness.judge_calls), step=step)
        return grades

    def open_findings(self) -> int:
        """How many findings offered before any detector fires are open: the rubric audit's and the reference
        witness's (what the audit's probes before step 1 are for)."""
        with self.ctx.lock:
            owners = (self.ctx.audit, self.ctx.suspect_findings)
            return sum(f.status == "open" for owner in owners for f in owner.findings.values())

    def probe_audit(
        self, tasks_per_finding: int, group_size: int, allowance: int | None, record: Callable[[list], None]
    ) -> AuditProbePayload | None:
        """The audit's probes before step 1 (``evolver.audit_probe_tasks``): one fresh group of the initial policy
        on each of up to ``tasks_per_finding`` tasks of every open finding (a task two findings share is probed
        once; the tasks in id order), graded like a training group (:meth:`FrozenPolicyTrials.probe
        <harnessrl.critic.trials.FrozenPolicyTrials.probe>`) and handed to ``record`` (the trainer keeps them as
        groups graded at step 0 and never trained on), so each finding's test has rollouts of its tasks before the
        first step and an evolution point at step 0 can commit a repair that applies from step 1. Within
        ``allowance`` fresh rollouts (None: no bound; the run's trial share of its planned training rollouts):
        whole groups that fit, the findings' first tasks first. Written as an ``audit_probe`` event; None when there
        is nothing to probe."""
        ctx = self.ctx
        findings = [
            (f, owner)
            for owner in (ctx.audit, ctx.suspect_findings)
            for f in owner.findings.values()
            if f.status == "open"
        ]
        if tasks_per_finding <= 0 or not findings:
            return None
        picks: list[list[str]] = []
        chosen: set[str] = set()
        for f, owner in findings:
            tasks = owner.open_tasks(f)
            mine = [t for t in tasks if t in chosen][:tasks_per_finding]
            mine += [t for t in tasks if t not in chosen][: tasks_per_finding - len(mine)]
            chosen.update(mine)
            picks.append(mine)
        # round robin over the findings (their own tasks first), so a bound that cuts the list cuts evenly
        order = list(dict.fromkeys(t for rank in range(tasks_per_finding) for p in picks for t in p[rank : rank + 1]))
        fits = len(order) if allowance is None else min(len(order), allowance // max(2, group_size))
        probed = order[:fits]
        payload = AuditProbePayload(
            tasks=probed,
            findings={f.key: [t for t in p if t in probed] for (f, _), p in zip(findings, picks, strict=True)},
            allowance=allowance,
            left_out=order[fits:],
        )
        if probed:
            probe = ctx.trials.probe([ctx.harness.tasks[t] for t in probed], max_rollouts=allowance)
            cost = probe.cost
            payload.rollouts, payload.judge_calls, payload.seconds = cost.rollouts, cost.judge_calls, cost.seconds
            if probe.error is not None:
                payload.error = probe.error
            else:
                record(probe.rollouts)
                payload.rewards = {t: [r.reward for r in probe.rollouts if r.task_id == t] for t in probed}
        ctx.event(payload, step=0)
        return payload

    def ask_evidence(self, tasks: Sequence[str]) -> dict[str, Any]:
        """With ``evidence_draws``: task sampling draws one of ``tasks`` (an audit finding's, pending) at the next step
        (the one with the fewest graded groups, a task never drawn first), so the pending test is measured again a
        step later instead of when the draw comes round
        (:meth:`~harnessrl.interfaces.sampling.TaskSampling.request_evidence`); harness.json is rewritten so a
        resumed run draws the same. Only tasks whose rubric no commit has changed yet are drawn: the draw is there to
        bring a lax rubric its first repair before GRPO learns the hack, not to refine a repaired one (docs/design.md
        §4, "Evidence draws"). The audit asks for each finding's first group before step 1 (:meth:`run_audit`). The
        run's evidence draws stay within :data:`EVIDENCE_SHARE` of the training tasks and the groups graded so far
        together. What was asked, for the ``deferred`` or ``rubric_audit`` event."""
        ctx = self.ctx
        if not ctx.evidence_draws:
            return {}
        harness = ctx.harness
        tasks = [t for t in tasks if harness.rubrics.current(t).version == 0]
        if not tasks:
            return {}
        asked_so_far = sum(len(due) for due in harness.sampling.state.evidence_draws.values())
        graded = sum(ctx.graded_groups(t) for t in harness.tasks)
        if asked_so_far >= EVIDENCE_SHARE * (len(harness.tasks) + graded):
            return {}
        order = sorted(dict.fromkeys(tasks), key=lambda t: (ctx.graded_groups(t), t))
        asked = harness.sampling.request_evidence(order, ctx.current_step() + 1)
        if asked is None:
            return {}
        if ctx.run_dir is not None:
            try:
                harness.save(ctx.run_dir.harness)
            except OSError as e:  # not saved, not drawn: a resumed run must draw what this one draws
                harness.sampling.state.evidence_draws.pop(asked[1], None)
                logger.warning("evidence draw of %s not asked: %s could not be written (%s)", asked[0], e.filename, e)
                return {}
        return {"evidence_draw": {"task_id": asked[0], "step": asked[1]}}
