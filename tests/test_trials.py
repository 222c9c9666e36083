"""Critic trials on the frozen policy: rubric re-grading, guidance arms, sampling replay and probes, budgets.

Exact numbers come from a scripted judge backend (a judged "detailed" criterion scores words / 40, so
reward rises with length, the semantic judge's failure mode) and fake samplers; the
:class:`TransformersSampler` runs on a tiny random Llama with the real SmolLM2 tokenizer, and one
test re-grades with the embedded semantic judge (MiniLM, loaded once per module).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence

import pytest
import torch
from helpers import FRUIT, record_group

from harnessrl.critic.rollouts import TransformersSampler
from harnessrl.critic.signal import CHECK_SPLIT_SHARE, MOVED_SIGNAL_SHARE
from harnessrl.critic.trials import (
    CRITERION_SIGNAL,
    NO_EFFECT,
    REFERENCE_RANK,
    SIGNAL_SHARE,
    FrozenPolicyTrials,
    PolicySampler,
    TrialConfig,
    TrialResult,
)
from harnessrl.data import Criterion, Task
from harnessrl.errors import ResourceMissingError
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks, SetGuidance
from harnessrl.judges import BackendVerdict, GradeRequest, RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.steps import Recorder

# ------------------------------------------------------------------------------------------- fixtures

WORDS = ["the", "calm", "sea", "rolls", "under", "a", "grey", "sky", "while", "gulls", "circle", "over", "waves"]
WORDS += ["and", "boats"]
HINT = "Name the banana explicitly."


def text_of(n_words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(n_words)) + "."


REFERENCE = text_of(25)  # 25 words

DETAIL = Criterion(id="detail", text="Gives a detailed description", weight=1)
SOME_WORDS = Criterion(id="words", text="Writes at least one word", weight=1, check={"type": "word_count", "min": 1})

TASKS = [
    Task(
        id="sea", domain="writing", prompt="Describe the sea.", reference_answer=REFERENCE, rubric=[DETAIL, SOME_WORDS]
    ),
    FRUIT,
    Task(
        id="lemon",
        domain="food",
        prompt="Name a sour fruit.",
        rubric=[
            Criterion(id="banana", text="Says banana", weight=1, check={"type": "contains", "phrases": ["banana"]})
        ],
    ),
    Task(id="poem", domain="writing", prompt="Write a poem.", rubric=[DETAIL]),
]


class ScriptedJudge:
    """Judge backend: "detailed" criteria score words / 40 (capped at 1), "waves" the word waves, "yellow"
    the word banana; anything else 1. Every request is recorded."""

    name = "scripted"

    def __init__(self):
        self.requests: list[GradeRequest] = []

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        self.requests.extend(requests)
        out = []
        for r in requests:
            text = r.criterion.text.lower()
            if "detailed" in text:
                v = min(1.0, len(r.response.split()) / 40)
            elif "waves" in text:
                v = float("waves" in r.response)
            elif "yellow" in text:
                v = float("banana" in r.response.lower())
            else:
                v = 1.0
            out.append(BackendVerdict(v))
        return out


class NoSampler:
    """A sampler a rubric trial must never call."""

    def __init__(self):
        self.calls = 0

    def sample(self, prompts, temperature, max_new_tokens):
        self.calls += 1
        raise AssertionError("a rubric trial generated rollouts")


class HintSampler:
    """Returns a passing answer iff the prompt carries the hint; records every call."""

    def __init__(self, hint: str = HINT, delay: float = 0.0, passing: str = "A banana.", failing: str = "An apple."):
        self.hint, self.delay, self.passing, self.failing = hint, delay, passing, failing
        self.calls: list[tuple[list[list[dict[str, str]]], float, int]] = []

    def sample(self, prompts, temperature, max_new_tokens):
        self.calls.append((prompts, temperature, max_new_tokens))
        time.sleep(self.delay)
        return [self.passing if self.hint in p[-1]["content"] else self.failing for p in prompts]

    @property
    def generated(self) -> int:
        return sum(len(c[0]) for c in self.calls)


class AlternatingSampler:
    """Every other completion passes (a discriminative group)."""

    def __init__(self):
        self.calls: list[list[list[dict[str, str]]]] = []

    def sample(self, prompts, temperature, max_new_tokens):
        self.calls.append(prompts)
        return ["A banana." if i % 2 == 0 else "An apple." for i in range(len(prompts))]


def make_env():
    harness = Harness(TASKS)
    backend = ScriptedJudge()
    judge = RubricJudge(backend)
    return harness, backend, judge, Recorder(None)


def length_env():
    """Task "sea": 2 steps x 8 rollouts of 4..42 words (none is the reference) whose reward rises with length;
    the reference answer is pre-graded, as the trainer's reference check does."""
    harness, backend, judge, recorder = make_env()
    for step, start in ((1, 4), (2, 7)):
        record_group(harness, judge, recorder, step, "sea", [text_of(start + 5 * k) for k in range(8)])
    judge.grade_one(harness.tasks["sea"], REFERENCE, harness.rubrics.current("sea").criteria)
    return harness, backend, judge, recorder


