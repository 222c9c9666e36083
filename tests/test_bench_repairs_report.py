"""The bench report's per-family repair figures (the repairs issue), from synthetic runs with known events.

The runs are those of ``test_bench_gold_report`` (families ``lax``: tasks a1, a2, the training rubric flawed;
``ctrl``: b1, b2; all in domain ``d``; gold test scores known per method, seed and step), with the harness
runs' events and trained groups written here:

- seed 0, **newer events** (typed fields): a failure on a1 at step 1; a rubric repair of a1 covering a2
  (``covers``, ``update.cover``, ``update.remedy: requirement``) committed at step 2, applying from step 3; a
  guidance candidate on b1 refused with ``verdict_kind: not_reliable``; a failure on b1 at step 2.
- seed 1, **older events** (no typed field): a rubric audit naming a2 at step 0; a rubric edit of a2 tagged
  ``[rule-based: induced]`` in its rationale (applies from 3); a park of b2 (applies from 2); a guidance of
  scope ``domain`` on ``d`` (every task; applies from 4); a candidate refused by the reference guard (reason
  text only); a failure on b2 at step 3.
- seed 2: no event at all (the harness did nothing).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_bench_gold_report import _jsonl, _train_file, make_gold_run

from harnessrl.analysis.decisions import (
    Trial,
    Update,
    UpdateEvent,
    Verdict,
    changed_tasks,
    legacy_refusal_kind,
    legacy_remedy_tag,
    refusal_kind,
)
from harnessrl.analysis.per_run import RunData, harness_decisions, trial_costs
from harnessrl.analysis.plots import PLOTS
from harnessrl.analysis.report import _markdown, write_bench_report
from harnessrl.analysis.results_file import BenchResults
from harnessrl.records import read_jsonl
from harnessrl.records.events import Event
from harnessrl.records.run_record import Missing, RunConfigView, RunRecord

REPO = Path(__file__).resolve().parents[1]

RUBRIC_REPAIR = {
    "interface": "rubric_criteria",
    "rationale": "The prompt asks for no commas and the rubric does not check it.",
    "remedy": "requirement",
    "task_id": "a1",
    "add": [{"id": "no_commas", "text": "Uses no commas", "weight": 2.0, "check": {"type": "regex"}}],
    "cover": [{"task_id": "a2", "add": [{"id": "no_commas", "text": "Uses no commas at all", "weight": 2.0}]}],
    "signature": {"kind": "requirement", "key": "no_commas", "tasks": ["a1", "a2"]},
}
GUIDE_B1 = {
    "interface": "rollout_guidance",
    "rationale": "a hint",
    "remedy": "guide",
    "scope": "task",
    "target": "b1",
    "text": "Hint.",
}


def _ev(kind: str, step: int, **fields) -> dict:
    return {"time": 0.0, "kind": kind, "step": step, **fields}


def _e(row: dict) -> Event:
    """An events.jsonl row as the run record reads it."""
    return Event.model_validate({"time": 0.0, "step": None, **row})


def _commit(**fields) -> UpdateEvent:
    return UpdateEvent.parse(_e({"kind": "commit", **fields}))


def _run_of(events: list[dict], path: Path = REPO, **kw) -> RunData:
    """A harness run that recorded only ``events``."""
    none = Missing("not written by this test")
    record = RunRecord(path, RunConfigView(), (), (), (), tuple(map(_e, events)), best=none, summary=none, harness=none)
    return RunData(method="harnessrl", seed=0, record=record, **kw)


def _trial(step: int, cid: str, iface: str, accepted: bool, reason: str, rollouts: int, **typed) -> dict:
    result = {"accepted": accepted, "reason": reason, "cost": {"rollouts": rollouts, "judge_calls": 2, "seconds": 1.0}}
    return _ev("trial", step, candidate_id=cid, interface=iface, result=result, **typed)


NEW_EVENTS = [
    _ev("failure", 1, task_id="a1", failure="non_discriminative_high"),
    _ev("proposal", 2, candidate_id="c1", interface="rubric_criteria", update=RUBRIC_REPAIR),
    _trial(2, "c1", "rubric_criteria", True, "accepted: ...", 4, remedy="requirement", verdict_kind="accepted"),
    _ev("verdict", 2, candidate_id="c1", interface="rubric_criteria", verdict="accepted", reason="accepted: ..."),
    _ev(
        "commit",
        2,
        candidate_id="c1",
        interface="rubric_criteria",
        applies_from_step=3,
        covers=["a1", "a2"],
        update=RUBRIC_REPAIR,
    ),
    _ev("failure", 2, task_id="b1", failure="non_discriminative_low"),
    _ev("proposal", 2, candidate_id="c2", interface="rollout_guidance", update=GUIDE_B1),
    _trial(
        2,
        "c2",
        "rollout_guidance",
        False,
        "rejected: the improvement is not reliably above 0: x",
        8,
        remedy="guide",
        verdict_kind="not_reliable",
        min_detectable_effect=0.4,
    ),
    _ev(
        "verdict",
        2,
        candidate_id="c2",
        interface="rollout_guidance",
        verdict="rejected",
        reason="rejected: the improvement is not reliably above 0: x",
    ),
]

LEGACY_EDIT = {
    "interface": "rubric_criteria",
    "rationale": "Stated in the prompt. [rule-based: induced]",
    "task_id": "a2",
    "add": [{"id": "c9", "text": "Has no comma", "weight": 1.0}],
}
LEGACY_PARK = {
    "interface": "task_sampling",
    "rationale": "Out of reach. [rule-based: park]",
    "task_ids": ["b2"],
    "action": "park",
    "park_steps": 20,
}
LEGACY_DOMAIN_GUIDE = {
    "interface": "rollout_guidance",
    "rationale": "Hint all. [rule-based: guide_more]",
    "scope": "domain",
    "target": "d",
    "text": "Hint.",
    "fraction": 0.5,
}
OLD_EVENTS = [
    _ev("rubric_audit", 0, findings=[{"task_id": "a2", "requirement": "no commas"}]),
    _ev("commit", 1, candidate_id="d0", interface="task_sampling", version=1, applies_from_step=2, update=LEGACY_PARK),
    _ev("proposal", 2, candidate_id="d1", interface="rubric_criteria", update=LEGACY_EDIT),
    _trial(2, "d1", "rubric_criteria", True, "accepted: ...", 0),
    _ev(
        "commit", 2, candidate_id="d1", interface="rubric_criteria", version=1, applies_from_step=3, update=LEGACY_EDIT
    ),
    _ev("proposal", 2, candidate_id="d2", interface="rubric_criteria", update={**LEGACY_EDIT, "task_id": "a1"}),
    _trial(2, "d2", "rubric_criteria", False, "rejected by the reference guard: it loses its place", 0),
    _ev(
        "verdict",
        2,
        candidate_id="d2",
        interface="rubric_criteria",
        verdict="rejected",
        reason="rejected by the reference guard: it loses its place",
    ),
    _ev(
        "commit",
        3,
        candidate_id="d3",
        interface="rollout_guidance",
        version=1,
        applies_from_step=4,
        update=LEGACY_DOMAIN_GUIDE,
    ),
    _ev("failure", 3, task_id="b2", failure="non_discriminative_low"),
]


def _group(step: int, task: str, version: int = 0, guided: int = 0) -> dict:
    return {
        "step": step,
        "task_id": task,
        "rubric_version": version,
        "guided": guided,
        "rewards": [0.0, 1.0] * 2,
        "mean": 0.5,
        "flat": False,
        "lengths": [3] * 4,
    }


GROUPS = {
    # lax: a1 at odd, a2 at even steps; repaired (version 1) from step 3 on seed 0, a2 at step 4 on seed 1
    0: [_group(s, "a1" if s % 2 else "a2", version=int(s >= 3)) for s in range(1, 5)]
    + [_group(s, "b1") for s in range(1, 5)],
    1: [_group(s, "a1" if s % 2 else "a2", version=int(s == 4)) for s in range(1, 5)]
    + [_group(s, "b2", guided=2 * (s == 4)) for s in range(1, 5)],
    2: [_group(s, "a1" if s % 2 else "a2") for s in range(1, 5)] + [_group(s, "b1") for s in range(1, 5)],
}


def _harness_files(run: Path, seed: int, events: list[dict] | None = None) -> None:
    _jsonl(run / "events.jsonl", events if events is not None else {0: NEW_EVENTS, 1: OLD_EVENTS}.get(seed, []))
    _jsonl(run / "steps.jsonl", GROUPS[seed])


@pytest.fixture
def repair_bench(tmp_path) -> Path:
    train = _train_file(tmp_path)
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        for method in ("fixed", "oracle"):
            make_gold_run(root, train, method, seed)
        _harness_files(make_gold_run(root, train, "harnessrl", seed, trial=4), seed)
    return root


# --------------------------------------------------------------------------------------- the typed reader
def test_changed_tasks_read_covers_else_the_updates_own_fields():
    domains = {"a1": "d", "a2": "d", "b1": "d", "z": "other"}
    new = UpdateEvent.parse(_e(NEW_EVENTS[4]))
    assert new.applies_from_step == 3 and new.covers == ("a1", "a2") and new.name == "rubric_criteria:requirement"
    assert changed_tasks(new) == ("a1", "a2")
    assert changed_tasks(UpdateEvent.parse(_e({**NEW_EVENTS[4], "covers": ["a2"]}))) == ("a2",)  # the event's field
    no_covers = {k: v for k, v in NEW_EVENTS[4].items() if k != "covers"}
    assert changed_tasks(UpdateEvent.parse(_e(no_covers))) == ("a1", "a2")  # the task, then its cover (and signature's)
    assert changed_tasks(_commit(update=LEGACY_EDIT)) == ("a2",)
    assert changed_tasks(_commit(update=LEGACY_PARK)) == ("b2",)
    assert changed_tasks(_commit(update=GUIDE_B1)) == ("b1",)
    assert changed_tasks(_commit(update=LEGACY_DOMAIN_GUIDE), domains) == ("a1", "a2", "b1")
    assert changed_tasks(_commit(update=LEGACY_DOMAIN_GUIDE)) == ()  # the domains unknown
    assert changed_tasks(_commit()) == ()
    # no applies_from_step (an older commit): the step after its own
    assert _commit(step=7, update=LEGACY_PARK).applies_from_step == 8


def test_remedy_is_the_typed_field_and_the_rationale_tag_only_for_older_updates():
    assert Update.parse(RUBRIC_REPAIR).remedy == "requirement"
    assert Update.parse(LEGACY_EDIT).remedy == "induced"  # legacy: the tag
    typed_null = {**LEGACY_EDIT, "remedy": None, "action": None}
    assert Update.parse(typed_null).remedy is None  # the field is there: the tag is not read
    assert Update.parse(typed_null).remedy_name("rubric_criteria") == "rubric_criteria:update"
    assert Update.parse({"action": "park"}).remedy_name("task_sampling") == "task_sampling:park"
    assert Update.parse(LEGACY_EDIT).added_texts() == ("Has no comma",)
    assert Update.parse(RUBRIC_REPAIR).added_texts() == ("Uses no commas", "Uses no commas at all")
    assert legacy_remedy_tag("a [rule-based: drop] then [rule-based: park]") == "park"
    assert legacy_remedy_tag(None) is None


def test_refusal_kind_is_the_trials_verdict_kind_else_the_reason_text():
    typed = Trial.parse(_e(NEW_EVENTS[7]))
    assert (typed.verdict_kind, typed.remedy, typed.min_detectable_effect) == ("not_reliable", "guide", 0.4)
    assert refusal_kind(Verdict.parse(_e(NEW_EVENTS[8])), typed) == "not_reliable"
    on_verdict = Verdict.parse(_e({"kind": "verdict", "reason": "budget: x", "verdict_kind": "budget"}))
    assert refusal_kind(on_verdict) == "budget"  # on the verdict itself
    legacy = Trial.parse(_e(OLD_EVENTS[6]))
    assert legacy.verdict_kind is None and legacy.remedy is None
    assert refusal_kind(Verdict.parse(_e(OLD_EVENTS[7])), legacy) == "rejected by the reference guard"
    assert legacy_refusal_kind("rejected: the improvement is not reliably above 0: 0.1 -> 0.1") == (
        "rejected: the improvement is not reliably above 0"
    )
    # the fields as the trial result carries them (records.trials.TrialResult)
    nested = Trial.parse(_e(_ev("trial", 1, result={"accepted": False, "verdict_kind": "too_small", "remedy": "x"})))
    assert (nested.verdict_kind, nested.remedy) == ("too_small", "x")


def test_a_refusal_is_read_from_the_candidates_latest_trial(tmp_path):
    """A pending candidate is tried again: its refusal is the kind of the trial just before the verdict."""
    reason = "rejected: the improvement is real but too small to be worth a change: x"
    events = [
        _ev("proposal", 2, candidate_id="c1", interface="rubric_criteria", update=RUBRIC_REPAIR),
        _trial(2, "c1", "rubric_criteria", False, "pending: more groups needed", 4, verdict_kind="pending"),
        _ev("verdict", 2, candidate_id="c1", interface="rubric_criteria", verdict="pending", reason="pending"),
        _trial(4, "c1", "rubric_criteria", False, reason, 4, verdict_kind="too_small"),
        _ev("verdict", 4, candidate_id="c1", interface="rubric_criteria", verdict="rejected", reason=reason),
    ]
    run = _run_of(events, tmp_path, train_tasks={"a1": {"family": "lax"}})
    assert harness_decisions(run)["lax"].rejected == {"too_small": 1}
    assert trial_costs(run)["rubric_criteria:requirement"].trials == 2


def test_a_hint_on_probation_and_its_revert_are_decisions_of_their_own(tmp_path):
    """A hint committed on probation is named so, and the revert that ends it is counted for the tasks it covers
    (its ``updates``, remedy ``revert``), not taken for a repair."""
    revert = {**GUIDE_B1, "remedy": "revert", "text": None, "fraction": 0.0}
    events = [
        _ev(
            "commit",
            4,
            candidate_id="c1",
            interface="rollout_guidance",
            update=GUIDE_B1,
            covers=["b1", "b2"],
            probation=True,
            applies_from_step=5,
        ),
        _ev(
            "revert",
            9,
            candidate_id="c1",
            interface="rollout_guidance",
            covers=["b1", "b2"],
            updates=[revert, {**revert, "target": "b2"}],
            reason="probation not_reliable at look 3",
        ),
    ]
    run = _run_of(events, tmp_path, train_tasks={"b1": {"family": "tag"}, "b2": {"family": "tag"}})
    assert harness_decisions(run)["tag"].commits == {
        "rollout_guidance:guide (on probation)": 1,
        "rollout_guidance:revert": 1,
    }
    assert UpdateEvent.parse(_e(events[1])).covers == ("b1", "b2")


def test_a_reverted_rubric_probation_reaches_only_the_groups_it_graded(tmp_path):
    """Checks committed on probation (applying from step 3) and reverted (from step 6): the groups of steps 3–5
    were graded by them, those from 6 by the rubric before them (a later version, the same criteria), so reach
    counts the first three only; the family's figures say it was a probation and that it ended reverted."""
    from harnessrl.analysis.repairs import run_family_repairs
    from harnessrl.records.steps import GroupRecord

    revert = {"interface": "rubric_criteria", "task_id": "a1", "remove": ["no_commas"], "remedy": "revert"}
    events = [
        _ev("failure", 1, task_id="a1", failure="non_discriminative_high"),
        _ev(
            "commit",
            2,
            candidate_id="c1",
            interface="rubric_criteria",
            update=RUBRIC_REPAIR,
            covers=["a1", "a2"],
            probation=True,
            applies_from_step=3,
        ),
        _ev(
            "revert",
            5,
            candidate_id="c1",
            interface="rubric_criteria",
            covers=["a1", "a2"],
            applies_from_step=6,
            updates=[revert, {**revert, "task_id": "a2"}],
        ),
    ]
    version = {1: 0, 2: 0, 3: 1, 4: 1, 5: 1, 6: 2, 7: 2}
    groups = tuple(GroupRecord(step=s, task_id="a1", rubric_version=v, guided=0) for s, v in version.items())
    none = Missing("not written by this test")
    record = RunRecord(tmp_path, RunConfigView(), (), groups, (), tuple(map(_e, events)), none, none, none)
    run = RunData(method="harnessrl", seed=0, record=record, train_tasks={"a1": {"family": "lax"}})
    lax = run_family_repairs(run)["lax"]
    assert (lax.first_commit, lax.probation_commits, lax.reverts) == (3, 1, 1)
    assert (lax.groups_after_detection, lax.repaired_groups) == (6, 3)
    from harnessrl.analysis.report import _seed_repair

    assert (
        _seed_repair("0", lax)
        == "0: 1→3 (rubric_criteria:requirement (on probation)), 3/6 (1 on probation, 1 reverted)"
    )


