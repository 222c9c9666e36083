"""The rubric audit's probes before step 1 (``evolver.audit_probe_tasks``; docs/design.md §4, "Audit probes"): one
fresh group of the initial policy on a few tasks of each finding, graded like a training group, kept as groups
graded at step 0 and never trained on, so an evolution point at step 0 can decide a finding before GRPO trains on
the lax rubric.

The trainer-side service behind the real MCP tool server, the rule-based evolver, the critic's real trials with a
scripted policy sampler (the fake stands in for the model only).
"""

from __future__ import annotations

import json

import pytest
from helpers import rule_based_point, task_row
from test_signature_repairs import WAIT, NoJudge, _task

from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.judges import RubricJudge
from harnessrl.records.run_dir import RunDir
from harnessrl.records.run_record import read_events
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord
from harnessrl.trainer.run import train
from harnessrl.trainer.run_report import audit_section, write_report
from harnessrl.trainer.train_config import EvolverSettings, TrainConfig

# what the initial policy writes for each task's prompt: half its answers use commas, every one is one sentence
ANSWERS = {
    "sea": ["The sea, wide and blue.", "The sea is calm.", "Sea, sky and sun.", "A grey sea."],
    "city": ["The city, loud and bright.", "The city sleeps.", "City lights, cars.", "A city at dawn."],
    "forest": ["Old trees stand tall.", "The forest, dark.", "A green forest.", "Trees, moss, birds."],
    "rain": ["Rain falls.", "Rain, soft and cold.", "The rain stops.", "Grey rain, wet roofs."],
}


class ScriptedSampler:
    """A :class:`~harnessrl.critic.protocols.PolicySampler` that answers each task's prompt from :data:`ANSWERS`,
    member by member (a prompt's k-th request gets its k-th answer), and counts what it was asked."""

    def __init__(self, answers: dict[str, list[str]] | None = None):
        self.asked: list[str] = []
        self.answers = answers or ANSWERS

    def sample(self, prompts, temperature, max_new_tokens, **kwargs):
        out = []
        for p in prompts:
            word = next(w for w in self.answers if w in p[-1]["content"])
            out.append(self.answers[word][self.asked.count(word) % 4])
            self.asked.append(word)
        return out