def failure(kind: str, task_id: str = "sea", domain: str = "writing", **evidence) -> Failure:
    return Failure(
        kind=kind,
        step=2,
        task_id=task_id,
        domain=domain,
        evidence=evidence,
        summary=kind,
        interface_hint="rubric_criteria",
    )


def pitfall(min_words: int, weight: float = -1.0) -> Criterion:
    return Criterion(
        id="too_long",
        text=f"Pads the answer beyond {min_words - 1} words",
        weight=weight,
        check={"type": "word_count", "min": min_words},
    )


def _roundtrip(result: TrialResult) -> None:
    """Results cross an RPC boundary: they must survive JSON."""
    assert TrialResult.model_validate_json(result.model_dump_json()) == result


# ------------------------------------------------------------------------------------------- metric choice


def test_metric_follows_the_failure_kind():
    edit = EditRubric(task_id="sea", add=[pitfall(30)])
    guide = SetGuidance(target="fruit", text=HINT)
    harness = Harness(TASKS)

    def choose_metric(update, failure=None):  # the update's interface chooses
        return harness.interface(update).metric(update, failure)

    judged = EditRubric(task_id="sea", add=[Criterion(id="j", text="Names the tide", weight=1)])
    assert choose_metric(edit) == SIGNAL_SHARE
    # an exact check added for a lax rubric or a requirement the rubric misses: the share of groups it splits
    assert choose_metric(edit, failure("non_discriminative_high")) == CHECK_SPLIT_SHARE
    assert choose_metric(edit, failure("unchecked_requirement")) == CHECK_SPLIT_SHARE
    assert choose_metric(judged, failure("non_discriminative_high")) == SIGNAL_SHARE
    assert choose_metric(judged, failure("criterion_saturated", criterion_id="detail")) == CRITERION_SIGNAL
    assert choose_metric(guide, failure("criterion_dead", criterion_id="banana")) == CRITERION_SIGNAL
    assert choose_metric(judged, failure("criterion_saturated")) == SIGNAL_SHARE  # no criterion named
    assert choose_metric(edit, failure("spurious_length")) == "rho_reward_length"
    assert choose_metric(edit, failure("spurious_feature", feature="bullets")) == "rho_reward_bullets"
    assert choose_metric(edit, failure("reference_below_policy")) == REFERENCE_RANK
    assert choose_metric(guide, failure("non_discriminative_low")) == SIGNAL_SHARE
    assert choose_metric(guide, failure("reference_below_policy")) == SIGNAL_SHARE
    retire = ReweightTasks(task_ids=["sea"], action="retire")
    assert choose_metric(retire, failure("spurious_length")) == MOVED_SIGNAL_SHARE


def test_trial_config_is_strict():
    with pytest.raises(ValueError):
        TrialConfig(max_rolouts=3)
    with pytest.raises(ValueError):
        TrialConfig(confidence=1.0)


# ------------------------------------------------------------------------------------------- rubric trials


def test_rubric_trial_accepts_a_length_pitfall_without_generating():
    harness, backend, judge, recorder = length_env()
    sampler = NoSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig())
    # a programmatic pitfall just above the reference answer's 25 words
    update = EditRubric(task_id="sea", add=[pitfall(27)], rationale="length hack")
    n_before = len(backend.requests)
    result = trials.run(update, "c1", failure("spurious_length", feature="length"))

    assert result.accepted, result.reason
    assert result.metric == "rho_reward_length" and result.interface == "rubric_criteria"
    assert result.baseline == pytest.approx(1.0, abs=0.01)
    assert result.candidate < 0.6
    assert result.improvement == pytest.approx(result.baseline - result.candidate, abs=1e-3)
    assert result.ci_low > 0 and result.ci_high >= result.ci_low
    assert sampler.calls == 0 and result.cost.rollouts == 0
    # the only new criterion is programmatic and the judged one is cached: no backend request at all
    assert result.cost.judge_calls == 0 and len(backend.requests) == n_before
    m = result.measurements
    assert m.n_rollouts == 16 and m.steps == [1, 2] and m.generations == 0
    assert m.reference_guard.passed
    assert m.reference_reward_candidate >= m.policy_median_candidate
    assert len(m.candidate_rewards) == 16
    assert harness.rubrics.current("sea").version == 0  # a trial applies nothing
    _roundtrip(result)


def test_reference_guard_rejects_a_pitfall_that_hits_the_reference():
    harness, _, judge, recorder = length_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    # min 15 words also hits the 25-word reference: |rho| collapses, but good answers are punished too
    result = trials.run(EditRubric(task_id="sea", add=[pitfall(15)]), "c2", failure("spurious_length"))

    assert not result.accepted
    assert result.improvement > 0.5 and result.ci_low > 0  # the correlation did fall...
    assert "reference" in result.reason  # ...and the guard said no, with the numbers
    guard = result.measurements.reference_guard
    assert not guard.passed and guard.reference_reward < guard.policy_median
    assert f"{guard.reference_reward:.3f}" in result.reason


