"""Critic trials on the frozen policy: measure a candidate harness update before it is committed.

The just-in-time critic accepts a candidate only after measuring its effect on the *current* policy,
whose weights do not change while a trial runs (DESIGN.md §4). One recipe per interface:

- **rubric criteria** (:class:`~harnessrl.interfaces.rubric.EditRubric`): re-grade the task's cached
  rollouts (``recorder.latest_rollouts``: they *are* samples of the frozen policy) and its reference
  answer under the current rubric and under the candidate one. Nothing is generated; the judge's
  verdict cache means only the criteria the candidate adds or rewords reach the backend. The
  comparison is *paired*: the same rollouts under both rubrics.
- **rollout guidance** (:class:`~harnessrl.interfaces.guidance.SetGuidance`): two arms of fresh
  rollouts per probed task, ``rollouts_per_arm`` each: the prompts the harness builds now, and the
  prompts it would build with the candidate (``prompt_for(..., overlay=update)``), both graded with
  the current rubric. Members whose prompt and temperature the candidate leaves alone are the same
  draw in both arms, so they are generated once and shared (paired); only the guided members differ.
  A domain-scope candidate is probed on up to two tasks of its domain, recently flat ones first.
- **task sampling** (:class:`~harnessrl.interfaces.sampling.ReweightTasks`): each task's within-group
  reward std, from a probe batch of fresh rollouts for the tasks the update promotes and from the
  replayed step records (``recorder.steps``) for the others; the metric is the expected group std of
  a sampled batch under the candidate probabilities (``sampling.preview``) vs the current ones.

The metric follows the failure the candidate answers (:func:`choose_metric`): within-group reward std
(the GRPO learning signal) for non-discriminative groups and saturated or dead criteria;
|Spearman rho| of reward with length or with the flagged surface feature for spurious rewards, with a
guard that the reference answer still scores at least the policy's median under the candidate rubric;
the reference answer's margin over the policy's median when the reference scores below the policy.

Acceptance is noise-aware: the rollouts are resampled ``bootstrap`` times with a seeded generator
(within groups for std; the same draws under both rubrics where the comparison is paired) and the
candidate is accepted only when the lower end of the ``confidence`` percentile interval of the
improvement is above zero. Every result carries what was measured, and what it cost; a trial that
would exceed ``max_rollouts``, ``max_judge_calls`` or ``max_seconds`` stops and is rejected with a
reason starting with "budget".
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.data.schema import Criterion, Task, prompt_text
from harnessrl.interfaces.guidance import SetGuidance
from harnessrl.interfaces.rubric import EditRubric
from harnessrl.interfaces.sampling import ReweightTasks
from harnessrl.trainer.detectors import SURFACE_FEATURES, Failure, spearman
from harnessrl.trainer.judges.base import RubricJudge, RubricRequest
from harnessrl.trainer.records import RolloutRecord

if TYPE_CHECKING:
    from harnessrl.interfaces.harness import Harness
    from harnessrl.trainer.records import Recorder

__all__ = [
    "EXPECTED_STD",
    "GROUP_STD",
    "REFERENCE_MARGIN",
    "FrozenPolicyTrials",
    "PolicySampler",
    "TransformersSampler",
    "TrialConfig",
    "TrialCost",
    "TrialResult",
    "choose_metric",
]

logger = logging.getLogger(__name__)

GROUP_STD = "group_reward_std"
"""Mean within-group reward std: what GRPO's advantage needs (0 = the group teaches nothing)."""
EXPECTED_STD = "expected_group_reward_std"
"""Sampling trials: within-group reward std expected of a batch drawn with the sampling probabilities."""
REFERENCE_MARGIN = "reference_margin"
"""Reference answer's reward minus the policy's median reward (it should not be below the policy)."""
RHO_PREFIX = "rho_reward_"
"""``rho_reward_<feature>``: |Spearman rho| of reward with length or a surface feature (should fall)."""

_REPLAY_GROUPS = 4  # most recent step records of a task replayed by a sampling trial
_PROBED_TASKS = 2  # tasks a domain-scope guidance trial probes at most
_EXAMPLE_CHARS = 240  # completion text kept per example in the measurements


