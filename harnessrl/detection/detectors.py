"""Failure detectors: which task groups of a step give a reward that no longer teaches the policy.

Every step, :class:`FailureDetector` appends each task group (:class:`~harnessrl.records.steps.GroupRecord`,
plus surface features of its rollouts' texts when it gets them) to that task's rolling window
(:class:`TaskHistory`) and runs its detectors on the tasks that have a group at this step. Each
detector shares the :class:`Detector` protocol, ``detect(history, step) -> list[Failure]``:

========================== ============================================================= ==================
kind                       fires when (thresholds in :class:`DetectorConfig`)            interface hint
========================== ============================================================= ==================
non_discriminative_low     std < eps and mean < low (one group)                          rollout_guidance
non_discriminative_high    std < eps and mean > high (one group)                         rubric_criteria
spurious_length            Spearman rho(reward, length) > corr_threshold, pooled over     rubric_criteria
                           the task's recent groups (same rubric version), p < corr_max_p
spurious_feature           the same for another surface feature (bullet lines, "!",       rubric_criteria
                           the most repeated word), controlling for length by default
reference_below_policy     median policy reward − reference reward > reference_margin    rubric_criteria
criterion_saturated        criterion mean ≥ saturated for k consecutive observations      rubric_criteria
criterion_dead             criterion mean ≤ dead for k consecutive observations           rollout_guidance
judge_disagreement         mean |Δ reward| on re-grading > disagreement_threshold          rubric_criteria
scaffold_outgrown          a guided task's unguided members alone have std ≥ eps in its   rollout_guidance
                           last scaffold_groups guided groups (the hint outlived its use)
========================== ============================================================= ==================

``scaffold_outgrown`` is the harness's own failure rather than the reward's: guidance made a flat group
give signal, and now the plain prompt's members give signal without it, so the hint only keeps
off-policy completions in the batch (docs/design.md §4); the evolver may thin or remove it, measured by
the critic like any update.

Boundaries: a threshold named "below" / "above" / "more than" is *strict* (a value exactly at it
does not fire: std == eps is not flat, the same rule as ``GroupRecord.flat``; mean == low is not
low; rho == corr_threshold is not spurious; a gap == reference_margin is not below; mean |Δ| ==
disagreement_threshold is no disagreement). The criterion streak thresholds are *inclusive*
(mean == saturated counts as saturated, mean == dead as dead).

Missing data is never a zero: a ``None`` (or NaN) reward is left out of a group's statistics and of
every correlation; a ``None`` criterion mean neither extends nor breaks a streak. A group with fewer
than ``min_valid_rewards`` rewards gives no per-group verdict; a correlation needs ``min_points``
(reward, feature) pairs and some spread on both sides (constant lengths: undefined, no failure).

The interface hint is only a hint: the evolver's attributor decides which interface to change.

Cost: only the tasks that have a group at the step are examined, with a few small numpy ops each
(ranks computed here, no scipy call on the hot path); ``FailureDetector.seconds`` is the total time
spent (``regrade_seconds`` is the second judge's time, counted apart).
"""

from __future__ import annotations

import logging
import math
import re
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harnessrl.data.checks import count_words
from harnessrl.records.failures import FAILURE_KINDS, Failure
from harnessrl.records.steps import GroupRecord, RolloutRecord, StepRecord, group_stats

__all__ = [
    "SURFACE_FEATURES",
    "CriterionStreakDetector",
    "Detector",
    "DetectorConfig",
    "FailureDetector",
    "JudgeDisagreementDetector",
    "NonDiscriminativeDetector",
    "Observation",
    "ReferenceBelowPolicyDetector",
    "ScaffoldOutgrownDetector",
    "SpuriousCorrelationDetector",
    "TaskHistory",
    "judge_disagreement",
    "rank_rows",
    "spearman",
    "spearman_rows",
]

logger = logging.getLogger(__name__)

# the interface whose update most often addresses each kind (a hint for the attributor, nothing more)


# ---------------------------------------------------------------------------------------------- config
class DetectorConfig(BaseModel):
    """Thresholds of the failure detectors (see the module docstring for which are strict)."""

    model_config = ConfigDict(extra="forbid")

    eps: float = Field(
        default=0.02,
        ge=0,
        description="Reward std below this: the group is flat (also the trainer's flag and frac_reward_zero_std/*).",
    )
    low: float = Field(default=0.3, ge=0, le=1, description="A flat group with mean below this is uniformly low.")
    high: float = Field(default=0.8, ge=0, le=1, description="A flat group with mean above this is uniformly high.")
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


# ---------------------------------------------------------------------------------------------- failure
def _failure(kind: str, obs: Observation, evidence: dict[str, Any], summary: str, step: int | None = None) -> Failure:
    return Failure(
        kind=kind,  # type: ignore[arg-type]
        step=obs.step if step is None else step,
        task_id=obs.group.task_id,
        domain=obs.group.domain,
        rubric_version=obs.group.rubric_version,
        evidence=evidence,
        summary=summary,
    )


