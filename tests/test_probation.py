"""Guidance measured in the group (docs/design.md §4): with ``trials.guidance_trial: in_group`` a hint is committed
on probation without fresh rollouts, its covered tasks' training groups are the trial (guided and unguided members
the two arms), and a look every few guided groups keeps it or reverts it; a revert is a new harness version and an
event, and a resumed run reopens what was still on probation.

The decision rule alone, then whole evolution points: the trainer-side service behind the real MCP tool server,
the graph in the MCP client, the rule-based evolver and a scripted chat model standing in for an LLM.
"""

from __future__ import annotations

import json

import pytest
from helpers import FruitJudge, fruit_world, record_group, rule_based_point

from harnessrl.critic.config import TrialConfig
from harnessrl.critic.power import decide_share
from harnessrl.evolution.probation import ProbationRule, ProbationTracker
from harnessrl.interfaces import SetGuidance
from harnessrl.judges import RubricJudge
from harnessrl.records.run_record import read_events

IN_GROUP = TrialConfig(guidance_trial="in_group", rollouts_per_arm=8, max_rollouts=16, max_looks=3)  # 6 groups at most
HELPED = ["A banana.", "A banana.", "An apple.", "An apple."]  # both guided members find it, the plain ones do not
NOT_HELPED = ["An apple."] * 4


def test_the_share_rule_keeps_reverts_or_waits_by_the_exact_interval():
    # the error halved over the looks (0.05, then 0.025): 2 of 2 cannot show 0.25 yet; 4 of 4 can (lower end 0.334)
    assert decide_share(2, 2, 0.25, 0.9, 1, 3).kind == "pending"
    kept = decide_share(4, 4, 0.25, 0.9, 2, 3)
    assert kept.kind == "accepted" and kept.low == pytest.approx((0.1 / 4 / 2) ** 0.25, abs=1e-6)
    equal = decide_share(4, 4, 0.25, 0.9, 2, 3, "equal")  # Bonferroni: 0.1 / 3 at every look
    assert equal.alpha == pytest.approx(0.1 / 3) and equal.low == pytest.approx((0.1 / 3 / 2) ** 0.25, abs=1e-6)
    assert decide_share(0, 6, 0.25, 0.9, 3, 3).kind == "not_reliable"  # the looks are spent, undecided
    assert decide_share(0, 20, 0.25, 0.9, 1, 3).kind == "futile"  # 0 of 20: an effect of 0.25 is ruled out
    assert decide_share(1, 2, 0.25, 0.9, 1, 3).min_detectable is None  # 2 groups can show nothing
    assert decide_share(1, 8, 0.25, 0.9, 1, 3).min_detectable is not None


def _commit_on_probation(tmp_path):
    world = fruit_world(tmp_path / "run", trial_config=IN_GROUP)
    (outcome,) = rule_based_point(world.service)
    assert outcome.status == "committed" and outcome.interface == "rollout_guidance"
    return world


def _train(world, step: int, texts: list[str]) -> None:
    """One training step of the fruit task under the hint in force (the first two members guided)."""
    record_group(world.harness, RubricJudge(FruitJudge()), world.recorder, step, "fruit", texts, guided=2)
    world.service.observe_step(world.recorder.steps[step])


def test_a_hint_on_probation_is_committed_without_fresh_rollouts(tmp_path):
    world = _commit_on_probation(tmp_path)
    assert world.policy.calls == []  # nothing generated: the training groups will be the trial
    (trial,) = world.events("trial")
    assert trial["verdict_kind"] == "probation" and trial["result"]["cost"]["rollouts"] == 0
    assert trial["result"]["measurements"]["probation"]["tasks"] == ["fruit"]
    (commit,) = world.events("commit")
    assert commit["probation"] is True and commit["signal_share_before"] == 0.0 and commit["groups_before"] == 2
    (revert,) = commit["revert"]  # the rule it replaced: none
    assert revert["target"] == "fruit" and revert["fraction"] == 0 and revert["text"] is None
    rule = world.harness.guidance.rule_for(world.harness.tasks["fruit"])
    assert rule is not None and rule.fraction == 0.5 and rule.text


def test_a_hint_whose_guided_groups_give_signal_is_kept(tmp_path):
    world = _commit_on_probation(tmp_path)
    for step in (3, 4, 5, 6):
        _train(world, step, HELPED)
    looks = world.events("probation")
    assert [(e["look"], e["groups"], e["signal_groups"], e["verdict_kind"]) for e in looks] == [
        (1, 2, 2, "pending"),
        (2, 4, 4, "accepted"),
    ]
    kept = looks[-1]
    assert kept["action"] == "kept" and kept["guided_mean_reward"] == 1.0 and kept["unguided_mean_reward"] == 0.0
    world.service.step_boundary(6)
    assert world.events("revert") == []
    assert world.harness.guidance.rule_for(world.harness.tasks["fruit"]).fraction == 0.5
    _train(world, 7, HELPED)  # decided: no more looks
    assert len(world.events("probation")) == 2


def test_a_hint_that_gives_no_signal_is_reverted_at_the_next_boundary(tmp_path):
    world = _commit_on_probation(tmp_path)
    version = world.harness.guidance.version
    for step in (3, 4, 5, 6, 7, 8):
        _train(world, step, NOT_HELPED)
    looks = world.events("probation")
    assert [e["verdict_kind"] for e in looks] == ["pending", "pending", "not_reliable"]
    assert looks[-1]["action"] == "reverted" and looks[-1]["signal_share"] == 0.0
    assert world.harness.guidance.rule_for(world.harness.tasks["fruit"]) is not None  # not before the boundary
    world.service.step_boundary(8)
    assert world.harness.guidance.rule_for(world.harness.tasks["fruit"]) is None
    assert world.harness.guidance.version == version + 1
    (revert,) = world.events("revert")
    assert revert["applies_from_step"] == 9 and revert["covers"] == ["fruit"] and "0 of 6" in revert["reason"]
    saved = json.loads(world.run_dir.harness.read_text())
    assert "fruit" not in saved["rollout_guidance"]["per_task"]  # harness.json says so too
    assert world.service.counts["reverted/rollout_guidance"] == 1


