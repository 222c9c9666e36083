"""Critic trials on the frozen policy: measure a candidate harness update before it is committed.

The just-in-time critic accepts a candidate only after measuring its effect on the *current* policy,
whose weights do not change while a trial runs (docs/design.md §4). This module is the critic's *kit*: the
candidate's interface decides how it is measured (its ``metric`` and ``trial`` methods,
:class:`~harnessrl.interfaces.base.Interface`) and picks one of the recipes a :class:`Trial` offers;
:meth:`FrozenPolicyTrials.run` dispatches on the update's interface and never names one. The recipes,
and the built-in interfaces that use them:

- **re-grading** (:meth:`Trial.regrade`; rubric criteria, ``EditRubric``): re-grade the task's cached
  rollouts (``recorder.latest_rollouts``: they *are* samples of the frozen policy) and its reference
  answer under the current rubric and under the candidate one. Nothing is generated; the judge's
  verdict cache means only the criteria the candidate adds or rewords reach the backend. The
  comparison is *paired*: the same rollouts under both rubrics.
- **rollout arms** (:meth:`Trial.rollout_arms`; rollout guidance, ``SetGuidance``, and the default for
  any interface that shapes rows, e.g. a plug-in's sampling settings): two arms of fresh rollouts per
  probed task, ``rollouts_per_arm`` each: the rows the harness shapes now, and the rows it would shape
  with the candidate (``Harness.row(..., overlay=update)``: prompt and sampling settings), both graded
  with the current rubric. Members the candidate leaves alone are the same draw in both arms, so they
  are generated once and shared (paired); only the changed members differ. A candidate that reaches
  several tasks is probed on up to two of them, the failure's and recently flat ones first.
- **moved draws** (:meth:`Trial.moved_draws`; task sampling, ``ReweightTasks``): each task's within-group
  reward std, from a probe batch of fresh rollouts for the tasks the update promotes and from the
  replayed step records (``recorder.steps``) for the others. The metric is ``moved_signal_share``: of
  the draws the candidate probabilities (``sampling.probabilities_with``) move from some tasks to others, the
  share that give signal where they land vs where they were; the batch-wide expectation under both
  distributions is recorded beside it (``batch_signal_share``).

The critic measures **the learning signal as the trainer computes it** (docs/design.md §4,
:mod:`harnessrl.critic.signal`): GRPO learns from each group's advantages, which a per-group change
``r -> a*r + b`` (``a > 0``) leaves as they were, so no metric here moves under such a change:

- every rubric trial first compares the cached rollouts' advantages under both rubrics, computed with
  the trainer's own reward scaling (:class:`~harnessrl.critic.signal.AdvantageSpec`); a candidate whose
  largest change to any rollout's advantage is below ``signal.advantage_tolerance`` is rejected as
  "no effect on the learning signal" before any bootstrap (reweighting a criterion every rollout
  passes is such a candidate);
- the metric follows the failure the candidate answers (the interface's ``metric``, by default
  :func:`~harnessrl.interfaces.base.failure_metric`): the **share of groups
  that give signal** (reward spread above the judge's own noise under the rubric that graded them) for
  non-discriminative groups, in rubric and guidance trials (sampling trials: the same share over the
  draws the candidate moves, since a change to one task moves only its share of a batch); the **share of
  groups in which the targeted criterion tells rollouts apart** for a saturated or dead criterion;
  |Spearman rho| of reward with length or the flagged surface feature for spurious rewards; the
  **reference answer's rank** among the policy's rollouts when the reference scores below the policy.
  Every rubric trial also guards that the reference answer keeps its place (its rank may not fall below
  the policy's median).

Acceptance is noise-aware *and* practical: the rollouts are resampled ``bootstrap`` times with a
seeded generator (within groups; the same draws under both rubrics where the comparison is paired),
and the candidate is accepted only when the lower end of the ``confidence`` percentile interval of the
improvement is above zero **and** the improvement reaches the metric's smallest effect worth a harness
change (``signal.min_effect``): the rule is :func:`~harnessrl.critic.acceptance.decide`. The verdict
records the effect, the interval and the threshold. Fresh rollouts come from a
:class:`~harnessrl.critic.rollouts.PolicySampler`. Every result carries what was measured, and what it
cost; a trial that would exceed ``max_rollouts``, ``max_judge_calls`` or ``max_seconds`` stops and is
rejected with a reason starting with "budget".
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.critic.acceptance import Measured, decide, fmt, percentile_interval
from harnessrl.critic.signal import (
    CRITERION_SIGNAL,
    MOVED_SIGNAL_SHARE,
    REFERENCE_RANK,
    RHO_PREFIX,
    SIGNAL_SHARE,
    TRL_STD_EPS,
    AdvantageSpec,
    SignalConfig,
    advantage_effect,
    noise_floor,
    reference_rank,
)
from harnessrl.data.schema import Criterion, Task
from harnessrl.detection.detectors import SURFACE_FEATURES, spearman
from harnessrl.judges.rubric_judge import RubricJudge, RubricRequest
from harnessrl.records.failures import Failure
from harnessrl.records.steps import GroupRecord, RolloutRecord
from harnessrl.records.trials import TrialCost, TrialResult

if TYPE_CHECKING:
    from harnessrl.interfaces.harness import Harness  # the layer above: passed in, never imported at run time
    from harnessrl.records.steps import Recorder

__all__ = [
    "CRITERION_SIGNAL",
    "MOVED_SIGNAL_SHARE",
    "NO_EFFECT",
    "REFERENCE_RANK",
    "SIGNAL_SHARE",
    "FrozenPolicyTrials",
    "PolicySampler",
    "Trial",
    "TrialConfig",
    "TrialCost",
    "TrialResult",
]

logger = logging.getLogger(__name__)

NO_EFFECT = "no effect on the learning signal"
"""How a rejection for a candidate that leaves every rollout's advantage as it was begins."""

_REPLAY_GROUPS = 4  # most recent step records of a task replayed by a sampling trial
_PROBED_TASKS = 2  # tasks a domain-scope guidance trial probes at most
_EXAMPLE_CHARS = 240  # completion text kept per example in the measurements


# ---------------------------------------------------------------------------------------------- the policy
@runtime_checkable
class PolicySampler(Protocol):
    """Generates completions with the frozen policy: one text per chat prompt, sampled at ``temperature``.

    Further sampling settings an interface sets on a row (e.g. ``top_p``) arrive as keyword arguments;
    a sampler that cannot honour one should raise (the trial is then rejected with the reason)."""

    def sample(
        self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, **settings: float
    ) -> list[str]: ...