# --------------------------------------------------------------------------------------- what the report says
def _dumped(figures: dict) -> dict:
    """Per family or remedy, the typed figures as results.json writes them."""
    return {k: v.model_dump() for k, v in figures.items()}


def test_harness_decisions_and_trial_costs_read_typed_and_legacy_events(repair_bench):
    new = RunData.read(repair_bench / "harnessrl" / "seed0", "harnessrl", 0)
    assert _dumped(harness_decisions(new)) == {
        "ctrl": {"commits": {}, "rejected": {"not_reliable": 1}, "gave_up": 0},
        "lax": {"commits": {"rubric_criteria:requirement": 1}, "rejected": {}, "gave_up": 0},  # once, a1 and a2
    }
    assert _dumped(trial_costs(new)) == {
        "rollout_guidance:guide": {"trials": 1, "accepted": 0, "rollouts": 8, "judge_calls": 2, "seconds": 1.0},
        "rubric_criteria:requirement": {"trials": 1, "accepted": 1, "rollouts": 4, "judge_calls": 2, "seconds": 1.0},
    }
    old = RunData.read(repair_bench / "harnessrl" / "seed1", "harnessrl", 1)
    assert _dumped(harness_decisions(old)) == {
        "ctrl": {"commits": {"task_sampling:park": 1, "rollout_guidance:guide_more": 1}, "rejected": {}, "gave_up": 0},
        "lax": {
            "commits": {"rubric_criteria:induced": 1, "rollout_guidance:guide_more": 1},
            "rejected": {"rejected by the reference guard": 1},
            "gave_up": 0,
        },
    }
    assert set(trial_costs(old)) == {"rubric_criteria:induced"}


