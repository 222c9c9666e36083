"""The evolver's tools, trainer side: read failures, memory, rollouts and the harness; build, trial and
commit harness update candidates.

:class:`EvolutionService` implements every tool of :func:`harnessrl.interfaces.tools.tool_table` as a plain method
that takes the tool's argument model and returns its result model; the boundary (the MCP server,
:class:`~harnessrl.evolution.mcp_server.ToolServer`) validates a call's JSON into that model once, so a method
never guesses at its arguments' shape.
It is the one object the trainer and the tool server use: a facade over parts, each in its own module and each
holding the one shared state (:mod:`harnessrl.evolution.context`: the harness, records, memory, trials, the tools'
lock and counts, the candidates):

- the read tools (:mod:`harnessrl.evolution.read_tools`): failures, memory, rollouts, the harness state;
- the builders and ``commit_update`` (:mod:`harnessrl.evolution.build_tools`) and the candidates they keep
  (:mod:`harnessrl.evolution.candidates`);
- the trial tool (:mod:`harnessrl.evolution.trial_tool`): trials and the point's budget of them;
- the pending decisions (:mod:`harnessrl.evolution.pending`): pending tests' evidence (saved, restored) and
  probations (settled, reverted, replayed);
- the findings offered before any detector fires (:mod:`harnessrl.evolution.findings`: the rubric audit, the
  reference witness) and the ledger of handled and deferred failures (:mod:`harnessrl.evolution.ledger`, over
  :mod:`harnessrl.evolution.handled`);
- the point's orchestration (:mod:`harnessrl.evolution.orchestration`): when a point is due, the step boundary,
  a trained step's outcomes, the graph's events, the replay of a resumed run; with the training hold and its lease
  (:mod:`harnessrl.evolution.hold`) and the outcomes of committed updates (:mod:`harnessrl.evolution.outcomes`).

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
evolution point; one re-entrant lock (:attr:`EvolutionService.lock`, the shared state's, which every part takes)
serializes every tool, so a trial sees one consistent harness and a commit never interleaves with another.

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

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from harnessrl.evolution.build_tools import BuildTools
from harnessrl.evolution.candidates import CandidateError
from harnessrl.evolution.context import ServiceContext, TrialRunner
from harnessrl.evolution.findings import EVIDENCE_SHARE, EarlyFindings
from harnessrl.evolution.ledger import FailureLedger
from harnessrl.evolution.orchestration import PointOrchestration
from harnessrl.evolution.pending import PENDING_TESTS, PendingDecisions, PendingTests
from harnessrl.evolution.read_tools import ReadTools
from harnessrl.evolution.trial_tool import TrialTool
from harnessrl.interfaces.tools import (
    BuilderArgs,
    Candidate,
    CommitResult,
    CommitUpdate,
    EventRecorded,
    FailureList,
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
    RunTrial,
    ToolSpec,
    tool_table,
)
from harnessrl.records.event_payloads import AuditFindingView, AuditProbePayload
from harnessrl.records.trials import TrialResult

if TYPE_CHECKING:
    from harnessrl.evolution.hold import AtBoundary
    from harnessrl.evolution.probation import ProbationRule
    from harnessrl.evolution.reference import Grader
    from harnessrl.interfaces import Harness
    from harnessrl.memory.store import TrainingMemory
    from harnessrl.records.events import Event
    from harnessrl.records.failures import Failure
    from harnessrl.records.run_dir import RunDir
    from harnessrl.records.steps import Recorder, StepRecord

__all__ = ["EVIDENCE_SHARE", "PENDING_TESTS", "CandidateError", "EvolutionService", "PendingTests", "TrialRunner"]


def _shared(name: str, doc: str = "") -> Any:
    """An attribute of the service that is its shared state's (:class:`~harnessrl.evolution.context.ServiceContext`):
    read there, and set there, so that every part sees a value replaced on the service."""
    return property(lambda self: getattr(self._ctx, name), lambda self, value: setattr(self._ctx, name, value), doc=doc)


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
            of the tasks it covers whose rubric is still the dataset's at the next step
            (:meth:`EarlyFindings.ask_evidence <harnessrl.evolution.findings.EarlyFindings.ask_evidence>`).
        max_hold_s: the longest lease of an evolver's hold on training (the run's ``evolver.hold_s``): a client
            may ask for less, never for more; None: as long as asked (:class:`~harnessrl.evolution.hold.TrainingHold`).
        probation: how a hint committed on probation is kept or reverted (``trials.guidance_trial: in_group``;
            :mod:`harnessrl.evolution.probation`); None: its defaults.
        reference_grader: the run's judge on a task's reference answer under some criteria, for the reference witness
            (:mod:`harnessrl.evolution.reference`: graded before step 1 and after every rubric edit, its suspects shown
            to the evolver and its exact ones offered as failures); None: no witness.
    """

    harness = _shared("harness", "The run's harness (mutated only by :meth:`commit_update` and a probation's revert).")
    recorder = _shared("recorder", "The trainer's recorder (kept rollouts, graded groups).")
    memory = _shared("memory", "The training memory, or None.")
    trials = _shared("trials", "The trials object (:class:`TrialRunner`), or None.")
    run_dir = _shared("run_dir", "Where harness.json and the events are written, or None.")
    _failures = _shared("failures", "Returns the failures detected so far.")
    _step = _shared("step", "Returns the current training step.")
    max_trial_age_steps = _shared("max_trial_age_steps")
    completion_chars = _shared("completion_chars")
    first_evidence = _shared("first_evidence")
    evidence_draws = _shared("evidence_draws")
    lock = _shared("lock", "The tools' lock (see the module docstring for the one lock order).")
    counts = _shared("counts", "The evolver's counts by ``what/interface`` (:meth:`metrics`).")
    hold = _shared("hold", "The training hold and its lease (:class:`~harnessrl.evolution.hold.TrainingHold`).")
    outcomes = _shared("outcomes", "Outcomes of commits (:class:`~harnessrl.evolution.outcomes.OutcomeTracker`).")
    probation = _shared("probation", "Hints on probation (:class:`~harnessrl.evolution.probation.ProbationTracker`).")
    handled = _shared("handled", "Failures handled by points (:class:`~harnessrl.evolution.handled.HandledFailures`).")
    audit = _shared("audit", "The rubric audit (:class:`~harnessrl.evolution.audit.RubricAudit`).")
    witness = _shared("witness", "The reference witness (:class:`~harnessrl.evolution.reference.ReferenceWitness`).")
    suspect_findings = _shared("suspect_findings", "The witness's exact suspects as findings.")

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
        self._ctx = ctx = ServiceContext(
            harness,
            recorder,
            memory,
            trials,
            run_dir,
            failures,
            step,
            max_trial_age_steps=max_trial_age_steps,
            completion_chars=completion_chars,
            outcome_groups=outcome_groups,
            outcome_steps=outcome_steps,
            audit_rubrics=audit_rubrics,
            first_evidence=first_evidence,
            evidence_draws=evidence_draws,
            max_hold_s=max_hold_s,
            probation=probation,
            reference_grader=reference_grader,
        )
        self._findings = EarlyFindings(ctx)
        self._ledger = FailureLedger(ctx, self._findings)
        self._pending = PendingDecisions(ctx, self._findings)
        self._read = ReadTools(ctx, self._findings)
        self._trial = TrialTool(ctx, self._pending)
        self._build = BuildTools(ctx, self._findings, self._ledger)
        self._point = PointOrchestration(ctx, self._findings, self._ledger, self._pending)

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
        return self._ctx.current_step()

    def candidate(self, candidate_id: str) -> Candidate:
        """A candidate as the evolver sees it (raises :class:`CandidateError` for an unknown id)."""
        return self._build.candidate(candidate_id)

    def candidates(self) -> list[Candidate]:
        return self._build.candidates()

    def metrics(self) -> dict[str, float]:
        """Evolver counts so far, e.g. ``evolver/proposed/rubric_criteria`` (for the step's metrics)."""
        return {f"evolver/{k}": float(v) for k, v in sorted(self.counts.items())}

    # ------------------------------------------------------------------------------------ read tools
    def get_failures(self, args: GetFailures) -> FailureList:
        """The ``get_failures`` tool (:meth:`ReadTools.get_failures
        <harnessrl.evolution.read_tools.ReadTools.get_failures>`): the findings first, then the detected failures."""
        return self._read.get_failures(args)

    def query_memory(self, args: QueryMemory) -> MemoryResult:
        """The ``query_memory`` tool: within-task history or cross-task evidence from the training memory."""
        return self._read.query_memory(args)

    def inspect_rollouts(self, args: InspectRollouts) -> RolloutList:
        """The ``inspect_rollouts`` tool: a task's rubric, reference answer and recent rollouts."""
        return self._read.inspect_rollouts(args)

    def get_harness_state(self, args: GetHarnessState) -> HarnessView:
        """The ``get_harness_state`` tool: interface versions, and one task's harness as it is now."""
        return self._read.get_harness_state(args)

    # ------------------------------------------------------------------------------------ builders, trial, commit
    def builder_args(self, interface: str) -> type[BuilderArgs]:
        """The argument model of ``interface``'s builder tool (what :meth:`build_candidate` takes)."""
        return self._build.builder_args(interface)

    def build_candidate(self, interface: str, args: BuilderArgs) -> Candidate:
        """Build (not apply) a candidate of ``interface`` from its builder tool's arguments (:meth:`BuildTools.
        build_candidate <harnessrl.evolution.build_tools.BuildTools.build_candidate>`)."""
        return self._build.build_candidate(interface, args)

    def run_frozen_policy_trial(self, args: RunTrial) -> TrialResult:
        """Measure a candidate on the frozen policy with the trials object; record and return its result
        (:mod:`harnessrl.evolution.trial_tool`)."""
        return self._trial.run_frozen_policy_trial(args)

    def commit_update(self, args: CommitUpdate) -> CommitResult:
        """Apply an accepted candidate from the next step and save the harness; refuse anything unmeasured
        (:meth:`BuildTools.commit_update <harnessrl.evolution.build_tools.BuildTools.commit_update>`)."""
        return self._build.commit_update(args)

    # ------------------------------------------------------------------------------------ pending decisions
    def restore_pending(self, through_step: int) -> dict[str, int]:
        """A resumed run's pending tests as they stood at its checkpoint (:meth:`PendingDecisions.restore_pending
        <harnessrl.evolution.pending.PendingDecisions.restore_pending>`); the looks restored, by repair key."""
        return self._pending.restore_pending(through_step)

    def settle_probations(self, step: int) -> None:
        """Act on the probations decided since the last boundary: a kept hint stays, a reverted one gives way to
        the rules it replaced (:meth:`PendingDecisions.settle_probations
        <harnessrl.evolution.pending.PendingDecisions.settle_probations>`)."""
        self._pending.settle_probations(step)

    # ------------------------------------------------------------------------------------ findings before detectors
    def run_audit(self, record: bool = True) -> list[AuditFindingView]:
        """The rubric audit before step 1, the references graded first (:meth:`EarlyFindings.run_audit
        <harnessrl.evolution.findings.EarlyFindings.run_audit>`)."""
        return self._findings.run_audit(record)

    def check_references(self, task_ids: Sequence[str] | None = None, *, step: int | None = None, record: bool = True):
        """Grade the references of ``task_ids`` (None: every training task) under their current rubric versions not
        graded yet (:meth:`EarlyFindings.check_references
        <harnessrl.evolution.findings.EarlyFindings.check_references>`)."""
        return self._findings.check_references(task_ids, step=step, record=record)

    def open_findings(self) -> int:
        """How many findings offered before any detector fires are open (the audit's and the witness's)."""
        return self._findings.open_findings()

    def probe_audit(
        self, tasks_per_finding: int, group_size: int, allowance: int | None, record: Callable[[list], None]
    ) -> AuditProbePayload | None:
        """The audit's probes before step 1 (:meth:`EarlyFindings.probe_audit
        <harnessrl.evolution.findings.EarlyFindings.probe_audit>`); None when there is nothing to probe."""
        return self._findings.probe_audit(tasks_per_finding, group_size, allowance, record)

    # ------------------------------------------------------------------------------------ the point
    def point_due(self, step: int) -> str | None:
        """Why an evolution point should come now, out of its schedule (None: no reason;
        :meth:`PointOrchestration.point_due <harnessrl.evolution.orchestration.PointOrchestration.point_due>`)."""
        return self._point.point_due(step)

    def saw_failures(self) -> None:
        """An evolution point ran: every failure kind detected so far counts as seen on its group."""
        self._point.saw_failures()

    def hold_training(self, args: HoldTraining) -> HoldState:
        """Ask the trainer to stop at its next step boundary, for a lease of ``seconds`` (see
        :class:`~harnessrl.interfaces.tools.HoldTraining`); waits up to ``wait_s`` for it to stop."""
        return self.hold.hold(args.seconds, args.wait_s)

    def release_training(self, args: ReleaseTraining) -> HoldState:
        """End the hold: the trainer goes on at once."""
        return self.hold.release()

    def step_boundary(self, step: int) -> None:
        """The trainer at the end of ``step`` (main process): the probations settled, then, while an evolver holds
        training, wait here (:meth:`PointOrchestration.step_boundary
        <harnessrl.evolution.orchestration.PointOrchestration.step_boundary>`)."""
        self._point.step_boundary(step)

    def at_boundary(self, step: int) -> AtBoundary:
        """A context in which the trainer is stopped at ``step`` (an in-process evolution point): a hold asked
        meanwhile is granted at once and ends with it. Its value, once the context has ended, holds the
        point's trial count and seconds (:meth:`~harnessrl.evolution.hold.Point.stats`)."""
        return self.hold.at_boundary(step)

    def observe_step(self, record: StepRecord) -> None:
        """A trained step's record (a trainer step listener, on the training thread: it never takes the tools'
        lock): the probations' looks and the outcomes of committed updates (:meth:`PointOrchestration.observe_step
        <harnessrl.evolution.orchestration.PointOrchestration.observe_step>`)."""
        self._point.observe_step(record)

    # ------------------------------------------------------------------------------------ graph events, resume
    def record_attribution(
        self,
        failure_id: str | None,
        interface: str,
        rationale: str = "",
        task_id: str | None = None,
        evidence: Any = None,
        **extra: Any,
    ) -> None:
        """Record the attributor's decision: an ``attribution`` event, and the failure's interface in memory."""
        self._point.record_attribution(failure_id, interface, rationale, task_id, evidence, **extra)

    def record_event(self, args: RecordEvent) -> EventRecorded:
        """The ``record_event`` tool: one step the evolver's graph reports, recorded by :meth:`on_event`."""
        return self._point.record_event(args)

    def on_event(self, kind: str, payload: Mapping[str, Any] | BaseModel | None = None) -> None:
        """The graph's ``on_event(kind, payload)`` callback (:meth:`PointOrchestration.on_event
        <harnessrl.evolution.orchestration.PointOrchestration.on_event>`)."""
        self._point.on_event(kind, payload)

    def replay_events(self, events: Iterable[Event], through_step: int) -> None:
        """Replay a resumed run's events: the evolver's counts, the failures handled at or before ``through_step``
        and the probations open there (:meth:`PointOrchestration.replay_events
        <harnessrl.evolution.orchestration.PointOrchestration.replay_events>`)."""
        self._point.replay_events(events, through_step)