# ---------------------------------------------------------------------------------------------- models
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


# ---------------------------------------------------------------------------------------------- statistics
@dataclass
class _Side:
    """One side (baseline or candidate) of a group: what the learning-signal statistics need per rollout.

    ``noise_var``: the rollout's reward noise variance under the rubric that graded it (the group's
    floor is the root mean of it, :func:`~harnessrl.critic.signal.noise_floor`); ``targets``: the
    verdicts of the criteria a criterion-signal trial targets, one column each (NaN: missing)."""

    rewards: np.ndarray
    noise_var: np.ndarray
    targets: np.ndarray
    eps: float = 0.0  # the trainer's flat-group eps: below it a group is flat whatever the noise model says

    @classmethod
    def graded(
        cls,
        rewards: np.ndarray,
        rows: Sequence[dict[str, float | None]],
        rubric: Sequence[Criterion],
        noise: float,
        targets: Sequence[str] = (),
        eps: float = 0.0,
    ) -> _Side:
        var = np.array([noise_floor(rubric, [row], noise) ** 2 for row in rows], dtype=float)
        t = np.array([[_nan(row.get(cid)) for cid in targets] for row in rows], dtype=float).reshape(len(rows), -1)
        return cls(np.asarray(rewards, dtype=float), var, t, eps)

    def take(self, idx: np.ndarray) -> _Side:
        return _Side(self.rewards[idx], self.noise_var[idx], self.targets[idx], self.eps)