# ---------------------------------------------------------------------------------------------- features
_NUMBERED = re.compile(r"\d{1,3}[.)][ \t]+\S")
_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_STOP_WORDS = (
    "that this with from have will your they them their there then than what when which while were been "
    "into also more most some such only other about would could should these those each very just over "
    "because being does doing make made like"
)
_STOP = frozenset(_STOP_WORDS.split())


def bullet_lines(text: str) -> float:
    """Lines that start a list item: ``-``, ``*``, ``•`` or ``+`` (or ``1.``, ``2)``) then a blank, then text."""
    n = 0
    for line in text.split("\n"):
        s = line.lstrip(" \t")
        if not s:
            continue
        c = s[0]
        if c in "-*•+":
            if s[1:2] in (" ", "\t") and s[2:].strip():
                n += 1
        elif c.isdigit() and _NUMBERED.match(s):
            n += 1
    return float(n)


def exclamations(text: str) -> float:
    return float(text.count("!"))


def repeated_word(text: str) -> float:
    """Occurrences of the most frequent content word (≥ 4 letters, not a stop word): keyword stuffing."""
    best = 0
    for w, c in Counter(_WORD.findall(text.lower())).items():
        if c > best and w not in _STOP:
            best = c
    return float(best)


def word_count(text: str) -> float:
    return float(count_words(text))


SURFACE_FEATURES: dict[str, Callable[[str], float]] = {
    "bullets": bullet_lines,
    "exclamations": exclamations,
    "repeated_word": repeated_word,
    "words": word_count,
}


# ---------------------------------------------------------------------------------------------- statistics
def rank_rows(a: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank (``scipy.stats.rankdata`` of each row)."""
    a = np.asarray(a, dtype=float)
    n = a.shape[-1]
    order = np.argsort(a, axis=-1, kind="mergesort")
    s = np.take_along_axis(a, order, axis=-1)
    pos = np.broadcast_to(np.arange(n), a.shape)
    first = np.ones(a.shape, dtype=bool)  # the first of a run of equal values, in sorted order
    np.not_equal(s[..., 1:], s[..., :-1], out=first[..., 1:])
    last = np.ones(a.shape, dtype=bool)
    last[..., :-1] = first[..., 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, pos, n - 1), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(a.shape, dtype=float)
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=-1)
    return ranks


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair of two ``(..., n)`` arrays (average ranks for ties); NaN where a row is constant.

    The package's one rank correlation: the detectors' (one pair, :func:`spearman`) and the critic's (a
    bootstrap's resamples, one per row). rho is the centred ranks' cross sum over the root of the product of
    their sums of squares: exact sums of half-integers, so equal correlations come out equal."""
    rx, ry = rank_rows(x), rank_rows(y)
    rx -= rx.mean(axis=-1, keepdims=True)
    ry -= ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=-1) * (ry * ry).sum(axis=-1))
    num = (rx * ry).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1.0), np.nan)
    return np.clip(rho, -1.0, 1.0)


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when either side is constant or n < 2."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.size < 2 or xa.size != ya.size:
        return None
    rho = float(spearman_rows(xa, ya))
    return None if math.isnan(rho) else rho


def _p_one_sided(rho: float, n: int, controls: int = 0) -> float | None:
    """One-sided p-value of a (partial) Spearman rho > 0 by Fisher's z (variance 1.06 / (n - 3 - controls))."""
    dof = n - 3 - controls
    if dof <= 0:
        return None
    z = math.atanh(min(max(rho, -0.999999), 0.999999)) * math.sqrt(dof / 1.06)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _spread(order: np.ndarray, k: int = 64) -> np.ndarray:
    """At most ``k`` indices of ``order``, evenly spread (both ends kept): the evidence's scatter points."""
    if order.size <= k:
        return order
    return order[np.linspace(0, order.size - 1, k).round().astype(int)]


def _valid(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(v)]


# ---------------------------------------------------------------------------------------------- history
@dataclass(slots=True)
class Observation:
    """One task group as the detectors see it: the record, rewards as floats (NaN: missing), features."""

    step: int
    group: GroupRecord
    rewards: np.ndarray
    features: dict[str, np.ndarray]
    valid: list[float]  # the rewards that exist
    mean: float | None  # of ``valid`` (population std, as group_stats)
    std: float | None

    @property
    def rubric_version(self) -> int:
        return self.group.rubric_version


@dataclass(slots=True)
class CriterionRun:
    """A criterion's current streak on one task: state ('saturated', 'dead' or None), length, recent means."""

    state: str | None = None
    count: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=8))


@dataclass(slots=True)
class Regrade:
    step: int
    rubric_version: int
    original: np.ndarray  # rewards as graded in training
    regraded: np.ndarray  # the second grading (NaN: missing)
    criterion_deltas: dict[str, list[float]]


