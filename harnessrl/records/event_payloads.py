"""An event's own fields, one typed model per event kind: what each writer writes, and what every reader reads.

An :class:`~harnessrl.records.events.Event` is a line of ``events.jsonl``: its time, kind and step, and the kind's
own fields. Those fields are the kind's model here (:data:`EVENT_PAYLOADS`): a writer builds the model and writes
:meth:`EventPayload.written`; a reader gets it back with :meth:`Event.payload <harnessrl.records.events.Event.payload>`
(or :meth:`~harnessrl.records.events.Event.payload_as` where it knows the kind), and reads attributes, never ``.get``
on a dict, as the failures' evidence is read (:mod:`harnessrl.records.evidence`).

Serialised as written (:class:`~harnessrl.records.as_written.AsWritten`): a model dumps the fields its writer set and
any key it does not know, in the order they were set or read (so a line read back is byte for byte what it was).
Every field is optional: a run written before a field existed still loads, and a field one writer of a kind leaves
out (a recovered commit has no ``covers``) stays absent. Numbers that were written as either int or float are
:data:`~harnessrl.records.as_written.Number`, so an int is never dumped back as a float.

Adding an event kind: its name in :data:`~harnessrl.records.events.EventKind`, its model here (a subclass of
:class:`EventPayload` with ``KIND``, listed in :data:`EVENT_PAYLOADS`), its writer building that model, its readers
reading it (docs/design.md §4, "Events").

This module is a data type at the bottom of the layers: it imports nothing of the package but the records'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, Field, ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.as_written import AsWritten, Number
from harnessrl.records.evidence import Evidence, parse_evidence

__all__ = [
    "EVENT_PAYLOADS",
    "AttributionPayload",
    "AuditDraw",
    "AuditFindingView",
    "AuditProbePayload",
    "CommitPayload",
    "DeferredPayload",
    "EvaluationPayload",
    "EventPayload",
    "EvidenceDraw",
    "EvolutionPointPayload",
    "FailureEndPayload",
    "FailureHandledPayload",
    "FailurePayload",
    "GiveUpPayload",
    "GradedReference",
    "OutcomePayload",
    "ProbationPayload",
    "ProbationPrior",
    "ProbationSplit",
    "ProposalPayload",
    "ReferenceCheckPayload",
    "RepairCarriedPayload",
    "RevertPayload",
    "RubricAuditPayload",
    "RunEndPayload",
    "RunStartPayload",
    "TrainingHoldPayload",
    "TrialPayload",
    "UpdateDump",
    "VerdictPayload",
    "parse_payload",
]


UpdateDump = dict[str, Any]
"""An interface update as an event writes it (its ``InterfaceUpdate`` dumped; the run's harness parses it back)."""


class EventPayload(AsWritten, BaseModel):  # BaseModel named: ruff reads the fields as pydantic's
    """The fields of one event of kind :attr:`KIND` (the base of every kind's model: no field of its own)."""

    KIND: ClassVar[str] = ""
    """The event kind this model is the payload of."""

    def written(self) -> dict[str, Any]:
        """The fields as the event's line holds them: those set and the unknown ones, in the order they were set."""
        return self.model_dump()


# ---------------------------------------------------------------------------------------------- the evolver's steps
class AttributionPayload(EventPayload):
    """``attribution``: the attributor's decision (the interface whose update can fix a failure, and why)."""

    KIND: ClassVar[str] = "attribution"
    failure_id: str | None = None
    task_id: str | None = None
    interface: str | None = None
    rationale: str | None = None
    evidence: Any = None
    failure_kind: str | None = None
    failure_step: int | None = None
    summary: str | None = None
    iterations: int | None = None


class ProposalPayload(EventPayload):
    """``proposal``: a candidate built (not applied), with its preview."""

    KIND: ClassVar[str] = "proposal"
    candidate_id: str | None = None
    interface: str | None = None
    failure_id: str | None = None
    remedy: str | None = None
    covers: list[str] = []
    update: UpdateDump | None = None
    preview: Any = None
    revision: int | None = None
    parent_id: str | None = None


class TrialPayload(EventPayload):
    """``trial``: a candidate measured on the frozen policy (``result``: the trial result as written), or the error
    that stopped its trial."""

    KIND: ClassVar[str] = "trial"
    candidate_id: str | None = None
    interface: str | None = None
    failure_id: str | None = None
    remedy: str | None = None
    verdict_kind: str | None = None
    result: dict[str, Any] = {}
    """The :class:`~harnessrl.records.trials.TrialResult`, dumped."""
    seconds: Number | None = None
    error: str | None = None


class VerdictPayload(EventPayload):
    """``verdict``: what the candidate's trial decided (accepted, rejected, pending)."""

    KIND: ClassVar[str] = "verdict"
    candidate_id: str | None = None
    interface: str | None = None
    failure_id: str | None = None
    verdict: str | None = None
    verdict_kind: str | None = None
    remedy: str | None = None
    covers: list[str] = []
    reason: str | None = None


class ProbationPrior(AsWritten):
    """The evidence of a pending test a probation's looks continue: the rollouts that broke its checks, those graded,
    the looks it took, the group size."""

    broken: int = 0
    rollouts: int = 0
    looks: int = 0
    group_size: int = 0


class CommitPayload(EventPayload):
    """``commit``: a candidate applied from ``applies_from_step``; on probation (``probation``) with what restores the
    rules it replaced and the evidence its looks start from; ``recovered_at_resume``: written at resume for a commit
    whose event a kill cut off."""

    KIND: ClassVar[str] = "commit"
    candidate_id: str | None = None
    interface: str | None = None
    failure_id: str | None = None
    version: int | None = None
    applies_from_step: int | None = None
    remedy: str | None = None
    covers: list[str] = []
    update: UpdateDump | None = None
    recovered_at_resume: bool = False
    probation: bool = False
    revert: list[UpdateDump] = []
    """The updates that put back what a hint on probation replaced, dumped."""
    signal_share_before: Number | None = None
    groups_before: int | None = None
    probation_checks: dict[str, list[str]] = {}
    """Per task, the criteria a rubric edit on probation added."""
    probation_prior: ProbationPrior | None = None


class FailureEndPayload(EventPayload):
    """How the graph's handling of a failure ended without a commit (``give_up``, ``deferred``)."""

    failure_id: str | None = None
    task_id: str | None = None
    failure_kind: str | None = None
    interface: str | None = None
    candidate_id: str | None = None
    revisions: int | None = None
    candidates: list[str | None] = []
    reason: str | None = None


class GiveUpPayload(FailureEndPayload):
    """``give_up``: the graph gave a failure up, and why."""

    KIND: ClassVar[str] = "give_up"


class EvidenceDraw(AsWritten):
    """A task drawn at a step for a pending finding's next group (``evolver.evidence_draws``)."""

    task_id: str | None = None
    step: int | None = None


class DeferredPayload(FailureEndPayload):
    """``deferred``: the critic could not decide a failure's candidate yet; what its wait needs (the tasks its
    candidate covers and their graded groups), or the evidence draw an audit finding asked for."""

    KIND: ClassVar[str] = "deferred"
    criterion: str | None = None
    covers: list[str] = []
    graded_groups: int | None = None
    evidence_draw: EvidenceDraw | None = None


# ---------------------------------------------------------------------------------------------- the trainer's
class RunStartPayload(EventPayload):
    """``run_start``: what the process runs (method, model, device, tasks, judge); a resumed one says where from."""

    KIND: ClassVar[str] = "run_start"
    method: str | None = None
    evolver: bool | None = None
    method_settings: dict[str, Any] = {}
    model: str | None = None
    device: str | None = None
    train_tasks: int | None = None
    validation_tasks: int | None = None
    test_tasks: int | None = None
    train_rubric: str | None = None
    eval_graded_with: str | None = None
    judge: str | None = None
    devices: Any = None
    judge_preflight: Any = None
    resume: bool | None = None
    stale_lock: Any = None
    resumed_from_step: int | None = None
    rolled_back_steps: Any = None
    harness_versions: dict[str, int] = {}


class RunEndPayload(EventPayload):
    """``run_end``: the run ended (its wall seconds), or stopped (``reason``, e.g. a full disk, and where to resume)."""

    KIND: ClassVar[str] = "run_end"
    wall_seconds: Number | None = None
    reason: str | None = None
    error: str | None = None
    resume_from: str | None = None


class FailurePayload(EventPayload):
    """``failure``: a detected failure (:class:`~harnessrl.records.failures.Failure`, its kind as ``failure``)."""

    KIND: ClassVar[str] = "failure"
    task_id: str | None = None
    domain: str | None = None
    rubric_version: int | None = None
    evidence: dict[str, Any] | None = None
    summary: str | None = None
    interface_hint: str | None = None
    failure: str | None = None

    @property
    def typed_evidence(self) -> Evidence:
        """The evidence as the model of its failure kind (:func:`~harnessrl.records.evidence.parse_evidence`)."""
        return parse_evidence(self.failure, self.evidence)


class EvaluationPayload(EventPayload):
    """``evaluation``: a split's score at a step, and what graded it."""

    KIND: ClassVar[str] = "evaluation"
    split: str | None = None
    graded_with: str | None = None
    overall: Number | None = None
    per_domain: dict[str, Number | None] = {}
    proxy: Number | None = None
    no_score_reason: str | None = None


class EvolutionPointPayload(EventPayload):
    """``evolution_point``: an evolution point (in-process, or an external evolver's hold): its seconds and trials,
    how it ended, the failures it handled and the updates it committed."""

    KIND: ClassVar[str] = "evolution_point"
    early: str | None = None
    seconds: Number | None = None
    ended: str | None = None
    stop_reason: str | None = None
    error: str | None = None
    mode: str | None = None
    trials: int | None = None
    trial_seconds: Number | None = None
    handled: int | None = None
    committed: int | None = None


class OutcomePayload(EventPayload):
    """``outcome``: what a committed update did to its tasks' learning signal, after against before."""

    KIND: ClassVar[str] = "outcome"
    candidate_id: str | None = None
    task_ids: list[str] = []
    applied_step: int | None = None
    measured_at_step: int | None = None
    groups_before: int | None = None
    groups_after: int | None = None
    signal_share_before: Number | None = None
    signal_share_after: Number | None = None
    reward_std_before: Number | None = None
    reward_std_after: Number | None = None
    recovered: bool | None = None


class TrainingHoldPayload(EventPayload):
    """``training_hold``: an evolver's hold on training held (its lease), released or expired."""

    KIND: ClassVar[str] = "training_hold"
    action: str | None = None
    lease_s: Number | None = None
    asked_s: Number | None = None


class RepairCarriedPayload(EventPayload):
    """``repair_carried``: written by runs before repairs reached a whole signature (read back, never written now)."""

    KIND: ClassVar[str] = "repair_carried"
    candidate_id: str | None = None
    interface: str | None = None
    failure_id: str | None = None
    task_id: str | None = None
    siblings: list[Any] = []


class FailureHandledPayload(EventPayload):
    """``failure_handled``: an evolution point committed an update for a failure, gave it up, or a repair covered it."""

    KIND: ClassVar[str] = "failure_handled"
    failure_id: str | None = None
    task_id: str | None = None
    failure_kind: str | None = None
    criterion: str | None = None
    outcome: str | None = None
    point_step: int | None = None
    point_mode: str | None = None
    candidate_id: str | None = None
    reason: str | None = None


class AuditFindingView(AsWritten):
    """One finding of the rubric audit as its event lists it."""

    key: str | None = None
    text: str | None = None
    tasks: list[str] = Field(default_factory=list)
    checks: Any = None
    status: str | None = None


class AuditDraw(AsWritten):
    """The first group an audit finding asked for: its requirement key and the draw."""

    key: str | None = None
    evidence_draw: EvidenceDraw | None = None


class RubricAuditPayload(EventPayload):
    """``rubric_audit``: the requirements the prompts state and the rubrics do not check, before step 1."""

    KIND: ClassVar[str] = "rubric_audit"
    findings: list[AuditFindingView] = []
    tasks: int | None = None
    covered: list[str] = []
    evidence_draws: list[AuditDraw] = []


class AuditProbePayload(EventPayload):
    """``audit_probe``: the rubric audit's probes before step 1: the tasks probed, their cost and rewards."""

    KIND: ClassVar[str] = "audit_probe"
    tasks: list[str] = []
    findings: dict[str, list[str]] = {}
    allowance: int | None = None
    left_out: list[str] = []
    rollouts: int | None = None
    judge_calls: int | None = None
    seconds: Number | None = None
    error: str | None = None
    rewards: dict[str, list[Number | None]] = {}


class ProbationSplit(AsWritten):
    """A probation look's rule for added checks: the rollouts that broke them, the split share and its interval."""

    broken: int = 0
    rollouts: int = 0
    group_size: int = 0
    split_share: Number | None = None
    interval: list[Number] = Field(default_factory=list)
    threshold: Number | None = None
    min_detectable: Number | None = None


class ProbationPayload(EventPayload):
    """``probation``: a look at a hint committed on probation, its numbers and each arm's mean reward, and what it
    decided (``action``: kept, reverted; None: still pending)."""

    KIND: ClassVar[str] = "probation"
    candidate_id: str | None = None
    task_ids: list[str] = []
    applied_step: int | None = None
    look: int = 0
    max_looks: int | None = None
    looks_before_commit: int | None = None
    groups: int = 0
    signal_groups: int = 0
    signal_share: Number | None = None
    interval: list[Number] = []
    alpha_spending: str | None = None
    alpha_per_look: Number | None = None
    signal_share_before: Number | None = None
    groups_before: int | None = None
    target: Number | None = None
    min_detectable: Number | None = None
    guided_mean_reward: Number | None = None
    unguided_mean_reward: Number | None = None
    guided_rollouts: int | None = None
    unguided_rollouts: int | None = None
    split: ProbationSplit | None = None
    decided_by: str | None = None
    verdict_kind: str | None = None
    action: str | None = None


class RevertPayload(EventPayload):
    """``revert``: a hint on probation reverted, the rules it replaced back from ``applies_from_step``
    (``recovered_at_resume``: written at resume for one whose event a kill cut off)."""

    KIND: ClassVar[str] = "revert"
    candidate_id: str | None = None
    interface: str | None = None
    version: int | None = None
    versions: list[int] = []
    applies_from_step: int | None = None
    covers: list[str] = []
    reason: str | None = None
    update: UpdateDump | None = None
    updates: list[UpdateDump] = []
    recovered_at_resume: bool = False


class GradedReference(AsWritten):
    """A task's reference answer graded under a rubric version."""

    task_id: str | None = None
    rubric_version: int | None = None
    reward: Number | None = None


class ReferenceCheckPayload(EventPayload):
    """``reference_check``: the tasks' reference answers graded by their rubrics, and the suspects found."""

    KIND: ClassVar[str] = "reference_check"
    judge_calls: int | None = None
    graded: list[GradedReference] = []
    tasks: int | None = None
    suspects: dict[str, list[dict[str, Any]]] = {}
    reference_breaks_prompt: dict[str, list[dict[str, Any]]] = {}


EVENT_PAYLOADS: dict[str, type[EventPayload]] = {
    m.KIND: m
    for m in (
        AttributionPayload,
        ProposalPayload,
        TrialPayload,
        VerdictPayload,
        CommitPayload,
        GiveUpPayload,
        DeferredPayload,
        RunStartPayload,
        RunEndPayload,
        FailurePayload,
        EvaluationPayload,
        EvolutionPointPayload,
        OutcomePayload,
        TrainingHoldPayload,
        RepairCarriedPayload,
        FailureHandledPayload,
        RubricAuditPayload,
        AuditProbePayload,
        ProbationPayload,
        RevertPayload,
        ReferenceCheckPayload,
    )
}
"""The payload model of each event kind (every kind of :data:`~harnessrl.records.events.EventKind`)."""


def parse_payload(kind: str, raw: Mapping[str, Any] | EventPayload | None) -> EventPayload:
    """``raw`` (an event's own fields) as the model of ``kind`` (one without a model: :class:`EventPayload` with its
    keys kept). A payload that does not fit its model raises :class:`~harnessrl.errors.HarnessRLError` naming the
    kind and the field."""
    model = EVENT_PAYLOADS.get(kind, EventPayload)
    if isinstance(raw, model):
        return raw
    if isinstance(raw, EventPayload):
        raw = raw.written()
    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as e:
        where = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise HarnessRLError(f"a {kind!r} event's fields do not fit its model {model.__name__} ({where})") from None
