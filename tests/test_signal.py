"""The learning signal as the trainer computes it, and the critic's invariances (docs/design.md §4).

GRPO learns from advantages, which a per-group change ``r -> a*r + b`` (a > 0) leaves as they were. These
tests pin that: the advantages match TRL's own computation; property tests over random groups and random
rubrics show that every rubric edit that only rescales or shifts a group's rewards is rejected by the
critic as "no effect on the learning signal"; an edit that truly reorders rollouts is accepted; and the
guidance and sampling metrics cannot be inflated by a larger raw reward spread that changes no advantage.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers import record_group
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessrl.critic.signal import (
    MOVED_SIGNAL_SHARE,
    AdvantageSpec,
    SignalConfig,
    advantage_effect,
    advantages,
    bessel_std,
    gives_signal,
    noise_floor,
    reference_rank,
)
from harnessrl.critic.trials import (
    CRITERION_SIGNAL,
    NO_EFFECT,
    SIGNAL_SHARE,
    FrozenPolicyTrials,
    TrialConfig,
)
from harnessrl.data import Criterion, Task
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks, SetGuidance
from harnessrl.judges import BackendVerdict, GradeRequest, RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.steps import Recorder, RolloutRecord, StepRecord

# ------------------------------------------------------------------------------------------- advantages


def trl_advantages(groups: Sequence[Sequence[float]], scale: str) -> list[np.ndarray]:
    """TRL 1.16's formula, written with its own ``nanstd`` (``GRPOTrainer._generate_and_score_completions``)."""
    from trl.trainer.utils import nanstd

    g = len(groups[0])
    rewards = torch.tensor([x for grp in groups for x in grp], dtype=torch.float64)
    mean = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g)
    if scale == "batch":
        std = nanstd(rewards).expand_as(rewards)
    else:
        std = nanstd(rewards.view(-1, g), dim=1).repeat_interleave(g)
    adv = rewards - mean
    if scale != "none":
        adv = adv / (std + 1e-4)
    adv = torch.nan_to_num(adv, nan=0.0).numpy()
    return [adv[i * g : (i + 1) * g] for i in range(len(groups))]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_advantages_are_the_trainers(scale):
    rng = np.random.default_rng(0)
    groups = [rng.random(6).tolist() for _ in range(5)] + [[0.5] * 6, [0.2, float("nan"), 0.9, 0.4, 0.4, 0.1]]
    ours = advantages([np.array(g) for g in groups], AdvantageSpec(scale_rewards=scale, group_size=6))
    for a, b in zip(ours, trl_advantages(groups, scale), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-9)


def test_spec_reads_the_trainer_config():
    from trl import GRPOConfig

    args = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, bf16=False, num_generations=8, scale_rewards="batch")
    spec = AdvantageSpec.from_args(args)
    assert spec == AdvantageSpec(scale_rewards="batch", group_size=8)
    assert AdvantageSpec.from_args(SimpleNamespace(scale_rewards=False), 4).scale_rewards == "none"
    assert AdvantageSpec.from_args(SimpleNamespace(scale_rewards=True), 4).scale_rewards == "group"
    with pytest.raises(ValueError, match="scale_rewards"):
        AdvantageSpec.from_args(SimpleNamespace(scale_rewards="max"), 4)


groups_st = st.lists(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=16).filter(lambda g: bessel_std(g) > 0.02),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(groups=groups_st, a=st.floats(0.2, 5), b=st.floats(-1, 1))
def test_any_affine_change_of_a_group_has_no_effect_with_group_scaling(groups, a, b):
    base = [np.array(g) for g in groups]
    cand = [a * g + b for g in base]
    effect, per_group = advantage_effect(base, cand, AdvantageSpec("group"))
    assert effect < SignalConfig().advantage_tolerance
    assert len(per_group) == len(groups)


@settings(max_examples=100, deadline=None)
@given(groups=groups_st, a=st.floats(0.2, 5))
def test_a_rescaling_is_an_effect_without_std_scaling(groups, a):
    """With scale_rewards='none' the trainer's advantages are in reward units: a rescaling changes them."""
    base = [np.array(g) for g in groups]
    effect, _ = advantage_effect(base, [a * g for g in base], AdvantageSpec("none"))
    biggest = max(float(np.max(np.abs(g - g.mean()))) for g in base)
    assert effect == pytest.approx(abs(a - 1) * biggest, rel=1e-6, abs=1e-9)


