"""How a critic trial is bounded and measured: its budget (rollouts, judge calls, seconds) and its statistics.

One model, :class:`TrialConfig`, read from the run config (``evolver.trials``) and handed to
:class:`~harnessrl.critic.trials.FrozenPolicyTrials`; the budget (:mod:`harnessrl.critic.budget`) holds a
trial to its first three bounds, the statistics (:mod:`harnessrl.critic.stats`) use the rest.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harnessrl.critic.signal import SignalConfig

__all__ = ["TrialConfig"]


class TrialConfig(BaseModel):
    """Bounds and statistics of a critic trial (its cost is bounded by the first three)."""

    model_config = ConfigDict(extra="forbid")

    max_rollouts: int = Field(default=16, ge=0, description="Fresh rollouts a trial may generate.")
    max_judge_calls: int = Field(default=400, ge=0, description="Judge backend requests a trial may make.")
    max_seconds: float = Field(default=120, gt=0, description="Wall-clock seconds a trial may take.")
    rollouts_per_arm: int = Field(default=8, ge=2, description="Group size of each arm of a guidance/probe trial.")
    max_new_tokens: int = Field(default=48, ge=1, description="Completion length of fresh rollouts.")
    bootstrap: int = Field(default=1000, ge=10, description="Bootstrap resamples of the improvement.")
    confidence: float = Field(default=0.9, gt=0, lt=1, description="Coverage of the bootstrap interval.")
    seed: int = Field(default=0, description="Seed of the bootstrap resampling.")
    signal: SignalConfig = Field(
        default_factory=SignalConfig,
        description="The judge's noise, the no-effect tolerance on advantages and the smallest effects worth a change.",
    )
