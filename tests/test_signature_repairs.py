"""Repairs that reach a whole signature at first evidence (docs/design.md §4): the rubric audit before step 1 finds
what the prompts state and the rubrics miss, the first graded groups bring it to an evolution point, the trainer
widens the evolver's one-task repair to every task that states the same requirement (each with its own instance,
tasks not drawn yet included, across families and without them), the critic decides on the pooled groups with
the power rule, and one commit covers them all.

The trainer-side service behind the real MCP tool server, the graph in the MCP client, the rule-based evolver and
a scripted chat model standing in for an LLM evolver.
"""

from __future__ import annotations

import json

import pytest
from helpers import AcceptAll, build, record_group, rule_based_point

from harnessrl.agents.testing import ScriptedChatModel, tool_call
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.power import decide_split, look_alpha, min_detectable_share, split_share
from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.data import Task
from harnessrl.evolution.candidates import CandidateError
from harnessrl.evolution.handled import HandledFailures
from harnessrl.evolution.probation import ProbationRule
from harnessrl.evolution.service import EvolutionService
from harnessrl.graph.state import GraphConfig
from harnessrl.interfaces import EditRubric, Harness
from harnessrl.interfaces.tools import CommitUpdate, GetFailures, RunTrial
from harnessrl.judges import RubricJudge
from harnessrl.records.events import Event
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.run_record import read_events
from harnessrl.records.steps import Recorder
from harnessrl.trainer.run_report import audit_section


def _task(tid: str, word: str, reference: str, domain: str = "writing", **meta) -> Task:
    return Task.model_validate(
        {
            "id": tid,
            "domain": domain,
            "prompt": f"Describe the {word} in one sentence, without using any commas.",
            "reference_answer": reference,
            "rubric": [
                {
                    "id": "topic",
                    "text": f"Mentions '{word}'",
                    "weight": 1,
                    "check": {"type": "contains", "phrases": [word]},
                }
            ],
            "metadata": meta,
        }
    )


class NoJudge:
    name = "none"

    def grade(self, requests):
        raise AssertionError("every criterion here is an exact check")


COMMAS = {
    "sea": ["The sea, wide and blue", "The sea is calm", "Sea, sky, sun", "A grey sea"],
    "city": ["The city, loud and bright", "The city sleeps", "City lights, cars", "A city at dawn"],
}


WAIT = TrialConfig(pending_checks="wait")  # the default: a pending test waits for more groups
PROBATION = TrialConfig(pending_checks="probation")
WAITING = GraphConfig(revise_unmet_pending=False)  # a pending check broken more often than met waits (no hint)
SPLIT = {"sea": ["The sea, wide and blue", "The sea is calm", "Sea, sky, sun", "A grey, cold sea"]}  # 3:1
SPLIT_MET = {"sea": ["The sea, wide and blue", "The sea is calm", "Sea and sky", "A grey cold sea"]}  # 1:3