def test_repairs_per_family_first_detection_first_commit_and_reach(repair_bench):
    res = write_bench_report(repair_bench, plots=False).results.model_dump()
    arm = res["family_repairs"]["harnessrl"]
    assert arm["seeds"] == [0, 1, 2]
    lax, ctrl = arm["families"]["lax"], arm["families"]["ctrl"]
    assert lax["failure"] == "lax_rubric" and ctrl["failure"] == "control"
    s0, s1, s2 = (lax["per_seed"][s] for s in ("0", "1", "2"))
    # seed 0: detected at step 1, repaired from step 3 (a1 and a2 through covers): groups after step 1 are
    # steps 2, 3, 4; those at 3 and 4 are graded by rubric version 1
    assert (s0["first_detection"], s0["detected_by"]) == (1, "failure: non_discriminative_high")
    assert (s0["first_commit"], s0["first_commit_name"]) == (3, "rubric_criteria:requirement")
    assert (s0["groups"], s0["groups_after_detection"], s0["repaired_groups"]) == (4, 3, 2)
    assert s0["reach"] == pytest.approx(2 / 3) and s0["rubric_commits"] == 1
    # seed 1: the audit finds a2 at step 0; the legacy edit of a2 applies from 3, the domain guidance from 4
    assert (s1["first_detection"], s1["detected_by"]) == (0, "rubric_audit")
    assert (s1["first_commit"], s1["first_commit_name"]) == (3, "rubric_criteria:induced")
    assert s1["first_commit_by_interface"] == {"rubric_criteria": 3, "rollout_guidance": 4}
    assert (s1["groups_after_detection"], s1["repaired_groups"], s1["reach"]) == (4, 1, 0.25)
    assert s2 == {
        "first_detection": None,
        "detected_by": None,
        "first_commit": None,
        "first_commit_name": None,
        "first_commit_by_interface": {},
        "commits": 0,
        "rubric_commits": 0,
        "probation_commits": 0,
        "reverts": 0,
        "groups": 4,
        "groups_after_detection": None,
        "repaired_groups": None,
        "reach": None,
    }
    assert lax["first_detection"]["mean"] == 0.5 and lax["first_detection"]["n"] == 2
    assert lax["first_commit"]["mean"] == 3 and lax["first_commit"]["std"] == 0.0 and lax["seeds_with_commit"] == 2
    assert lax["reach"]["mean"] == pytest.approx((2 / 3 + 0.25) / 2) and lax["reach"]["n"] == 2
    # ctrl: seed 0 detected at 2, nothing committed, 0 of 2 groups after; seed 1 parked b2 (from 2) before its
    # detection at 3 and guided it at step 4: 1 of 1
    c0, c1 = ctrl["per_seed"]["0"], ctrl["per_seed"]["1"]
    assert (c0["first_detection"], c0["first_commit"], c0["reach"]) == (2, None, 0.0)
    assert (c1["first_detection"], c1["first_commit"], c1["first_commit_name"]) == (3, 2, "task_sampling:park")
    assert (c1["groups_after_detection"], c1["repaired_groups"], c1["reach"]) == (1, 1, 1.0)
    assert ctrl["seeds_with_commit"] == 1 and ctrl["rubric_commits"]["mean"] == 0


