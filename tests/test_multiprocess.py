"""Two processes, one harness.

- A real two-process training run on the CPU (``torchrun --nproc_per_node 2 -m harnessrl.cli train``:
  accelerate picks torch.distributed over gloo, MULTI_CPU) of a tiny random policy with the rule-based
  evolver: every rank records the harness versions it trained each step with (``ranks/rank<k>.jsonl``),
  and they agree at every step, before and after a commit. (``accelerate launch --cpu --num_processes 2``
  starts one process only on this machine: accelerate's launcher needs a multi-CPU config for that;
  torchrun sets the same environment variables accelerate reads.)
- ``sync_harness`` over gloo between two spawned processes, with commits between steps on the main one:
  versions, drawn tasks, prompts and rubrics identical at every step.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from harnessrl.data import Task
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks, SetGuidance
from harnessrl.records.run_dir import RunDir
from harnessrl.trainer.harness_sync import SyncMark, sync_harness

TASKS = [
    Task(id=f"t{i}", domain="d", prompt=f"Question {i}?", rubric=[{"id": "c1", "text": "Answers", "weight": 1}])
    for i in range(6)
]
COMMITS = {  # step -> the update the main process commits after it (applies from the next step)
    2: ReweightTasks(task_ids=["t0"], action="park", park_steps=50),
    3: SetGuidance(target="t1", text="Name the answer first.", fraction=0.5),
    5: EditRubric(task_id="t2", add=[{"id": "c2", "text": "Gives a reason", "weight": 1}]),
}
STEPS = 7


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        harness, last, rows = Harness(TASKS, seed=3), SyncMark(), []
        for step in range(1, STEPS + 1):
            sync_harness(harness, rank == 0, lambda objs: dist.broadcast_object_list(objs, src=0), last)
            drawn = harness.sampling.sample(2, step)  # every process draws the step's tasks itself
            prompts = [harness.row(harness.tasks[t], 0, 4).messages[-1]["content"] for t in drawn]
            rubrics = [len(harness.rubrics.current(t).criteria) for t in drawn]
            rows.append({"step": step, "versions": harness.versions, "drawn": drawn, "prompts": prompts,
                         "rubrics": rubrics, "digest": last.digest})  # fmt: skip
            if rank == 0 and step in COMMITS:  # the evolver commits on the main process only
                harness.apply(COMMITS[step], step=step + 1, candidate_id=f"c{step}")
        with open(f"{out}/rank{rank}.json", "w") as f:
            json.dump(rows, f)
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_apply_the_same_harness_at_the_same_step(tmp_path):
    mp.spawn(_rank, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    main, other = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert main == other  # versions, drawn tasks, prompts and rubrics: identical at every step
    versions = [r["versions"] for r in main]
    assert versions[0]["task_sampling"] == 0 and versions[2]["task_sampling"] == 1  # applied from step 3
    assert versions[3]["rollout_guidance"] == 1 and versions[5]["rubric_criteria"] == 1
    assert all("t0" not in r["drawn"] for r in main[2:])  # parked from step 3 on, on both processes
    print([(r["step"], r["versions"]) for r in main])


def test_without_the_broadcast_the_other_process_would_drift():
    """What the sync prevents: the main process commits, the other keeps its own harness."""
    main, other = Harness(TASKS, seed=3), Harness(TASKS, seed=3)
    main.apply(COMMITS[2], step=3, candidate_id="c2")
    assert main.sampling.sample(2, 3) != other.sampling.sample(2, 3) or main.versions != other.versions
    sent: list = []
    sync_harness(main, True, lambda objs: sent.append(list(objs)), SyncMark())
    replaced = sync_harness(other, False, lambda objs: objs.__setitem__(0, sent[0][0]), SyncMark())
    assert replaced and other.to_dict() == main.to_dict()
    assert [main.sampling.sample(2, s) for s in range(3, 9)] == [other.sampling.sample(2, s) for s in range(3, 9)]


@pytest.mark.slow
def test_a_two_process_training_run_agrees_on_the_harness_at_every_step(tmp_path, tiny_model_dir):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml
    from helpers import TINY_POLICY_TASKS

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    run_path = tmp_path / "run"
    config = {
        "run_dir": str(run_path), "model": str(tiny_model_dir), "device": "cpu",
        "method": "harnessrl-grpo",  # the harness over DAPO's refill runs on one process only
        "data": {"train": str(data), "validation": None, "test": None},
        "grpo": {"num_generations": 4, "tasks_per_step": 2, "max_completion_length": 8, "max_steps": 8,
                 "save_steps": 8, "learning_rate": 1e-3},
        "eval": {"every_steps": None, "before_training": False},
        "harness": {"memory": {"enabled": False}},
        # trials unbounded over the run: in 8 steps the run's share never pays a guidance trial (it waits, pending),
        # and this test needs a commit for the processes to agree on
        "evolver": {"every_steps": 3,
                    "trials": {"rollouts_per_arm": 4, "max_new_tokens": 8, "max_rollout_share": None,
                               "guidance_trial": "arms"}},
    }  # fmt: skip
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    torchrun = Path(sys.executable).parent / "torchrun"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run(
        [str(torchrun), "--nproc_per_node", "2", "-m", "harnessrl.cli", "train", "--config", str(cfg)],
        cwd=root, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    ranks = [
        [json.loads(line) for line in (run_path / "ranks" / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    ]
    assert [row["step"] for row in ranks[0]] == [row["step"] for row in ranks[1]] == list(range(1, 9))
    for a, b in zip(*ranks, strict=True):
        assert (a["versions"], a["digest"]) == (b["versions"], b["digest"]), (a, b)
    commits = [e for e in RunDir(run_path, create=False).read("events.jsonl") if e["kind"] == "commit"]
    assert commits, "the run committed no update: nothing to agree on"
    first = commits[0]["applies_from_step"]
    changed = [row["step"] for row in ranks[1] if sum(row["versions"].values()) > 0]
    assert changed[0] == first  # the other rank applied the commit at the step it applies from
    print([(row["step"], row["versions"]) for row in ranks[1]])


def _two_process_run(
    tmp_path, tiny_model_dir, config_updates: dict, processes: int = 2, launcher: str | None = None, fails: bool = False
):
    """``harnessrl train`` of the tiny policy on ``processes`` CPU processes (torchrun: gloo, MULTI_CPU; one:
    no torchrun), or through ``launcher`` (a script run by torchrun in its place); returns the run directory
    (``fails``: the run must end with an error; returns its stderr)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import yaml
    from helpers import TINY_POLICY_TASKS

    root = Path(__file__).resolve().parents[1]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    held_out = tmp_path / "validation.jsonl"
    held_out.write_text("".join(json.dumps({**t, "id": f"v-{t['id']}"}) + "\n" for t in TINY_POLICY_TASKS))
    run_path = tmp_path / f"run{processes}"
    config = {
        "run_dir": str(run_path), "model": str(tiny_model_dir), "device": "cpu",
        "method": "harnessrl-grpo",  # the harness over DAPO's refill runs on one process only
        "data": {"train": str(data), "validation": str(held_out), "test": None},
        "grpo": {"num_generations": 4, "tasks_per_step": 2, "max_completion_length": 8, "max_steps": 6,
                 "save_steps": 6, "learning_rate": 1e-3},
        "harness": {"memory": {"enabled": False}},
        **{k: v for k, v in config_updates.items() if k != "grpo"},
    }  # fmt: skip
    config["grpo"].update(config_updates.get("grpo", {}))
    cfg = tmp_path / f"config{processes}.yaml"
    cfg.write_text(yaml.safe_dump(config))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--nproc_per_node", str(processes)]
    if launcher is not None:
        launch = [*torchrun, launcher]
    elif processes > 1:
        launch = [*torchrun, "-m", "harnessrl.cli"]
    else:
        launch = [sys.executable, "-m", "harnessrl.cli"]
    env["HARNESSRL_FSDP_REPORT"] = str(tmp_path / "fsdp.json")
    out = subprocess.run(
        [*launch, "train", "--config", str(cfg)],
        cwd=root, env=env, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    if fails:
        assert out.returncode != 0, out.stdout[-3000:]
        return out.stderr
    assert out.returncode == 0, out.stderr[-3000:]
    return run_path


@pytest.mark.slow
def test_the_default_harness_over_dapo_refuses_several_processes_and_says_what_runs_there(tmp_path, tiny_model_dir):
    # DAPO's refill regroups rows across rounds on one process: the default method names the one that runs on two
    stderr = _two_process_run(tmp_path, tiny_model_dir, {"method": "harnessrl", "grpo": {"max_steps": 1}}, fails=True)
    said = " ".join(stderr.split())  # the console wraps the message at its width
    assert "runs on one process only, and this run has 2" in said and "'harnessrl-grpo'" in said


SHARED_RUN = {
    "eval": {"every_steps": None, "before_training": True, "completions": 2, "batch_size": 1, "max_new_tokens": 8,
             "seed": 5},
    "evolver": {"every_steps": 2, "trials": {"rollouts_per_arm": 4, "max_new_tokens": 8, "max_rollout_share": None,
                                             "guidance_trial": "arms"}},
}  # fmt: skip
"""An evaluation before training in 3 batches (2 completions of 3 tasks, 2 a batch), trials that generate (hints
measured on fresh arms)."""


def _assert_shared_run(run_path, policy) -> list[dict]:
    """Both processes hold the same trial results and versions at every boundary and step, a trial generated,
    an update was committed, and the evaluation before training scored what one process scores on the same
    draws (``harnessrl eval`` of the untrained policy). Returns the trials."""
    from harnessrl.trainer.run import evaluate_run

    points = [
        [json.loads(line) for line in (run_path / "ranks" / f"rank{r}.points.jsonl").read_text().splitlines()]
        for r in (0, 1)
    ]
    assert len(points[0]) == len(points[1]) > 0
    for a, b in zip(*points, strict=True):
        assert {**a, "rank": 1} == b  # the same trials (every number), versions and harness digest
    trials = [t for row in points[0] for t in row["trials"]]
    assert any(t["cost"]["rollouts"] > 0 for t in trials), "no trial generated: the collective sampler was not used"
    events = RunDir(run_path, create=False).read("events.jsonl")
    assert [e for e in events if e["kind"] == "commit"], "the run committed no update"
    ranks = [
        [json.loads(line) for line in (run_path / "ranks" / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)
    ]
    assert [(a["versions"], a["digest"]) for a in ranks[0]] == [(b["versions"], b["digest"]) for b in ranks[1]]
    two = next(e for e in RunDir(run_path, create=False).read("eval.jsonl") if e["step"] == 0)
    alone = evaluate_run(run_path, str(policy))["results"]["validation"]
    assert (two["overall"], two["per_task"]) == (alone.overall, alone.per_task)
    assert [s["response"] for s in two["samples"]] == [s["response"] for s in alone.samples]
    print(
        {"eval": two["overall"], "versions": points[0][-1]["versions"], "trials": [
            (t["candidate_id"], t["metric"], t["baseline"], t["candidate"], t["verdict_kind"], t["cost"]["rollouts"])
            for t in trials]},
    )  # fmt: skip
    return trials


@pytest.mark.slow
def test_two_fsdp2_processes_generate_the_trials_and_the_evaluation_together(tmp_path, tiny_model_dir):
    """The whole run under accelerate's FSDP2 on two CPU processes (tests/fsdp_cpu_launch.py turns on what
    accelerate 1.16 offers GPU runs only): the parameters are sharded, and trials, commits and evaluation
    behave as under DDP."""
    from pathlib import Path

    layers = {"transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"], "state_dict_type": "FULL_STATE_DICT"}
    fsdp = {"fsdp": "full_shard", "fsdp_config": {"fsdp_version": 2, **layers}}
    launcher = str(Path(__file__).resolve().parent / "fsdp_cpu_launch.py")
    run_path = _two_process_run(tmp_path, tiny_model_dir, {**SHARED_RUN, "grpo": {"extra": fsdp}}, launcher=launcher)
    for rank in (0, 1):
        trained = json.loads((tmp_path / f"fsdp.json.{rank}").read_text())
        assert trained == {"is_fsdp_enabled": True, "fsdp_version": 2, "parameters": "DTensor"}
    _assert_shared_run(run_path, tiny_model_dir)


@pytest.mark.slow
def test_two_processes_generate_the_trials_and_the_evaluation_together(tmp_path, tiny_model_dir):
    """Trials and evaluation under two DDP processes over gloo (accelerate 1.16 does not shard a CPU run,
    docs/design.md §6): every process generates its share at the step boundary; the evolution point's trials
    and commits reach both; the evaluation scores what one process scores on the same draws."""
    run_path = _two_process_run(tmp_path, tiny_model_dir, SHARED_RUN)
    _assert_shared_run(run_path, tiny_model_dir)
