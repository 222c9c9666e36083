"""Reward failures: what a detector found on one task's group at one step, and the kinds there are.

The failure detectors (:mod:`harnessrl.detection.detectors`) build them; the training memory, the
events, the evolver's tools and the critic read them. A failure carries its evidence (the numbers that
triggered it) and a readable sentence with those numbers.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

__all__ = ["FAILURE_KINDS", "Failure", "FailureKind", "InterfaceHint"]

FailureKind = Literal[
    "non_discriminative_low",
    "non_discriminative_high",
    "spurious_length",
    "spurious_feature",
    "reference_below_policy",
    "criterion_saturated",
    "criterion_dead",
    "judge_disagreement",
]
InterfaceHint = Literal["rubric_criteria", "rollout_guidance", "task_sampling"]

FAILURE_KINDS: tuple[str, ...] = get_args(FailureKind)


class Failure(BaseModel):
    """One detected reward failure of one task at one step, with the numbers that triggered it."""

    kind: FailureKind
    step: int
    task_id: str
    domain: str
    rubric_version: int | None = None
    evidence: dict[str, Any] = Field(default_factory=dict, description="The numbers behind it (JSON-serialisable).")
    summary: str = Field(description="One readable sentence with the numbers.")
    interface_hint: InterfaceHint = Field(description="The interface most likely to address it (a hint only).")

    @property
    def key(self) -> tuple[str, str, str | None]:
        """(kind, task, criterion or feature): what stays the same while a failure persists across steps."""
        return self.kind, self.task_id, self.evidence.get("criterion_id") or self.evidence.get("feature")
