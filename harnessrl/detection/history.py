"""A task's rolling window as the detectors see it: each group as an :class:`Observation`, the criterion
streaks (:class:`CriterionRun`) and the re-grades (:class:`Regrade`) in a :class:`TaskHistory`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harnessrl.detection.config import DetectorConfig
from harnessrl.records.steps import GroupRecord

__all__ = ["CriterionRun", "Observation", "Regrade", "TaskHistory", "valid_values"]


def valid_values(values: Sequence[float | None]) -> list[float]:
    """The values that exist (neither None nor NaN), as floats: missing data is never a zero."""
    return [float(v) for v in values if v is not None and not math.isnan(v)]


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