@dataclass
class TaskHistory:
    """A task's rolling window of observations, criterion streaks and re-grades."""

    task_id: str
    domain: str
    config: DetectorConfig
    window: deque = field(init=False)
    criteria: dict[str, CriterionRun] = field(default_factory=dict)
    regrades: deque = field(init=False)
    last_step: int = -1
    last_version: int | None = None

    def __post_init__(self) -> None:
        self.window = deque(maxlen=self.config.window)
        self.regrades = deque(maxlen=self.config.window)

    def at(self, step: int) -> list[Observation]:
        """This step's observations (two when the task was drawn twice)."""
        return [o for o in self.window if o.step == step]

    def pooled(self, step: int) -> list[Observation]:
        """The window's observations the correlations pool: same rubric version as the latest, recent enough."""
        if not self.window:
            return []
        version = self.window[-1].rubric_version
        oldest = step - self.config.max_age_steps if self.config.max_age_steps else None
        return [
            o
            for o in self.window
            if (not self.config.reset_on_rubric_change or o.rubric_version == version)
            and (oldest is None or o.step > oldest)
        ]

    def append(self, obs: Observation) -> None:
        cfg = self.config
        if cfg.reset_on_rubric_change and self.last_version is not None and obs.rubric_version != self.last_version:
            self.criteria.clear()
        self.window.append(obs)
        self.last_step, self.last_version = obs.step, obs.rubric_version
        present = obs.group.criterion_means
        for cid in [c for c in self.criteria if c not in present]:  # no longer in the rubric
            del self.criteria[cid]
        for cid, mean in present.items():
            if mean is None or math.isnan(mean):
                continue  # a missing verdict neither extends nor breaks a streak
            run = self.criteria.setdefault(cid, CriterionRun(recent=deque(maxlen=max(cfg.streak, 1))))
            state = "saturated" if mean >= cfg.saturated else "dead" if mean <= cfg.dead else None
            run.count = run.count + 1 if state is not None and state == run.state else (1 if state else 0)
            run.state = state
            run.recent.append(float(mean))


# ---------------------------------------------------------------------------------------------- detectors
@runtime_checkable
class Detector(Protocol):
    """Looks at one task's history after the step's groups were appended; returns this step's failures."""

    def detect(self, history: TaskHistory, step: int) -> list[Failure]: ...


class NonDiscriminativeDetector:
    """A group whose rewards collapsed to one value: uniformly low (std < eps, mean < low) or high."""

    def __init__(self, config: DetectorConfig):
        self.config = config

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        out = []
        for obs in history.at(step):
            vals, mean, std = obs.valid, obs.mean, obs.std
            if len(vals) < cfg.min_valid_rewards or mean is None or std is None:
                continue
            if not std < cfg.eps:
                continue
            if mean < cfg.low:
                kind, side, bound = "non_discriminative_low", "below", cfg.low
            elif mean > cfg.high:
                kind, side, bound = "non_discriminative_high", "above", cfg.high
            else:
                continue
            missing = len(obs.group.rewards) - len(vals)
            evidence = {
                "rewards": [_r(v) for v in obs.group.rewards],
                "mean": _r(mean),
                "std": _r(std),
                "eps": cfg.eps,
                "threshold": bound,
                "n": len(vals),
                "missing_rewards": missing,
                "guided": obs.group.guided,
                "temperature": obs.group.temperature,
            }
            word = "low" if kind.endswith("low") else "high"
            summary = (
                f"Task {obs.group.task_id} ({obs.group.domain}) at step {step}: all {len(vals)} rewards are uniformly "
                f"{word} (mean {mean:.2f} {side} {bound:.2f}, std {std:.3f} < {cfg.eps:g})"
                + (f", {missing} missing" if missing else "")
                + ": zero advantage, the group teaches nothing."
            )
            out.append(_failure(kind, obs, evidence, summary))
        return out


