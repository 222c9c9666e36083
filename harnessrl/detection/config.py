"""The failure detectors' thresholds (:class:`DetectorConfig`), and the flat-group bounds the trainer and the
bench share.

Which thresholds are strict and which inclusive: :mod:`harnessrl.detection.detectors`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FLAT_HIGH", "FLAT_LOW", "DetectorConfig"]


# a flat group's mean below FLAT_LOW is uniformly low, above FLAT_HIGH uniformly high: the detectors' default
# thresholds, the trainer's flat-group metrics and the bench's tables all read these two
FLAT_LOW = 0.3
FLAT_HIGH = 0.8


class DetectorConfig(BaseModel):
    """Thresholds of the failure detectors (see the module docstring for which are strict)."""

    model_config = ConfigDict(extra="forbid")

    eps: float = Field(
        default=0.02,
        ge=0,
        description="Reward std below this: the group is flat (also the trainer's flag and frac_reward_zero_std/*).",
    )
    low: float = Field(default=FLAT_LOW, ge=0, le=1, description="A flat group with mean below this is uniformly low.")
    high: float = Field(
        default=FLAT_HIGH, ge=0, le=1, description="A flat group with mean above this is uniformly high."
    )
    min_valid_rewards: int = Field(
        default=2, ge=1, description="Rewards (not None) a group needs for a per-group verdict (flat, reference)."
    )
    window: int = Field(
        default=4, ge=1, description="Most recent groups of a task pooled for the correlations (older ones drop out)."
    )
    max_age_steps: int | None = Field(
        default=None, ge=1, description="Also drop a task's groups older than this many steps; null: no age limit."
    )
    min_points: int = Field(
        default=8, ge=4, description="Minimum (reward, feature) pairs, pooled over the window, for a correlation."
    )
    corr_threshold: float = Field(
        default=0.6, gt=0, lt=1, description="Spearman rho above which reward~length (or ~feature) is spurious."
    )
    corr_max_p: float | None = Field(
        default=0.05,
        gt=0,
        le=1,
        description="Also require the one-sided p-value of rho (Fisher z) below this; null: rho alone decides.",
    )
    corr_within_group: bool = Field(
        default=False,
        description="Centre reward and feature on each group's mean before ranking: only within-group association "
        "(what the GRPO advantage sees) counts, not drift across steps.",
    )
    features: list[str] = Field(
        default_factory=lambda: ["bullets", "exclamations", "repeated_word"],
        description="Surface features besides length tested for spurious correlation (names in SURFACE_FEATURES, "
        "or ones given to FailureDetector(features=...)); they need the rollouts' texts.",
    )
    feature_control_length: bool = Field(
        default=True,
        description="Test features by their partial rank correlation with reward given length, so a feature that "
        "only tracks length does not fire (spurious_length covers it).",
    )
    reference_margin: float = Field(
        default=0.05,
        ge=0,
        description="Fire when the reference answer scores below the group's median reward by more than this.",
    )
    saturated: float = Field(default=0.95, ge=0, le=1, description="Criterion mean ≥ this counts as saturated.")
    dead: float = Field(default=0.05, ge=0, le=1, description="Criterion mean ≤ this counts as dead.")
    streak: int = Field(default=3, ge=1, description="Consecutive observations of a task a criterion must stay so (k).")
    reset_on_rubric_change: bool = Field(
        default=True,
        description="A new rubric version of a task restarts its criterion streaks and its correlation window.",
    )
    dead_pitfalls: bool = Field(
        default=False,
        description="Report pitfall (negative-weight) criteria that never trigger as dead; off: a pitfall the policy "
        "always avoids is healthy (needs rubric_for to know which are pitfalls).",
    )
    regrade_every: int = Field(
        default=10,
        ge=0,
        description="Re-grade a sample with a second, uncached judge call every N steps (the judge-disagreement "
        "check; its cost: regrade_groups groups per N steps); 0: off.",
    )
    regrade_groups: int = Field(default=1, ge=1, description="Groups (all their rollouts) re-graded per re-grade step.")
    disagreement_threshold: float = Field(
        default=0.2, ge=0, le=1, description="Mean |Δ reward| between the two gradings above which the judge disagrees."
    )
    disagreement_min_pairs: int = Field(
        default=4, ge=1, description="Re-graded rollouts of a task (over the window's re-grades) needed for a verdict."
    )
    seed: int = Field(default=0, description="Seed of the re-grade sample.")
    scaffold_groups: int = Field(
        default=1,
        ge=0,
        description="Guided groups of a task in a row whose unguided members alone give signal (reward std ≥ eps "
        "among them) before scaffold_outgrown fires (the hint may fade); 0: off.",
    )

    @model_validator(mode="after")
    def _check(self):
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        if self.dead >= self.saturated:
            raise ValueError(f"dead ({self.dead}) must be below saturated ({self.saturated})")
        if "length" in self.features:
            raise ValueError("'length' is always tested (spurious_length); list only other features")
        if self.scaffold_groups > self.window:
            raise ValueError(
                f"scaffold_groups ({self.scaffold_groups}) cannot exceed window ({self.window}): a task keeps only "
                "its last `window` groups"
            )
        return self
