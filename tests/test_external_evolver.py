"""An evolver in its own process: it holds training at a step boundary (a lease), measures and commits on
the frozen policy, releases it, and every decision it makes lands in the run's record.

The hold is tested on the service with a trainer thread; against a real (tiny) training run, under a
watchdog, a trial that arrives mid-step and a lease that runs out mid-point (issue 20: both once hung
training for good); the whole path runs for real in the slow test: ``harnessrl train`` (a tiny random
policy, external evolver mode) and ``harnessrl evolver --run-dir`` as two subprocesses, the evolver's LLM a
scripted OpenAI-compatible server on loopback.
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
from helpers import TINY_POLICY_TASKS, AcceptAll, build, fruit_world, returns_within, thread_stacks

from harnessrl.data import Task
from harnessrl.evolution.service import CandidateError, EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.interfaces.tools import CommitUpdate, GetFailures, HoldTraining, ReleaseTraining, RunTrial
from harnessrl.records.events import Event
from harnessrl.records.failures import Failure
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


def make_service(tmp_path, trainer_step, trials=None) -> EvolutionService:
    tasks = [Task(id="t1", domain="d", prompt="Say hi.", rubric=[{"id": "c1", "text": "Says hi", "weight": 1}])]
    service = EvolutionService(
        Harness(tasks), Recorder(None), None, trials, RunDir(tmp_path), failures=list, step=trainer_step
    )
    service.training = True  # as the trainer's evolution callback sets it while training runs
    return service


class SlowAccept(AcceptAll):
    """Accepts every candidate after ``seconds``; notes when each trial started and ended."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.spans: list[tuple[float, float]] = []

    def run(self, update, candidate_id, failure=None):
        t0 = time.monotonic()
        time.sleep(self.seconds)
        self.spans.append((t0, time.monotonic()))
        return super().run(update, candidate_id, failure)


def test_a_hold_stops_training_at_a_step_boundary_until_released(tmp_path):
    trainer = None
    service = make_service(tmp_path, lambda: trainer.step)
    trainer = Trainer(service)
    trainer.start()
    time.sleep(0.1)
    got = service.hold_training(HoldTraining(seconds=30, wait_s=5))
    assert got.held and got.step == trainer.step
    time.sleep(0.3)  # the policy does not move while held
    assert trainer.step == got.step
    assert service.hold_training(HoldTraining(seconds=30)).held  # renewing keeps it held
    service.release_training(ReleaseTraining())
    trainer.join(timeout=10)
    assert trainer.step == 50  # and training went on to the end
    actions = [e["action"] for e in RunDir(tmp_path).read("events.jsonl") if e["kind"] == "training_hold"]
    assert actions == ["held", "released"]


def test_a_hold_whose_evolver_died_expires(tmp_path):
    trainer = None
    service = make_service(tmp_path, lambda: trainer.step)
    trainer = Trainer(service, steps=10)
    trainer.start()
    got = service.hold_training(HoldTraining(seconds=0.5, wait_s=5))
    assert got.held
    trainer.join(timeout=10)  # nobody releases it: the lease runs out and training goes on
    assert trainer.step == 10
    events = RunDir(tmp_path).read("events.jsonl")
    assert [e["action"] for e in events if e["kind"] == "training_hold"] == ["held", "expired"]


def test_a_hold_when_training_has_ended_says_so(tmp_path):
    service = make_service(tmp_path, lambda: 7)
    service.training = False
    assert "no training is running" in service.hold_training(HoldTraining(seconds=10)).note  # at once, no wait
    service.training = True
    got = service.hold_training(HoldTraining(seconds=10, wait_s=0.2))
    assert not got.held and got.step == 7 and "did not reach a step boundary" in got.note
    service.step_boundary(8)  # nothing was left pending: a later boundary does not wait
    with service.at_boundary(9):  # an in-process evolution point: training is already stopped
        assert service.hold_training(HoldTraining(seconds=10, wait_s=0.2)).held


