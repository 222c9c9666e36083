"""Resuming a killed run: records of the steps after the checkpoint move aside (each step is recorded once),
the detectors' windows and the step records refill, a commit whose event the kill cut off is written."""

from __future__ import annotations

import json

from harnessrl.data import Task
from harnessrl.interfaces import Harness, ReweightTasks
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder
from harnessrl.trainer.resume import checkpoint_step, reconcile_commits, replay, roll_back


def group(step: int, task: str = "t1") -> GroupRecord:
    return GroupRecord(
        step=step, task_id=task, domain="d", rubric_version=0, rewards=[0.1, 0.9], mean=0.5, std=0.4,
        flat=False, lengths=[3, 4], criterion_means={"c1": 0.5},
    )  # fmt: skip


def killed_run(tmp_path) -> RunDir:
    """Seven steps recorded, a torn last metrics line, rollouts kept for steps 4 to 7."""
    run = RunDir(tmp_path)
    for step in range(1, 8):
        run.append("steps.jsonl", json.loads(group(step).model_dump_json()))
        run.append("metrics.jsonl", {"step": step, "reward": 0.5})
        (run.path / "rollouts").mkdir(exist_ok=True)
        if step >= 4:
            (run.path / "rollouts" / f"step_{step:06d}.jsonl").write_text("")
    with open(run.path / "metrics.jsonl", "a") as f:
        f.write('{"step": 8, "rew')  # the kill cut this write
    return run


def test_checkpoint_step():
    assert checkpoint_step(None) == 0 and checkpoint_step("/r/checkpoints/checkpoint-12") == 12


def test_the_steps_after_the_checkpoint_move_aside(tmp_path):
    run = killed_run(tmp_path)
    assert roll_back(run, 4) == [5, 6, 7]
    assert [r["step"] for r in run.read("steps.jsonl")] == [1, 2, 3, 4]
    assert [r["step"] for r in run.read("metrics.jsonl")] == [1, 2, 3, 4]
    aside = (run.path / "rolled_back" / "metrics.jsonl").read_text().splitlines()
    assert len(aside) == 4 and aside[-1] == '{"step": 8, "rew'  # kept, not lost
    assert sorted(p.name for p in (run.path / "rollouts").iterdir()) == ["step_000004.jsonl"]
    assert len(list((run.path / "rolled_back" / "rollouts").iterdir())) == 3
    assert roll_back(run, 4) == []  # a second resume from the same checkpoint moves nothing


def test_replay_refills_the_step_records_and_the_detectors(tmp_path):
    run = killed_run(tmp_path)
    roll_back(run, 4)
    recorder, seen = Recorder(None), []
    assert replay(run, recorder, lambda record, rollouts, regrade: seen.append((record.step, regrade)), window=3) == 3
    assert list(recorder.steps) == [2, 3, 4] and seen == [(2, False), (3, False), (4, False)]  # no judge call
    assert not (run.path / "steps.jsonl").read_text().count('"step":5')  # replay writes nothing


def test_a_commit_cut_off_before_its_event_is_written_at_resume(tmp_path):
    run = RunDir(tmp_path)
    tasks = [Task(id="t1", domain="d", prompt="p", rubric=[{"id": "c1", "text": "c", "weight": 1}])]
    harness = Harness(tasks)
    harness.apply(ReweightTasks(task_ids=["t1"], weight=2.0), step=6, candidate_id="c5-1")
    harness.apply(ReweightTasks(task_ids=["t1"], weight=3.0), step=9, candidate_id="c8-2")
    run.event("commit", step=5, candidate_id="c5-1", interface="task_sampling")
    assert reconcile_commits(run, harness) == ["c8-2"]
    (event,) = [e for e in run.read("events.jsonl") if e.get("recovered_at_resume")]
    assert (event["step"], event["applies_from_step"], event["version"]) == (8, 9, 2)
    assert reconcile_commits(run, harness) == []
