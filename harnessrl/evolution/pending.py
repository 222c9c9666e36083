"""What the service has not decided for good yet, and how a resumed run gets it back: the pending tests' pooled
evidence and the hints committed on probation.

A pending test (a repair that adds checks, measured by its split share over sequential looks) pools its evidence
across trials; the trials object keeps it (:class:`PendingTests`), and :meth:`PendingDecisions.save_pending` writes it
whole to ``pending_tests.json`` after every trial that takes or ends a look, so :meth:`PendingDecisions.restore_pending`
gives a resumed run the looks it had at its checkpoint.

A hint committed on probation (:mod:`harnessrl.evolution.probation`) is watched on the groups trained after it;
:meth:`PendingDecisions.settle_probations` acts on the probations decided at a step boundary (a kept hint stays; a
reverted one gives way to the rules it replaced: a ``revert`` event, which the probation writes,
:meth:`Probation.reverted <harnessrl.evolution.probation.Probation.reverted>`). A resumed run's probations come back
from their own events (:meth:`Probation.from_events <harnessrl.evolution.probation.Probation.from_events>`, the replay
beside the state it restores).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from harnessrl.critic.power import SplitEvidence
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.probation import REVERT_SUFFIX

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
                {**look.payload.written(), "probation": "kept" if kept else "reverted", "recovered": kept},
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
            ctx.event(p.reverted(step, versions, look.reason()), step=step)