def test_oracle_gap_is_paired_by_seed_overall_and_per_family(repair_bench):
    res = write_bench_report(repair_bench, plots=False).results.model_dump()
    paired = res["oracle_gap_paired"]
    assert (paired["fixed"], paired["oracle"]) == ("fixed", "oracle")
    end = paired["at"]["test_end"]["harnessrl"]
    # lax: the harness ends at 0.5, fixed 0.2, the oracle 0.8 on every seed: half the gap
    assert end["per_family"]["lax"]["per_seed"] == pytest.approx({"0": 0.5, "1": 0.5, "2": 0.5})
    # overall: fixed (0.2 + c) / 2, oracle (0.8 + c) / 2, the harness (0.5 + c + 0.01 seed) / 2
    assert end["overall"]["per_seed"] == pytest.approx({"0": 0.5, "1": 0.5 + 1 / 60, "2": 0.5 + 2 / 60})
    assert end["overall"]["mean"] == pytest.approx(0.5 + 1 / 60) and end["overall"]["n"] == 3
    # ctrl: the oracle is not ahead of fixed on any seed: no share
    assert end["per_family"]["ctrl"]["mean"] is None and end["per_family"]["ctrl"]["seeds_without_gap"] == [
        "0",
        "1",
        "2",
    ]
    best = paired["at"]["test_at_best"]["harnessrl"]  # the harness's best is step 2 (lax 0.2), fixed's step 4
    assert best["per_family"]["lax"]["mean"] == pytest.approx(0.0)
    # the family curves: fixed, the oracle and the harness arm per evaluation step
    lax = res["family_curves"]["lax"]
    assert list(lax) == ["fixed", "oracle", "harnessrl"]
    assert [(p["step"], round(p["mean"], 3)) for p in lax["harnessrl"]] == [(0, 0.2), (2, 0.2), (4, 0.5)]
    assert [round(p["mean"], 3) for p in lax["oracle"]] == [0.2, 0.5, 0.8] and lax["oracle"][0]["n"] == 3


