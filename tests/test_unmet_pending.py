"""A pending check the policy breaks more often than it meets (``evolver.graph.revise_unmet_pending``; docs/design.md
§4, "Pending and unmet"): the critic sends it back to the proposer once, in the same point, and the rule-based evolver
proposes the same check with a hint to part of each group, committed on probation; without the setting, or when no
such revision comes, the failure is deferred and its pooled test goes on.

The trainer-side service behind the real MCP tool server, the rule-based evolver, the critic's real trials with a
scripted policy sampler (the fake stands in for the model only), as in ``test_audit_probes``.
"""

from __future__ import annotations

from helpers import rule_based_point
from test_audit_probes import _keep, _world

from harnessrl.agents.critic_node import unmet_split
from harnessrl.graph.state import GraphConfig
from harnessrl.records.trials import TrialMeasurements, TrialResult

# six of the eight probed answers (city, forest: three of each four) use commas; every one is one sentence
MOSTLY_COMMAS = {
    "sea": ["The sea, wide.", "The sea, calm.", "Sea, sky.", "A grey, cold sea."],
    "city": ["The city, loud.", "The city sleeps.", "City lights, cars.", "A city, at dawn."],
    "forest": ["Old trees, tall.", "The forest, dark.", "A green wet forest.", "Trees, moss, birds."],
    "rain": ["Rain, falls.", "Rain, soft.", "The rain, stops.", "Grey rain, wet roofs."],
}
REVISE = GraphConfig()  # revise_unmet_pending: on by default


def _probed(tmp_path):
    service, harness, recorder, _, run = _world(tmp_path, MOSTLY_COMMAS)
    service.run_audit()
    probe = service.probe_audit(2, 4, None, _keep(harness, recorder))
    assert probe.tasks == ["city", "forest"] and probe.rollouts == 8
    return service, harness, run


def _comma_deferred(run):
    """The no-comma finding's deferrals (its pooled test: 6 of the 8 probed rollouts break the check)."""
    return [e for e in run.read("events.jsonl") if e["kind"] == "deferred" and "6 of 8 pooled" in e["reason"]]


def test_a_pending_check_broken_more_often_than_met_is_revised_with_a_hint_and_committed_at_once(tmp_path):
    service, harness, run = _probed(tmp_path)
    rule_based_point(service, config=REVISE)
    trials = [e for e in run.read("events.jsonl") if e["kind"] == "trial"]
    first = trials[0]  # the no-comma finding's: the audit's findings in order
    split = first["result"]["measurements"]["split"]
    assert (
        first["remedy"] == "requirement"
        and first["verdict_kind"] == "pending"
        and (split["broken"], split["rollouts"]) == (6, 8)
    )
    # the revision: the same check, and a hint that states it to half of each group, committed on probation
    (commit,) = [e for e in run.read("events.jsonl") if e["kind"] == "commit" and e["remedy"] == "requirement_guided"]
    assert commit["step"] == 0 and commit["applies_from_step"] == 1
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    assert commit["update"]["guide_fraction"] == 0.5
    assert [c["check"]["type"] for c in commit["update"]["add"]] == ["not_contains"]
    assert "pending: 2 of 8 rollouts met it" in commit["update"]["rationale"]
    for t in MOSTLY_COMMAS:
        rubric = harness.rubrics.current(t)
        assert rubric.guide_fraction == 0.5 and "not_contains" in {c.check.type for c in rubric.criteria if c.check}
    assert not _comma_deferred(run)


def test_without_the_setting_the_same_check_waits_pending(tmp_path):
    service, harness, run = _probed(tmp_path)
    rule_based_point(service, config=GraphConfig(revise_unmet_pending=False))
    (deferred,) = _comma_deferred(run)
    assert deferred["reason"].startswith("pending: the data cannot decide yet (6 of 8 pooled rollouts")
    assert deferred["candidates"] == [] and deferred["revisions"] == 0
    assert not [e for e in run.read("events.jsonl") if e["kind"] == "commit" and "not_contains" in str(e)]
    assert all(harness.rubrics.current(t).guide_fraction == 0 for t in MOSTLY_COMMAS)


