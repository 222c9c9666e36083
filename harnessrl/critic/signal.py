"""The learning signal as the trainer computes it: GRPO's advantages, and what a critic may measure.

TRL's GRPO turns the rewards of each group of ``G`` rollouts into advantages (TRL 1.16,
``GRPOTrainer._generate_and_score_completions``, ``multi_objective_aggregation="sum_then_normalize"``)::

    A_i = r_i - mean_g(r)                                  scale_rewards="none"
    A_i = (r_i - mean_g(r)) / (std_g(r) + 1e-4)            scale_rewards="group" (the default)
    A_i = (r_i - mean_g(r)) / (std_batch(r) + 1e-4)        scale_rewards="batch"

with NaN-aware means, Bessel-corrected stds, and a rollout without a reward getting ``A = 0``. The
gradient sees nothing else of the rewards. So, with group scaling, any change of a group's rewards
``r -> a*r + b`` (``a > 0``) leaves its advantages as they were (up to the 1e-4): reweighting a
criterion every rollout passes, adding a criterion every rollout passes or fails, rescaling a rubric.
A critic that measured raw reward spread would see such a change "raise the std" and accept an update
that teaches nothing. Every quantity in this module has the trainer's invariances:

- :func:`advantages` is the trainer's formula (read from its config by :meth:`AdvantageSpec.from_args`);
  :func:`advantage_effect` is the largest change a candidate makes to any rollout's advantage, the
  critic's "no effect on the learning signal" test;
- :func:`gives_signal`: a group teaches something only if its reward spread exceeds the *judge's own
  noise* under the rubric that graded it (:func:`noise_floor`), because advantages made of judge
  noise push the policy at random, which is worse than no push. The floor is in the rubric's reward
  units, so it moves with any rescaling of the rubric and the "share of groups that give signal"
  does not;
- rank statistics (the ordering of rollouts, Spearman correlations, the reference answer's rank) are
  invariant by construction.

**The noise model.** A judged verdict ``v`` in [0, 1] is uncertain where the judge is undecided and
firm at 0 or 1: its noise is ``verdict_noise * 4 v (1 - v)`` (the first-order noise of a verdict
that is a sigmoid of a noisy score, like the embedded semantic judge's and a P(yes) judge's, scaled
so that ``verdict_noise`` is the noise of a verdict at 0.5). A programmatic verdict is exact. A
rollout's reward noise adds the verdicts' noises in quadrature with the rubric's normalised weights
``|w_c| / sum of positive weights``; a group's floor is the root mean square over its rollouts.
``verdict_noise`` is measured by ``benchmarks/critic_noise.py`` (the judge re-grading meaning-preserving
rewrites of real rollouts); see :class:`SignalConfig` for the defaults and where they come from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.data.schema import Criterion

__all__ = [
    "CHECK_SPLIT_SHARE",
    "CRITERION_SIGNAL",
    "HINT_MET_RATE",
    "MOVED_SIGNAL_SHARE",
    "NO_EFFECT",
    "REFERENCE_RANK",
    "RHO_PREFIX",
    "SIGNAL_SHARE",
    "SUSPECT_EFFECT",
    "AdvantageSpec",
    "SignalConfig",
    "advantage_effect",
    "advantages",
    "bessel_std",
    "gives_signal",
    "noise_floor",
    "reference_rank",
]

TRL_STD_EPS = 1e-4
"""What TRL adds to the std before dividing (a group whose std is near this has damped advantages)."""

SIGNAL_SHARE = "signal_share"
"""Share of groups whose reward spread exceeds the judge's noise: groups that give a real advantage."""
MOVED_SIGNAL_SHARE = "moved_signal_share"
"""Sampling trials: of the draws a candidate moves from some tasks to others, the share that give signal
where they land (candidate) vs where they were (baseline). A change to one task's probability moves
little of a batch, so the batch-wide share can change by no more than the mass moved; per moved draw
the effect has the scale of :data:`SIGNAL_SHARE` and the same threshold means the same thing."""
CRITERION_SIGNAL = "criterion_signal"
"""Share of groups in which the criteria a candidate targets (edited, added, or the failing one) tell
rollouts apart beyond the judge's noise: whether a saturated or dead criterion now carries signal."""
REFERENCE_RANK = "reference_rank"
"""Share of the policy's rollouts the reference answer scores at least as high as (ties count half)."""
CHECK_SPLIT_SHARE = "check_split_share"
"""The share of groups the checks a rubric candidate adds would split, from the pooled rate at which the frozen
policy breaks them (:mod:`harnessrl.critic.power`)."""
HINT_MET_RATE = "hint_met_rate"
"""The fade of a rubric's hint: the pooled rate at which the unguided members of the guided groups meet the checks the
hint states; its "effect" is the rate they must be shown to reach (:func:`harnessrl.critic.power.decide_met`)."""
SUSPECT_EFFECT = "suspect_effect"
"""The removal of exact criteria the tasks' own reference answers fail (docs/design.md §4, "The reference as
witness"): what is wrong with the criterion is established by the reference, exactly; what is measured on the frozen
policy is whether removing it changes what training learns: the largest change to any cached rollout's advantage.
Accepted at the advantage gate's tolerance (the reference guard holds as for every rubric trial); pending below it
(no rollout does what the criterion pays for yet, so the removal would teach nothing now)."""
RHO_PREFIX = "rho_reward_"
"""``rho_reward_<feature>``: |Spearman rho| of reward with length or a surface feature (should fall)."""