def test_a_trial_or_a_commit_while_training_runs_on_is_refused_with_the_reason(tmp_path):
    service = make_service(tmp_path, lambda: 4, trials=AcceptAll())
    cid = build(service, "task_sampling", action="reweight", task_ids=["t1"], weight=2.0).candidate_id
    for call, args in ((service.run_frozen_policy_trial, RunTrial), (service.commit_update, CommitUpdate)):
        with pytest.raises(CandidateError, match=r"refused: training is not held.*call hold_training"):
            call(args(candidate_id=cid))
    with service.at_boundary(4):  # stopped at a boundary (an in-process point, or a granted hold): measured
        assert service.run_frozen_policy_trial(RunTrial(candidate_id=cid)).accepted
        assert service.commit_update(CommitUpdate(candidate_id=cid)).applies_from_step == 5
    service.training = False  # no training to race (a service used on its own): nothing to refuse
    cid = build(service, "task_sampling", action="reweight", task_ids=["t1"], weight=3.0).candidate_id
    assert service.run_frozen_policy_trial(RunTrial(candidate_id=cid)).accepted


def test_a_lease_never_runs_out_mid_trial(tmp_path):
    trainer = None
    slow = SlowAccept(seconds=0.6)
    service = make_service(tmp_path, lambda: trainer.step, trials=slow)
    trainer = Trainer(service, steps=20)
    trainer.start()
    cid = build(service, "task_sampling", action="reweight", task_ids=["t1"], weight=2.0).candidate_id
    held = service.hold_training(HoldTraining(seconds=0.2, wait_s=5))  # a lease shorter than the trial
    assert held.held
    assert service.run_frozen_policy_trial(RunTrial(candidate_id=cid)).accepted
    assert trainer.step == held.step  # the lease ran out mid-trial; training waited for the trial to end
    trainer.join(timeout=10)
    assert trainer.step == 20
    events = RunDir(tmp_path).read("events.jsonl")
    assert [e["action"] for e in events if e["kind"] == "training_hold"] == ["held", "expired"]
    (point,) = [e for e in events if e["kind"] == "evolution_point"]
    assert point["mode"] == "external" and point["trials"] == 1 and point["ended"] == "expired"
    assert point["seconds"] >= 0.6 and point["step"] == held.step


def test_the_client_runs_no_graph_without_a_granted_hold(tmp_path):
    import asyncio

    from harnessrl.evolution.client import run_evolution_point
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.graph import GraphConfig
    from harnessrl.graph_builder import make_evolver_model

    service = make_service(tmp_path, lambda: 3, trials=AcceptAll())  # training runs, never reaches a boundary
    asked = []
    failures = service.get_failures
    service.get_failures = lambda *a, **k: asked.append(1) or failures(*a, **k)
    with ToolServer(service) as server:
        point = run_evolution_point(server.url, server.token, make_evolver_model(), GraphConfig(), hold_s=0.3)
        state = asyncio.run(point)
    assert state["held"] is False and state["outcomes"] == []
    assert "did not reach a step boundary within 0.3 s" in state["stop_reason"]
    assert asked == []  # the graph never ran: no failure fetched, nothing measured


# ------------------------------------------------------------------------------------------- a real run, watched


def _external_run(tmp_path, model_dir, max_steps: int):
    from harnessrl.trainer.train_config import TrainConfig

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in TINY_POLICY_TASKS))
    return TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(model_dir),
            "device": "cpu",
            "method": "harnessrl",
            "data": {"train": str(data), "validation": None, "test": None},
            "grpo": {"num_generations": 2, "tasks_per_step": 2, "max_completion_length": 4, "max_steps": max_steps,
                     "save_steps": 100, "learning_rate": 1e-3},
            "eval": {"every_steps": None, "before_training": False},
            "harness": {"memory": {"enabled": False}},
            "evolver": {"mode": "external"},
        }
    )  # fmt: skip


def _service_of(trainer) -> EvolutionService:
    from harnessrl.evolution.point import EvolutionCallback

    return next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, EvolutionCallback)).service