class SpuriousCorrelationDetector:
    """Reward rising with completion length, or with another surface feature, across a task's recent groups.

    Pools the (reward, feature) pairs of the task's window (same rubric version; missing rewards left
    out), ranks them and fires when Spearman rho > ``corr_threshold`` (and its one-sided p-value <
    ``corr_max_p``). Features other than length are tested by their partial rank correlation given
    length when ``feature_control_length`` is on. Fires at most once per task, feature and step, and
    only on a step where the task has a new group.
    """

    def __init__(self, config: DetectorConfig, features: Sequence[str] | None = None):
        self.config = config
        self.features = list(config.features if features is None else features)

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        current = history.at(step)
        if not current:
            return []
        pooled = history.pooled(step)
        rewards, cols = self._pool(pooled, ["length", *self.features])
        if rewards is None or rewards.size < cfg.min_points:
            return []
        n = int(rewards.size)
        # None where a side is constant (every pooled reward equal, or every length): no ranking to correlate
        rho_len = spearman(rewards, cols["length"]) if "length" in cols else None
        out = []
        obs = current[-1]
        steps = sorted({o.step for o in pooled})
        base = {"n": n, "groups": len(pooled), "steps": steps, "threshold": cfg.corr_threshold}
        if rho_len is not None and rho_len > cfg.corr_threshold:
            p = _p_one_sided(rho_len, n)
            if cfg.corr_max_p is None or (p is not None and p < cfg.corr_max_p):
                lengths = cols["length"]
                order = np.argsort(lengths, kind="mergesort")
                evidence = {
                    **base,
                    "feature": "length",
                    "rho": _r(rho_len),
                    "p_value": _r(p, 6),
                    "within_group": cfg.corr_within_group,
                    "points": [[_r(lengths[i], 2), _r(rewards[i])] for i in _spread(order)],
                    "mean_length": _r(float(np.mean([np.nanmean(o.features["length"]) for o in pooled])), 1),
                }
                out.append(
                    _failure(
                        "spurious_length",
                        obs,
                        evidence,
                        f"Task {obs.group.task_id} ({obs.group.domain}): reward rises with completion length, Spearman "
                        f"rho {rho_len:.2f} > {cfg.corr_threshold:.2f} over {n} rollouts of the last {len(pooled)} "
                        f"groups (steps {steps[0]}-{steps[-1]}, rubric v{obs.group.rubric_version}"
                        + (f", p {p:.3f}" if p is not None else "")
                        + ").",
                    )
                )
        for name in self.features:
            x = cols.get(name)
            if x is None:
                continue
            rho = spearman(rewards, x)
            if rho is None:
                continue  # constant feature (e.g. no bullet lines anywhere) or rewards: undefined
            tested, controls, partial, rho_fl = rho, 0, None, None
            if cfg.feature_control_length and rho_len is not None:
                rho_fl = spearman(x, cols["length"])
                denom = (1 - rho_len**2) * (1 - rho_fl**2)
                if denom <= 1e-9:
                    continue  # the feature (or reward) is a function of length: spurious_length's business
                partial = (rho - rho_len * rho_fl) / math.sqrt(denom)
                tested, controls = partial, 1
            if not tested > cfg.corr_threshold:
                continue
            p = _p_one_sided(tested, n, controls)
            if cfg.corr_max_p is not None and (p is None or not p < cfg.corr_max_p):
                continue
            order = np.argsort(x, kind="mergesort")
            evidence = {
                **base,
                "feature": name,
                "rho": _r(rho),
                "partial_rho_given_length": _r(partial),
                "rho_feature_length": _r(rho_fl),
                "rho_length": _r(rho_len),
                "p_value": _r(p, 6),
                "within_group": cfg.corr_within_group,
                "points": [[_r(x[i], 2), _r(rewards[i])] for i in _spread(order)],
            }
            what = (
                f"partial rho {partial:.2f} given length (raw {rho:.2f})" if partial is not None else f"rho {rho:.2f}"
            )
            out.append(
                _failure(
                    "spurious_feature",
                    obs,
                    evidence,
                    f"Task {obs.group.task_id} ({obs.group.domain}): reward rises with {name}, Spearman {what} > "
                    f"{cfg.corr_threshold:.2f} over {n} rollouts of the last {len(pooled)} groups "
                    f"(rubric v{obs.group.rubric_version}" + (f", p {p:.3f}" if p is not None else "") + ").",
                )
            )
        return out

    def _pool(self, pooled: list[Observation], names: list[str]) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
        rs, cols = [], {n: [] for n in names}
        have = {n for n in names if all(n in o.features for o in pooled)}
        for o in pooled:
            ok = ~np.isnan(o.rewards)
            for n in have:
                ok &= ~np.isnan(o.features[n])
            if not ok.any():
                continue
            r = o.rewards[ok]
            if self.config.corr_within_group:
                if r.size < 2:
                    continue
                r = r - r.mean()
            rs.append(r)
            for n in have:
                f = o.features[n][ok]
                cols[n].append(f - f.mean() if self.config.corr_within_group else f)
        if not rs:
            return None, {}
        return np.concatenate(rs), {n: np.concatenate(v) for n, v in cols.items() if n in have}


class ReferenceBelowPolicyDetector:
    """The task's reference answer scores below the group's median policy reward by more than a margin.

    The reference reward comes from ``GroupRecord.reference_reward`` when the trainer filled it, else
    from ``reference_reward(task_id, rubric_version)`` (None: the task has no reference, no failure).
    """

    def __init__(self, config: DetectorConfig, reference_reward: Callable[[str, int], float | None] | None = None):
        self.config = config
        self.reference_reward = reference_reward
        self._cache: dict[tuple[str, int], float] = {}

    def _reference(self, task_id: str, version: int) -> float | None:
        if (task_id, version) in self._cache:
            return self._cache[(task_id, version)]
        if self.reference_reward is None:
            return None
        try:
            value = self.reference_reward(task_id, version)
        except Exception:  # a failing grader loses this check, never the run
            logger.exception("reference_reward(%r, %d) failed; reference check skipped", task_id, version)
            return None
        if value is None or math.isnan(value):
            return None
        self._cache[(task_id, version)] = float(value)
        return float(value)

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        out = []
        for obs in history.at(step):
            vals = obs.valid
            if len(vals) < cfg.min_valid_rewards:
                continue
            ref = obs.group.reference_reward
            if ref is None or math.isnan(ref):
                ref = self._reference(obs.group.task_id, obs.group.rubric_version)
            if ref is None:
                continue
            median = float(statistics.median(vals))
            gap = median - ref
            if not gap > cfg.reference_margin:
                continue
            above = sum(v > ref for v in vals)
            evidence = {
                "reference_reward": _r(ref),
                "median_reward": _r(median),
                "gap": _r(gap),
                "margin": cfg.reference_margin,
                "rewards": [_r(v) for v in obs.group.rewards],
                "rollouts_above_reference": above,
                "n": len(vals),
            }
            out.append(
                _failure(
                    "reference_below_policy",
                    obs,
                    evidence,
                    f"Task {obs.group.task_id} ({obs.group.domain}) at step {step}: the reference answer scores "
                    f"{ref:.2f} under rubric v{obs.group.rubric_version}, {gap:.2f} below the policy's median "
                    f"{median:.2f} (margin {cfg.reference_margin:.2f}; {above} of {len(vals)} rollouts above it): "
                    "the rubric rewards something other than quality.",
                )
            )
        return out