def test_reordering_is_an_effect():
    base = [np.array([0.1, 0.5, 0.9, 0.3])]
    effect, _ = advantage_effect(base, [base[0][::-1].copy()], AdvantageSpec())
    assert effect > 1


# ------------------------------------------------------------------------------------------- noise


def test_noise_floor_model():
    judged = Criterion(id="j", text="Explains the cause", weight=3)
    check = Criterion(id="p", text="At least 5 words", weight=1, check={"type": "word_count", "min": 5})
    rubric = [judged, check]
    assert noise_floor(rubric, [{"j": 0.5, "p": 1.0}], 0.1) == pytest.approx(0.1 * 3 / 4)
    assert noise_floor(rubric, [{"j": 1.0, "p": 0.0}, {"j": 0.0, "p": 1.0}], 0.1) == 0  # firm verdicts
    assert noise_floor([check], [{"p": 1.0}], 0.1) == 0  # a programmatic check is exact
    assert noise_floor(rubric, [{"j": None, "p": 1.0}], 0.1) == 0  # a missing verdict carries no noise
    # in the rubric's reward units: scaling every weight leaves it as it is, as it does the rewards
    heavy = [c.model_copy(update={"weight": c.weight * 7}) for c in rubric]
    rows = [{"j": 0.3, "p": 1.0}, {"j": 0.8, "p": 0.0}]
    assert noise_floor(heavy, rows, 0.1) == pytest.approx(noise_floor(rubric, rows, 0.1))
    assert not gives_signal(np.array([0.50, 0.51, 0.49]), floor=0.05)  # spread within the judge's noise
    assert gives_signal(np.array([0.2, 0.8, 0.5]), floor=0.05)
    assert not gives_signal(np.array([0.5, 0.5 + 1e-6]), floor=0)  # below TRL's own 1e-4


def test_reference_rank():
    assert reference_rank(0.5, np.array([0.1, 0.5, 0.9, 0.2])) == pytest.approx(2.5 / 4)
    assert math.isnan(reference_rank(0.5, np.array([np.nan])))


# ------------------------------------------------------------------------------------------- rubric trials


class TableJudge:
    """Judge backend that answers each (criterion text, response) from a table; anything else gets 1."""

    name = "table"

    def __init__(self, table: dict[tuple[str, str], float]):
        self.table = table

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        return [BackendVerdict(self.table.get((r.criterion.text, r.response), 1.0)) for r in requests]


def _failure(kind: str, task_id: str, **evidence) -> Failure:
    return Failure(
        kind=kind,
        step=1,
        task_id=task_id,
        domain="writing",
        evidence=evidence,
        summary=kind,
        interface_hint="rubric_criteria",
    )


@st.composite
def rubric_groups(draw):
    """A random rubric (judged and programmatic, positive weights), 1-3 groups of 2-8 distinct rollouts with
    random verdicts, and one criterion that is constant over every rollout: saturated (1) or dead (0)."""
    n_crit = draw(st.integers(2, 5))
    weights = draw(st.lists(st.sampled_from([0.5, 1, 2, 3, 5]), min_size=n_crit, max_size=n_crit))
    judged = draw(st.lists(st.booleans(), min_size=n_crit, max_size=n_crit))
    const_idx = draw(st.integers(0, n_crit - 1))
    const_val = draw(st.sampled_from([0.0, 1.0]))
    criteria = []
    for i, (w, j) in enumerate(zip(weights, judged, strict=True)):
        kind = {} if j else {"check": {"type": "contains", "phrases": [f"tok{i}"]}}
        criteria.append(Criterion(id=f"c{i}", text=f"criterion {i}", weight=w, **kind))
    n_groups = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(2, 8), min_size=n_groups, max_size=n_groups))
    texts, table = [], {}
    for g, size in enumerate(sizes):
        group = []
        for k in range(size):
            tokens = [f"g{g}m{k}"]
            for i, c in enumerate(criteria):
                if c.check is not None:  # programmatic: the verdict is whether the text carries tok<i>
                    passes = const_val == 1.0 if i == const_idx else draw(st.booleans())
                    if passes:
                        tokens.append(f"tok{i}")
            text = " ".join(tokens)
            for i, c in enumerate(criteria):
                if c.check is None:
                    v = const_val if i == const_idx else draw(st.sampled_from([0.0, 0.2, 0.5, 0.7, 0.9, 1.0]))
                    table[(c.text, text)] = v
            group.append(text)
        texts.append(group)
    return criteria, texts, table, const_idx


