"""The evolution path keeps its types: one candidate status, the trial tool's result parsed once into the
contract's TrialResult, and a critic decision that holds that result instead of copying its fields."""

from __future__ import annotations

import inspect
import json
import typing
from types import SimpleNamespace

from helpers import AcceptAll
from langchain_core.messages import ToolMessage

from harnessrl.agents.critic_node import _decision
from harnessrl.evolution.service import EvolutionService, TrialRunner
from harnessrl.graph.state import CriticDecision
from harnessrl.interfaces.tools import Candidate
from harnessrl.records.trials import CandidateStatus, TrialResult


def _trial() -> TrialResult:
    return AcceptAll().run(SimpleNamespace(interface="rollout_guidance"), "c1-00000000")


def _answer(content: str, status: str = "success") -> ToolMessage:
    return ToolMessage(content=content, tool_call_id="t1", name="run_frozen_policy_trial", status=status)


def test_one_candidate_status_for_the_tools_and_the_memory():
    from harnessrl.memory.store import CandidateEntry

    assert Candidate.model_fields["status"].annotation is CandidateStatus
    assert CandidateEntry.model_fields["verdict"].annotation is CandidateStatus
    assert typing.get_args(CandidateStatus) == ("proposed", "accepted", "rejected", "pending", "committed")


def test_the_trial_tool_and_its_runner_are_typed_with_the_records_trial_result():
    from harnessrl.evolution import service
    from harnessrl.interfaces.tools import tool_table

    for fn in (EvolutionService.run_frozen_policy_trial, TrialRunner.run):
        assert eval(inspect.signature(fn).return_annotation, vars(service)) is TrialResult
    # the tool contract names the records' TrialResult as the trial tool's result, and the server serves that
    assert tool_table()["run_frozen_policy_trial"].result is TrialResult


def test_a_decision_holds_its_trial_and_declares_none_of_its_fields():
    assert set(CriticDecision.model_fields) & set(TrialResult.model_fields) <= {"candidate_id"}
    trial = _trial()
    decision = _decision(_answer(trial.model_dump_json()), "f1", trial.candidate_id, revision=1)
    assert decision.trial == trial and decision.accepted and decision.reason == trial.reason
    assert decision.trial_json() == trial.model_dump(mode="json")
    verdict = decision.verdict_event().written()  # the event's line: its keys in the order written
    assert list(verdict) == [
        "failure_id", "candidate_id", "accepted", "reason", "measurements",
        "metric", "baseline", "candidate", "improvement", "ci_low", "ci_high", "revision",
    ]  # fmt: skip
    assert (verdict["metric"], verdict["improvement"], verdict["revision"]) == ("signal_share", trial.improvement, 1)
    assert decision.view().model_dump(exclude_unset=True) == {
        k: v for k, v in trial.model_dump().items() if k in ("accepted", "verdict_kind", "reason", "metric", "baseline",
                                                             "candidate", "improvement", "ci_low", "ci_high",
                                                             "measurements")
    }  # fmt: skip


def test_a_failed_or_unreadable_trial_is_a_rejection_with_the_reason():
    failed = _decision(_answer("the policy fell over", status="error"), "f1", "c1", revision=0)
    assert failed.trial is None and not failed.accepted
    assert failed.reason == "the trial failed: the policy fell over"
    assert failed.trial_json() == {"candidate_id": "c1", "accepted": False, "reason": failed.reason, "measurements": {}}
    verdict = failed.verdict_event().written()
    assert verdict["metric"] is None and verdict["measurements"] == {}
    partial = _decision(_answer(json.dumps({"accepted": True})), "f1", "c1", revision=0)
    assert not partial.accepted and partial.reason.startswith("unreadable trial result: {'accepted': True}")
