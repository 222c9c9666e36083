"""The TRL reward function: each completion graded against its task's rubric by the judge.

The reward itself (per-criterion verdicts to one scalar, missing verdicts never read as 0) is
:func:`~harnessrl.judges.rubric_judge.aggregate_reward`, computed by the judge.
"""

from __future__ import annotations

__all__ = ["RubricReward", "completion_text"]


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

        from harnessrl.judges.rubric_judge import RubricRequest

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
