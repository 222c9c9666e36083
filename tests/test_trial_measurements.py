"""A trial's measurements as typed fields: the JSON stays the dict the critic wrote (the keys it set, in the order it
set them, no others), and the trial events of runs written before they were typed load and write back unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.records.measurements import ProbedTask, ReferenceGuard, RubricFade, SplitLook, TrialMeasurements
from harnessrl.records.trials import TrialResult

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / "benchmarks/results/demo/events.jsonl", ROOT / "tests/data/demo-735bc61-events.jsonl"]


def _trial_results() -> list[dict]:
    out = []
    for path in RUNS:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["kind"] == "trial":
                out.append(event["result"])
    return out


def test_the_trial_events_of_committed_runs_load_and_write_back_byte_for_byte():
    """The measurements of every trial in the committed runs (older than ``verdict_kind``, so the trial results around
    them are older than the contract; their measurements are read here)."""
    results = _trial_results()
    assert len(results) > 50
    kinds = set()
    for result in results:
        written = result["measurements"]
        m = TrialMeasurements.model_validate(written)
        assert json.dumps(m.model_dump(mode="json")) == json.dumps(written)
        from_json = TrialMeasurements.model_validate_json(json.dumps(written))
        assert json.dumps(from_json.model_dump(mode="json")) == json.dumps(written) and from_json == m
        kinds.add(type(m.tasks).__name__)
    assert kinds == {"NoneType", "list", "dict"}  # rubric re-grades, rollout arms and moved draws among them


def test_a_trial_result_writes_its_measurements_as_they_were_written():
    result = _trial_results()[0]
    trial = TrialResult.model_validate({"verdict_kind": "accepted", **result})
    assert json.dumps(trial.model_dump(mode="json")["measurements"]) == json.dumps(result["measurements"])
    assert json.loads(trial.model_dump_json())["measurements"] == result["measurements"]


def test_a_committed_run_reads_as_typed_fields():
    by_kind = {}
    for result in _trial_results():
        by_kind.setdefault(result["interface"], TrialMeasurements.model_validate(result["measurements"]))
    rubric, guidance = by_kind["rubric_criteria"], by_kind["rollout_guidance"]
    assert rubric.learning_signal is not None and isinstance(rubric.learning_signal.gives_signal_baseline, list)
    assert isinstance(rubric.bootstrap, int) and guidance.scope in ("task", "domain")


def test_the_fields_dump_in_the_order_they_were_set_and_only_those():
    m = TrialMeasurements(failure_kind=None, seed=3)
    m.n_groups = 2
    m.reference_guard = None  # set to None: present, as the critic writes a task without a reference answer
    m.task_id = "t"
    m.seed = 4  # set again: keeps its place, as a dict key does
    assert list(m.model_dump()) == ["failure_kind", "seed", "n_groups", "reference_guard", "task_id"]
    assert m.model_dump()["seed"] == 4 and m.model_dump()["reference_guard"] is None
    assert TrialMeasurements().model_dump(mode="json") == {}


def test_nested_records_keep_their_keys_and_an_alias():
    guard = ReferenceGuard(task_id="b", reference_reward=0.5, policy_median=0.4, passed=True)
    fade = RubricFade(from_=0.5, to=None, checks={"t": ["c1"]})
    m = TrialMeasurements(reference_guard_covered=[guard], fade=fade)
    dumped = m.model_dump(mode="json")
    assert list(dumped["reference_guard_covered"][0]) == ["task_id", "reference_reward", "policy_median", "passed"]
    assert dumped["fade"] == {"from": 0.5, "to": None, "checks": {"t": ["c1"]}}
    again = TrialMeasurements.model_validate_json(json.dumps(dumped))
    assert again.fade is not None and again.fade.from_ == 0.5 and again.model_dump(mode="json") == dumped


def test_keys_an_older_run_or_a_plugin_wrote_are_kept():
    written = {"seed": 0, "split": {"broken": 3, "rollouts": 4, "old_key": [1]}, "plugin_metric": {"x": 1}}
    m = TrialMeasurements.model_validate(written)
    assert m.split is not None and m.split.broken == 3 and m.split.look is None  # a field it lacks is None
    assert m.model_dump() == written
    m.my_own_per_group = {"baseline": [True], "candidate": [False]}  # a plug-in metric's per-group verdicts
    assert list(m.model_dump())[-1] == "my_own_per_group"


def test_a_copy_does_not_write_into_the_original():
    m = TrialMeasurements(seed=1)
    copy = m.model_copy()
    copy.n_groups = 3
    assert m.model_dump() == {"seed": 1} and copy.model_dump() == {"seed": 1, "n_groups": 3}


def test_a_row_built_then_filled_in_dumps_as_the_dict_it_replaces():
    row = ProbedTask(task_id="t", members_changed=[0], baseline_rewards=[1.0, None])
    row.baseline_mean = 1.0
    row.targeted_criteria = ["c"]
    assert json.dumps(row.model_dump(mode="json")) == json.dumps(
        {
            "task_id": "t",
            "members_changed": [0],
            "baseline_rewards": [1.0, None],
            "baseline_mean": 1.0,
            "targeted_criteria": ["c"],
        }
    )


def test_a_malformed_known_field_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"split\.broken"):
        TrialMeasurements.model_validate({"split": SplitLook(broken=1).model_dump() | {"broken": "many"}})
