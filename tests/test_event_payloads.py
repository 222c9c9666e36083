"""Each event kind's typed payload (harnessrl.records.event_payloads): written as it was, read back typed, older runs'
lines still loading; and a probation rebuilt from its own events (Probation.from_events)."""

from __future__ import annotations

import json

import pytest

from harnessrl.errors import HarnessRLError
from harnessrl.evolution.probation import Probation, ProbationRule, ProbationTracker
from harnessrl.interfaces import SetGuidance
from harnessrl.records.event_payloads import (
    EVENT_PAYLOADS,
    CommitPayload,
    DeferredPayload,
    EventPayload,
    FailurePayload,
    ProbationPayload,
    RevertPayload,
    parse_payload,
)
from harnessrl.records.events import ALL_EVENT_KINDS, Event
from harnessrl.records.run_dir import RunDir
from harnessrl.records.run_record import read_events
from harnessrl.records.steps import GroupRecord, StepRecord

# lines as the writers wrote them before the payloads were typed (key order included)
WRITTEN = {
    "commit": {
        "candidate_id": "c1",
        "interface": "rollout_guidance",
        "failure_id": "f1",
        "version": 1,
        "applies_from_step": 3,
        "remedy": None,
        "covers": ["fruit"],
        "update": {"interface": "rollout_guidance", "target": "fruit"},
        "probation": True,
        "revert": [{"interface": "rollout_guidance", "target": "fruit", "text": None, "fraction": 0.0}],
        "signal_share_before": 0.0,
        "groups_before": 2,
        "probation_prior": {"broken": 1, "rollouts": 4, "looks": 1, "group_size": 4},
    },
    "probation": {
        "candidate_id": "c1",
        "task_ids": ["fruit"],
        "applied_step": 3,
        "look": 1,
        "max_looks": 3,
        "groups": 2,
        "signal_groups": 0,
        "signal_share": 0.0,
        "interval": [0.0, 0.7764],
        "alpha_spending": "halving",
        "alpha_per_look": 0.025,
        "signal_share_before": 0.0,
        "groups_before": 2,
        "target": 0.3,
        "min_detectable": 0.6,
        "guided_mean_reward": 0.0,
        "unguided_mean_reward": 0.25,
        "guided_rollouts": 2,
        "unguided_rollouts": 6,
        "split": {
            "broken": 2,
            "rollouts": 8,
            "group_size": 4,
            "split_share": 0.5,
            "interval": [0.1, 0.9],
            "threshold": 0.2,
            "min_detectable": None,
        },
        "decided_by": "check_split_share",
        "verdict_kind": "pending",
        "action": None,
    },
    "deferred": {
        "failure_id": "f1",
        "task_id": "city",
        "failure_kind": "unchecked_requirement",
        "interface": "rubric_criteria",
        "candidate_id": "c2",
        "revisions": 0,
        "candidates": ["c2"],
        "reason": "pending",
        "evidence_draw": {"task_id": "city", "step": 3},
    },
    "evolution_point": {
        "early": None,
        "seconds": 1.5,
        "stop_reason": "done",
        "error": None,
        "mode": "in-process",
        "trials": 2,
        "trial_seconds": 0.75,
        "handled": 1,
        "committed": 1,
    },
    "failure": {
        "task_id": "t1",
        "domain": "d",
        "rubric_version": 0,
        "evidence": {"rewards": [0, 0], "mean": 0, "n": 2},
        "summary": "flat",
        "interface_hint": None,
        "failure": "non_discriminative_low",
    },
}


def test_every_event_kind_has_its_payload_model():
    assert set(EVENT_PAYLOADS) == set(ALL_EVENT_KINDS)
    assert all(kind == model.KIND for kind, model in EVENT_PAYLOADS.items())


@pytest.mark.parametrize("kind", sorted(WRITTEN))
def test_a_payload_is_written_back_as_it_was_read(kind):
    """Same keys, same order, same values (an int stays an int, a None stays written, an absent key absent)."""
    raw = WRITTEN[kind]
    payload = parse_payload(kind, raw)
    assert type(payload) is EVENT_PAYLOADS[kind]
    assert json.dumps(payload.written()) == json.dumps(raw)