def _mid_step(trainer, service, at, arrived: threading.Event, called: threading.Event):
    """A step listener (first in line, the policy lock held): at the step ``at(step)`` picks, it sets
    ``arrived`` and lets the evolver's call take the locks it takes (until it holds the tools' lock, or has
    ``called``) before the step goes on to the other listeners."""

    def listener(record):
        if not at(record.step):
            return
        assert trainer.policy_lock.locked()
        arrived.set()
        deadline = time.monotonic() + 10
        while not called.is_set() and time.monotonic() < deadline:
            if not service.lock.acquire(blocking=False):
                break  # the call holds the tools' lock
            service.lock.release()
            time.sleep(0.01)

    trainer.step_listeners.insert(0, listener)


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("one_torch_thread")
def test_a_trial_that_arrives_mid_step_is_refused_and_training_finishes(tmp_path, tiny_model_dir):
    """Once: the trial took the tools' lock and waited for the policy lock the step held, while the step
    waited for the tools' lock (its committed-outcome listener): both stopped for good."""
    from harnessrl.trainer.attach import _LockedTrials
    from harnessrl.trainer.run import train

    seen: dict = {}

    def hook(trainer, run):
        service = _service_of(trainer)
        service.trials = _LockedTrials(AcceptAll(), trainer)  # the trials' lock path, as a run builds it
        cid = build(service, "task_sampling", action="reweight", task_ids=["early"], weight=2.0).candidate_id
        mid_step, called = threading.Event(), threading.Event()

        def evolver():
            mid_step.wait(60)
            try:
                seen["trial"] = service.run_frozen_policy_trial(RunTrial(candidate_id=cid))
            except CandidateError as e:
                seen["refused"] = str(e)
            finally:
                called.set()

        threading.Thread(target=evolver, daemon=True).start()
        _mid_step(trainer, service, lambda step: step == 2, mid_step, called)

    config = _external_run(tmp_path, tiny_model_dir, max_steps=3)
    summary = returns_within(150, lambda: train(config, trainer_hook=hook), "training with a trial arriving mid-step")
    assert summary.steps == 3
    assert "trial" not in seen and "refused: training is not held" in seen["refused"]


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("one_torch_thread")
def test_an_external_evolver_whose_lease_runs_out_mid_point_and_training_finishes(tmp_path, tiny_model_dir):
    """Once (`-s evolver.hold_s=20`): the lease ran out during an evolution point, the evolver's next trial
    arrived mid-step, and training and the trial waited on each other for good."""
    from transformers import TrainerCallback

    from harnessrl.trainer.attach import _LockedTrials
    from harnessrl.trainer.run import train

    slow = SlowAccept(seconds=1.0)
    seen: dict = {"generations": []}
    done, mid_step, called = threading.Event(), threading.Event(), threading.Event()

    class Throttle(TrainerCallback):  # steps slow enough for the evolver to act before training ends
        def on_step_end(self, args, state, control, **kwargs):
            if not done.is_set():
                time.sleep(0.2)

    def hook(trainer, run):
        service = _service_of(trainer)
        service.trials = _LockedTrials(slow, trainer)
        scoring = trainer._generate_and_score_completions

        def noted(inputs):
            seen["generations"].append(time.monotonic())
            return scoring(inputs)

        trainer._generate_and_score_completions = noted
        trainer.add_callback(Throttle())

        def evolver():
            try:
                cid = build(service, "task_sampling", action="reweight", task_ids=["early"], weight=2.0).candidate_id
                while not seen["generations"]:
                    time.sleep(0.01)  # training has started
                seen["first"] = first = service.hold_training(
                    HoldTraining(seconds=0.3, wait_s=60)
                )  # shorter than the trial
                assert first.held
                assert service.run_frozen_policy_trial(
                    RunTrial(candidate_id=cid)
                ).accepted  # the lease runs out meanwhile
                assert mid_step.wait(60)  # training went on; the next trial arrives mid-step
                try:
                    service.run_frozen_policy_trial(RunTrial(candidate_id=cid))
                except CandidateError as e:
                    seen["refused"] = str(e)
                finally:
                    called.set()
                seen["second"] = service.hold_training(HoldTraining(seconds=60, wait_s=60))  # the evolver holds again
                assert service.run_frozen_policy_trial(RunTrial(candidate_id=cid)).accepted
                seen["commit"] = service.commit_update(CommitUpdate(candidate_id=cid))
                service.release_training(ReleaseTraining())
            except BaseException as e:  # reported by the test
                seen["error"] = repr(e)
            finally:
                called.set()
                done.set()

        threading.Thread(target=evolver, daemon=True).start()
        _mid_step(trainer, service, lambda step: "first" in seen and step == seen["first"].step + 1, mid_step, called)

    config = _external_run(tmp_path, tiny_model_dir, max_steps=10)
    summary = returns_within(200, lambda: train(config, trainer_hook=hook), "training with an external evolver")
    assert summary.steps == 10 and "error" not in seen, seen.get("error")
    assert done.is_set(), f"the evolver is still at work after training ended:\n{thread_stacks()}"
    (start, end), _ = slow.spans
    assert not [t for t in seen["generations"] if start <= t <= end]  # no step ran during the first trial
    assert "refused: training is not held" in seen["refused"] and "ran out" in seen["refused"]
    assert seen["commit"].applies_from_step == seen["second"].step + 1
    events = RunDir(tmp_path / "run").read("events.jsonl")
    points = [e for e in events if e["kind"] == "evolution_point"]
    assert [(p["mode"], p["ended"], p["trials"], p["committed"]) for p in points] == [
        ("external", "expired", 1, 0),
        ("external", "released", 1, 1),
    ]
    assert points[0]["seconds"] >= 1.0 and points[0]["step"] == seen["first"].step
    # the trainer side counted them: the summary has the external points, their held time and trial cost
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["extra"]["evolver"]["points"] == 2
    assert saved["accounting"]["evolver_seconds"] == pytest.approx(sum(p["seconds"] for p in points), abs=0.01)
    assert saved["accounting"]["trial_seconds"] >= 2.0
    assert saved["accounting"]["harness_overhead_seconds"] >= saved["accounting"]["evolver_seconds"]


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
                    "graph": {"failure_kinds": ["non_discriminative_low"], "max_failures": 3, "max_revisions": 0}},
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
        assert re.search(r"[1-3] failure\(s\) handled", evolver.stdout), evolver.stdout[-3000:]
    finally:
        train.terminate()
        out = train.communicate(timeout=60)[0].decode(errors="replace")
    events = run.read("events.jsonl")
    kinds = [e["kind"] for e in events]
    # the external evolver's own decisions are in the run's record, written trainer-side
    # "never" is flat at 0 from the start; by the time the evolver connects (later on a loaded machine) the policy may
    # have collapsed onto one end of the alphabet, leaving "early" or "late" flat at 0 as well: the point handles up
    # to three failures, and the one on "never" is parked whatever the others come to
    attribution = next(e for e in events if e["kind"] == "attribution" and e["task_id"] == "never")
    assert attribution["interface"] == "task_sampling"
    holds = [e for e in events if e["kind"] == "training_hold"]
    assert [h["action"] for h in holds] == ["held", "released"], out[-2000:]
    trial = next(e for e in events if e["kind"] == "trial" and e["failure_id"] == attribution["failure_id"])
    assert trial["result"]["accepted"] is True, trial["result"]["reason"]
    commit = next(e for e in events if e["kind"] == "commit" and e["failure_id"] == attribution["failure_id"])
    assert commit["interface"] == "task_sampling"
    # measured and committed inside the hold: the policy had not moved between them
    assert holds[0]["step"] == trial["step"] == commit["step"] <= holds[1]["step"]
    assert kinds.index("training_hold") < kinds.index("trial") < kinds.index("commit")
    print([(e["kind"], e.get("step"), e.get("action") or e.get("interface")) for e in events if e["kind"] != "failure"])
    saved = json.loads((run_path / "harness.json").read_text())
    assert saved["versions"]["task_sampling"] >= 1 and saved["task_sampling"]["status"]["never"] == "parked"


