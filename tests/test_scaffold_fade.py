"""A scaffold that fades (docs/design.md §4): once a guided task's unguided members give signal alone, the
detectors report ``scaffold_outgrown``, guidance proposes the same hint for half as many members (or none), and
the critic accepts the fade only when the group keeps its signal without it (non-inferiority, not improvement).

Detector and critic units, then whole evolution points: the trainer-side service behind the real MCP tool
server, the graph in the MCP client, the rule-based evolver, a scripted frozen policy.
"""

from __future__ import annotations

import pytest
from helpers import FRUIT, FruitJudge, record_group, rule_based_point

from harnessrl.critic.acceptance import Measured, decide
from harnessrl.critic.trials import SIGNAL_SHARE, FrozenPolicyTrials
from harnessrl.data import Criterion, Task
from harnessrl.detection import DetectorConfig, FailureDetector
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness, SetGuidance
from harnessrl.interfaces.evidence import FailureView, ProposalEvidence, TaskView
from harnessrl.interfaces.guidance import RolloutGuidance
from harnessrl.interfaces.registry import failure_hints
from harnessrl.judges import RubricJudge
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder, StepRecord

HINT = "The answer is a banana."
SEA = Task(id="sea", domain="food", prompt="Name a sea fruit.", rubric=[Criterion(id="c1", text="Vivid", weight=1)])


def _group(step: int, rewards: list[float], guided: int, task_id: str = "fruit") -> GroupRecord:
    return GroupRecord(
        step=step,
        task_id=task_id,
        domain="food",
        rubric_version=0,
        guidance=HINT if guided else None,
        guided=guided,
        rewards=rewards,
        mean=sum(rewards) / len(rewards),
        std=0.0,
        flat=False,
        lengths=[3] * len(rewards),
        criterion_means={},
    )


def _observe(detector: FailureDetector, step: int, rewards: list[float], guided: int) -> list:
    return detector.observe(StepRecord(step=step, groups=[_group(step, rewards, guided)]))


# ------------------------------------------------------------------------------------------- the detector


def test_a_guided_group_whose_plain_members_give_signal_is_reported_as_an_outgrown_scaffold():
    detector = FailureDetector(hints=failure_hints())
    (failure,) = [f for f in _observe(detector, 1, [1.0, 1.0, 1.0, 0.0], guided=2) if f.kind == "scaffold_outgrown"]
    assert failure.interface_hint == "rollout_guidance"
    ev = failure.evidence
    assert ev.guided == 2 and ev.group_size == 4 and ev.guidance == HINT
    assert ev.plain_rewards == [1.0, 0.0] and ev.guided_rewards == [1.0, 1.0]
    assert "give signal without the hint" in failure.summary
    # the plain members alike (the hint still does the work), or no hint at all: nothing to fade
    for step, rewards, guided in ((2, [1.0, 1.0, 0.0, 0.0], 2), (3, [1.0, 0.0, 1.0, 0.0], 0)):
        assert not [f for f in _observe(detector, step, rewards, guided) if f.kind == "scaffold_outgrown"]


def test_an_outgrown_scaffold_needs_its_last_guided_groups_in_a_row_and_can_be_turned_off():
    detector = FailureDetector(DetectorConfig(scaffold_groups=2))
    assert not [f for f in _observe(detector, 1, [1.0, 1.0, 1.0, 0.0], 2) if f.kind == "scaffold_outgrown"]
    assert [f.kind for f in _observe(detector, 2, [1.0, 1.0, 0.0, 1.0], 2) if f.kind == "scaffold_outgrown"]
    off = FailureDetector(DetectorConfig(scaffold_groups=0))
    assert not [f for f in _observe(off, 1, [1.0, 1.0, 1.0, 0.0], 2) if f.kind == "scaffold_outgrown"]
    with pytest.raises(ValueError, match=r"scaffold_groups .* cannot exceed window"):
        DetectorConfig(scaffold_groups=5, window=4)


# ------------------------------------------------------------------------------------------- the remedy


def _evidence(guided: int, guidance: dict | None, scope: str | None = "task") -> ProposalEvidence:
    failure = FailureView(
        failure_id="1:fruit:scaffold_outgrown:x",
        kind="scaffold_outgrown",
        step=1,
        task_id="fruit",
        domain="food",
        summary="the scaffold may fade",
        evidence={"guided": guided, "group_size": 4, "plain_rewards": [1.0, 0.0], "temperature": 1.0},
        interface_hint="rollout_guidance",
    )
    task = TaskView.model_validate(
        {"task_id": "fruit", "domain": "food", "guidance": guidance, "guidance_scope": scope, "temperature": 1.0}
    )
    return ProposalEvidence(failure=failure, task=task)


def test_the_fade_halves_the_guided_members_then_removes_the_hint():
    rule = {"text": HINT, "fraction": 0.5, "temperature": None}
    ((tag, half),) = [(s.tag, s.update) for s in RolloutGuidance.suggest(_evidence(2, rule))]
    assert tag == "fade" and half.text == HINT and half.fraction == 0.25 and half.temperature is None
    (gone,) = [s.update for s in RolloutGuidance.suggest(_evidence(1, {**rule, "fraction": 0.25}))]
    assert gone.removes() and "removed" in gone.rationale
    # a domain's rule is covered for the task by a task rule without a hint, at the temperature in force
    (cover,) = [s.update for s in RolloutGuidance.suggest(_evidence(1, rule, scope="domain"))]
    assert cover.scope == "task" and cover.text is None and cover.fraction == 0 and cover.temperature == 1.0
    assert RolloutGuidance.suggest(_evidence(2, None)) == []  # no hint in force: nothing to fade


