"""Resuming a killed run: records of the steps after the checkpoint move aside (each step is recorded once),
the detectors' windows and the step records refill, a commit whose event the kill cut off is written."""

from __future__ import annotations

import json

import pytest

from harnessrl.data import Task
from harnessrl.interfaces import Harness, ReweightTasks
from harnessrl.records.checkpoints import checkpoint_step
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder
from harnessrl.trainer.resume import reconcile_commits, replay, roll_back


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


def test_replay_brings_back_the_groups_dapo_dropped(tmp_path):
    # the detectors read a step's dropped groups after its trained ones: a resumed run reads them again
    run = killed_run(tmp_path)
    dropped = group(4, "t9").model_copy(update={"trained": False})
    run.append("discarded_groups.jsonl", json.loads(dropped.model_dump_json()))
    roll_back(run, 4)
    recorder, seen = Recorder(None), []
    replay(run, recorder, lambda record, rollouts, regrade: seen.append(record), window=2)
    assert [[g.task_id for g in r.observed] for r in seen] == [["t1"], ["t1", "t9"]]
    assert seen[-1].discarded == [dropped] and recorder.graded("t9") == 1


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


def test_a_probation_revert_is_no_commit_at_resume(tmp_path):
    # a hint reverted at the end of its probation is back in the harness as <candidate>-revert, one version per rule
    # it puts back, and in the events as one revert of the candidate: resuming writes no commit for it
    run = RunDir(tmp_path)
    tasks = [Task(id=t, domain="d", prompt="p", rubric=[{"id": "c1", "text": "c", "weight": 1}]) for t in ("t1", "t2")]
    harness = Harness(tasks)
    harness.apply(ReweightTasks(task_ids=["t1"], weight=2.0), step=3, candidate_id="c2-1")
    harness.apply(ReweightTasks(task_ids=["t1"], weight=1.0), step=9, candidate_id="c2-1-revert")
    harness.apply(ReweightTasks(task_ids=["t2"], weight=1.0), step=9, candidate_id="c2-1-revert")
    run.event("commit", step=2, candidate_id="c2-1", interface="task_sampling")
    run.event("revert", step=8, candidate_id="c2-1", interface="task_sampling")
    assert reconcile_commits(run, harness) == []
    # the kill came between the revert and its event: one revert event is written, never a commit
    harness.apply(ReweightTasks(task_ids=["t1"], weight=2.0), step=12, candidate_id="c11-2")
    harness.apply(ReweightTasks(task_ids=["t1"], weight=1.0), step=15, candidate_id="c11-2-revert")
    harness.apply(ReweightTasks(task_ids=["t2"], weight=2.0), step=15, candidate_id="c11-2-revert")
    run.event("commit", step=11, candidate_id="c11-2", interface="task_sampling")
    assert reconcile_commits(run, harness) == ["c11-2-revert"]
    recovered = [(e["kind"], e["candidate_id"]) for e in run.read("events.jsonl") if e.get("recovered_at_resume")]
    assert recovered == [("revert", "c11-2")]


# --------------------------------------------------------------------------------------------- a real run, resumed


@pytest.mark.usefixtures("one_torch_thread")
def test_the_summary_of_a_resumed_run_covers_every_process(tmp_path, tiny_model_dir):
    """Once: after a resume, the summary counted the last process only (its failures, evolution points and
    trial seconds), while the accounting counters carried on."""
    from helpers import TINY_POLICY_TASKS

    from harnessrl.trainer.run import train
    from harnessrl.trainer.train_config import TrainConfig

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"), "model": str(tiny_model_dir), "device": "cpu",
            "method": "harnessrl-grpo",  # plain GRPO: DAPO's refill would spread the flat groups each step detects
            "data": {"train": str(data), "validation": None, "test": None},
            "grpo": {"num_generations": 2, "tasks_per_step": 3, "max_completion_length": 4, "max_steps": 4,
                     "save_steps": 2, "learning_rate": 1e-3},
            "eval": {"every_steps": None, "before_training": False},
            "harness": {"memory": {"enabled": False}},
            "evolver": {"every_steps": 1, "trials": {"rollouts_per_arm": 2, "max_rollouts": 4, "max_new_tokens": 4}},
        }
    )  # fmt: skip

    def killed_at_step_3(trainer, run):
        def kill(record):
            if record.step == 3:
                raise RuntimeError("killed")

        trainer.step_listeners.append(kill)

    with pytest.raises(RuntimeError, match="killed"):
        train(config, trainer_hook=killed_at_step_3)
    run = RunDir(tmp_path / "run", create=False)
    first = run.read("events.jsonl")
    summary = train(config, resume=True)
    events = run.read("events.jsonl")
    later = events[len(first) :]

    failures = {(e["step"], e["task_id"], e["failure"]) for e in events if e["kind"] == "failure"}
    assert {s for s, _, _ in failures} >= {1, 2, 3, 4}  # every step's, the first process's included
    assert sum(summary.extra.failures.values()) == len(failures)  # step 3 detected twice, counted once
    points = [e for e in events if e["kind"] == "evolution_point"]
    assert len(points) > len([e for e in later if e["kind"] == "evolution_point"])
    assert summary.extra.evolver.points == len(points)
    assert summary.extra.evolver.seconds == pytest.approx(sum(p["seconds"] for p in points))
    trials = sum(e.get("seconds", 0) for e in events if e["kind"] == "trial")
    assert summary.accounting.trial_seconds == pytest.approx(trials)
    attributed = sum(1 for e in events if e["kind"] == "attribution")
    assert (
        sum(v for k, v in summary.extra.evolver.counts().items() if k.startswith("evolver/attributed/")) == attributed
    )
    assert summary.accounting.processes == 2
    starts = [e["time"] for e in events if e["kind"] == "run_start"]
    assert summary.wall_seconds >= max(e["time"] for e in first) - starts[0]