def test_rubric_trial_signal_share_accepts_a_stricter_criterion_and_rejects_a_lax_one():
    """Uniformly high: every rollout is long enough to saturate the judged criterion."""
    harness, _, judge, recorder = make_env()
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "sea", [text_of(40 + 3 * k + step) for k in range(8)])
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    flat = failure("non_discriminative_high")

    lax = EditRubric(task_id="sea", add=[Criterion(id="any", text="Says something", weight=1)])
    rejected = trials.run(lax, "lax", flat)
    assert rejected.metric == SIGNAL_SHARE
    # every rollout passes the new criterion: an affine change of the rewards, refused before any bootstrap
    assert not rejected.accepted and rejected.reason.startswith(NO_EFFECT)
    assert rejected.advantage_effect == 0 and rejected.ci_low is None

    strict = EditRubric(
        task_id="sea",
        add=[Criterion(id="concise", text="Stays within 50 words", weight=1, check={"type": "word_count", "max": 50})],
    )
    accepted = trials.run(strict, "strict", flat)
    assert accepted.accepted, accepted.reason
    # an exact check: decided by the share of groups it would split, from the pooled rate the policy breaks it
    assert accepted.metric == CHECK_SPLIT_SHARE and accepted.verdict_kind == "accepted"
    assert accepted.baseline == 0 and accepted.candidate > 0.8 and accepted.ci_low >= accepted.threshold
    assert accepted.threshold == TrialConfig().signal.min_effect[CHECK_SPLIT_SHARE]
    assert accepted.advantage_effect > 1 and f"{accepted.threshold:g}" in accepted.reason
    assert accepted.measurements.n_groups == 2 and accepted.measurements.split.rollouts == 16
    assert accepted.min_detectable_effect is not None


def test_only_new_judged_criteria_reach_the_judge():
    harness, backend, judge, recorder = length_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    stats0 = judge.stats.backend_requests
    n0 = len(backend.requests)
    update = EditRubric(task_id="sea", add=[Criterion(id="waves", text="Mentions the waves", weight=1)])
    result = trials.run(update, "c3")
    new = backend.requests[n0:]
    assert {r.criterion.id for r in new} == {"waves"}
    assert len(new) == 16 + 1  # every distinct rollout and the reference, once
    assert result.cost.judge_calls == judge.stats.backend_requests - stats0 == 17
    # the same candidate again: everything is cached now
    again = trials.run(update, "c3-again")
    assert again.cost.judge_calls == 0
    assert again.ci_low == result.ci_low  # and the seeded bootstrap gives the same interval


def test_reference_below_policy_rank_must_rise():
    harness, _, judge, recorder = make_env()
    # the reference (25 words) scores below the long rollouts the lax rubric prefers
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "sea", [text_of(30 + 2 * k + step) for k in range(8)])
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    fail = failure("reference_below_policy")
    # a pitfall every cached rollout commits (all have 31+ words) lifts the reference above them all, but it
    # shifts every rollout's reward alike: the advantages GRPO trains on do not move
    shift = trials.run(EditRubric(task_id="sea", add=[pitfall(28)]), "c4", fail)
    assert not shift.accepted and shift.reason.startswith(NO_EFFECT)
    # a pitfall for the longer half reorders the rollouts, and the reference climbs above that half
    result = trials.run(EditRubric(task_id="sea", add=[pitfall(40)]), "c5", fail)
    assert result.metric == REFERENCE_RANK
    assert result.baseline == 0 and result.candidate == pytest.approx(7 / 16)  # 7 of 16 rollouts have 40+ words
    assert result.accepted, result.reason


def test_rubric_trial_without_cached_rollouts_rejects():
    harness, _, judge, recorder = make_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    result = trials.run(EditRubric(task_id="sea", add=[pitfall(30)]), "c5")
    assert not result.accepted
    assert result.reason == "no cached rollouts to re-grade"
    assert result.improvement is None and result.ci_low is None


def test_invalid_rubric_candidate_is_rejected_not_raised():
    harness, _, judge, recorder = length_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    result = trials.run(EditRubric(task_id="sea", remove=["nope"]), "c6")
    assert not result.accepted and result.reason.startswith("invalid candidate")


