"""Crash soak: a real training subprocess (tiny random policy, rule-based evolver in process, the training
memory on) is killed with SIGKILL at random steps several times and resumed with ``--resume`` each time.
At the end every step is recorded exactly once, every committed update is in ``harness.json``, in the
events (once) and in the memory, and the run finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from helpers import TINY_POLICY_TASKS

from harnessrl.evolution.probation import REVERT_SUFFIX
from harnessrl.records.run_dir import RunDir

ROOT = Path(__file__).resolve().parents[1]
STEPS, TASKS_PER_STEP = 24, 2


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _steps_recorded(run_path: Path) -> int:
    try:
        lines = (run_path / "steps.jsonl").read_text().splitlines()
    except OSError:
        return 0
    steps = []
    for line in lines:
        with contextlib.suppress(ValueError, KeyError):  # a line the kill tore
            steps.append(json.loads(line)["step"])
    return max(steps, default=0)


@pytest.mark.slow
def test_killed_and_resumed_runs_lose_nothing_and_record_each_step_once(tmp_path, tiny_model_dir):
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    run_path = tmp_path / "run"
    config = {
        "run_dir": str(run_path),
        "model": str(tiny_model_dir),
        "device": "cpu",
        "data": {"train": str(data), "validation": None, "test": None},
        "grpo": {"num_generations": 4, "tasks_per_step": TASKS_PER_STEP, "max_completion_length": 8,
                 "max_steps": STEPS, "save_steps": 3, "learning_rate": 1e-3},
        "eval": {"every_steps": None, "before_training": False},
        "evolver": {"every_steps": 3, "trials": {"rollouts_per_arm": 4, "max_new_tokens": 8}},
    }  # fmt: skip
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    cli = [sys.executable, "-m", "harnessrl.cli", "train", "--config", str(cfg)]
    rng = random.Random(7)
    kills = sorted(rng.sample(range(4, STEPS - 2), 3))  # the steps at which the run is killed
    killed_at = []
    for i, target in enumerate([*kills, None]):
        proc = subprocess.Popen(
            [*cli, *(["--resume"] if i else [])],
            cwd=ROOT,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        if target is None:  # the last start runs to the end
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
            break
        t0 = time.monotonic()
        while _steps_recorded(run_path) < target + rng.random():  # a step boundary or a little after
            assert proc.poll() is None, proc.stderr.read().decode(errors="replace")[-3000:]
            assert time.monotonic() - t0 < 600, f"no step {target} within 10 minutes"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))  # somewhere inside the next step, or an evolution point
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        events = RunDir(run_path, create=False).read("events.jsonl")
        harness = json.loads((run_path / "harness.json").read_text())
        killed_at.append(
            {
                "steps_recorded": _steps_recorded(run_path),
                "commit_events": sum(e["kind"] == "commit" for e in events),
                "harness_versions": sum(harness["versions"].values()),
            }
        )

    run = RunDir(run_path, create=False)
    # every step recorded exactly once: its groups in steps.jsonl, its row in metrics.jsonl
    per_step = Counter(g["step"] for g in run.read("steps.jsonl"))
    assert sorted(per_step) == list(range(1, STEPS + 1)) and set(per_step.values()) == {TASKS_PER_STEP}, per_step
    logged = [m["step"] for m in run.read("metrics.jsonl") if "reward" in m]
    assert sorted(logged) == list(range(1, STEPS + 1)), logged
    events = run.read("events.jsonl")
    starts = [e for e in events if e["kind"] == "run_start"]
    assert len(starts) == 4 and all(s.get("resumed_from_step") is not None for s in starts[1:])
    assert [e["kind"] for e in events].count("run_end") == 1
    # a failure at most once per group of its task in its step: a step trained again detects its failures again,
    # and the first detection moved to rolled_back/ with the step (a task drawn twice in a step fails twice)
    # (the harness reads the groups DAPO's refill dropped as well: the default method is the harness over it)
    groups = Counter((g["step"], g["task_id"]) for g in [*run.read("steps.jsonl"), *run.read("discarded_groups.jsonl")])
    failures = Counter(
        (e["step"], e.get("task_id"), e.get("failure"), (e.get("evidence") or {}).get("criterion_id"))
        for e in events
        if e["kind"] == "failure"
    )
    assert all(n <= groups[key[:2]] for key, n in failures.items()), [k for k, n in failures.items() if n > 1]
    # every committed update: in harness.json, once in the events, and in the memory
    harness = json.loads((run_path / "harness.json").read_text())
    history = [
        h["candidate_id"]
        for name in harness["versions"]
        for h in (harness[name].get("history") or [])
        if h.get("candidate_id")
    ]
    applied = set(history)
    commits = [e["candidate_id"] for e in events if e["kind"] == "commit"]
    # a hint reverted at the end of its probation is back in the harness as <candidate>-revert: a revert event, once
    reverts = [f"{e['candidate_id']}{REVERT_SUFFIX}" for e in events if e["kind"] == "revert"]
    assert len(commits) == len(set(commits)) and len(reverts) == len(set(reverts))
    assert set(commits) | set(reverts) == applied and not set(commits) & set(reverts)
    assert sum(harness["versions"].values()) == len(history)  # a revert can put back more than one version
    from harnessrl.memory.store import TrainingMemory

    memory = TrainingMemory(run_path)
    try:
        in_memory = {c.id for c in memory.candidates(verdict=["committed"])}
    finally:
        memory.close()
    assert set(commits) <= in_memory
    resumes = [(s["resumed_from_step"], s["rolled_back_steps"]) for s in starts[1:]]
    print(f"kills: {killed_at}\nresumed from (checkpoint step, steps rolled back): {resumes}")
    print(f"at the end: {STEPS} steps recorded once each, {len(applied)} update(s) committed: {sorted(applied)}")
