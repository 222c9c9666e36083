"""The critic's pending tests outlive a process (docs/design.md §4, "Resume"): their pooled evidence is saved after
every trial (``pending_tests.json``) and a resumed run goes on from the looks taken up to its checkpoint, so a test
does not start its error spending again.

The trainer-side service behind the real MCP tool server, the rule-based evolver and the critic's real trials with a
scripted policy sampler, as in ``test_unmet_pending``.
"""

from __future__ import annotations

import json
import logging

import pytest
from helpers import record_group, rule_based_point
from test_unmet_pending import _probed

from harnessrl.critic.power import SplitEvidence
from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.evolution.service import PENDING_TESTS, EvolutionService
from harnessrl.graph.state import GraphConfig

WAITING = GraphConfig(revise_unmet_pending=False)  # both tests of the probed world stay pending


def _evidence() -> SplitEvidence:
    e = SplitEvidence()
    for step, task, member, broken in [(2, "a", 0, True), (2, "a", 1, False), (5, "b", 0, True), (7, "a", 0, True)]:
        e.add(step, task, member, broken, at=step)
    e.look(2)
    e.look(5)
    e.add(-1, "a", 0, True, at=7)  # a fresh rollout a look at step 7 drew
    e.look(7)
    return e


def test_the_evidence_round_trips_and_stops_at_a_checkpoint():
    e = _evidence()
    back = SplitEvidence.from_json(json.loads(json.dumps(e.to_json())))
    assert back == e and (back.broken, back.rollouts, back.looks) == (4, 5, 3)
    at5 = e.until(5)
    assert (at5.broken, at5.rollouts, at5.looks, at5.look_steps) == (2, 3, 2, [2, 5])
    assert at5.fresh == [] and e.until(1) == SplitEvidence()


@pytest.mark.parametrize(
    "data",
    [{}, {"outcomes": [[1, "a"]], "fresh": [], "look_steps": []}, {"outcomes": [], "fresh": [], "look_steps": "x"}],
)
def test_unreadable_evidence_says_what_was_expected(data):
    with pytest.raises(ValueError, match=r"not a pending test's evidence.*'outcomes'"):
        SplitEvidence.from_json(data)


def _restarted(service: EvolutionService) -> EvolutionService:
    """A new process's service over the same run: the same harness and records, the critic's tests empty."""
    old = service.trials
    trials = FrozenPolicyTrials(old.harness, old.recorder, old.judge, old.sampler, old.config)
    resumed = EvolutionService(
        service.harness, service.recorder, None, trials, service.run_dir, failures=lambda: [], step=lambda: 1
    )
    resumed.run_audit(record=False)  # as a resumed run does: its findings again, no second event
    return resumed


def test_pending_tests_are_saved_after_each_trial_and_a_resumed_run_goes_on_from_them(tmp_path):
    service, _, run = _probed(tmp_path)
    rule_based_point(service, config=WAITING)  # both findings' tests stay pending at step 0: 6 of 8 and 0 of 8 broken
    saved = run.read_json(PENDING_TESTS)
    assert saved["step"] == 0 and len(saved["tests"]) == 2
    looks = {k: len(v["look_steps"]) for k, v in saved["tests"].items()}
    assert sorted(looks.values()) == [1, 1]
    broken = sorted(sum(b for *_, b in v["outcomes"]) for v in saved["tests"].values())
    assert broken == [0, 6]

    resumed = _restarted(service)
    assert resumed.restore_pending(through_step=0) == looks
    assert {k: (v.broken, v.rollouts, v.looks) for k, v in resumed.trials.split_evidence.items()} == {
        k: (sum(b for *_, b in v["outcomes"]), 8, 1) for k, v in saved["tests"].items()
    }
    # a group of sea graded at step 1; the next look at each repair is its second: look 2's error, not look 1's again
    sea = ["The sea, wide.", "The sea, calm.", "Sea, sky.", "A grey sea."]
    record_group(resumed.harness, resumed.trials.judge, resumed.recorder, 1, "sea", sea)
    rule_based_point(resumed, config=WAITING)
    trials = [e for e in run.read("events.jsonl") if e["kind"] == "trial" and e.get("verdict_kind") == "pending"]
    assert [t["result"]["measurements"]["split"]["look"] for t in trials[-2:]] == [2, 2]


def test_a_checkpoint_before_the_looks_restores_nothing(tmp_path):
    service, _, _ = _probed(tmp_path)
    rule_based_point(service, config=WAITING)
    resumed = _restarted(service)
    assert resumed.restore_pending(through_step=-1) == {} and resumed.trials.split_evidence == {}


def test_an_unreadable_file_is_moved_aside_and_the_tests_start_again(tmp_path, caplog):
    service, _, run = _probed(tmp_path)
    rule_based_point(service, config=WAITING)
    run.file(PENDING_TESTS).write_text('{"step": 0, "tests": {"k": {"outcomes": 3}}}')
    resumed = _restarted(service)
    with caplog.at_level(logging.WARNING):
        assert resumed.restore_pending(through_step=5) == {}
    assert "cannot be read" in caplog.text and "start again" in caplog.text
    assert not run.file(PENDING_TESTS).exists()
    assert run.file(f"{PENDING_TESTS}.unreadable").read_text().startswith('{"step": 0')


def test_a_resume_restores_the_pending_tests_with_the_rest_of_the_listeners(tmp_path):
    from harnessrl.trainer.resume import Resumed, restore_listeners

    service, _, run = _probed(tmp_path)
    rule_based_point(service, config=WAITING)
    resumed = _restarted(service)
    restore_listeners(run, Resumed(checkpoint=str(tmp_path / "checkpoint-0")), resumed.recorder, None, resumed, 16)
    assert sorted(v.looks for v in resumed.trials.split_evidence.values()) == [1, 1]