def test_bootstrap_interval_is_deterministic_with_a_seed():
    harness, _, judge, recorder = length_env()
    update = EditRubric(task_id="sea", add=[pitfall(27)])
    fail = failure("spurious_length")

    def run(seed: int, n: int = 400) -> TrialResult:
        return FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(seed=seed, bootstrap=n)).run(
            update, "c", fail
        )

    a, b, c = run(0), run(0), run(1)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.improvement == c.improvement  # the point estimate does not depend on the seed
    assert (a.ci_low, a.ci_high) != (c.ci_low, c.ci_high)
    wide = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(confidence=0.99)).run(update, "c", fail)
    narrow = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(confidence=0.5)).run(update, "c", fail)
    assert wide.ci_low <= narrow.ci_low <= narrow.ci_high <= wide.ci_high


# ------------------------------------------------------------------------------------------- guidance trials


def test_guidance_trial_accepts_a_hint_that_makes_rollouts_pass():
    harness, backend, judge, recorder = make_env()
    sampler = HintSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms"))
    update = SetGuidance(target="fruit", text=HINT, fraction=0.5)
    result = trials.run(update, "g1", failure("non_discriminative_low", task_id="fruit", domain="food"))

    assert result.accepted, result.reason
    assert result.metric == SIGNAL_SHARE and result.interface == "rollout_guidance"
    assert result.baseline == 0 and result.candidate == 1
    assert result.ci_low > 0
    # the unguided arm, then only the guided members: unguided members are shared between the arms
    (base_prompts, t0, max_new), (cand_prompts, t1, _) = sampler.calls
    assert len(base_prompts) == 8 and len(cand_prompts) == 4
    assert all(HINT not in p[-1]["content"] for p in base_prompts)
    assert all(HINT in p[-1]["content"] for p in cand_prompts)
    assert t0 == t1 == 1.0 and max_new == TrialConfig().max_new_tokens
    assert result.cost.rollouts == 12
    # graded with the current rubric: two distinct texts, one judged criterion
    assert result.cost.judge_calls == 2 and {r.criterion.id for r in backend.requests} == {"yellow"}
    row = result.measurements.tasks[0]
    # the arm is two of the trainer's groups (G=4), the first half of each guided, as in training
    assert row.task_id == "fruit" and row.members_changed == [0, 1, 4, 5]
    assert row.candidate_guided == [True, True, False, False] * 2
    assert row.candidate_rewards == [1.0, 1.0, 0.0, 0.0] * 2
    assert row.gives_signal_baseline == [False, False] and row.gives_signal_candidate == [True, True]
    assert harness.guidance.version == 0
    _roundtrip(result)


def test_guidance_trial_rejects_a_hint_that_does_not_help():
    harness, _, judge, recorder = make_env()
    sampler = HintSampler(hint="never in any prompt")
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms"))
    result = trials.run(SetGuidance(target="fruit", text="Think step by step."), "g2")
    assert not result.accepted
    assert result.baseline == result.candidate == 0
    assert result.cost.rollouts == 12


def test_guidance_temperature_change_regenerates_every_member():
    harness, _, judge, recorder = make_env()
    sampler = HintSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms", max_rollouts=16))
    result = trials.run(SetGuidance(target="fruit", temperature=1.5, fraction=0), "g3")
    assert [c[1] for c in sampler.calls] == [1.0, 1.5]
    assert [len(c[0]) for c in sampler.calls] == [8, 8]
    assert result.measurements.tasks[0].temperature.model_dump() == {"baseline": 1.0, "candidate": 1.5}
    assert not result.accepted  # nothing passes at either temperature


def test_domain_guidance_probes_up_to_two_tasks_flat_ones_first():
    harness, _, judge, recorder = make_env()
    record_group(harness, judge, recorder, 1, "lemon", ["An apple."] * 4)  # a recent flat group
    sampler = HintSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms", max_rollouts=24))
    result = trials.run(SetGuidance(scope="domain", target="food", text=HINT), "g4")
    probed = [row.task_id for row in result.measurements.tasks]
    assert probed == ["lemon", "fruit"]
    assert result.cost.rollouts == 24 and result.accepted, result.reason
    prompts = [p[-1]["content"] for call in sampler.calls for p in call[0]]
    assert all(("sour" in c) or ("yellow" in c) for c in prompts)  # no task outside the domain

    # with the default budget (16 rollouts) only the first task fits
    small = FrozenPolicyTrials(harness, recorder, judge, HintSampler(), TrialConfig(guidance_trial="arms"))
    result = small.run(SetGuidance(scope="domain", target="food", text=HINT), "g5")
    assert [row.task_id for row in result.measurements.tasks] == ["lemon"]
    assert result.measurements.tasks_dropped_for_budget == ["fruit"]


