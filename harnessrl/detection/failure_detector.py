"""The failure detector: keeps each task's rolling window and runs the detectors on every step's groups.

:class:`FailureDetector` is what the step monitor (:mod:`harnessrl.detection.monitor`) and the trainer
call; the detectors it runs are in :mod:`harnessrl.detection.detectors`, the thresholds in
:mod:`harnessrl.detection.config`, the surface features in :mod:`harnessrl.detection.features`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.detectors import (
    CriterionStreakDetector,
    Detector,
    JudgeDisagreementDetector,
    NonDiscriminativeDetector,
    ReferenceBelowPolicyDetector,
    ScaffoldOutgrownDetector,
    SpuriousCorrelationDetector,
)
from harnessrl.detection.features import SURFACE_FEATURES
from harnessrl.detection.history import Observation, Regrade, TaskHistory, valid_values
from harnessrl.records.failures import FAILURE_KINDS, Failure
from harnessrl.records.steps import GroupRecord, RolloutRecord, StepRecord, group_stats

__all__ = ["FailureDetector", "RegradeFn"]

logger = logging.getLogger(__name__)

RegradeFn = Callable[[list[RolloutRecord]], Sequence[Any]]


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
            rubric_for=lambda t, v: harness.rubrics.criteria_at(t, v),
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
        groups = record.observed  # DAPO's dropped groups too: the same policy's rollouts, flat ones included
        per_group = self._match_rollouts(groups, rollouts)
        touched: dict[str, TaskHistory] = {}
        seen: dict[str, tuple[float, ...]] = {}
        for group, rs in zip(groups, per_group, strict=True):
            hist = self.histories.get(group.task_id)
            if hist is None:
                hist = self.histories[group.task_id] = TaskHistory(group.task_id, group.domain, self.config)
            hist.append(self._observation(step, group, rs, seen))
            touched[group.task_id] = hist
        self._expire(step, touched)
        spent = 0.0
        if regrade and self.regrade is not None and self.config.regrade_every and step % self.config.regrade_every == 0:
            spent = self._run_regrade(step, groups, per_group)
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
        valid = valid_values(group.rewards)
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
