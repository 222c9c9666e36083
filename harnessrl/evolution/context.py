"""What the parts of the evolver's tool service share: the run's harness, records, memory and trials, the tools'
lock and counts, the candidates, and the plumbing every part writes and looks up through.

:class:`ServiceContext` holds what :class:`~harnessrl.evolution.service.EvolutionService` was built with. Each part
of the service (the read tools, the findings before any detector fires, the ledger of handled failures, the pending
decisions, the trial tool, the build tools, the point's orchestration) holds this one object, not a copy of its
values: a value replaced on the facade (``service.trials = ...``, a test's ``service._step = ...``) is the one
every part reads next.

The lock order of the service (its module docstring) holds here too: :attr:`ServiceContext.lock` is the tools'
lock; :meth:`ServiceContext.policy_still` is the hold's check a trial or a commit passes *before* it takes that lock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from harnessrl.evolution.audit import RubricAudit
from harnessrl.evolution.candidates import CandidateError, CandidateRecord
from harnessrl.evolution.handled import HandledFailures
from harnessrl.evolution.hold import TrainingHold
from harnessrl.evolution.outcomes import OutcomeTracker
from harnessrl.evolution.probation import ProbationRule, ProbationTracker
from harnessrl.evolution.reference import Grader, ReferenceWitness, SuspectFindings
from harnessrl.records.event_payloads import EventPayload

if TYPE_CHECKING:
    from harnessrl.critic.trials import Probe
    from harnessrl.data.schema import Task
    from harnessrl.interfaces import Harness, InterfaceUpdate
    from harnessrl.memory.store import TrainingMemory
    from harnessrl.records.failures import Failure
    from harnessrl.records.run_dir import RunDir
    from harnessrl.records.steps import Recorder
    from harnessrl.records.trials import TrialResult

__all__ = ["ServiceContext", "TrialRunner", "dump"]

logger = logging.getLogger(__name__)


class TrialRunner(Protocol):
    """What the service needs from the critic's trials: measure ``update`` on the frozen policy and
    return its :class:`~harnessrl.records.trials.TrialResult`."""

    def run(self, update: InterfaceUpdate, candidate_id: str, failure: Failure | None = None) -> TrialResult: ...

    def probe(self, tasks: Sequence[Task], *, max_rollouts: int | None = None) -> Probe:
        """One graded fresh group of the frozen policy for each of ``tasks``, its cost, and why it was refused (the
        audit's probes; only with ``evolver.audit_probe_tasks``)."""
        ...


def dump(x: Any) -> Any:
    """``x`` as JSON data when it is a pydantic model, else as it is (an event's payload value)."""
    return x.model_dump(mode="json") if isinstance(x, BaseModel) else x


class ServiceContext:
    """The state the service's parts share (the arguments are :class:`~harnessrl.evolution.service.EvolutionService`'s,
    which documents them)."""

    def __init__(
        self,
        harness: Harness,
        recorder: Recorder,
        memory: TrainingMemory | None,
        trials: TrialRunner | None,
        run_dir: RunDir | None,
        failures: Callable[[], Sequence[Failure]],
        step: Callable[[], int],
        *,
        max_trial_age_steps: int,
        completion_chars: int,
        outcome_groups: int,
        outcome_steps: int,
        audit_rubrics: bool,
        first_evidence: bool,
        evidence_draws: bool,
        max_hold_s: float | None,
        probation: ProbationRule | None,
        reference_grader: Grader | None,
    ):
        self.harness = harness
        self.recorder = recorder
        self.memory = memory
        self.trials = trials
        self.run_dir = run_dir
        self.failures = failures
        """The failures detected so far (the detectors'; the findings before any detector fires are
        :class:`~harnessrl.evolution.findings.EarlyFindings`')."""
        self.step = step
        self.max_trial_age_steps = max_trial_age_steps
        self.completion_chars = completion_chars
        self.lock = threading.RLock()
        """The tools' lock (see the service's module docstring for the one lock order)."""
        self.counts: Counter[str] = Counter()
        self.candidates: dict[str, CandidateRecord] = {}
        self.attributions: dict[str, dict[str, Any]] = {}
        self.hold = TrainingHold(self.current_step, self.event, max_lease_s=max_hold_s)
        self.outcomes = OutcomeTracker(recorder, outcome_groups, outcome_steps)
        self.probation = ProbationTracker(recorder, probation)
        self.handled = HandledFailures()
        self.audit = RubricAudit(
            harness.tasks, lambda task_id: harness.rubrics.current(task_id).criteria, enabled=audit_rubrics
        )
        self.witness = ReferenceWitness(
            harness.tasks, lambda task_id: harness.rubrics.current(task_id), reference_grader
        )
        self.suspect_findings = SuspectFindings(self.witness, lambda task_id: harness.rubrics.current(task_id).criteria)
        self.first_evidence = first_evidence
        self.evidence_draws = evidence_draws
        self.seen: set[tuple[str, str]] = set()  # (failure kind, group of the data) an evolution point saw

    def current_step(self) -> int:
        return int(self.step())

    def event(self, kind: str | EventPayload, /, step: int | None = None, **payload: Any) -> None:
        """Write an event to the run's events (nothing without a run directory) at ``step`` (None: the current step):
        ``kind`` its kind's payload model (:mod:`harnessrl.records.event_payloads`), or its kind's name with its
        fields. A write that fails is logged, never raised."""
        if self.run_dir is None:
            return
        if isinstance(kind, EventPayload):
            kind, payload = kind.KIND, {**kind.written(), **payload}
        payload = {f"payload_{k}" if k in ("time", "kind") else k: dump(v) for k, v in payload.items()}
        try:
            self.run_dir.event(kind, step=self.current_step() if step is None else step, **payload)
        except Exception:  # the decision trace must not turn an applied commit into a tool error
            logger.exception("could not write the %r event to %s", kind, self.run_dir.path)

    def remember(self, what: str, fn: Callable[..., Any] | None, *args: Any, **kwargs: Any) -> None:
        """Call the training memory's ``fn``; a memory write that fails is logged, never raised."""
        if self.memory is None or fn is None:
            return
        try:
            fn(*args, **kwargs)
        except Exception:  # a memory write failing must not fail the tool (the events still have it)
            logger.exception("training memory: %s failed", what)

    def task(self, task_id: str) -> Task:
        """The training task ``task_id`` (raises :class:`CandidateError`, naming some ids, for an unknown one)."""
        task = self.harness.tasks.get(task_id)
        if task is None:
            known = sorted(self.harness.tasks)
            more = f" (and {len(known) - 10} more)" if len(known) > 10 else ""
            raise CandidateError(f"unknown task id {task_id!r}; training task ids include {known[:10]}{more}")
        return task

    def candidate(self, candidate_id: str) -> CandidateRecord:
        """The candidate ``candidate_id`` (raises :class:`CandidateError`, naming the builder tools, for an unknown
        one)."""
        cand = self.candidates.get(candidate_id)
        if cand is None:
            tools = ", ".join(i.builder_tool for i in self.harness.interfaces.values())
            raise CandidateError(
                f"unknown candidate_id {candidate_id!r}: build a candidate with one of {tools} and use the "
                "candidate_id it returns"
            )
        return cand

    def graded_groups(self, task_id: str) -> int:
        """How many groups of ``task_id`` were graded so far (:meth:`Recorder.graded`). It only grows: an audit
        finding deferred at some count is offered again at the next group graded, even when the groups its last trial
        re-graded have left the kept rollouts (counting the kept groups, a family drawn one group every few steps
        never had more kept than when it was deferred: gold-bench seed 3 left `nocomma`'s check pending from step 7
        to step 35 through three more groups)."""
        return self.recorder.graded(task_id)

    def kept_groups(self, task_id: str) -> int:
        """How many groups of ``task_id`` have their rollouts kept (what a rubric trial can re-grade)."""
        return len({r.step for r in self.recorder.latest_rollouts(task_id)})

    def targets(self, update: InterfaceUpdate) -> list:
        """The training tasks ``update`` changes, as its interface says (none for a target that is no task)."""
        try:
            return list(self.harness.interface(update).targets(update))
        except ValueError:  # an update whose target is not a training task: no task to file it under
            return []

    def outcome_tasks(self, cand: CandidateRecord) -> list[str]:
        """The tasks whose learning signal a committed update's outcome is measured on: those it changes (else
        its failure's task)."""
        try:
            tasks = [t.id for t in self.harness.interface(cand.update).targets(cand.update)]
        except ValueError:
            tasks = []
        if not tasks and cand.failure is not None:
            tasks = [cand.failure.task_id]
        return tasks

    def target_state(self, update: InterfaceUpdate) -> str:
        """The part of the harness ``update`` changes, as text: a commit needs it unchanged since the trial."""
        return json.dumps(self.harness.interface(update).target_state(update), sort_keys=True, default=str)

    def policy_still(self, tool: str, candidate_id: str):
        """:meth:`TrainingHold.policy_still <harnessrl.evolution.hold.TrainingHold.policy_still>` for ``tool``
        on ``candidate_id``: a refusal leaves the candidate's failure to be offered again."""

        def refused() -> None:  # under the hold's condition: no lock taken here
            cand = self.candidates.get(candidate_id)
            if cand is not None and cand.failure_id:
                self.handled.interrupt(cand.failure_id)

        return self.hold.policy_still(tool, refused)
