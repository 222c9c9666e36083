"""Reward failures: what a detector found on one task's group at one step, and the kinds there are.

The failure detectors (:mod:`harnessrl.detection.detectors`) build them; the training memory, the
events, the evolver's tools and the critic read them. A failure carries its evidence (the numbers that
triggered it) and a readable sentence with those numbers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, SerializeAsAny, ValidationInfo, field_validator

from harnessrl.records.evidence import Evidence, parse_evidence

__all__ = ["FAILURE_KINDS", "Failure", "FailureKind", "failure_id"]

FailureKind = Literal[
    "non_discriminative_low",
    "non_discriminative_high",
    "spurious_length",
    "spurious_feature",
    "reference_below_policy",
    "criterion_saturated",
    "criterion_dead",
    "judge_disagreement",
    "scaffold_outgrown",
    "unchecked_requirement",
    "reference_fails_criterion",
]

FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)
"""``unchecked_requirement`` is the rubric audit's finding (a requirement the prompts of some tasks state and
their rubrics do not check) and ``reference_fails_criterion`` the reference witness's (an exact criterion the
tasks' own reference answers fail, :mod:`harnessrl.evolution.reference`), not a detector's; every other kind is a
detector's."""


class Failure(BaseModel):
    """One detected reward failure of one task at one step, with the numbers that triggered it."""

    kind: FailureKind
    step: int
    task_id: str
    domain: str
    rubric_version: int | None = None
    evidence: SerializeAsAny[Evidence] = Field(
        default_factory=dict,
        validate_default=True,
        description="The numbers behind it: the model its kind names (:mod:`harnessrl.records.evidence`).",
    )
    summary: str = Field(description="One readable sentence with the numbers.")
    interface_hint: str | None = Field(
        default=None,
        description="The interface registered as the first choice for this kind (a hint only; None: none claims it).",
    )

    @field_validator("evidence", mode="before")
    @classmethod
    def _evidence_of_kind(cls, v: Any, info: ValidationInfo) -> Evidence:
        return parse_evidence(info.data.get("kind"), v)

    @property
    def id(self) -> str:
        """The failure's id everywhere (memory, events, the evolver's tools): ``step:task:kind:digest``."""
        return failure_id(self)

    @property
    def key(self) -> tuple[str, str, str | None]:
        """(kind, task, criterion, feature or requirement): what stays the same while a failure persists across
        steps."""
        return self.kind, self.task_id, self.evidence.subject or None


def failure_id(failure: Failure | Mapping[str, Any] | Any) -> str:
    """The id of a failure (a :class:`Failure`, a dict, or any object with those fields): its own ``id``
    field when it has one, else ``"{step}:{task}:{kind}:{digest of its summary and evidence}"``."""
    if isinstance(failure, BaseModel):
        d = failure.model_dump(mode="json")
    elif isinstance(failure, Mapping):
        d = dict(failure)
    else:
        d = {k: v for k, v in vars(failure).items() if not k.startswith("_")}
    if d.get("id"):
        return str(d["id"])
    text = json.dumps(
        {"summary": d.get("summary") or "", "evidence": d.get("evidence") or {}}, sort_keys=True, default=str
    )
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    return f"{d.get('step', -1)}:{d.get('task_id') or '-'}:{d.get('kind', 'failure')}:{digest}"