def _world(tmp_path, steps=(2, 3), groups=COMMAS, trial_config=None, **service_kw):
    """Four tasks that each ask for one sentence without commas: two of family nocomma, one of another family, one
    with no family and another domain (RaR-like data); only sea and city have graded groups."""
    tasks = [
        _task("sea", "sea", "The calm sea shines under a pale blue sky.", family="nocomma"),
        _task("city", "city", "The busy city hums with cars and people.", family="nocomma"),
        _task("forest", "forest", "A quiet forest of tall old trees.", family="elsewhere"),
        _task("rain", "rain", "Rain falls softly on the roof.", domain="medical"),
        Task.model_validate(
            {
                "id": "list",
                "domain": "writing",
                "prompt": "List three fruits.",
                "reference_answer": "apple, pear, plum",
                "rubric": [
                    {"id": "any", "text": "Names fruit", "weight": 1, "check": {"type": "contains", "phrases": ["a"]}}
                ],
            }
        ),
    ]
    harness = Harness(tasks, seed=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(NoJudge())
    for step in steps:
        for tid, texts in groups.items():
            record_group(harness, judge, recorder, step, tid, [f"{t} {step}." for t in texts])
    failures: list[Failure] = []
    run = RunDir(tmp_path / "run")
    service = EvolutionService(
        harness,
        recorder,
        None,
        FrozenPolicyTrials(harness, recorder, judge, None, trial_config),
        run,
        failures=lambda: failures,
        step=lambda: max(steps),
        **service_kw,
    )
    return service, harness, run, failures


def _city_group(service: EvolutionService, step: int) -> None:
    """A group of city graded at ``step``: two of its four rollouts use commas."""
    texts = ["The city, loud", "City lights and cars", "A city, grey", "Dawn"]
    record_group(service.harness, service.trials.judge, service.recorder, step, "city", texts)


def _checks(harness: Harness, task_id: str) -> set[str]:
    return {c.check.type for c in harness.rubrics.current(task_id).criteria if c.check is not None}


def test_the_audit_lists_what_the_prompts_state_and_the_rubrics_miss_across_families_and_domains(tmp_path):
    service, _, run, _ = _world(tmp_path)
    findings = {f.key: f for f in service.run_audit()}
    assert set(findings) == {"not_contains:[',']", "sentence_count:max"}
    # a requirement, not a family: the other family and the family-less task of another domain are in it
    assert findings["not_contains:[',']"].tasks == ["city", "forest", "rain", "sea"]
    (audit,) = [e for e in run.read("events.jsonl") if e["kind"] == "rubric_audit"]
    assert audit["step"] == 0 and audit["covered"] == ["city", "forest", "rain", "sea"] and audit["tasks"] == 5


def test_one_commit_covers_every_task_that_states_the_requirement_measured_on_the_pooled_groups(tmp_path):
    service, harness, run, failures = _world(tmp_path)
    service.run_audit()
    # a detection on city predates the repair: the repair that covers city handles it
    failures.append(
        Failure(kind="non_discriminative_high", step=3, task_id="city", domain="writing", summary="all high")
    )
    assert service.point_due(3) is not None  # the audit's findings have graded groups: a point comes now
    listed = service.get_failures(GetFailures()).failures
    assert [f.kind for f in listed[:2]] == ["unchecked_requirement"] * 2  # the audit's findings come first
    outcomes = rule_based_point(service)
    committed = [o for o in outcomes if o.status == "committed"]
    assert committed
    for tid in ("sea", "city", "forest", "rain"):  # forest and rain were never drawn: covered all the same
        assert "not_contains" in _checks(harness, tid)
    assert "not_contains" not in _checks(harness, "list")
    events = run.read("events.jsonl")
    commit = next(e for e in events if e["kind"] == "commit" and "not_contains" in str(e["update"]))
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"] and commit["remedy"] == "requirement"
    assert commit["update"]["signature"]["kind"] == "requirement"
    trial = next(e for e in events if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"])
    split = trial["result"]["measurements"]["split"]
    assert trial["verdict_kind"] == "accepted" and split["rollouts"] == 16 and split["tasks"] == ["city", "sea"]
    assert trial["result"]["min_detectable_effect"] is not None and trial["result"]["covers"] == commit["covers"]
    handled = [e["outcome"] for e in events if e["kind"] == "failure_handled" and e["failure_id"] == failures[0].id]
    assert handled == ["covered"]
    # the covered failure was on the point's list: it is passed over, not attributed and handled again (gold-bench
    # seed 3 at ef48919 retired a covered lax task as solved on the lax rubric's grades at the same point)
    assert not [e for e in events if e.get("failure_id") == failures[0].id and e["kind"] != "failure_handled"]
    assert service.point_due(4) is None and not [f for f in service.get_failures(GetFailures()).failures]
    # and the service refuses to commit anything for it, whatever evolver asks
    service.trials = AcceptAll()
    cand = build(service, "task_sampling", task_ids=["city"], action="retire", failure_id=failures[0].id)
    service.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    with pytest.raises(CandidateError, match="was handled since it was listed"):
        service.commit_update(CommitUpdate(candidate_id=cand.candidate_id))


def test_a_repair_the_data_cannot_decide_yet_is_deferred_and_decided_on_more_groups(tmp_path):
    """One group that splits 1:3 cannot decide (pending): the finding is deferred, not given up or retired; once
    more of its tasks' groups are graded it is offered again and the evidence of both looks decides."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT)
    service.run_audit()
    rule_based_point(service, config=WAITING)  # 3 of 4 broken: by default revised with its hint at once
    events = run.read("events.jsonl")
    deferred = [e for e in events if e["kind"] == "deferred"]
    assert deferred and all("pending" in e["reason"] for e in deferred)
    assert "not_contains" not in _checks(harness, "sea")
    assert not [e for e in events if e["kind"] == "give_up"]
    assert service.point_due(2) is None  # nothing new to look at
    # a second group of city is graded: the finding comes back
    _city_group(service, 3)
    assert service.point_due(3) is not None
    rule_based_point(service, config=WAITING)
    assert "not_contains" in _checks(harness, "rain")
    events = run.read("events.jsonl")
    nocomma = {
        e["candidate_id"] for e in events if e["kind"] == "proposal" and "not_contains" in str(e["update"]["add"])
    }
    trials = [e for e in events if e["kind"] == "trial" and e["candidate_id"] in nocomma]
    assert [t["verdict_kind"] for t in trials] == ["pending", "accepted"]
    assert trials[-1]["result"]["measurements"]["split"]["look"] == 2
    assert trials[-1]["result"]["measurements"]["split"]["rollouts"] == 8  # both looks' rollouts, each once


def _probation_commit(tmp_path, trial_config=PROBATION, **service_kw):
    """The audit's no-comma finding on one group of sea that splits 1:3 (met more often than broken), with
    ``pending_checks: probation``: on probation at once (its first look)."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT_MET, trial_config=trial_config, **service_kw)
    service.run_audit()
    rule_based_point(service)
    events = run.read("events.jsonl")
    commit = next(e for e in events if e["kind"] == "commit" and "not_contains" in str(e["update"]))
    return service, harness, run, commit


def _train_city(service: EvolutionService, steps) -> None:
    for step in steps:  # the trainer's step listener sees each step's record
        _city_group(service, step)
        service.observe_step(service.recorder.steps[step])


def test_a_repair_the_data_cannot_decide_yet_goes_on_probation_at_its_first_split_and_the_test_goes_on(tmp_path):
    """``pending_checks: probation``: the pooled test cannot decide on one group split 1:3, but the group splits and
    its rollouts meet the check more often than they break it, so the requirement is committed over all four tasks
    that state it at once (from step 3, not after a later look), nothing generated; the training groups after it
    are the test's next looks, pooled with the evidence before the commit and at the error of the test's own look
    2, which accepts it: kept."""
    service, harness, run, commit = _probation_commit(tmp_path)
    assert commit["probation"] is True and commit["applies_from_step"] == 3
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    assert commit["probation_prior"] == {"broken": 1, "rollouts": 4, "looks": 1, "group_size": 4}
    assert set(commit["probation_checks"]) == {"city", "forest", "rain", "sea"}
    events = run.read("events.jsonl")
    (trial,) = [e for e in events if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"]]
    assert trial["verdict_kind"] == "probation" and trial["result"]["cost"]["rollouts"] == 0
    assert trial["result"]["measurements"]["probation"]["split_groups"] == 1
    assert "on probation" in trial["result"]["reason"]
    for tid in ("sea", "city", "forest", "rain"):
        assert "not_contains" in _checks(harness, tid)
    _train_city(service, (3, 4))  # two groups of city graded by the check, each split 2:2
    (look,) = [e for e in run.read("events.jsonl") if e["kind"] == "probation"]
    assert (look["look"], look["looks_before_commit"], look["verdict_kind"]) == (2, 1, "accepted")
    assert look["action"] == "kept"
    assert (look["split"]["broken"], look["split"]["rollouts"], look["decided_by"]) == (5, 12, "check_split_share")
    service.step_boundary(4)
    assert not [e for e in run.read("events.jsonl") if e["kind"] == "revert"]
    assert "not_contains" in _checks(harness, "forest")


def test_checks_broken_more_often_than_met_wait_instead_of_going_on_probation(tmp_path):
    """The same one group split 3:1 (three rollouts with a comma): pending even with ``pending_checks: probation``,
    so the evolver may propose the check with a hint once the next groups show the policy does not meet it (gold
    bench seed 1 at 0ce58c7: `brief`'s check on probation at 3 of 4 broken was then broken by every rollout for 30
    steps and reverted; waiting had let the evolver commit it with a hint at step 2); and with the default, ``wait``,
    the 1:3 split waits too."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=PROBATION)
    service.run_audit()
    rule_based_point(service, config=WAITING)
    events = run.read("events.jsonl")
    assert not [e for e in events if e["kind"] == "commit" and "not_contains" in str(e["update"])]
    assert "not_contains" not in _checks(harness, "sea")
    trials = [e for e in events if e["kind"] == "trial" and "not_contains" in json.dumps(e["result"]["measurements"])]
    assert trials and trials[0]["verdict_kind"] == "pending"
    default, harness2, run2, _ = _world(tmp_path / "default", steps=(2,), groups=SPLIT_MET)
    default.run_audit()
    rule_based_point(default, config=WAITING)
    assert "not_contains" not in _checks(harness2, "sea")
    assert not [e for e in run2.read("events.jsonl") if e["kind"] == "commit" and e.get("probation")]


def test_a_probation_whose_later_groups_do_not_split_keeps_the_check_the_prompts_state(tmp_path):
    """After the commit the covered tasks' groups all meet the check: at the test's last look 1 of 20 pooled
    rollouts breaks it, too few to show the split share worth a change and no look left. The probation ends
    unkept, but the check is what the four prompts state and their references meet: a policy that meets it does not
    make it wrong, so it stays on all four tasks (docs/design.md §4, "A stated requirement keeps its check"); the
    revert event says so, with the numbers, and changes no rubric."""
    config = TrialConfig(max_looks=2, probation_look_groups=4, pending_checks="probation")
    service, harness, run, commit = _probation_commit(tmp_path, config, probation=ProbationRule.of(config))
    assert commit["probation"] is True
    for step in (3, 4, 5, 6):
        record_group(harness, service.trials.judge, service.recorder, step, "city", ["Dawn", "Dusk", "Noon", "Rain"])
        service.observe_step(service.recorder.steps[step])
    (look,) = [e for e in run.read("events.jsonl") if e["kind"] == "probation"]
    assert (look["verdict_kind"], look["action"], look["split"]["broken"], look["split"]["rollouts"]) == (
        "not_reliable",
        "reverted",
        1,
        20,
    )
    service.step_boundary(6)
    for tid in ("sea", "city", "forest", "rain"):
        assert "not_contains" in _checks(harness, tid)
    (revert,) = [e for e in run.read("events.jsonl") if e["kind"] == "revert"]
    assert revert["applies_from_step"] == 7 and sorted(revert["covers"]) == ["city", "forest", "rain", "sea"]
    assert "1 of 20 rollouts" in revert["reason"] and revert["updates"] == [] and revert["versions"] == []
    assert "the checks the prompts state stay" in revert["reason"]


def test_a_resumed_run_continues_a_checks_probation_from_its_commit_and_looks(tmp_path):
    """The commit event carries the evidence before it: a new process replaying the events reopens the probation
    with it, and its next look is the test's look 2 on the pooled rollouts."""
    service, harness, run, _ = _probation_commit(tmp_path)
    fresh = EvolutionService(harness, service.recorder, None, service.trials, None, failures=list, step=lambda: 2)
    fresh.replay_events(read_events(run.path), through_step=2)
    (p,) = fresh.probation.open()
    assert (p.broken, p.graded, p.looks, p.prior_looks, p.groups) == (1, 4, 1, 1, 0)
    _train_city(fresh, (3, 4))
    (look,) = fresh.probation.settle()
    assert (look.kind, look.payload.look, look.payload.split.rollouts) == ("accepted", 2, 12)


def test_a_deferred_finding_comes_back_at_its_next_group_when_the_earlier_ones_left_the_kept_rollouts(tmp_path):
    """A family drawn one group every few steps: when the next group is graded, the group of the last look has left
    the kept rollouts, so the kept groups are no more than at the deferral; the finding still comes back (it counts
    the groups graded so far), and the sequential test adds the new group's rollouts to the earlier look's."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT)
    service.recorder.keep_steps = 1  # only the latest step's rollouts are kept
    service.run_audit()
    rule_based_point(service)
    assert [e["kind"] for e in run.read("events.jsonl") if e["kind"] == "deferred"]
    _city_group(service, 6)
    assert {r.step for r in service.recorder.latest_rollouts()} == {6}  # step 2's group is no longer kept
    assert service.point_due(6) is not None
    rule_based_point(service)
    assert "not_contains" in _checks(harness, "rain")


def test_a_deferred_failure_waits_for_a_new_group_of_its_tasks_instead_of_being_measured_again_on_the_same_one(
    tmp_path,
):
    """A detected failure whose candidate is pending is not offered at the next evolution point while no group of the
    tasks its candidate covers has been graded (the critic would re-measure the same rollouts: gold-bench seed 4 did
    so at four points in a row); ``get_failures`` counts it as deferred; once a group of a covered task is graded it
    comes back and both looks' rollouts decide. A resumed run's replay of the ``deferred`` event keeps it waiting."""
    one = {"sea": ["The sea, wide and blue", "The sea is calm", "Sea and sky", "A grey cold sea"]}
    service, harness, run, failures = _world(tmp_path, steps=(2,), groups=one, trial_config=WAIT, audit_rubrics=False)
    failures.append(Failure(kind="non_discriminative_high", step=2, task_id="sea", domain="writing", summary="high"))
    rule_based_point(service)
    events = run.read("events.jsonl")
    (deferred,) = [e for e in events if e["kind"] == "deferred"]
    assert deferred["graded_groups"] == 1 and "city" in deferred["covers"] and "sea" in deferred["covers"]
    listed = service.get_failures(GetFailures())
    assert listed.failures == [] and listed.deferred == 1 and listed.handled == 0
    proposals = len([e for e in events if e["kind"] == "proposal"])
    rule_based_point(service)  # nothing new: no proposal, no trial
    assert len([e for e in run.read("events.jsonl") if e["kind"] == "proposal"]) == proposals
    resumed = HandledFailures()
    resumed.replay_event(Event.model_validate(deferred), through_step=2)
    assert resumed.waiting(failures[0], service.recorder.graded)
    _city_group(service, 3)
    assert not resumed.waiting(failures[0], service.recorder.graded)
    assert [f.failure_id for f in service.get_failures(GetFailures()).failures] == [failures[0].id]
    rule_based_point(service)
    assert "not_contains" in _checks(harness, "rain")
    trials = [e for e in run.read("events.jsonl") if e["kind"] == "trial"]
    assert [t["verdict_kind"] for t in trials][-1] == "accepted"
    assert trials[-1]["result"]["measurements"]["split"]["rollouts"] == 8


def test_the_groups_graded_so_far_only_grow_past_the_steps_the_recorder_holds():
    """The audit's count: past the 1000 step records a recorder holds, and a step recorded again counted once."""
    from harnessrl.records.steps import GroupRecord, StepRecord

    recorder = Recorder(None, keep_steps=2)
    group = {"domain": "w", "rubric_version": 0, "rewards": [1.0], "mean": 1.0, "std": 0.0, "flat": True}
    group.update(lengths=[1], criterion_means={})
    for step in range(1, 1006):
        recorder.add(StepRecord(step=step, groups=[GroupRecord(step=step, task_id="sea", **group)]), [])
    assert len(recorder.steps) == 1000 and recorder.graded("sea") == 1005 and recorder.graded("city") == 0
    both = [GroupRecord(step=1005, task_id=t, **group) for t in ("sea", "city")]
    recorder.add(StepRecord(step=1005, groups=both), [])
    assert recorder.graded("sea") == 1005 and recorder.graded("city") == 1


def _llm_no_comma_edit(fid: str, **fields) -> ScriptedChatModel:
    """A scripted chat model standing in for an LLM: it blames the rubric and adds the no-comma check to sea alone,
    with no remedy name (``fields``: more arguments of its edit)."""
    check = {"type": "not_contains", "phrases": [","]}
    add = [{"id": "nocomma", "text": "Uses no commas", "weight": 1, "check": check}]
    attribution = {"failure_id": fid, "task_id": "sea", "interface": "rubric_criteria", "rationale": "lax rubric"}
    edit = {"failure_id": fid, "task_id": "sea", "add": add, **fields}
    return ScriptedChatModel(responses=[tool_call("submit_attribution", attribution), tool_call("edit_rubric", edit)])


def test_an_llm_evolvers_one_task_repair_is_widened_the_same_way(tmp_path):
    """The scripted chat model stands in for an LLM: it proposes the no-comma check for sea alone, with no remedy
    name; the trainer widens it, the critic measures it pooled, and the records are the rule-based evolver's."""
    service, harness, run, failures = _world(tmp_path, audit_rubrics=False)
    failures.append(Failure(kind="non_discriminative_high", step=3, task_id="sea", domain="writing", summary="high"))
    (outcome,) = rule_based_point(service, _llm_no_comma_edit(failures[0].id, rationale="the prompt forbids commas"))
    assert outcome.status == "committed"
    assert all("not_contains" in _checks(harness, t) for t in ("sea", "city", "forest", "rain"))
    commit = next(e for e in run.read("events.jsonl") if e["kind"] == "commit")
    assert commit["remedy"] is None and sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    assert commit["update"]["signature"]["key"] == "not_contains:[',']"


def test_a_group_remedy_reaches_the_tasks_group_and_rebuilds_each_instance():
    """A length pitfall reaches the tasks of the source's group of the data (family, else tag, else domain),
    each with the limit its own prompt states or its reference's length."""
    rows = [
        ("a", "Explain tides in at most 12 words.", "The moon pulls the sea.", {"family": "brief"}),
        ("b", "Explain rain briefly.", "Clouds drop water when droplets grow heavy enough.", {"family": "brief"}),
        ("c", "Explain snow briefly.", "Cold clouds make ice.", {"family": "other"}),
    ]
    tasks = [
        Task.model_validate(
            {
                "id": i,
                "domain": "science",
                "prompt": p,
                "reference_answer": r,
                "rubric": [{"id": "x", "text": "Explains", "weight": 2}],
                "metadata": m,
            }
        )
        for i, p, r, m in rows
    ]
    rubrics = Harness(tasks).rubrics
    pitfall = {"type": "word_count", "min": 13}
    update = EditRubric(
        task_id="a",
        remedy="length_pitfall",
        add=[{"id": "length_pitfall", "text": "Longer than 12 words", "weight": -1, "check": pitfall}],
    )
    wide = rubrics.widen(update)
    assert wide.signature.kind == "group" and wide.signature.key == "family:brief"
    (b,) = wide.cover
    assert b.task_id == "b" and b.add[0].check.min == 21  # 12 x 8/5 words (b's reference over a's), rounded up, + 1
    assert [t.id for t in rubrics.targets(wide)] == ["a", "b"]
    # a remedy with no group instance, or an edit that rewords, stays the task's own
    assert rubrics.widen(update.model_copy(update={"remedy": "stricter"})).cover == []


def test_the_power_rule_decides_a_two_two_split_of_one_group_and_records_what_it_could_detect():
    assert split_share(0.5, 4) == 0.875
    assert decide_split(2, 4, 4, 0.2, 0.9, 1, 2).kind == "accepted"  # a 2:2 split of one group
    assert decide_split(1, 4, 4, 0.2, 0.9, 1, 2).kind == "pending"  # 1:3 cannot decide yet
    assert decide_split(1, 4, 4, 0.2, 0.9, 2, 2).kind == "not_reliable"  # the looks are spent, still undecided
    assert decide_split(0, 80, 4, 0.2, 0.9, 2, 2).kind == "futile"  # 80 pass: the policy already does it
    assert decide_split(3, 8, 4, 0.2, 0.9, 1, 2).kind == "accepted"
    assert min_detectable_share(4, 4, 0.2, 0.05) is None  # one group: no rate is accepted with power 0.8
    assert 0.5 < min_detectable_share(16, 4, 0.2, 0.05) < 0.9


def test_the_error_is_spent_over_the_looks_by_halving_or_equally_and_never_more_than_it_is():
    halving = [look_alpha(0.9, k, 8) for k in range(1, 9)]
    assert halving[:3] == pytest.approx([0.05, 0.025, 0.0125]) and halving[-1] == halving[-2]  # the last: what is left
    assert sum(halving) == pytest.approx(0.1)
    assert look_alpha(0.9, 1, 1) == pytest.approx(0.1)  # one look spends the whole error either way
    assert [look_alpha(0.9, k, 3, "equal") for k in (1, 2, 3)] == pytest.approx([0.1 / 3] * 3)
    assert look_alpha(0.9, 12, 8) == halving[-1]  # a look past the last spends no more than the last
    # a check broken at 0.75 (s = 0.68), one group a look: by its third look halving has the first looks' power,
    # and its later looks reach what three equal looks cannot (benchmarks/sequential_looks.py)
    assert decide_split(9, 12, 4, 0.2, 0.9, 3, 3, "equal").kind == "not_reliable"  # gold-bench seed 3's brief check
    assert decide_split(9, 12, 4, 0.2, 0.9, 3, 8).kind == "pending"
    assert decide_split(2, 4, 4, 0.2, 0.9, 1, 8).kind == "accepted"  # a 2:2 split of one group, at the first look
    with pytest.raises(ValueError, match="use 'halving' or 'equal'"):
        look_alpha(0.9, 1, 3, "obrien")  # type: ignore[arg-type]


def test_a_repair_does_not_close_another_finding_on_the_same_tasks(tmp_path):
    """The no-comma repair covers the tasks of the one-sentence finding too; that finding stays open (it closes only
    once its own requirement is checked), and an evolver's own cover is recomputed by the trainer."""
    service, harness, _, _ = _world(tmp_path)
    service.run_audit()
    own = EditRubric(
        task_id="sea",
        cover=[
            {
                "task_id": "list",
                "add": [
                    {"id": "x", "text": "No commas", "weight": 1, "check": {"type": "not_contains", "phrases": [","]}}
                ],
            }
        ],
        add=[
            {
                "id": "nocomma",
                "text": "Uses no commas",
                "weight": 1,
                "check": {"type": "not_contains", "phrases": [","]},
            }
        ],
    )
    wide = harness.rubrics.widen(own)
    assert sorted(c.task_id for c in wide.cover) == ["city", "forest", "rain"]  # not "list": its prompt states none
    cand = build(service, "rubric_criteria", **own.model_dump(exclude={"interface"}))
    service.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    service.commit_update(CommitUpdate(candidate_id=cand.candidate_id))
    assert "not_contains" in _checks(harness, "city")
    keys = {
        f.evidence.requirement_key
        for f in service.get_failures(GetFailures()).failures
        if f.kind == "unchecked_requirement"
    }
    assert keys == {"sentence_count:max"}
    assert service.audit.findings["not_contains:[',']"].status == "closed"  # checked now, by this commit


def test_a_first_hint_reaches_the_unguided_tasks_of_its_group_each_built_from_its_own_rubric():
    from harnessrl.interfaces import SetGuidance

    def tag(i: str, fam: str, answer: str) -> Task:
        return Task.model_validate(
            {
                "id": i,
                "domain": "science",
                "prompt": f"Capital? Reply in the form 'ANSWER: <city>'. ({i})",
                "reference_answer": f"ANSWER: {answer}",
                "rubric": [
                    {
                        "id": "fmt",
                        "text": "Begins with 'ANSWER:'",
                        "weight": 3,
                        "check": {"type": "starts_with", "text": "ANSWER:"},
                    },
                    {
                        "id": "ans",
                        "text": f"Gives {answer}",
                        "weight": 1,
                        "check": {"type": "contains", "phrases": [answer]},
                    },
                ],
                "metadata": {"family": fam},
            }
        )

    harness = Harness(
        [tag("fr", "tag", "Paris"), tag("it", "tag", "Rome"), tag("es", "tag", "Madrid"), tag("x", "other", "Oslo")]
    )
    guidance = harness.guidance
    guidance.apply(SetGuidance(target="es", text="Own hint.", fraction=0.5), step=1)  # es has its own already
    hint = SetGuidance(
        target="fr", text="A good answer must meet each of these: Begins with 'ANSWER:'.", remedy="guide"
    )
    wide = guidance.widen(hint)
    assert [c.task_id for c in wide.cover] == ["it"] and wide.signature.key == "family:tag"
    assert "gives Rome" in wide.cover[0].text and "Paris" not in wide.cover[0].text
    guidance.apply(wide, step=2)
    assert guidance.rule_for(harness.tasks["it"]).text == wide.cover[0].text
    assert guidance.rule_for(harness.tasks["es"]).text == "Own hint."  # another task's own rule is left as it is
    # a fade, or a hint another remedy built, stays the task's own
    assert guidance.widen(hint.model_copy(update={"remedy": "fade"})).cover == []


def test_two_different_checks_on_one_task_are_two_tests_and_a_widened_repair_is_one_whoever_proposes_it():
    from harnessrl.critic.trials import repair_key

    def add(phrase: str) -> EditRubric:
        check = {"type": "contains", "phrases": [phrase]}
        return EditRubric(task_id="sea", add=[{"id": "w", "text": f"Uses {phrase}", "weight": 1, "check": check}])

    assert repair_key(add("garden")) != repair_key(add("blue"))
    assert repair_key(add("garden")) == repair_key(add("garden").model_copy(update={"remedy": "induced"}))
    tasks = [_task("sea", "sea", "The calm sea shines."), _task("city", "city", "The busy city hums.")]
    rubrics = Harness(tasks).rubrics
    check = {"type": "not_contains", "phrases": [","]}
    from_sea = rubrics.widen(
        EditRubric(task_id="sea", add=[{"id": "a", "text": "No commas", "weight": 1, "check": check}])
    )
    from_city = rubrics.widen(
        EditRubric(task_id="city", add=[{"id": "b", "text": "None", "weight": 2, "check": check}])
    )
    assert repair_key(from_sea) == repair_key(from_city)  # one finding, one sequential test


# ------------------------------------------------------------------------------- a requirement no rollout meets yet
ALL_COMMAS = {
    "sea": ["The sea, wide and blue", "Sea, sky, sun", "A grey, cold sea", "The sea, calm"],
    "city": ["The city, loud and bright", "City lights, cars", "A city, at dawn", "The city, asleep"],
}


def _train_guided(service, harness, step: int, tid: str, texts: list[str]) -> None:
    """One training group of ``tid`` under the hint in force (the first two members guided), seen by the service."""
    record_group(harness, service.trials.judge, service.recorder, step, tid, [f"{t} {step}." for t in texts], guided=2)
    service.observe_step(service.recorder.steps[step])


def _guided_commit(tmp_path, failures: list | None = None):
    service, harness, run, found = _world(
        tmp_path, groups=ALL_COMMAS, probation=ProbationRule.of(TrialConfig(max_looks=3))
    )
    service.run_audit()
    rule_based_point(service)
    events = run.read("events.jsonl")
    commit = next(e for e in events if e["kind"] == "commit" and "not_contains" in str(e["update"]))
    if failures is not None:
        failures.append(found)  # the list the service reads its detected failures from
    return service, harness, run, commit


def test_a_requirement_no_rollout_meets_is_proposed_with_its_hint_as_one_update_on_probation(tmp_path):
    """Every cached rollout uses commas: a no-comma check alone would split no group. The rule-based evolver proposes
    the check with a hint that states it to half of each group, widened to every task that states it; the critic
    draws nothing and commits it on probation, its revert the removal of what it added."""
    _service, harness, run, commit = _guided_commit(tmp_path)
    assert commit["remedy"] == "requirement_guided" and commit["probation"] is True
    assert commit["update"]["guide_fraction"] == 0.5 and sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    # its revert takes the hint away and keeps the check: the prompts state it and their references meet it
    reverts = {u["task_id"]: (u["remove"], u["fade_to"]) for u in commit["revert"]}
    assert sorted(reverts) == ["city", "forest", "rain", "sea"] and all(r == ([], 0.0) for r in reverts.values())
    trial = next(
        e for e in run.read("events.jsonl") if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"]
    )
    assert trial["verdict_kind"] == "probation" and trial["result"]["cost"]["rollouts"] == 0
    assert trial["result"]["metric"] == "signal_share"
    for tid in ("sea", "rain"):  # rain was never drawn: its first draw is guided and graded by the check
        task = harness.tasks[tid]
        first, last = harness.row(task, 0, 4), harness.row(task, 3, 4)
        assert first.guided and "Make sure your answer meets this: uses no commas" in first.messages[-1]["content"]
        assert not last.guided and last.messages == task.messages()
        assert "not_contains" in _checks(harness, tid)
    view = harness.rubrics.task_view(harness.tasks["sea"], 3)
    assert view["rubric_hint"]["fraction"] == 0.5


def test_a_guided_requirement_whose_guided_members_meet_it_is_kept(tmp_path):
    service, harness, run, _commit = _guided_commit(tmp_path)
    met = ["The sea is calm", "A grey sea", "The sea, wide", "Sea, sky"]  # the guided pair meets it, the rest do not
    for step, tid in ((4, "sea"), (5, "city"), (6, "sea"), (7, "rain")):
        _train_guided(service, harness, step, tid, met)
    looks = [e for e in run.read("events.jsonl") if e["kind"] == "probation"]
    # decided by the rule for added checks on the guided groups' rollouts: 4 of 8 break it at the first look
    (look,) = looks
    assert look["decided_by"] == "check_split_share" and look["action"] == "kept" and look["look"] == 1
    assert look["split"]["broken"] == 4 and look["split"]["rollouts"] == 8 and look["split"]["interval"][0] >= 0.2
    assert look["guided_mean_reward"] > look["unguided_mean_reward"]
    service.step_boundary(7)
    assert "not_contains" in _checks(harness, "sea") and harness.row(harness.tasks["sea"], 0, 4).guided


def test_a_guided_requirement_the_hint_does_not_teach_loses_its_hint_and_keeps_its_check(tmp_path):
    """The lowercase case of the stated suite (seed 0): the guided members break the check in every look, so the
    probation ends unkept; the hint goes, the check the prompts state stays (a policy that cannot meet it yet does
    not make it wrong)."""
    service, harness, run, _commit = _guided_commit(tmp_path)
    for step in (4, 5, 6, 7, 8, 9):
        _train_guided(service, harness, step, "sea", ALL_COMMAS["sea"])
    looks = [e for e in run.read("events.jsonl") if e["kind"] == "probation"]
    assert [(e["split"]["broken"], e["split"]["rollouts"], e["verdict_kind"]) for e in looks] == [
        (8, 8, "pending"),
        (16, 16, "pending"),
        (24, 24, "not_reliable"),
    ]
    assert looks[-1]["action"] == "reverted"
    service.step_boundary(9)
    for tid in ("sea", "city", "forest", "rain"):
        assert "not_contains" in _checks(harness, tid)  # the stated check stays
        assert not harness.row(harness.tasks[tid], 0, 4).guided  # the hint is gone
    (revert,) = [e for e in run.read("events.jsonl") if e["kind"] == "revert"]
    assert revert["interface"] == "rubric_criteria" and len(revert["versions"]) == 4
    assert "24 of 24 rollouts of 6 guided groups broke the checks" in revert["reason"]


def test_a_resumed_run_reopens_a_guided_requirements_probation_with_its_rollout_counts(tmp_path):
    service, harness, run, _ = _guided_commit(tmp_path)
    for step in (4, 5):
        _train_guided(service, harness, step, "sea", ALL_COMMAS["sea"])
    fresh, _, _, _ = _world(tmp_path / "again", groups=ALL_COMMAS)
    fresh.replay_events(read_events(run.path), through_step=5)
    (p,) = fresh.probation.open()
    assert p.checks["rain"] == ["req_not_contains"] and (p.broken, p.graded, p.looks) == (8, 8, 1)


def test_an_llm_evolvers_guided_requirement_is_widened_and_put_on_probation_the_same_way(tmp_path):
    """The scripted chat model stands in for an LLM: it sets guide_fraction on its own one-task edit."""
    service, harness, run, failures = _world(tmp_path, groups=ALL_COMMAS, audit_rubrics=False)
    failures.append(Failure(kind="non_discriminative_high", step=3, task_id="sea", domain="writing", summary="high"))
    model = _llm_no_comma_edit(failures[0].id, guide_fraction=0.5, rationale="no rollout manages it")
    (outcome,) = rule_based_point(service, model)
    assert outcome.status == "committed"
    commit = next(e for e in run.read("events.jsonl") if e["kind"] == "commit")
    assert commit["probation"] is True and commit["remedy"] is None
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    assert harness.row(harness.tasks["forest"], 0, 4).guided


def test_a_hint_needs_a_positive_criterion_and_the_reference_must_pass_what_it_states(tmp_path):
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="guide_fraction"):
        EditRubric(
            task_id="sea",
            add=[{"id": "p", "text": "Pads", "weight": -1, "check": {"type": "word_count", "min": 50}}],
            guide_fraction=0.5,
        )
    with pytest.raises(ValidationError, match="only adds criteria"):
        EditRubric(
            task_id="sea",
            add=[{"id": "z", "text": "Names a zebra", "weight": 1}],
            remove=["topic"],
            guide_fraction=0.5,
        )
    service, _harness, _, _ = _world(tmp_path, groups=ALL_COMMAS, audit_rubrics=False)
    bad = EditRubric(  # the reference answer of sea has no 'zebra'
        task_id="sea",
        add=[{"id": "z", "text": "Names a zebra", "weight": 1, "check": {"type": "contains", "phrases": ["zebra"]}}],
        guide_fraction=0.5,
    )
    result = service.trials.run(bad, "c-bad")
    assert result.verdict_kind == "reference_guard" and not result.accepted and "['sea']" in result.reason
    assert result.measurements.reference_fails_added_checks == ["sea"] and result.cost.rollouts == 0


# ------------------------------------------------------------------------------- the rubric's hint fades
KEPT = ["The sea is calm", "A grey sea", "The sea, wide", "Sea, sky"]  # the guided pair meets the check, the rest not
LEARNT = ["The sea is calm", "A grey sea", "The sea is wide", "Calm sea"]  # every member meets it, hint or not


def _kept_guided(tmp_path):
    """The guided no-comma requirement committed, then kept at its probation's first look (steps 4 and 5); and the
    list the service reads its detected failures from."""
    found: list = []
    service, harness, run, _commit = _guided_commit(tmp_path, found)
    failures = found[0]
    for step, tid in ((4, "sea"), (5, "city")):
        _train_guided(service, harness, step, tid, KEPT)
    service.step_boundary(5)
    assert not service.probation.open()
    service.recorder.keep_steps = 3  # an evolution point's kept steps (every_steps) hold the latest groups only
    return service, harness, run, failures


def _outgrown(service, step: int) -> Failure:
    from harnessrl.detection import FailureDetector
    from harnessrl.interfaces.registry import failure_hints

    detector = FailureDetector(hints=failure_hints())
    found = [f for f in detector.observe(service.recorder.steps[step]) if f.kind == "scaffold_outgrown"]
    assert len(found) == 1
    return found[0]


def test_a_rubric_hint_whose_unguided_members_meet_it_is_reported_for_the_rubric_to_fade(tmp_path):
    service, harness, _run, _failures = _kept_guided(tmp_path)
    _train_guided(service, harness, 6, "sea", LEARNT)
    failure = _outgrown(service, 6)
    assert failure.interface_hint == "rubric_criteria"
    ev = failure.evidence
    assert ev.checks == ["req_not_contains"] and ev.plain_met == {"req_not_contains": [1.0]}
    assert "meet the criteria the rubric states as a hint without it" in failure.summary
    group = service.recorder.steps[6].groups[0]
    assert group.hinted == ["req_not_contains"] and group.plain_criterion_means["req_not_contains"] == 1.0
    # unguided members that still break it: nothing to fade, whatever their rewards' spread
    _train_guided(service, harness, 7, "sea", KEPT)
    from harnessrl.detection import FailureDetector

    assert not [f for f in FailureDetector().observe(service.recorder.steps[7]) if f.kind == "scaffold_outgrown"]


def test_a_rubric_hint_the_policy_outgrew_fades_on_every_task_that_states_it_and_its_check_stays(tmp_path):
    service, harness, run, failures = _kept_guided(tmp_path)
    for step, tid in ((6, "sea"), (7, "city"), (8, "sea")):
        _train_guided(service, harness, step, tid, LEARNT)
    failures.append(_outgrown(service, 8))
    # the audit's other finding (one sentence, pending) comes back too: its tasks have more groups graded
    outcome = next(o for o in rule_based_point(service) if o.kind == "scaffold_outgrown")
    assert outcome.status == "committed"
    events = run.read("events.jsonl")
    attribution = next(e for e in events if e["kind"] == "attribution" and e["failure_kind"] == "scaffold_outgrown")
    assert attribution["interface"] == "rubric_criteria"
    commit = [e for e in events if e["kind"] == "commit"][-1]
    assert commit["remedy"] == "fade_hint" and commit["update"]["fade_to"] == 0.25
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"] and not commit.get("probation")
    trial = next(e for e in events if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"])
    met = trial["result"]["measurements"]["hint_met"]
    assert trial["result"]["metric"] == "hint_met_rate" and trial["result"]["cost"]["rollouts"] == 0
    assert (met["met"], met["unguided_rollouts"], met["floor"]) == (6, 6, 0.5) and met["interval"][0] >= 0.5
    for tid in ("sea", "rain"):
        task = harness.tasks[tid]
        assert harness.row(task, 0, 4).guided and not harness.row(task, 1, 4).guided  # half as many members
        assert "not_contains" in _checks(harness, tid)  # the check stays
    # the next fade removes the hint; the check still stays
    (edit,) = [
        s.update
        for s in harness.interfaces["rubric_criteria"].suggest(_fade_evidence(harness, "sea", guided=1))
        if s.update is not None
    ]
    assert edit.fade_to == 0.0
    widened = harness.rubrics.widen(edit)
    harness.apply(widened, 9)
    for tid in ("sea", "city", "forest", "rain"):
        assert not harness.row(harness.tasks[tid], 0, 4).guided and "not_contains" in _checks(harness, tid)
        assert harness.rubrics.task_view(harness.tasks[tid], 9).get("rubric_hint") is None


def _fade_evidence(harness: Harness, tid: str, guided: int):
    from harnessrl.interfaces.evidence import FailureView, ProposalEvidence, TaskView

    failure = FailureView.model_validate(
        {
            "failure_id": "f",
            "kind": "scaffold_outgrown",
            "step": 9,
            "task_id": tid,
            "domain": "writing",
            "summary": "outgrown",
            "evidence": {"guided": guided, "group_size": 4, "checks": ["req_not_contains"], "plain_met": {}},
        }
    )
    view = TaskView.model_validate(
        {"task_id": tid, "domain": "writing", **harness.rubrics.task_view(harness.tasks[tid], 9)}
    )
    return ProposalEvidence(failure=failure, task=view)


def test_a_rubric_hint_the_unguided_members_do_not_meet_yet_stays(tmp_path):
    service, harness, run, failures = _kept_guided(tmp_path)
    for step, tid in ((6, "sea"), (7, "city"), (8, "sea")):
        _train_guided(service, harness, step, tid, KEPT if step < 8 else LEARNT)
    failures.append(_outgrown(service, 8))
    rule_based_point(service)
    trial = [e for e in run.read("events.jsonl") if e["kind"] == "trial"][-1]
    met = trial["result"]["measurements"]["hint_met"]
    assert (met["met"], met["unguided_rollouts"]) == (2, 6) and trial["verdict_kind"] != "accepted"
    assert harness.row(harness.tasks["sea"], 1, 4).guided  # still half the group


def test_a_fade_changes_nothing_else_and_needs_a_hint_to_lower(tmp_path):
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="fade_to fades the hint"):
        EditRubric(task_id="sea", fade_to=0.0, remove=["topic"])
    with pytest.raises(ValidationError, match="fade the rubric's hint with fade_to"):
        EditRubric(task_id="sea")
    service, harness, _, _ = _world(tmp_path, groups=ALL_COMMAS, audit_rubrics=False)
    with pytest.raises(ValueError, match="states no hint to fade"):
        harness.rubrics.rubric_for(EditRubric(task_id="sea", fade_to=0.0), "sea")
    result = service.trials.run(EditRubric(task_id="sea", fade_to=0.0), "c-fade")
    assert not result.accepted and "states no hint to fade" in result.reason


def test_an_llm_evolvers_fade_of_the_rubrics_hint_is_widened_and_measured_the_same_way(tmp_path):
    """The scripted chat model stands in for an LLM: it fades sea's rubric hint with ``fade_to`` alone, no remedy
    name; the trainer widens it to every task that states the hint and the critic measures it the same way."""
    service, harness, run, failures = _kept_guided(tmp_path)
    for step, tid in ((6, "sea"), (7, "city"), (8, "sea")):
        _train_guided(service, harness, step, tid, LEARNT)
    for f in service.get_failures(GetFailures()).failures:  # the audit's other finding: not this script's to handle
        service.audit.handled(f.failure_id, "gave_up")
    failure = _outgrown(service, 8)
    failures.append(failure)
    attribution = {"failure_id": failure.id, "task_id": "sea", "interface": "rubric_criteria", "rationale": "learnt"}
    edit = {"failure_id": failure.id, "task_id": "sea", "fade_to": 0.25, "rationale": "they meet it alone"}
    model = ScriptedChatModel(responses=[tool_call("submit_attribution", attribution), tool_call("edit_rubric", edit)])
    outcome = next(o for o in rule_based_point(service, model) if o.failure_id == failure.id)
    assert outcome.status == "committed"
    commit = [e for e in run.read("events.jsonl") if e["kind"] == "commit"][-1]
    assert commit["remedy"] is None and sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    assert commit["update"]["signature"]["kind"] == "hint"
    assert not harness.row(harness.tasks["forest"], 1, 4).guided and harness.row(harness.tasks["forest"], 0, 4).guided


def test_with_evidence_draws_a_deferred_repair_asks_for_its_next_group_at_the_next_step(tmp_path):
    """``evolver.evidence_draws``: the pending test of the no-comma finding asks task sampling for a task it covers
    that has no graded group yet (city before forest and rain, by name), at the next step; the deferred event says
    so, harness.json holds it (a resumed run draws the same) and that step's batch holds the task. Without the
    setting nothing is asked."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT, evidence_draws=True)
    service.run_audit(record=False)  # a resumed run's audit: its first draws were asked before (the test below)
    rule_based_point(service, config=WAITING)
    deferred = [e for e in run.read("events.jsonl") if e["kind"] == "deferred"]
    asked = [e["evidence_draw"] for e in deferred if "evidence_draw" in e]
    assert asked[0] == {"task_id": "city", "step": 3}
    assert harness.sampling.sample(2, 3)[0] == "city"
    saved = Harness.load(run.harness, list(harness.tasks.values()))
    assert saved.sampling.sample(2, 3) == harness.sampling.sample(2, 3)
    assert harness.versions["task_sampling"] == 0  # state, not an update: no commit, no version

    plain, plain_harness, plain_run, _ = _world(tmp_path / "plain", steps=(2,), groups=SPLIT, trial_config=WAIT)
    plain.run_audit()
    rule_based_point(plain, config=WAITING)
    assert not [e for e in plain_run.read("events.jsonl") if e["kind"] == "deferred" and "evidence_draw" in e]
    assert plain_harness.sampling.state.evidence_draws == {}


def test_with_evidence_draws_the_audit_asks_each_findings_first_group_before_step_1(tmp_path):
    """Before step 1 each audit finding asks for one of its tasks (the fewest graded groups, then by name) at the
    next step free, so the critic measures it on the first steps instead of when the family first comes round (gold
    bench seed 2: no `nocomma` task drawn until step 4). A finding whose tasks are due already asks nothing (the two
    findings here share their tasks); the rubric_audit event says what was drawn; a resumed run's audit asks
    nothing; once the first draw has come, the test still pending asks for its next task."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT, evidence_draws=True)
    findings = service.run_audit()
    (audit,) = [e for e in run.read("events.jsonl") if e["kind"] == "rubric_audit"]
    assert len(findings) == 2 and audit["evidence_draws"] == [
        {"key": findings[0].key, "evidence_draw": {"task_id": "city", "step": 3}}
    ]
    assert harness.sampling.state.evidence_draws == {3: ["city"]}
    shown = audit_section(read_events(run.path))
    assert "<th>first drawn</th>" in shown and "city at step 3" in shown
    assert Harness.load(run.harness, list(harness.tasks.values())).sampling.state.evidence_draws == {3: ["city"]}
    service.run_audit(record=False)
    assert harness.sampling.state.evidence_draws == {3: ["city"]}
    rule_based_point(service, config=WAITING)  # pending on sea's group; city is due already: nothing more asked
    assert harness.sampling.state.evidence_draws == {3: ["city"]}
    commas = ["The city, loud 3.", "City, lights 3.", "A city, grey 3.", "Dawn, 3."]
    record_group(harness, service.trials.judge, service.recorder, 3, "city", commas)  # the first draw came
    service._step = lambda: 3
    rule_based_point(service, config=WAITING)  # 7 of 8 broken, one group split: still pending
    asked = [e["evidence_draw"] for e in run.read("events.jsonl") if e["kind"] == "deferred" and "evidence_draw" in e]
    assert asked == [{"task_id": "forest", "step": 4}]

    full, full_harness, _, _ = _world(tmp_path / "full", steps=(2,), groups=SPLIT, evidence_draws=True)
    for step in (3, 4):  # a quarter of 5 tasks and 1 graded group is 1.5 draws: two asked already
        full_harness.sampling.request_evidence(["list"], step=step)
    full.run_audit()
    assert full_harness.sampling.state.evidence_draws == {3: ["list"], 4: ["list"]}

    plain, plain_harness, plain_run, _ = _world(tmp_path / "plain", steps=(2,), groups=SPLIT)
    plain.run_audit()
    assert "evidence_draws" not in plain_run.read("events.jsonl")[0] and not plain_harness.sampling.state.evidence_draws


def test_evidence_draws_bring_a_lax_rubric_its_first_repair_and_nothing_else(tmp_path):
    """Only an audit finding's pending test asks for a draw, and only for a task whose rubric no commit has changed:
    a detected failure's pending test waits for its draw to come round (gold bench, e1d8c57: 57 of 81 draws went to
    such tests and cost gold), and a task already repaired is not drawn again for a further check on it."""
    one = {"sea": ["The sea, wide and blue", "The sea is calm", "Sea and sky", "A grey cold sea"]}
    service, harness, run, failures = _world(
        tmp_path, steps=(2,), groups=one, trial_config=WAIT, audit_rubrics=False, evidence_draws=True
    )
    failures.append(Failure(kind="non_discriminative_high", step=2, task_id="sea", domain="writing", summary="high"))
    rule_based_point(service, config=WAITING)
    (deferred,) = [e for e in run.read("events.jsonl") if e["kind"] == "deferred"]
    assert "evidence_draw" not in deferred and harness.sampling.state.evidence_draws == {}

    service, harness, run, _ = _world(
        tmp_path / "repaired", steps=(2,), groups=SPLIT, trial_config=WAIT, evidence_draws=True
    )
    extra = {"id": "the", "text": "Uses 'the'", "weight": 1, "check": {"type": "contains", "phrases": ["the"]}}
    for tid in ("city", "forest"):  # an earlier commit changed these two rubrics
        harness.rubrics.apply(EditRubric(task_id=tid, add=[extra], rationale="earlier repair"), step=1)
    service.run_audit(record=False)
    rule_based_point(service, config=WAITING)
    asked = [e["evidence_draw"] for e in run.read("events.jsonl") if e["kind"] == "deferred" and "evidence_draw" in e]
    assert asked and asked[0] == {"task_id": "rain", "step": 3}  # city and forest (fewer groups) are repaired already


def test_evidence_draws_stay_within_a_quarter_of_the_tasks_and_groups_graded(tmp_path):
    """A run's evidence draws are at most a quarter of the training tasks and the groups graded so far: with one graded
    group and two draws asked already (for a task the finding does not cover), the pending test waits for its tasks
    to come round."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT, evidence_draws=True)
    for step in (3, 4):
        harness.sampling.request_evidence(["list"], step=step)  # other tests' draws, asked already
    service.run_audit()
    rule_based_point(service)
    deferred = [e for e in run.read("events.jsonl") if e["kind"] == "deferred"]
    assert deferred and not [e for e in deferred if "evidence_draw" in e]
    assert harness.sampling.state.evidence_draws == {3: ["list"], 4: ["list"]}


def test_an_evidence_draw_that_cannot_be_saved_is_not_asked(tmp_path, monkeypatch):
    """harness.json cannot be written (a full disk): the draw is withdrawn, so a resumed run draws what this one
    draws; the deferral itself goes on."""
    service, harness, run, _ = _world(tmp_path, steps=(2,), groups=SPLIT, trial_config=WAIT, evidence_draws=True)

    def full(path):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(harness, "save", full)
    service.run_audit()
    rule_based_point(service)
    deferred = [e for e in run.read("events.jsonl") if e["kind"] == "deferred"]
    assert deferred and not [e for e in deferred if "evidence_draw" in e]
    assert harness.sampling.state.evidence_draws == {}