# ------------------------------------------------------------------------------------------- handled failures


def _flat_low(step: int, task: str = "t1") -> Failure:
    return Failure(
        kind="non_discriminative_low", step=step, task_id=task, domain="d", evidence={"mean": 0.1, "std": 0.0},
        summary=f"every rollout of {task} scored 0.1 at step {step}", interface_hint="task_sampling",
    )  # fmt: skip


def _point(world, model) -> dict:
    """One evolution point over the real tool server (no since_step, as `harnessrl evolver` runs it)."""
    import asyncio

    from harnessrl.evolution.client import run_evolution_point
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.graph import GraphConfig

    with ToolServer(world.service) as server:
        return asyncio.run(run_evolution_point(server.url, server.token, model, GraphConfig()))


def test_two_evolution_points_never_handle_one_failure_twice(tmp_path):
    from harnessrl.graph_builder import make_evolver_model

    world = fruit_world(tmp_path / "run")
    model = make_evolver_model()
    first = _point(world, model)
    assert [o.status for o in first["outcomes"]] == ["committed"]
    trials = len(world.events("trial"))
    second = _point(world, model)  # the same failure, still in the detector's list: handled already
    assert second["outcomes"] == []
    assert len(world.events("attribution")) == 1 and len(world.events("trial")) == trials
    (handled,) = world.events("failure_handled")
    assert (handled["failure_id"], handled["outcome"], handled["point_step"]) == (world.failure_id, "committed", 2)
    assert world.service.get_failures(GetFailures()).handled == 1