def _affine_edits(criteria: list[Criterion], const_idx: int) -> list[EditRubric]:
    """Rubric edits that map each group's rewards r -> a*r + b with a > 0: reweighting, dropping or
    rewording-to-the-same-verdicts the constant criterion, adding a criterion every rollout passes, rescaling
    every weight."""
    cid = criteria[const_idx].id
    w = criteria[const_idx].weight
    edits = [
        EditRubric(task_id="t", reweight={cid: w * 0.5}),
        EditRubric(task_id="t", reweight={cid: w * 3}),
        EditRubric(task_id="t", reweight={c.id: c.weight * 4 for c in criteria}),
        EditRubric(task_id="t", add=[Criterion(id="always", text="always passes", weight=2)]),
    ]
    if len(criteria) > 1:
        edits.append(EditRubric(task_id="t", remove=[cid]))
    return edits


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=rubric_groups())
def test_property_affine_rubric_edits_are_rejected_as_no_effect(case):
    criteria, groups, table, const_idx = case
    task = Task(id="t", domain="writing", prompt="Write.", rubric=criteria)
    for edit in _affine_edits(criteria, const_idx):
        harness, recorder = Harness([task]), Recorder(None)
        judge = RubricJudge(TableJudge(table))
        for step, texts in enumerate(groups, start=1):
            record_group(harness, judge, recorder, step, "t", texts)
        trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(bootstrap=50))
        fail = _failure("criterion_saturated", "t", criterion_id=criteria[const_idx].id)
        result = trials.run(edit, "affine", fail)
        assert not result.accepted, (edit, result.reason)
        assert result.reason.startswith(NO_EFFECT), (edit, result.reason)
        assert result.advantage_effect < TrialConfig().signal.advantage_tolerance


def _saturated_env():
    """Task "w": a judged criterion "Covers the topic" every rollout passes, and a length check that splits the
    group; the rollouts differ in whether they give an example (what a stricter wording asks for)."""
    crit = [
        Criterion(id="topic", text="Covers the topic", weight=3),
        Criterion(id="short", text="At most 6 words", weight=1, check={"type": "word_count", "max": 6}),
    ]
    task = Task(
        id="w",
        domain="writing",
        prompt="Explain tides.",
        reference_answer="Moon pulls water, for example.",
        rubric=crit,
    )
    texts = [
        "tides rise",
        "the moon pulls the water up, for example",
        "tides rise and fall on every coast",
        "for example the sea",
    ]
    table = {("Covers the topic", t): 1.0 for t in [*texts, task.reference_answer]}
    stricter = "Covers the topic with a concrete example, as the reference answer does"
    table |= {(stricter, t): float("example" in t) for t in [*texts, task.reference_answer]}
    harness, recorder = Harness([task]), Recorder(None)
    judge = RubricJudge(TableJudge(table))
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "w", texts)
    return harness, recorder, judge, stricter


def test_saturated_criterion_reweight_is_no_effect_and_a_stricter_wording_is_accepted():
    harness, recorder, judge, stricter = _saturated_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig())
    fail = _failure("criterion_saturated", "w", criterion_id="topic")
    reweight = trials.run(EditRubric(task_id="w", reweight={"topic": 1.5}), "rw", fail)
    assert not reweight.accepted and reweight.reason.startswith(NO_EFFECT)
    assert reweight.measurements.learning_signal.advantage_effect < 0.05
    # the raw std the old critic measured does rise: that is exactly the inflation it fell for
    raw_b = np.std(reweight.measurements.baseline_rewards)
    raw_c = np.std(reweight.measurements.candidate_rewards)
    assert raw_c > raw_b * 1.2

    reword = trials.run(EditRubric(task_id="w", reword={"topic": stricter}), "rw2", fail)
    assert reword.metric == CRITERION_SIGNAL
    assert reword.accepted, reword.reason
    assert reword.baseline == 0 and reword.candidate == 1 and reword.advantage_effect > 0.05
    assert reword.measurements.targeted_criteria.model_dump() == {"baseline": ["topic"], "candidate": ["topic"]}