NO_EFFECT = "no effect on the learning signal"
"""How a rejection for a candidate that leaves every rollout's advantage as it was begins."""


class SignalConfig(BaseModel):
    """How the critic reads the learning signal: the judge's noise and the smallest effects worth a change.

    Defaults, and the measurements behind them (``benchmarks/critic_noise.py --tasks 10 --g 8``: 10
    bundled tasks across the five domains, two arms of 8 SmolLM2-135M rollouts each, the semantic judge):

    - ``verdict_noise`` 0.13: re-grading meaning-preserving rewrites of the rollouts (an "Answer:"
      prefix, sentences on separate lines, the first two sentences swapped) moved the judged verdicts by
      RMS 0.075 against an RMS ``4 v (1 - v)`` of 0.59: 0.128 for a verdict at 0.5. Most rewrites move
      nothing (median 0); the noise sits in undecided verdicts, as the model says. A judge whose
      verdicts are firm (an LLM answering yes/no) gets no floor from this model whatever the setting.
    - ``advantage_tolerance`` 0.05: rewriting one rollout of a group moved the largest advantage of the
      group by less than 0.05 in 72% of the cases (median 0.006, 90th percentile 0.29): below the
      tolerance a candidate changes the advantages by no more than the judge's own noise usually does.
      A per-group rescaling ``a*r + b`` moves them only through TRL's 1e-4 (under 0.01 for any group
      whose spread is above the judge's noise).
    - ``min_effect``: the smallest improvement per metric worth a harness change, at or above what two
      independent arms of the *same* prompts on the frozen policy differ by (an A/A test): the share
      of groups that give signal differed by 0 at the 90th percentile (0.25 asks for one group in four;
      the same for ``moved_signal_share``, one moved draw in four);
      the reference answer's rank by 0.125 (0.2); |Spearman rho(reward, length)| by 0.29 on average
      between arms of 8 (0.3: a smaller fall of a correlation is what two draws of the same policy show);
      the share of groups the checks a candidate adds would split, 0.2 (one group in five: an exact check has
      no judge noise, so no A/A test sets it; its false-accept rate is measured instead, docs/design.md §8);
      the rate at which the unguided members must be shown to meet the checks a rubric's hint states before it
      fades, 0.5 (more often than not: a choice, docs/design.md §4).
    """

    model_config = ConfigDict(extra="forbid")

    verdict_noise: float = Field(
        default=0.13, ge=0, le=1, description="Judge noise of a judged verdict at 0.5 (0: an exact judge)."
    )
    advantage_tolerance: float = Field(
        default=0.05,
        ge=0,
        description="A candidate whose largest change to any rollout's advantage is below this has no effect.",
    )
    min_effect: dict[str, float] = Field(
        default_factory=lambda: {
            SIGNAL_SHARE: 0.25,
            MOVED_SIGNAL_SHARE: 0.25,
            CRITERION_SIGNAL: 0.25,
            REFERENCE_RANK: 0.2,
            RHO_PREFIX: 0.3,
            CHECK_SPLIT_SHARE: 0.2,
            HINT_MET_RATE: 0.5,
        },
        description="Smallest improvement worth a harness change, per metric (rho_reward_ covers every feature).",
    )

    def threshold(self, metric: str) -> float:
        """The practical effect size a candidate's improvement on ``metric`` must reach."""
        if metric in self.min_effect:
            return self.min_effect[metric]
        if metric.startswith(RHO_PREFIX):
            return self.min_effect.get(RHO_PREFIX, 0.0)
        return 0.0