@dataclass
class _Group:
    """One group under the baseline and the candidate, and how to resample it.

    ``strata``: (baseline indices, candidate indices, paired). Paired strata are the same rollouts on
    both sides (equal length; resampled with the same indices); unpaired ones are independent draws,
    resampled independently."""

    base: _Side
    cand: _Side
    strata: list[tuple[np.ndarray, np.ndarray, bool]]
    unchanged: bool = False  # paired, and the candidate leaves its advantages as they were

    @classmethod
    def paired(cls, base: _Side, cand: _Side) -> _Group:
        idx = np.arange(base.rewards.size)
        return cls(base, cand, [(idx, idx, True)])

    def resample(self, rng: np.random.Generator, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
        """Bootstrap indices into each side, shape (n_boot, n_side)."""
        bs, cs = [], []
        for b_idx, c_idx, paired in self.strata:
            if paired:
                if b_idx.size:
                    k = rng.integers(0, b_idx.size, size=(n_boot, b_idx.size))
                    bs.append(b_idx[k])
                    cs.append(c_idx[k])
                continue
            if b_idx.size:
                bs.append(b_idx[rng.integers(0, b_idx.size, size=(n_boot, b_idx.size))])
            if c_idx.size:
                cs.append(c_idx[rng.integers(0, c_idx.size, size=(n_boot, c_idx.size))])
        empty = np.zeros((n_boot, 0), dtype=int)
        return (np.concatenate(bs, axis=1) if bs else empty), (np.concatenate(cs, axis=1) if cs else empty)


def _row_std(x: np.ndarray) -> np.ndarray:
    """Bessel std of each row along the last axis, ignoring NaN (NaN with fewer than 2 values)."""
    ok = ~np.isnan(x)
    n = ok.sum(axis=-1)
    filled = np.where(ok, x, 0.0)
    mean = filled.sum(axis=-1) / np.maximum(n, 1)
    dev = np.where(ok, x - mean[..., None], 0.0)
    var = (dev * dev).sum(axis=-1) / np.maximum(n - 1, 1)
    return np.where(n >= 2, np.sqrt(var), np.nan)


def _signal(side: _Side) -> np.ndarray:
    """Whether each row of rollouts gives signal: Bessel std of the rewards above the judge's noise floor
    and above the trainer's flat-group eps.

    Works on a side whose arrays carry leading bootstrap dimensions (rewards (..., n))."""
    std = _row_std(side.rewards)
    ok = ~np.isnan(side.rewards)
    floor = np.sqrt(np.where(ok, side.noise_var, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1))
    return np.nan_to_num(std, nan=0.0) > np.maximum(floor, max(side.eps, TRL_STD_EPS))


def _criterion_signal(side: _Side, noise: float) -> np.ndarray:
    """Whether any targeted criterion tells each row of rollouts apart beyond its own verdict noise."""
    t = np.moveaxis(side.targets, -1, 0)  # (k, ..., n)
    if t.shape[0] == 0:
        return np.zeros(side.rewards.shape[:-1], dtype=bool)
    std = np.nan_to_num(_row_std(t), nan=0.0)
    ok = ~np.isnan(t)
    tv = np.where(ok, t, 0.0)
    v_noise = (noise * 4.0 * tv * (1.0 - tv)) ** 2
    floor = np.sqrt(np.where(ok, v_noise, 0.0).sum(axis=-1) / np.maximum(ok.sum(axis=-1), 1))
    return (std > np.maximum(floor, max(side.eps, TRL_STD_EPS))).any(axis=0)


def _row_abs_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|Spearman rho| of each row pair of two (B, n) arrays (average ranks for ties; 0 where a row is constant)."""
    out = np.empty(x.shape[0])
    n = x.shape[1]
    chunk = max(1, 2_000_000 // max(1, n * n))
    for i in range(0, x.shape[0], chunk):
        rx, ry = _row_ranks(x[i : i + chunk]), _row_ranks(y[i : i + chunk])
        rx -= rx.mean(axis=1, keepdims=True)
        ry -= ry.mean(axis=1, keepdims=True)
        den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        num = (rx * ry).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho = np.where(den > 1e-12, num / np.where(den > 1e-12, den, 1.0), 0.0)
        out[i : i + chunk] = np.abs(np.clip(rho, -1.0, 1.0))
    return out


def _row_ranks(a: np.ndarray) -> np.ndarray:
    less = (a[:, :, None] > a[:, None, :]).sum(axis=2)
    equal = (a[:, :, None] == a[:, None, :]).sum(axis=2)
    return less + (equal + 1) / 2.0


def _abs_rho(rewards: np.ndarray, feature: np.ndarray) -> float:
    rho = spearman(rewards, feature)
    return 0.0 if rho is None else abs(rho)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def _rs(xs: Sequence[float | None]) -> list[float | None]:
    return [_r(x) for x in xs]


def _median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def _length_of(rollouts: Sequence[RolloutRecord]) -> np.ndarray:
    """Token lengths when the trainer recorded them, else word counts."""
    if rollouts and all(r.length_tokens > 0 for r in rollouts):
        return np.array([r.length_tokens for r in rollouts], dtype=float)
    return np.array([r.length_words for r in rollouts], dtype=float)


def _feature_fn(name: str) -> Callable[[str], float] | None:
    if name == "length":
        return SURFACE_FEATURES["words"]
    return SURFACE_FEATURES.get(name)


def _clip(text: str) -> str:
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def _criteria_view(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "text": c.text, "weight": c.weight, **({"check": c.check.model_dump()} if c.check else {})}
        for c in criteria
    ]


class _Rejected(Exception):
    """Ends a trial early with a rejection (``reason``) and whatever was measured so far."""

    def __init__(self, reason: str, measured: Measured | None = None):
        super().__init__(reason)
        self.reason = reason
        self.measured = measured


# ---------------------------------------------------------------------------------------------- trials
class _Budget:
    """A trial's running cost and its bounds."""

    def __init__(self, config: TrialConfig, judge: RubricJudge):
        self.config = config
        self.judge = judge
        self.t0 = time.perf_counter()
        self.rollouts = 0
        self.judge0 = judge.stats.backend_requests

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def judge_calls(self) -> int:
        return max(0, self.judge.stats.backend_requests - self.judge0)

    def cost(self) -> TrialCost:
        return TrialCost(rollouts=self.rollouts, judge_calls=self.judge_calls, seconds=round(self.seconds, 3))

    def need_time(self, estimate: float, what: str) -> None:
        limit = self.config.max_seconds
        if self.seconds + estimate > limit:
            raise _Rejected(
                f"budget: {what} would exceed max_seconds={limit:g} ({self.seconds:.1f} s spent, "
                f"about {estimate:.1f} s more needed)"
            )

    def need_judge(self, calls: int, what: str) -> None:
        left = self.config.max_judge_calls - self.judge_calls
        if calls > left:
            raise _Rejected(
                f"budget: {what} needs {calls} judge calls, {left} left of max_judge_calls="
                f"{self.config.max_judge_calls}"
            )


class Trial:
    """One trial in progress, handed to the interface whose candidate it measures: the candidate, the
    failure it answers, the metric, the running budget and the measurements so far, and the recipes an
    interface's :meth:`~harnessrl.interfaces.base.Interface.trial` picks from.

    - :meth:`regrade`: the same cached rollouts graded under the current and a candidate rubric (paired,
      nothing generated);
    - :meth:`rollout_arms`: fresh rollouts of the frozen policy, each group member as the harness shapes
      it now and as it would with the candidate (``Harness.row(..., overlay=update)``);
    - :meth:`moved_draws`: the signal of the draws a change of sampling probabilities moves;
    - :meth:`reject`: end the trial with a rejection and a reason.
    """

    def __init__(
        self,
        lab: FrozenPolicyTrials,
        update: Any,
        failure: Failure | None,
        metric: str,
        budget: _Budget,
        measurements: dict[str, Any],
    ):
        self.lab = lab
        self.update = update
        self.failure = failure
        self.metric = metric
        self.budget = budget
        self.measurements = measurements

    @property
    def next_step(self) -> int:
        """The step an update would apply from: one after the last recorded step."""
        return self.lab._next_step()

    def reject(self, reason: str, measured: Measured | None = None) -> NoReturn:
        """End the trial: rejected for ``reason``, with whatever was measured."""
        raise _Rejected(reason, measured)

    def regrade(
        self, task: Task, current: Any, candidate: Sequence[Criterion], targeted: tuple[list[str], list[str]]
    ) -> Measured:
        """Re-grade ``task``'s cached rollouts and reference answer under ``current`` (a rubric version:
        ``.version``, ``.criteria``) and ``candidate`` criteria; ``targeted``: the criteria a
        criterion-signal trial watches on each side."""
        return self.lab._regrade(self, task, current, candidate, targeted)

    def rollout_arms(self, targets: Sequence[Task], describe: str) -> Measured:
        """Two arms of fresh rollouts on ``targets`` (the failure's task first, then recently flat and
        active ones; one task, or up to two of several): rows as shaped now vs with the candidate."""
        return self.lab._rollout_arms(self, targets, describe)

    def moved_draws(
        self, p: dict[str, float], q: dict[str, float], changed: Sequence[str], promoted: Sequence[str]
    ) -> Measured:
        """The share of the draws moving from sampling probabilities ``p`` to ``q`` that give signal,
        where they land vs where they were; ``promoted`` tasks are probed with fresh rollouts."""
        return self.lab._moved_draws(self, p, q, changed, promoted)


class FrozenPolicyTrials:
    """Runs critic trials of candidate harness updates on the frozen policy.

    Args:
        harness: the three interfaces (read only: candidates are previewed, never applied).
        recorder: the step records and the kept rollouts of the last steps.
        judge: the training judge (its verdict cache makes rubric trials cheap).
        sampler: generates with the frozen policy (None: guidance trials and probe batches are
            rejected; rubric trials and replay-only sampling trials still run).
        config: bounds and statistics.
        advantage: how the trainer turns rewards into advantages (its ``scale_rewards`` and group
            size: :meth:`AdvantageSpec.from_args` of its GRPO config); default TRL's group scaling.
    """

    def __init__(
        self,
        harness: Harness,
        recorder: Recorder,
        judge: RubricJudge,
        sampler: PolicySampler | None,
        config: TrialConfig | None = None,
        advantage: AdvantageSpec | None = None,
    ):
        self.harness = harness
        self.recorder = recorder
        self.judge = judge
        self.sampler = sampler
        self.config = config or TrialConfig()
        self.advantage = advantage or AdvantageSpec()

    # ------------------------------------------------------------------------------ entry point
    def run(self, update: Any, candidate_id: str, failure: Failure | None = None) -> TrialResult:
        """Measure ``update`` (any interface's) on the frozen policy and decide; never applies it.

        The update's interface chooses the metric and the recipe (its ``metric`` and ``trial``)."""
        interface = self.harness.interface(update)
        metric = interface.metric(update, failure)
        budget = _Budget(self.config, self.judge)
        signal = self.config.signal
        measurements: dict[str, Any] = {
            "failure_kind": failure.kind if failure else None,
            "bootstrap": self.config.bootstrap,
            "confidence": self.config.confidence,
            "seed": self.config.seed,
            "scale_rewards": self.advantage.scale_rewards,
            "verdict_noise": signal.verdict_noise,
        }
        threshold = signal.threshold(metric)
        got = Measured()
        reason = ""
        try:
            got = interface.trial(update, Trial(self, update, failure, metric, budget, measurements))
        except _Rejected as e:
            reason = e.reason
            got = e.measured or got
        accepted = False
        if not reason:
            accepted, reason = decide(got, metric, threshold, self.config.confidence)
        result = TrialResult(
            candidate_id=candidate_id,
            interface=update.interface,
            metric=metric,
            baseline=_r(got.baseline),
            candidate=_r(got.candidate),
            improvement=_r(got.improvement),
            ci_low=_r(got.ci_low),
            ci_high=_r(got.ci_high),
            threshold=threshold,
            advantage_effect=_r(got.advantage_effect),
            accepted=accepted,
            reason=reason,
            measurements=measurements,
            cost=budget.cost(),
        )
        logger.info(
            "trial %s (%s, %s): %s [%d rollouts, %d judge calls, %.1f s]",
            candidate_id,
            update.interface,
            metric,
            reason,
            result.cost.rollouts,
            result.cost.judge_calls,
            result.cost.seconds,
        )
        return result

    # ------------------------------------------------------------------------------ rubric criteria
    def _regrade(
        self,
        trial: Trial,
        task: Task,
        current: Any,
        cand_rubric: Sequence[Criterion],
        targeted: tuple[list[str], list[str]],
    ) -> Measured:
        metric, budget, m = trial.metric, trial.budget, trial.measurements
        base_rubric = current.criteria
        m.update(
            task_id=task.id,
            rubric_version=current.version,
            candidate_rubric=_criteria_view(cand_rubric),
            generations=0,
        )
        rollouts = self.recorder.latest_rollouts(task.id)
        m["n_rollouts"] = len(rollouts)
        if len(rollouts) < 2:
            raise _Rejected("no cached rollouts to re-grade")
        m["steps"] = sorted({r.step for r in rollouts})

        # identical completions (a collapsed group) are graded once
        texts = list(dict.fromkeys(r.completion for r in rollouts))
        ref = task.reference_answer
        if ref is not None and ref not in texts:
            texts.append(ref)
        base_reqs = [RubricRequest.for_task(task, t, base_rubric) for t in texts]
        cand_reqs = [RubricRequest.for_task(task, t, cand_rubric) for t in texts]
        base_keys = self.judge.uncached(base_reqs)
        cand_keys = self.judge.uncached(cand_reqs) - base_keys
        budget.need_judge(len(base_keys) + len(cand_keys), f"re-grading {len(texts)} texts under both rubrics")
        # the baseline first: its verdicts fill the cache the candidate's unchanged criteria then hit
        base_res = dict(zip(texts, self.judge.grade(base_reqs), strict=True))
        budget.need_time(0.0, "re-grading under the candidate rubric")
        cand_res = dict(zip(texts, self.judge.grade(cand_reqs), strict=True))

        base = np.array([_nan(base_res[r.completion].reward) for r in rollouts])
        cand = np.array([_nan(cand_res[r.completion].reward) for r in rollouts])
        ref_b = base_res[ref].reward if ref is not None else None
        ref_c = cand_res[ref].reward if ref is not None else None
        ok = ~np.isnan(base) & ~np.isnan(cand)
        m.update(
            baseline_rewards=_rs(_none(base)),
            candidate_rewards=_rs(_none(cand)),
            reference_reward_baseline=_r(ref_b),
            reference_reward_candidate=_r(ref_c),
            policy_median_baseline=_r(_median(base[ok])) if ok.any() else None,
            policy_median_candidate=_r(_median(cand[ok])) if ok.any() else None,
            missing_rewards=int((~ok).sum()),
        )
        noise = self.config.signal.verdict_noise
        targets_b, targets_c = targeted
        if metric == CRITERION_SIGNAL:
            m["targeted_criteria"] = {"baseline": targets_b, "candidate": targets_c}
        rows_b = [_verdict_row(base_res[r.completion]) for r in rollouts]
        rows_c = [_verdict_row(cand_res[r.completion]) for r in rollouts]
        eps = self.advantage.flat_eps
        side_b = _Side.graded(base, rows_b, base_rubric, noise, targets_b, eps)
        side_c = _Side.graded(cand, rows_c, cand_rubric, noise, targets_c, eps)
        groups: list[_Group] = []
        for idx in _groups_by_step(rollouts):
            keep = np.array([i for i in idx if ok[i]], dtype=int)
            if keep.size >= 2:
                groups.append(_Group.paired(side_b.take(keep), side_c.take(keep)))
        m["n_groups"] = len(groups)
        if not groups:
            raise _Rejected("no cached group has 2 or more rewards under both rubrics")

        # the gate: does the candidate change anything the trainer learns from?
        tol = self.config.signal.advantage_tolerance
        floors_b = [_floor(g.base) for g in groups]
        floors_c = [_floor(g.cand) for g in groups]
        effect, per_group = advantage_effect(
            [g.base.rewards for g in groups], [g.cand.rewards for g in groups], self.advantage
        )
        for g, e in zip(groups, per_group, strict=True):
            g.unchanged = e < tol  # its advantages stay as they were: so does whether it gives signal
        m["learning_signal"] = {
            "advantage_effect": _r(effect),
            "advantage_effect_per_group": _rs(per_group),
            "tolerance": tol,
            "noise_floor_baseline": _rs(floors_b),
            "noise_floor_candidate": _rs(floors_c),
            "gives_signal_baseline": [bool(_signal(g.base)) for g in groups],
            "gives_signal_candidate": [bool(_signal(g.cand)) for g in groups],
        }
        if effect < tol:
            raise _Rejected(
                f"{NO_EFFECT}: the candidate rubric changes no cached rollout's advantage by more than "
                f"{effect:.3f} (tolerance {tol:g}) under the trainer's reward scaling "
                f"({self.advantage.scale_rewards}), so training would learn exactly what it learns now; "
                f"raw group reward std {fmt(_mean_std(groups, 'base'))} -> {fmt(_mean_std(groups, 'cand'))} "
                "is a rescaling, not a signal",
                Measured(advantage_effect=effect),
            )
        rng = np.random.default_rng(self.config.seed)

        if metric in (SIGNAL_SHARE, CRITERION_SIGNAL):
            got = self._share_verdict(groups, metric, rng, m)
        elif metric == REFERENCE_RANK:
            if ref is None:
                raise _Rejected("task has no reference answer: the reference's rank cannot be measured")
            if ref_b is None or ref_c is None:
                raise _Rejected("the judge gave no reward for the reference answer under one of the rubrics")
            if ok.sum() < 2:
                raise _Rejected("fewer than 2 cached rollouts have rewards under both rubrics")
            b, c = base[ok], cand[ok]
            idx = rng.integers(0, b.size, size=(self.config.bootstrap, b.size))
            diffs = _row_rank(ref_c, c[idx]) - _row_rank(ref_b, b[idx])
            got = Measured(baseline=reference_rank(ref_b, b), candidate=reference_rank(ref_c, c))
            got = percentile_interval(got, diffs, self.config.confidence)
        else:  # rho_reward_<feature>
            feature = metric[len(RHO_PREFIX) :]
            if feature == "length":
                feat = _length_of(rollouts)
            else:
                fn = _feature_fn(feature)
                if fn is None:
                    raise _Rejected(f"unknown surface feature {feature!r}; known: {sorted(SURFACE_FEATURES)}")
                feat = np.array([fn(r.completion) for r in rollouts], dtype=float)
            if ok.sum() < 4:
                raise _Rejected(
                    "fewer than 4 cached rollouts have rewards under both rubrics: no correlation to measure"
                )
            b, c, f = base[ok], cand[ok], feat[ok]
            m.update(feature=feature, feature_values=_rs(f.tolist()))
            idx = rng.integers(0, b.size, size=(self.config.bootstrap, b.size))
            diffs = _row_abs_spearman(b[idx], f[idx]) - _row_abs_spearman(c[idx], f[idx])
            got = Measured(baseline=_abs_rho(b, f), candidate=_abs_rho(c, f))
            got.improvement = got.baseline - got.candidate
            got = percentile_interval(got, diffs, self.config.confidence)
        got.advantage_effect = effect
        got.guard = got.guard or self._reference_guard(ref_b, ref_c, base[ok], cand[ok], metric, got, m)
        return got

    def _reference_guard(
        self,
        ref_b: float | None,
        ref_c: float | None,
        base: np.ndarray,
        cand: np.ndarray,
        metric: str,
        got: Measured,
        m: dict[str, Any],
    ) -> str | None:
        """The reference answer must keep its place: its rank among the policy's rollouts may not fall
        below the policy's median under the candidate rubric (unless it was already below it)."""
        if ref_c is None or ref_b is None or base.size == 0:
            m["reference_guard"] = None  # no reference answer: nothing to guard
            return None
        rank_b, rank_c = reference_rank(ref_b, base), reference_rank(ref_c, cand)
        passed = rank_c >= min(0.5, rank_b)
        m["reference_guard"] = {
            "reference_reward": _r(ref_c),
            "policy_median": _r(_median(cand)),
            "reference_rank_baseline": _r(rank_b),
            "reference_rank_candidate": _r(rank_c),
            "passed": passed,
        }
        if passed:
            return None
        return (
            f"rejected by the reference guard: under the candidate rubric the reference answer scores "
            f"{ref_c:.3f} and ranks above {rank_c:.0%} of the policy's rollouts (before: {ref_b:.3f}, {rank_b:.0%}), "
            f"below the policy's median {_median(cand):.3f}; the candidate punishes good answers too "
            f"({metric} {fmt(got.baseline)} -> {fmt(got.candidate)})"
        )

    # ------------------------------------------------------------------------------ rollout guidance
    def _rollout_arms(self, trial: Trial, targets: Sequence[Task], describe: str) -> Measured:
        metric, failure, budget, m, update = trial.metric, trial.failure, trial.budget, trial.measurements, trial.update
        if self.sampler is None:
            raise _Rejected(f"no policy sampler: a {update.interface} trial needs fresh rollouts of the frozen policy")
        gsz, n = self._probe_shape()
        cfg = self.config
        plans = []
        unchanged = []
        for task in self._probe_order(targets, failure):
            # each arm is made of the trainer's own groups: G members, each shaped as the trainer shapes it
            base_p = [self.harness.row(task, k % gsz, gsz) for k in range(n)]
            cand_p = [self.harness.row(task, k % gsz, gsz, overlay=update) for k in range(n)]
            differ = [k for k in range(n) if base_p[k] != cand_p[k]]
            if differ:
                plans.append((task, base_p, cand_p, differ))
            else:
                unchanged.append(task.id)
            if len(plans) == (1 if len(targets) == 1 else _PROBED_TASKS):
                break
        m.update(rollouts_per_arm=n, group_size=gsz)
        if unchanged:
            m["tasks_unchanged"] = unchanged
        if not plans:
            raise _Rejected(
                f"the candidate changes no prompt or sampling setting of {describe}"
                + (f" (tasks {unchanged} keep their own rule)" if unchanged else "")
            )
        # plan within the budget: drop probed tasks rather than overrun; none fits -> budget
        fitted, used, calls = [], 0, 0
        for plan in plans:
            task, differ = plan[0], plan[3]
            gens = n + len(differ)
            judged = sum(c.check is None for c in self.harness.rubrics.current(task.id).criteria)
            if used + gens > cfg.max_rollouts or calls + gens * judged > cfg.max_judge_calls:
                break
            fitted.append(plan)
            used, calls = used + gens, calls + gens * judged
        if not fitted:
            task, differ = plans[0][0], plans[0][3]
            gens = n + len(differ)
            judged = sum(c.check is None for c in self.harness.rubrics.current(task.id).criteria)
            raise _Rejected(
                f"budget: probing task {task.id} needs {gens} rollouts ({n} per arm, {n - len(differ)} shared) and "
                f"up to {gens * judged} judge calls; max_rollouts={cfg.max_rollouts}, "
                f"max_judge_calls={cfg.max_judge_calls}"
            )
        if len(fitted) < len(plans):
            m["tasks_dropped_for_budget"] = [p[0].id for p in plans[len(fitted) :]]

        per_task: list[dict[str, Any]] = []
        target_ids = _failure_criterion(failure) if metric == CRITERION_SIGNAL else set()
        m["tasks"] = per_task
        groups: list[_Group] = []
        pooled_b: list[tuple[np.ndarray, list[str]]] = []  # (rewards, texts) of each arm, for correlations
        pooled_c: list[tuple[np.ndarray, list[str]]] = []
        per_call = 0.0
        for task, base_p, cand_p, differ in fitted:
            budget.need_time(per_call * n, f"generating the baseline arm of task {task.id}")
            t0 = time.perf_counter()
            base_texts = self._sample_rows(base_p, budget)
            per_call = (time.perf_counter() - t0) / max(1, n)
            budget.need_time(per_call * len(differ), f"generating the candidate arm of task {task.id}")
            fresh = self._sample_rows([cand_p[k] for k in differ], budget)
            cand_texts = list(base_texts)
            for k, text in zip(differ, fresh, strict=True):
                cand_texts[k] = text

            rubric = self.harness.rubrics.current(task.id).criteria
            unique = list(dict.fromkeys(base_texts + cand_texts))
            reqs = [RubricRequest.for_task(task, t, rubric) for t in unique]
            budget.need_judge(len(self.judge.uncached(reqs)), f"grading the arms of task {task.id}")
            budget.need_time(0.0, f"grading the arms of task {task.id}")
            graded = dict(zip(unique, self.judge.grade(reqs), strict=True))
            base = np.array([_nan(graded[t].reward) for t in base_texts])
            cand = np.array([_nan(graded[t].reward) for t in cand_texts])
            crit_targets = [c.id for c in rubric if c.id in target_ids]

            shared = [k for k in range(n) if k not in differ and not np.isnan(base[k])]
            d_b = [k for k in differ if not np.isnan(base[k])]
            d_c = [k for k in differ if not np.isnan(cand[k])]
            row: dict[str, Any] = {
                "task_id": task.id,
                "temperature": {"baseline": base_p[0].temperature, "candidate": cand_p[0].temperature},
                **_generation_changes(base_p[0], cand_p[0]),
                "members_changed": differ,
                "candidate_guided": [bool(cand_p[k].guided) for k in range(n)],
                "baseline_rewards": _rs(_none(base)),
                "candidate_rewards": _rs(_none(cand)),
                "examples": {
                    "baseline": [_clip(base_texts[k]) for k in differ[:2]],
                    "candidate": [_clip(cand_texts[k]) for k in differ[:2]],
                },
            }
            vb, vc = base[~np.isnan(base)], cand[~np.isnan(cand)]
            if vb.size >= 2 and vc.size >= 2:
                noise, eps = cfg.signal.verdict_noise, self.advantage.flat_eps
                side_b = _Side.graded(
                    base, [_verdict_row(graded[t]) for t in base_texts], rubric, noise, crit_targets, eps
                )
                side_c = _Side.graded(
                    cand, [_verdict_row(graded[t]) for t in cand_texts], rubric, noise, crit_targets, eps
                )
                task_groups = _split_groups(side_b, side_c, gsz, shared, d_b, d_c)
                row.update(
                    baseline_mean=_r(vb.mean()),
                    baseline_std=_r(vb.std()),
                    candidate_mean=_r(vc.mean()),
                    candidate_std=_r(vc.std()),
                    noise_floor_baseline=_r(_floor(side_b)),
                    noise_floor_candidate=_r(_floor(side_c)),
                    gives_signal_baseline=[bool(_signal(grp.base)) for grp in task_groups],
                    gives_signal_candidate=[bool(_signal(grp.cand)) for grp in task_groups],
                )
                if crit_targets:
                    row["targeted_criteria"] = crit_targets
                groups.extend(task_groups)
                pooled_b.append((base, base_texts))
                pooled_c.append((cand, cand_texts))
            per_task.append(row)
        rng = np.random.default_rng(cfg.seed)

        if metric.startswith(RHO_PREFIX):
            feature = metric[len(RHO_PREFIX) :]
            fn = _feature_fn(feature)
            if fn is None:
                raise _Rejected(f"unknown surface feature {feature!r}; known: {sorted(SURFACE_FEATURES)}")
            if not pooled_b:
                raise _Rejected("too few rewards in the arms to measure a correlation")
            rb, rc = np.concatenate([p[0] for p in pooled_b]), np.concatenate([p[0] for p in pooled_c])
            fb = np.array([fn(t) for p in pooled_b for t in p[1]], dtype=float)
            fc = np.array([fn(t) for p in pooled_c for t in p[1]], dtype=float)
            okb, okc = ~np.isnan(rb), ~np.isnan(rc)
            rb, fb, rc, fc = rb[okb], fb[okb], rc[okc], fc[okc]
            if rb.size < 4 or rc.size < 4:
                raise _Rejected("fewer than 4 rewarded rollouts per arm: no correlation to measure")
            B = cfg.bootstrap
            ib = rng.integers(0, rb.size, size=(B, rb.size))
            ic = rng.integers(0, rc.size, size=(B, rc.size))
            diffs = _row_abs_spearman(rb[ib], fb[ib]) - _row_abs_spearman(rc[ic], fc[ic])
            got = Measured(baseline=_abs_rho(rb, fb), candidate=_abs_rho(rc, fc))
            got.improvement = got.baseline - got.candidate
            m["feature"] = feature
            return percentile_interval(got, diffs, self.config.confidence)
        if not groups:
            raise _Rejected("no probed task has 2 or more rewards in both arms")
        return self._share_verdict(groups, metric, rng, m)

    def _probe_order(self, targets: Sequence[Task], failure: Failure | None) -> list[Task]:
        """``targets`` in the order a rollout trial probes them: the failure's task, then tasks whose
        groups were recently flat, then tasks sampled now, then the rest."""
        if len(targets) <= 1:
            return list(targets)
        by_id = {t.id: t for t in targets}
        step = self._next_step()
        order: list[str] = []
        if failure is not None and failure.task_id in by_id:
            order.append(failure.task_id)
        for record in reversed(self.recorder.steps.values()):  # recently flat groups first
            order.extend(g.task_id for g in record.groups if g.flat and g.task_id in by_id)
        order.extend(t.id for t in targets if self.harness.sampling.status_at(t.id, step) == "active")
        order.extend(by_id)
        return [by_id[tid] for tid in dict.fromkeys(order)]

    # ------------------------------------------------------------------------------ task sampling
    def _moved_draws(
        self,
        trial: Trial,
        p: dict[str, float],
        q: dict[str, float],
        changed_ids: Sequence[str],
        promoted: Sequence[str],
    ) -> Measured:
        budget, m = trial.budget, trial.measurements

        noise = self.config.signal.verdict_noise
        replay: dict[str, list[_Side]] = {}
        for record in reversed(self.recorder.steps.values()):
            for g in record.groups:
                rows = replay.setdefault(g.task_id, [])
                side = self._replayed_side(g, noise)
                if side is not None and len(rows) < _REPLAY_GROUPS:
                    rows.append(side)

        # probe the promoted tasks, those with no records first, as far as the budget goes
        gsz, n = self._probe_shape()
        stats: dict[str, tuple[str, list[_Side]]] = {}
        to_probe = sorted(promoted, key=lambda t: bool(replay.get(t)))
        probes: list[dict[str, Any]] = []
        for tid in to_probe:
            task = self.harness.tasks[tid]
            judged = sum(c.check is None for c in self.harness.rubrics.current(tid).criteria)
            fits = budget.rollouts + n <= self.config.max_rollouts and budget.judge_calls + n * judged <= (
                self.config.max_judge_calls
            )
            if self.sampler is None or not fits:
                if replay.get(tid):
                    continue  # replayed below instead
                if self.sampler is None:
                    raise _Rejected(f"no policy sampler to probe promoted task {tid}, which has no step records")
                raise _Rejected(
                    f"budget: probing promoted task {tid} needs {n} rollouts and up to {n * judged} judge calls "
                    f"({budget.rollouts} rollouts, {budget.judge_calls} judge calls spent; max_rollouts="
                    f"{self.config.max_rollouts}, max_judge_calls={self.config.max_judge_calls})"
                )
            budget.need_time(0.0, f"probing promoted task {tid}")
            texts = self._sample_rows([self.harness.row(task, k % gsz, gsz) for k in range(n)], budget)
            rubric = self.harness.rubrics.current(tid).criteria
            unique = list(dict.fromkeys(texts))
            reqs = [RubricRequest.for_task(task, t, rubric) for t in unique]
            budget.need_judge(len(self.judge.uncached(reqs)), f"grading the probe of task {tid}")
            graded = dict(zip(unique, self.judge.grade(reqs), strict=True))
            rewards = np.array([_nan(graded[t].reward) for t in texts])
            side = _Side.graded(
                rewards, [_verdict_row(graded[t]) for t in texts], rubric, noise, eps=self.advantage.flat_eps
            )
            # the probe's groups, as the trainer would form them
            sides = [side.take(np.arange(j, j + gsz)) for j in range(0, n, gsz)]
            sides = [sd.take(np.flatnonzero(~np.isnan(sd.rewards))) for sd in sides]
            sides = [sd for sd in sides if sd.rewards.size >= 2]
            probes.append(
                {
                    "task_id": tid,
                    "rewards": _rs(_none(rewards)),
                    "gives_signal": [bool(_signal(sd)) for sd in sides],
                    "examples": [_clip(t) for t in texts[:2]],
                }
            )
            if sides:
                stats[tid] = ("probe", sides)
        for tid, rows in replay.items():
            if tid not in stats and tid in p and rows:
                stats[tid] = ("replay", rows)
        if probes:
            m["probes"] = probes

        known = [t for t in p if t in stats and (p[t] > 0 or q[t] > 0)]
        changed = [t for t in changed_ids if t in stats]
        m["tasks"] = {
            t: {
                "p_current": _r(p[t], 5),
                "p_candidate": _r(q[t], 5),
                "source": stats[t][0],
                "groups": len(stats[t][1]),
                "std": _r(float(np.mean([v.rewards.std() for v in stats[t][1]]))),
                "signal_share": _r(float(np.mean([_signal(v) for v in stats[t][1]]))),
            }
            for t in known
        }
        missing = [t for t in changed_ids if t not in stats]
        if missing:
            m["tasks_without_stats"] = missing
        m["probability_mass_covered"] = {
            "current": _r(sum(p[t] for t in known)),
            "candidate": _r(sum(q[t] for t in known)),
        }
        if not changed:
            raise _Rejected(f"no step records or probes for the tasks this update changes ({list(changed_ids)})")
        pw = np.array([p[t] for t in known])
        qw = np.array([q[t] for t in known])
        if pw.sum() <= 0 or qw.sum() <= 0:
            raise _Rejected("no task with known reward stats would be sampled under one of the distributions")
        pw, qw = pw / pw.sum(), qw / qw.sum()
        moved = float(np.abs(qw - pw).max())
        m["largest_probability_change"] = _r(moved, 6)
        if moved < 1e-6:
            raise _Rejected(
                f"{NO_EFFECT}: the candidate leaves the sampling probabilities of every task with known reward "
                "statistics as they are (the trainer would draw the same batches)"
            )
        share = np.array([np.mean([_signal(v) for v in stats[t][1]]) for t in known])
        # the draws the candidate moves: mass leaves the tasks whose probability falls (where those draws
        # are now) and lands on those whose probability rises; both sides sum to the moved share
        delta = qw - pw
        moved_mass = float(np.clip(delta, 0, None).sum())
        m["moved_probability"] = _r(moved_mass, 6)
        m["batch_signal_share"] = {"current": _r(float(pw @ share)), "candidate": _r(float(qw @ share))}
        rng = np.random.default_rng(self.config.seed)
        B = self.config.bootstrap
        draws = np.empty((B, len(known)))
        for j, t in enumerate(known):
            per_group = []
            for side in stats[t][1]:
                k = rng.integers(0, side.rewards.size, size=(B, side.rewards.size))
                per_group.append(_signal(side.take(k)))
            draws[:, j] = np.mean(per_group, axis=0)
        diffs = draws @ delta / moved_mass
        got = Measured(
            baseline=float(np.clip(-delta, 0, None) @ share) / moved_mass,
            candidate=float(np.clip(delta, 0, None) @ share) / moved_mass,
        )
        return percentile_interval(got, diffs, self.config.confidence)

    def _probe_shape(self) -> tuple[int, int]:
        """Group size and rollouts of a probe arm: whole groups of the trainer's size (at most the arm)."""
        n = self.config.rollouts_per_arm
        gsz = max(2, min(self.advantage.group_size, n))
        return gsz, (n // gsz) * gsz

    def _replayed_side(self, g: GroupRecord, noise: float) -> _Side | None:
        """A recorded group as a :class:`_Side`: its own rollouts' verdicts when they are still kept,
        else its per-criterion means for every rollout (the noise floor from the group's means)."""
        vals = np.array([_nan(v) for v in g.rewards], dtype=float)
        if (~np.isnan(vals)).sum() < 2:
            return None
        versions = self.harness.rubrics.versions.get(g.task_id) or []
        rubric = versions[g.rubric_version].criteria if g.rubric_version < len(versions) else []
        kept = [r for r in self.recorder.rollouts.get(g.step, []) if r.task_id == g.task_id]
        # a group's own verdicts while its step is kept; its per-criterion means otherwise
        same = len(kept) == len(vals)
        rows = [dict(r.verdicts) for r in kept] if same else [dict(g.criterion_means)] * len(vals)
        side = _Side.graded(vals, rows, rubric, noise, eps=self.advantage.flat_eps)
        return side.take(np.flatnonzero(~np.isnan(vals)))

    # ------------------------------------------------------------------------------ shared
    def _share_verdict(
        self, groups: list[_Group], metric: str, rng: np.random.Generator, m: dict[str, Any]
    ) -> Measured:
        """Share of groups that give signal (or whose targeted criteria discriminate), baseline vs
        candidate, with a bootstrap over each group's rollouts."""
        if not groups:
            raise _Rejected("no group has 2 or more rewards under both the baseline and the candidate")
        noise = self.config.signal.verdict_noise

        def stat(side: _Side) -> np.ndarray:
            return _criterion_signal(side, noise) if metric == CRITERION_SIGNAL else _signal(side)

        # a group whose advantages the candidate leaves as they were keeps its status: a rescaling that lifts
        # a flat group's raw spread over a threshold is no new signal
        point_b = [bool(stat(g.base)) for g in groups]
        point_c = [pb if g.unchanged else bool(stat(g.cand)) for g, pb in zip(groups, point_b, strict=True)]
        B = self.config.bootstrap
        boot_b = np.zeros(B)
        boot_c = np.zeros(B)
        for g in groups:
            ib, ic = g.resample(rng, B)
            sb = stat(g.base.take(ib))
            boot_b += sb
            boot_c += sb if g.unchanged else stat(g.cand.take(ic))
        m.update(
            {
                f"{metric}_per_group": {"baseline": point_b, "candidate": point_c},
                "group_std_baseline": _rs([float(np.nanstd(g.base.rewards)) for g in groups]),
                "group_std_candidate": _rs([float(np.nanstd(g.cand.rewards)) for g in groups]),
            }
        )
        diffs = (boot_c - boot_b) / len(groups)
        got = Measured(baseline=float(np.mean(point_b)), candidate=float(np.mean(point_c)))
        return percentile_interval(got, diffs, self.config.confidence)

    def _sample_rows(self, rows: Sequence[Any], budget: _Budget) -> list[str]:
        """Completions for harness rows (``Row``: messages and sampling settings), generated together
        where the settings agree, in the rows' order."""
        out: list[str | None] = [None] * len(rows)
        by_setting: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            by_setting.setdefault(tuple(sorted(row.generation.items())), []).append(i)
        for setting, idx in by_setting.items():
            gen = dict(setting)
            texts = self._sample([rows[i].messages for i in idx], gen, budget)
            for i, text in zip(idx, texts, strict=True):
                out[i] = text
        return [str(t) for t in out]

    def _sample(self, prompts: list[list[dict[str, str]]], generation: dict[str, float], budget: _Budget) -> list[str]:
        if budget.rollouts + len(prompts) > self.config.max_rollouts:
            raise _Rejected(
                f"budget: {len(prompts)} more rollouts would exceed max_rollouts={self.config.max_rollouts} "
                f"({budget.rollouts} generated)"
            )
        try:
            extra = {k: v for k, v in generation.items() if k not in ("temperature", "max_new_tokens")}
            texts = self.sampler.sample(  # type: ignore[union-attr]
                prompts,
                float(generation.get("temperature", 1.0)),
                int(generation.get("max_new_tokens", self.config.max_new_tokens)),
                **extra,
            )
        except Exception as e:  # a failing generation loses this trial, never the run
            logger.exception("policy sampler failed on %d prompts", len(prompts))
            raise _Rejected(f"the policy sampler failed: {type(e).__name__}: {e}") from None
        if len(texts) != len(prompts):
            raise _Rejected(f"the policy sampler returned {len(texts)} completions for {len(prompts)} prompts")
        budget.rollouts += len(prompts)
        return [str(t) for t in texts]

    def _next_step(self) -> int:
        """The step an update would apply from: one after the last recorded step."""
        last = max([*self.recorder.steps, *self.recorder.rollouts], default=0)
        return last + 1


# ---------------------------------------------------------------------------------------------- helpers
def _nan(x: float | None) -> float:
    return np.nan if x is None else float(x)


def _none(a: np.ndarray) -> list[float | None]:
    return [None if np.isnan(v) else float(v) for v in a]


def _groups_by_step(rollouts: Sequence[RolloutRecord]) -> list[list[int]]:
    """Indices of each group: consecutive rollouts of one step; a member number that does not rise
    starts a new group (a task drawn twice in one step makes two groups)."""
    groups: list[list[int]] = []
    prev: RolloutRecord | None = None
    for i, r in enumerate(rollouts):
        if prev is None or r.step != prev.step or r.member <= prev.member:
            groups.append([])
        groups[-1].append(i)
        prev = r
    return groups


def _verdict_row(result: Any) -> dict[str, float | None]:
    """``{criterion id: verdict}`` of one graded response."""
    return {v.criterion_id: v.value for v in result.verdicts}


def _floor(side: _Side) -> float:
    ok = ~np.isnan(side.rewards)
    return float(np.sqrt(side.noise_var[ok].mean())) if ok.any() else 0.0


def _mean_std(groups: Sequence[_Group], which: str) -> float:
    return float(np.mean([np.nanstd(getattr(g, which).rewards) for g in groups]))


def _row_rank(reference: float, policy: np.ndarray) -> np.ndarray:
    """:func:`~harnessrl.critic.signal.reference_rank` of each row of a (B, n) array."""
    return ((reference > policy).sum(axis=1) + 0.5 * (reference == policy).sum(axis=1)) / policy.shape[1]


def _failure_criterion(failure: Failure | None) -> set[str]:
    cid = failure.evidence.get("criterion_id") if failure is not None else None
    return {str(cid)} if cid else set()


def _generation_changes(base: Any, cand: Any) -> dict[str, Any]:
    """Sampling settings besides the temperature that the candidate changes (for the measurements)."""
    keys = sorted((set(base.generation) | set(cand.generation)) - {"temperature"})
    changed = {k: {"baseline": base.generation.get(k), "candidate": cand.generation.get(k)} for k in keys}
    return {"generation": changed} if any(v["baseline"] != v["candidate"] for v in changed.values()) else {}


def _split_groups(
    side_b: _Side, side_c: _Side, gsz: int, shared: Sequence[int], d_b: Sequence[int], d_c: Sequence[int]
) -> list[_Group]:
    """An arm's consecutive groups of ``gsz`` rollouts, each with its paired (shared) and unpaired strata."""
    out = []
    for start in range(0, side_b.rewards.size, gsz):
        idx = np.arange(start, start + gsz)
        local = {int(k): i for i, k in enumerate(idx)}

        def pick(members: Sequence[int], local: dict[int, int] = local) -> np.ndarray:
            return np.array([local[k] for k in members if k in local], dtype=int)

        b, c = side_b.take(idx), side_c.take(idx)
        if (~np.isnan(b.rewards)).sum() < 2 or (~np.isnan(c.rewards)).sum() < 2:
            continue
        sh = pick(shared)
        out.append(_Group(b, c, [(sh, sh, True), (pick(d_b), pick(d_c), False)]))
    return out