def test_a_guidance_trial_the_runs_share_cannot_afford_yet_is_pending_and_one_no_share_affords_is_refused():
    """Under ``max_rollout_share`` a guidance trial (two arms of fresh rollouts) may find too little left early in a
    run: it is pending, not refused (the share grows as training generates; refused, the rule-based evolver went on
    to park the task on the grounds that guidance had not helped, which was never measured: gold-bench seed 2 at
    ef48919 parked a `nocomma` task at step 3 so); the reason says what it needs and what the run affords now. One
    the per-trial bound cannot afford is refused for its budget, with no word of the run's share."""
    harness, _, judge, recorder = make_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, HintSampler(), TrialConfig(guidance_trial="arms"))
    result = trials.run(SetGuidance(target="lemon", text=HINT), "g7", max_rollouts=8)
    assert not result.accepted and result.pending and result.cost.rollouts == 0
    assert result.reason.startswith("pending: probing task lemon needs ")
    assert "the run's trial allowance affords 8 now (evolver.trials.max_rollout_share" in result.reason
    # the per-trial bound alone: refused, no word of the run's share
    alone = FrozenPolicyTrials(
        harness, recorder, judge, HintSampler(), TrialConfig(guidance_trial="arms", max_rollouts=8)
    )
    reason = alone.run(SetGuidance(target="lemon", text=HINT), "g8").reason
    assert reason.startswith("budget: probing task lemon") and "max_rollout_share" not in reason
    # the run's share lowered the bound too, but the per-trial bound is what stops it: refused, and the reason names
    # that bound, not the share (raising the share would not afford it)
    both = alone.run(SetGuidance(target="lemon", text=HINT), "g9", max_rollouts=4)
    assert not both.pending and both.reason.startswith("budget: probing task lemon")
    assert "max_rollouts=8, max_judge_calls=400" in both.reason and "max_rollout_share" not in both.reason


def test_domain_guidance_skips_tasks_that_keep_their_own_rule():
    harness, _, judge, recorder = make_env()
    harness.apply(SetGuidance(target="lemon", text="Sour means citrus."), step=1)
    trials = FrozenPolicyTrials(harness, recorder, judge, HintSampler(), TrialConfig(guidance_trial="arms"))
    result = trials.run(SetGuidance(scope="domain", target="food", text=HINT), "g6")
    assert [row.task_id for row in result.measurements.tasks] == ["fruit"]
    assert result.measurements.tasks_unchanged == ["lemon"]


def test_guidance_trial_needs_a_sampler():
    harness, _, judge, recorder = make_env()
    result = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig(guidance_trial="arms")).run(
        SetGuidance(target="fruit", text=HINT), "g7"
    )
    assert not result.accepted and "sampler" in result.reason


def test_a_failing_sampler_rejects_the_trial_not_the_run():
    class Broken:
        def sample(self, prompts, temperature, max_new_tokens):
            raise RuntimeError("CUDA out of memory")

    harness, _, judge, recorder = make_env()
    result = FrozenPolicyTrials(harness, recorder, judge, Broken(), TrialConfig(guidance_trial="arms")).run(
        SetGuidance(target="fruit", text=HINT), "g8"
    )
    assert not result.accepted and "out of memory" in result.reason and result.cost.rollouts == 0


# ------------------------------------------------------------------------------------------- sampling trials


def sampling_env():
    """Replayed stats: "lemon" flat (std 0), "fruit" and "sea" discriminative; "poem" never seen."""
    harness, backend, judge, recorder = make_env()
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "lemon", ["An apple."] * 4)
        record_group(harness, judge, recorder, step, "fruit", ["A banana.", "An apple.", "A banana.", "A pear."])
        record_group(harness, judge, recorder, step, "sea", [text_of(5 + 10 * k + step) for k in range(4)])
    return harness, backend, judge, recorder


def test_sampling_trial_parking_a_flat_task_is_accepted_from_replay():
    harness, _, judge, recorder = sampling_env()
    sampler = NoSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["lemon"], action="park", park_steps=10), "s1")
    assert result.accepted, result.reason
    assert result.metric == MOVED_SIGNAL_SHARE and result.interface == "task_sampling"
    # the draws that went to flat "lemon" now land on discriminative tasks
    assert result.baseline == 0 and result.candidate == 1 and result.ci_low > 0
    batch = result.measurements.batch_signal_share
    assert batch.candidate > batch.current
    assert sampler.calls == 0 and result.cost.rollouts == 0
    tasks = result.measurements.tasks
    assert tasks["lemon"].p_candidate == 0 and tasks["lemon"].source == "replay"
    assert tasks["lemon"].std == 0 and tasks["lemon"].signal_share == 0
    assert tasks["fruit"].groups == 2 and tasks["fruit"].signal_share == 1
    assert "poem" not in tasks  # no stats: left out of both distributions
    _roundtrip(result)