class CriterionStreakDetector:
    """A criterion whose mean verdict stayed ≥ saturated (or ≤ dead) for ``streak`` consecutive observations.

    Reads the streaks :class:`TaskHistory` keeps; fires on every step the streak still holds (it is a
    standing failure). ``rubric_for(task_id, version)`` (optional) gives the criteria, to tell
    pitfalls apart and quote the criterion's text.
    """

    def __init__(self, config: DetectorConfig, rubric_for: Callable[[str, int], Sequence[Any] | None] | None = None):
        self.config = config
        self.rubric_for = rubric_for

    def _criteria(self, task_id: str, version: int) -> dict[str, Any]:
        if self.rubric_for is None:
            return {}
        try:
            crits = self.rubric_for(task_id, version) or []
        except Exception:
            logger.exception("rubric_for(%r, %d) failed", task_id, version)
            return {}
        return {c.id: c for c in crits}

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        current = history.at(step)
        if not current:
            return []
        obs = current[-1]
        hits = [(cid, run) for cid, run in history.criteria.items() if run.state and run.count >= cfg.streak]
        if not hits:
            return []
        crits = self._criteria(history.task_id, obs.group.rubric_version)
        out = []
        for cid, run in hits:
            c = crits.get(cid)
            pitfall = c is not None and c.weight < 0
            if run.state == "dead" and pitfall and not cfg.dead_pitfalls:
                continue
            kind = f"criterion_{run.state}"
            recent = [_r(v) for v in run.recent]
            bound = cfg.saturated if run.state == "saturated" else cfg.dead
            evidence = {
                "criterion_id": cid,
                "criterion_text": getattr(c, "text", None),
                "weight": getattr(c, "weight", None),
                "pitfall": pitfall,
                "recent_means": recent,
                "consecutive": run.count,
                "threshold": bound,
                "k": cfg.streak,
            }
            recent_txt = ", ".join(f"{v:.2f}" for v in run.recent)
            rel = "≥" if run.state == "saturated" else "≤"
            meaning = (
                "every rollout satisfies it: it no longer tells responses apart"
                if run.state == "saturated" and not pitfall
                else "every rollout commits this pitfall"
                if pitfall and run.state == "saturated"
                else "no rollout satisfies it: it gives no signal"
            )
            out.append(
                _failure(
                    kind,
                    obs,
                    evidence,
                    f"Task {obs.group.task_id} ({obs.group.domain}): criterion {cid} has mean verdict "
                    f"{rel} {bound:.2f} for {run.count} consecutive groups (recent {recent_txt}); "
                    f"{meaning}.",
                )
            )
        return out


def judge_disagreement(
    original: Sequence[float | None],
    regraded: Sequence[float | None],
    threshold: float = 0.2,
    min_pairs: int = 4,
) -> dict[str, Any] | None:
    """Compare two gradings of the same rollouts; the evidence dict when mean |Δ| > threshold, else None.

    Pairs with a missing value on either side are left out; fewer than ``min_pairs`` pairs: None.
    """
    a = np.array([np.nan if v is None else v for v in original], dtype=float)
    b = np.array([np.nan if v is None else v for v in regraded], dtype=float)
    ok = ~(np.isnan(a) | np.isnan(b))
    n = int(ok.sum())
    if n < min_pairs:
        return None
    d = b[ok] - a[ok]
    mad = float(np.mean(np.abs(d)))
    if not mad > threshold:
        return None
    return {
        "mean_abs_delta": _r(mad),
        "max_abs_delta": _r(float(np.max(np.abs(d)))),
        "mean_delta": _r(float(np.mean(d))),
        "n": n,
        "threshold": threshold,
        "original": [_r(v) for v in a[ok]],
        "regraded": [_r(v) for v in b[ok]],
    }