@dataclass(frozen=True)
class AdvantageSpec:
    """How the trainer scales rewards into advantages (TRL's ``scale_rewards``) and its group size."""

    scale_rewards: Literal["group", "batch", "none"] = "group"
    group_size: int = 4
    std_eps: float = TRL_STD_EPS
    flat_eps: float = 0.02
    """The run's flat-group threshold (``harness.detectors.eps``: the detectors' and the metrics' "flat"):
    a group whose reward std is below it gives no signal, whatever the noise model says."""

    @classmethod
    def from_args(cls, args: Any, group_size: int | None = None, flat_eps: float = 0.02) -> AdvantageSpec:
        """From a ``trl.GRPOConfig`` (or anything with its fields): ``scale_rewards`` may be a bool there."""
        scale = getattr(args, "scale_rewards", "group")
        if scale is True:
            scale = "group"
        elif scale is False:
            scale = "none"
        if scale not in ("group", "batch", "none"):
            raise ValueError(f"scale_rewards {scale!r} is not one of 'group', 'batch', 'none'")
        aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")
        if aggregation not in (None, "sum_then_normalize"):
            # one reward function (the rubric): normalize_then_sum gives the same group z-scores
            scale = "group"
        g = group_size or getattr(args, "num_generations", None) or 4
        return cls(scale_rewards=scale, group_size=int(g), flat_eps=float(flat_eps))


# ---------------------------------------------------------------------------------------------- advantages
def bessel_std(values: np.ndarray) -> float:
    """NaN-aware, Bessel-corrected std (TRL's ``nanstd``); NaN when fewer than 2 values."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return math.nan
    return float(v.std(ddof=1))


def advantages(groups: Sequence[np.ndarray], spec: AdvantageSpec) -> list[np.ndarray]:
    """Each group's advantages exactly as the trainer computes them (a missing reward gets 0)."""
    arrays = [np.asarray(g, dtype=float) for g in groups]
    batch_std = math.nan
    if spec.scale_rewards == "batch":
        batch_std = bessel_std(np.concatenate(arrays)) if arrays else math.nan
    out = []
    for g in arrays:
        if g.size == 0 or np.isnan(g).all():
            out.append(np.zeros_like(g))
            continue
        a = g - np.nanmean(g)
        if spec.scale_rewards == "group":
            a = a / (bessel_std(g) + spec.std_eps)
        elif spec.scale_rewards == "batch":
            a = a / (batch_std + spec.std_eps)
        out.append(np.nan_to_num(a, nan=0.0))
    return out