def test_parking_a_task_whose_family_the_policy_meets_is_refused():
    """A flat-low group says one task is out of reach; its family's recent groups say otherwise when the policy
    meets the family's tasks often enough to split groups: the park is refused (the failure's next remedy is
    tried). A family nobody meets yet, or tasks with only a domain in common, leave the park to its trial."""
    base = {t.id: t for t in TASKS}
    tasks = [
        base["lemon"].model_copy(update={"metadata": {"family": "citrus"}}),
        base["fruit"].model_copy(update={"id": "lime", "metadata": {"family": "citrus"}}),
        base["fruit"].model_copy(update={"id": "pear"}),  # the same domain, no family
        base["sea"],
    ]
    harness, judge, recorder = Harness(tasks), RubricJudge(ScriptedJudge()), Recorder(None)
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "lemon", ["An apple."] * 4)
        record_group(harness, judge, recorder, step, "lime", ["A banana.", "An apple.", "A banana.", "A pear."])
        record_group(harness, judge, recorder, step, "pear", ["A banana.", "An apple.", "A banana.", "A pear."])
        record_group(harness, judge, recorder, step, "sea", [text_of(5 + 10 * k + step) for k in range(4)])
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["lemon"], action="park", park_steps=10), "p1")
    assert not result.accepted and result.verdict_kind == "invalid"
    assert result.reason.startswith("the task is within reach: 4 of 16 recent rollouts over 2 task(s) of family:citrus")
    reach = result.measurements.group_reach
    assert (reach.tasks, reach.rollouts, reach.above_low) == (2, 16, 4)
    # the family's sibling fails as well: nothing says the task is in reach, the park is measured as before
    harness2 = Harness([tasks[0], tasks[1], tasks[3]])
    recorder2 = Recorder(None)
    for step in (1, 2):
        record_group(harness2, judge, recorder2, step, "lemon", ["An apple."] * 4)
        record_group(harness2, judge, recorder2, step, "lime", ["An apple."] * 4)
        record_group(harness2, judge, recorder2, step, "sea", [text_of(5 + 10 * k + step) for k in range(4)])
    result = FrozenPolicyTrials(harness2, recorder2, judge, NoSampler(), TrialConfig()).run(
        ReweightTasks(task_ids=["lemon"], action="park", park_steps=10), "p2"
    )
    assert result.accepted, result.reason
    assert result.measurements.group_reach.above_low == 0


def test_sampling_trial_measures_the_moved_draws_not_the_whole_batch():
    """Parking one flat task among many moves a small share of each batch: the batch-wide share of
    groups that give signal rises by no more than that share, but every moved draw gains signal."""
    fruit = next(t for t in TASKS if t.id == "fruit")
    tasks = [fruit.model_copy(update={"id": f"fruit{i}"}) for i in range(12)]
    tasks.append(next(t for t in TASKS if t.id == "lemon"))
    harness = Harness(tasks)
    judge = RubricJudge(ScriptedJudge())
    recorder = Recorder(None)
    for step in (1, 2):
        record_group(harness, judge, recorder, step, "lemon", ["An apple."] * 4)
        for i in range(12):
            record_group(harness, judge, recorder, step, f"fruit{i}", ["A banana.", "An apple."] * 2)
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["lemon"], action="park", park_steps=10), "s5")
    batch = result.measurements.batch_signal_share
    moved = result.measurements.moved_probability
    assert batch.candidate - batch.current == pytest.approx(moved, abs=1e-3)
    assert batch.candidate - batch.current < TrialConfig().signal.threshold(MOVED_SIGNAL_SHARE)
    assert (result.baseline, result.candidate) == (0, 1) and result.accepted, result.reason


def test_sampling_trial_demoting_a_discriminative_task_is_rejected():
    harness, _, judge, recorder = sampling_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["fruit"], weight=0.2), "s2")
    assert not result.accepted and result.improvement < 0


def test_sampling_trial_probes_a_promoted_task():
    harness, _, judge, recorder = sampling_env()
    sampler = AlternatingSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["poem"], weight=5.0), "s3")
    assert len(sampler.calls) == 1 and len(sampler.calls[0]) == 8
    assert all(p[-1]["content"] == "Write a poem." for p in sampler.calls[0])
    assert result.cost.rollouts == 8
    assert result.measurements.promoted == ["poem"]
    assert result.measurements.tasks["poem"].source == "probe"


def test_sampling_trial_without_stats_for_the_changed_task_rejects():
    harness, _, judge, recorder = sampling_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, None, TrialConfig())
    result = trials.run(ReweightTasks(task_ids=["poem"], action="retire"), "s4")
    assert not result.accepted and "no step records" in result.reason


# ------------------------------------------------------------------------------------------- budgets


def test_budget_rollouts_rejects_before_generating():
    harness, _, judge, recorder = make_env()
    sampler = HintSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms", max_rollouts=10))
    result = trials.run(SetGuidance(target="fruit", text=HINT), "b1")
    assert not result.accepted and result.reason.startswith("budget")
    assert sampler.calls == [] and result.cost.rollouts == 0


def test_budget_judge_calls_rejects_before_grading():
    harness, backend, judge, recorder = length_env()
    trials = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig(max_judge_calls=5))
    n0 = len(backend.requests)
    update = EditRubric(task_id="sea", add=[Criterion(id="waves", text="Mentions the waves", weight=1)])
    result = trials.run(update, "b2")
    assert not result.accepted and result.reason.startswith("budget")
    assert "17 judge calls" in result.reason
    assert len(backend.requests) == n0 and result.cost.judge_calls == 0


