"""benchmarks/detector_pooling.py: the length test replayed on a run's trained groups, per task and pooled."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import pytest
from helpers import load_script

from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord
from harnessrl.trainer.train_config import TrainConfig

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "detector_pooling.py"
CAP = 64


@pytest.fixture(scope="module")
def pooling():
    return load_script(SCRIPT)


def _suite(root: Path) -> Path:
    """Two judged tasks (no check: a judge pays what it pays) and one checked task."""
    data = root / "suite"
    data.mkdir()
    rows = [
        {"id": "wordy-1", "rubric": [{"id": "a", "text": "explains"}], "metadata": {"family": "wordy"}},
        {"id": "wordy-2", "rubric": [{"id": "a", "text": "explains"}], "metadata": {"family": "wordy"}},
        {
            "id": "plain-1",
            "rubric": [{"id": "w", "text": "uses x", "check": {"type": "contains", "phrases": ["x"]}}],
            "metadata": {"family": "plain"},
        },
    ]
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data


def _run(root: Path, groups: list[GroupRecord]) -> Path:
    run = RunDir(root / "fixed" / "seed0")
    run.write_config(TrainConfig.model_validate({"run_dir": str(run.path), "grpo": {"max_completion_length": CAP}}))
    for g in groups:
        run.append("steps.jsonl", g.model_dump(mode="json"))
    return run.path


def _group(step: int, task: str, rewards: list[float], lengths: list[int]) -> GroupRecord:
    return GroupRecord(step=step, task_id=task, rewards=rewards, lengths=lengths, mean=sum(rewards) / len(rewards))


def _args(**kw) -> Namespace:
    return Namespace(**{"window": 4, "pool_window": 12, "min_points": 8, "threshold": 0.6, "max_p": 0.05, **kw})


def test_a_reward_that_tracks_length_fires_per_task_and_pooled_and_a_flat_one_does_not(pooling, tmp_path):
    paying = [0.1, 0.4, 0.7, 0.9]
    groups = []
    for step in range(1, 7):
        task = "wordy-1" if step % 2 else "wordy-2"
        groups.append(_group(step, task, paying, [10, 20, 30, 40]))
        groups.append(_group(step, "plain-1", [0.5, 0.2, 0.9, 0.5], [30, 10, 20, 40]))
    run = _run(tmp_path, groups)
    fired = pooling.replay(run, pooling._tasks(_suite(tmp_path)), _args())
    # a task's own window needs two of its groups (8 points): wordy-1's second comes at step 3
    assert min(fired["task, raw"]["wordy"]) == 3
    # pooled across the judged tasks, the second group of the family is enough (step 2)
    assert min(fired["judged, centred"]["wordy"]) == 2
    assert "plain" not in fired["judged, centred"]  # a checked task is never in the judged pool
    assert "plain" not in fired["task, raw"]


def test_visibility_counts_groups_whose_every_rollout_hit_the_cap(pooling, tmp_path):
    groups = [
        _group(1, "wordy-1", [0.2, 0.4, 0.6, 0.8], [CAP] * 4),  # tied at the cap: no ranking
        _group(2, "wordy-1", [0.2, 0.4, 0.6, 0.8], [10, 20, 30, CAP]),
        _group(2, "plain-1", [0.9, 0.6, 0.3, 0.1], [10, 20, 30, 40]),
    ]
    run = _run(tmp_path, groups)
    seen = pooling.visibility([run], pooling._tasks(_suite(tmp_path)))
    assert seen["wordy"] == (2, 1, 1.0)
    assert seen["plain"] == (1, 0, -1.0)
