"""EvolutionService's parts keep the one lock order: the training thread's calls (a step's record for the
outcomes, a step boundary, an in-process evolution point) never wait on the tools' lock, which a trial holds
while it waits for the trainer's policy lock."""

from __future__ import annotations

import threading

from helpers import AcceptAll, FruitJudge, build, fruit_world, record_group, returns_within

from harnessrl.evolution.handled import HandledFailures
from harnessrl.interfaces.tools import CommitUpdate, RunTrial
from harnessrl.judges import RubricJudge
from harnessrl.records.events import Event
from harnessrl.records.failures import Failure


def test_the_training_thread_never_waits_on_the_tools_lock(tmp_path):
    world = fruit_world(tmp_path, policy=None)
    service = world.service
    service.trials = AcceptAll()
    cand = build(
        service,
        "rollout_guidance",
        target="fruit",
        text="Think of a yellow fruit.",
        fraction=0.5,
        failure_id=world.failure_id,
    )
    service.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    service.commit_update(CommitUpdate(candidate_id=cand.candidate_id))  # applies from step 3: an outcome is pending
    judge = RubricJudge(FruitJudge())
    for step in (3, 4):
        record_group(world.harness, judge, world.recorder, step, "fruit", ["A banana.", "An apple."] * 2)

    held, done = threading.Event(), threading.Event()

    def tool_holding_the_lock() -> None:  # as a trial does while it waits for the policy lock
        with service.lock:
            held.set()
            done.wait(30)

    tool = threading.Thread(target=tool_holding_the_lock, daemon=True)
    tool.start()
    assert held.wait(10)
    try:

        def training_thread() -> None:
            service.observe_step(world.recorder.steps[3])
            service.observe_step(world.recorder.steps[4])
            service.step_boundary(4)  # no hold asked: goes on at once
            with service.at_boundary(4):
                pass

        returns_within(10, training_thread, "the training thread's calls while a tool holds the service lock")
    finally:
        done.set()
        tool.join(10)
    (outcome,) = world.events("outcome")
    assert outcome["candidate_id"] == cand.candidate_id and outcome["groups_after"] == 2


def _flat_low(step: int) -> Failure:
    return Failure(kind="non_discriminative_low", step=step, task_id="t1", domain="d", summary=f"flat at step {step}")


def test_a_handled_failure_is_restored_up_to_the_checkpoint_only():
    at = {s: _flat_low(s) for s in (1, 2, 4, 5)}
    handled = HandledFailures()
    key = {"failure_kind": "non_discriminative_low", "task_id": "t1", "criterion": None}
    for point in (2, 5):
        row = {"time": 0.0, "kind": "failure_handled", "step": point, "failure_id": at[point].id, "point_step": point}
        handled.replay_event(Event.model_validate({**row, **key}), through_step=3)
    assert handled.is_handled(at[1]) and handled.is_handled(at[2])  # up to the point that handled it
    assert not handled.is_handled(at[4])  # a recurrence after it
    assert not handled.is_handled(at[5])  # handled after the checkpoint: trained again, new
    handled.interrupt(at[4].id)
    assert handled.offered_again(at[4].id, "gave_up")
    assert not handled.offered_again(at[4].id, "gave_up")  # the refusal is cleared once read
