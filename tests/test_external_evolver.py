"""An evolver in its own process: it holds training at a step boundary (a lease), measures and commits on
the frozen policy, releases it, and every decision it makes lands in the run's record.

The hold is tested on the service with a trainer thread; the whole path runs for real in the slow test:
``harnessrl train`` (a tiny random policy, external evolver mode) and ``harnessrl evolver --run-dir`` as
two subprocesses, the evolver's LLM a scripted OpenAI-compatible server on loopback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers import TINY_POLICY_TASKS

from harnessrl.data import Task
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import Recorder

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------- the hold


class Trainer(threading.Thread):
    """Steps 1, 2, 3, ... calling the service at every step boundary, as the evolution callback does."""

    def __init__(self, service: EvolutionService, steps: int = 50, seconds: float = 0.02):
        super().__init__(daemon=True)
        self.service, self.steps, self.seconds = service, steps, seconds
        self.step = 0

    def run(self):
        for step in range(1, self.steps + 1):
            time.sleep(self.seconds)  # the step
            self.step = step
            self.service.step_boundary(step)


def make_service(tmp_path, trainer_step) -> EvolutionService:
    tasks = [Task(id="t1", domain="d", prompt="Say hi.", rubric=[{"id": "c1", "text": "Says hi", "weight": 1}])]
    service = EvolutionService(
        Harness(tasks), Recorder(None), None, None, RunDir(tmp_path), failures=list, step=trainer_step
    )
    service.training = True  # as the trainer's evolution callback sets it while training runs
    return service


def test_a_hold_stops_training_at_a_step_boundary_until_released(tmp_path):
    trainer = None
    service = make_service(tmp_path, lambda: trainer.step)
    trainer = Trainer(service)
    trainer.start()
    time.sleep(0.1)
    got = service.hold_training(seconds=30, wait_s=5)
    assert got.held and got.step == trainer.step
    time.sleep(0.3)  # the policy does not move while held
    assert trainer.step == got.step
    assert service.hold_training(seconds=30).held  # renewing keeps it held
    service.release_training()
    trainer.join(timeout=10)
    assert trainer.step == 50  # and training went on to the end
    actions = [e["action"] for e in RunDir(tmp_path).read("events.jsonl") if e["kind"] == "training_hold"]
    assert actions == ["held", "released"]


def test_a_hold_whose_evolver_died_expires(tmp_path):
    trainer = None
    service = make_service(tmp_path, lambda: trainer.step)
    trainer = Trainer(service, steps=10)
    trainer.start()
    got = service.hold_training(seconds=0.5, wait_s=5)
    assert got.held
    trainer.join(timeout=10)  # nobody releases it: the lease runs out and training goes on
    assert trainer.step == 10
    events = RunDir(tmp_path).read("events.jsonl")
    assert [e["action"] for e in events if e["kind"] == "training_hold"] == ["held", "expired"]


def test_a_hold_when_training_has_ended_says_so(tmp_path):
    service = make_service(tmp_path, lambda: 7)
    service.training = False
    assert "no training is running" in service.hold_training(seconds=10).note  # at once, no wait
    service.training = True
    got = service.hold_training(seconds=10, wait_s=0.2)
    assert not got.held and got.step == 7 and "did not reach a step boundary" in got.note
    service.step_boundary(8)  # nothing was left pending: a later boundary does not wait
    with service.at_boundary(9):  # an in-process evolution point: training is already stopped
        assert service.hold_training(seconds=10, wait_s=0.2).held


# ------------------------------------------------------------------------------------------- for real


def _scripted_llm(request):
    """The evolver's LLM: attribute the failure to task sampling, then park the task (one answer per turn)."""
    from werkzeug import Response

    body = request.get_json()
    tools = {t["function"]["name"] for t in body.get("tools") or []}
    text = json.dumps(body["messages"])
    fid = re.search(r'\\"failure_id\\": \\"([^\\"]+)\\"', text).group(1)
    task = re.search(r'\\"task_id\\": \\"([^\\"]+)\\"', text).group(1)
    if "submit_attribution" in tools:
        name, args = "submit_attribution", {
            "failure_id": fid, "task_id": task, "interface": "task_sampling",
            "rationale": "Every rollout fails alike: out of reach for now.", "evidence": ["flat at 0"],
        }  # fmt: skip
    else:
        name, args = "reweight_tasks", {
            "task_ids": [task], "action": "park", "park_steps": 500, "failure_id": fid, "rationale": "park it",
        }  # fmt: skip
    call = {"id": f"call_{len(text)}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                     "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }  # fmt: skip
    return Response(json.dumps(answer), content_type="application/json")


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", HARNESSRL_TEST_KEY="sk-test")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _wait_for(predicate, timeout: float, what: str, proc=None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"training exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
def test_an_external_evolver_holds_measures_commits_and_keeps_the_record(tmp_path, tiny_model_dir, httpserver):
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(_scripted_llm)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    run_path = tmp_path / "run"
    llm = {"model": "scripted", "base_url": httpserver.url_for("/v1"), "api_key_env": "HARNESSRL_TEST_KEY"}
    config = {
        "run_dir": str(run_path),
        "model": str(tiny_model_dir),
        "device": "cpu",
        "method": "harnessrl",
        "data": {"train": str(data), "validation": None, "test": None},
        "grpo": {"num_generations": 4, "tasks_per_step": 2, "max_completion_length": 8, "max_steps": 400,
                 "save_steps": 400, "learning_rate": 1e-3},
        "eval": {"every_steps": None, "before_training": False},
        "harness": {"memory": {"enabled": False}},
        "evolver": {"mode": "external", "backend": "llm", "hold_s": 120, "llm": llm,
                    "graph": {"failure_kinds": ["non_discriminative_low"], "max_failures": 1, "max_revisions": 0}},
    }  # fmt: skip
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump(config))
    cli = [sys.executable, "-m", "harnessrl.cli"]
    train = subprocess.Popen(
        [*cli, "train", "--config", str(cfg)], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    run = RunDir(run_path, create=False) if run_path.exists() else None
    try:
        _wait_for(lambda: (run_path / "tool_server.json").exists(), 300, "the tool server", train)
        run = RunDir(run_path, create=False)
        _wait_for(
            lambda: any(e.get("failure") == "non_discriminative_low" for e in run.read("events.jsonl")),
            300,
            "a uniformly low group",
            train,
        )
        evolver = subprocess.run(
            [*cli, "evolver", "--run-dir", str(run_path), "--config", str(cfg)],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert evolver.returncode == 0, evolver.stderr[-3000:]
        assert "1 failure(s) handled" in evolver.stdout, evolver.stdout[-3000:]
    finally:
        train.terminate()
        out = train.communicate(timeout=60)[0].decode(errors="replace")
    events = run.read("events.jsonl")
    kinds = [e["kind"] for e in events]
    # the external evolver's own decisions are in the run's record, written trainer-side
    attribution = next(e for e in events if e["kind"] == "attribution")
    assert attribution["interface"] == "task_sampling" and attribution["task_id"] == "never"
    holds = [e for e in events if e["kind"] == "training_hold"]
    assert [h["action"] for h in holds] == ["held", "released"], out[-2000:]
    trial = next(e for e in events if e["kind"] == "trial")
    assert trial["result"]["accepted"] is True, trial["result"]["reason"]
    commit = next(e for e in events if e["kind"] == "commit")
    assert commit["interface"] == "task_sampling"
    # measured and committed inside the hold: the policy had not moved between them
    assert holds[0]["step"] == trial["step"] == commit["step"] <= holds[1]["step"]
    assert kinds.index("training_hold") < kinds.index("trial") < kinds.index("commit")
    print([(e["kind"], e.get("step"), e.get("action") or e.get("interface")) for e in events if e["kind"] != "failure"])
    saved = json.loads((run_path / "harness.json").read_text())
    assert saved["versions"]["task_sampling"] == 1 and saved["task_sampling"]["status"]["never"] == "parked"