class JudgeDisagreementDetector:
    """The judge's rewards move by more than ``disagreement_threshold`` on average when re-graded.

    Pools the task's re-grades of the window (same rubric version); fires on a step that brought a
    new re-grade for the task. The worst criterion (largest mean |Δ verdict|) is named when the
    re-grade returned verdicts.
    """

    def __init__(self, config: DetectorConfig):
        self.config = config

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        if not history.regrades or history.regrades[-1].step != step:
            return []
        version = history.regrades[-1].rubric_version
        rs = [g for g in history.regrades if g.rubric_version == version]
        ev = judge_disagreement(
            np.concatenate([g.original for g in rs]).tolist(),
            np.concatenate([g.regraded for g in rs]).tolist(),
            cfg.disagreement_threshold,
            cfg.disagreement_min_pairs,
        )
        if ev is None:
            return []
        per_crit: dict[str, list[float]] = {}
        for g in rs:
            for cid, ds in g.criterion_deltas.items():
                per_crit.setdefault(cid, []).extend(ds)
        crit_mad = {cid: _r(float(np.mean(np.abs(ds)))) for cid, ds in per_crit.items() if ds}
        worst = max(crit_mad, key=lambda c: crit_mad[c] or 0.0) if crit_mad else None
        ev |= {"steps": sorted({g.step for g in rs}), "criterion_mean_abs_delta": crit_mad, "worst_criterion": worst}
        if not history.window:
            return []
        obs = (history.at(step) or [history.window[-1]])[-1]
        return [
            _failure(
                "judge_disagreement",
                obs,
                ev,
                f"Task {history.task_id} ({history.domain}): re-grading {ev['n']} rollouts moved the reward by "
                f"{ev['mean_abs_delta']:.2f} on average (> {cfg.disagreement_threshold:.2f}, max "
                f"{ev['max_abs_delta']:.2f})" + (f"; criterion {worst} disagrees most" if worst else "") + ".",
                step=step,
            )
        ]


# ---------------------------------------------------------------------------------------------- the suite
RegradeFn = Callable[[list[RolloutRecord]], Sequence[Any]]


class ScaffoldOutgrownDetector:
    """A guided task whose plain-prompt members give signal on their own: in each of its last
    ``scaffold_groups`` guided groups (the first ``guided`` members see the hint) the unguided members'
    rewards spread (std ≥ eps over at least ``min_valid_rewards`` of them)."""

    def __init__(self, config: DetectorConfig):
        self.config = config

    def _plain(self, obs: Observation) -> list[float]:
        return _valid(obs.group.rewards[obs.group.guided :])

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        need = cfg.scaffold_groups
        now = [o for o in history.at(step) if o.group.guided > 0]
        if not need or not now:
            return []
        guided = [o for o in history.window if o.group.guided > 0][-need:]
        if len(guided) < need or guided[-1] is not now[-1]:
            return []
        spreads = []
        for obs in guided:
            plain = self._plain(obs)
            if len(plain) < cfg.min_valid_rewards or float(np.std(plain)) < cfg.eps:
                return []
            spreads.append(float(np.std(plain)))
        obs = guided[-1]
        plain = self._plain(obs)
        group = obs.group
        evidence = {
            "guidance": group.guidance,
            "guided": group.guided,
            "group_size": len(group.rewards),
            "temperature": group.temperature,
            "plain_rewards": [_r(v) for v in plain],
            "guided_rewards": [_r(v) for v in group.rewards[: group.guided]],
            "plain_std": [_r(v) for v in spreads],
            "eps": cfg.eps,
            "groups": need,
            "steps": [o.step for o in guided],
        }
        summary = (
            f"Task {group.task_id} ({group.domain}) at step {step}: its {len(plain)} unguided rollouts give signal "
            f"without the hint (reward std {spreads[-1]:.3f} ≥ {cfg.eps:g}"
            + (f", in each of its last {need} guided groups" if need > 1 else "")
            + f"; {group.guided} of {len(group.rewards)} members guided): the scaffold may fade."
        )
        return [_failure("scaffold_outgrown", obs, evidence, summary)]