def test_only_an_update_that_takes_guidance_away_fades():
    harness = Harness([FRUIT, SEA])
    harness.guidance.apply(SetGuidance(target="fruit", text=HINT, fraction=0.5), step=0)
    fades = harness.guidance.fades
    assert fades(SetGuidance(target="fruit", text=HINT, fraction=0.25))
    assert fades(SetGuidance(target="fruit", text=None, fraction=0))
    assert not fades(SetGuidance(target="fruit", text=HINT, fraction=0.75))  # more members
    assert not fades(SetGuidance(target="fruit", text="Another hint.", fraction=0.25))  # a new hint
    assert not fades(SetGuidance(target="fruit", text=HINT, fraction=0.25, temperature=1.3))  # hotter
    assert not fades(SetGuidance(target="sea", text=HINT, fraction=0.5))  # a hint where there was none


def test_non_inferiority_accepts_a_candidate_that_keeps_the_signal_and_rejects_one_that_may_lose_it():
    kept = Measured(baseline=1.0, candidate=1.0, improvement=0.0, ci_low=0.0, ci_high=0.0, margin=0.25)
    ok, kind, reason = decide(kept, SIGNAL_SHARE, 0.25, 0.95)
    assert ok and kind == "accepted" and "holds without the harness it removes" in reason and "margin 0.25" in reason
    lost = Measured(baseline=1.0, candidate=0.5, improvement=-0.5, ci_low=-1.0, ci_high=0.0, margin=0.25)
    ok, kind, reason = decide(lost, SIGNAL_SHARE, 0.25, 0.95)
    assert not ok and kind == "inferior"
    assert reason.startswith("rejected: removing it may cost more signal than the margin")
    # without a margin the same numbers are judged for improvement, as always
    assert not decide(Measured(1.0, 1.0, 0.0, 0.0, 0.0), SIGNAL_SHARE, 0.25, 0.95)[0]


def test_a_fade_is_the_tasks_own_and_reaches_no_other_task():
    tasks = [t.model_copy(update={"metadata": {"family": "f"}}) for t in (FRUIT, SEA)]
    fade = SetGuidance(target="fruit", text=HINT, fraction=0.25)
    guidance = Harness(tasks).guidance
    assert guidance.widen(fade).cover == [] and [t.id for t in guidance.targets(fade)] == ["fruit"]


# ------------------------------------------------------------------------------------------- evolution points


class LearnedPolicy:
    """A frozen policy that has learned the task: with the hint it names the banana, without it every other
    time (the plain prompt's group gives signal on its own)."""

    def sample(self, prompts, temperature, max_new_tokens):
        out, plain = [], 0
        for p in prompts:
            if HINT in p[-1]["content"]:
                out.append("A banana.")
            else:
                out.append("A banana." if plain % 2 == 0 else "An apple.")
                plain += 1
        return out


class HintedPolicy:
    """A frozen policy that still needs the hint: it names the banana only when the prompt carries it."""

    def sample(self, prompts, temperature, max_new_tokens):
        return ["A banana." if HINT in p[-1]["content"] else "An apple." for p in prompts]


def _world(tmp_path, policy, fraction: float):
    harness = Harness([FRUIT, SEA], seed=0)
    harness.guidance.apply(SetGuidance(target="fruit", text=HINT, fraction=fraction), step=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(FruitJudge())
    detector = FailureDetector(hints=failure_hints())
    failures: list = []
    guided = 2 if fraction == 0.5 else 1
    for step in (1, 2):  # the guided members pass; so does one plain member: the plain prompt gives signal
        texts = ["A banana."] * guided + ["A banana."] + ["An apple."] * (3 - guided)
        record_group(harness, judge, recorder, step, "fruit", texts, guided=guided)
        failures = detector.observe(recorder.steps[step], recorder.rollouts[step])
    assert [f.kind for f in failures] == ["scaffold_outgrown"]
    trials = FrozenPolicyTrials(harness, recorder, judge, policy)
    run = RunDir(tmp_path / "run")
    service = EvolutionService(harness, recorder, None, trials, run, failures=lambda: failures, step=lambda: 2)
    return service, harness, run


def test_a_scaffold_the_plain_prompt_outgrew_fades_after_the_critic_measures_it(tmp_path):
    service, harness, run = _world(tmp_path, LearnedPolicy(), fraction=0.5)
    (outcome,) = rule_based_point(service)
    assert outcome.status == "committed" and outcome.interface == "rollout_guidance"
    rule = harness.guidance.rule_for(FRUIT)
    assert rule is not None and rule.text == HINT and rule.fraction == 0.25  # half the members, the same hint
    (verdict,) = [e for e in run.read("events.jsonl") if e["kind"] == "verdict"]
    assert verdict["verdict"] == "accepted" and "non-inferiority margin" in verdict["reason"]
    (trial,) = [e for e in run.read("events.jsonl") if e["kind"] == "trial"]
    assert trial["result"]["margin"] == 0.25 and trial["result"]["measurements"]["fades"] is True
    assert trial["result"]["cost"]["rollouts"] > 0  # measured on fresh rollouts of the frozen policy


def test_a_scaffold_the_policy_still_needs_is_kept(tmp_path):
    service, harness, run = _world(tmp_path, HintedPolicy(), fraction=0.25)
    (outcome,) = rule_based_point(service)
    assert outcome.status == "gave_up"
    rule = harness.guidance.rule_for(FRUIT)
    assert rule is not None and rule.text == HINT and rule.fraction == 0.25  # unchanged
    (verdict,) = [e for e in run.read("events.jsonl") if e["kind"] == "verdict"]
    assert verdict["verdict"] == "rejected" and "may cost more signal than the margin" in verdict["reason"]
    # a fade is never followed by parking or retiring a task that gives signal
    assert harness.sampling.version == 0
