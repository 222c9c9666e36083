"""Failure detectors (docs/design.md §4): each fires on a planted failure and stays quiet on a healthy group."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError

from harnessrl.data import Criterion
from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.detectors import Detector, judge_disagreement
from harnessrl.detection.failure_detector import FailureDetector
from harnessrl.detection.ranks import spearman
from harnessrl.interfaces.registry import failure_hints
from harnessrl.records.failures import FAILURE_KINDS, Failure
from harnessrl.records.steps import GroupRecord, RolloutRecord, StepRecord, group_stats

# ---------------------------------------------------------------------------------------------- builders


def group(
    step: int,
    rewards: list[float | None],
    *,
    task: str = "t1",
    lengths: list[int] | None = None,
    crit: dict[str, float | None] | None = None,
    version: int = 0,
    domain: str = "writing",
    reference: float | None = None,
) -> GroupRecord:
    mean, std = group_stats(rewards)
    return GroupRecord(
        step=step,
        task_id=task,
        domain=domain,
        rubric_version=version,
        rewards=rewards,
        mean=mean,
        std=std,
        flat=std is not None and std < 0.02,
        lengths=lengths if lengths is not None else [10] * len(rewards),
        criterion_means=crit or {},
        reference_reward=reference,
    )


def rollouts_of(g: GroupRecord, texts: list[str]) -> list[RolloutRecord]:
    return [
        RolloutRecord(
            step=g.step,
            task_id=g.task_id,
            member=i,
            guided=False,
            rubric_version=g.rubric_version,
            temperature=1.0,
            completion=t,
            length_tokens=g.lengths[i],
            length_words=len(t.split()),
            reward=g.rewards[i],
            verdicts={"c1": g.rewards[i]},
        )
        for i, t in enumerate(texts)
    ]


def step(s: int, *groups: GroupRecord) -> StepRecord:
    return StepRecord(step=s, groups=list(groups))


def kinds(failures: list[Failure]) -> list[str]:
    return [f.kind for f in failures]


def make_detector(*args, **kwargs) -> FailureDetector:
    """A FailureDetector that hints each failure with the registered interfaces, as a training run's does."""
    return FailureDetector(*args, hints=kwargs.pop("hints", failure_hints()), **kwargs)


def run(det: FailureDetector, *steps: StepRecord) -> list[list[Failure]]:
    return [det.observe(s) for s in steps]


# ---------------------------------------------------------------------------------------------- config + stats


def test_config_defaults_and_validation():
    cfg = DetectorConfig()
    assert (cfg.eps, cfg.low, cfg.high, cfg.window, cfg.min_points, cfg.streak) == (0.02, 0.3, 0.8, 4, 8, 3)
    # the judge-disagreement check is on by default, at a bounded cost: one group re-graded per 10 steps
    assert (cfg.regrade_every, cfg.regrade_groups) == (10, 1)
    with pytest.raises(ValidationError, match="windw"):
        DetectorConfig(windw=3)
    with pytest.raises(ValidationError, match="low"):
        DetectorConfig(low=0.9, high=0.5)
    with pytest.raises(ValidationError, match="length"):
        DetectorConfig(features=["length"])
    with pytest.raises(ValueError, match="unknown surface feature"):
        make_detector(DetectorConfig(features=["emojis"]))
    make_detector(DetectorConfig(features=["emojis"]), features={"emojis": lambda t: float(t.count("🙂"))})


def test_spearman_matches_scipy_with_ties():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(3, 40))
        x = rng.integers(0, 5, n).astype(float)  # many ties
        y = rng.random(n).round(1)
        ours = spearman(x, y)
        ref = spearmanr(x, y).statistic
        if np.isnan(ref):
            assert ours is None
        else:
            assert ours == pytest.approx(ref, abs=1e-12)
    assert spearman([1, 2, 3], [5, 5, 5]) is None  # constant side: undefined
    assert spearman([1], [2]) is None
    assert spearman([1, 2, 3], [1, 2, 3]) == pytest.approx(1.0)