def test_budget_time_stops_generation():
    harness, _, judge, recorder = make_env()
    sampler = HintSampler(delay=0.05)
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(guidance_trial="arms", max_seconds=0.04))
    result = trials.run(SetGuidance(target="fruit", text=HINT), "b3")
    assert not result.accepted and result.reason.startswith("budget")
    assert "max_seconds" in result.reason
    assert len(sampler.calls) == 1 and result.cost.rollouts == 8  # the first arm, then it stopped


def test_budget_probe_of_promoted_task_without_records():
    harness, _, judge, recorder = sampling_env()
    sampler = AlternatingSampler()
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig(max_rollouts=4))
    result = trials.run(ReweightTasks(task_ids=["poem"], weight=5.0), "b4")
    assert not result.accepted and result.reason.startswith("budget")
    assert sampler.calls == []


# ------------------------------------------------------------------------------------------- the real policy


@pytest.fixture(scope="module")
def tiny_policy(one_torch_thread, make_tiny_llama, real_tokenizer):
    """A tiny random LlamaForCausalLM with the real SmolLM2 tokenizer."""
    return make_tiny_llama(), real_tokenizer


def test_transformers_sampler_leaves_the_policy_unchanged(tiny_policy):
    model, tokenizer = tiny_policy
    sampler = TransformersSampler(model, tokenizer, seed=3)
    assert isinstance(sampler, PolicySampler)
    model.train()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    side = tokenizer.padding_side
    rng_state = torch.get_rng_state()
    prompts = [
        [{"role": "user", "content": "Name a fruit."}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why is the sky blue, in detail?"}],
    ]
    texts = sampler.sample(prompts, temperature=1.0, max_new_tokens=4)
    assert len(texts) == 2 and all(isinstance(t, str) for t in texts)
    assert model.training  # training mode restored
    assert tokenizer.padding_side == side
    assert torch.equal(torch.get_rng_state(), rng_state)  # the training run's RNG stream is untouched
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    model.eval()
    sampler.sample(prompts[:1], temperature=0.7, max_new_tokens=2)
    assert not model.training
    # seeded: a fresh sampler with the same seed draws the same texts
    assert TransformersSampler(model, tokenizer, seed=3).sample(prompts, 1.0, 4) == texts


def test_guidance_trial_on_the_real_policy(tiny_policy):
    model, tokenizer = tiny_policy
    harness, _, judge, recorder = make_env()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trials = FrozenPolicyTrials(
        harness,
        recorder,
        judge,
        TransformersSampler(model, tokenizer),
        TrialConfig(guidance_trial="arms", max_new_tokens=4),
    )
    result = trials.run(SetGuidance(target="lemon", text=HINT), "real")
    assert result.cost.rollouts == 12 and result.improvement is not None
    assert not result.accepted  # a random model does not say "banana"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


# ------------------------------------------------------------------------------------------- the embedded judge


@pytest.fixture(scope="module")
def semantic_judge():
    from harnessrl.judges.semantic import SemanticJudge

    try:
        return RubricJudge(SemanticJudge())
    except ResourceMissingError as e:
        pytest.skip(str(e))


def test_semantic_judge_length_story(semantic_judge):
    """docs/design.md §7: the best-passage judge scores a response higher as it grows (more passages, a better best
    match), so reward rises with length; a programmatic pitfall just above the reference answer's length
    breaks the correlation on the cached rollouts, and the reference still scores high."""
    sentences = [
        "I like the weather in every part of the year.",
        "People celebrate many festivals through the year.",
        "Spring and autumn sit between summer and winter.",
        "Near the equator the seasons are mild all year.",
        "Near the poles summer and winter differ a lot.",
        "Summer comes when a hemisphere leans toward the Sun.",
        "The tilt changes how directly sunlight hits each hemisphere.",
        "Seasons happen because the Earth's axis is tilted.",
    ]
    reference = (
        "Seasons happen because the Earth's axis is tilted, so each hemisphere leans toward the Sun for part "
        "of the year."
    )
    task = Task(
        id="seasons",
        domain="science",
        prompt="Why do we have seasons?",
        reference_answer=reference,
        rubric=[
            Criterion(id="tilt", text="Explains that seasons come from the tilt of Earth's axis", weight=1),
            Criterion(id="words", text="Answers in at least 5 words", weight=1, check={"type": "word_count", "min": 5}),
        ],
    )
    harness = Harness([task])
    recorder = Recorder(None)
    openers = ["Well.", "Okay, so.", "Good question.", "Let me think."]
    for step in (1, 2):
        texts = [openers[(k + step) % 4] + " " + " ".join(sentences[: k + 1]) for k in range(8)]
        record_group(harness, semantic_judge, recorder, step, "seasons", texts)
    update = EditRubric(task_id="seasons", add=[pitfall(len(reference.split()) + 6)])
    sampler = NoSampler()
    trials = FrozenPolicyTrials(harness, recorder, semantic_judge, sampler, TrialConfig())
    result = trials.run(update, "sem", failure("spurious_length", task_id="seasons", domain="science"))
    m = result.measurements
    assert result.baseline > 0.9  # reward rises with length
    assert result.accepted, result.reason
    assert result.candidate < 0.5 and result.ci_low > 0
    assert sampler.calls == 0
    assert result.cost.judge_calls == 1  # the reference answer, for the judged criterion; rollouts were cached
    assert m.reference_reward_candidate > 0.8 >= m.policy_median_candidate


class LengthsSampler:
    """Completions of 45, 60, 45, 60, ... words: long enough to saturate the judged criterion; half of every
    fresh group stays within 50 words."""

    def __init__(self):
        self.generated = 0

    def sample(self, prompts, temperature, max_new_tokens, **settings):
        self.generated += len(prompts)
        return [text_of(45 if i % 2 == 0 else 60) for i in range(len(prompts))]


def _one_cached_group_and_a_word_limit():
    """One cached group of task "sea" (one answer within 50 words, three beyond), a candidate that adds a 50-word
    limit, and the uniformly-high failure it answers."""
    harness, _, judge, recorder = make_env()
    record_group(harness, judge, recorder, 1, "sea", [text_of(n) for n in (45, 60, 62, 61)])
    strict = EditRubric(
        task_id="sea",
        add=[Criterion(id="concise", text="Stays within 50 words", weight=1, check={"type": "word_count", "max": 50})],
    )
    return harness, judge, recorder, strict, failure("non_discriminative_high")


def test_a_rubric_trial_on_too_few_cached_groups_tops_them_up_with_fresh_ones_when_asked():
    """One cached group splits 1/3 under the candidate: too little to decide (pending; with ``pending_checks:
    probation`` too, three of its four rollouts break the limit); with ``min_regrade_groups`` fresh groups of the
    frozen policy are re-graded beside it and decide."""
    harness, judge, recorder, strict, flat = _one_cached_group_and_a_word_limit()
    cached_only = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), TrialConfig()).run(strict, "c1", flat)
    assert not cached_only.accepted and cached_only.verdict_kind == "pending"
    assert cached_only.measurements.n_groups == 1 and cached_only.cost.rollouts == 0
    probation = TrialConfig(pending_checks="probation")
    broken_most = FrozenPolicyTrials(harness, recorder, judge, NoSampler(), probation).run(strict, "c0", flat)
    assert broken_most.verdict_kind == "pending" and broken_most.measurements.probation is None
    sampler = LengthsSampler()
    config = TrialConfig(min_regrade_groups=3, max_rollouts=16)
    topped = FrozenPolicyTrials(harness, recorder, judge, sampler, config).run(strict, "c2", flat)
    assert topped.accepted, topped.reason
    assert topped.measurements.n_groups == 3 and topped.measurements.fresh_groups == 2
    assert topped.cost.rollouts == sampler.generated == 8  # two fresh groups of the trainer's G=4


