"""Step records: what each task group of each step looked like, and the rollouts of the last steps.

A :class:`GroupRecord` (one task's group at one step: rewards, std, per-criterion verdicts, lengths,
guidance used, rubric version) is what the failure detectors and the training memory read; it is
appended to ``steps.jsonl`` as soon as the step is scored. Only groups the step trained on go there:
the groups DAPO's dynamic sampling generated and dropped go to ``discarded_groups.jsonl`` (``trained``
false). The rollouts themselves (completion text and verdicts) are kept for the last ``keep_steps`` steps,
in memory and under ``rollouts/``, so a critic can re-grade on-policy samples with a candidate rubric
without generating anything. What the harness reads as evidence is every group a step generated and
graded, dropped ones too (:attr:`StepRecord.observed`): they are rollouts of the same frozen policy, and a
dropped flat group is the evidence of where the rewards stop teaching (docs/design.md §4, "What the
harness reads").
"""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field

from harnessrl.records.run_dir import open_append, read_jsonl_models

__all__ = [
    "GroupRecord",
    "Recorder",
    "RolloutRecord",
    "StepRecord",
    "criterion_means",
    "group_stats",
    "read_group_records",
    "rollout_file",
    "rollout_files",
]


class RolloutRecord(BaseModel):
    """One completion: its text, length, verdicts and reward, and how it was produced."""

    step: int
    task_id: str
    member: int
    guided: bool
    rubric_version: int
    temperature: float
    completion: str
    length_tokens: int
    length_words: int
    reward: float | None
    verdicts: dict[str, float | None]
    trained: bool = Field(
        default=True, description="False: generated, graded and dropped before the update (DAPO's dynamic sampling)."
    )


class GroupRecord(BaseModel):
    """One task's group at one step: one line of ``steps.jsonl`` (or ``discarded_groups.jsonl``), written whole by
    the :class:`Recorder` and read back by every reader of the run
    (:attr:`~harnessrl.records.run_record.RunRecord.groups`). The recorder sets every field; the defaults are what
    a line that lacks one reads as."""

    step: int
    task_id: str
    domain: str = Field("", description="The task's domain ('': a line that does not name one).")
    rubric_version: int = 0
    guidance: str | None = None
    guided: int = 0
    temperature: float = 1.0
    rewards: list[float | None] = Field(default_factory=list)
    mean: float | None = None
    std: float | None = None
    flat: bool = Field(False, description="std below harness.detectors.eps: the group teaches nothing")
    lengths: list[int] = Field(default_factory=list)
    criterion_means: dict[str, float | None] = Field(default_factory=dict)
    hinted: list[str] = Field(
        default_factory=list,
        description="The criteria the rubric stated as a hint to the guided members (an edit with guide_fraction).",
    )
    plain_criterion_means: dict[str, float | None] = Field(
        default_factory=dict, description="The criterion means over the unguided members, in a guided group."
    )
    missing: int = 0
    reference_reward: float | None = None
    trained: bool = Field(
        default=True, description="False: generated, graded and dropped before the update (DAPO's dynamic sampling)."
    )

    @classmethod
    def of(
        cls,
        rollouts: Sequence[RolloutRecord],
        domain: str,
        flat_eps: float,
        guidance: str | None = None,
        hinted: Sequence[str] = (),
        reference_reward: float | None = None,
    ) -> GroupRecord:
        """The record of one group from its rollouts (one task, one step, in member order): ``guidance`` the hint its
        guided members saw, ``hinted`` the criteria the rubric stated in it; both dropped when no member was
        guided."""
        first = rollouts[0]
        mean, std = group_stats([r.reward for r in rollouts])
        guided = sum(r.guided for r in rollouts)
        return cls(
            step=first.step,
            task_id=first.task_id,
            domain=domain,
            rubric_version=first.rubric_version,
            guidance=guidance if guided else None,
            guided=guided,
            temperature=first.temperature,
            rewards=[r.reward for r in rollouts],
            mean=mean,
            std=std,
            flat=std is not None and std < flat_eps,
            lengths=[r.length_tokens for r in rollouts],
            criterion_means=criterion_means(rollouts),
            hinted=list(hinted) if guided else [],
            plain_criterion_means=criterion_means([r for r in rollouts if not r.guided]) if guided else {},
            missing=sum(v is None for r in rollouts for v in r.verdicts.values()),
            reference_reward=reference_reward,
            trained=first.trained,
        )

    def summary(self) -> str:
        """A one-line text description (what the memory embeds)."""
        flat = " flat" if self.flat else ""
        mean = "n/a" if self.mean is None else f"{self.mean:.2f}"
        std = "n/a" if self.std is None else f"{self.std:.2f}"
        return (
            f"step {self.step} task {self.task_id} ({self.domain}) rubric v{self.rubric_version}: "
            f"reward mean {mean} std {std}{flat}, mean length {np.mean(self.lengths):.0f} tokens"
            + (f", {self.guided} guided" if self.guided else "")
            + ("" if self.trained else ", dropped before the update")
        )


class StepRecord(BaseModel):
    step: int
    groups: list[GroupRecord] = Field(description="The groups the step trained on.")
    discarded: list[GroupRecord] = Field(
        default_factory=list, description="Groups generated and dropped (DAPO's dynamic sampling)."
    )
    seconds: dict[str, float] = Field(default_factory=dict)

    @property
    def observed(self) -> list[GroupRecord]:
        """Every group the step generated and graded: the trained ones, then the dropped ones. The harness's
        evidence (detectors, memory, the critic's kept rollouts, probation and outcomes) is all of them."""
        return [*self.groups, *self.discarded]


