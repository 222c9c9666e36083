"""Helpers shared by the critic's tests (importable: pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import numpy as np

from harnessrl.interfaces import Harness
from harnessrl.judges import RubricJudge, RubricRequest
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord, group_stats


def record_group(
    harness: Harness, judge: RubricJudge, recorder: Recorder, step: int, task_id: str, texts: list[str]
) -> list[RolloutRecord]:
    """Grade ``texts`` as one group of ``task_id`` at ``step`` and record it, as the trainer does (which also
    warms the judge's cache the way training does)."""
    task = harness.tasks[task_id]
    rubric = harness.rubrics.current(task_id)
    results = judge.grade([RubricRequest.for_task(task, t, rubric.criteria) for t in texts])
    rollouts = [
        RolloutRecord(
            step=step,
            task_id=task_id,
            member=k,
            guided=False,
            rubric_version=rubric.version,
            temperature=1.0,
            completion=t,
            length_tokens=len(t.split()),
            length_words=len(t.split()),
            reward=res.reward,
            verdicts={v.criterion_id: v.value for v in res.verdicts},
        )
        for k, (t, res) in enumerate(zip(texts, results, strict=True))
    ]
    mean, std = group_stats([r.reward for r in rollouts])
    means = {}
    for cid in rollouts[0].verdicts:
        vals = [r.verdicts[cid] for r in rollouts if r.verdicts.get(cid) is not None]
        means[cid] = float(np.mean(vals)) if vals else None
    group = GroupRecord(
        step=step,
        task_id=task_id,
        domain=task.domain,
        rubric_version=rubric.version,
        rewards=[r.reward for r in rollouts],
        mean=mean,
        std=std,
        flat=std is not None and std < 0.02,
        lengths=[r.length_tokens for r in rollouts],
        criterion_means=means,
    )
    prev = recorder.steps.get(step)
    recorder.add(
        StepRecord(step=step, groups=[*(prev.groups if prev else []), group]),
        [*recorder.rollouts.get(step, []), *rollouts],
    )
    return rollouts


WORD_CHECKS = {
    "at least one word": {"type": "word_count", "min": 1},
    "at most five words": {"type": "word_count", "max": 5},
}


def task_row(
    tid: str, domain: str, prompt: str, reference: str, judged: str, words: str = "at least one word", **extra
) -> dict:
    """A task as a data row: a judged criterion (weight 2) and a programmatic word-count check (weight 1)."""
    check = WORD_CHECKS[words]
    return {
        "id": tid,
        "domain": domain,
        "prompt": prompt,
        "reference_answer": reference,
        "rubric": [
            {"id": "c1", "text": judged, "weight": 2},
            {"id": "c2", "text": f"Writes {words}", "weight": 1, "check": check},
        ],
        **extra,
    }