def test_the_runs_rollout_share_bounds_what_each_trial_may_generate():
    """``max_rollout_share``: the run's trials together generate at most that share of the training rollouts so
    far; a rubric trial with less left tops up fewer groups (none when nothing is left), and says so."""
    from types import SimpleNamespace

    from harnessrl.trainer.attach import _LockedTrials

    harness, judge, recorder, strict, flat = _one_cached_group_and_a_word_limit()
    sampler = LengthsSampler()
    config = TrialConfig(min_regrade_groups=3, max_rollouts=16, max_rollout_share=0.2)
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, config)
    trainer = SimpleNamespace(
        policy_lock=threading.Lock(),
        timings=Counter(),
        accounting={"rollouts/generated": 40, "rollouts/trial": 0, "judge/calls_trial": 0},
    )
    locked = _LockedTrials(trials, trainer, config.max_rollout_share)  # as attach_harness builds it
    assert locked.allowance() == 8  # 0.2 x 40 trained, nothing spent yet
    first = locked.run(strict, "c1", flat)
    assert first.measurements.rollout_allowance == 8 and first.measurements.fresh_groups == 2
    assert first.cost.rollouts == 8 and trainer.accounting["rollouts/trial"] == 8
    assert locked.allowance() == 0  # the share is spent until training generates more
    second = locked.run(strict, "c2", flat)
    assert second.cost.rollouts == 0 and second.measurements.fresh_groups == 0
    assert second.measurements.n_groups == 1  # decided on the cached group alone
    trainer.accounting["rollouts/generated"] = 80
    assert locked.allowance() == 8
    # without the setting, no bound beyond max_rollouts
    assert (
        _LockedTrials(FrozenPolicyTrials(harness, recorder, judge, sampler, TrialConfig()), trainer).allowance() is None
    )