# ------------------------------------------------------------------------------------------- guidance + sampling


class ScaledSampler:
    """Baseline arm: rewards alternate a little; guided members: the same order, twice the spread."""

    def sample(self, prompts, temperature, max_new_tokens):
        out = []
        for k, p in enumerate(prompts):
            guided = "HINT" in p[-1]["content"]
            out.append(("loud " if guided else "") + ("good" if k % 2 == 0 else "bad"))
        return out


def test_guidance_cannot_win_by_a_larger_raw_spread_of_a_group_that_already_gives_signal():
    """The group already gives signal (good/bad alternate); the hint doubles its reward spread without
    changing which rollouts are better: the old raw-std metric rose, the share of groups that give signal
    does not, and the candidate is rejected."""
    crit = [Criterion(id="q", text="Is good", weight=1)]
    task = Task(id="g", domain="writing", prompt="Write.", rubric=crit)
    table = {("Is good", "good"): 0.6, ("Is good", "bad"): 0.4, ("Is good", "loud good"): 0.8}
    table[("Is good", "loud bad")] = 0.2
    harness, recorder = Harness([task]), Recorder(None)
    judge = RubricJudge(TableJudge(table))
    trials = FrozenPolicyTrials(
        harness, recorder, judge, ScaledSampler(), TrialConfig(guidance_trial="arms", signal={"verdict_noise": 0})
    )
    result = trials.run(
        SetGuidance(target="g", text="HINT", fraction=0.5), "loud", _failure("non_discriminative_low", "g")
    )
    row = result.measurements.tasks[0]
    assert row.candidate_std > row.baseline_std  # what the old critic measured, and accepted
    assert result.metric == SIGNAL_SHARE and result.baseline == result.candidate == 1
    assert not result.accepted and result.improvement == 0


def test_sampling_cannot_win_by_promoting_a_task_whose_spread_is_judge_noise():
    """ "noisy": soft judged verdicts around 0.5 whose spread (std ~0.03) is within the judge's noise;
    "exact": a programmatic check that splits its group (std 0.5). Promoting "noisy" over "exact" raises the
    expected raw std the old critic measured, and lowers the share of groups that give signal."""
    noisy = Task(id="noisy", domain="writing", prompt="Muse.", rubric=[Criterion(id="m", text="Is deep", weight=1)])
    exact = Task(
        id="exact",
        domain="writing",
        prompt="Say hi.",
        rubric=[Criterion(id="h", text="Says hi", weight=1, check={"type": "contains", "phrases": ["hi"]})],
    )
    table = {("Is deep", f"muse {k}"): v for k, v in enumerate([0.45, 0.5, 0.55, 0.52])}
    harness, recorder = Harness([noisy, exact]), Recorder(None)
    judge = RubricJudge(TableJudge(table))
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "noisy", [f"muse {k}" for k in range(4)])
        record_group(harness, judge, recorder, step, "exact", ["hi", "no", "hi there", "nope"])
    trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["exact"], weight=0.2), "demote", None)
    tasks = result.measurements.tasks
    assert tasks["noisy"].signal_share == 0 and tasks["exact"].signal_share == 1
    assert result.metric == MOVED_SIGNAL_SHARE and result.improvement == -1 and not result.accepted
    # a reweight that moves no probability is refused before any bootstrap
    same = trials.run(ReweightTasks(task_ids=["exact"], weight=1.0), "same", None)
    assert not same.accepted and same.reason.startswith(NO_EFFECT)


# ------------------------------------------------------------------------------------------- the demo's reweights

DEMO = Path(__file__).with_name("data") / "demo_saturated_reweights.json"


def _demo_cases() -> list[dict]:
    return json.loads(DEMO.read_text())


