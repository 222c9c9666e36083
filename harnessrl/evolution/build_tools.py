"""The evolver's candidate builders and ``commit_update``, trainer side: **nothing reaches training unmeasured.**

A builder (one per registered interface, e.g. ``reweight_tasks``, ``set_guidance``, ``edit_rubric``; all one method,
:meth:`BuildTools.build_candidate`) only validates an update against the current harness (the interface's own
``preview``, after ``widen`` reaches every task that shares the repair's signature) and stores it as a *candidate*
(a ``proposal`` event, and a record in the memory). :meth:`BuildTools.commit_update` applies a candidate only if its
latest trial accepted it, the harness state it changes is still the state that was measured, and the policy has not
trained on since (``max_trial_age_steps``): ``harness.json`` is written before the live harness changes, the update
takes effect from the next step, its outcome is expected (:mod:`harnessrl.evolution.outcomes`), a hint on probation
starts its probation (:mod:`harnessrl.evolution.probation`), its failure is handled, and a rubric repair that reached
several tasks covers the failures it answers on all of them.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harnessrl.errors import HarnessRLError
from harnessrl.evolution.candidates import CandidateError, CandidateRecord
from harnessrl.interfaces.tools import BuilderArgs, Candidate, CommitResult, builder_args

if TYPE_CHECKING:
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.findings import EarlyFindings
    from harnessrl.evolution.ledger import FailureLedger
    from harnessrl.interfaces import InterfaceUpdate
    from harnessrl.interfaces.tools import CommitUpdate
    from harnessrl.records.trials import TrialResult

__all__ = ["BuildTools"]


_COVERED_KINDS = frozenset(
    {
        "non_discriminative_high",
        "criterion_saturated",
        "spurious_length",
        "spurious_feature",
        "reference_below_policy",
    }
)
"""Failure kinds a committed rubric repair answers on every task it covers: a failure of one of these kinds, on a
covered task, detected before the repair applies, is handled by it (outcome ``covered``). Not the audit's findings:
each closes itself once its own requirement is checked on its tasks (another finding on the same tasks is still
open)."""


class BuildTools:
    """The builders and the commit over the service's shared state, its early findings and its ledger of handled
    failures."""

    def __init__(self, ctx: ServiceContext, findings: EarlyFindings, ledger: FailureLedger):
        self.ctx, self.findings, self.ledger = ctx, findings, ledger

    def candidate(self, candidate_id: str) -> Candidate:
        """A candidate as the evolver sees it (raises :class:`CandidateError` for an unknown id)."""
        with self.ctx.lock:
            return self.ctx.candidate(candidate_id).view()

    def candidates(self) -> list[Candidate]:
        with self.ctx.lock:
            return [c.view() for c in self.ctx.candidates.values()]

    # ------------------------------------------------------------------------------------ builders
    def builder_args(self, interface: str) -> type[BuilderArgs]:
        """The argument model of ``interface``'s builder tool (what :meth:`build_candidate` takes)."""
        return builder_args(type(self.ctx.harness.interface(interface)))

    def build_candidate(self, interface: str, args: BuilderArgs) -> Candidate:
        """Build (not apply) a candidate of ``interface`` from its builder tool's arguments
        (:meth:`builder_args`), validated with that interface's ``preview``."""
        ctx = self.ctx
        iface = ctx.harness.interface(interface)
        update = args.update()
        with ctx.lock:
            try:
                update = iface.widen(update)  # every task that shares the repair's signature, each its own instance
                preview = iface.preview(update, ctx.current_step() + 1)
            except ValueError as e:
                raise CandidateError(f"invalid {iface.builder_tool} candidate: {e}") from None
            return self._propose(update, args.failure_id, preview)

    def _propose(self, update: InterfaceUpdate, failure_id: str | None, preview: dict[str, Any]) -> Candidate:
        ctx = self.ctx
        failure = None
        if failure_id:
            failure = self.findings.find_failure(failure_id)
            if failure is None:
                raise CandidateError(
                    f"unknown failure_id {failure_id!r}: use a failure_id returned by get_failures, or leave it null"
                )
        step = ctx.current_step()
        earlier = [c for c in ctx.candidates.values() if failure_id and c.failure_id == failure_id]
        cid = f"c{step}-{secrets.token_hex(4)}"
        cand = CandidateRecord(
            candidate_id=cid,
            update=update,
            failure_id=failure_id,
            failure=failure,
            step=step,
            preview=preview,
            revision=len(earlier),
            parent_id=earlier[-1].candidate_id if earlier else None,
        )
        ctx.candidates[cid] = cand
        ctx.counts[f"proposed/{update.interface}"] += 1
        if cand.revision:
            ctx.counts[f"revisions/{update.interface}"] += 1
        ctx.remember(
            f"storing candidate {cid}",
            ctx.memory.add_candidate if ctx.memory else None,
            cid,
            step=step,
            payload=update,
            failure=failure,
            # the task it changes, as its interface says (a domain-wide update: its first task)
            task_id=None if failure is not None else next(iter(t.id for t in ctx.targets(update)), None),
            attribution=ctx.attributions.get(failure_id or "", {}).get("rationale", ""),
            revision=cand.revision,
            parent_id=cand.parent_id,
        )
        ctx.event(
            "proposal",
            candidate_id=cid,
            interface=update.interface,
            failure_id=failure_id,
            remedy=update.remedy,
            covers=[t.id for t in ctx.targets(update)],
            update=update.model_dump(mode="json"),
            preview=preview,
            revision=cand.revision,
            parent_id=cand.parent_id,
        )
        return cand.view()

    # ------------------------------------------------------------------------------------ commit
    def commit_update(self, args: CommitUpdate) -> CommitResult:
        """Apply an accepted candidate from the next step and save the harness; refuse anything unmeasured."""
        ctx = self.ctx
        with ctx.policy_still("commit_update", args.candidate_id), ctx.lock:
            cand = ctx.candidate(args.candidate_id)
            step = ctx.current_step()
            self._check_committable(cand, step)
            on_probation = bool(cand.trials) and cand.trials[-1].verdict_kind == "probation"
            # what a hint on probation replaces, read before the commit replaces it
            revert = ctx.harness.interface(cand.update).reverting(cand.update) if on_probation else None
            version = self._apply(cand, step)
            self._committed(cand, version, step, revert)
            return CommitResult(
                candidate_id=cand.candidate_id,
                interface=cand.update.interface,
                version=version,
                applies_from_step=step + 1,
            )

    def _apply(self, cand: CandidateRecord, step: int) -> int:
        """Apply ``cand`` to the live harness from ``step + 1``, all or nothing: harness.json is written before the
        live harness changes. Its new version."""
        ctx, cid = self.ctx, cand.candidate_id
        saved = ctx.run_dir.harness if ctx.run_dir is not None else None
        try:
            return ctx.harness.apply(cand.update, step=step + 1, candidate_id=cid, save_to=saved)
        except ValueError as e:
            raise CandidateError(f"candidate {cid} cannot be applied: {e}") from None
        except OSError as e:
            raise HarnessRLError(
                f"candidate {cid} was not applied: {saved} could not be written ({e}); the harness and the "
                "file are as they were. Free the disk space and call commit_update on it again"
            ) from e

    def _committed(self, cand: CandidateRecord, version: int, step: int, revert: list[InterfaceUpdate] | None) -> None:
        """What follows an applied commit: the counts, the outcome expected, a probation started (``revert``: the
        updates that put back what a hint on probation replaced; None: not on probation), the memory and the
        ``commit`` event, the failures it handles, and the references graded again after a rubric edit."""
        ctx, cid, applies = self.ctx, cand.candidate_id, step + 1
        cand.status, cand.version, cand.applied_step = "committed", version, applies
        interface = cand.update.interface
        ctx.counts[f"committed/{interface}"] += 1
        if (point := ctx.hold.point) is not None:
            point.committed += 1
        ctx.outcomes.expect(cid, ctx.outcome_tasks(cand), applies)
        trial_of = (
            ctx.probation.start(
                cid, ctx.outcome_tasks(cand), applies, revert, *_probation_checks(cand.trials[-1])
            ).event_fields()
            if revert is not None
            else {}
        )
        ctx.remember(
            f"recording the commit of {cid}",
            ctx.memory.update_candidate if ctx.memory else None,
            cid,
            verdict="committed",
            applied_step=applies,
        )
        ctx.event(
            "commit",
            candidate_id=cid,
            interface=interface,
            failure_id=cand.failure_id,
            version=version,
            applies_from_step=applies,
            remedy=cand.update.remedy,
            covers=ctx.outcome_tasks(cand),
            update=cand.update.model_dump(mode="json"),
            **trial_of,
        )
        if cand.failure_id:
            self.ledger.mark_handled(cand.failure_id, "committed", candidate_id=cid)
        self._cover_failures(cand)
        if interface == "rubric_criteria":  # the reference under the new versions: evidence for what follows
            self.findings.check_references(ctx.outcome_tasks(cand), step=step)

    def _cover_failures(self, cand: CandidateRecord) -> None:
        """A rubric repair that reached several tasks handles the failures it answers on all of them, detected
        before it applies (outcome ``covered``): their groups were graded by the rubric it replaces."""
        if cand.update.signature is None:
            return
        covered = set(self.ctx.outcome_tasks(cand))
        for f in self.findings.all_failures():
            mine = f.task_id in covered and f.kind in _COVERED_KINDS and f.id != cand.failure_id
            if mine and not self.ctx.handled.is_handled(f):
                self.ledger.mark_handled(f.id, "covered", candidate_id=cand.candidate_id)

    def _check_committable(self, cand: CandidateRecord, step: int) -> None:
        """Refuse (:class:`CandidateError`) a commit of ``cand`` at ``step``: already committed, its failure handled
        since (covered by another commit), never measured, rejected by its latest trial, its harness state changed
        since, or its trial older than allowed."""
        cid = cand.candidate_id
        if cand.status == "committed":
            raise CandidateError(
                f"candidate {cid} is already committed (version {cand.version}, from step {cand.applied_step})"
            )
        if cand.failure_id and (outcome := self.ctx.handled.outcome(cand.failure_id)) is not None:
            raise CandidateError(
                f"the failure candidate {cid} answers, {cand.failure_id}, was handled since it was listed (outcome "
                f"{outcome}: e.g. a repair committed for its signature covers it): it is closed, so candidate {cid} "
                "cannot be committed; get_failures lists the open failures"
            )
        if not cand.trials:
            raise CandidateError(
                f"candidate {cid} has not been measured: call run_frozen_policy_trial on it first; only a "
                "candidate whose trial accepted it can be committed"
            )
        last = cand.trials[-1]
        if not last.accepted:
            raise CandidateError(
                f"candidate {cid} was rejected by its latest trial ({last.reason}): it cannot be "
                "committed. Revise it (build a new candidate using the trial's measurements) and run a trial on "
                "the new candidate"
            )
        if self.ctx.target_state(cand.update) != cand.trial_target:
            raise CandidateError(
                f"the harness state candidate {cid} changes was updated after its trial: run "
                "run_frozen_policy_trial on it again (or rebuild it on the current state)"
            )
        if cand.trial_step is not None and step - cand.trial_step > self.ctx.max_trial_age_steps:
            raise CandidateError(
                f"candidate {cid} was measured at step {cand.trial_step} and the policy has trained to step "
                f"{step} since: run run_frozen_policy_trial on it again"
            )


def _probation_checks(result: TrialResult) -> tuple[dict[str, list[str]] | None, Mapping[str, Any] | None]:
    """Per task, the checks a rubric edit put on probation adds, or None; and the evidence of the pending test it
    continues, or None (its trial's measurements)."""
    probation = result.measurements.probation
    if probation is None:
        return None, None
    prior = probation.evidence.model_dump() if probation.evidence is not None else None
    return probation.checks, prior