def _world(tmp_path, answers: dict[str, list[str]] | None = None):
    """Four tasks whose prompts ask for one sentence without commas (their rubrics check neither), none drawn yet;
    the initial policy answers as ``answers`` says (:data:`ANSWERS` when None)."""
    tasks = [
        _task("sea", "sea", "The calm sea shines under a pale blue sky.", family="nocomma"),
        _task("city", "city", "The busy city hums with cars and people.", family="nocomma"),
        _task("forest", "forest", "A quiet forest of tall old trees.", family="elsewhere"),
        _task("rain", "rain", "Rain falls softly on the roof.", domain="medical"),
    ]
    harness = Harness(tasks, seed=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(NoJudge())
    sampler = ScriptedSampler(answers)
    run = RunDir(tmp_path / "run")
    service = EvolutionService(
        harness,
        recorder,
        None,
        FrozenPolicyTrials(harness, recorder, judge, sampler, WAIT),
        run,
        failures=lambda: [],
        step=lambda: 0,
    )
    return service, harness, recorder, sampler, run


def _keep(harness: Harness, recorder: Recorder):
    """What the trainer does with the probes (``HarnessGRPOTrainer.record_probe``): groups graded at step 0, none
    trained."""

    def record(rollouts: list[RolloutRecord]) -> None:
        groups = [
            GroupRecord.of([r for r in rollouts if r.task_id == t], harness.tasks[t].domain, 0.02)
            for t in dict.fromkeys(r.task_id for r in rollouts)
        ]
        recorder.add(StepRecord(step=0, groups=[], discarded=groups), rollouts)

    return record


def test_the_probes_decide_a_finding_at_step_0_and_its_repair_covers_every_task_from_step_1(tmp_path):
    service, harness, recorder, sampler, run = _world(tmp_path)
    service.run_audit()
    probe = service.probe_audit(2, 4, None, _keep(harness, recorder))
    # the two findings (no commas, one sentence) share their tasks: the first two in id order are probed once
    assert probe.tasks == ["city", "forest"] and probe.rollouts == 8 and probe.left_out == []
    assert probe.findings == {"not_contains:[',']": ["city", "forest"], "sentence_count:max": ["city", "forest"]}
    assert sorted(sampler.asked) == ["city"] * 4 + ["forest"] * 4
    # graded like a training group, kept as graded at step 0 and never trained on
    assert [recorder.graded(t) for t in ("city", "forest", "sea", "rain")] == [1, 1, 0, 0]
    kept = recorder.latest_rollouts()
    assert len(kept) == 8 and all(r.step == 0 and not r.trained and r.reward is not None for r in kept)
    assert recorder.steps[0].groups == [] and len(recorder.steps[0].discarded) == 2
    (event,) = [e for e in run.read("events.jsonl") if e["kind"] == "audit_probe"]
    assert event["step"] == 0 and event["rewards"]["city"] == [r.reward for r in kept if r.task_id == "city"]

    assert service.point_due(0) == "the rubric audit's finding not_contains:[','] has graded groups"
    rule_based_point(service)
    events = run.read("events.jsonl")
    (commit,) = [e for e in events if e["kind"] == "commit"]
    # 4 of 8 probed rollouts use commas: the pooled test accepts at its first look, before any training step
    assert commit["step"] == 0 and commit["applies_from_step"] == 1
    assert sorted(commit["covers"]) == ["city", "forest", "rain", "sea"]
    for t in ANSWERS:
        assert "not_contains" in {c.check.type for c in harness.rubrics.current(t).criteria if c.check}
    trial = next(e for e in events if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"])
    assert trial["result"]["measurements"]["split"]["broken"] == 4
    assert trial["result"]["measurements"]["split"]["rollouts"] == 8
    # the run report's audit table says what was probed
    html = audit_section(read_events(run.path))
    assert "probed before step 1" in html and "city, forest (8 rollouts)" in html


def test_the_probes_stay_within_the_allowance_and_say_what_did_not_fit(tmp_path):
    service, harness, recorder, sampler, _ = _world(tmp_path)
    service.run_audit()
    probe = service.probe_audit(2, 4, 7, _keep(harness, recorder))  # one group of four fits in 7 rollouts
    assert probe.tasks == ["city"] and probe.rollouts == 4 and probe.left_out == ["forest"]
    assert probe.allowance == 7 and len(sampler.asked) == 4


def test_no_probe_when_nothing_fits_or_nothing_was_found(tmp_path):
    service, harness, recorder, sampler, run = _world(tmp_path)
    assert service.probe_audit(2, 4, None, _keep(harness, recorder)) is None  # no audit run: no finding
    service.run_audit()
    probe = service.probe_audit(2, 4, 3, _keep(harness, recorder))
    assert probe.tasks == [] and "rollouts" not in probe.written() and sampler.asked == []
    assert recorder.graded("city") == 0 and service.point_due(0) is None
    html = audit_section(read_events(run.path))
    assert "probed before step 1" in html and "rollouts)" not in html  # the column is there, every row empty
    assert service.probe_audit(0, 4, None, _keep(harness, recorder)) is None  # off


def test_a_probe_the_sampler_cannot_make_loses_nothing_and_is_an_event(tmp_path):
    service, harness, recorder, _, run = _world(tmp_path)
    service.trials.sampler = None  # e.g. a run without a policy sampler for its critic
    service.run_audit()
    probe = service.probe_audit(2, 4, None, _keep(harness, recorder))
    assert "no policy sampler" in probe.error and recorder.graded("city") == 0
    assert "the probes were not made" in audit_section(read_events(run.path))


def test_audit_probe_tasks_is_two_on_one_process_none_on_several_by_default_and_never_negative():
    from harnessrl.errors import ConfigError

    default = EvolverSettings()
    assert default.audit_probe_tasks is None and default.probe_tasks(1) == 2 and default.probe_tasks(4) == 0
    assert EvolverSettings(audit_probe_tasks=0).probe_tasks(4) == 0
    assert EvolverSettings(audit_probe_tasks=3).probe_tasks(1) == 3
    with pytest.raises(ConfigError, match=r"audit_probe_tasks: 0 \(or leave it null\), or train on one process"):
        EvolverSettings(audit_probe_tasks=2).probe_tasks(2)
    with pytest.raises(ValueError, match="audit_probe_tasks"):
        EvolverSettings(audit_probe_tasks=-1)


# ------------------------------------------------------------------ the whole run: a tiny policy really generating
ROWS = [
    task_row(f"calm-{k}", "writing", f"Describe {w} without using any commas.", f"The {w} is calm.", f"Mentions {w}")
    for k, w in enumerate(["the sea", "a lake", "the sky", "a field"])
]


@pytest.mark.usefixtures("one_torch_thread")
def test_a_training_run_probes_before_step_1_and_decides_at_step_0(tmp_path, tiny_model_dir):
    """``harnessrl train`` with ``evolver.audit_probe_tasks``: the probes are generated by the policy before step 1,
    graded, kept as step 0's groups (never trained on, counted as trial rollouts), and an evolution point at step 0
    reads them; the report's audit table names the probed tasks."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "method": "harnessrl-grpo",
            "data": {"train": str(data)},
            "grpo": {"num_generations": 2, "tasks_per_step": 2, "max_completion_length": 8, "max_steps": 1},
            "eval": {"every_steps": None, "before_training": False, "max_new_tokens": 8, "batch_size": 4},
            "evolver": {"audit_probe_tasks": 2, "trials": {"max_rollout_share": None}},
        }
    )
    summary = train(config)
    run = RunDir(tmp_path / "run", create=False)
    events = run.read("events.jsonl")
    (probe,) = [e for e in events if e["kind"] == "audit_probe"]
    assert probe["tasks"] == ["calm-0", "calm-1"] and probe["rollouts"] == 4 and probe["allowance"] is None
    points = [e for e in events if e["kind"] == "evolution_point"]
    assert points[0]["step"] == 0 and "has graded groups" in points[0]["early"]
    dropped = run.read("discarded_groups.jsonl")
    assert [(g["step"], g["task_id"], g["trained"]) for g in dropped] == [(0, "calm-0", False), (0, "calm-1", False)]
    assert all(g["step"] == 1 for g in run.read("steps.jsonl"))  # the probes trained nothing
    assert summary.accounting.rollouts_trial >= 4
    page = write_report(run.path).read_text()
    assert "probed before step 1" in page and "calm-0, calm-1 (4 rollouts)" in page


def test_a_resumed_run_counts_the_probes_again_and_its_detectors_never_see_them(tmp_path):
    from harnessrl.trainer.resume import replay

    service, harness, recorder, _, run = _world(tmp_path)
    service.run_audit()
    service.probe_audit(2, 4, None, _keep(harness, recorder))
    # step 1 trains a group of sea (the probes' texts stand in for its rollouts)
    rollouts = [
        r.model_copy(update={"step": 1, "trained": True, "task_id": "sea"}) for r in recorder.latest_rollouts("city")
    ]
    recorder.add(StepRecord(step=1, groups=[GroupRecord.of(rollouts, "writing", 0.02)]), rollouts)
    again = Recorder(tmp_path / "run", keep_steps=10)
    seen: list[int] = []
    assert replay(run, again, observe=lambda record, rollouts, regrade: seen.append(record.step)) == 1
    assert seen == [1] and [again.graded(t) for t in ("city", "forest", "sea")] == [1, 1, 1]


def test_the_probes_are_refused_on_several_processes_with_what_to_do():
    from types import SimpleNamespace

    from harnessrl.errors import ConfigError
    from harnessrl.trainer.attach import attach_harness

    trainer = SimpleNamespace(
        step_listeners=[],
        harness=None,
        accelerator=SimpleNamespace(num_processes=2, is_main_process=True),
        args=SimpleNamespace(ddp_timeout=1800),
    )
    with pytest.raises(ConfigError, match=r"audit_probe_tasks: 0 \(or leave it null\), or train on one process"):
        attach_harness(trainer, evolver=EvolverSettings(audit_probe_tasks=2))