@pytest.mark.parametrize(
    "case", _demo_cases(), ids=lambda c: f"{c['task']['id']}:{next(iter(c['update']['reweight']))}"
)
def test_the_demos_saturated_reweights_are_rejected_as_no_effect(case):
    """The three reweights ``make demo`` committed before the critic measured advantages (if-004 c2 1 -> 0.5,
    wri-009 c3 5 -> 2.5, wri-001 c4 3 -> 1.5), rebuilt from the rollouts their trials re-graded
    (tests/data/build_demo_candidates.py): the old metric, raw group reward std, rose exactly as it did then;
    the advantages GRPO trains on did not move, and today's critic rejects each as no effect."""
    task = Task.model_validate(case["task"])
    rollouts = [RolloutRecord.model_validate(r) for r in case["rollouts"]]
    table = {}
    for r in rollouts:
        for c in task.rubric:
            if c.check is None and r.verdicts.get(c.id) is not None:
                table[(c.text, r.completion)] = r.verdicts[c.id]
    for c in task.rubric:
        if c.check is None and case["reference_verdicts"].get(c.id) is not None:
            table[(c.text, task.reference_answer)] = case["reference_verdicts"][c.id]
    harness, recorder = Harness([task]), Recorder(None)
    for step in sorted({r.step for r in rollouts}):
        recorder.add(StepRecord(step=step, groups=[]), [r for r in rollouts if r.step == step])
    judge = RubricJudge(TableJudge(table))
    fail = Failure.model_validate(
        {
            "kind": "criterion_saturated",
            "step": max(r.step for r in rollouts),
            "task_id": task.id,
            "domain": task.domain,
            "evidence": {"criterion_id": next(iter(case["update"]["reweight"]))},
            "summary": case["failure_id"],
            "interface_hint": "rubric_criteria",
        }
    )
    result = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig()).run(
        EditRubric.model_validate(case["update"]), case["candidate_id"], fail
    )
    old = case["old_trial"]
    assert old["accepted"] and old["metric"] == "group_reward_std"
    m = result.measurements
    # the rewards re-graded now are the ones the old trial measured: same rollouts, same verdicts
    raw = [
        np.mean(np.std(np.array(rewards).reshape(-1, len(rewards) // m.n_groups), axis=1))
        for rewards in (m.baseline_rewards, m.candidate_rewards)
    ]
    assert raw[0] == pytest.approx(old["baseline"], abs=2e-3) and raw[1] == pytest.approx(old["candidate"], abs=2e-3)
    assert raw[1] > raw[0]  # what the old critic accepted
    assert not result.accepted
    assert result.reason.startswith(NO_EFFECT), result.reason
    assert result.advantage_effect < TrialConfig().signal.advantage_tolerance


def test_a_group_whose_advantages_do_not_move_keeps_its_status():
    """Reweighting X reorders group 1 (X varies there) but only rescales group 2 (X is 1 for every rollout):
    group 2's raw spread rises from 0.014 (flat, below eps 0.02) to 0.038, yet its advantages are the same, so it
    gives no new signal and the candidate earns nothing for it."""
    rubric = [Criterion(id="a", text="Is accurate", weight=1), Criterion(id="x", text="Is extra", weight=3)]
    task = Task(id="t", domain="writing", prompt="Write.", rubric=rubric)
    g1 = {"one": (1, 0), "two": (0, 1), "three": (1, 1), "four": (0, 0)}
    g2 = {"five": (0.0, 1), "six": (0.0, 1), "seven": (0.1, 1), "eight": (0.1, 1)}
    table = {}
    for text, (a, x) in {**g1, **g2}.items():
        table[("Is accurate", text)] = a
        table[("Is extra", text)] = x
    harness, recorder = Harness([task]), Recorder(None)
    judge = RubricJudge(TableJudge(table))
    record_group(harness, judge, recorder, 1, "t", list(g1))
    record_group(harness, judge, recorder, 2, "t", list(g2))
    trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig())
    result = trials.run(EditRubric(task_id="t", reweight={"x": 0.5}), "rw", _failure("non_discriminative_low", "t"))
    ls = result.measurements.learning_signal
    assert ls.advantage_effect_per_group[0] > 0.05 and ls.advantage_effect_per_group[1] < 1e-6
    assert result.measurements.signal_share_per_group.model_dump() == {
        "baseline": [True, False],
        "candidate": [True, False],
    }
    assert not result.accepted and result.improvement == 0