def test_markdown_and_plot_show_the_repairs(repair_bench):
    rep = write_bench_report(repair_bench)
    md = rep.markdown.read_text()
    for heading in (
        "## Share of the oracle gap closed, paired by seed",
        "## Test score per family over training",
        "## Repairs per family",
        "### harnessrl (3 seed(s))",
    ):
        assert heading in md, heading
    assert "| lax | lax_rubric | 0.5 ± 0.7 (n=2) | 3.0 ± 0.0 (n=2) | 2 of 3 | 45.8% ± 29.5% (n=2) |" in md
    assert "0: 1→3 (rubric_criteria:requirement), 2/3; 1: 0→3 (rubric_criteria:induced), 1/4; 2: —→—" in md
    assert "| harnessrl | +0.52 ± 0.02 | n/a | +0.50 ± 0.00 |" in md  # paired shares at the end
    assert "Seeds where oracle is not 0.01 ahead of fixed: ctrl (seeds 0, 1, 2)." in md
    assert "| lax | harnessrl | 0.200 ± 0.000 | 0.200 ± 0.000 | 0.500 ± 0.000 |" in md
    assert "not_reliable ×1" in md and "rejected by the reference guard ×1" in md
    assert "## Unnecessary commits" not in md  # not the clean variant
    assert f"](plots/{PLOTS['gold_per_family']})" in md
    assert rep.plots["gold_per_family"].stat().st_size > 5000