def test_surface_features():
    from harnessrl.detection.features import bullet_lines, exclamations, repeated_word

    text = "Intro\n- one\n  * two\n• three\n+ four\n1. five\n12) six\n---\n**bold**\n-\n2024 was a year"
    assert bullet_lines(text) == 6
    assert bullet_lines("") == 0
    assert exclamations("Wow! Great!!") == 3
    assert repeated_word("Hydration, hydration and HYDRATION matter; that that that that.") == 3  # stop words skipped
    assert repeated_word("") == 0


def test_all_kinds_have_a_hint_and_detectors_share_the_protocol():
    det = make_detector()
    assert all(isinstance(d, Detector) for d in det.detectors)
    # nine detectors' kinds, the rubric audit's (unchecked_requirement) and the reference witness's
    assert len(FAILURE_KINDS) == 11
    assert set(failure_hints()) == set(FAILURE_KINDS)  # every kind has an interface that claims it first


# ---------------------------------------------------------------------------------------------- non-discriminative


def test_uniformly_low_fires_with_numbers():
    det = make_detector()
    (fs,) = run(det, step(5, group(5, [0.1, 0.1, 0.1, 0.1])))
    assert kinds(fs) == ["non_discriminative_low"]
    f = fs[0]
    assert (f.step, f.task_id, f.domain, f.interface_hint) == (5, "t1", "writing", "rollout_guidance")
    assert f.evidence.mean == pytest.approx(0.1) and f.evidence.std == 0.0
    assert f.evidence.rewards == [0.1] * 4 and f.evidence.n == 4
    assert "0.10" in f.summary and "low" in f.summary and "t1" in f.summary
    json.loads(f.model_dump_json())  # evidence is JSON-serialisable


def test_uniformly_high_fires_and_healthy_is_quiet():
    det = make_detector()
    (fs,) = run(det, step(0, group(0, [0.9, 0.9, 0.9, 0.9], task="hi"), group(0, [0.2, 0.8, 0.5, 0.9], task="ok")))
    assert kinds(fs) == ["non_discriminative_high"]
    assert fs[0].task_id == "hi" and fs[0].interface_hint == "rubric_criteria"
    assert "0.90" in fs[0].summary
    # flat in the middle band: neither low nor high
    assert run(make_detector(), step(0, group(0, [0.5, 0.5, 0.5, 0.5])))[0] == []


def test_non_discriminative_borderlines_are_strict():
    cfg = DetectorConfig(low=0.25, high=0.75, eps=0.125)
    # mean exactly at low / high: not fired (strict)
    assert run(make_detector(cfg), step(0, group(0, [0.25, 0.25])))[0] == []
    assert run(make_detector(cfg), step(0, group(0, [0.75, 0.75])))[0] == []
    # just beyond: fired
    assert kinds(run(make_detector(cfg), step(0, group(0, [0.125, 0.125])))[0]) == ["non_discriminative_low"]
    assert kinds(run(make_detector(cfg), step(0, group(0, [0.875, 0.875])))[0]) == ["non_discriminative_high"]
    # std exactly eps (0.0 and 0.25 -> std 0.125): not flat, the same rule as GroupRecord.flat
    assert run(make_detector(cfg), step(0, group(0, [0.0, 0.25])))[0] == []
    cfg2 = DetectorConfig(low=0.25, high=0.75, eps=0.1251)
    assert kinds(run(make_detector(cfg2), step(0, group(0, [0.0, 0.25])))[0]) == ["non_discriminative_low"]