def test_groups_without_guided_members_and_of_other_tasks_are_not_evidence():
    tracker = ProbationTracker(None, ProbationRule.of(TrialConfig(probation_look_groups=1)))
    tracker.start("c1", ["fruit"], applied_step=3, revert=[SetGuidance(target="fruit", text=None, fraction=0.0)])
    from harnessrl.records.steps import GroupRecord, StepRecord

    def group(step, task, guided):
        return GroupRecord(step=step, task_id=task, domain="food", rubric_version=0, guided=guided,
                           rewards=[1.0, 0.0, 0.0, 0.0], mean=0.25, std=0.43, flat=False, lengths=[2] * 4,
                           criterion_means={})  # fmt: skip

    assert tracker.observe(StepRecord(step=2, groups=[group(2, "fruit", 2)])) == []  # before it applies
    assert tracker.observe(StepRecord(step=3, groups=[group(3, "sea", 2), group(3, "fruit", 0)])) == []
    (look,) = tracker.observe(StepRecord(step=4, groups=[group(4, "fruit", 1)]))
    assert (look.payload.groups, look.payload.guided_rollouts, look.payload.unguided_rollouts) == (1, 1, 3)


def test_a_resumed_run_reopens_a_probation_from_its_events(tmp_path):
    world = _commit_on_probation(tmp_path)
    for step in (3, 4):
        _train(world, step, NOT_HELPED)
    events = read_events(world.run_dir.path)
    fresh = fruit_world(tmp_path / "again", trial_config=IN_GROUP)  # a new process over the same harness state
    fresh.harness.guidance.apply(SetGuidance(target="fruit", text="hint", fraction=0.5), step=3)
    fresh.service.replay_events(events, through_step=4)
    (p,) = fresh.service.probation.open()
    assert (p.groups, p.signal, p.looks, p.before_share) == (2, 0, 1, 0.0)
    assert p.revert[0].target == "fruit" and p.revert[0].fraction == 0
    for step in (5, 6, 7, 8):
        _train(fresh, step, NOT_HELPED)
    assert [e["look"] for e in fresh.events("probation")] == [2, 3]
    fresh.service.step_boundary(8)
    assert fresh.harness.guidance.rule_for(fresh.harness.tasks["fruit"]) is None


def test_a_fade_is_still_measured_on_fresh_arms_under_in_group(tmp_path):
    world = fruit_world(tmp_path / "run", trial_config=IN_GROUP)
    world.harness.guidance.apply(SetGuidance(target="fruit", text="Name the banana.", fraction=0.5), step=1)
    fade = SetGuidance(target="fruit", text="Name the banana.", fraction=0.25)  # the same hint, fewer members
    result = world.trials.run(fade, "fade-1")
    assert result.verdict_kind != "probation" and result.cost.rollouts > 0 and result.margin is not None
    hint = SetGuidance(target="fruit", text="Think of yellow fruit.", fraction=0.5)
    assert world.trials.run(hint, "hint-1").verdict_kind == "probation"


def test_an_llm_evolvers_hint_goes_on_probation_the_same_way(tmp_path):
    """The scripted chat model stands in for an LLM: it writes its own hint, with no remedy name; the critic puts it
    on probation and the records are the rule-based evolver's."""
    from harnessrl.agents.testing import ScriptedChatModel, tool_call

    world = fruit_world(tmp_path / "run", trial_config=IN_GROUP)
    fid = world.failure_id
    model = ScriptedChatModel(
        responses=[
            tool_call(
                "submit_attribution",
                {"failure_id": fid, "task_id": "fruit", "interface": "rollout_guidance", "rationale": "none finds it"},
            ),
            tool_call(
                "set_guidance",
                {
                    "failure_id": fid,
                    "target": "fruit",
                    "text": "Think of a yellow fruit.",
                    "fraction": 0.5,
                    "rationale": "a hint for half of the group",
                },
            ),
        ]
    )
    (outcome,) = rule_based_point(world.service, model)
    assert outcome.status == "committed" and world.policy.calls == []
    (commit,) = world.events("commit")
    assert commit["probation"] is True and commit["remedy"] is None
    for step in (3, 4, 5, 6):
        _train(world, step, HELPED)
    assert world.events("probation")[-1]["action"] == "kept"


def test_a_revert_stands_after_a_roll_back_and_closes_its_probation(tmp_path):
    """A revert rewrote harness.json, so a resume from a checkpoint before it keeps its event and does not reopen
    the probation it ended."""
    from harnessrl.trainer.resume import roll_back

    world = _commit_on_probation(tmp_path)
    for step in (3, 4, 5, 6, 7, 8):
        _train(world, step, NOT_HELPED)
    world.service.step_boundary(8)
    roll_back(world.run_dir, 5)
    events = world.run_dir.read("events.jsonl")
    kinds = [e["kind"] for e in events if e["kind"] in ("revert", "probation")]
    assert kinds == ["probation", "revert"]  # the look at step 4, and the revert
    fresh = fruit_world(tmp_path / "again", trial_config=IN_GROUP)
    fresh.service.replay_events(read_events(world.run_dir.path), through_step=5)
    assert fresh.service.probation.open() == []
