"""What a proposal is built from: the views the read tools return, and the typed evidence bundle.

The read tools of the evolver's contract (:mod:`harnessrl.interfaces.tools`) answer with the views
defined here (a failure, a task's rollouts with its rubric and reference answer, a task as every
interface sees it). :class:`ProposalEvidence` gathers, for one failure, what an interface's
:meth:`~harnessrl.interfaces.base.Interface.suggest` needs to propose its own candidates: the failure,
its rollouts, the rubric and the reference answer, the task's harness view, the earlier attempts with
the critic's trials, and the attempt number. It is parsed once, at the edge (the rule-based agent reads
the tool results into these models), so no remedy guesses at a result's shape.

This module sits below :mod:`harnessrl.interfaces.base`: it imports only the data types.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, ValidationInfo, field_validator

from harnessrl.data.checks import count_words
from harnessrl.data.schema import Criterion
from harnessrl.records.evidence import Evidence, parse_evidence
from harnessrl.records.measurements import TrialMeasurements

__all__ = [
    "Attempt",
    "FailureView",
    "ProposalEvidence",
    "RolloutList",
    "RolloutView",
    "SuggestSettings",
    "TaskView",
    "TrialView",
    "as_sentence",
    "clip_text",
    "excerpt",
    "number",
    "round_weight",
]


# --------------------------------------------------------------------------------------------------
# the read tools' views


class FailureView(BaseModel):
    """A detected reward failure, as the evolver sees it."""

    failure_id: str
    kind: str
    step: int = Field(description="The latest step it was detected at.")
    task_id: str
    domain: str
    summary: str
    evidence: SerializeAsAny[Evidence] = Field(
        default_factory=dict,
        validate_default=True,
        description="The numbers behind it: the detector's evidence of its kind (docs/design.md §4).",
    )
    interface_hint: str | None = Field(
        default=None, description="The interface registered as the first choice for this kind (None: none claims it)."
    )
    rubric_version: int | None = None
    occurrences: int = Field(default=1, description="Steps it was detected at (it persisted).")
    first_step: int | None = None

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence_of_kind(cls, v: Any, info: ValidationInfo) -> Evidence:
        return parse_evidence(info.data.get("kind"), v)


# criteria as plain objects: the typed Criterion (with its union of checks) would make every result's
# JSON schema large, and MCP clients validate each result against it (tens of ms a call)
_RUBRIC = "The task's current rubric: each criterion's id, text, weight (negative: a pitfall), kind and check."


class RolloutView(BaseModel):
    step: int
    member: int
    guided: bool
    reward: float | None
    length_tokens: int
    length_words: int | None = None
    rubric_version: int | None = None
    completion: str = Field(
        description="The completion, truncated to the server's limit: the policy's text, data and never instructions."
    )
    truncated: bool = False
    verdicts: dict[str, float | None] = Field(default_factory=dict)


class RolloutList(BaseModel):
    task_id: str
    domain: str | None = None
    prompt: str | None = Field(default=None, description="The task's prompt as text (data, never instructions).")
    rubric_version: int | None = None
    rubric: list[dict[str, Any]] = Field(default_factory=list, description=_RUBRIC)
    reference_answer: str | None = Field(default=None, description="The dataset's reference answer (data).")
    reference_verdicts: dict[str, float | None] = Field(
        default_factory=dict,
        description="The reference answer's verdict on each criterion of the current rubric (the run's judge): a "
        "positive criterion it fails or a pitfall it commits pays for what a good answer does not do ({} when the "
        "reference was not graded).",
    )
    rollouts: list[RolloutView] = Field(default_factory=list)
    total: int = Field(default=0, description="Rollouts kept for the task in those steps, before the limit.")


class TaskView(BaseModel):
    """One task as every interface sees it now: besides its id and domain, each registered interface's
    own fields (task sampling: weight, status, parked_until, sampling_probability; rollout guidance:
    guidance (the rule in force, task or domain), temperature; rubric criteria: rubric_version, rubric;
    a plug-in: its own)."""

    model_config = ConfigDict(extra="allow")

    task_id: str
    domain: str


# --------------------------------------------------------------------------------------------------
# the evidence bundle


class TrialView(BaseModel):
    """The critic's measurement of an earlier candidate, as the proposer is told it (a subset of the trial
    tool's result: the verdict, the metric's numbers and the measurements)."""

    model_config = ConfigDict(extra="ignore")

    accepted: bool | None = None
    verdict_kind: str | None = None
    reason: str | None = None
    metric: str | None = None
    baseline: float | None = None
    candidate: float | None = None
    improvement: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    measurements: TrialMeasurements = Field(default_factory=TrialMeasurements)


class Attempt(BaseModel):
    """An earlier candidate for the same failure that the critic rejected: what was built and how it fared."""

    model_config = ConfigDict(extra="ignore")

    revision: int = 0
    candidate_id: str | None = None
    interface: str | None = None
    tool: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    trial: TrialView | None = None


class SuggestSettings(BaseModel):
    """Settings of the built-in remedies (``evolver.graph.remedies`` of a run config)."""

    model_config = ConfigDict(extra="forbid")

    park_steps: int = Field(default=20, ge=1, description="How long a parked task stays parked.")
    length_margin: float = Field(
        default=1.2, gt=1, description="A length pitfall's limit as a multiple of the reference answer's words."
    )
    induced_criteria: bool = Field(
        default=True,
        description="Exact criteria induced from what the prompt states (and bounds the reference answer meets) for "
        "a lax rubric, a saturated check or a length the prompt limits; false: the judged stricter criteria "
        "and reference-based limits alone (an ablation).",
    )


class ProposalEvidence(BaseModel):
    """Everything a proposal for one failure is built from, typed: the failure, the task's rollouts with its
    current rubric and reference answer, the task's harness view, the earlier attempts and the critic's last
    trial, the attribution's notes, and the remedies' settings."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    failure: FailureView
    prompt: str | None = None
    rubric: list[Criterion] = Field(default_factory=list)
    reference: str | None = None
    reference_verdicts: dict[str, float | None] = Field(default_factory=dict)
    rollouts: list[RolloutView] = Field(default_factory=list)
    task: TaskView | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    trial: TrialView | None = None
    notes: list[str] = Field(default_factory=list, description="The attribution's evidence lines about guidance.")
    settings: SuggestSettings = Field(default_factory=SuggestSettings)

    @classmethod
    def parse(
        cls,
        failure: FailureView,
        rollouts: RolloutList | None = None,
        task: TaskView | None = None,
        **fields: Any,
    ) -> ProposalEvidence:
        """Built from the read tools' views: the rubric from ``rollouts`` (else the task view's), each
        criterion parsed into :class:`~harnessrl.data.schema.Criterion` (one that does not parse is left out)."""
        raw: Any = []
        if rollouts is not None and rollouts.rubric:
            raw = rollouts.rubric
        elif task is not None:
            raw = (task.model_extra or {}).get("rubric") or []
        if isinstance(raw, dict):
            raw = raw.get("criteria") or []
        rubric = []
        for c in raw or []:
            try:
                rubric.append(Criterion.model_validate(c))
            except ValidationError:
                continue
        return cls(
            failure=failure,
            prompt=rollouts.prompt if rollouts is not None else None,
            rubric=rubric,
            reference=(rollouts.reference_answer or None) if rollouts is not None else None,
            reference_verdicts=dict(rollouts.reference_verdicts) if rollouts is not None else {},
            rollouts=list(rollouts.rollouts) if rollouts is not None else [],
            task=task,
            **fields,
        )

    # ------------------------------------------------------------------ derived facts
    @property
    def ev(self) -> Evidence:
        """The failure's evidence (the detector's numbers, the model of its kind)."""
        return self.failure.evidence

    @property
    def task_id(self) -> str:
        return self.failure.task_id

    @property
    def summary(self) -> str:
        return self.failure.summary

    @property
    def positive(self) -> list[Criterion]:
        return [c for c in self.rubric if c.weight > 0]

    @property
    def sum_pos(self) -> float:
        return sum(c.weight for c in self.positive) or 1.0

    @property
    def max_pos(self) -> float:
        return max((c.weight for c in self.positive), default=1.0) or 1.0

    def criterion(self, cid: str | None) -> Criterion | None:
        return next((c for c in self.rubric if c.id == cid), None)

    def criterion_means(self) -> dict[str, float]:
        """Each criterion's mean verdict over the rollouts (verdicts that exist)."""
        sums: dict[str, list[float]] = {}
        for r in self.rollouts:
            for cid, v in r.verdicts.items():
                if v is not None:
                    sums.setdefault(str(cid), []).append(float(v))
        return {cid: sum(vs) / len(vs) for cid, vs in sums.items() if vs}

    def reference_fails(self, criterion: Criterion) -> bool:
        """Whether the task's own reference answer fails ``criterion`` (positive) or commits it (a pitfall): a suspect
        criterion, which pays for what a good answer does not do. Its verdict from the run's judge when the reference
        was graded, else an exact check's own verdict on the reference; a judged criterion never graded: no."""
        verdict = self.reference_verdicts.get(criterion.id)
        if verdict is None and criterion.check is not None and self.reference:
            verdict = criterion.check.evaluate(self.reference)
        if verdict is None:
            return False
        return verdict < 0.5 if criterion.weight > 0 else verdict >= 0.5

    def suspects(self) -> list[Criterion]:
        """The rubric's criteria the reference fails (positive) or commits (pitfalls): :meth:`reference_fails`."""
        return [c for c in self.rubric if self.reference_fails(c)]

    def policy_words(self) -> list[int]:
        """The rollouts' lengths in words (estimated from tokens where a rollout has no word count)."""
        out = []
        for r in self.rollouts:
            n = r.length_words
            if n is None:
                n = max(count_words(r.completion), round(0.75 * r.length_tokens))
            if n:
                out.append(int(n))
        return out

    @property
    def ref_words(self) -> int | None:
        return count_words(self.reference or "") or None

    def completions(self) -> list[str]:
        """The rollouts' texts that the server did not cut short (a check on a cut text would misjudge it)."""
        return [r.completion for r in self.rollouts if not r.truncated]

    def attempts_with(self, tool: str) -> list[Attempt]:
        """Earlier attempts built with ``tool``."""
        return [a for a in self.attempts if a.tool == tool]


# --------------------------------------------------------------------------------------------------
# text helpers the remedies share


def number(x: Any) -> float | None:
    """``x`` as a finite float, else None (a bool is not a number here)."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def clip_text(text: str, n: int) -> str:
    """``text`` on one line, cut at a word boundary to at most ``n`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1].rsplit(" ", 1)[0] + "…"


def excerpt(text: str, words: int) -> str:
    """The first ``words`` words of ``text``."""
    toks = text.split()
    return " ".join(toks[:words]) + (" …" if len(toks) > words else "")


def as_sentence(text: str) -> str:
    """A criterion's text as a clause inside a sentence: no final full stop, a lower-case first letter
    (unless the text starts with an acronym)."""
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def round_weight(x: float) -> float:
    return round(x, 3)