def test_an_older_runs_line_loads_with_its_fields_absent_and_its_unknown_keys_kept():
    older = {"candidate_id": "c1", "interface": "task_sampling", "version": 2, "from_an_older_version": [1]}
    commit = parse_payload("commit", older)
    assert isinstance(commit, CommitPayload) and commit.covers == [] and commit.probation is False
    assert commit.written() == older


def test_a_payload_that_does_not_fit_its_model_says_which_kind_and_field():
    event = Event.model_validate({"time": 0.0, "kind": "probation", "step": 4, "look": "second"})
    with pytest.raises(HarnessRLError, match=r"step 4.*'probation'.*look"):
        event.payload()


def test_an_event_gives_its_kinds_model_and_refuses_another():
    event = Event.model_validate({"time": 0.0, "kind": "failure", "step": 2, **WRITTEN["failure"]})
    failure = event.payload_as(FailurePayload)
    assert failure.typed_evidence.n == 2 and failure.typed_evidence.subject is None
    with pytest.raises(ValueError, match="FailurePayload, not CommitPayload"):
        event.payload_as(CommitPayload)


def test_a_writer_writes_the_model_it_built(tmp_path):
    run = RunDir(tmp_path)
    payload = DeferredPayload.model_validate(WRITTEN["deferred"])
    run.event(payload.KIND, step=2, **payload.written())
    (line,) = run.read("events.jsonl")
    assert list(line)[3:] == list(WRITTEN["deferred"]) and line["evidence_draw"] == {"task_id": "city", "step": 3}
    (event,) = read_events(tmp_path)
    assert isinstance(event.payload(), DeferredPayload) and event.payload().evidence_draw.step == 3


def _event(kind: str, step: int, payload: EventPayload | dict) -> Event:
    fields = payload.written() if isinstance(payload, EventPayload) else payload
    return Event.model_validate({"time": 0.0, "kind": kind, "step": step, **fields})


def _parse(u):
    return SetGuidance.model_validate(u)


def _group(step: int, guided: int, rewards: list[float]) -> GroupRecord:
    return GroupRecord(step=step, task_id="fruit", domain="food", rubric_version=0, guided=guided, rewards=rewards,
                       mean=sum(rewards) / len(rewards), std=0.4, flat=False, lengths=[2] * len(rewards),
                       criterion_means={})  # fmt: skip


def test_a_probation_rebuilds_itself_from_the_events_it_wrote():
    """A probation's commit fields and its look are its events; from_events brings a fresh one to the same counts."""
    tracker = ProbationTracker(None, ProbationRule(0.3, 0.9, 3, 1, 0.2, "halving"))
    revert = [SetGuidance(target="fruit", text=None, fraction=0.0)]
    p = tracker.start("c1", ["fruit"], applied_step=3, revert=revert)
    commit = CommitPayload(candidate_id="c1", covers=["fruit"], applies_from_step=3, **p.event_fields())
    (look,) = tracker.observe(StepRecord(step=3, groups=[_group(3, 2, [1.0, 0.0, 0.0, 0.0])]))
    assert isinstance(look.payload, ProbationPayload) and look.payload.look == 1
    events = [_event("commit", 2, commit), _event("probation", 3, look.payload)]

    (again,) = Probation.from_events(events, through_step=3, parse=_parse).values()
    assert (again.groups, again.signal, again.looks, again.last_step) == (p.groups, p.signal, p.looks, 3)
    assert (again.guided_n, again.unguided_n) == (p.guided_n, p.unguided_n) == (2, 2)
    assert again.guided_sum == pytest.approx(p.guided_sum) and again.revert == revert
    assert again.event_fields() == p.event_fields()

    assert Probation.from_events(events, through_step=2, parse=_parse)["c1"].looks == 0  # the look came after
    reverted = _event("revert", 9, p.reverted(9, [2], look.reason()))
    assert isinstance(reverted.payload(), RevertPayload) and "at look 1" in reverted.payload().reason
    assert Probation.from_events([*events, reverted], through_step=3, parse=_parse) == {}  # a revert closes it
