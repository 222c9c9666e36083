"""What a retrieval from the training memory returns: :class:`StepEntry`, :class:`FailureEntry` and
:class:`CandidateEntry` (served to the evolver's LLM through its memory tools: keep the docstrings plain)."""

from __future__ import annotations

from pydantic import BaseModel, Field, JsonValue

from harnessrl.records.trials import CandidateStatus

__all__ = ["CandidateEntry", "FailureEntry", "StepEntry"]


class StepEntry(BaseModel):
    """One task's rollout group at one training step: its reward statistics and the failures detected.

    ``flat`` means the group's rewards had (almost) no spread, so that step taught nothing on the task.
    ``similarity`` (0..1, higher is closer) is set only on search results."""

    id: str
    step: int
    task_id: str
    domain: str
    rubric_version: int
    mean: float | None = Field(default=None, description="Mean reward of the group (null: no reward).")
    std: float | None = Field(default=None, description="Reward standard deviation of the group.")
    flat: bool = False
    guided: int = Field(default=0, description="How many rollouts of the group saw guidance.")
    temperature: float | None = None
    guidance: str | None = None
    mean_length: float | None = Field(default=None, description="Mean completion length in tokens.")
    missing: int = Field(default=0, description="Verdicts the judge failed to produce.")
    reference_reward: float | None = Field(default=None, description="Reward of the reference answer.")
    criterion_means: dict[str, float | None] = Field(default_factory=dict)
    rewards: list[float | None] = Field(default_factory=list, description="Each rollout's reward (null: dropped).")
    failures: list[str] = Field(default_factory=list, description="Kinds of failure detected on this group.")
    trained: bool = Field(default=True, description="False: graded and dropped before the update (DAPO).")
    summary: str = ""
    similarity: float | None = None


class FailureEntry(BaseModel):
    """A reward failure detected on a task at a step (e.g. uniformly low or high rewards, reward rising
    with length), with the evidence the detector measured. ``interface`` is the harness interface it
    was attributed to, when known. ``similarity`` (0..1) is set only on search results."""

    id: str
    kind: str
    step: int
    task_id: str | None = None
    domain: str | None = None
    interface: str | None = None
    summary: str = ""
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    extra: dict[str, JsonValue] = Field(default_factory=dict, description="Other fields the detector recorded.")
    similarity: float | None = None


class CandidateEntry(BaseModel):
    """A harness update candidate: the failure it answered, the update itself (``payload``), what the
    critic measured on the frozen policy (``trials``), its verdict, and its ``outcome`` once measured
    (whether the task's learning signal recovered in the steps after it was applied; null until then).
    ``similarity`` (0..1, of its failure to the query) is set only on search results."""

    id: str
    step: int
    interface: str
    verdict: CandidateStatus
    task_id: str | None = None
    domain: str | None = None
    failure_kind: str | None = None
    failure_ids: list[str] = Field(default_factory=list)
    failure_text: str = ""
    attribution: str = Field(default="", description="Why the failure was blamed on this interface.")
    rationale: str = Field(default="", description="Why this update should fix it.")
    payload: dict[str, JsonValue] = Field(default_factory=dict)
    trials: JsonValue = None
    outcome: dict[str, JsonValue] | None = None
    revision: int = 0
    parent_id: str | None = None
    applied_step: int | None = None
    similarity: float | None = None
