"""What a critic trial returns: the measurement of one candidate harness update on the frozen policy, its cost,
and the status a candidate takes from it.

The critic (:mod:`harnessrl.critic.trials`) produces these; the tool service sends them over MCP, the
evolver's graph routes on them, the memory stores them with the candidate. They sit at the bottom with the
other records so that every one of those can type against them without importing the critic (and the
training stack it reaches).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, WithJsonSchema

from harnessrl.records.measurements import TrialMeasurements

__all__ = ["CandidateStatus", "TrialCost", "TrialMeasurements", "TrialResult", "VerdictKind"]

CandidateStatus = Literal["proposed", "accepted", "rejected", "pending", "committed"]
"""A candidate harness update's status: proposed (built, not measured yet), accepted or rejected by its latest
trial, pending (its trial could not decide yet: measured again when more groups of the tasks it covers come),
committed (applied). The tool contract's ``Candidate.status``, and the training memory's ``verdict`` of a
candidate."""

VerdictKind = Literal[
    "accepted",
    "probation",
    "pending",
    "not_reliable",
    "too_small",
    "futile",
    "no_effect",
    "reference_guard",
    "inferior",
    "budget",
    "invalid",
    "unmeasurable",
]
"""Why a trial decided as it did, as a field code reads (the ``reason`` says it in words for people): accepted;
probation (committed, and measured on the training groups that follow it: kept or reverted by a later look,
:mod:`harnessrl.evolution.probation`); pending (the data cannot decide yet: neither the effect nor its absence is
established, and the sequential test has looks left); not_reliable (the interval reaches 0); too_small (real but
below the smallest effect worth a change); futile (the data rule out an effect worth a change); no_effect (no
advantage moves); reference_guard (the reference answer loses its place); inferior (a candidate that removes harness
may cost signal); budget (the trial could not afford its measurement); invalid (the candidate does not apply);
unmeasurable (nothing to measure it on)."""


class TrialCost(BaseModel):
    """What a trial spent: fresh rollouts generated, judge backend requests, wall-clock seconds."""

    rollouts: int
    judge_calls: int
    seconds: float


class TrialResult(BaseModel):
    """The critic's measurement of one candidate on the frozen policy, and its verdict.

    ``improvement`` is signed so that > 0 is better (for ``rho_reward_*``: baseline |rho| minus
    candidate |rho|); ``accepted`` means its bootstrap interval ``[ci_low, ci_high]`` lies above 0,
    the improvement reaches ``threshold`` (the metric's smallest effect worth a change) and, for rubric
    trials, the reference answer kept its place; for a candidate that removes harness (``margin`` set: a
    hint that fades), that the interval's lower end is above ``-margin`` instead. ``advantage_effect`` is
    the largest change the candidate makes to any cached rollout's advantage (rubric trials; below the
    tolerance: rejected as no effect). ``measurements`` holds everything measured; ``reason`` says why in one sentence.
    """

    candidate_id: str
    interface: str
    metric: str
    baseline: float | None
    candidate: float | None
    improvement: float | None
    ci_low: float | None
    ci_high: float | None
    threshold: float | None = None
    margin: float | None = Field(default=None, description="Non-inferiority margin (a candidate that removes harness).")
    advantage_effect: float | None = None
    accepted: bool
    verdict_kind: VerdictKind = Field(description="Why it decided so, as a field (the reason says it in words).")
    min_detectable_effect: float | None = Field(
        default=None,
        description="The smallest improvement this trial could have detected (accepted with probability 0.8) on the "
        "data it had: a rejection at a detectable effect above the threshold says the data were too few, not that "
        "the candidate is useless.",
    )
    remedy: str | None = Field(default=None, description="The candidate's remedy (its update's typed field).")
    covers: list[str] = Field(default_factory=list, description="The training tasks the candidate changes.")
    reason: str
    measurements: Annotated[
        TrialMeasurements,
        # a field per metric (records.measurements); the tool service advertises a JSON object, as before typing
        WithJsonSchema({"additionalProperties": True, "title": "Measurements", "type": "object"}, mode="serialization"),
    ]
    cost: TrialCost

    @property
    def pending(self) -> bool:
        """Whether the trial left the candidate undecided (measured again when more evidence comes)."""
        return self.verdict_kind == "pending"