# ---------------------------------------------------------------------------------------------- the policy
@runtime_checkable
class PolicySampler(Protocol):
    """Generates completions with the frozen policy: one text per chat prompt, sampled at ``temperature``."""

    def sample(self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int) -> list[str]: ...


class TransformersSampler:
    """A :class:`PolicySampler` over a transformers causal LM and its tokenizer.

    Prompts go through the tokenizer's chat template (``add_generation_prompt=True``), are padded on
    the left and sampled (``do_sample=True``) under ``torch.inference_mode`` with the model in eval
    mode; the model's training mode is restored afterwards and its weights never change. The global
    torch RNG is forked, so a trial does not shift the training run's random stream, and seeded
    (``seed`` plus a call counter) so a trial is reproducible.

    Args:
        model: the policy (unwrapped: not a DDP/accelerate wrapper).
        tokenizer: its tokenizer (a pad token is taken from eos when it has none).
        batch_size: prompts generated together.
        seed: base seed of the sampling RNG; None leaves the (forked) RNG unseeded.
        generation_kwargs: extra ``generate`` arguments; the default matches TRL's GRPO sampling
            (``top_k=0``, ``top_p=1.0``: plain temperature sampling).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 16,
        seed: int | None = 0,
        generation_kwargs: dict[str, Any] | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = max(1, batch_size)
        self.seed = seed
        self.generation_kwargs = {"top_k": 0, "top_p": 1.0} if generation_kwargs is None else dict(generation_kwargs)
        self.calls = 0

    def sample(self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int) -> list[str]:
        import torch

        if not prompts:
            return []
        model = self.model
        device = next(model.parameters()).device
        was_training = model.training
        fork = [device.index or 0] if device.type == "cuda" else []
        out: list[str] = []
        with torch.random.fork_rng(devices=fork):
            if self.seed is not None:
                torch.manual_seed(self.seed + self.calls)
            self.calls += 1
            model.eval()
            try:
                with torch.inference_mode():
                    for i in range(0, len(prompts), self.batch_size):
                        out.extend(self._generate(prompts[i : i + self.batch_size], temperature, max_new_tokens))
            finally:
                model.train(was_training)
        return out

    def _generate(self, batch: list[list[dict[str, str]]], temperature: float, max_new_tokens: int) -> list[str]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in batch]
            special = False  # the template already has the special tokens it wants
        else:
            texts = [prompt_text(p) for p in batch]
            special = True
        if tok.pad_token_id is None and tok.eos_token is not None:
            tok.pad_token = tok.eos_token
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=special)
        finally:
            tok.padding_side = side
        device = next(self.model.parameters()).device
        enc = {k: v.to(device) for k, v in enc.items()}
        ids = self.model.generate(
            **enc,
            do_sample=True,
            temperature=float(temperature),
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
            **self.generation_kwargs,
        )
        return tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


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


class TrialCost(BaseModel):
    """What a trial spent: fresh rollouts generated, judge backend requests, wall-clock seconds."""

    rollouts: int
    judge_calls: int
    seconds: float


class TrialResult(BaseModel):
    """The critic's measurement of one candidate on the frozen policy, and its verdict.

    ``improvement`` is signed so that > 0 is better (for ``rho_reward_*``: baseline |rho| minus
    candidate |rho|); ``accepted`` means its bootstrap interval ``[ci_low, ci_high]`` lies above 0
    (and, for spurious-reward trials, that the reference answer kept scoring at least the policy's
    median). ``measurements`` holds everything measured; ``reason`` says why in one sentence.
    """

    candidate_id: str
    interface: str
    metric: str
    baseline: float | None
    candidate: float | None
    improvement: float | None
    ci_low: float | None
    ci_high: float | None
    accepted: bool
    reason: str
    measurements: dict[str, Any]
    cost: TrialCost


Update = ReweightTasks | SetGuidance | EditRubric


def choose_metric(update: Update, failure: Failure | None = None) -> str:
    """The metric a trial of ``update`` measures, from the failure it answers (or the update type).

    non_discriminative_low/high, criterion_saturated/dead (and no failure): within-group reward std;
    spurious_length / spurious_feature: ``rho_reward_length`` / ``rho_reward_<feature>``;
    reference_below_policy (rubric edits): ``reference_margin``. Sampling trials always measure the
    expected group std of a sampled batch.
    """
    if isinstance(update, ReweightTasks):
        return EXPECTED_STD
    kind = failure.kind if failure is not None else None
    if kind == "spurious_length":
        return RHO_PREFIX + "length"
    if kind == "spurious_feature":
        return RHO_PREFIX + str(failure.evidence.get("feature") or "length")  # type: ignore[union-attr]
    if kind == "reference_below_policy" and isinstance(update, EditRubric):
        return REFERENCE_MARGIN
    return GROUP_STD


# ---------------------------------------------------------------------------------------------- statistics
@dataclass
class _Stratum:
    """Rewards of one part of a group under the baseline and the candidate.

    ``paired``: the same rollouts under both (equal length; resampled with the same indices);
    otherwise the two sides are independent draws and are resampled independently."""

    base: np.ndarray
    cand: np.ndarray
    paired: bool


_Group = list[_Stratum]


def _group_values(group: _Group) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([s.base for s in group]), np.concatenate([s.cand for s in group])


def _resampled_std(group: _Group, rng: np.random.Generator, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_boot`` bootstrap stds of each side, resampling each stratum within itself."""
    bs, cs = [], []
    for s in group:
        if s.paired:
            if s.base.size:
                idx = rng.integers(0, s.base.size, size=(n_boot, s.base.size))
                bs.append(s.base[idx])
                cs.append(s.cand[idx])
            continue
        if s.base.size:
            bs.append(s.base[rng.integers(0, s.base.size, size=(n_boot, s.base.size))])
        if s.cand.size:
            cs.append(s.cand[rng.integers(0, s.cand.size, size=(n_boot, s.cand.size))])
    return np.concatenate(bs, axis=1).std(axis=1), np.concatenate(cs, axis=1).std(axis=1)


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

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Measured:
    """A trial's numbers, before the verdict."""

    baseline: float | None = None
    candidate: float | None = None
    improvement: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    guard: str | None = None  # a reason to reject even when the interval is above 0


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


