"""What the service has not decided for good yet, and how a resumed run gets it back: the pending tests' pooled
evidence and the hints committed on probation.

A pending test (a repair that adds checks, measured by its split share over sequential looks) pools its evidence
across trials; the trials object keeps it (:class:`PendingTests`), and :meth:`PendingDecisions.save_pending` writes it
whole to ``pending_tests.json`` after every trial that takes or ends a look, so :meth:`PendingDecisions.restore_pending`
gives a resumed run the looks it had at its checkpoint.

A hint committed on probation (:mod:`harnessrl.evolution.probation`) is watched on the groups trained after it;
:meth:`PendingDecisions.settle_probations` acts on the probations decided at a step boundary (a kept hint stays; a
reverted one gives way to the rules it replaced: a ``revert`` event), and
:meth:`PendingDecisions.replay_probation` rebuilds the probations still open at a resumed run's checkpoint from its
events (the replay beside the state it restores; :mod:`harnessrl.trainer.resume` asks for it through the service).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harnessrl.critic.power import SplitEvidence
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.probation import REVERT_SUFFIX, Probation
from harnessrl.interfaces.harness import parse_update

if TYPE_CHECKING:
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.findings import EarlyFindings

__all__ = ["PENDING_TESTS", "PendingDecisions", "PendingTests"]

logger = logging.getLogger(__name__)


@runtime_checkable
class PendingTests(Protocol):
    """Trials whose pending tests outlive a process: the pooled evidence of each repair still pending, saved after
    every trial and restored by a resumed run (:class:`~harnessrl.critic.trials.FrozenPolicyTrials`)."""

    def pending_tests(self) -> Mapping[str, SplitEvidence]: ...

    def restore_pending(self, tests: Mapping[str, SplitEvidence]) -> None: ...


PENDING_TESTS = "pending_tests.json"
"""The run's file of pending tests' pooled evidence (by repair key), rewritten whole after every trial."""


class PendingDecisions:
    """Pending tests and probations, over the service's shared state (and its early findings, whose reference
    witness grades a task again when a revert changes its rubric)."""

    def __init__(self, ctx: ServiceContext, findings: EarlyFindings):
        self.ctx, self.findings = ctx, findings

    # ------------------------------------------------------------------------------------ pending tests
    def save_pending(self) -> None:
        """The pending tests' pooled evidence, whole, in ``pending_tests.json`` (:data:`PENDING_TESTS`), so a resumed
        run goes on with their looks instead of starting them again."""
        ctx = self.ctx
        if ctx.run_dir is None or not isinstance(ctx.trials, PendingTests):
            return
        tests = {k: v.to_json() for k, v in sorted(ctx.trials.pending_tests().items())}
        if tests or ctx.run_dir.file(PENDING_TESTS).exists():
            ctx.run_dir.write_json(PENDING_TESTS, {"step": ctx.current_step(), "tests": tests})

    def restore_pending(self, through_step: int) -> dict[str, int]:
        """A resumed run's pending tests as they stood at its checkpoint (``through_step``: the looks and the
        outcomes of later steps left out), from ``pending_tests.json``; the looks restored, by repair key. A file
        that cannot be read is moved aside (``pending_tests.json.unreadable``) with a warning, and those tests start
        again: a resume never stops on it."""
        ctx = self.ctx
        if ctx.run_dir is None or not isinstance(ctx.trials, PendingTests):
            return {}
        path = ctx.run_dir.file(PENDING_TESTS)
        if not path.exists():
            return {}
        try:
            data = ctx.run_dir.read_json(PENDING_TESTS)
            tests = {str(k): SplitEvidence.from_json(v).until(through_step) for k, v in data["tests"].items()}
        except (HarnessRLError, ValueError, TypeError, KeyError, AttributeError) as e:
            aside = path.with_name(f"{PENDING_TESTS}.unreadable")
            path.replace(aside)
            logger.warning("%s cannot be read (%s); moved to %s, and its pending tests start again", path, e, aside)
            return {}
        kept = {k: v for k, v in tests.items() if v.looks}
        ctx.trials.restore_pending(kept)
        return {k: v.looks for k, v in kept.items()}

    # ------------------------------------------------------------------------------------ probation
    def settle_probations(self, step: int) -> None:
        """Act on the probations decided since the last boundary (:mod:`harnessrl.evolution.probation`): a kept
        hint stays; a reverted one gives way to the rules it replaced, applied from the next step (a new harness
        version and a ``revert`` event). Training is between steps here (the policy lock is free), so the tools'
        lock can be taken."""
        ctx = self.ctx
        for look in ctx.probation.settle():
            p = look.probation
            kept = not look.reverts
            ctx.remember(
                f"recording the probation of {p.candidate_id}",
                ctx.memory.record_outcome if ctx.memory else None,
                p.candidate_id,
                {**look.fields, "probation": "kept" if kept else "reverted", "recovered": kept},
            )
            if kept:
                continue
            versions = []
            saved = ctx.run_dir.harness if ctx.run_dir is not None else None
            with ctx.lock:
                for u in p.revert:
                    try:
                        reverted = f"{p.candidate_id}{REVERT_SUFFIX}"
                        versions.append(ctx.harness.apply(u, step=step + 1, candidate_id=reverted, save_to=saved))
                    except ValueError as e:  # a later commit already replaced that rule: nothing to put back there
                        what = ctx.harness.interface(u).describe(u)
                        logger.info("probation of %s: %s not reverted (%s)", p.candidate_id, what, e)
                ctx.counts[f"reverted/{p.revert[0].interface if p.revert else 'harness'}"] += 1
            if any(u.interface == "rubric_criteria" for u in p.revert):
                self.findings.check_references(p.task_ids, step=step)
            ctx.event(
                "revert",
                step=step,
                candidate_id=p.candidate_id,
                interface=p.revert[0].interface if p.revert else None,
                versions=versions,
                applies_from_step=step + 1,
                covers=p.task_ids,
                reason=probation_reason(look.kind, look.fields)
                + ("" if p.revert else "; nothing to revert: the checks the prompts state stay"),
                updates=[u.model_dump(mode="json") for u in p.revert],
            )

    def replay_probation(self, e: Mapping[str, Any], through_step: int, open_: dict[str, Probation]) -> None:
        """A resumed run's probations still open at ``through_step``: opened by their commit, brought to their last
        look's counts, closed by a decided look (the groups trained between that look and the checkpoint are not
        counted again; the steps after it are trained again and observed anew)."""
        step, cid = e.get("step"), e.get("candidate_id")
        if e["kind"] == "revert":  # it stands whatever its step: harness.json holds the rules it put back
            open_.pop(str(cid), None)
            return
        if step is None or step > through_step or not cid:
            return
        if e["kind"] == "commit" and e.get("probation"):
            revert = [parse_update(u, self.ctx.harness.extra) for u in e.get("revert") or []]
            applied = int(e.get("applies_from_step") or step + 1)
            before = e.get("signal_share_before")
            checks = {str(t): [str(c) for c in ids] for t, ids in (e.get("probation_checks") or {}).items()}
            open_[cid] = p = Probation(
                cid,
                list(e.get("covers") or []),
                applied,
                revert,
                before,
                int(e.get("groups_before") or 0),
                checks=checks,
            )
            if isinstance(prior := e.get("probation_prior"), Mapping):
                p.carry(prior)
        elif e["kind"] == "probation" and cid in open_:
            p = open_[cid]
            p.groups, p.signal, p.looks = int(e["groups"]), int(e["signal_groups"]), int(e["look"])
            if isinstance(split := e.get("split"), Mapping):
                p.broken, p.graded = int(split["broken"]), int(split["rollouts"])
                p.group_size = int(split.get("group_size") or 0)
            p.before_share, p.before_groups = e.get("signal_share_before"), int(e.get("groups_before") or 0)
            for arm in ("guided", "unguided"):
                n, mean = int(e.get(f"{arm}_rollouts") or 0), e.get(f"{arm}_mean_reward")
                setattr(p, f"{arm}_n", n)
                setattr(p, f"{arm}_sum", float(mean) * n if mean is not None else 0.0)
            p.last_step = int(step)
            if e.get("action"):
                open_.pop(cid)


def probation_reason(kind: str, f: Mapping[str, Any]) -> str:
    """A revert's reason, from its look's fields (the checks' rule, or the signal share)."""
    head = f"probation {kind} at look {f['look']}: "
    if isinstance(split := f.get("split"), Mapping):
        return (
            head
            + f"{split['broken']} of {split['rollouts']} rollouts of {f['groups']} guided groups broke the checks, "
            f"split share {split['split_share']}, interval {split['interval']} against {split['threshold']}"
        )
    groups = f"{f['signal_groups']} of {f['groups']} guided groups gave signal"
    return head + f"{groups}, interval {f['interval']} against {f['target']}"