def test_clean_variant_lists_every_rubric_commit_as_unnecessary(repair_bench):
    for seed in (0, 1, 2):
        cfg = repair_bench / "harnessrl" / f"seed{seed}" / "config.yaml"
        config = yaml.safe_load(cfg.read_text())
        config["data"]["train_rubric"] = "gold"
        cfg.write_text(yaml.safe_dump(config))
    rep = write_bench_report(repair_bench, plots=False)
    clean = rep.results.model_dump()["unnecessary_commits"]
    rows = {r["seed"]: r for r in clean["runs"]}
    assert clean["fixed"] == "fixed" and list(rows) == [0, 1, 2]
    assert (rows[0]["rubric_commits"], rows[0]["per_family"]) == (1, {"lax": 1})
    assert rows[0]["commits"] == [
        {
            "step": 3,
            "remedy": "rubric_criteria:requirement",
            "tasks": ["a1", "a2"],
            "families": ["lax"],
            "added": ["Uses no commas", "Uses no commas at all"],
        }
    ]
    assert rows[1]["rubric_commits"] == 1 and rows[1]["commits"][0]["added"] == ["Has no comma"]  # not the park
    assert rows[2]["rubric_commits"] == 0
    # the harness's best is at step 2 (lax 0.2, ctrl 0.6 + 0.02 seed), fixed's at step 4 (lax 0.2, ctrl 0.7 + 0.01 seed)
    assert rows[1]["vs_fixed"]["test_at_best"] == pytest.approx(-0.045)
    assert clean["per_arm"]["harnessrl"]["rubric_commits"]["mean"] == pytest.approx(2 / 3)
    assert clean["per_arm"]["harnessrl"]["per_family"] == {"lax": 2}
    md = rep.markdown.read_text()
    assert "## Unnecessary commits: rubric repairs where the training rubric is gold" in md
    assert "| harnessrl/seed0 | 1 | lax ×1 | -0.050 | +0.150 |" in md
    assert "| harnessrl/seed2 | 0 | none |" in md
    assert '- harnessrl/seed0, from step 3, rubric_criteria:requirement on a1, a2 (lax): "Uses no commas"; ' in md