def test_small_groups_and_missing_rewards():
    # G=2
    assert kinds(run(make_detector(), step(0, group(0, [0.0, 0.0])))[0]) == ["non_discriminative_low"]
    assert run(make_detector(), step(0, group(0, [0.0, 1.0])))[0] == []
    # one valid reward says nothing about spread
    assert run(make_detector(), step(0, group(0, [0.0, None])))[0] == []
    assert run(make_detector(), step(0, group(0, [None, None])))[0] == []
    # missing is not zero: two 0.9s and two missing are uniformly high, not a spread
    (fs,) = run(make_detector(), step(0, group(0, [0.9, None, 0.9, None])))
    assert kinds(fs) == ["non_discriminative_high"]
    assert fs[0].evidence.missing_rewards == 2 and fs[0].evidence.n == 2
    assert fs[0].evidence.rewards == [0.9, None, 0.9, None]
    assert "2 missing" in fs[0].summary
    # NaN counts as missing too
    assert kinds(run(make_detector(), step(0, group(0, [0.9, float("nan"), 0.9])))[0]) == ["non_discriminative_high"]


def test_task_drawn_twice_in_a_step_gives_two_groups():
    (fs,) = run(make_detector(), step(0, group(0, [0.0, 0.0]), group(0, [0.0, 0.0])))
    assert kinds(fs) == ["non_discriminative_low", "non_discriminative_low"]


# ---------------------------------------------------------------------------------------------- spurious length