class FailureDetector:
    """Keeps each task's rolling window and runs the detectors on every step's groups.

    Args:
        config: thresholds (defaults: :class:`DetectorConfig`).
        reference_reward: ``(task_id, rubric_version) -> float | None``, the reference answer's reward under
            that rubric (the trainer grades it with the judge, cached); None: no reference check except
            where ``GroupRecord.reference_reward`` is filled.
        rubric_for: ``(task_id, rubric_version) -> criteria`` (objects with ``id``, ``text``, ``weight``), to
            tell pitfalls apart and quote criteria in the evidence.
        regrade: ``rollouts -> rewards`` from a second judge call (cache bypassed or another backend); each
            item a float, None (missing), or an object with ``.reward`` and ``.verdicts`` (a
            :class:`~harnessrl.judges.rubric_judge.GradeResult`), whose verdicts name the worst criterion.
            Called every ``config.regrade_every`` steps on ``config.regrade_groups`` sampled groups.
        features: extra surface features ``name -> text -> float`` (added to :data:`SURFACE_FEATURES`).
        rollouts_for: ``step -> rollouts`` used when the detector is called as a step listener
            (``trainer.step_listeners.append(detector)``), e.g. ``lambda s: recorder.rollouts.get(s)``.
        on_failures: called with each step's failures (may be empty) when used as a step listener.
        detectors: replace the default detector list (each follows :class:`Detector`).

    In the trainer (one line each)::

        detector = FailureDetector(
            config,
            reference_reward=cached_reference_grader,  # (task_id, version) -> float | None
            rubric_for=lambda t, v: harness.rubrics.versions[t][v].criteria,
            rollouts_for=lambda s: recorder.rollouts.get(s),
            on_failures=memory.add_failures,
        )
        trainer.step_listeners.append(detector)  # after the recorder has the step

    Surface features other than length need every pooled group's texts: a group observed without
    rollouts leaves those features out of its task's correlations until it leaves the window.
    """

    def __init__(
        self,
        config: DetectorConfig | None = None,
        *,
        reference_reward: Callable[[str, int], float | None] | None = None,
        rubric_for: Callable[[str, int], Sequence[Any] | None] | None = None,
        regrade: RegradeFn | None = None,
        features: Mapping[str, Callable[[str], float]] | None = None,
        rollouts_for: Callable[[int], Sequence[RolloutRecord] | None] | None = None,
        on_failures: Callable[[list[Failure]], None] | None = None,
        detectors: Sequence[Detector] | None = None,
        hints: Mapping[str, str] | None = None,
    ):
        self.config = config or DetectorConfig()
        self.hints = dict(hints or {})
        self.feature_fns = {**SURFACE_FEATURES, **(features or {})}
        unknown = [f for f in self.config.features if f not in self.feature_fns]
        if unknown:
            raise ValueError(f"unknown surface feature(s) {unknown}; known: {sorted(self.feature_fns)}")
        self.regrade = regrade
        self.rollouts_for = rollouts_for
        self.on_failures = on_failures
        self.detectors: list[Detector] = (
            list(detectors)
            if detectors is not None
            else [
                NonDiscriminativeDetector(self.config),
                SpuriousCorrelationDetector(self.config),
                ReferenceBelowPolicyDetector(self.config, reference_reward),
                CriterionStreakDetector(self.config, rubric_for),
                JudgeDisagreementDetector(self.config),
                ScaffoldOutgrownDetector(self.config),
            ]
        )
        self.histories: dict[str, TaskHistory] = {}
        self.seconds = 0.0
        self.last_seconds = 0.0
        self.regrade_seconds = 0.0
        self.steps = 0
        self.last_failures: list[Failure] = []
        self._rng = np.random.default_rng(self.config.seed)

    # -------------------------------------------------------------------------------- entry points
    def _hinted(self, failures: list[Failure]) -> list[Failure]:
        """Each failure with the interface registered as the first choice for its kind (``hints``)."""
        for f in failures:
            if f.interface_hint is None:
                f.interface_hint = self.hints.get(f.kind)
        return failures

    def __call__(self, record: StepRecord) -> None:
        """Step-listener form: observe the step (with its rollouts from ``rollouts_for``) and report."""
        rollouts = self.rollouts_for(record.step) if self.rollouts_for else None
        failures = self.observe(record, rollouts)
        if self.on_failures is not None:
            self.on_failures(failures)

    def observe(
        self, record: StepRecord, rollouts: Sequence[RolloutRecord] | None = None, *, regrade: bool = True
    ) -> list[Failure]:
        """Add a step's groups (and their rollouts' texts, when given) and return the step's failures.
        ``regrade=False``: no second judge call this time (a step replayed at resume was re-graded, or not,
        when it was trained)."""
        t0 = time.perf_counter()
        step = record.step
        per_group = self._match_rollouts(record.groups, rollouts)
        touched: dict[str, TaskHistory] = {}
        seen: dict[str, tuple[float, ...]] = {}
        for group, rs in zip(record.groups, per_group, strict=True):
            hist = self.histories.get(group.task_id)
            if hist is None:
                hist = self.histories[group.task_id] = TaskHistory(group.task_id, group.domain, self.config)
            hist.append(self._observation(step, group, rs, seen))
            touched[group.task_id] = hist
        self._expire(step, touched)
        spent = 0.0
        if regrade and self.regrade is not None and self.config.regrade_every and step % self.config.regrade_every == 0:
            spent = self._run_regrade(step, record.groups, per_group)
        failures = self._hinted([f for hist in touched.values() for d in self.detectors for f in d.detect(hist, step)])
        self.last_seconds = time.perf_counter() - t0 - spent
        self.seconds += self.last_seconds
        self.steps += 1
        self.last_failures = failures
        return failures

    def add_regrade(self, step: int, rollouts: Sequence[RolloutRecord], regraded: Sequence[Any]) -> list[Failure]:
        """Record a second grading of ``rollouts`` (made elsewhere) and return any judge-disagreement failures."""
        t0 = time.perf_counter()
        touched = self._store_regrade(step, list(rollouts), list(regraded))
        detector = JudgeDisagreementDetector(self.config)
        out = self._hinted([f for h in touched for f in detector.detect(h, step)])
        self.seconds += time.perf_counter() - t0
        return out

    def metrics(self, failures: Sequence[Failure] | None = None) -> dict[str, float]:
        """Counts per failure kind (``failures/<kind>``) and ``time/detectors`` for the last step."""
        fs = self.last_failures if failures is None else failures
        out = {f"failures/{k}": 0.0 for k in FAILURE_KINDS}
        for f in fs:
            out[f"failures/{f.kind}"] += 1
        out["time/detectors"] = self.last_seconds
        return out

    # -------------------------------------------------------------------------------- internals
    def _observation(
        self, step: int, group: GroupRecord, rollouts: list[RolloutRecord] | None, seen: dict[str, tuple[float, ...]]
    ) -> Observation:
        rewards = np.array([np.nan if r is None else r for r in group.rewards], dtype=float)
        valid = _valid(group.rewards)
        mean, std = group_stats(valid)
        n = rewards.size
        feats: dict[str, np.ndarray] = {}
        if len(group.lengths) == n:
            feats["length"] = np.asarray(group.lengths, dtype=float)
        elif rollouts is not None and len(rollouts) == n:
            feats["length"] = np.array([r.length_tokens for r in rollouts], dtype=float)
        names = self.config.features
        if rollouts is not None and len(rollouts) == n and names:
            rows = []
            for r in rollouts:
                row = seen.get(r.completion)
                if row is None:  # identical completions (a collapsed group) are measured once a step
                    row = seen[r.completion] = tuple(self.feature_fns[f](r.completion) for f in names)
                rows.append(row)
            table = np.array(rows, dtype=float).reshape(n, len(names))
            for j, name in enumerate(names):
                feats[name] = table[:, j]
        return Observation(step=step, group=group, rewards=rewards, features=feats, valid=valid, mean=mean, std=std)

    @staticmethod
    def _match_rollouts(
        groups: Sequence[GroupRecord], rollouts: Sequence[RolloutRecord] | None
    ) -> list[list[RolloutRecord] | None]:
        """Each group's rollouts: consecutive slices in group order (as the trainer builds them), else by task."""
        if not rollouts:
            return [None] * len(groups)
        out: list[list[RolloutRecord] | None] = []
        pos, ok = 0, True
        for g in groups:
            rs = list(rollouts[pos : pos + len(g.rewards)])
            pos += len(g.rewards)
            if len(rs) != len(g.rewards) or any(r.task_id != g.task_id for r in rs):
                ok = False
                break
            out.append(rs)
        if ok and pos == len(rollouts):
            return out
        by_task: dict[str, list[RolloutRecord]] = {}
        for r in rollouts:
            by_task.setdefault(r.task_id, []).append(r)
        out = []
        for g in groups:
            pool = by_task.get(g.task_id, [])
            take, by_task[g.task_id] = pool[: len(g.rewards)], pool[len(g.rewards) :]
            out.append(take if len(take) == len(g.rewards) else None)
        return out

    def _expire(self, step: int, touched: Mapping[str, TaskHistory]) -> None:
        """Drop observations older than ``max_age_steps`` from the tasks seen this step."""
        max_age = self.config.max_age_steps
        if not max_age:
            return
        for hist in touched.values():
            while hist.window and hist.window[0].step <= step - max_age:
                hist.window.popleft()

    def _run_regrade(
        self, step: int, groups: Sequence[GroupRecord], per_group: Sequence[list[RolloutRecord] | None]
    ) -> float:
        candidates = [i for i, rs in enumerate(per_group) if rs]
        if not candidates:
            return 0.0
        k = min(self.config.regrade_groups, len(candidates))
        chosen = sorted(self._rng.choice(len(candidates), size=k, replace=False).tolist())
        sample = [r for i in chosen for r in per_group[candidates[i]] or []]
        t0 = time.perf_counter()
        try:
            regraded = list(self.regrade(sample))  # type: ignore[misc]
        except Exception:
            logger.exception("re-grade call failed on %d rollouts; judge-disagreement check skipped", len(sample))
            regraded = None
        spent = time.perf_counter() - t0
        self.regrade_seconds += spent
        if regraded is not None:
            if len(regraded) != len(sample):
                logger.error("re-grade returned %d results for %d rollouts; ignored", len(regraded), len(sample))
            else:
                self._store_regrade(step, sample, regraded)
        return spent

    def _store_regrade(self, step: int, rollouts: list[RolloutRecord], regraded: list[Any]) -> list[TaskHistory]:
        if len(rollouts) != len(regraded):
            raise ValueError(f"{len(regraded)} re-grades for {len(rollouts)} rollouts")
        by_task: dict[str, list[tuple[RolloutRecord, Any]]] = {}
        for r, g in zip(rollouts, regraded, strict=True):
            by_task.setdefault(r.task_id, []).append((r, g))
        touched = []
        for tid, pairs in by_task.items():
            hist = self.histories.get(tid)
            if hist is None:
                continue  # a task the detector never saw a group of
            orig = np.array([np.nan if r.reward is None else r.reward for r, _ in pairs], dtype=float)
            new, crit = [], {}
            for r, g in pairs:
                reward = getattr(g, "reward", g)
                new.append(np.nan if reward is None else float(reward))
                verdicts = getattr(g, "verdicts", None)
                if verdicts:
                    for v in verdicts:
                        old = r.verdicts.get(v.criterion_id)
                        if old is not None and v.value is not None:
                            crit.setdefault(v.criterion_id, []).append(float(v.value) - float(old))
            version = pairs[0][0].rubric_version
            hist.regrades.append(Regrade(step, version, orig, np.array(new, dtype=float), crit))
            touched.append(hist)
        return touched
