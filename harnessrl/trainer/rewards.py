"""The TRL reward function: each completion graded against its task's rubric by the judge.

The reward itself (per-criterion verdicts to one scalar, missing verdicts never read as 0) is
:func:`~harnessrl.judges.rubric_judge.aggregate_reward`, computed by the judge.

A *missing* reward (the judge could not give enough verdicts) goes to TRL as ``None``, not as a number
standing in for it. TRL (>= 1.16, which ``pyproject.toml`` requires) marks a row for which every reward
function returned ``None`` as unscorable: it is left out of its group's mean and std, and its advantage
is 0, so the other members' advantages are exactly those of the rewards that exist. A stand-in value,
even the group's mean, would shrink the group's std and inflate the others' advantages. The trainer
then takes the missing rows out of the loss altogether (:attr:`ScoredBatch.missing`).
"""

from __future__ import annotations

__all__ = ["RubricReward", "ScoredBatch", "completion_text"]


def completion_text(completion: str | list[dict]) -> str:
    """The text of a TRL completion (a string, or a conversational list of messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role", "assistant") == "assistant")


class ScoredBatch(list):
    """What the reward function returns: the rewards (a list of floats or None, TRL's contract) with the
    batch they score, typed: each completion's text, its length in tokens and the judge's
    :class:`~harnessrl.judges.rubric_judge.GradeResult` (verdicts, missing values)."""

    def __init__(self, results: list, texts: list[str], lengths: list[int]):
        super().__init__(r.reward for r in results)
        self.results, self.texts, self.lengths = results, texts, lengths

    @property
    def missing(self) -> list[bool]:
        """Per row: the judge gave no reward (``None``), so the row must not be trained on."""
        return [r is None for r in self]


class RubricReward:
    """The TRL reward function: grades each completion against its task's rubric *at the version the
    rollout was made with* (the ``rubric_version`` column), with the unguided prompt as the context.

    It returns a :class:`ScoredBatch`. TRL keeps only the floats of what a reward function returns, so
    the trainer reads the same batch back from :attr:`last` for its step records.
    """

    __name__ = "rubric"

    def __init__(self, judge, harness):
        self.judge = judge
        self.harness = harness
        self.last = ScoredBatch([], [], [])
        self.seconds = 0.0

    def __call__(self, prompts, completions, task_id, rubric_version, completion_ids=None, **kwargs) -> ScoredBatch:
        import time

        from harnessrl.judges.rubric_judge import RubricRequest

        texts = [completion_text(c) for c in completions]
        lengths = [len(ids) for ids in completion_ids] if completion_ids is not None else [0] * len(texts)
        reqs = []
        for tid, version, text in zip(task_id, rubric_version, texts, strict=True):
            task = self.harness.tasks[tid]
            rubric = self.harness.rubrics.criteria_at(tid, int(version))
            reqs.append(RubricRequest.for_task(task, text, rubric))
        t0 = time.perf_counter()
        results = self.judge.grade(reqs)
        self.seconds += time.perf_counter() - t0
        self.last = ScoredBatch(results, texts, lengths)
        return self.last