class FrozenPolicyTrials:
    """Runs critic trials of candidate harness updates on the frozen policy.

    Args:
        harness: the three interfaces (read only: candidates are previewed, never applied).
        recorder: the step records and the kept rollouts of the last steps.
        judge: the training judge (its verdict cache makes rubric trials cheap).
        sampler: generates with the frozen policy (None: guidance trials and probe batches are
            rejected; rubric trials and replay-only sampling trials still run).
        config: bounds and statistics.
    """

    def __init__(
        self,
        harness: Harness,
        recorder: Recorder,
        judge: RubricJudge,
        sampler: PolicySampler | None,
        config: TrialConfig | None = None,
    ):
        self.harness = harness
        self.recorder = recorder
        self.judge = judge
        self.sampler = sampler
        self.config = config or TrialConfig()

    # ------------------------------------------------------------------------------ entry point
    def run(self, update: Update, candidate_id: str, failure: Failure | None = None) -> TrialResult:
        """Measure ``update`` on the frozen policy and decide; never applies it."""
        metric = choose_metric(update, failure)
        budget = _Budget(self.config, self.judge)
        measurements: dict[str, Any] = {
            "failure_kind": failure.kind if failure else None,
            "bootstrap": self.config.bootstrap,
            "confidence": self.config.confidence,
            "seed": self.config.seed,
        }
        got = _Measured()
        reason = ""
        try:
            if isinstance(update, EditRubric):
                got = self._rubric_trial(update, metric, budget, measurements)
            elif isinstance(update, SetGuidance):
                got = self._guidance_trial(update, metric, failure, budget, measurements)
            elif isinstance(update, ReweightTasks):
                got = self._sampling_trial(update, budget, measurements)
            else:
                raise TypeError(f"not a harness update: {type(update).__name__}")
        except _Rejected as e:
            reason = e.reason
        accepted = False
        if not reason:
            if got.improvement is None or got.ci_low is None:
                reason = "nothing measurable: no improvement could be computed"
            elif got.guard:
                reason = got.guard
            elif got.ci_low > 0:
                accepted = True
                reason = (
                    f"accepted: {metric} improves by {got.improvement:.3f} ({_fmt(got.baseline)} -> "
                    f"{_fmt(got.candidate)}), {self.config.confidence:.0%} bootstrap interval "
                    f"[{got.ci_low:.3f}, {got.ci_high:.3f}] above 0"
                )
            else:
                reason = (
                    f"rejected: {metric} improvement {got.improvement:.3f} ({_fmt(got.baseline)} -> "
                    f"{_fmt(got.candidate)}) is not reliably above 0: {self.config.confidence:.0%} bootstrap "
                    f"interval [{got.ci_low:.3f}, {got.ci_high:.3f}]"
                )
        result = TrialResult(
            candidate_id=candidate_id,
            interface=update.interface,
            metric=metric,
            baseline=_r(got.baseline),
            candidate=_r(got.candidate),
            improvement=_r(got.improvement),
            ci_low=_r(got.ci_low),
            ci_high=_r(got.ci_high),
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
    def _rubric_trial(self, update: EditRubric, metric: str, budget: _Budget, m: dict[str, Any]) -> _Measured:
        task = self.harness.tasks.get(update.task_id)
        if task is None:
            raise _Rejected(f"invalid candidate: unknown task id {update.task_id!r}")
        try:
            cand_rubric = self.harness.rubrics.preview(update)
        except ValueError as e:
            raise _Rejected(f"invalid candidate: {e}") from None
        current = self.harness.rubrics.current(task.id)
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
        rng = np.random.default_rng(self.config.seed)

        if metric == GROUP_STD:
            groups = []
            for idx in _groups_by_step(rollouts):
                keep = [i for i in idx if ok[i]]
                if len(keep) >= 2:
                    groups.append([_Stratum(base[keep], cand[keep], paired=True)])
            m["n_groups"] = len(groups)
            return self._std_verdict(groups, rng, m)

        if metric == REFERENCE_MARGIN:
            if ref is None:
                raise _Rejected("task has no reference answer: the reference margin cannot be measured")
            if ref_b is None or ref_c is None:
                raise _Rejected("the judge gave no reward for the reference answer under one of the rubrics")
            if ok.sum() < 2:
                raise _Rejected("fewer than 2 cached rollouts have rewards under both rubrics")
            b, c = base[ok], cand[ok]
            idx = rng.integers(0, b.size, size=(self.config.bootstrap, b.size))
            diffs = (ref_c - np.median(c[idx], axis=1)) - (ref_b - np.median(b[idx], axis=1))
            got = _Measured(baseline=ref_b - _median(b), candidate=ref_c - _median(c))
            return self._interval(got, diffs)

        # rho_reward_<feature>
        feature = metric[len(RHO_PREFIX) :]
        if feature == "length":
            feat = _length_of(rollouts)
        else:
            fn = _feature_fn(feature)
            if fn is None:
                raise _Rejected(f"unknown surface feature {feature!r}; known: {sorted(SURFACE_FEATURES)}")
            feat = np.array([fn(r.completion) for r in rollouts], dtype=float)
        if ok.sum() < 4:
            raise _Rejected("fewer than 4 cached rollouts have rewards under both rubrics: no correlation to measure")
        b, c, f = base[ok], cand[ok], feat[ok]
        m.update(feature=feature, feature_values=_rs(f.tolist()))
        idx = rng.integers(0, b.size, size=(self.config.bootstrap, b.size))
        diffs = _row_abs_spearman(b[idx], f[idx]) - _row_abs_spearman(c[idx], f[idx])
        got = _Measured(baseline=_abs_rho(b, f), candidate=_abs_rho(c, f))
        got.improvement = got.baseline - got.candidate
        got = self._interval(got, diffs)
        if ref_c is not None:
            med_c = _median(c)
            m["reference_guard"] = {"reference_reward": _r(ref_c), "policy_median": _r(med_c), "passed": ref_c >= med_c}
            if ref_c < med_c:
                got.guard = (
                    f"rejected by the reference guard: under the candidate rubric the reference answer scores "
                    f"{ref_c:.3f}, below the policy's median {med_c:.3f} (it scored {_fmt(ref_b)} before); "
                    f"the candidate punishes good answers too ({metric} {_fmt(got.baseline)} -> {_fmt(got.candidate)})"
                )
        else:
            m["reference_guard"] = None  # no reference answer: nothing to guard
        return got

    # ------------------------------------------------------------------------------ rollout guidance
    def _guidance_trial(
        self, update: SetGuidance, metric: str, failure: Failure | None, budget: _Budget, m: dict[str, Any]
    ) -> _Measured:
        if self.sampler is None:
            raise _Rejected("no policy sampler: a guidance trial needs fresh rollouts of the frozen policy")
        targets = self._guidance_targets(update, failure)
        n = self.config.rollouts_per_arm
        cfg = self.config
        plans = []
        unchanged = []
        for task in targets:
            g = self.harness.guidance
            base_p = [g.prompt_for(task, k, n) for k in range(n)]
            cand_p = [g.prompt_for(task, k, n, overlay=update) for k in range(n)]
            t_base, t_cand = g.temperature_for(task), g.temperature_for(task, overlay=update)
            differ = [k for k in range(n) if t_base != t_cand or base_p[k][0] != cand_p[k][0]]
            if differ:
                plans.append((task, base_p, cand_p, t_base, t_cand, differ))
            else:
                unchanged.append(task.id)
            if len(plans) == (1 if update.scope == "task" else _PROBED_TASKS):
                break
        m.update(scope=update.scope, target=update.target, rollouts_per_arm=n)
        if unchanged:
            m["tasks_unchanged"] = unchanged
        if not plans:
            raise _Rejected(
                f"the candidate changes no prompt or temperature of {update.scope} {update.target!r}"
                + (f" (tasks {unchanged} keep their own rule)" if unchanged else "")
            )
        # plan within the budget: drop probed tasks rather than overrun; none fits -> budget
        fitted, used, calls = [], 0, 0
        for plan in plans:
            task, differ = plan[0], plan[5]
            gens = n + len(differ)
            judged = sum(c.check is None for c in self.harness.rubrics.current(task.id).criteria)
            if used + gens > cfg.max_rollouts or calls + gens * judged > cfg.max_judge_calls:
                break
            fitted.append(plan)
            used, calls = used + gens, calls + gens * judged
        if not fitted:
            task, differ = plans[0][0], plans[0][5]
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
        m["tasks"] = per_task
        groups: list[_Group] = []
        pooled_b: list[tuple[np.ndarray, list[str]]] = []  # (rewards, texts) of each arm, for correlations
        pooled_c: list[tuple[np.ndarray, list[str]]] = []
        per_call = 0.0
        for task, base_p, cand_p, t_base, t_cand, differ in fitted:
            budget.need_time(per_call * n, f"generating the baseline arm of task {task.id}")
            t0 = time.perf_counter()
            base_texts = self._sample([p for p, _ in base_p], t_base, budget)
            per_call = (time.perf_counter() - t0) / max(1, n)
            budget.need_time(per_call * len(differ), f"generating the candidate arm of task {task.id}")
            fresh = self._sample([cand_p[k][0] for k in differ], t_cand, budget)
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

            shared = [k for k in range(n) if k not in differ and not np.isnan(base[k])]
            d_b = [k for k in differ if not np.isnan(base[k])]
            d_c = [k for k in differ if not np.isnan(cand[k])]
            row: dict[str, Any] = {
                "task_id": task.id,
                "temperature": {"baseline": t_base, "candidate": t_cand},
                "members_changed": differ,
                "candidate_guided": [bool(cand_p[k][1]) for k in range(n)],
                "baseline_rewards": _rs(_none(base)),
                "candidate_rewards": _rs(_none(cand)),
                "examples": {
                    "baseline": [_clip(base_texts[k]) for k in differ[:2]],
                    "candidate": [_clip(cand_texts[k]) for k in differ[:2]],
                },
            }
            vb, vc = base[~np.isnan(base)], cand[~np.isnan(cand)]
            if vb.size >= 2 and vc.size >= 2:
                row.update(
                    baseline_mean=_r(vb.mean()),
                    baseline_std=_r(vb.std()),
                    candidate_mean=_r(vc.mean()),
                    candidate_std=_r(vc.std()),
                )
                groups.append(
                    [
                        _Stratum(base[shared], cand[shared], paired=True),
                        _Stratum(base[d_b], cand[d_c], paired=False),
                    ]
                )
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
            got = _Measured(baseline=_abs_rho(rb, fb), candidate=_abs_rho(rc, fc))
            got.improvement = got.baseline - got.candidate
            m["feature"] = feature
            return self._interval(got, diffs)
        return self._std_verdict(groups, rng, m)

    def _guidance_targets(self, update: SetGuidance, failure: Failure | None) -> list[Task]:
        tasks = self.harness.tasks
        if update.scope == "task":
            task = tasks.get(update.target)
            if task is None:
                raise _Rejected(f"invalid candidate: unknown task id {update.target!r}")
            return [task]
        in_domain = [t for t in tasks.values() if t.domain == update.target]
        if not in_domain:
            domains = sorted({t.domain for t in tasks.values()})
            raise _Rejected(f"invalid candidate: unknown domain {update.target!r}; known: {domains}")
        step = self._next_step()
        order: list[str] = []
        if failure is not None and failure.task_id in tasks and tasks[failure.task_id].domain == update.target:
            order.append(failure.task_id)
        for record in reversed(self.recorder.steps.values()):  # recently flat groups first
            order.extend(g.task_id for g in record.groups if g.flat and g.domain == update.target)
        active = [t.id for t in in_domain if self.harness.sampling.status_at(t.id, step) == "active"]
        order.extend(active)
        order.extend(t.id for t in in_domain)
        return [tasks[tid] for tid in dict.fromkeys(order) if tid in tasks]

    # ------------------------------------------------------------------------------ task sampling
    def _sampling_trial(self, update: ReweightTasks, budget: _Budget, m: dict[str, Any]) -> _Measured:
        sampling = self.harness.sampling
        step = self._next_step()
        try:
            q = sampling.preview(update, step)
        except ValueError as e:
            raise _Rejected(f"invalid candidate: {e}") from None
        p = sampling.probabilities(step)
        promoted = []
        for tid in update.task_ids:
            if update.action == "reweight":
                if sampling.state.status[tid] != "retired" and (
                    float(update.weight) > sampling.state.weights[tid]  # type: ignore[arg-type]
                    or sampling.status_at(tid, step) != "active"
                ):
                    promoted.append(tid)
            elif update.action == "activate" and sampling.status_at(tid, step) != "active":
                promoted.append(tid)
        m.update(step=step, action=update.action, promoted=promoted)

        replay: dict[str, list[np.ndarray]] = {}
        for record in reversed(self.recorder.steps.values()):
            for g in record.groups:
                vals = np.array([v for v in g.rewards if v is not None and v == v], dtype=float)
                rows = replay.setdefault(g.task_id, [])
                if vals.size >= 2 and len(rows) < _REPLAY_GROUPS:
                    rows.append(vals)

        # probe the promoted tasks, those with no records first, as far as the budget goes
        n = self.config.rollouts_per_arm
        stats: dict[str, tuple[str, list[np.ndarray]]] = {}
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
            g = self.harness.guidance
            prompts = [g.prompt_for(task, k, n)[0] for k in range(n)]
            budget.need_time(0.0, f"probing promoted task {tid}")
            texts = self._sample(prompts, g.temperature_for(task), budget)
            rubric = self.harness.rubrics.current(tid).criteria
            unique = list(dict.fromkeys(texts))
            reqs = [RubricRequest.for_task(task, t, rubric) for t in unique]
            budget.need_judge(len(self.judge.uncached(reqs)), f"grading the probe of task {tid}")
            graded = dict(zip(unique, self.judge.grade(reqs), strict=True))
            rewards = np.array([_nan(graded[t].reward) for t in texts])
            vals = rewards[~np.isnan(rewards)]
            probes.append({"task_id": tid, "rewards": _rs(_none(rewards)), "examples": [_clip(t) for t in texts[:2]]})
            if vals.size >= 2:
                stats[tid] = ("probe", [vals])
        for tid, rows in replay.items():
            if tid not in stats and tid in p and rows:
                stats[tid] = ("replay", rows)
        if probes:
            m["probes"] = probes

        known = [t for t in p if t in stats and (p[t] > 0 or q[t] > 0)]
        changed = [t for t in update.task_ids if t in stats]
        m["tasks"] = {
            t: {
                "p_current": _r(p[t], 5),
                "p_candidate": _r(q[t], 5),
                "source": stats[t][0],
                "groups": len(stats[t][1]),
                "std": _r(float(np.mean([v.std() for v in stats[t][1]]))),
            }
            for t in known
        }
        missing = [t for t in update.task_ids if t not in stats]
        if missing:
            m["tasks_without_stats"] = missing
        m["probability_mass_covered"] = {
            "current": _r(sum(p[t] for t in known)),
            "candidate": _r(sum(q[t] for t in known)),
        }
        if not changed:
            raise _Rejected(f"no step records or probes for the tasks this update changes ({update.task_ids})")
        pw = np.array([p[t] for t in known])
        qw = np.array([q[t] for t in known])
        if pw.sum() <= 0 or qw.sum() <= 0:
            raise _Rejected("no task with known reward stats would be sampled under one of the distributions")
        pw, qw = pw / pw.sum(), qw / qw.sum()
        s = np.array([np.mean([v.std() for v in stats[t][1]]) for t in known])
        rng = np.random.default_rng(self.config.seed)
        B = self.config.bootstrap
        draws = np.empty((B, len(known)))
        for j, t in enumerate(known):
            per_group = [_resampled_std([_Stratum(v, v, paired=True)], rng, B)[0] for v in stats[t][1]]
            draws[:, j] = np.mean(per_group, axis=0)
        diffs = draws @ (qw - pw)
        got = _Measured(baseline=float(pw @ s), candidate=float(qw @ s))
        return self._interval(got, diffs)

    # ------------------------------------------------------------------------------ shared
    def _std_verdict(self, groups: list[_Group], rng: np.random.Generator, m: dict[str, Any]) -> _Measured:
        if not groups:
            raise _Rejected("no group has 2 or more rewards under both the baseline and the candidate")
        stds_b, stds_c = [], []
        boot_b = np.zeros(self.config.bootstrap)
        boot_c = np.zeros(self.config.bootstrap)
        for group in groups:
            b, c = _group_values(group)
            stds_b.append(float(b.std()))
            stds_c.append(float(c.std()))
            db, dc = _resampled_std(group, rng, self.config.bootstrap)
            boot_b += db
            boot_c += dc
        m.update(group_std_baseline=_rs(stds_b), group_std_candidate=_rs(stds_c))
        diffs = (boot_c - boot_b) / len(groups)
        got = _Measured(baseline=float(np.mean(stds_b)), candidate=float(np.mean(stds_c)))
        return self._interval(got, diffs)

    def _interval(self, got: _Measured, diffs: np.ndarray) -> _Measured:
        if got.improvement is None and got.baseline is not None and got.candidate is not None:
            got.improvement = got.candidate - got.baseline
        c = self.config.confidence
        lo, hi = np.quantile(diffs, [(1 - c) / 2, (1 + c) / 2])
        got.ci_low, got.ci_high = float(lo), float(hi)
        return got

    def _sample(self, prompts: list[list[dict[str, str]]], temperature: float, budget: _Budget) -> list[str]:
        if budget.rollouts + len(prompts) > self.config.max_rollouts:
            raise _Rejected(
                f"budget: {len(prompts)} more rollouts would exceed max_rollouts={self.config.max_rollouts} "
                f"({budget.rollouts} generated)"
            )
        try:
            texts = self.sampler.sample(prompts, temperature, self.config.max_new_tokens)  # type: ignore[union-attr]
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


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


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