def length_groups(steps: range, *, task="t1", g=4, seed=0, correlated=True, version=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in steps:
        lengths = rng.integers(10, 200, g)
        rewards = np.clip(lengths / 200 + rng.normal(0, 0.03, g), 0, 1) if correlated else rng.random(g)
        out.append(
            step(
                s, group(s, [float(r) for r in rewards], task=task, lengths=[int(x) for x in lengths], version=version)
            )
        )
    return out


def test_spurious_length_fires_once_enough_points():
    det = make_detector()
    per_step = run(det, *length_groups(range(4)))
    assert "spurious_length" not in kinds(per_step[0])  # 4 points < min_points 8
    assert all("spurious_length" in kinds(fs) for fs in per_step[1:])
    f = next(f for f in per_step[-1] if f.kind == "spurious_length")
    assert f.interface_hint == "rubric_criteria"
    ev = f.evidence
    assert ev.feature == "length" and ev.n == 16 and ev.groups == 4 and ev.steps == [0, 1, 2, 3]
    assert ev.rho > 0.9 and ev.p_value < 0.05 and ev.threshold == 0.6
    assert len(ev.points) == 16 and ev.points == sorted(ev.points)
    assert f"{ev.rho:.2f}" in f.summary and "16 rollouts" in f.summary


def test_spurious_length_quiet_on_healthy_and_constant_lengths():
    det = make_detector()
    fs = [f for s in length_groups(range(8), correlated=False, seed=3) for f in det.observe(s)]
    assert "spurious_length" not in kinds(fs)
    # constant lengths: correlation undefined, no failure
    det = make_detector()
    fs = [f for s in range(4) for f in det.observe(step(s, group(s, [0.1, 0.4, 0.7, 0.9], lengths=[50] * 4)))]
    assert fs == []


def test_spurious_length_g2_needs_four_groups():
    det = make_detector()
    per_step = run(det, *length_groups(range(4), g=2, seed=1))
    assert [("spurious_length" in kinds(fs)) for fs in per_step] == [False, False, False, True]


def test_correlation_threshold_is_strict():
    lengths = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    rewards = [0.1, 0.3, 0.2, 0.4, 0.6, 0.5, 0.7, 0.9, 0.8, 1.0]
    rho = spearman(rewards, lengths)
    assert 0.9 < rho < 1
    g = group(0, rewards, lengths=lengths)
    at = DetectorConfig(corr_threshold=rho, corr_max_p=None, features=[])
    assert kinds(make_detector(at).observe(step(0, g))) == []
    below = DetectorConfig(corr_threshold=rho - 1e-9, corr_max_p=None, features=[])
    assert kinds(make_detector(below).observe(step(0, g))) == ["spurious_length"]


def test_p_value_guard_on_few_points():
    # rho 0.62 on 8 points passes the rho threshold but not p < 0.05; without the guard it fires
    lengths = list(range(1, 9))
    rewards = [0.5, 0.2, 0.3, 0.4, 0.1, 0.6, 0.7, 0.8]  # ranks 1..8 with one swap of distance 4
    rho = spearman(rewards, lengths)
    assert rho == pytest.approx(1 - 6 * 32 / 504)
    g = group(0, rewards, lengths=lengths)
    assert make_detector(DetectorConfig(features=[])).observe(step(0, g)) == []
    assert kinds(make_detector(DetectorConfig(features=[], corr_max_p=None)).observe(step(0, g))) == ["spurious_length"]


def test_window_old_steps_drop_out():
    det = make_detector(DetectorConfig(window=2))
    steps = length_groups(range(2), seed=0) + length_groups(range(2, 6), correlated=False, seed=5)
    per_step = run(det, *steps)
    assert "spurious_length" in kinds(per_step[1])
    assert all("spurious_length" not in kinds(fs) for fs in per_step[3:])  # the correlated groups left the window
    assert [o.step for o in det.histories["t1"].window] == [4, 5]


def test_max_age_steps_drops_stale_groups():
    det = make_detector(DetectorConfig(max_age_steps=10))
    steps = length_groups(range(2), seed=0)
    run(det, *steps)
    s = steps[1].groups[0].model_copy(update={"step": 50})
    assert "spurious_length" not in kinds(det.observe(step(50, s)))  # only 4 fresh points
    assert [o.step for o in det.histories["t1"].window] == [50]


def test_correlation_ignores_missing_rewards():
    det = make_detector(DetectorConfig(features=[]))
    lengths = [10, 20, 30, 40, 1000, 2000]
    rewards = [0.1, 0.2, 0.3, 0.4, None, None]
    fs = [f for s in range(2) for f in det.observe(step(s, group(s, rewards, lengths=lengths)))]
    f = next(f for f in fs if f.kind == "spurious_length")
    assert f.evidence.n == 8 and max(p[0] for p in f.evidence.points) == 40


def test_rubric_change_restarts_the_window():
    det = make_detector()
    run(det, *length_groups(range(3)))
    fs = det.observe(length_groups(range(3, 4), version=1)[0])
    assert "spurious_length" not in kinds(fs)  # 4 points under the new rubric
    cfg = DetectorConfig(reset_on_rubric_change=False)
    det = make_detector(cfg)
    run(det, *length_groups(range(3)))
    assert "spurious_length" in kinds(det.observe(length_groups(range(3, 4), version=1)[0]))


def test_within_group_mode_ignores_drift_across_steps():
    # reward and length both rise from step to step, but within each group they are anti-correlated
    steps = []
    for s in range(4):
        lengths = [20 * s + 10, 20 * s + 11, 20 * s + 12, 20 * s + 13]
        rewards = [0.2 * s + 0.04, 0.2 * s + 0.03, 0.2 * s + 0.02, 0.2 * s + 0.01]
        steps.append(step(s, group(s, rewards, lengths=lengths)))
    assert "spurious_length" in kinds(run(make_detector(), *steps)[-1])
    assert "spurious_length" not in kinds(run(make_detector(DetectorConfig(corr_within_group=True)), *steps)[-1])


# ---------------------------------------------------------------------------------------------- surface features


def feature_steps(n_steps: int, make_text, seed=0, g=4):
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n_steps):
        k = rng.integers(0, 8, g)
        lengths = [int(x) for x in rng.integers(20, 200, g)]  # independent of the feature
        rewards = [float(x) for x in np.clip(k / 8 + rng.normal(0, 0.02, g), 0, 1)]
        g_rec = group(s, rewards, lengths=lengths)
        out.append((step(s, g_rec), rollouts_of(g_rec, [make_text(int(x)) for x in k])))
    return out


