"""What a critic trial returns: the measurement of one candidate harness update on the frozen policy, its cost,
and the status a candidate takes from it.

The critic (:mod:`harnessrl.critic.trials`) produces these; the tool service sends them over MCP, the
evolver's graph routes on them, the memory stores them with the candidate. They sit at the bottom with the
other records so that every one of those can type against them without importing the critic (and the
training stack it reaches).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["CandidateStatus", "TrialCost", "TrialResult"]

CandidateStatus = Literal["proposed", "accepted", "rejected", "committed"]
"""A candidate harness update's status: proposed (built, not measured yet), accepted or rejected by its latest
trial, committed (applied). The tool contract's ``Candidate.status``, and the training memory's ``verdict`` of
a candidate."""


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
    reason: str
    measurements: dict[str, Any]
    cost: TrialCost