def criterion_means(rollouts: Sequence[RolloutRecord]) -> dict[str, float | None]:
    """Each criterion's mean verdict over ``rollouts`` (None: no verdict of it)."""
    means: dict[str, float | None] = {}
    for cid in dict.fromkeys(c for r in rollouts for c in r.verdicts):
        vals = [v for r in rollouts if (v := r.verdicts.get(cid)) is not None]
        means[cid] = sum(vals) / len(vals) if vals else None
    return means


def group_stats(rewards: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and population std of the rewards that exist (None: dropped rollouts)."""
    vals = [r for r in rewards if r is not None and not math.isnan(r)]
    if not vals:
        return None, None
    return float(np.mean(vals)), float(np.std(vals))


def rollout_file(run_dir: Path, step: int) -> Path:
    """Where a step's kept rollouts are: ``rollouts/step_<step, six digits>.jsonl``."""
    return run_dir / "rollouts" / f"step_{step:06d}.jsonl"


def rollout_files(run_dir: Path) -> list[tuple[int, Path]]:
    """Every step's kept rollouts file under ``run_dir``, by step."""
    return sorted((int(p.stem.split("_")[1]), p) for p in (run_dir / "rollouts").glob("step_*.jsonl"))


def read_group_records(path: str | Path) -> dict[int, list[GroupRecord]]:
    """The group records of a ``steps.jsonl``-shaped file (``steps.jsonl``, ``discarded_groups.jsonl``), by step; a
    torn or unreadable line is passed over with a warning, a missing file has none."""
    by_step: dict[int, list[GroupRecord]] = defaultdict(list)
    for group in read_jsonl_models(path, GroupRecord):
        by_step[group.step].append(group)
    return by_step


class Recorder:
    """Keeps step records; writes ``steps.jsonl`` and the last steps' rollouts under the run directory."""

    def __init__(self, run_dir: str | Path | None, keep_steps: int = 4):
        self.run_dir = Path(run_dir) if run_dir else None
        self.keep_steps = keep_steps
        self.steps: OrderedDict[int, StepRecord] = OrderedDict()
        self.rollouts: OrderedDict[int, list[RolloutRecord]] = OrderedDict()
        self._graded: Counter[str] = Counter()  # groups per task, every step recorded (steps keeps the last 1000)
        if self.run_dir:
            (self.run_dir / "rollouts").mkdir(parents=True, exist_ok=True)

    def attach(self, run_dir: str | Path) -> None:
        """Write from now on under ``run_dir`` (a recorder made without one kept its records in memory only)."""
        self.run_dir = Path(run_dir)
        (self.run_dir / "rollouts").mkdir(parents=True, exist_ok=True)

    def restore(self, step: StepRecord) -> None:
        """Hold a step record read back from the run directory (nothing is written); a step recorded again
        replaces its earlier record."""
        old = self.steps.get(step.step)
        if old is not None:
            self._graded.subtract(g.task_id for g in old.observed)
        self.steps[step.step] = step
        self._graded.update(g.task_id for g in step.observed)

    def graded(self, task_id: str) -> int:
        """How many groups of ``task_id`` were graded so far (trained or dropped: :attr:`StepRecord.observed`): a
        count that only grows, unlike :attr:`steps` (the last 1000 steps) and the kept rollouts (the last
        ``keep_steps``)."""
        return self._graded[task_id]

    def add(self, step: StepRecord, rollouts: list[RolloutRecord]) -> None:
        """Keep a step's record and its rollouts: those of :attr:`StepRecord.observed`, in its order (the dropped
        ones, ``trained`` false, after the trained ones), so a trial re-grades every group the step graded."""
        self.restore(step)
        self.rollouts[step.step] = rollouts
        while len(self.rollouts) > self.keep_steps:
            old, _ = self.rollouts.popitem(last=False)
            if self.run_dir:
                rollout_file(self.run_dir, old).unlink(missing_ok=True)
        while len(self.steps) > 1000:
            self.steps.popitem(last=False)
        if self.run_dir:
            with open_append(self.run_dir / "steps.jsonl") as f:
                for g in step.groups:
                    f.write(g.model_dump_json() + "\n")
            if step.discarded:
                with open_append(self.run_dir / "discarded_groups.jsonl") as f:
                    for g in step.discarded:
                        f.write(g.model_dump_json() + "\n")
            path = rollout_file(self.run_dir, step.step)
            with open(path, "w", encoding="utf-8") as f:
                for r in rollouts:
                    f.write(r.model_dump_json() + "\n")

    def latest_rollouts(self, task_id: str | None = None, steps: int | None = None) -> list[RolloutRecord]:
        """Rollouts of the last ``steps`` kept steps (all kept by default), optionally of one task."""
        keys = list(self.rollouts)[-(steps or len(self.rollouts)) :]
        return [r for k in keys for r in self.rollouts[k] if task_id is None or r.task_id == task_id]

    def load_rollouts(self) -> None:
        """Reload the kept rollouts from the run directory (after a restart)."""
        if not self.run_dir:
            return
        for step, path in rollout_files(self.run_dir)[-self.keep_steps :]:
            rows = []
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    rows.append(RolloutRecord.model_validate(json.loads(line)))
                except ValueError:
                    break  # a torn last line from a killed write: keep what is whole
            self.rollouts[step] = rows
