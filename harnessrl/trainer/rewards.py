"""Reward aggregation: per-criterion verdicts to one scalar, exactly as DESIGN.md §4 defines it.

    reward = (Σ_{w>0} w·v − Σ_{w<0} |w|·v) / Σ_{w>0} w,   clipped to [0, 1]

A *missing* verdict (``None``: the judge could not produce one) is never read as 0. The sums run over
the criteria that have a verdict; when the positive weight left is below ``min_coverage`` of the
rubric's positive weight, the reward itself is ``None`` and the rollout drops out of its group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harnessrl.data.schema import Criterion

__all__ = ["RubricReward", "aggregate_reward", "completion_text"]


def aggregate_reward(
    rubric: Sequence[Criterion],
    verdicts: Mapping[str, float | None],
    min_coverage: float = 0.5,
) -> float | None:
    """Combine verdicts (criterion id -> value in [0, 1], or None when missing) into a reward.

    Args:
        rubric: the criteria the verdicts answer (pitfalls have negative weights).
        verdicts: one value per criterion id; an absent id counts as missing.
        min_coverage: share of the rubric's positive weight that must have verdicts.

    Returns:
        The reward in [0, 1], or None when too few positive criteria have a verdict.
    """
    total_pos = sum(c.weight for c in rubric if c.weight > 0)
    if total_pos <= 0:
        raise ValueError("rubric has no positive weight: the reward is undefined")
    gained = lost = covered = 0.0
    for c in rubric:
        v = verdicts.get(c.id)
        if v is None or v != v:  # missing (None, or a NaN that slipped through) is never read as 0
            continue
        v = min(1.0, max(0.0, float(v)))
        if c.weight > 0:
            gained += c.weight * v
            covered += c.weight
        else:
            lost += -c.weight * v
    if covered <= 0 or covered / total_pos < min_coverage:
        return None
    return min(1.0, max(0.0, (gained - lost) / covered))


def completion_text(completion: str | list[dict]) -> str:
    """The text of a TRL completion (a string, or a conversational list of messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")


class RubricReward:
    """The TRL reward function: grades each completion against its task's rubric *at the version the
    rollout was made with* (the ``rubric_version`` column), with the unguided prompt as the context.

    The grade results of the last call stay in ``last`` for the trainer's step records.
    """

    __name__ = "rubric"

    def __init__(self, judge, harness):
        self.judge = judge
        self.harness = harness
        self.last: list = []
        self.last_texts: list[str] = []
        self.last_lengths: list[int] = []
        self.seconds = 0.0

    def __call__(
        self, prompts, completions, task_id, rubric_version, completion_ids=None, **kwargs
    ) -> list[float | None]:
        import time

        from harnessrl.trainer.judges.base import RubricRequest

        reqs = []
        self.last_texts = [completion_text(c) for c in completions]
        n = len(self.last_texts)
        self.last_lengths = [len(ids) for ids in completion_ids] if completion_ids is not None else [0] * n
        for tid, version, text in zip(task_id, rubric_version, self.last_texts, strict=True):
            task = self.harness.tasks[tid]
            rubric = self.harness.rubrics.versions[tid][int(version)].criteria
            reqs.append(RubricRequest.for_task(task, text, rubric))
        t0 = time.perf_counter()
        self.last = self.judge.grade(reqs)
        self.seconds += time.perf_counter() - t0
        return [r.reward for r in self.last]