def test_spurious_feature_exclamations():
    det = make_detector()
    fs = [det.observe(s, rs) for s, rs in feature_steps(4, lambda k: "Great answer" + "!" * k)][-1]
    f = next(f for f in fs if f.kind == "spurious_feature")
    assert f.evidence.feature == "exclamations" and f.evidence.n == 16
    assert f.evidence.partial_rho_given_length > 0.6 and f.evidence.rho > 0.6
    assert "exclamations" in f.summary and f.interface_hint == "rubric_criteria"
    assert "spurious_length" not in kinds(fs)


def test_spurious_feature_repeated_keyword_and_bullets():
    det = make_detector()
    fs = [det.observe(s, rs) for s, rs in feature_steps(4, lambda k: "An answer. " + "hydration " * k)][-1]
    assert {f.evidence.feature for f in fs if f.kind == "spurious_feature"} == {"repeated_word"}
    det = make_detector()
    text = lambda k: "Intro\n" + "".join(f"- point {i}\n" for i in range(k))  # noqa: E731
    fs = [det.observe(s, rs) for s, rs in feature_steps(4, text)][-1]
    assert "bullets" in {f.evidence.feature for f in fs if f.kind == "spurious_feature"}


def test_feature_tracking_length_is_left_to_spurious_length():
    # bullet lines grow with length and the reward follows length: one spurious_length, no bullet failure
    rng = np.random.default_rng(2)
    det = make_detector()
    det_raw = make_detector(DetectorConfig(feature_control_length=False))
    for s in range(4):
        lengths = [int(x) for x in rng.integers(20, 200, 4)]
        rewards = [float(x) for x in np.clip(np.array(lengths) / 200 + rng.normal(0, 0.05, 4), 0, 1)]
        g = group(s, rewards, lengths=lengths)
        rs = rollouts_of(g, ["- item\n" * (n // 20) for n in lengths])
        fs, fs_raw = det.observe(step(s, g), rs), det_raw.observe(step(s, g), rs)
    assert "spurious_length" in kinds(fs) and "spurious_feature" not in kinds(fs)
    assert "spurious_feature" in kinds(fs_raw)


def test_features_need_texts_and_constant_feature_is_quiet():
    det = make_detector()
    fs = [f for s, _ in feature_steps(4, lambda k: "!" * k) for f in det.observe(s)]  # no rollouts given
    assert "spurious_feature" not in kinds(fs)
    det = make_detector()
    fs = [f for s, rs in feature_steps(4, lambda k: "plain text") for f in det.observe(s, rs)]
    assert "spurious_feature" not in kinds(fs)


def test_rollouts_matched_by_task_when_out_of_order():
    det = make_detector()
    for s, rs in feature_steps(4, lambda k: "!" * k):
        other = group(s.step, [0.5, 0.6], task="t2")
        o = rollouts_of(other, ["a", "b"])
        record = step(s.step, other, s.groups[0])
        fs = det.observe(record, [rs[0], o[0], *rs[1:], o[1]])  # not consecutive slices: matched by task
    assert "exclamations" in {f.evidence.subject for f in fs}


# ---------------------------------------------------------------------------------------------- reference


def test_reference_below_policy():
    calls = []

    def ref(task_id, version):
        calls.append((task_id, version))
        return {"t1": 0.2, "t2": 0.9}.get(task_id)

    det = make_detector(reference_reward=ref)
    fs = det.observe(
        step(
            3,
            group(3, [0.6, 0.7, 0.8, 0.5], task="t1"),
            group(3, [0.6, 0.7, 0.8, 0.5], task="t2"),
            group(3, [0.6, 0.7, 0.8, 0.5], task="t3"),  # no reference
        )
    )
    assert kinds(fs) == ["reference_below_policy"]
    f = fs[0]
    assert f.task_id == "t1" and f.interface_hint == "rubric_criteria"
    assert f.evidence.reference_reward == 0.2 and f.evidence.median_reward == pytest.approx(0.65)
    assert f.evidence.gap == pytest.approx(0.45) and f.evidence.rollouts_above_reference == 4
    assert "0.20" in f.summary and "0.65" in f.summary
    det.observe(step(4, group(4, [0.6, 0.7, 0.8, 0.5], task="t1")))
    assert calls.count(("t1", 0)) == 1  # cached per (task, rubric version)
    det.observe(step(5, group(5, [0.6, 0.7, 0.8, 0.5], task="t1", version=1)))
    assert ("t1", 1) in calls


def test_reference_borderline_missing_and_record_field():
    cfg = DetectorConfig(reference_margin=0.25)
    # median 0.5, reference 0.25: gap == margin, not fired (strict)
    assert make_detector(cfg, reference_reward=lambda t, v: 0.25).observe(step(0, group(0, [0.25, 0.75]))) == []
    assert kinds(make_detector(cfg, reference_reward=lambda t, v: 0.125).observe(step(0, group(0, [0.25, 0.75])))) == [
        "reference_below_policy"
    ]
    # no callable, no field: nothing; field filled by the trainer: used
    assert make_detector().observe(step(0, group(0, [0.6, 0.7]))) == []
    fs = make_detector().observe(step(0, group(0, [0.6, 0.7], reference=0.1)))
    assert kinds(fs) == ["reference_below_policy"]
    # missing rewards: median of what exists
    fs = make_detector().observe(step(0, group(0, [0.6, None, 0.8, None], reference=0.1)))
    assert fs[0].evidence.median_reward == pytest.approx(0.7) and fs[0].evidence.n == 2


def test_reference_callable_failure_does_not_break_the_step(caplog):
    def boom(task_id, version):
        raise RuntimeError("judge down")

    with caplog.at_level(logging.ERROR):
        fs = make_detector(reference_reward=boom).observe(step(0, group(0, [0.6, 0.7])))
    assert fs == [] and "reference_reward" in caplog.text


# ---------------------------------------------------------------------------------------------- criterion streaks


def crit_steps(values: list[dict[str, float | None]], version: int = 0, start: int = 0):
    return [step(start + i, group(start + i, [0.2, 0.6, 0.4], crit=c, version=version)) for i, c in enumerate(values)]


def test_criterion_saturated_after_k_consecutive():
    det = make_detector()
    per = run(det, *crit_steps([{"c1": 1.0, "c2": 0.5}] * 4))
    assert [kinds(fs) for fs in per] == [[], [], ["criterion_saturated"], ["criterion_saturated"]]
    f = per[2][0]
    assert f.evidence.criterion_id == "c1" and f.evidence.recent_means == [1.0, 1.0, 1.0]
    assert f.evidence.consecutive == 3 and f.interface_hint == "rubric_criteria"
    assert "c1" in f.summary and "3 consecutive" in f.summary


def test_criterion_streak_borderlines_missing_and_breaks():
    # 0.95 is saturated and 0.05 dead (inclusive)
    per = run(make_detector(), *crit_steps([{"a": 0.95, "b": 0.05}] * 3))
    assert sorted(kinds(per[2])) == ["criterion_dead", "criterion_saturated"]
    # a missing mean (None) neither breaks nor extends the streak
    per = run(make_detector(), *crit_steps([{"a": 1.0}, {"a": None}, {"a": 1.0}, {"a": None}, {"a": 1.0}]))
    assert [kinds(fs) for fs in per] == [[], [], [], [], ["criterion_saturated"]]
    # a healthy value breaks it
    per = run(make_detector(), *crit_steps([{"a": 1.0}, {"a": 1.0}, {"a": 0.9}, {"a": 1.0}, {"a": 1.0}]))
    assert all(fs == [] for fs in per)
    # switching from saturated to dead restarts the count
    per = run(make_detector(), *crit_steps([{"a": 1.0}, {"a": 1.0}, {"a": 0.0}, {"a": 0.0}, {"a": 0.0}]))
    assert [kinds(fs) for fs in per] == [[], [], [], [], ["criterion_dead"]]
    assert per[-1][0].interface_hint == "rollout_guidance"


def test_criterion_streak_resets_on_rubric_change_and_removal():
    det = make_detector()
    run(det, *crit_steps([{"a": 1.0}] * 2))
    assert run(det, *crit_steps([{"a": 1.0}], version=1, start=2))[0] == []
    det = make_detector()
    run(det, *crit_steps([{"a": 1.0}] * 2))
    run(det, *crit_steps([{"b": 0.5}], start=2))  # a left the rubric
    assert run(det, *crit_steps([{"a": 1.0}], start=3))[0] == []


def test_dead_pitfall_is_healthy_and_criteria_are_quoted():
    rubric = [
        Criterion(id="a", text="Explains the mechanism", weight=2),
        Criterion(id="p", text="Pads the answer with filler", weight=-1),
    ]
    det = make_detector(rubric_for=lambda t, v: rubric)
    per = run(det, *crit_steps([{"a": 0.0, "p": 0.0}] * 3))
    assert kinds(per[2]) == ["criterion_dead"] and per[2][0].evidence.criterion_id == "a"
    assert per[2][0].evidence.criterion_text == "Explains the mechanism"
    det = make_detector(DetectorConfig(dead_pitfalls=True), rubric_for=lambda t, v: rubric)
    assert len(run(det, *crit_steps([{"a": 0.0, "p": 0.0}] * 3))[2]) == 2
    det = make_detector(rubric_for=lambda t, v: rubric)
    (f,) = run(det, *crit_steps([{"a": 0.5, "p": 1.0}] * 3))[2]
    assert f.kind == "criterion_saturated" and f.evidence.pitfall and "pitfall" in f.summary


# ---------------------------------------------------------------------------------------------- judge disagreement


def test_judge_disagreement_comparison():
    assert judge_disagreement([0.2, 0.4, 0.6, 0.8], [0.2, 0.4, 0.6, 0.8]) is None
    ev = judge_disagreement([0.2, 0.4, 0.6, 0.8], [0.7, 0.9, 0.1, 0.3])
    assert ev.mean_abs_delta == pytest.approx(0.5) and ev.n == 4 and ev.max_abs_delta == pytest.approx(0.5)
    # exactly at the threshold: no disagreement (strict)
    assert judge_disagreement([0.0, 0.0, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25], threshold=0.25) is None
    # missing on either side dropped; too few pairs -> None
    assert judge_disagreement([0.0, None, 0.0, 0.0, 0.0], [1.0, 1.0, None, 1.0, 1.0]) is None
    assert judge_disagreement([0.0, None, 0.0, 0.0, 0.0], [1.0, 1.0, None, 1.0, 1.0], min_pairs=3).n == 3


def test_judge_disagreement_via_regrade_hook():
    calls = []

    def regrade(rollouts):
        calls.append(len(rollouts))
        return [
            SimpleNamespace(
                reward=min(1.0, r.reward + 0.5),
                verdicts=[SimpleNamespace(criterion_id="c1", value=min(1.0, r.reward + 0.5))],
            )
            for r in rollouts
        ]

    det = make_detector(DetectorConfig(regrade_every=2, regrade_groups=1), regrade=regrade)
    out = []
    for s in range(4):
        g = group(s, [0.1, 0.2, 0.3, 0.4], task="t1")
        out.append(det.observe(step(s, g), rollouts_of(g, ["a", "b", "c", "d"])))
    assert calls == [4, 4]  # steps 0 and 2 only, one group each
    assert kinds(out[0]) == ["judge_disagreement"] and kinds(out[1]) == [] and kinds(out[2]) == ["judge_disagreement"]
    f = out[2][0]
    assert f.evidence.mean_abs_delta == pytest.approx(0.5) and f.evidence.n == 8
    assert f.evidence.worst_criterion == "c1" and f.evidence.steps == [0, 2]
    assert "0.50" in f.summary and f.step == 2
    assert det.regrade_seconds >= 0


def test_regrade_every_ten_steps_by_default_quiet_when_agreeing_and_robust():
    calls = []
    det = make_detector(regrade=lambda rs: calls.append(1) or [r.reward for r in rs])
    for s in (1, 9, 10):
        g = group(s, [0.1, 0.9], task="t1")
        det.observe(step(s, g), rollouts_of(g, ["a", "b"]))
    assert calls == [1]  # regrade_every = 10: step 10 only
    det = make_detector(DetectorConfig(regrade_every=0), regrade=lambda rs: calls.append(1) or [])
    det.observe(step(10, g), rollouts_of(g, ["a", "b"]))
    assert calls == [1]  # 0: off
    det = make_detector(DetectorConfig(regrade_every=1), regrade=lambda rs: [r.reward for r in rs])
    for s in range(3):
        g = group(s, [0.1, 0.9], task="t1")
        assert det.observe(step(s, g), rollouts_of(g, ["a", "b"])) == []
    # a failing or wrong-sized re-grade is logged, never raised
    for bad in (lambda rs: 1 / 0, lambda rs: [0.5]):
        det = make_detector(DetectorConfig(regrade_every=1), regrade=bad)
        g = group(0, [0.1, 0.9, 0.5], task="t1")
        assert det.observe(step(0, g), rollouts_of(g, ["a", "b", "c"])) == []
    # missing re-grades are ignored, not counted as 0
    det = make_detector(DetectorConfig(regrade_every=1), regrade=lambda rs: [None for _ in rs])
    g = group(0, [0.5, 0.6, 0.7, 0.8], task="t1")
    assert det.observe(step(0, g), rollouts_of(g, list("abcd"))) == []


def test_add_regrade_from_outside():
    det = make_detector()
    g = group(0, [0.1, 0.2, 0.3, 0.4])
    det.observe(step(0, g))
    fs = det.add_regrade(0, rollouts_of(g, list("abcd")), [0.9, 0.9, 0.9, 0.9])
    assert kinds(fs) == ["judge_disagreement"]


# ---------------------------------------------------------------------------------------------- the suite


def test_listener_form_metrics_and_seconds():
    got = []
    g = group(0, [0.0, 0.0, 0.0, 0.0])
    det = make_detector(rollouts_for=lambda s: rollouts_of(g, list("abcd")), on_failures=got.append)
    det(step(0, g))
    assert kinds(got[0]) == ["non_discriminative_low"]
    m = det.metrics()
    assert m["failures/non_discriminative_low"] == 1 and m["failures/spurious_length"] == 0
    assert det.seconds > 0 and m["time/detectors"] == det.last_seconds and det.steps == 1
    again = Failure.model_validate_json(got[0][0].model_dump_json())
    assert again == got[0][0] and again.key == ("non_discriminative_low", "t1", None)


def test_many_tasks_keep_bounded_windows():
    """64 tasks a step for 10 steps: one history a task, each window bounded by detectors.window, every step
    counted and timed. How long a step takes is measured by benchmarks/detector_cost.py, not asserted here (a
    wall-clock bound fails on a loaded machine): `python benchmarks/detector_cost.py --groups 64 --g 8 --steps 10
    --budget-ms 250` is the same size."""
    rng = np.random.default_rng(0)
    det = make_detector()
    for s in range(10):
        groups = []
        for t in range(64):
            rewards = [float(x) for x in rng.random(8)]
            groups.append(
                group(
                    s,
                    rewards,
                    task=f"t{t}",
                    lengths=[int(x) for x in rng.integers(5, 300, 8)],
                    crit={"a": float(rng.random()), "b": 1.0},
                )
            )
        det.observe(step(s, *groups))
    assert len(det.histories) == 64 and det.steps == 10
    assert all(len(h.window) == det.config.window for h in det.histories.values())
    assert det.seconds > 0 and det.last_seconds > 0  # the cost the monitor reports is measured, whatever it is
