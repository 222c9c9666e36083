"""How a critic trial is bounded and measured: its budget (rollouts, judge calls, seconds) and its statistics.

One model, :class:`TrialConfig`, read from the run config (``evolver.trials``) and handed to
:class:`~harnessrl.critic.trials.FrozenPolicyTrials`; the budget (:mod:`harnessrl.critic.budget`) holds a
trial to its first three bounds, the statistics (:mod:`harnessrl.critic.stats`) use the rest.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harnessrl.critic.power import Spending
from harnessrl.critic.signal import SignalConfig

__all__ = ["TrialConfig"]


class TrialConfig(BaseModel):
    """Bounds and statistics of a critic trial (its cost is bounded by the first three)."""

    model_config = ConfigDict(extra="forbid")

    max_rollouts: int = Field(default=16, ge=0, description="Fresh rollouts a trial may generate.")
    max_judge_calls: int = Field(default=400, ge=0, description="Judge backend requests a trial may make.")
    max_seconds: float = Field(default=120, gt=0, description="Wall-clock seconds a trial may take.")
    rollouts_per_arm: int = Field(default=8, ge=2, description="Group size of each arm of a guidance/probe trial.")
    max_new_tokens: int = Field(
        default=48, ge=1, description="Completion length of fresh rollouts (a run: its grpo.max_completion_length)."
    )
    min_regrade_groups: int = Field(
        default=0,
        ge=0,
        description="A rubric trial on fewer cached groups of its task than this tops them up with fresh groups of the "
        "frozen policy, re-graded under both rubrics like the cached ones (within max_rollouts and what "
        "max_rollout_share leaves; one group of G=4 is often too few for the bootstrap to tell a real split from "
        "chance). 0 (default): cached rollouts only, nothing generated.",
    )
    max_rollout_share: float | None = Field(
        default=0.2,
        gt=0,
        description="The run's trials together generate at most this share of the training rollouts generated so "
        "far (0.2, the default: one trial rollout per five trained): each trial may spend what is left of it, and "
        "never more than max_rollouts; a rubric trial with nothing left decides on its cached groups, a guidance "
        "trial it cannot afford yet is pending (measured again later; only one max_rollouts cannot afford is "
        "rejected for its budget). null: no bound over the run (on the gold suite the unbounded critic "
        "spent about as many trial rollouts as training did, and scored no higher: docs/design.md section 8).",
    )
    max_looks: int = Field(
        default=8,
        ge=1,
        description="How many times the critic may measure a candidate whose data cannot decide yet (the sequential "
        "test of the checks a rubric candidate adds, a probation's looks, a hint's fade: harnessrl/critic/power.py); "
        "the error, 1 - confidence, is spent over them as alpha_spending says.",
    )
    alpha_spending: Spending = Field(
        default="halving",
        description="How a sequential test spends its error over its looks. halving (default): half at the first "
        "look, a quarter at the second, ..., the last look what is left, so the first looks keep their power and a "
        "slow split can still be looked at later; equal: the same share at every look (Bonferroni; with max_looks 3 "
        "the rule of the gold benches before 2026-12-03). Measured exactly by benchmarks/sequential_looks.py "
        "(docs/design.md section 4).",
    )
    guidance_trial: Literal["arms", "in_group"] = Field(
        default="in_group",
        description="How a hint for part of the group is measured. in_group (default): nothing is generated: the "
        "hint is committed on probation and the training groups of the tasks it covers are the trial (their guided "
        "and unguided members are the two arms); it is kept once the share of those groups that give signal is "
        "shown to reach signal.min_effect['signal_share'] above the share before it, and reverted (an event) when "
        "the data rule that out or cannot decide in max_looks looks (harnessrl/evolution/probation.py). A hint "
        "that fades is measured with arms either way. arms: two arms of fresh rollouts of the frozen policy "
        "(rollouts_per_arm each, within max_rollouts and what max_rollout_share leaves; under the default share "
        "they rarely fit: the default until 2026-12-06, docs/design.md section 8).",
    )
    probation_look_groups: int = Field(
        default=2,
        ge=1,
        description="The training groups a probation gathers between two looks (in_group guidance: its guided "
        "groups; a pending check: every group of the tasks it covers).",
    )
    pending_checks: Literal["wait", "probation"] = Field(
        default="wait",
        description="What happens to the checks a rubric edit adds (one stated requirement widened over its "
        "signature, or a task's own) when the pooled test cannot decide yet. wait (default): pending, measured again "
        "when more groups are graded, committed only once accepted. probation: at the first look at which one of its "
        "pooled groups splits (some rollouts break the checks, some meet them) and its pooled rollouts meet the checks "
        "at least as often as they break them, the edit is committed on probation and the same sequential test goes on "
        "over the training groups that follow it, graded by the checks: kept once accepted, reverted (an event) when "
        "the test ends futile or undecided (harnessrl/evolution/probation.py). Not the default: on the gold bench at "
        "5 seeds it applied the first repairs earlier and scored lower (docs/design.md section 4).",
    )
    bootstrap: int = Field(default=1000, ge=10, description="Bootstrap resamples of the improvement.")
    confidence: float = Field(default=0.9, gt=0, lt=1, description="Coverage of the bootstrap interval.")
    seed: int = Field(default=0, description="Seed of the bootstrap resampling.")
    signal: SignalConfig = Field(
        default_factory=SignalConfig,
        description="The judge's noise, the no-effect tolerance on advantages and the smallest effects worth a change.",
    )