# --------------------------------------------------------------------------------------- older reports unchanged
COMMITTED_REPORTS = sorted(
    p.parent.name
    for p in (REPO / "benchmarks" / "results").glob("*/results.json")
    if "runs" in json.loads(p.read_text(encoding="utf-8"))  # a bench report's (other commands write results.json too)
)


@pytest.mark.parametrize("name", COMMITTED_REPORTS)
def test_committed_reports_render_as_committed(name):
    """Each committed report's results.json renders to its committed results.md: the tables the repairs
    sections were added beside are unchanged (the raw runs are not in the repository, so the reports cannot be
    regenerated from them; their results.json have none of the new keys, so no new section shows)."""
    folder = REPO / "benchmarks" / "results" / name
    results = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    # read as a report reads its own (reports made before several folders were read name one, in bench_dir)
    assert _markdown(BenchResults.read(results, str(folder))) == (folder / "results.md").read_text(encoding="utf-8")


def test_the_demo_runs_events_give_the_decisions_they_gave_before_the_typed_reader():
    """The demo's events at 735bc61 (written before any typed field; kept as test data since the committed demo
    moved on) read as the rationale-tag and reason-text reader read them: frozen from the code before
    bench/decisions.py."""
    events = REPO / "tests" / "data" / "demo-735bc61-events.jsonl"
    run = _run_of(read_jsonl(events), events.parent)
    decisions = _dumped(harness_decisions(run))
    assert decisions["if-004"] == {"commits": {"rubric_criteria:replace_harder": 1}, "rejected": {}, "gave_up": 0}
    assert decisions["med-004"] == {"commits": {"task_sampling:park": 1}, "rejected": {"budget": 2}, "gave_up": 0}
    assert decisions["wri-010"] == {
        "commits": {},
        "rejected": {
            "no effect on the learning signal": 3,
            "rejected by the reference guard": 1,
            "rejected: the improvement is not reliably above 0": 7,
        },
        "gave_up": 4,
    }
    assert len(decisions) == 13 and sum(sum(d["rejected"].values()) for d in decisions.values()) == 33
    costs = _dumped(trial_costs(run))
    assert {k: (v["trials"], v["accepted"]) for k, v in costs.items()} == {
        "rollout_guidance:guide": (1, 0),
        "rollout_guidance:guide_criterion": (4, 0),
        "rollout_guidance:guide_more": (5, 0),
        "rubric_criteria:drop": (1, 0),
        "rubric_criteria:feature_heavier": (1, 0),
        "rubric_criteria:feature_pitfall": (1, 0),
        "rubric_criteria:length_pitfall": (2, 0),
        "rubric_criteria:length_revise": (2, 0),
        "rubric_criteria:padding_pitfall": (3, 0),
        "rubric_criteria:replace_harder": (2, 1),
        "task_sampling:demote": (4, 0),
        "task_sampling:park": (9, 1),
    }
    assert costs["rollout_guidance:guide_criterion"]["rollouts"] == 24 and costs["rollout_guidance:guide"] == {
        "trials": 1,
        "accepted": 0,
        "rollouts": 0,
        "judge_calls": 0,
        "seconds": 0,
    }
