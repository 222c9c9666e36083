"""The evolver's tools, trainer side: read failures, memory, rollouts and the harness; build, trial and
commit harness update candidates.

:class:`EvolutionService` implements every tool of :func:`harnessrl.interfaces.tools.tool_table` as a plain method
that takes the tool's argument model and returns its result model; the boundary (the MCP server,
:class:`~harnessrl.evolution.mcp_server.ToolServer`) validates a call's JSON into that model once, so a method
never guesses at its arguments' shape.
It is the one object the trainer and the tool server use; its parts live beside it: the training hold and
its lease (:mod:`harnessrl.evolution.hold`), the outcomes of committed updates
(:mod:`harnessrl.evolution.outcomes`), the failures evolution points handled
(:mod:`harnessrl.evolution.handled`) and the candidates (:mod:`harnessrl.evolution.candidates`).

The rule it enforces: **nothing reaches training unmeasured.** The candidate builders (one per
registered interface, e.g. ``reweight_tasks``, ``set_guidance``, ``edit_rubric``; all one method,
:meth:`EvolutionService.build_candidate`) only validate an update against the current harness (the
interface's own ``preview``) and store it as a *candidate*; ``run_frozen_policy_trial``
measures a candidate on the frozen policy (the trials object, e.g.
:class:`~harnessrl.critic.trials.FrozenPolicyTrials`); ``commit_update`` applies a candidate only if its
latest trial accepted it, the harness state it changes is still the state that was measured, and the
policy has not trained on since (``max_trial_age_steps``). An applied update takes effect from the
next training step, and ``harness.json`` is rewritten at once, so a killed run resumes with it.

Every candidate, trial, verdict and commit is written to the training memory (its ``updates``
collection, one record per candidate) and to ``events.jsonl`` (kinds ``proposal``, ``trial``,
``verdict``, ``commit``; the graph's attributions arrive through :meth:`EvolutionService.on_event` or
:meth:`EvolutionService.record_attribution` as ``attribution``). A memory write that fails is logged and
never fails the tool.

Thread-safety: the tools run on the tool server's worker threads while the training loop waits at an
evolution point; one re-entrant lock (:attr:`EvolutionService.lock`) serializes every tool, so a trial
sees one consistent harness and a commit never interleaves with another.

One lock order, so that no trial, hold or step waits on another in a cycle: a tool takes
:attr:`EvolutionService.lock`, and a trial then the trainer's policy lock; the training thread never
takes the service lock (it holds the policy lock through a step, and :meth:`EvolutionService.observe_step`
only takes the outcome tracker's own lock, which nothing holds while waiting for another). The training
hold's condition and the outcome tracker's lock are leaves: nothing else is taken while either is held (a
trial or a commit passes the hold's check before it takes the service lock, and lets the hold know it
ended after it let the service lock go). And a trial or a commit runs only while training is stopped at a
step boundary (an in-process evolution point, or an external evolver's granted hold) or not running at
all: one that arrives mid-step is refused with the reason, and a hold whose lease runs out during one lets
training go on only once that call has ended.

Handled failures: a failure an evolution point committed an update for, or gave up, is recorded
(a ``failure_handled`` event: which failure, by which point, with what outcome) and left out of
``get_failures`` from then on; the same failure detected again at a later step is a recurrence and is
offered again. A failure whose candidate the critic could not decide yet (``deferred``) waits until a group of a
task the candidate covers is graded (:mod:`harnessrl.evolution.handled`).
:meth:`EvolutionService.replay_events` rebuilds this record, and the evolver's counts, from the
events of a resumed run, when :mod:`harnessrl.trainer.resume` (the one home of what a resumed run restores)
asks.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from harnessrl.critic.power import SplitEvidence
from harnessrl.critic.signal import CHECK_SPLIT_SHARE
from harnessrl.data.schema import prompt_text, task_group
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.audit import RubricAudit
from harnessrl.evolution.candidates import CandidateError, CandidateRecord
from harnessrl.evolution.handled import HandledFailures
from harnessrl.evolution.hold import TrainingHold
from harnessrl.evolution.outcomes import OutcomeTracker
from harnessrl.evolution.probation import REVERT_SUFFIX, Probation, ProbationRule, ProbationTracker
from harnessrl.evolution.reference import Grader, ReferenceWitness, SuspectFindings, event_payload
from harnessrl.interfaces import Harness, InterfaceUpdate
from harnessrl.interfaces.harness import parse_update
from harnessrl.interfaces.rubric import criteria_view
from harnessrl.interfaces.tools import (
    BuilderArgs,
    Candidate,
    CommitResult,
    CommitUpdate,
    EventRecorded,
    FailureList,
    FailureView,
    GetFailures,
    GetHarnessState,
    HarnessView,
    HoldState,
    HoldTraining,
    InspectRollouts,
    MemoryResult,
    QueryMemory,
    RecordEvent,
    ReleaseTraining,
    RolloutList,
    RolloutView,
    RunTrial,
    TaskView,
    ToolSpec,
    builder_args,
    tool_table,
)
from harnessrl.records.trials import TrialResult

if TYPE_CHECKING:
    from harnessrl.critic.trials import Probe
    from harnessrl.data.schema import Task
    from harnessrl.evolution.hold import AtBoundary
    from harnessrl.memory.store import TrainingMemory
    from harnessrl.records.failures import Failure
    from harnessrl.records.run_dir import RunDir
    from harnessrl.records.steps import Recorder, RolloutRecord, StepRecord

__all__ = ["EVIDENCE_SHARE", "PENDING_TESTS", "CandidateError", "EvolutionService", "PendingTests", "TrialRunner"]

logger = logging.getLogger(__name__)


# kinds the service writes itself when a tool runs: the graph reporting them again would duplicate them
_WRITTEN_BY_TOOLS = frozenset({"proposal", "trial", "verdict", "commit"})

EVIDENCE_SHARE = 0.25
"""Evidence draws (``evolver.evidence_draws``) a run asks for: at most this share of its training tasks and the groups
graded so far together (each audit finding's first group fits before step 1 on a suite of a few findings, and a
pending test that keeps asking cannot take over the batch)."""


@runtime_checkable
class PendingTests(Protocol):
    """Trials whose pending tests outlive a process: the pooled evidence of each repair still pending, saved after
    every trial and restored by a resumed run (:class:`~harnessrl.critic.trials.FrozenPolicyTrials`)."""

    def pending_tests(self) -> Mapping[str, SplitEvidence]: ...

    def restore_pending(self, tests: Mapping[str, SplitEvidence]) -> None: ...


PENDING_TESTS = "pending_tests.json"
"""The run's file of pending tests' pooled evidence (by repair key), rewritten whole after every trial."""


class TrialRunner(Protocol):
    """What the service needs from the critic's trials: measure ``update`` on the frozen policy and
    return its :class:`~harnessrl.records.trials.TrialResult`."""

    def run(self, update: InterfaceUpdate, candidate_id: str, failure: Failure | None = None) -> TrialResult: ...

    def probe(self, tasks: Sequence[Task], *, max_rollouts: int | None = None) -> Probe:
        """One graded fresh group of the frozen policy for each of ``tasks``, its cost, and why it was refused (the
        audit's probes; only with ``evolver.audit_probe_tasks``)."""
        ...


def _dump(x: Any) -> Any:
    return x.model_dump(mode="json") if isinstance(x, BaseModel) else x


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


class EvolutionService:
    """The evolver's tools over one run's harness, records, memory and trials.

    Args:
        harness: the run's :class:`~harnessrl.interfaces.Harness` (mutated only by :meth:`commit_update`).
        recorder: the trainer's :class:`~harnessrl.records.steps.Recorder` (kept rollouts).
        memory: the :class:`~harnessrl.memory.store.TrainingMemory`, or None (``query_memory`` then
            answers with an empty result and says why).
        trials: anything with ``run(update, candidate_id, failure) -> TrialResult`` (:class:`TrialRunner`),
            or None (a trial then says this run has none).
        run_dir: where ``harness.json`` and events are written, or None (nothing written).
        failures: returns the failures detected so far, e.g. ``lambda: monitor.failures``.
        step: returns the current training step (the last one trained); commits apply from the next.
        max_trial_age_steps: how many training steps a trial stays valid for a commit (0: the policy
            must not have trained at all since it was measured, the synchronous evolution point).
        completion_chars: longest completion text ``inspect_rollouts`` shows.
        outcome_groups: a committed update's *outcome* is measured on this many of the changed tasks'
            groups trained after it (against as many before it; :meth:`observe_step`) ...
        outcome_steps: ... or on what came within this many steps (a parked task may never come back).
        audit_rubrics: before step 1, list the requirements the training prompts state and their rubrics do not
            check (:mod:`harnessrl.evolution.audit`), offered as failures from the first graded groups on.
        first_evidence: an evolution point also comes at the step where a failure of a new kind is first detected
            on a group of the data, or where the audit's findings have new groups, not only every
            ``every_steps`` (:meth:`point_due`).
        evidence_draws: an audit finding deferred because its test cannot decide yet asks task sampling to draw one
            of the tasks it covers whose rubric is still the dataset's at the next step (:meth:`_ask_evidence`).
        max_hold_s: the longest lease of an evolver's hold on training (the run's ``evolver.hold_s``): a client
            may ask for less, never for more; None: as long as asked (:class:`~harnessrl.evolution.hold.TrainingHold`).
        probation: how a hint committed on probation is kept or reverted (``trials.guidance_trial: in_group``;
            :mod:`harnessrl.evolution.probation`); None: its defaults.
        reference_grader: the run's judge on a task's reference answer under some criteria, for the reference witness
            (:mod:`harnessrl.evolution.reference`: graded before step 1 and after every rubric edit, its suspects shown
            to the evolver and its exact ones offered as failures); None: no witness.
    """

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
        max_trial_age_steps: int = 0,
        completion_chars: int = 600,
        outcome_groups: int = 2,
        outcome_steps: int = 10,
        audit_rubrics: bool = True,
        first_evidence: bool = True,
        evidence_draws: bool = False,
        max_hold_s: float | None = None,
        probation: ProbationRule | None = None,
        reference_grader: Grader | None = None,
    ):
        self.harness = harness
        self.recorder = recorder
        self.memory = memory
        self.trials = trials
        self.run_dir = run_dir
        self._failures = failures
        self._step = step
        self.max_trial_age_steps = max_trial_age_steps
        self.completion_chars = completion_chars
        self.lock = threading.RLock()
        """The tools' lock (see the module docstring for the one lock order)."""
        self.counts: Counter[str] = Counter()
        self._candidates: dict[str, CandidateRecord] = {}
        self._attributions: dict[str, dict[str, Any]] = {}
        self.hold = TrainingHold(self.current_step, self._event, max_lease_s=max_hold_s)
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
        self._seen: set[tuple[str, str]] = set()  # (failure kind, group of the data) an evolution point saw

    @property
    def training(self) -> bool:
        """Whether training runs (set by the trainer's evolution callback): a trial then needs a hold."""
        return self.hold.training

    @training.setter
    def training(self, value: bool) -> None:
        self.hold.training = value

    # ------------------------------------------------------------------------------------ plumbing
    def tools(self) -> dict[str, ToolSpec]:
        """Every tool this service serves by name (:class:`~harnessrl.interfaces.tools.ToolSpec`): one
        builder per interface of its harness."""
        return tool_table(self.harness.extra)

    def tool_methods(self) -> dict[str, Callable[..., BaseModel]]:
        """Each tool's implementation by tool name (what the server registers)."""
        builders = {iface.builder_tool: name for name, iface in self.harness.interfaces.items()}
        out: dict[str, Callable[..., BaseModel]] = {}
        for tool in self.tools():
            if tool in builders:
                out[tool] = self._builder(builders[tool])
            else:
                out[tool] = getattr(self, tool)
        return out

    def _builder(self, interface: str) -> Callable[..., Candidate]:
        def build(args: BuilderArgs) -> Candidate:
            return self.build_candidate(interface, args)

        build.__name__ = self.harness.interfaces[interface].builder_tool
        return build

    def current_step(self) -> int:
        return int(self._step())

    def candidate(self, candidate_id: str) -> Candidate:
        """A candidate as the evolver sees it (raises :class:`CandidateError` for an unknown id)."""
        with self.lock:
            return self._get(candidate_id).view()

    def candidates(self) -> list[Candidate]:
        with self.lock:
            return [c.view() for c in self._candidates.values()]

    def metrics(self) -> dict[str, float]:
        """Evolver counts so far, e.g. ``evolver/proposed/rubric_criteria`` (for the step's metrics)."""
        return {f"evolver/{k}": float(v) for k, v in sorted(self.counts.items())}

    def _event(self, kind: str, /, **payload: Any) -> None:
        if self.run_dir is None:
            return
        step = payload.pop("step", None)
        payload = {f"payload_{k}" if k in ("time", "kind") else k: _dump(v) for k, v in payload.items()}
        try:
            self.run_dir.event(kind, step=self.current_step() if step is None else step, **payload)
        except Exception:  # the decision trace must not turn an applied commit into a tool error
            logger.exception("could not write the %r event to %s", kind, self.run_dir.path)

    def _remember(self, what: str, fn: Callable[..., Any] | None, *args: Any, **kwargs: Any) -> None:
        if self.memory is None or fn is None:
            return
        try:
            fn(*args, **kwargs)
        except Exception:  # a memory write failing must not fail the tool (the events still have it)
            logger.exception("training memory: %s failed", what)

    def _task(self, task_id: str):
        task = self.harness.tasks.get(task_id)
        if task is None:
            known = sorted(self.harness.tasks)
            more = f" (and {len(known) - 10} more)" if len(known) > 10 else ""
            raise CandidateError(f"unknown task id {task_id!r}; training task ids include {known[:10]}{more}")
        return task

    def _get(self, candidate_id: str) -> CandidateRecord:
        cand = self._candidates.get(candidate_id)
        if cand is None:
            tools = ", ".join(i.builder_tool for i in self.harness.interfaces.values())
            raise CandidateError(
                f"unknown candidate_id {candidate_id!r}: build a candidate with one of {tools} and use the "
                "candidate_id it returns"
            )
        return cand

    def _graded_groups(self, task_id: str) -> int:
        """How many groups of ``task_id`` were graded so far (:meth:`Recorder.graded`). It only grows: an audit
        finding deferred at some count is offered again at the next group graded, even when the groups its last trial
        re-graded have left the kept rollouts (counting the kept groups, a family drawn one group every few steps
        never had more kept than when it was deferred: gold-bench seed 3 left `nocomma`'s check pending from step 7
        to step 35 through three more groups)."""
        return self.recorder.graded(task_id)

    def _kept_groups(self, task_id: str) -> int:
        """How many groups of ``task_id`` have their rollouts kept (what a rubric trial can re-grade)."""
        return len({r.step for r in self.recorder.latest_rollouts(task_id)})

    def _audit_failures(self) -> list[Failure]:
        """The findings offered before any detector fires: the rubric audit's and the reference witness's."""
        step = self.current_step()
        return [
            *self.audit.ready(self._graded_groups, step, self._kept_groups),
            *self.suspect_findings.ready(self._graded_groups, step, self._kept_groups),
        ]

    def _finding_owner(self, failure_id: str) -> RubricAudit | SuspectFindings | None:
        """The audit or the witness's findings, when ``failure_id`` is one of their failures."""
        return next((f for f in (self.audit, self.suspect_findings) if f.owns(failure_id)), None)

    def _all_failures(self) -> list[Failure]:
        """The rubric audit's findings whose tasks have new graded groups, then the detected failures."""
        return [*self._audit_failures(), *self._failures()]

    # ------------------------------------------------------------------------------------ when to evolve
    def run_audit(self, record: bool = True) -> list[dict[str, Any]]:
        """The rubric audit before step 1 (:mod:`harnessrl.evolution.audit`): its findings, also written as a
        ``rubric_audit`` event when ``record`` (a resumed run audits again, quietly: what was committed since is
        checked by the rubrics now, so its findings are closed); none when the audit is off. The reference witness
        grades every training task's reference first (:meth:`check_references`)."""
        self.check_references(step=0, record=record)
        if not self.audit.enabled:
            return []
        with self.lock:
            findings = [f.view() for f in self.audit.run()]
            if not record:
                return findings
            first_draws = {}
            if self.evidence_draws:
                asked = [{"key": f["key"], **self._ask_evidence(f["tasks"])} for f in findings]
                first_draws = {"evidence_draws": [d for d in asked if "evidence_draw" in d]}
        self._event(
            "rubric_audit",
            step=0,
            findings=findings,
            tasks=len(self.harness.tasks),
            covered=sorted({t for f in findings for t in f["tasks"]}),
            **first_draws,
        )
        return findings

    def check_references(self, task_ids: Sequence[str] | None = None, *, step: int | None = None, record: bool = True):
        """Grade the references of ``task_ids`` (None: every training task) under their current rubric versions not
        graded yet (:class:`~harnessrl.evolution.reference.ReferenceWitness`), written as a ``reference_check`` event
        when ``record`` and something was graded; before step 1 the witness's exact suspects become findings."""
        if not self.witness.enabled:
            return []
        with self.lock:
            grades = self.witness.check(task_ids)
            if task_ids is None:
                self.suspect_findings.run()
        if grades and record:
            payload = event_payload(grades, len(self.harness.tasks))
            self._event("reference_check", step=step, judge_calls=self.witness.judge_calls, **payload)
        return grades

    def open_findings(self) -> int:
        """How many findings offered before any detector fires are open: the rubric audit's and the reference
        witness's (what the audit's probes before step 1 are for)."""
        with self.lock:
            owners = (self.audit, self.suspect_findings)
            return sum(f.status == "open" for owner in owners for f in owner.findings.values())

    def probe_audit(
        self, tasks_per_finding: int, group_size: int, allowance: int | None, record: Callable[[list], None]
    ) -> dict[str, Any] | None:
        """The audit's probes before step 1 (``evolver.audit_probe_tasks``): one fresh group of the initial policy
        on each of up to ``tasks_per_finding`` tasks of every open finding (a task two findings share is probed
        once; the tasks in id order), graded like a training group (:meth:`FrozenPolicyTrials.probe
        <harnessrl.critic.trials.FrozenPolicyTrials.probe>`) and handed to ``record`` (the trainer keeps them as
        groups graded at step 0 and never trained on), so each finding's test has rollouts of its tasks before the
        first step and an evolution point at step 0 can commit a repair that applies from step 1. Within
        ``allowance`` fresh rollouts (None: no bound; the run's trial share of its planned training rollouts):
        whole groups that fit, the findings' first tasks first. Written as an ``audit_probe`` event; None when there
        is nothing to probe."""
        findings = [
            (f, owner)
            for owner in (self.audit, self.suspect_findings)
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
        payload: dict[str, Any] = {
            "tasks": probed,
            "findings": {f.key: [t for t in p if t in probed] for (f, _), p in zip(findings, picks, strict=True)},
            "allowance": allowance,
            "left_out": order[fits:],
        }
        if probed:
            probe = self.trials.probe([self.harness.tasks[t] for t in probed], max_rollouts=allowance)
            cost = probe.cost
            payload.update(rollouts=cost.rollouts, judge_calls=cost.judge_calls, seconds=cost.seconds)
            if probe.error is not None:
                payload.update(error=probe.error)
            else:
                record(probe.rollouts)
                payload.update(rewards={t: [r.reward for r in probe.rollouts if r.task_id == t] for t in probed})
        self._event("audit_probe", step=0, **payload)
        return payload

    def point_due(self, step: int) -> str | None:
        """Why an evolution point should come now, out of its schedule (None: no reason): a finding of the rubric
        audit has newly graded groups, or a failure of a kind no point has seen on its group of the data (family,
        tag or domain) was detected at this step. Off with ``first_evidence=False``."""
        if not self.first_evidence:
            return None
        with self.lock:
            ready = self._audit_failures()
            if ready:
                return f"the rubric audit's finding {ready[0].evidence.subject} has graded groups"
            for f in self._failures():
                task = self.harness.tasks.get(f.task_id)
                if f.step == step and task is not None and (f.kind, task_group(task)) not in self._seen:
                    return f"first {f.kind} on {task_group(task)}"
        return None

    def saw_failures(self) -> None:
        """An evolution point ran: every failure kind detected so far counts as seen on its group."""
        with self.lock:
            for f in self._failures():
                task = self.harness.tasks.get(f.task_id)
                if task is not None:
                    self._seen.add((f.kind, task_group(task)))

    def _find_failure(self, failure_id: str) -> Failure | None:
        for f in reversed(self._all_failures()):
            if f.id == failure_id:
                return f
        return None

    # ------------------------------------------------------------------------------------ read tools
    def get_failures(self, args: GetFailures) -> FailureList:
        """The failures to handle, one entry per persisting failure (see :class:`GetFailures`): first the rubric
        audit's findings whose tasks have newly graded groups (a requirement the prompts state that no rubric checks
        is exploited early, so it is repaired first), then the detected failures, newest first. Left out: those an
        evolution point handled, and those deferred with no new group of their candidate's tasks graded since
        (:mod:`harnessrl.evolution.handled`)."""
        if args.task_id is not None:
            self._task(args.task_id)  # an id that is no training task is an error, not an empty list
        with self.lock:
            groups: dict[tuple, list[Failure]] = {}
            handled: set[tuple] = set()
            waiting: set[tuple] = set()
            audit = {f.id for f in self._audit_failures()}
            for f in self._all_failures():
                if args.since_step is not None and f.step < args.since_step and f.id not in audit:
                    continue
                if args.kinds and f.kind not in args.kinds:
                    continue
                if args.task_id is not None and f.task_id != args.task_id:
                    continue
                if self.handled.is_handled(f):
                    handled.add(f.key)
                    continue
                if self.handled.waiting(f, self._graded_groups):
                    waiting.add(f.key)
                    continue
                groups.setdefault(f.key, []).append(f)
            views = [self._failure_view(fs) for fs in groups.values()]
        views.sort(key=lambda v: (v.failure_id not in audit, -v.step, v.kind, v.task_id))
        return FailureList(
            failures=views[: args.limit],
            total=len(views),
            handled=len(handled - set(groups)),
            deferred=len(waiting - set(groups)),
        )

    @staticmethod
    def _failure_view(reports: Sequence[Failure]) -> FailureView:
        """One persisting failure as ``get_failures`` lists it: its latest report, with how often it came."""
        latest = max(reports, key=lambda f: f.step)
        return FailureView(
            failure_id=latest.id,
            kind=latest.kind,
            step=latest.step,
            task_id=latest.task_id,
            domain=latest.domain,
            summary=latest.summary,
            evidence=latest.evidence,
            interface_hint=latest.interface_hint,
            rubric_version=latest.rubric_version,
            occurrences=len({f.step for f in reports}),
            first_step=min(f.step for f in reports),
        )

    def query_memory(self, args: QueryMemory) -> MemoryResult:
        """Within-task history or cross-task evidence from the training memory (see :class:`QueryMemory`)."""
        if args.task_id is not None:
            self._task(args.task_id)
        if self.memory is None:
            return MemoryResult(mode=args.mode, note="this run keeps no training memory: decide from the failures")
        mem = self.memory
        if args.mode == "task_history":
            steps = mem.task_history(args.task_id, last_n=args.n)
            updates = mem.candidates(task_id=args.task_id)[-args.n :]
            items = [{"record": "step", **s.model_dump(mode="json", exclude_none=True)} for s in steps]
            items += [{"record": "update", **c.model_dump(mode="json", exclude_none=True)} for c in updates]
            return MemoryResult(mode=args.mode, items=items)
        text = args.text or self._latest_failure_text(args.task_id)
        if not text:
            raise CandidateError(f"no failure detected on task {args.task_id!r} yet: give the text to search for")
        if args.mode == "similar_failures":
            rows = mem.similar_failures(
                text, kind=args.kind, interface=args.interface, exclude_task=args.task_id, n=args.n
            )
        elif args.mode == "what_worked":
            rows = mem.what_worked(text, kind=args.kind, interface=args.interface, n=args.n, exclude_task=args.task_id)
        else:
            rows = mem.similar_tasks(text, n=args.n, exclude_task=args.task_id, failure=args.kind)
        items = [r.model_dump(mode="json", exclude_none=True) for r in rows]
        note = "" if items else "nothing similar in the memory yet"
        return MemoryResult(mode=args.mode, items=items, note=note)

    def _latest_failure_text(self, task_id: str | None) -> str | None:
        if task_id is None:
            return None
        for f in reversed(list(self._failures())):
            if f.task_id == task_id:
                return f"{f.kind.replace('_', ' ')}: {f.summary}"  # how the memory words a failure
        return None

    def inspect_rollouts(self, args: InspectRollouts) -> RolloutList:
        """A task's rubric, reference answer and recent rollouts, lowest to highest reward."""
        with self.lock:
            task = self._task(args.task_id)
            current = self.harness.rubrics.current(args.task_id)
            kept = self.recorder.latest_rollouts(args.task_id)
        steps = sorted({r.step for r in kept})[-args.steps :]
        pool = sorted(
            (r for r in kept if r.step in steps),
            key=lambda r: (r.reward is None, -1.0 if r.reward is None else r.reward, r.step, r.member),
        )
        chosen = pool
        if len(pool) > args.limit:  # evenly spread over the reward order: both extremes and the middle
            n, k = len(pool), args.limit
            chosen = [pool[(n - 1) // 2]] if k == 1 else [pool[round(i * (n - 1) / (k - 1))] for i in range(k)]
        return RolloutList(
            task_id=task.id,
            domain=task.domain,
            prompt=prompt_text(task.prompt),
            rubric_version=current.version,
            rubric=criteria_view(current.criteria),
            reference_answer=task.reference_answer,
            reference_verdicts=(self.witness.view(task.id) or {}).get("verdicts") or {},
            rollouts=[self._rollout_view(r) for r in chosen],
            total=len(pool),
        )

    def _rollout_view(self, r: RolloutRecord) -> RolloutView:
        text, cut = r.completion, len(r.completion) > self.completion_chars
        if cut:
            text = text[: self.completion_chars] + f" …[{len(r.completion) - self.completion_chars} more characters]"
        return RolloutView(
            step=r.step,
            member=r.member,
            guided=r.guided,
            reward=r.reward,
            length_tokens=r.length_tokens,
            length_words=r.length_words,
            rubric_version=r.rubric_version,
            completion=text,
            truncated=cut,
            verdicts=dict(r.verdicts),
        )

    def get_harness_state(self, args: GetHarnessState) -> HarnessView:
        """Interface versions, and one task's sampling, guidance and rubric as they are now."""
        with self.lock:
            step = self.current_step()
            h = self.harness
            view = None
            if args.task_id is not None:
                task = self._task(args.task_id)
                fields: dict[str, Any] = {}
                for iface in h.interfaces.values():
                    fields.update(iface.task_view(task, step))
                reference = self.witness.view(task.id)
                if reference is not None:
                    fields["reference"] = reference
                view = TaskView(task_id=task.id, domain=task.domain, **fields)
            return HarnessView(step=step, versions=h.versions, task=view)

    # ------------------------------------------------------------------------------------ builders
    def builder_args(self, interface: str) -> type[BuilderArgs]:
        """The argument model of ``interface``'s builder tool (what :meth:`build_candidate` takes)."""
        return builder_args(type(self.harness.interface(interface)))

    def build_candidate(self, interface: str, args: BuilderArgs) -> Candidate:
        """Build (not apply) a candidate of ``interface`` from its builder tool's arguments
        (:meth:`builder_args`), validated with that interface's ``preview``."""
        iface = self.harness.interface(interface)
        update = args.update()
        with self.lock:
            try:
                update = iface.widen(update)  # every task that shares the repair's signature, each its own instance
                preview = iface.preview(update, self.current_step() + 1)
            except ValueError as e:
                raise CandidateError(f"invalid {iface.builder_tool} candidate: {e}") from None
            return self._propose(update, args.failure_id, preview)

    def _propose(self, update: InterfaceUpdate, failure_id: str | None, preview: dict[str, Any]) -> Candidate:
        failure = None
        if failure_id:
            failure = self._find_failure(failure_id)
            if failure is None:
                raise CandidateError(
                    f"unknown failure_id {failure_id!r}: use a failure_id returned by get_failures, or leave it null"
                )
        step = self.current_step()
        earlier = [c for c in self._candidates.values() if failure_id and c.failure_id == failure_id]
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
        self._candidates[cid] = cand
        self.counts[f"proposed/{update.interface}"] += 1
        if cand.revision:
            self.counts[f"revisions/{update.interface}"] += 1
        self._remember(
            f"storing candidate {cid}",
            self.memory.add_candidate if self.memory else None,
            cid,
            step=step,
            payload=update,
            failure=failure,
            # the task it changes, as its interface says (a domain-wide update: its first task)
            task_id=None if failure is not None else next(iter(t.id for t in self._targets(update)), None),
            attribution=self._attributions.get(failure_id or "", {}).get("rationale", ""),
            revision=cand.revision,
            parent_id=cand.parent_id,
        )
        self._event(
            "proposal",
            candidate_id=cid,
            interface=update.interface,
            failure_id=failure_id,
            remedy=update.remedy,
            covers=[t.id for t in self._targets(update)],
            update=update.model_dump(mode="json"),
            preview=preview,
            revision=cand.revision,
            parent_id=cand.parent_id,
        )
        return cand.view()

    # ------------------------------------------------------------------------------------ critic, commit
    def run_frozen_policy_trial(self, args: RunTrial) -> TrialResult:
        """Measure a candidate on the frozen policy with the trials object; record and return its result."""
        with self._policy_still("run_frozen_policy_trial", args.candidate_id), self.lock:
            cand = self._get(args.candidate_id)
            if cand.status == "committed":
                raise CandidateError(f"candidate {cand.candidate_id} is already committed (version {cand.version})")
            if self.trials is None:
                raise HarnessRLError("this run has no critic trials: give EvolutionService a trials object")
            target = self._target_state(cand.update)
            step = self.current_step()
            t0 = time.perf_counter()
            try:
                result = self.trials.run(cand.update, cand.candidate_id, cand.failure)
            except Exception as e:
                self._event("trial", candidate_id=cand.candidate_id, interface=cand.update.interface, error=str(e))
                raise
            seconds = time.perf_counter() - t0
            if (point := self.hold.point) is not None:
                point.trials += 1
                point.trial_seconds += seconds
            cand.trials.append(result)
            cand.status = "accepted" if result.accepted else "pending" if result.pending else "rejected"
            cand.trial_step, cand.trial_target = step, target
            self.counts[f"{cand.status}/{cand.update.interface}"] += 1
            self._record_trial(cand, result, seconds)
            if result.metric == CHECK_SPLIT_SHARE:  # the one kind of trial that takes or ends a pooled look
                self._save_pending()
            return result

    def _save_pending(self) -> None:
        """The pending tests' pooled evidence, whole, in ``pending_tests.json`` (:data:`PENDING_TESTS`), so a resumed
        run goes on with their looks instead of starting them again."""
        if self.run_dir is None or not isinstance(self.trials, PendingTests):
            return
        tests = {k: v.to_json() for k, v in sorted(self.trials.pending_tests().items())}
        if tests or self.run_dir.file(PENDING_TESTS).exists():
            self.run_dir.write_json(PENDING_TESTS, {"step": self.current_step(), "tests": tests})

    def restore_pending(self, through_step: int) -> dict[str, int]:
        """A resumed run's pending tests as they stood at its checkpoint (``through_step``: the looks and the
        outcomes of later steps left out), from ``pending_tests.json``; the looks restored, by repair key. A file
        that cannot be read is moved aside (``pending_tests.json.unreadable``) with a warning, and those tests start
        again: a resume never stops on it."""
        if self.run_dir is None or not isinstance(self.trials, PendingTests):
            return {}
        path = self.run_dir.file(PENDING_TESTS)
        if not path.exists():
            return {}
        try:
            data = self.run_dir.read_json(PENDING_TESTS)
            tests = {str(k): SplitEvidence.from_json(v).until(through_step) for k, v in data["tests"].items()}
        except (HarnessRLError, ValueError, TypeError, KeyError, AttributeError) as e:
            aside = path.with_name(f"{PENDING_TESTS}.unreadable")
            path.replace(aside)
            logger.warning("%s cannot be read (%s); moved to %s, and its pending tests start again", path, e, aside)
            return {}
        kept = {k: v for k, v in tests.items() if v.looks}
        self.trials.restore_pending(kept)
        return {k: v.looks for k, v in kept.items()}

    def _record_trial(self, cand: CandidateRecord, result: TrialResult, seconds: float) -> None:
        """A trial's result in the memory (the candidate's trials and verdict) and the events (trial, verdict)."""
        cid, interface = cand.candidate_id, cand.update.interface
        self._remember(
            f"recording the trial of {cid}",
            self.memory.update_candidate if self.memory else None,
            cid,
            verdict=cand.status,
            trials=[t.model_dump(mode="json") for t in cand.trials],
        )
        self._event(
            "trial",
            candidate_id=cid,
            interface=interface,
            failure_id=cand.failure_id,
            remedy=result.remedy,
            verdict_kind=result.verdict_kind,
            result=result.model_dump(mode="json"),
            seconds=round(seconds, 3),
        )
        self._event(
            "verdict",
            candidate_id=cid,
            interface=interface,
            failure_id=cand.failure_id,
            verdict=cand.status,
            verdict_kind=result.verdict_kind,
            remedy=result.remedy,
            covers=result.covers,
            reason=result.reason,
        )

    def commit_update(self, args: CommitUpdate) -> CommitResult:
        """Apply an accepted candidate from the next step and save the harness; refuse anything unmeasured."""
        with self._policy_still("commit_update", args.candidate_id), self.lock:
            cand = self._get(args.candidate_id)
            cid = cand.candidate_id
            step = self.current_step()
            self._check_committable(cand, step)
            applies = step + 1
            saved = self.run_dir.harness if self.run_dir is not None else None
            on_probation = bool(cand.trials) and cand.trials[-1].verdict_kind == "probation"
            revert = self.harness.interface(cand.update).reverting(cand.update) if on_probation else []
            try:  # all or nothing: harness.json is written before the live harness changes
                version = self.harness.apply(cand.update, step=applies, candidate_id=cid, save_to=saved)
            except ValueError as e:
                raise CandidateError(f"candidate {cid} cannot be applied: {e}") from None
            except OSError as e:
                raise HarnessRLError(
                    f"candidate {cid} was not applied: {saved} could not be written ({e}); the harness and the "
                    "file are as they were. Free the disk space and call commit_update on it again"
                ) from e
            cand.status, cand.version, cand.applied_step = "committed", version, applies
            interface = cand.update.interface
            self.counts[f"committed/{interface}"] += 1
            if (point := self.hold.point) is not None:
                point.committed += 1
            self.outcomes.expect(cid, self._outcome_tasks(cand), applies)
            trial_of = (
                self.probation.start(
                    cid, self._outcome_tasks(cand), applies, revert, *_probation_checks(cand.trials[-1])
                ).event_fields()
                if on_probation
                else {}
            )
            self._remember(
                f"recording the commit of {cid}",
                self.memory.update_candidate if self.memory else None,
                cid,
                verdict="committed",
                applied_step=applies,
            )
            self._event(
                "commit",
                candidate_id=cid,
                interface=interface,
                failure_id=cand.failure_id,
                version=version,
                applies_from_step=applies,
                remedy=cand.update.remedy,
                covers=self._outcome_tasks(cand),
                update=cand.update.model_dump(mode="json"),
                **trial_of,
            )
            if cand.failure_id:
                self._mark_handled(cand.failure_id, "committed", candidate_id=cid)
            self._cover_failures(cand)
            if interface == "rubric_criteria":  # the reference under the new versions: evidence for what follows
                self.check_references(self._outcome_tasks(cand), step=step)
            return CommitResult(candidate_id=cid, interface=interface, version=version, applies_from_step=applies)

    def _cover_failures(self, cand: CandidateRecord) -> None:
        """A rubric repair that reached several tasks handles the failures it answers on all of them, detected
        before it applies (outcome ``covered``): their groups were graded by the rubric it replaces."""
        if cand.update.signature is None:
            return
        covered = set(self._outcome_tasks(cand))
        for f in self._all_failures():
            mine = f.task_id in covered and f.kind in _COVERED_KINDS and f.id != cand.failure_id
            if mine and not self.handled.is_handled(f):
                self._mark_handled(f.id, "covered", candidate_id=cand.candidate_id)

    def _targets(self, update: InterfaceUpdate) -> list:
        try:
            return list(self.harness.interface(update).targets(update))
        except ValueError:  # an update whose target is not a training task: no task to file it under
            return []

    def _check_committable(self, cand: CandidateRecord, step: int) -> None:
        """Refuse (:class:`CandidateError`) a commit of ``cand`` at ``step``: already committed, its failure handled
        since (covered by another commit), never measured, rejected by its latest trial, its harness state changed
        since, or its trial older than allowed."""
        cid = cand.candidate_id
        if cand.status == "committed":
            raise CandidateError(
                f"candidate {cid} is already committed (version {cand.version}, from step {cand.applied_step})"
            )
        if cand.failure_id and (outcome := self.handled.outcome(cand.failure_id)) is not None:
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
        if self._target_state(cand.update) != cand.trial_target:
            raise CandidateError(
                f"the harness state candidate {cid} changes was updated after its trial: run "
                "run_frozen_policy_trial on it again (or rebuild it on the current state)"
            )
        if cand.trial_step is not None and step - cand.trial_step > self.max_trial_age_steps:
            raise CandidateError(
                f"candidate {cid} was measured at step {cand.trial_step} and the policy has trained to step "
                f"{step} since: run run_frozen_policy_trial on it again"
            )

    def _target_state(self, update: InterfaceUpdate) -> str:
        """The part of the harness ``update`` changes, as text: a commit needs it unchanged since the trial."""
        return json.dumps(self.harness.interface(update).target_state(update), sort_keys=True, default=str)

    # ------------------------------------------------------------------------------------ holding training
    def hold_training(self, args: HoldTraining) -> HoldState:
        """Ask the trainer to stop at its next step boundary, for a lease of ``seconds`` (see
        :class:`~harnessrl.interfaces.tools.HoldTraining`); waits up to ``wait_s`` for it to stop."""
        return self.hold.hold(args.seconds, args.wait_s)

    def release_training(self, args: ReleaseTraining) -> HoldState:
        """End the hold: the trainer goes on at once."""
        return self.hold.release()

    def step_boundary(self, step: int) -> None:
        """The trainer at the end of ``step`` (main process): while an evolver holds training, wait here
        (the policy stays as it is); a lease that runs out lets training go on, with an event saying so,
        once the trial or commit in flight (if any) has ended. The hold is an evolution point of the run:
        an ``evolution_point`` event records it (mode external) with its held seconds and trials."""
        self.settle_probations(step)
        self.hold.step_boundary(step)

    def settle_probations(self, step: int) -> None:
        """Act on the probations decided since the last boundary (:mod:`harnessrl.evolution.probation`): a kept
        hint stays; a reverted one gives way to the rules it replaced, applied from the next step (a new harness
        version and a ``revert`` event). Training is between steps here (the policy lock is free), so the tools'
        lock can be taken."""
        for look in self.probation.settle():
            p = look.probation
            kept = not look.reverts
            self._remember(
                f"recording the probation of {p.candidate_id}",
                self.memory.record_outcome if self.memory else None,
                p.candidate_id,
                {**look.fields, "probation": "kept" if kept else "reverted", "recovered": kept},
            )
            if kept:
                continue
            versions = []
            saved = self.run_dir.harness if self.run_dir is not None else None
            with self.lock:
                for u in p.revert:
                    try:
                        reverted = f"{p.candidate_id}{REVERT_SUFFIX}"
                        versions.append(self.harness.apply(u, step=step + 1, candidate_id=reverted, save_to=saved))
                    except ValueError as e:  # a later commit already replaced that rule: nothing to put back there
                        what = self.harness.interface(u).describe(u)
                        logger.info("probation of %s: %s not reverted (%s)", p.candidate_id, what, e)
                self.counts[f"reverted/{p.revert[0].interface if p.revert else 'harness'}"] += 1
            if any(u.interface == "rubric_criteria" for u in p.revert):
                self.check_references(p.task_ids, step=step)
            self._event(
                "revert",
                step=step,
                candidate_id=p.candidate_id,
                interface=p.revert[0].interface if p.revert else None,
                versions=versions,
                applies_from_step=step + 1,
                covers=p.task_ids,
                reason=_probation_reason(look.kind, look.fields)
                + ("" if p.revert else "; nothing to revert: the checks the prompts state stay"),
                updates=[u.model_dump(mode="json") for u in p.revert],
            )

    def at_boundary(self, step: int) -> AtBoundary:
        """A context in which the trainer is stopped at ``step`` (an in-process evolution point): a hold asked
        meanwhile is granted at once and ends with it. Its value, once the context has ended, holds the
        point's trial count and seconds (:meth:`~harnessrl.evolution.hold.Point.stats`)."""
        return self.hold.at_boundary(step)

    def _policy_still(self, tool: str, candidate_id: str):
        """:meth:`TrainingHold.policy_still <harnessrl.evolution.hold.TrainingHold.policy_still>` for ``tool``
        on ``candidate_id``: a refusal leaves the candidate's failure to be offered again."""

        def refused() -> None:  # under the hold's condition: no lock taken here
            cand = self._candidates.get(candidate_id)
            if cand is not None and cand.failure_id:
                self.handled.interrupt(cand.failure_id)

        return self.hold.policy_still(tool, refused)

    # ------------------------------------------------------------------------------------ outcomes
    def _outcome_tasks(self, cand: CandidateRecord) -> list[str]:
        """The tasks whose learning signal a committed update's outcome is measured on: those it changes (else
        its failure's task)."""
        try:
            tasks = [t.id for t in self.harness.interface(cand.update).targets(cand.update)]
        except ValueError:
            tasks = []
        if not tasks and cand.failure is not None:
            tasks = [cand.failure.task_id]
        return tasks

    def observe_step(self, record: StepRecord) -> None:
        """A trained step's record (a trainer step listener): feeds the outcomes of committed updates, and
        writes each to the memory (``what_worked`` ranks by it) and the events once measured.

        It runs on the training thread, inside the step (the policy lock held): it takes only the outcome
        tracker's own lock, never the tools' lock a trial holds while it waits for the policy."""
        for look in self.probation.observe(record):
            self._event("probation", step=look.step, **look.fields)
        for m in self.outcomes.observe(record):
            cid = m.candidate_id
            self._remember(
                f"recording the outcome of {cid}", self.memory.record_outcome if self.memory else None, cid, m.fields
            )
            self._event("outcome", step=m.step, candidate_id=cid, task_ids=m.task_ids, **m.fields)

    # ------------------------------------------------------------------------------------ handled failures
    def _mark_handled(self, failure_id: str, outcome: str, candidate_id: str | None = None, reason: str = "") -> None:
        """Record that the current evolution point handled ``failure_id`` (a ``failure_handled`` event)."""
        with self.lock:
            if self.handled.offered_again(failure_id, outcome):  # given up for a refused trial or commit
                return
            failure = self._find_failure(failure_id)
            point = self.hold.point
            step = point.step if point is not None else self.current_step()
            key = failure.key if failure is not None else None
            self.handled.add(failure_id, key, step, outcome)
            if (owner := self._finding_owner(failure_id)) is not None:
                owner.handled(failure_id, outcome)
            if point is not None:
                point.handled += 1
        self._event(
            "failure_handled",
            step=step,
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

    def replay_events(self, events: Iterable[Mapping[str, Any]], through_step: int) -> None:
        """Replay a resumed run's events (not :meth:`Interface.restore`, which reads an interface's saved state):
        rebuild what earlier processes of a resumed run decided, from their ``events``: the evolver's
        counts (attributed, proposed, accepted, rejected, revisions, committed per interface) and the failures
        handled by evolution points at or before ``through_step`` (the checkpoint the run goes on from: the
        steps after it are trained again, and what they show is new)."""
        probations: dict[str, Probation] = {}
        with self.lock:
            for e in events:
                kind, iface = e.get("kind"), e.get("interface")
                if kind in ("commit", "probation", "revert"):
                    self._replay_probation(e, through_step, probations)
                if kind == "attribution" and iface:
                    self.counts[f"attributed/{iface}"] += 1
                elif kind == "proposal" and iface:
                    self.counts[f"proposed/{iface}"] += 1
                    if e.get("revision"):
                        self.counts[f"revisions/{iface}"] += 1
                elif kind == "verdict" and iface and e.get("verdict") in ("accepted", "rejected", "pending"):
                    self.counts[f"{e['verdict']}/{iface}"] += 1
                elif kind == "commit" and iface:
                    self.counts[f"committed/{iface}"] += 1
                else:
                    self.handled.replay_event(e, through_step)
        for p in probations.values():
            self.probation.reopen(p)

    def _replay_probation(self, e: Mapping[str, Any], through_step: int, open_: dict[str, Probation]) -> None:
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
            revert = [parse_update(u, self.harness.extra) for u in e.get("revert") or []]
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
        with self.lock:
            failure = self._find_failure(failure_id) if failure_id else None
            if task_id is None and failure is not None:
                task_id = failure.task_id
            if failure_id:
                self._attributions[failure_id] = {"interface": interface, "rationale": rationale}
            self.counts[f"attributed/{interface}"] += 1
        self._event(
            "attribution",
            failure_id=failure_id,
            task_id=task_id,
            interface=interface,
            rationale=rationale,
            evidence=evidence,
            **extra,
        )
        if failure_id and self.memory is not None:
            try:
                self.memory.set_failure_interface(failure_id, interface)
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
        data = dict(_dump(payload) or {})
        if kind == "attribution":
            self.record_attribution(
                data.pop("failure_id", None),
                str(data.pop("interface", "")),
                str(data.pop("rationale", "") or ""),
                task_id=data.pop("task_id", None),
                evidence=data.pop("evidence", None),
                **data,
            )
        elif kind not in _WRITTEN_BY_TOOLS:
            if kind == "deferred" and data.get("failure_id"):
                data.update(self._defer(str(data["failure_id"]), data.get("candidate_id")))
            self._event(kind, **data)
            if kind == "give_up" and data.get("failure_id"):
                reason = str(data.get("reason") or "")
                self._mark_handled(str(data["failure_id"]), "gave_up", data.get("candidate_id"), reason)

    def _defer(self, failure_id: str, candidate_id: Any) -> dict[str, Any]:
        """``failure_id`` ended pending, not handled: it waits until more groups of the tasks its candidate covers
        are graded (the audit's finding by its own count, a detected failure in :attr:`handled`); what the wait
        needs, for the ``deferred`` event (a resumed run replays it). With ``evidence_draws`` an audit finding's next
        group is asked for (:meth:`_ask_evidence`); a detected failure waits for its draw to come round."""
        with self.lock:
            cand = self._candidates.get(str(candidate_id)) if candidate_id else None
            covered = self._outcome_tasks(cand) if cand is not None else []
            if (owner := self._finding_owner(failure_id)) is not None:
                owner.handled(failure_id, "deferred")
                return self._ask_evidence(covered)
            failure = self._find_failure(failure_id)
            if failure is None:
                return {}
            tasks = covered or [failure.task_id]
            graded = sum(self._graded_groups(t) for t in tasks)
            self.handled.defer(failure.key, tasks, graded)
            return {"criterion": failure.key[2], "covers": tasks, "graded_groups": graded}

    def _ask_evidence(self, tasks: Sequence[str]) -> dict[str, Any]:
        """With ``evidence_draws``: task sampling draws one of ``tasks`` (an audit finding's, pending) at the next step
        (the one with the fewest graded groups, a task never drawn first), so the pending test is measured again a
        step later instead of when the draw comes round
        (:meth:`~harnessrl.interfaces.sampling.TaskSampling.request_evidence`); harness.json is rewritten so a
        resumed run draws the same. Only tasks whose rubric no commit has changed yet are drawn: the draw is there to
        bring a lax rubric its first repair before GRPO learns the hack, not to refine a repaired one (docs/design.md
        §4, "Evidence draws"). The audit asks for each finding's first group before step 1 (:meth:`run_audit`). The
        run's evidence draws stay within :data:`EVIDENCE_SHARE` of the training tasks and the groups graded so far
        together. What was asked, for the ``deferred`` or ``rubric_audit`` event."""
        if not self.evidence_draws:
            return {}
        tasks = [t for t in tasks if self.harness.rubrics.current(t).version == 0]
        if not tasks:
            return {}
        asked_so_far = sum(len(due) for due in self.harness.sampling.state.evidence_draws.values())
        graded = sum(self._graded_groups(t) for t in self.harness.tasks)
        if asked_so_far >= EVIDENCE_SHARE * (len(self.harness.tasks) + graded):
            return {}
        order = sorted(dict.fromkeys(tasks), key=lambda t: (self._graded_groups(t), t))
        asked = self.harness.sampling.request_evidence(order, self.current_step() + 1)
        if asked is None:
            return {}
        if self.run_dir is not None:
            try:
                self.harness.save(self.run_dir.harness)
            except OSError as e:  # not saved, not drawn: a resumed run must draw what this one draws
                self.harness.sampling.state.evidence_draws.pop(asked[1], None)
                logger.warning("evidence draw of %s not asked: %s could not be written (%s)", asked[0], e.filename, e)
                return {}
        return {"evidence_draw": {"task_id": asked[0], "step": asked[1]}}


def _probation_checks(result: TrialResult) -> tuple[dict[str, list[str]] | None, Mapping[str, Any] | None]:
    """Per task, the checks a rubric edit put on probation adds, or None; and the evidence of the pending test it
    continues, or None (its trial's measurements)."""
    measured = result.measurements.get("probation") or {}
    checks, prior = measured.get("checks"), measured.get("evidence")
    return (
        {str(t): [str(c) for c in ids] for t, ids in checks.items()} if isinstance(checks, Mapping) else None,
        prior if isinstance(prior, Mapping) else None,
    )


def _probation_reason(kind: str, f: Mapping[str, Any]) -> str:
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
