"""Repairs carried across a family: an evolution point repairs a lax rubric on one task with the exact
criterion its prompt states, and the next point offers each sibling of its family (once it has kept rollouts)
the same kind of repair, built from the sibling's own prompt and rollouts and measured by the critic.

The trainer-side service behind the real MCP tool server, the graph in the MCP client, the rule-based evolver.
"""

from __future__ import annotations

from helpers import record_group, rule_based_point

from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.data import Task
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.judges import RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import Recorder

SUBJECTS = {"sea": "The calm sea shines under a pale blue sky.", "city": "The busy city hums with cars and people."}


def _task(tid: str, word: str, reference: str, family: str = "nocomma") -> Task:
    return Task.model_validate(
        {
            "id": tid,
            "domain": "writing",
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
            "metadata": {"family": family},
        }
    )


class NoJudge:
    name = "none"

    def grade(self, requests):
        raise AssertionError("every criterion here is an exact check")


def _world(tmp_path, carry: bool = True):
    tasks = [
        _task("sea", "sea", SUBJECTS["sea"]),
        _task("city", "city", SUBJECTS["city"]),
        _task("forest", "forest", "A quiet forest of tall old trees."),
        _task("other", "rain", "Rain falls softly on the roof.", family="elsewhere"),
    ]
    harness = Harness(tasks, seed=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(NoJudge())
    # every rollout mentions its subject (the lax rubric passes them all); half of them use commas; two groups
    # of each (one group of 4 is too little for the critic's bootstrap to be sure of any split)
    for step in (2, 3):
        for tid, texts in (
            ("sea", ["The sea, wide and blue", "The sea is calm", "Sea, sky, sun", "A grey sea"]),
            ("city", ["The city, loud and bright", "The city sleeps", "City lights, cars", "A city at dawn"]),
        ):
            record_group(harness, judge, recorder, step, tid, [f"{t} {step}." for t in texts])
    failure = Failure(
        kind="non_discriminative_high",
        step=3,
        task_id="sea",
        domain="writing",
        summary="all 4 rewards are uniformly high (mean 1.00, std 0.000)",
        interface_hint="rubric_criteria",
    )
    failures = [failure]
    trials = FrozenPolicyTrials(harness, recorder, judge, None)
    run = RunDir(tmp_path / "run")
    service = EvolutionService(
        harness, recorder, None, trials, run, failures=lambda: failures, step=lambda: 3, carry_repairs=carry
    )
    return service, harness, run, failures


def _no_comma_check(harness: Harness, task_id: str) -> bool:
    return any(
        c.check is not None and c.check.type == "not_contains" and c.check.phrases == [","]
        for c in harness.rubrics.current(task_id).criteria
    )


def test_a_repair_is_carried_to_the_siblings_that_can_be_measured(tmp_path):
    service, harness, run, _ = _world(tmp_path)
    (first,) = rule_based_point(service)
    assert first.status == "committed" and first.task_id == "sea"
    assert _no_comma_check(harness, "sea")  # the induced exact criterion the prompt states
    carried = [e for e in run.read("events.jsonl") if e["kind"] == "repair_carried"]
    assert [sorted(e["siblings"]) for e in carried] == [["city", "forest"]]  # its family, not "other"
    # the next point: city has kept rollouts and gets its own no-comma criterion; forest has none and waits
    listed = service.get_failures()
    assert [(f.task_id, f.evidence["carried_from"], f.evidence["remedy"]) for f in listed.failures] == [
        ("city", "sea", "induced")
    ]
    (second,) = rule_based_point(service)
    assert second.status == "committed" and second.task_id == "city"
    assert _no_comma_check(harness, "city") and not _no_comma_check(harness, "forest")
    verdicts = [e for e in run.read("events.jsonl") if e["kind"] == "verdict"]
    assert [v["verdict"] for v in verdicts] == ["accepted", "accepted"]  # each measured by the critic
    assert service.get_failures().failures == []  # handled: not offered again; forest still waits
    assert service.carried.queued == 1


def test_repairs_are_not_carried_when_turned_off(tmp_path):
    service, harness, run, _ = _world(tmp_path, carry=False)
    (first,) = rule_based_point(service)
    assert first.status == "committed"
    assert not [e for e in run.read("events.jsonl") if e["kind"] == "repair_carried"]
    assert service.get_failures().failures == [] and not _no_comma_check(harness, "city")


def test_a_carried_repair_is_not_pushed_out_of_the_list_by_newer_detections(tmp_path):
    """An evolution point handles the first few failures listed: the carried one (queued at step 4) takes every
    second place instead of coming after every failure detected since. (These detections carry no interface
    hint, as for a kind no interface claims: listed all the same.)"""
    service, _, _, failures = _world(tmp_path)
    rule_based_point(service)  # commits on sea; city's carried failure is queued
    failures += [
        Failure(kind=kind, step=step, task_id=tid, domain="writing", summary=f"{kind} on {tid}")
        for step, kind, tid in (
            (10, "non_discriminative_low", "other"),
            (9, "non_discriminative_low", "forest"),
            (8, "spurious_length", "other"),
        )
    ]
    listed = service.get_failures(limit=2)
    assert [(f.step, f.task_id) for f in listed.failures] == [(10, "other"), (4, "city")]
    assert listed.failures[1].evidence["carried_from"] == "sea" and listed.total == 4
    assert [f.task_id for f in service.get_failures().failures] == ["other", "city", "forest", "other"]
