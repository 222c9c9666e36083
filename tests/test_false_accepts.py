"""benchmarks/false_accepts.py: the false-accept rate of the critic's rule for added exact checks (simulated, no
model), and placebo candidates measured by the critic on a tiny in-memory world (programmatic checks only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import load_script, record_group

from harnessrl.critic.config import TrialConfig
from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.data import Task
from harnessrl.interfaces import Harness
from harnessrl.judges import RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.steps import Recorder

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "false_accepts.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def test_the_rule_rarely_accepts_a_check_that_splits_too_few_groups_and_has_power_when_pooled(bench):
    below = [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.054]  # s(p) < 0.2 for G = 4 (the boundary is p = 0.0543)
    got = bench.simulate_rule(n=2000, seed=0, rates=below, schedules={"one": (1,), "pooled": (3,)}, with_exact=True)
    assert got["threshold"] == 0.2 and got["max_looks"] == 8 and 0.054 < got["boundary_rate"] < 0.0545
    assert got["alpha_by_look"][:2] == [0.05, 0.025] and sum(got["alpha_by_look"]) == pytest.approx(0.1, abs=1e-4)
    assert got["futile_needs_rollouts"] == 68  # fewer pooled rollouts, none broken, cannot rule a split out
    for entry in got["schedules"].values():
        assert entry["false_accept_rate"] < 0.06  # simulated, 2000 candidates per rate
        assert entry["exact_false_accept_rate"] < 0.05  # the design bound: the looks spend 0.1, half accepting
        rows = {r["p"]: r for r in entry["rows"]}
        assert rows[0.0]["P_accepted"] == 0 and rows[0.0]["P_not_reliable"] == 1  # futile needs 68 rollouts
    pooled = got["schedules"]["pooled"]
    assert pooled["power"]["0.5"] > 0.95 and pooled["exact_power"]["0.5"] > 0.99
    assert got["schedules"]["one"]["exact_power"]["0.5"] < pooled["exact_power"]["0.5"]


def _world(tmp_path):
    """Two tasks whose reference answers hold one content word the prompts do not state ('blue', 'loud'), and
    groups of rollouts of which half use it; no rollout uses any of placebo (a)'s words."""

    def task(tid: str, word: str, reference: str) -> Task:
        return Task.model_validate(
            {
                "id": tid,
                "domain": "writing",
                "prompt": f"Describe the {word} in one sentence.",
                "reference_answer": reference,
                "rubric": [
                    {
                        "id": "topic",
                        "text": f"Mentions '{word}'",
                        "weight": 1,
                        "check": {"type": "contains", "phrases": [word]},
                    }
                ],
                "metadata": {"family": "describe"},
            }
        )

    harness = Harness([task("sea", "sea", "Blue sea."), task("city", "city", "Loud city.")], seed=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(NoJudge())
    texts = {
        "sea": ["A blue sea.", "The sea is grey.", "Blue waves on the sea.", "A calm sea."],
        "city": ["A loud city.", "The city sleeps.", "Loud cars in the city.", "A city at dawn."],
    }
    return harness, recorder, judge, texts


class NoJudge:
    name = "none"

    def grade(self, requests):
        raise AssertionError("every criterion here is an exact check")


def test_placebos_a_word_the_task_never_asks_for_is_never_accepted_and_a_reference_word_that_splits_is(bench, tmp_path):
    harness, recorder, judge, texts = _world(tmp_path)
    for step in (1, 2):
        for tid, group in texts.items():
            record_group(harness, judge, recorder, step, tid, group)
    rows = bench.run_placebos(harness, recorder, judge)
    by = {(r["task_id"], r["placebo"]): r for r in rows}
    for tid, word in (("sea", "blue"), ("city", "loud")):
        a = by[(tid, "a_random_word")]
        assert a["broken"] == a["rollouts"] == 8 and not a["reference_passes"]
        assert a["verdict_kind"] == "pending" and not a["accepted"]  # every rollout breaks it: nothing decides yet
        b = by[(tid, "b_reference_word")]
        assert b["checks"] == word and b["reference_passes"] and b["groups_split"] == 2
        assert b["broken"] == 4 and b["verdict_kind"] == "accepted"  # it splits the groups: signal, not relevance
        c = by[(tid, "c_not_reference_word")]
        assert c["checks"] == word and c["verdict_kind"] == "reference_guard"  # the reference fails it
    stated = [r for r in rows if r["placebo"].startswith("d_")]  # "in one sentence": every rollout meets it
    assert {r["checks"] for r in stated} == {"sentence_count:max"} and len(stated) == 3  # per task, and widened
    assert all(r["broken"] == 0 and r["verdict_kind"] == "pending" for r in stated)
    summary = bench.summarise(rows)
    assert summary["b_reference_word"]["acceptance_rate"] == 1.0
    assert summary["a_random_word"]["accepted"] == 0 and summary["a_random_word"]["pending"] == 2

    # placebo (a) looked at again as a run would (more groups graded, the same test): never accepted; after the
    # last look (three here) it is refused as not reliable (futile would need 68 pooled rollouts, all broken)
    trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(max_looks=3))
    rng = np.random.default_rng(0)
    ((_, _, update),) = [
        u
        for u in bench.placebo_updates(harness.tasks["sea"], harness.rubrics.current("sea").criteria, rng)
        if u[0] == "a_random_word"
    ]
    failure = Failure(kind="unchecked_requirement", step=2, task_id="sea", domain="writing", summary="placebo")
    kinds = []
    for step in (3, 4, 5):
        kinds.append(trials.run(update, f"a{step}", failure).verdict_kind)
        record_group(harness, judge, recorder, step, "sea", texts["sea"])
    assert kinds == ["pending", "pending", "not_reliable"]
