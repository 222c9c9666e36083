"""A training step's records: its graded rollouts grouped as TRL grouped them, and the metrics that describe them.

:class:`StepRecords` turns the rows the reward function just graded into :class:`~harnessrl.records.RolloutRecord`
s, groups them into :class:`~harnessrl.records.GroupRecord` s (each with its guidance and its task's reference
answer graded under the group's rubric version, cached) and computes the step's ``frac_reward_zero_std/*``,
``effective_group_ratio``, ``criteria/pass_rate/*`` and harness metrics. The trainer
(:class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`) owns one: it gathers the rollouts over processes,
keeps the record in its recorder and announces it to the step listeners.
"""

from __future__ import annotations

from collections import defaultdict

from harnessrl.data.checks import count_words
from harnessrl.detection.config import FLAT_HIGH, FLAT_LOW
from harnessrl.interfaces.harness import Harness
from harnessrl.records.steps import GroupRecord, RolloutRecord, StepRecord
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.rows import HarnessRow

__all__ = ["StepRecords"]


class StepRecords:
    """The records and metrics of the steps a trainer trains.

    Args:
        harness: the trainer's harness (tasks, guidance, rubric versions, sampling's metrics).
        rubric_reward: the reward function whose latest graded batch becomes rollout records; its judge grades
            the reference answers.
        group_size: rollouts per group (TRL's ``num_generations``).
        zero_std_eps: a group whose reward std is below this counts as flat (no learning signal).
        flat_low, flat_high: a flat group with mean below / above these is uniformly low / high (the detectors'
            own thresholds, ``harness.detectors.low`` / ``.high``: one setting for both).
    """

    def __init__(
        self,
        harness: Harness,
        rubric_reward: RubricReward,
        group_size: int,
        zero_std_eps: float = 0.02,
        flat_low: float = FLAT_LOW,
        flat_high: float = FLAT_HIGH,
    ):
        self.harness = harness
        self.rubric_reward = rubric_reward
        self.group_size = group_size
        self.zero_std_eps = zero_std_eps
        self.flat_low, self.flat_high = flat_low, flat_high
        self._reference_rewards: dict[tuple[str, int], float | None] = {}

    def rollouts(self, step: int, rows: list[HarnessRow]) -> list[RolloutRecord]:
        """This process's rollouts of ``rows``, as the reward function just graded them."""
        batch = self.rubric_reward.last
        return [
            RolloutRecord(
                step=step,
                task_id=r["task_id"],
                member=r["member"],
                guided=r["guided"],
                rubric_version=r["rubric_version"],
                temperature=r["temperature"],
                completion=text,
                length_tokens=n_tok,
                length_words=count_words(text),
                reward=res.reward,
                verdicts={v.criterion_id: v.value for v in res.verdicts},
            )
            for r, res, text, n_tok in zip(rows, batch.results, batch.texts, batch.lengths, strict=True)
        ]

    def groups(self, rollouts: list[RolloutRecord]) -> list[GroupRecord]:
        """``rollouts`` as group records. TRL's groups are consecutive runs of ``group_size`` rows (gathered in
        process order): a task drawn twice in one step (fewer eligible tasks than groups) makes two groups, never
        one merged one."""
        g_size = self.group_size
        groups = []
        for start in range(0, len(rollouts), g_size):
            rs = rollouts[start : start + g_size]
            tid = rs[0].task_id
            task = self.harness.tasks[tid]
            guidance, hinted = self.harness.hints_for(task, rs[0].rubric_version)
            groups.append(
                GroupRecord.of(
                    rs,
                    task.domain,
                    self.zero_std_eps,
                    guidance=guidance,
                    hinted=hinted,
                    reference_reward=self.reference_reward(tid, rs[0].rubric_version),
                )
            )
        return groups

    def reference_reward(self, task_id: str, rubric_version: int) -> float | None:
        """The task's reference answer graded under a rubric version (None without a reference); cached."""
        key = (task_id, rubric_version)
        if key not in self._reference_rewards:
            task = self.harness.tasks[task_id]
            reward = None
            if task.reference_answer:
                rubric = self.harness.rubrics.criteria_at(task_id, rubric_version)
                reward = self.rubric_reward.judge.grade_one(task, task.reference_answer, rubric).reward
            self._reference_rewards[key] = reward
        return self._reference_rewards[key]

    def metrics(self, record: StepRecord, judge_metrics: dict[str, float]) -> dict[str, float]:
        """The step's metrics: its flat groups as the detectors split them, the criteria's pass rates by kind, the
        guided share, the judge's and the step's timings, the harness's versions and task sampling's own."""
        values = self._flat_shares(record)
        values.update({f"criteria/pass_rate/{kind}": rate for kind, rate in self._pass_rates(record).items()})
        rollouts = max(1, sum(len(g.rewards) for g in record.groups))
        values["guided_fraction"] = sum(g.guided for g in record.groups) / rollouts
        values.update(judge_metrics)
        values.update({f"time/{k}": v for k, v in record.seconds.items()})
        values.update({f"harness/version/{name}": version for name, version in self.harness.versions.items()})
        values.update(self.harness.sampling.metrics(record.step))
        return values

    def _flat_shares(self, record: StepRecord) -> dict[str, float]:
        n = max(1, len(record.groups))
        flat = [g for g in record.groups if g.flat]
        # split as the detectors split them (harness.detectors.low / high): uniformly low, high, or in between
        low = sum(g.mean is not None and g.mean < self.flat_low for g in flat)
        high = sum(g.mean is not None and g.mean > self.flat_high for g in flat)
        return {
            # TRL's own frac_reward_zero_std counts exactly-zero std; these use harness.detectors.eps
            "frac_reward_zero_std/eps": len(flat) / n,
            "frac_reward_zero_std/all_low": low / n,
            "frac_reward_zero_std/all_high": high / n,
            "frac_reward_zero_std/mid": (len(flat) - low - high) / n,
            # the share of trained groups that give a learning signal (std >= eps; no reward: none)
            "effective_group_ratio": sum(g.std is not None and not g.flat for g in record.groups) / n,
        }

    def _pass_rates(self, record: StepRecord) -> dict[str, float]:
        """The mean pass rate of the step's criteria by kind (pitfalls apart)."""
        kinds: dict[str, list[float]] = defaultdict(list)
        for g in record.groups:
            crits = {c.id: c for c in self.harness.rubrics.criteria_at(g.task_id, g.rubric_version)}
            for cid, v in g.criterion_means.items():
                c = crits.get(cid)
                if c is None or v is None:
                    continue
                kinds["pitfall" if c.weight < 0 else c.kind].append(v)
        return {kind: sum(vals) / len(vals) for kind, vals in kinds.items()}