def test_a_handled_failure_comes_back_when_it_recurs_and_after_a_resume_stays_handled(tmp_path):
    failures = [_flat_low(1), _flat_low(2)]
    step = [2]
    service = make_service(tmp_path, lambda: step[0], trials=AcceptAll())
    service._failures = lambda: failures
    with service.at_boundary(2):
        (view,) = service.get_failures(GetFailures()).failures
        assert view.occurrences == 2
        service.on_event("give_up", {"failure_id": view.failure_id, "reason": "nothing helped"})
    step[0] = 4
    assert service.get_failures(GetFailures()).failures == []  # given up at step 2: its steps 1 and 2 are handled
    failures.append(_flat_low(4))  # it recurs after the point that handled it: offered again
    (again,) = service.get_failures(GetFailures()).failures
    assert (again.step, again.first_step) == (4, 4)
    (event,) = RunDir(tmp_path).read("events.jsonl")[-1:]
    assert (event["kind"], event["outcome"], event["point_step"], event["point_mode"]) == (
        "failure_handled", "gave_up", 2, "in-process",
    )  # fmt: skip

    # a trial refused for want of a hold, then given up: not handled, offered again
    cid = build(
        service, "task_sampling", action="reweight", task_ids=["t1"], weight=2.0, failure_id=again.failure_id
    ).candidate_id
    with pytest.raises(CandidateError):
        service.run_frozen_policy_trial(RunTrial(candidate_id=cid))
    service.on_event("give_up", {"failure_id": again.failure_id, "reason": "trial refused"})
    assert [f.failure_id for f in service.get_failures(GetFailures()).failures] == [again.failure_id]

    # a resumed run rebuilds the record from the events, up to the checkpoint it goes on from
    events = RunDir(tmp_path).read("events.jsonl")
    for through, first_step in ((2, 4), (1, 1)):  # the point at step 2 is after a checkpoint at 1: trained again
        resumed = make_service(tmp_path / f"resumed{through}", lambda: 4, trials=AcceptAll())
        resumed._failures = lambda: failures
        resumed.replay_events([Event.model_validate(e) for e in events], through_step=through)
        (view,) = resumed.get_failures(GetFailures()).failures
        assert (view.step, view.first_step) == (4, first_step)