def test_a_check_met_more_often_than_broken_is_not_sent_back(tmp_path):
    # the one-sentence finding: every probed answer meets it; its test is pending too, and waits without a hint
    service, _, run = _probed(tmp_path)
    rule_based_point(service, config=REVISE)
    events = run.read("events.jsonl")
    sentence = [e for e in events if e["kind"] == "trial" and "sentence_count" in str(e.get("result"))]
    assert [(e["remedy"], e["verdict_kind"]) for e in sentence] == [("requirement", "pending")]
    (deferred,) = [e for e in events if e["kind"] == "deferred" and "0 of 8 pooled" in e["reason"]]
    assert deferred["revisions"] == 0


def test_when_no_hinted_revision_comes_the_failure_is_deferred_as_pending(tmp_path):
    # the same world at max_revisions 0: no revision is possible, so the pending verdict defers as before
    service, harness, run = _probed(tmp_path)
    rule_based_point(service, config=GraphConfig(max_revisions=0))
    (deferred,) = _comma_deferred(run)
    assert deferred["reason"].startswith("pending:")
    assert all(harness.rubrics.current(t).guide_fraction == 0 for t in MOSTLY_COMMAS)


def _split_result(broken, rollouts, kind="pending") -> TrialResult:
    return TrialResult.model_validate(
        {
            "candidate_id": "c",
            "interface": "rubric_criteria",
            "metric": "check_split_share",
            "baseline": 0.0,
            "candidate": None,
            "improvement": None,
            "ci_low": None,
            "ci_high": None,
            "accepted": False,
            "verdict_kind": kind,
            "cost": {"rollouts": 0, "judge_calls": 0, "seconds": 0.0},
            "reason": "pending",
            "measurements": {"split": {"broken": broken, "rollouts": rollouts}},
        }
    )


def test_unmet_split_reads_the_pooled_test():
    assert unmet_split(_split_result(7, 8)) and unmet_split(_split_result(32, 36))
    assert not unmet_split(_split_result(4, 8)) and not unmet_split(_split_result(1, 8))
    assert not unmet_split(_split_result(0, 0))
    no_split = _split_result(1, 1).model_copy(update={"measurements": TrialMeasurements()})
    assert not unmet_split(no_split)


def test_an_llm_evolver_is_told_the_test_is_pending_and_its_hinted_revision_is_committed(tmp_path):
    """The scripted chat model stands in for an LLM: it proposes the plain no-comma check; the critic sends it back
    pending with the revision_pending prompt, and the model's revision, the same check with guide_fraction, is
    widened and committed on probation like the rule-based evolver's."""
    from harnessrl.agents.testing import ScriptedChatModel, tool_call
    from harnessrl.interfaces.tools import GetFailures

    service, harness, run = _probed(tmp_path)
    (failure,) = [f for f in service.get_failures(GetFailures()).failures if "commas" in f.summary]
    fid, task = failure.failure_id, failure.task_id
    add = [
        {"id": "nocomma", "text": "Uses no commas", "weight": 1, "check": {"type": "not_contains", "phrases": [","]}}
    ]
    told: list[str] = []

    def revise(messages):
        told.append(str(messages[-1].content))
        return tool_call("edit_rubric", {"failure_id": fid, "task_id": task, "add": add, "guide_fraction": 0.5})

    model = ScriptedChatModel(
        responses=[
            tool_call(
                "submit_attribution",
                {
                    "failure_id": fid,
                    "task_id": task,
                    "interface": "rubric_criteria",
                    "rationale": "the prompt forbids commas",
                },
            ),
            tool_call("edit_rubric", {"failure_id": fid, "task_id": task, "add": add}),
            revise,
        ]
    )
    config = GraphConfig(max_failures=1, failure_kinds=["unchecked_requirement"])
    (outcome,) = rule_based_point(service, model, config)
    assert outcome.status == "committed" and outcome.revisions == 1
    assert "pooled test is pending" in told[0] and "6 of 8 pooled rollouts" in told[0]
    verdicts = [e["verdict_kind"] for e in run.read("events.jsonl") if e["kind"] == "verdict"]
    assert verdicts == ["pending", "probation"]
    assert all(harness.rubrics.current(t).guide_fraction == 0.5 for t in MOSTLY_COMMAS)