def advantage_effect(
    base: Sequence[np.ndarray], cand: Sequence[np.ndarray], spec: AdvantageSpec
) -> tuple[float, list[float]]:
    """The largest change a candidate makes to any rollout's advantage, and each group's largest change.

    ``base`` and ``cand`` are the same rollouts' rewards (paired, group by group). With group scaling the
    advantages are compared as the group's z-scores, ``(r - mean) / std``: exactly what the trainer
    computes but for TRL's ``+ 1e-4``, which only damps a group whose spread is near 1e-4 (no signal
    either way), so that a per-group ``a*r + b`` is exactly no effect whatever the group's spread. A group
    whose spread is below 1e-6 (rounding) has none. With batch or no scaling the trainer's own formula.
    """
    if len(base) != len(cand):
        raise ValueError(f"{len(base)} baseline groups but {len(cand)} candidate groups")
    if spec.scale_rewards == "group":
        a_b, a_c = _z_scores(base), _z_scores(cand)
    else:
        a_b, a_c = advantages(base, spec), advantages(cand, spec)
    per_group = [float(np.max(np.abs(ac - ab))) if ab.size else 0.0 for ab, ac in zip(a_b, a_c, strict=True)]
    return (max(per_group) if per_group else 0.0), per_group


def _z_scores(groups: Sequence[np.ndarray]) -> list[np.ndarray]:
    out = []
    for g in groups:
        g = np.asarray(g, dtype=float)
        std = bessel_std(g)
        if math.isnan(std) or std < 1e-6:
            out.append(np.zeros_like(g))
        else:
            out.append(np.nan_to_num((g - np.nanmean(g)) / std, nan=0.0))
    return out


# ---------------------------------------------------------------------------------------------- noise
def _weights(rubric: Sequence[Criterion]) -> dict[str, tuple[float, bool]]:
    """Criterion id -> (|w| / sum of positive weights, judged?)."""
    pos = sum(c.weight for c in rubric if c.weight > 0) or 1.0
    return {c.id: (abs(c.weight) / pos, c.check is None) for c in rubric}


def noise_floor(
    rubric: Sequence[Criterion], verdicts: Sequence[Mapping[str, float | None]], verdict_noise: float
) -> float:
    """The reward spread a group would show from the judge's noise alone, in the rubric's reward units.

    Args:
        rubric: the criteria that graded the group.
        verdicts: one ``{criterion id: verdict}`` per rollout (None: missing, carries no noise).
        verdict_noise: the judge's noise of a judged verdict at 0.5 (:class:`SignalConfig`).
    """
    if verdict_noise <= 0 or not verdicts:
        return 0.0
    weights = _weights(rubric)
    per_rollout = []
    for row in verdicts:
        var = 0.0
        for cid, (alpha, judged) in weights.items():
            v = row.get(cid)
            if not judged or v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            v = min(1.0, max(0.0, float(v)))
            var += (alpha * verdict_noise * 4.0 * v * (1.0 - v)) ** 2
        per_rollout.append(var)
    return math.sqrt(sum(per_rollout) / len(per_rollout))


def gives_signal(rewards: np.ndarray, floor: float) -> bool:
    """Whether a group's rewards give an advantage that is not judge noise: spread above ``floor``.

    The spread is TRL's (Bessel-corrected) std; it must also clear TRL's own 1e-4, below which the
    trainer damps the advantages towards zero.
    """
    std = bessel_std(rewards)
    return not math.isnan(std) and std > max(floor, TRL_STD_EPS)


def criterion_discriminates(values: Sequence[float | None], verdict_noise: float) -> bool:
    """Whether one criterion's verdicts tell a group's rollouts apart beyond the judge's noise."""
    v = np.array([np.nan if x is None else float(x) for x in values], dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return False
    floor = math.sqrt(float(np.mean((verdict_noise * 4.0 * v * (1.0 - v)) ** 2)))
    return float(v.std(ddof=1)) > max(floor, TRL_STD_EPS)


def reference_rank(reference: float, policy: np.ndarray) -> float:
    """Share of the policy's rewards the reference's is at least as high as (ties count half)."""
    p = np.asarray(policy, dtype=float)
    p = p[~np.isnan(p)]
    if p.size == 0:
        return math.nan
    return float(((reference > p).sum() + 0.5 * (reference == p).sum()) / p.size)
