"""What the three harness interfaces share: a version counter, an update history, JSON state.

An interface owns some state the trainer consults every step (task weights, guidance texts, rubric
versions). It changes only through a typed update (a pydantic model whose docstring is the
instruction the evolver's LLM reads); every applied update bumps the interface's version and is
appended to its history with the step it applies from, so a run can be read back and resumed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["INTERFACES", "INTERFACE_FOR_FAILURE", "AppliedUpdate", "Interface", "InterfaceUpdate"]

Interface = Literal["task_sampling", "rollout_guidance", "rubric_criteria"]
INTERFACES: tuple[str, ...] = ("task_sampling", "rollout_guidance", "rubric_criteria")

INTERFACE_FOR_FAILURE: dict[str, str] = {
    "non_discriminative_low": "rollout_guidance",
    "non_discriminative_high": "rubric_criteria",
    "spurious_length": "rubric_criteria",
    "spurious_feature": "rubric_criteria",
    "reference_below_policy": "rubric_criteria",
    "criterion_saturated": "rubric_criteria",
    "criterion_dead": "rollout_guidance",
    "judge_disagreement": "rubric_criteria",
}
"""The interface whose update most often addresses each reward-failure kind: the detectors' hint and
the rule-based attributor's starting point (memory and evidence may override it)."""


class InterfaceUpdate(BaseModel):
    """Base of every interface update: what to change, and why (``rationale``, for the trace)."""

    rationale: str = Field(default="", description="Why this update: the failure and evidence it answers.")


class AppliedUpdate(BaseModel):
    """One entry of an interface's history: the update, the version it made, and from which step."""

    version: int
    step: int
    update: dict[str, Any]
    candidate_id: str | None = None
