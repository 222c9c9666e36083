"""Failure detectors: which task groups of a step give a reward that no longer teaches the policy.

Every step, :class:`~harnessrl.detection.failure_detector.FailureDetector` appends each task group
(:class:`~harnessrl.records.steps.GroupRecord`, plus surface features of its rollouts' texts when it gets
them) to that task's rolling window (:class:`~harnessrl.detection.history.TaskHistory`) and runs its
detectors on the tasks that have a group at this step. Each
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
                           last scaffold_groups guided groups (the hint outlived its use);
                           a hint the rubric states: some unguided member meets every     rubric_criteria
                           criterion it states in each of those groups
========================== ============================================================= ==================

``scaffold_outgrown`` is the harness's own failure rather than the reward's: guidance made a flat group
give signal, and now the plain prompt's members give signal without it, so the hint only keeps
off-policy completions in the batch (docs/design.md §4); the evolver may thin or remove it, measured by
the critic like any update. A hint the rubric states (a requirement no rollout met when it was added) belongs to
the rubric interface, which fades it once the unguided members meet what it states alone.

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

Cost: only the tasks that have a group at the step are examined, with a few small numpy ops each (ranks
computed in :mod:`harnessrl.detection.ranks`, no scipy call on the hot path); ``FailureDetector.seconds``
is the total time spent (``regrade_seconds`` is the second judge's time, counted apart).
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.history import Observation, TaskHistory, valid_values
from harnessrl.detection.ranks import p_one_sided, spearman
from harnessrl.records.evidence import (
    CriterionStreakEvidence,
    Evidence,
    FlatGroupEvidence,
    JudgeDisagreementEvidence,
    ReferenceBelowPolicyEvidence,
    ScaffoldOutgrownEvidence,
    SpuriousFeatureEvidence,
    SpuriousLengthEvidence,
)
from harnessrl.records.failures import Failure

__all__ = [
    "CriterionStreakDetector",
    "Detector",
    "JudgeDisagreementDetector",
    "NonDiscriminativeDetector",
    "ReferenceBelowPolicyDetector",
    "ScaffoldOutgrownDetector",
    "SpuriousCorrelationDetector",
    "judge_disagreement",
]

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- failure
def _failure(
    kind: str,
    obs: Observation,
    evidence: Evidence,
    summary: str,
    step: int | None = None,
    interface_hint: str | None = None,
) -> Failure:
    return Failure(
        kind=kind,  # type: ignore[arg-type]
        step=obs.step if step is None else step,
        task_id=obs.group.task_id,
        domain=obs.group.domain,
        rubric_version=obs.group.rubric_version,
        evidence=evidence,
        summary=summary,
        interface_hint=interface_hint,
    )


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _spread(order: np.ndarray, k: int = 64) -> np.ndarray:
    """At most ``k`` indices of ``order``, evenly spread (both ends kept): the evidence's scatter points."""
    if order.size <= k:
        return order
    return order[np.linspace(0, order.size - 1, k).round().astype(int)]


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
            evidence = FlatGroupEvidence(
                rewards=[_r(v) for v in obs.group.rewards],
                mean=_r(mean),
                std=_r(std),
                eps=cfg.eps,
                threshold=bound,
                n=len(vals),
                missing_rewards=missing,
                guided=obs.group.guided,
                temperature=obs.group.temperature,
            )
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
            p = p_one_sided(rho_len, n)
            if cfg.corr_max_p is None or (p is not None and p < cfg.corr_max_p):
                lengths = cols["length"]
                order = np.argsort(lengths, kind="mergesort")
                evidence = SpuriousLengthEvidence(
                    **base,
                    feature="length",
                    rho=_r(rho_len),
                    p_value=_r(p, 6),
                    within_group=cfg.corr_within_group,
                    points=[[_r(lengths[i], 2), _r(rewards[i])] for i in _spread(order)],
                    mean_length=_r(float(np.mean([np.nanmean(o.features["length"]) for o in pooled])), 1),
                )
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
            p = p_one_sided(tested, n, controls)
            if cfg.corr_max_p is not None and (p is None or not p < cfg.corr_max_p):
                continue
            order = np.argsort(x, kind="mergesort")
            evidence = SpuriousFeatureEvidence(
                **base,
                feature=name,
                rho=_r(rho),
                partial_rho_given_length=_r(partial),
                rho_feature_length=_r(rho_fl),
                rho_length=_r(rho_len),
                p_value=_r(p, 6),
                within_group=cfg.corr_within_group,
                points=[[_r(x[i], 2), _r(rewards[i])] for i in _spread(order)],
            )
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
            evidence = ReferenceBelowPolicyEvidence(
                reference_reward=_r(ref),
                median_reward=_r(median),
                gap=_r(gap),
                margin=cfg.reference_margin,
                rewards=[_r(v) for v in obs.group.rewards],
                rollouts_above_reference=above,
                n=len(vals),
            )
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
            evidence = CriterionStreakEvidence(
                criterion_id=cid,
                criterion_text=getattr(c, "text", None),
                weight=getattr(c, "weight", None),
                pitfall=pitfall,
                recent_means=recent,
                consecutive=run.count,
                threshold=bound,
                k=cfg.streak,
            )
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
) -> JudgeDisagreementEvidence | None:
    """Compare two gradings of the same rollouts; the evidence when mean |Δ| > threshold, else None.

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
    return JudgeDisagreementEvidence(
        mean_abs_delta=_r(mad),
        max_abs_delta=_r(float(np.max(np.abs(d)))),
        mean_delta=_r(float(np.mean(d))),
        n=n,
        threshold=threshold,
        original=[_r(v) for v in a[ok]],
        regraded=[_r(v) for v in b[ok]],
    )


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
        ev = ev.model_copy(
            update={
                "steps": sorted({g.step for g in rs}),
                "criterion_mean_abs_delta": crit_mad,
                "worst_criterion": worst,
            }
        )
        if not history.window:
            return []
        obs = (history.at(step) or [history.window[-1]])[-1]
        return [
            _failure(
                "judge_disagreement",
                obs,
                ev,
                f"Task {history.task_id} ({history.domain}): re-grading {ev.n} rollouts moved the reward by "
                f"{ev.mean_abs_delta:.2f} on average (> {cfg.disagreement_threshold:.2f}, max "
                f"{ev.max_abs_delta:.2f})" + (f"; criterion {worst} disagrees most" if worst else "") + ".",
                step=step,
            )
        ]


class ScaffoldOutgrownDetector:
    """A guided task whose plain-prompt members give signal on their own: in each of its last
    ``scaffold_groups`` guided groups (the first ``guided`` members see the hint) the unguided members'
    rewards spread (std ≥ eps over at least ``min_valid_rewards`` of them). A hint the rubric states (an edit with
    ``guide_fraction``: ``GroupRecord.hinted``) is outgrown when, in each of those groups, some unguided member
    meets every criterion it states: the failure names them (``checks``) and the rubric interface (its owner)."""

    def __init__(self, config: DetectorConfig):
        self.config = config

    def _plain(self, obs: Observation) -> list[float]:
        return valid_values(obs.group.rewards[obs.group.guided :])

    def detect(self, history: TaskHistory, step: int) -> list[Failure]:
        cfg = self.config
        need = cfg.scaffold_groups
        now = [o for o in history.at(step) if o.group.guided > 0]
        if not need or not now:
            return []
        guided = [o for o in history.window if o.group.guided > 0][-need:]
        if len(guided) < need or guided[-1] is not now[-1]:
            return []
        if guided[-1].group.hinted:
            return self._stated(guided, step)
        spreads = []
        for obs in guided:
            plain = self._plain(obs)
            if len(plain) < cfg.min_valid_rewards or float(np.std(plain)) < cfg.eps:
                return []
            spreads.append(float(np.std(plain)))
        obs = guided[-1]
        plain = self._plain(obs)
        group = obs.group
        evidence = self._evidence(guided, plain_std=[_r(v) for v in spreads])
        summary = (
            f"Task {group.task_id} ({group.domain}) at step {step}: its {len(plain)} unguided rollouts give signal "
            f"without the hint (reward std {spreads[-1]:.3f} ≥ {cfg.eps:g}"
            + (f", in each of its last {need} guided groups" if need > 1 else "")
            + f"; {group.guided} of {len(group.rewards)} members guided): the scaffold may fade."
        )
        return [_failure("scaffold_outgrown", obs, evidence, summary)]

    def _evidence(self, guided: list[Observation], **more: Any) -> ScaffoldOutgrownEvidence:
        """The evidence of the last guided groups ``guided`` (the latest last), with ``more`` fields."""
        group = guided[-1].group
        return ScaffoldOutgrownEvidence(
            guidance=group.guidance,
            guided=group.guided,
            group_size=len(group.rewards),
            temperature=group.temperature,
            plain_rewards=[_r(v) for v in self._plain(guided[-1])],
            guided_rewards=[_r(v) for v in group.rewards[: group.guided]],
            eps=self.config.eps,
            groups=len(guided),
            steps=[o.step for o in guided],
            **more,
        )

    def _stated(self, guided: list[Observation], step: int) -> list[Failure]:
        """The rubric's hint outgrown: in each of the last guided groups an unguided member met every criterion the
        hint states (its mean verdict among them above 0)."""
        checks = guided[-1].group.hinted
        met: dict[str, list[float | None]] = {c: [] for c in checks}
        for obs in guided:
            for c in checks:
                m = obs.group.plain_criterion_means.get(c)
                if m is None or m <= 0:
                    return []
                met[c].append(_r(m))
        obs = guided[-1]
        group = obs.group
        plain = self._plain(obs)
        evidence = self._evidence(guided, checks=list(checks), plain_met=met)
        rates = ", ".join(f"{c} {v[-1]:.2f}" for c, v in met.items() if v and v[-1] is not None)
        summary = (
            f"Task {group.task_id} ({group.domain}) at step {step}: its {len(plain)} unguided rollouts meet the "
            f"criteria the rubric states as a hint without it (their mean verdicts: {rates}"
            + (f", in each of its last {len(guided)} guided groups" if len(guided) > 1 else "")
            + f"; {group.guided} of {len(group.rewards)} members guided): the rubric's hint may fade."
        )
        return [_failure("scaffold_outgrown", obs, evidence, summary, interface_hint="rubric_criteria")]
