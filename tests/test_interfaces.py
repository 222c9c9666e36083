"""The three harness interfaces and the harness that holds them: fast, offline, no models."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pydantic import ValidationError

from harnessrl.data.schema import Criterion, Task
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces import (
    EditRubric,
    Harness,
    ReweightTasks,
    RolloutGuidance,
    RubricCriteria,
    SetGuidance,
    TaskSampling,
    guided_count,
    parse_update,
)
from harnessrl.interfaces import harness as harness_mod
from harnessrl.interfaces.guidance import HINT_TEMPLATE

# --------------------------------------------------------------------------- helpers


def make_task(tid: str, domain: str = "science", prompt: str | list[dict] | None = None, **kw) -> Task:
    rubric = kw.pop(
        "rubric",
        [
            {"id": "c1", "text": "States the main fact correctly.", "weight": 2.0},
            {"id": "c2", "text": "Explains the reasoning.", "weight": 1.0},
            {"id": "p1", "text": "Pads the answer with filler.", "weight": -1.0},
        ],
    )
    return Task(id=tid, domain=domain, prompt=prompt or f"Question {tid}?", rubric=rubric, **kw)


@pytest.fixture
def tasks() -> list[Task]:
    return [
        make_task("t1", "science"),
        make_task("t2", "science"),
        make_task("t3", "medical"),
        make_task(
            "t4",
            "writing",
            prompt=[
                {"role": "system", "content": "You are a careful writer."},
                {"role": "user", "content": "Draft an opening line."},
                {"role": "assistant", "content": "Once upon a time."},
                {"role": "user", "content": "Make it shorter."},
            ],
        ),
    ]


def draw_counts(ts: TaskSampling, n_steps: int, per_step: int = 1, start: int = 0) -> Counter:
    c: Counter = Counter()
    for step in range(start, start + n_steps):
        c.update(ts.sample(per_step, step))
    return c


# --------------------------------------------------------------------------- task sampling


class TestTaskSampling:
    def test_uniform_by_default(self):
        ts = TaskSampling(["a", "b", "c", "d"], seed=3)
        probs = ts.probabilities(0)
        assert probs == pytest.approx(dict.fromkeys("abcd", 0.25))
        counts = draw_counts(ts, 4000)
        for t in "abcd":
            assert counts[t] / 4000 == pytest.approx(0.25, abs=0.03)

    def test_weights_honoured(self):
        ts = TaskSampling(["a", "b", "c"], seed=1)
        ts.apply(ReweightTasks(task_ids=["a"], weight=4.0), step=0)
        assert ts.probabilities(0) == pytest.approx({"a": 4 / 6, "b": 1 / 6, "c": 1 / 6})
        counts = draw_counts(ts, 4000)
        assert counts["a"] / 4000 == pytest.approx(4 / 6, abs=0.03)
        # a weight-4 task is drawn about four times as often as a weight-1 task
        assert counts["a"] / counts["b"] == pytest.approx(4.0, rel=0.15)
        assert counts["a"] / counts["c"] == pytest.approx(4.0, rel=0.15)

    @pytest.mark.parametrize("floor", [0.1, 0.3, 1.0])
    def test_floor_keeps_tiny_weight_task(self, floor):
        ids = ["a", "b", "tiny"]
        ts = TaskSampling(ids, floor=floor)
        ts.apply(ReweightTasks(task_ids=["a"], weight=100.0), step=0)
        ts.apply(ReweightTasks(task_ids=["tiny"], weight=1e-6), step=0)
        probs = ts.probabilities(0)
        assert sum(probs.values()) == pytest.approx(1.0)
        for t in ids:
            assert probs[t] >= floor / len(ids) - 1e-12, (t, probs)
        if floor < 1:
            # tasks above the floor keep their relative weights
            assert probs["a"] > probs["b"] >= probs["tiny"]

    def test_floor_two_tasks(self):
        ts = TaskSampling(["big", "tiny"], floor=0.1)
        ts.apply(ReweightTasks(task_ids=["tiny"], weight=1e-6), step=0)
        probs = ts.probabilities(0)
        assert probs["tiny"] >= 0.1 / 2 - 1e-12
        assert probs["big"] + probs["tiny"] == pytest.approx(1.0)
        counts = draw_counts(ts, 4000)
        assert counts["tiny"] / 4000 >= 0.05 - 0.015

    def test_floor_does_not_disturb_tasks_above_it(self):
        ts = TaskSampling(["a", "b", "c", "d"], floor=0.1)
        ts.apply(ReweightTasks(task_ids=["a"], weight=2.0), step=0)
        probs = ts.probabilities(0)
        assert probs == pytest.approx({"a": 0.4, "b": 0.2, "c": 0.2, "d": 0.2})

    def test_park_until_step(self):
        ts = TaskSampling(["a", "b", "c"])
        ts.apply(ReweightTasks(task_ids=["a"], action="park", park_steps=5), step=10)
        for step in range(10, 15):
            assert ts.status_at("a", step) == "parked"
            assert ts.probabilities(step)["a"] == 0.0
            assert "a" not in ts.sample(2, step)
        assert ts.status_at("a", 15) == "active"
        assert ts.probabilities(15)["a"] == pytest.approx(1 / 3)
        assert draw_counts(ts, 200, start=15)["a"] > 0
        assert draw_counts(ts, 200, start=10)["a"] > 0  # back from step 15 on
        assert sum(draw_counts(ts, 5, start=10).values()) == 5
        assert draw_counts(ts, 5, start=10)["a"] == 0

    def test_retire_is_for_good_and_activate_brings_back(self):
        ts = TaskSampling(["a", "b", "c"])
        ts.apply(ReweightTasks(task_ids=["b"], action="retire"), step=0)
        for step in (0, 1, 100, 10**6):
            assert ts.status_at("b", step) == "retired"
            assert ts.probabilities(step)["b"] == 0.0
        assert draw_counts(ts, 500)["b"] == 0
        # a reweight does not bring a retired task back ...
        ts.apply(ReweightTasks(task_ids=["b"], weight=3.0), step=1)
        assert ts.status_at("b", 2) == "retired"
        assert ts.probabilities(2)["b"] == 0.0
        # ... activate does, with the weight it was given
        ts.apply(ReweightTasks(task_ids=["b"], action="activate"), step=2)
        assert ts.status_at("b", 2) == "active"
        assert ts.probabilities(2)["b"] == pytest.approx(3 / 5)

    def test_activate_unparks_early(self):
        ts = TaskSampling(["a", "b"])
        ts.apply(ReweightTasks(task_ids=["a"], action="park", park_steps=1000), step=0)
        assert ts.probabilities(5)["a"] == 0.0
        ts.apply(ReweightTasks(task_ids=["a"], action="activate"), step=5)
        assert ts.probabilities(5)["a"] == pytest.approx(0.5)
        assert "a" not in ts.state.parked_until

    def test_all_parked_or_retired_does_not_crash(self):
        ts = TaskSampling(["a", "b", "c"])
        ts.apply(ReweightTasks(task_ids=["a", "b"], action="park", park_steps=10), step=0)
        ts.apply(ReweightTasks(task_ids=["c"], action="retire"), step=0)
        probs = ts.probabilities(1)
        assert sum(probs.values()) == pytest.approx(1.0)
        assert probs["c"] == 0.0  # falls back to the parked ones, not the retired one
        out = ts.sample(2, 1)
        assert sorted(out) == ["a", "b"]
        assert len(ts.sample(5, 1)) == 5
        ts.apply(ReweightTasks(task_ids=["a", "b"], action="retire"), step=1)
        probs = ts.probabilities(2)
        assert sum(probs.values()) == pytest.approx(1.0)
        assert len(ts.sample(3, 2)) == 3
        assert len(ts.sample(7, 2)) == 7

    def test_sample_distinct_when_enough_eligible(self):
        ts = TaskSampling([f"t{i}" for i in range(10)], seed=7)
        ts.apply(ReweightTasks(task_ids=["t0"], weight=50.0), step=0)
        ts.apply(ReweightTasks(task_ids=["t1", "t2"], action="retire"), step=0)
        for step in range(50):
            out = ts.sample(8, step)  # 8 eligible
            assert len(out) == 8 and len(set(out)) == 8
            assert not {"t1", "t2"} & set(out)
        out = ts.sample(20, 3)  # more than eligible: repeats allowed, length honoured
        assert len(out) == 20
        assert not {"t1", "t2"} & set(out)

    def test_sample_deterministic_across_instances(self):
        ids = [f"t{i}" for i in range(12)]
        a = TaskSampling(ids, seed=42)
        b = TaskSampling(ids, seed=42)
        for ts in (a, b):
            ts.apply(ReweightTasks(task_ids=["t3"], weight=5.0), step=0)
        for step in range(30):
            assert a.sample(4, step) == b.sample(4, step)
            assert a.sample(4, step) == a.sample(4, step)  # sampling does not consume state
        # different steps give different draws
        draws = {tuple(a.sample(4, step)) for step in range(30)}
        assert len(draws) > 20
        # a different seed gives a different sequence
        c = TaskSampling(ids, seed=43)
        c.apply(ReweightTasks(task_ids=["t3"], weight=5.0), step=0)
        assert [a.sample(4, s) for s in range(10)] != [c.sample(4, s) for s in range(10)]

    def test_restored_sampler_draws_the_same(self):
        ts = TaskSampling([f"t{i}" for i in range(6)], seed=9)
        ts.apply(ReweightTasks(task_ids=["t1"], weight=3.0), step=0)
        restored = TaskSampling.from_dict(json.loads(json.dumps(ts.to_dict())))
        assert [ts.sample(3, s) for s in range(20)] == [restored.sample(3, s) for s in range(20)]

    def test_an_evidence_draw_takes_one_place_of_its_step_and_nothing_else(self):
        """A pending test's request: its task is drawn at the step asked for, in one place (never more than half
        the batch); the other places are drawn from the rest; every other step, the probabilities, the version and
        the history are as without it; it survives a save and restore, and a parked task is not drawn for it."""
        ids = [f"t{i}" for i in range(12)]
        plain, ts = TaskSampling(ids, seed=5), TaskSampling(ids, seed=5)
        asked = ts.request_evidence(["t7", "t3"], step=4)
        assert asked == ("t7", 4)
        assert ts.request_evidence(["t3", "t7"], step=4) is None  # t7 is due already: the test waits for it
        assert ts.request_evidence(["t3"], step=4) == ("t3", 5)  # another test: the next step with a place
        drawn = ts.sample(2, 4)
        assert drawn[0] == "t7" and drawn[1] != "t7"
        assert ts.sample(2, 5)[0] == "t3"
        assert ts.sample(1, 4) == plain.sample(1, 4)  # a batch of one task has no place for it
        assert [ts.sample(2, s) for s in (1, 2, 3, 6, 7)] == [plain.sample(2, s) for s in (1, 2, 3, 6, 7)]
        assert ts.probabilities(4) == plain.probabilities(4) and ts.version == 0 and ts.state.history == []
        restored = TaskSampling.from_dict(json.loads(json.dumps(ts.to_dict())))
        assert [restored.sample(2, s) for s in range(8)] == [ts.sample(2, s) for s in range(8)]
        ts.apply(ReweightTasks(task_ids=["t7"], action="park", park_steps=3), step=4)
        assert "t7" not in ts.sample(2, 4)
        assert ts.request_evidence(["t7"], step=6) is None  # parked: not eligible, nothing asked

    def test_preview_changes_nothing(self):
        ts = TaskSampling(["a", "b", "c"])
        before = ts.to_dict()
        probs = ts.probabilities_with(ReweightTasks(task_ids=["a"], action="retire"), step=0)
        assert probs["a"] == 0.0 and probs["b"] == pytest.approx(0.5)
        probs = ts.probabilities_with(ReweightTasks(task_ids=["b"], weight=2.0), step=0)
        assert probs["b"] == pytest.approx(0.5)
        assert ts.to_dict() == before
        assert ts.version == 0 and ts.probabilities(0)["a"] == pytest.approx(1 / 3)
        with pytest.raises(ValueError, match="unknown task"):
            ts.probabilities_with(ReweightTasks(task_ids=["zz"], weight=2.0), step=0)

    def test_version_and_history(self):
        ts = TaskSampling(["a", "b"])
        assert ts.version == 0 and ts.state.history == []
        v = ts.apply(ReweightTasks(task_ids=["a"], weight=2.0, rationale="learnable"), step=3, candidate_id="c-1")
        assert v == 1 == ts.version
        v = ts.apply(ReweightTasks(task_ids=["b"], action="park", park_steps=2), step=4)
        assert v == 2 == ts.version
        h = ts.state.history
        assert [x.version for x in h] == [1, 2]
        assert [x.step for x in h] == [3, 4]
        assert h[0].candidate_id == "c-1" and h[1].candidate_id is None
        assert h[0].update["weight"] == 2.0 and h[0].update["rationale"] == "learnable"
        assert h[1].update["action"] == "park"

    def test_unknown_task_ids_raise_and_change_nothing(self):
        ts = TaskSampling(["a", "b"])
        before = ts.to_dict()
        with pytest.raises(ValueError, match="unknown task id"):
            ts.apply(ReweightTasks(task_ids=["a", "nope"], weight=2.0), step=0)
        assert ts.to_dict() == before  # not half-applied

    def test_reweight_validation(self):
        with pytest.raises(ValidationError, match="needs a weight"):
            ReweightTasks(task_ids=["a"], action="reweight")
        with pytest.raises(ValidationError, match="park_steps"):
            ReweightTasks(task_ids=["a"], action="park")
        with pytest.raises(ValidationError):
            ReweightTasks(task_ids=[], weight=1.0)
        with pytest.raises(ValidationError):
            ReweightTasks(task_ids=["a"], weight=0.0)
        with pytest.raises(ValidationError):
            ReweightTasks(task_ids=["a"], weight=-1.0)
        with pytest.raises(ValidationError):
            ReweightTasks(task_ids=["a"], action="park", park_steps=0)
        with pytest.raises(ValidationError):
            ReweightTasks(task_ids=["a"], action="delete")
        ReweightTasks(task_ids=["a"], action="retire")
        ReweightTasks(task_ids=["a"], action="activate")

    def test_constructor_validation(self):
        with pytest.raises(ConfigError):
            TaskSampling([])
        with pytest.raises(ConfigError):
            TaskSampling(["a"], floor=1.5)
        ts = TaskSampling(["a", "b", "a"])
        assert ts.task_ids == ["a", "b"]

    def test_round_trip(self):
        ts = TaskSampling(["a", "b", "c"], floor=0.2, seed=5)
        ts.apply(ReweightTasks(task_ids=["a"], weight=3.0), step=1)
        ts.apply(ReweightTasks(task_ids=["b"], action="park", park_steps=4), step=2)
        ts.apply(ReweightTasks(task_ids=["c"], action="retire"), step=3)
        d = ts.to_dict()
        text = json.dumps(d)  # JSON-serialisable
        back = TaskSampling.from_dict(json.loads(text))
        assert back.to_dict() == d
        assert back.seed == 5 and back.version == 3 and back.state.floor == 0.2
        for step in (3, 6, 7):
            assert back.probabilities(step) == ts.probabilities(step)
        assert back.status_at("b", 5) == "parked" and back.status_at("b", 6) == "active"


# --------------------------------------------------------------------------- rollout guidance


def expected_guided(group_size: int, fraction: float) -> int:
    if fraction <= 0:
        return 0
    return min(group_size - 1, max(1, int(fraction * group_size + 0.5)))


class TestRolloutGuidance:
    @pytest.mark.parametrize("group_size", [2, 4, 8, 16])
    @pytest.mark.parametrize("fraction", [0.0, 0.1, 0.25, 0.5, 0.75, 1.0])
    def test_guided_count_and_members(self, group_size, fraction):
        k = guided_count(group_size, fraction)
        assert k == expected_guided(group_size, fraction)
        if fraction > 0:
            assert 1 <= k <= group_size - 1
        else:
            assert k == 0
        if 1 <= round(fraction * group_size) <= group_size - 1:
            assert k == round(fraction * group_size)
        task = make_task("t1")
        g = RolloutGuidance()
        if fraction > 0:
            g.apply(SetGuidance(target="t1", text="think step by step", fraction=fraction), step=0)
        flags = [g.prompt_for(task, m, group_size)[1] for m in range(group_size)]
        assert sum(flags) == k
        assert flags == [True] * k + [False] * (group_size - k)

    def test_guided_count_edge_cases(self):
        assert guided_count(1, 0.5) == 0  # a group of one is never guided
        assert guided_count(0, 1.0) == 0
        assert guided_count(100, 0.001) == 1
        assert guided_count(100, 1.0) == 99
        assert guided_count(10, 0.35) == 4  # 3.5 rounds up

    def test_hint_goes_to_last_user_message_only(self, tasks):
        task = tasks[3]  # system, user, assistant, user
        original = task.messages()
        g = RolloutGuidance()
        g.apply(SetGuidance(target="t4", text="  Use at most five words.  ", fraction=0.5), step=0)
        guided, flag = g.prompt_for(task, 0, 4)
        assert flag
        assert len(guided) == len(original)
        assert guided[:3] == original[:3]
        assert guided[3]["role"] == "user"
        assert guided[3]["content"] == "Make it shorter." + HINT_TEMPLATE.format(text="Use at most five words.")
        assert "Use at most five words." not in guided[1]["content"]
        # the task's own prompt is untouched
        assert task.messages() == original
        for member in (2, 3):
            msgs, flag = g.prompt_for(task, member, 4)
            assert not flag and msgs == original

    def test_text_prompt_guidance(self):
        task = make_task("t1", prompt="What is 2+2?")
        g = RolloutGuidance()
        g.apply(SetGuidance(target="t1", text="add the numbers", fraction=0.25), step=0)
        msgs, flag = g.prompt_for(task, 0, 8)
        assert flag and msgs == [{"role": "user", "content": "What is 2+2?\n\n(Hint: add the numbers)"}]
        msgs, flag = g.prompt_for(task, 2, 8)
        assert not flag and msgs == [{"role": "user", "content": "What is 2+2?"}]

    def test_system_prompt_is_kept(self):
        task = make_task(
            "s1",
            prompt=[
                {"role": "system", "content": "Answer in French."},
                {"role": "user", "content": "Name a colour."},
            ],
        )
        g = RolloutGuidance()
        g.apply(SetGuidance(scope="domain", target="science", text="think of the sky", fraction=0.5), step=0)
        msgs, flag = g.prompt_for(task, 0, 2)
        assert flag
        assert msgs[0] == {"role": "system", "content": "Answer in French."}
        assert msgs[1]["content"].startswith("Name a colour.") and "think of the sky" in msgs[1]["content"]
        assert g.prompt_for(task, 1, 2) == (task.messages(), False)

    def test_no_guidance_no_change(self, tasks):
        g = RolloutGuidance(default_temperature=0.7)
        for task in tasks:
            for m in range(4):
                assert g.prompt_for(task, m, 4) == (task.messages(), False)
            assert g.temperature_for(task) == 0.7
            assert g.rule_for(task) is None

    def test_task_rule_beats_domain_rule(self, tasks):
        t1, t2, t3 = tasks[0], tasks[1], tasks[2]
        g = RolloutGuidance()
        g.apply(SetGuidance(scope="domain", target="science", text="domain hint", fraction=0.5, temperature=1.2), 0)
        g.apply(SetGuidance(scope="task", target="t1", text="task hint", fraction=0.25, temperature=0.8), 0)
        assert "task hint" in g.prompt_for(t1, 0, 4)[0][-1]["content"]
        assert g.temperature_for(t1) == 0.8
        assert guided_count(4, g.rule_for(t1).fraction) == 1
        assert "domain hint" in g.prompt_for(t2, 0, 4)[0][-1]["content"]
        assert g.temperature_for(t2) == 1.2
        assert g.prompt_for(t3, 0, 4) == (t3.messages(), False)  # another domain

    def test_overlay_previews_without_applying(self, tasks):
        t1, t2 = tasks[0], tasks[1]
        g = RolloutGuidance()
        cand = SetGuidance(target="t1", text="candidate hint", fraction=0.5, temperature=1.5)
        msgs, flag = g.prompt_for(t1, 0, 4, overlay=cand)
        assert flag and "candidate hint" in msgs[-1]["content"]
        assert g.temperature_for(t1, overlay=cand) == 1.5
        assert g.prompt_for(t2, 0, 4, overlay=cand) == (t2.messages(), False)  # other task unaffected
        assert g.version == 0 and g.state.per_task == {}
        assert g.prompt_for(t1, 0, 4) == (t1.messages(), False)

    def test_overlay_matches_what_apply_would_do(self, tasks):
        t1, t2 = tasks[0], tasks[1]
        g = RolloutGuidance()
        g.apply(SetGuidance(scope="task", target="t1", text="task hint", fraction=0.25), 0)
        g.apply(SetGuidance(scope="domain", target="science", text="old domain hint", fraction=0.5), 0)
        candidates = [
            SetGuidance(scope="domain", target="science", text="new domain hint", fraction=0.75, temperature=1.3),
            SetGuidance(scope="task", target="t1", text=None, fraction=0.0),  # remove the task rule
            SetGuidance(scope="domain", target="science", text=None, fraction=0.0),  # remove the domain rule
            SetGuidance(scope="task", target="t2", text="t2 hint", fraction=0.5),
        ]
        for cand in candidates:
            applied = RolloutGuidance.from_dict(g.to_dict())
            applied.apply(cand, step=1)
            for task in (t1, t2):
                assert g.temperature_for(task, overlay=cand) == applied.temperature_for(task), cand
                for m in range(8):
                    assert g.prompt_for(task, m, 8, overlay=cand) == applied.prompt_for(task, m, 8), (cand, task.id, m)

    def test_temperature_default_and_override(self, tasks):
        t1, t2 = tasks[0], tasks[1]
        g = RolloutGuidance(default_temperature=0.9)
        assert g.temperature_for(t1) == 0.9
        g.apply(SetGuidance(target="t1", fraction=0.0, temperature=1.4), step=0)  # temperature only
        assert g.temperature_for(t1) == 1.4
        assert g.temperature_for(t2) == 0.9
        assert g.prompt_for(t1, 0, 4) == (t1.messages(), False)  # no hint text: nobody guided

    def test_remove_guidance(self, tasks):
        t1 = tasks[0]
        g = RolloutGuidance()
        g.apply(SetGuidance(target="t1", text="hint", fraction=0.5, temperature=1.3), step=0)
        assert g.prompt_for(t1, 0, 4)[1] and g.temperature_for(t1) == 1.3
        v = g.apply(SetGuidance(target="t1", text=None, fraction=0.0), step=5)
        assert v == 2
        assert "t1" not in g.state.per_task
        assert g.prompt_for(t1, 0, 4) == (t1.messages(), False)
        assert g.temperature_for(t1) == 1.0
        # removing a task rule uncovers the domain rule
        g.apply(SetGuidance(scope="domain", target="science", text="dom", fraction=0.5), step=6)
        g.apply(SetGuidance(target="t1", text="task", fraction=0.5), step=7)
        g.apply(SetGuidance(target="t1", text=None, fraction=0.0), step=8)
        assert "dom" in g.prompt_for(t1, 0, 4)[0][-1]["content"]

    def test_set_guidance_validation(self):
        with pytest.raises(ValidationError, match="needs a hint text"):
            SetGuidance(target="t1", fraction=0.5)
        with pytest.raises(ValidationError, match="needs a hint text"):
            SetGuidance(target="t1", text="   ", fraction=0.5)
        with pytest.raises(ValidationError):
            SetGuidance(target="t1")  # default fraction 0.5, no text
        with pytest.raises(ValidationError):
            SetGuidance(target="", text="x", fraction=0.5)
        with pytest.raises(ValidationError):
            SetGuidance(target="t1", text="x", fraction=1.5)
        with pytest.raises(ValidationError):
            SetGuidance(target="t1", text="x", fraction=0.5, temperature=0.0)
        with pytest.raises(ValidationError):
            SetGuidance(target="t1", text="x", fraction=0.5, temperature=5.0)
        with pytest.raises(ValidationError):
            SetGuidance(target="t1", text="x" * 2001, fraction=0.5)
        SetGuidance(target="t1", text=None, fraction=0.0)

    def test_unknown_domain_rejected(self):
        g = RolloutGuidance(domains={"science", "medical"})
        with pytest.raises(ValueError, match="unknown domain 'cooking'"):
            g.apply(SetGuidance(scope="domain", target="cooking", text="x", fraction=0.5), step=0)
        assert g.version == 0 and g.state.history == []
        assert g.apply(SetGuidance(scope="domain", target="medical", text="x", fraction=0.5), step=0) == 1

    def test_version_history_and_round_trip(self, tasks):
        g = RolloutGuidance(default_temperature=0.8, domains={"science"})
        g.apply(SetGuidance(target="t1", text="a", fraction=0.5, rationale="all low"), step=2, candidate_id="k")
        g.apply(SetGuidance(scope="domain", target="science", text="b", fraction=0.25, temperature=1.1), step=3)
        assert g.version == 2
        assert [(h.version, h.step, h.candidate_id) for h in g.state.history] == [(1, 2, "k"), (2, 3, None)]
        d = g.to_dict()
        back = RolloutGuidance.from_dict(json.loads(json.dumps(d)), domains={"science"})
        assert back.to_dict() == d
        assert back.version == 2 and back.domains == {"science"}
        for task in tasks:
            assert back.temperature_for(task) == g.temperature_for(task)
            for m in range(4):
                assert back.prompt_for(task, m, 4) == g.prompt_for(task, m, 4)


# --------------------------------------------------------------------------- rubric criteria


def crit(cid: str, text: str, weight: float, **kw) -> Criterion:
    return Criterion(id=cid, text=text, weight=weight, **kw)


class TestRubricCriteria:
    def test_version_zero_is_the_dataset_rubric_and_never_changes(self, tasks):
        rc = RubricCriteria(tasks)
        t1 = tasks[0]
        assert rc.current("t1").version == 0
        assert rc.current("t1").criteria == list(t1.rubric)
        assert rc.original("t1") == list(t1.rubric)
        rc.apply(EditRubric(task_id="t1", add=[crit("c3", "Cites a source.", 1.0)]), step=1)
        rc.apply(EditRubric(task_id="t1", remove=["c2"]), step=2)
        rc.apply(EditRubric(task_id="t1", reword={"c1": "States the fact with units."}), step=3)
        rc.apply(EditRubric(task_id="t1", reweight={"c1": 5.0}), step=4)
        assert rc.original("t1") == list(t1.rubric)
        assert rc.versions["t1"][0].criteria == list(t1.rubric)
        assert t1.rubric[0].text == "States the main fact correctly."
        assert t1.rubric[0].weight == 2.0
        assert rc.current("t1").version == 4

    def test_add(self, tasks):
        rc = RubricCriteria(tasks)
        new = crit("c3", "Cites a source.", 1.5)
        v = rc.apply(EditRubric(task_id="t1", add=[new]), step=7, candidate_id="cand")
        assert v == 1
        cur = rc.current("t1")
        assert cur.version == 1 and cur.step == 7 and cur.candidate_id == "cand"
        assert [c.id for c in cur.criteria] == ["c1", "c2", "p1", "c3"]
        assert cur.criteria[-1] == new
        assert rc.current("t2").version == 0  # other tasks untouched

    def test_add_pitfall_and_programmatic(self, tasks):
        rc = RubricCriteria(tasks)
        pit = crit("p_len", "Answer longer than 80 words.", -1.0)
        prog = Criterion.model_validate(
            {"id": "wc", "text": "At most 80 words.", "weight": 1.0, "check": {"type": "word_count", "max": 80}}
        )
        rc.apply(EditRubric(task_id="t1", add=[pit, prog]), step=0)
        by_id = {c.id: c for c in rc.current("t1").criteria}
        assert by_id["p_len"].is_pitfall
        assert by_id["wc"].kind == "programmatic"

    def test_remove(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", remove=["c2", "p1"]), step=0)
        assert [c.id for c in rc.current("t1").criteria] == ["c1"]

    def test_reword(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", reword={"c2": "Explains each step of the reasoning."}), step=0)
        by_id = {c.id: c for c in rc.current("t1").criteria}
        assert by_id["c2"].text == "Explains each step of the reasoning."
        assert by_id["c2"].weight == 1.0
        assert by_id["c1"].text == "States the main fact correctly."

    def test_reword_and_reweight_keep_a_programmatic_check(self):
        task = make_task(
            "w1",
            rubric=[
                {"id": "ok", "text": "Answers.", "weight": 1.0},
                {"id": "wc", "text": "At most 80 words.", "weight": 1.0, "check": {"type": "word_count", "max": 80}},
            ],
        )
        rc = RubricCriteria([task])
        rc.apply(EditRubric(task_id="w1", reword={"wc": "  Short: 80 words at most. "}, reweight={"wc": 2.0}), 0)
        wc = {c.id: c for c in rc.current("w1").criteria}["wc"]
        assert wc.text == "Short: 80 words at most." and wc.weight == 2.0
        assert wc.kind == "programmatic" and wc.check == task.rubric[1].check

    def test_reword_to_blank_rejected(self, tasks):
        rc = RubricCriteria(tasks)
        with pytest.raises(ValueError):
            rc.apply(EditRubric(task_id="t1", reword={"c2": "   "}), step=0)
        assert rc.current("t1").version == 0

    def test_reweight(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", reweight={"c1": 0.5, "p1": -3.0}), step=0)
        by_id = {c.id: c for c in rc.current("t1").criteria}
        assert by_id["c1"].weight == 0.5 and by_id["p1"].weight == -3.0
        assert by_id["c1"].text == "States the main fact correctly."

    def test_reweight_to_non_finite_rejected(self, tasks):
        rc = RubricCriteria(tasks)
        for w in (float("nan"), float("inf")):
            with pytest.raises(ValueError):
                rc.apply(EditRubric(task_id="t1", reweight={"c1": w}), step=0)
        assert rc.current("t1").version == 0

    def test_versions_accumulate(self, tasks):
        rc = RubricCriteria(tasks)
        assert rc.apply(EditRubric(task_id="t1", remove=["p1"]), 1) == 1
        assert rc.apply(EditRubric(task_id="t2", remove=["p1"]), 1) == 1  # per-task version
        assert rc.apply(EditRubric(task_id="t1", remove=["c2"]), 2) == 2
        assert rc.version == 3  # the interface's version counts every edit
        assert [v.version for v in rc.versions["t1"]] == [0, 1, 2]
        assert [c.id for c in rc.versions["t1"][1].criteria] == ["c1", "c2"]
        assert [c.id for c in rc.versions["t1"][2].criteria] == ["c1"]
        assert [(h.version, h.step) for h in rc.history] == [(1, 1), (2, 1), (3, 2)]

    def test_add_existing_id_gets_new_id(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", add=[crit("c1", "Gives a worked example.", 1.0)]), step=0)
        by_id = {c.id: c for c in rc.current("t1").criteria}
        assert by_id["c1"].text == "States the main fact correctly."  # not replaced
        assert by_id["c1_2"].text == "Gives a worked example."
        rc.apply(
            EditRubric(task_id="t1", add=[crit("c1", "Third.", 1.0), crit("c1", "Fourth.", 1.0)]),
            step=1,
        )
        by_id = {c.id: c for c in rc.current("t1").criteria}
        assert by_id["c1_3"].text == "Third." and by_id["c1_4"].text == "Fourth."
        assert len(by_id) == len(rc.current("t1").criteria) == 6

    def test_unknown_criterion_rejected_listing_ids(self, tasks):
        rc = RubricCriteria(tasks)
        for upd in (
            EditRubric(task_id="t1", remove=["zz"]),
            EditRubric(task_id="t1", reword={"zz": "x"}),
            EditRubric(task_id="t1", reweight={"zz": 2.0}),
        ):
            with pytest.raises(ValueError, match="zz") as ei:
                rc.apply(upd, step=0)
            assert "current ids: ['c1', 'c2', 'p1']" in str(ei.value)
        assert rc.current("t1").version == 0 and rc.version == 0

    def test_unknown_task_rejected(self, tasks):
        rc = RubricCriteria(tasks)
        with pytest.raises(ValueError, match="unknown task id 'nope'"):
            rc.apply(EditRubric(task_id="nope", remove=["c1"]), step=0)
        with pytest.raises(ValueError, match="unknown task id"):
            rc.current("nope")

    def test_no_positive_weight_rejected(self, tasks):
        rc = RubricCriteria(tasks)
        with pytest.raises(ValueError, match="no positive weight"):
            rc.apply(EditRubric(task_id="t1", remove=["c1", "c2"]), step=0)
        with pytest.raises(ValueError, match="no positive weight"):
            rc.apply(EditRubric(task_id="t1", reweight={"c1": -1.0, "c2": -2.0}), step=0)
        assert rc.current("t1").version == 0 and rc.history == []

    def test_preview_does_not_apply(self, tasks):
        rc = RubricCriteria(tasks)
        out = rc.rubric_with(EditRubric(task_id="t1", add=[crit("c3", "New.", 1.0)], remove=["p1"]))
        assert [c.id for c in out] == ["c1", "c2", "c3"]
        assert rc.current("t1").version == 0 and rc.version == 0 and rc.history == []
        assert [c.id for c in rc.current("t1").criteria] == ["c1", "c2", "p1"]

    def test_edit_rubric_validation(self):
        with pytest.raises(ValidationError, match="at least one criterion"):
            EditRubric(task_id="t1")
        with pytest.raises(ValidationError, match="reweight to 0"):
            EditRubric(task_id="t1", reweight={"c1": 0.0})
        with pytest.raises(ValidationError):
            EditRubric(task_id="", remove=["c1"])

    def test_round_trip(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", add=[crit("c3", "Cites a source.", 1.0)]), step=1, candidate_id="a")
        rc.apply(EditRubric(task_id="t1", reword={"c2": "Explains why."}), step=2)
        rc.apply(EditRubric(task_id="t3", reweight={"c1": 4.0}), step=3)
        d = rc.to_dict()
        assert set(d["edited"]) == {"t1", "t3"}  # only edited tasks are stored
        assert [v["version"] for v in d["edited"]["t1"]] == [1, 2]  # version 0 comes from the data
        back = RubricCriteria.from_dict(json.loads(json.dumps(d)), tasks)
        assert back.to_dict() == d
        assert back.version == 3
        for t in tasks:
            assert back.versions[t.id] == rc.versions[t.id]
            assert back.original(t.id) == list(t.rubric)
        assert back.current("t1").version == 2 and back.current("t2").version == 0

    def test_from_dict_unknown_task_raises(self, tasks):
        rc = RubricCriteria(tasks)
        rc.apply(EditRubric(task_id="t1", remove=["p1"]), step=0)
        with pytest.raises(ValueError, match="'t1'"):
            RubricCriteria.from_dict(rc.to_dict(), tasks[1:])


# --------------------------------------------------------------------------- harness


class TestHarness:
    def test_apply_dispatches(self, tasks):
        h = Harness(tasks, temperature=0.9)
        assert h.versions == {
            **dict.fromkeys(h.versions, 0),
            "task_sampling": 0,
            "rollout_guidance": 0,
            "rubric_criteria": 0,
        }
        assert h.apply(ReweightTasks(task_ids=["t1"], weight=2.0), step=1) == 1
        assert h.versions == {
            **dict.fromkeys(h.versions, 0),
            "task_sampling": 1,
            "rollout_guidance": 0,
            "rubric_criteria": 0,
        }
        assert h.apply(SetGuidance(target="t2", text="hint", fraction=0.5), step=1) == 1
        assert h.apply(SetGuidance(scope="domain", target="medical", text="h", fraction=0.5), step=2) == 2
        assert h.versions == {
            **dict.fromkeys(h.versions, 0),
            "task_sampling": 1,
            "rollout_guidance": 2,
            "rubric_criteria": 0,
        }
        assert h.apply(EditRubric(task_id="t3", remove=["p1"]), step=2) == 1
        assert h.apply(EditRubric(task_id="t3", remove=["c2"]), step=3) == 2  # the task's rubric version
        assert h.versions == {
            **dict.fromkeys(h.versions, 0),
            "task_sampling": 1,
            "rollout_guidance": 2,
            "rubric_criteria": 2,
        }
        assert h.sampling.probabilities(1)["t1"] == pytest.approx(2 / 5)
        assert h.guidance.prompt_for(tasks[1], 0, 4)[1]
        assert h.guidance.temperature_for(tasks[0]) == 0.9
        assert [c.id for c in h.rubrics.current("t3").criteria] == ["c1"]

    def test_apply_rejects_unknowns(self, tasks):
        h = Harness(tasks)
        with pytest.raises(ValueError, match="unknown task id"):
            h.apply(SetGuidance(target="nope", text="x", fraction=0.5), step=0)
        with pytest.raises(ValueError, match="unknown domain"):
            h.apply(SetGuidance(scope="domain", target="cooking", text="x", fraction=0.5), step=0)
        with pytest.raises(ValueError, match="unknown task id"):
            h.apply(ReweightTasks(task_ids=["nope"], weight=2.0), step=0)
        with pytest.raises(ValueError, match="unknown task id"):
            h.apply(EditRubric(task_id="nope", remove=["c1"]), step=0)
        with pytest.raises(TypeError):
            h.apply({"interface": "task_sampling"}, step=0)  # type: ignore[arg-type]
        assert h.versions == {
            **dict.fromkeys(h.versions, 0),
            "task_sampling": 0,
            "rollout_guidance": 0,
            "rubric_criteria": 0,
        }

    def test_parse_update(self):
        u = parse_update({"interface": "task_sampling", "task_ids": ["t1"], "action": "retire"})
        assert isinstance(u, ReweightTasks) and u.action == "retire"
        u = parse_update({"interface": "rollout_guidance", "target": "t1", "text": "x", "fraction": 0.25})
        assert isinstance(u, SetGuidance) and u.fraction == 0.25
        u = parse_update({"interface": "rubric_criteria", "task_id": "t1", "remove": ["c1"]})
        assert isinstance(u, EditRubric) and u.remove == ["c1"]
        # every update's own dump parses back to the same update
        for upd in (
            ReweightTasks(task_ids=["a"], action="park", park_steps=3),
            SetGuidance(scope="domain", target="science", text="x", fraction=0.5, temperature=1.2),
            EditRubric(task_id="t1", add=[crit("c9", "New.", 1.0)], reweight={"c1": 2.0}),
        ):
            assert parse_update(json.loads(upd.model_dump_json())) == upd
        with pytest.raises(ValueError, match="unknown interface 'reward_model'"):
            parse_update({"interface": "reward_model", "task_id": "t1"})
        with pytest.raises(ValueError, match="unknown interface None"):
            parse_update({"task_ids": ["t1"], "weight": 2.0})  # no interface field
        with pytest.raises(ValidationError):
            parse_update({"interface": "task_sampling", "task_ids": ["t1"]})  # reweight without weight

    def _edited(self, tasks) -> Harness:
        h = Harness(tasks, sampling_floor=0.2, seed=11, temperature=0.8)
        h.apply(ReweightTasks(task_ids=["t1"], weight=3.0), step=1, candidate_id="s1")
        h.apply(ReweightTasks(task_ids=["t2"], action="park", park_steps=5), step=2)
        h.apply(SetGuidance(target="t4", text="be brief", fraction=0.5, temperature=1.2), step=2)
        h.apply(EditRubric(task_id="t3", add=[crit("c3", "Mentions a dose.", 1.0)]), step=3)
        return h

    def test_save_load_round_trip(self, tasks, tmp_path):
        h = self._edited(tasks)
        path = tmp_path / "run" / "harness.json"
        h.save(path)
        back = Harness.load(path, tasks)
        assert back.to_dict() == h.to_dict()
        assert back.versions == h.versions
        assert back.sampling.seed == 11 and back.guidance.state.default_temperature == 0.8
        assert [back.sampling.sample(2, s) for s in range(10)] == [h.sampling.sample(2, s) for s in range(10)]
        assert back.guidance.prompt_for(tasks[3], 0, 4) == h.guidance.prompt_for(tasks[3], 0, 4)
        assert back.rubrics.current("t3") == h.rubrics.current("t3")
        # the domains survive, so unknown ones are still rejected after a resume
        with pytest.raises(ValueError, match="unknown domain"):
            back.apply(SetGuidance(scope="domain", target="cooking", text="x", fraction=0.5), step=4)
        # saving again over the existing file works and leaves only harness.json
        back.apply(ReweightTasks(task_ids=["t3"], action="retire"), step=4)
        back.save(path)
        assert Harness.load(path, tasks).to_dict() == back.to_dict()
        assert sorted(p.name for p in path.parent.iterdir()) == ["harness.json"]

    def test_save_is_atomic(self, tasks, tmp_path, monkeypatch):
        path = tmp_path / "harness.json"
        h = Harness(tasks)
        h.save(path)
        old = path.read_text()
        h.apply(ReweightTasks(task_ids=["t1"], weight=5.0), step=1)

        real_dump = json.dump

        def failing_dump(obj, fp, **kw):
            fp.write('{"versions": {"task_sam')  # a torn write, then a crash
            raise OSError("disk full")

        monkeypatch.setattr(harness_mod.json, "dump", failing_dump)
        with pytest.raises(OSError, match="disk full"):
            h.save(path)
        monkeypatch.setattr(harness_mod.json, "dump", real_dump)
        assert path.read_text() == old  # the old file survives intact
        assert sorted(p.name for p in tmp_path.iterdir()) == ["harness.json"]  # no temp file left
        assert Harness.load(path, tasks).versions["task_sampling"] == 0
        h.save(path)
        assert Harness.load(path, tasks).versions["task_sampling"] == 1

    @pytest.mark.parametrize("content", ["", "{not json", '{"versions": {"task_sam', "[]", "null", '"text"', "{}"])
    def test_load_corrupt_file(self, tasks, tmp_path, content):
        path = tmp_path / "harness.json"
        path.write_text(content)
        with pytest.raises(HarnessRLError, match=r"harness\.json"):
            Harness.load(path, tasks)

    def test_load_missing_file(self, tasks, tmp_path):
        with pytest.raises(HarnessRLError, match="cannot read the saved harness"):
            Harness.load(tmp_path / "nope.json", tasks)

    def test_load_malformed_sections(self, tasks, tmp_path):
        path = tmp_path / "harness.json"
        good = self._edited(tasks).to_dict()
        for key, bad in (
            ("task_sampling", {"weights": "x"}),
            ("task_sampling", []),
            ("rollout_guidance", {"per_task": {"t1": {"fraction": 7}}}),
            ("rubric_criteria", {"edited": {"t1": [{"version": "one"}]}}),
        ):
            path.write_text(json.dumps({**good, key: bad}))
            with pytest.raises(HarnessRLError, match="does not match"):
                Harness.load(path, tasks)

    def test_load_tasks_mismatch(self, tasks, tmp_path):
        path = tmp_path / "harness.json"
        self._edited(tasks).save(path)
        # the run has a task the saved harness lacks
        with pytest.raises(HarnessRLError, match="lacks tasks \\['t5'\\]"):
            Harness.load(path, [*tasks, make_task("t5")])
        # the saved harness has rubric edits for a task the run lacks
        with pytest.raises(HarnessRLError, match="'t3'"):
            Harness.load(path, [t for t in tasks if t.id != "t3"])
        # the saved harness samples a task the run lacks
        with pytest.raises(HarnessRLError, match="t1"):
            Harness.load(path, [t for t in tasks if t.id != "t1"])
