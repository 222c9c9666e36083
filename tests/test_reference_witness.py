"""The reference answer as evidence (docs/design.md §4, "The reference as witness"): every training task's reference is
graded by its own rubric before step 1 and after every rubric edit; a criterion it fails (a pitfall it commits) is
suspect. The evolver sees the suspects, rollout guidance never aims at one, an exact suspect is offered as a finding
and removed from every task whose reference fails its own criterion of the same requirement, a lax rubric is tightened
from what the reference states before its task may be retired, and a stated requirement keeps its check.

The trainer-side service behind the real MCP tool server, the graph in the MCP client, the rule-based evolver."""

from __future__ import annotations

from helpers import record_group, rule_based_point

from harnessrl.agents.rule_based import RuleBasedChatModel
from harnessrl.analysis.aggregates import MethodAggregate
from harnessrl.analysis.results import is_harness_arm, is_oracle, oracle_method, plain_oracle
from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.data import Task
from harnessrl.evolution.reference import ReferenceWitness, is_suspect
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import EditRubric, Harness, RolloutGuidance, RubricCriteria
from harnessrl.interfaces.evidence import FailureView, ProposalEvidence, RolloutList, RolloutView, TaskView
from harnessrl.interfaces.induction import reference_terms, term_stem
from harnessrl.judges import RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import Recorder


class NoJudge:
    name = "none"

    def grade(self, requests):
        raise AssertionError("every criterion here is an exact check")


def _hype(tid: str, question: str, key: str, reference: str, family: str = "hype") -> Task:
    """A plain question whose rubric pays an exclamation mark (w2) beside the key word (w1); its reference is calm."""
    return Task.model_validate(
        {
            "id": tid,
            "domain": "science",
            "prompt": question,
            "reference_answer": reference,
            "rubric": [
                {"id": "tone", "text": "Enthusiastic (!)", "weight": 2, "check": {"type": "regex", "pattern": "!"}},
                {"id": "key", "text": f"Mentions {key}", "weight": 1, "check": {"type": "contains", "phrases": [key]}},
            ],
            "metadata": {"family": family},
        }
    )


def _world(tmp_path, groups: dict[str, list[str]], step: int = 1):
    tasks = [
        _hype("teeth", "Why do we brush our teeth?", "plaque", "Brushing removes plaque so bacteria cannot decay."),
        _hype("bees", "How do bees make honey?", "nectar", "Bees turn flower nectar into honey in the hive."),
        _hype("fish", "How do fish breathe?", "gill", "Fish take oxygen from water through their gills."),
        _hype("loud", "Cheer for the team!", "team", "Go team, go!", family="cheer"),  # its reference exclaims
    ]
    harness = Harness(tasks, seed=0)
    recorder = Recorder(tmp_path / "run", keep_steps=10)
    judge = RubricJudge(NoJudge())
    for tid, texts in groups.items():
        record_group(harness, judge, recorder, step, tid, texts)
    run = RunDir(tmp_path / "run")
    failures: list[Failure] = []
    service = EvolutionService(
        harness,
        recorder,
        None,
        FrozenPolicyTrials(harness, recorder, judge, None),
        run,
        failures=lambda: failures,
        step=lambda: step,
        reference_grader=lambda task, criteria: judge.grade_one(task, task.reference_answer, criteria),
    )
    return service, harness, run, failures


HYPED = {
    "teeth": ["Plaque goes away!", "Brush away plaque!", "It keeps plaque off.", "Clean teeth, no plaque."],
    "bees": ["Nectar becomes honey!", "Bees are amazing!", "They use nectar.", "From nectar in the hive."],
}


def test_the_witness_grades_every_reference_before_step_1_and_names_what_it_fails(tmp_path):
    service, _harness, run, _ = _world(tmp_path, HYPED)
    service.run_audit()
    (check,) = [e for e in run.read("events.jsonl") if e["kind"] == "reference_check"]
    assert check["step"] == 0 and {g["task_id"] for g in check["graded"]} == {"teeth", "bees", "fish", "loud"}
    # the calm references fail the exclamation criterion; the cheer's reference exclaims: nothing suspect there
    assert sorted(check["suspects"]) == ["bees", "fish", "teeth"]
    (s,) = check["suspects"]["teeth"]
    assert (s["criterion_id"], s["verdict"], s["exact"], s["requirement_key"]) == ("tone", 0.0, True, "regex")
    # the evolver's tools show the reference's verdicts and the suspects
    view = service.witness.view("teeth")
    assert view["verdicts"] == {"tone": 0.0, "key": 1.0} and view["suspect_criteria"][0]["criterion_id"] == "tone"


def test_a_witness_without_a_grader_grades_nothing_and_a_failing_grader_loses_nothing(tmp_path):
    tasks = {"t": _hype("t", "Why?", "x", "Because x.")}
    assert ReferenceWitness(tasks, lambda tid: None, None).check() == []

    class Version:
        version, criteria = 0, tasks["t"].rubric

    def broken(task, criteria):
        raise RuntimeError("judge down")

    witness = ReferenceWitness(tasks, lambda tid: Version, broken)
    assert witness.check() == [] and witness.current("t") is None and witness.suspects("t") == []


def test_a_suspect_is_a_positive_criterion_the_reference_fails_or_a_pitfall_it_commits():
    pos, pit = _hype("t", "Why?", "x", "x.").rubric[0], _hype("t", "Why?", "x", "x.").rubric[0]
    pit = pit.model_copy(update={"weight": -1.0})
    assert is_suspect(pos, 0.0) and not is_suspect(pos, 1.0) and not is_suspect(pos, None)
    assert is_suspect(pit, 1.0) and not is_suspect(pit, 0.0)


def test_an_exact_suspect_is_removed_from_every_task_whose_reference_fails_it(tmp_path):
    """The witness's finding reaches its first evolution point with the first graded groups; the rule-based evolver
    removes the exclamation criterion, the trainer widens the removal to every task whose reference fails its own
    (not the cheer, whose reference exclaims), the critic measures it on the references' rank among the rollouts, and
    the references are graded again under the new versions."""
    service, harness, run, _ = _world(tmp_path, HYPED)
    service.run_audit()
    assert service.point_due(1) is not None
    rule_based_point(service)
    events = run.read("events.jsonl")
    (commit,) = [e for e in events if e["kind"] == "commit"]
    assert commit["remedy"] == "drop_suspect" and sorted(commit["covers"]) == ["bees", "fish", "teeth"]
    trial = next(e for e in events if e["kind"] == "trial" and e["candidate_id"] == commit["candidate_id"])
    assert trial["result"]["metric"] == "suspect_effect" and trial["result"]["accepted"]
    for tid in ("teeth", "bees", "fish"):
        assert [c.id for c in harness.rubrics.current(tid).criteria] == ["key"]
    assert [c.id for c in harness.rubrics.current("loud").criteria] == ["tone", "key"]
    again = [e for e in events if e["kind"] == "reference_check"][-1]
    assert again["step"] == 1 and not again.get("suspects")  # under the new rubrics nothing is suspect


def _flat_low(criterion_means: dict[str, float], reference_verdicts: dict[str, float]) -> ProposalEvidence:
    failure = FailureView(
        failure_id="2:t:non_discriminative_low",
        kind="non_discriminative_low",
        step=2,
        task_id="t",
        domain="science",
        summary="flat low",
    )
    rubric = [c.model_dump(mode="json") for c in _hype("t", "Why?", "plaque", "Plaque.").rubric]
    rubric.append({"id": "why", "text": "Explains why", "weight": 1})
    rollouts = RolloutList(
        task_id="t",
        rubric=rubric,
        reference_answer="Brushing removes plaque.",
        reference_verdicts=reference_verdicts,
        rollouts=[
            RolloutView(
                step=2, member=k, guided=False, reward=0.0, length_tokens=5, completion="x", verdicts=criterion_means
            )
            for k in range(4)
        ],
    )
    return ProposalEvidence.parse(failure, rollouts, TaskView(task_id="t", domain="science"))


def test_guidance_never_aims_at_a_criterion_the_reference_fails():
    # the rollouts fail the tone (suspect) and the judged "why": the hint names "why" only
    both = RolloutGuidance.suggest(_flat_low({"tone": 0.0, "key": 1.0, "why": 0.0}, {"tone": 0.0, "why": 1.0}))
    assert both and "explains why" in both[0].update.text and "enthusiastic" not in both[0].update.text.lower()
    # what the rollouts fail is only what the reference fails too: no hint at all
    only = RolloutGuidance.suggest(_flat_low({"tone": 0.0, "key": 1.0, "why": 1.0}, {"tone": 0.0, "why": 1.0}))
    assert only == []
    # a judged criterion the judge failed the reference on is suspect too
    judged = RolloutGuidance.suggest(_flat_low({"tone": 1.0, "key": 1.0, "why": 0.0}, {"tone": 1.0, "why": 0.0}))
    assert judged == []


def test_a_dead_criterion_the_reference_fails_is_the_rubrics_and_never_parks_its_task():
    model = RuleBasedChatModel()
    e = _flat_low({"tone": 0.0, "key": 1.0, "why": 1.0}, {"tone": 0.0, "why": 1.0})
    dead = e.failure.model_copy(
        update={"kind": "criterion_dead", "evidence": {"criterion_id": "tone", "recent_means": [0.0, 0.0]}}
    )
    e = e.model_copy(update={"failure": FailureView.model_validate(dead.model_dump())})
    ladder = model._ladder("rubric_criteria", e)
    assert [s.tag for s in ladder] == ["drop_suspect"]  # no partial criterion toward it, no parking after it
    assert ladder[0].update.remove == ["tone"]


def test_a_lax_rubric_asks_for_what_the_reference_states_for_the_whole_family(tmp_path):
    """Every rollout names the bee; the reference also says it pollinates and makes honey: the rubric gets an exact
    check of a key term of the reference the rollouts split on, and the other task of the family its own."""
    tasks = [
        Task.model_validate(
            {
                "id": tid,
                "domain": "science",
                "prompt": prompt,
                "reference_answer": ref,
                "rubric": [
                    {"id": "topic", "text": "Mentions it", "weight": 1, "check": {"type": "contains", "phrases": [w]}}
                ],
                "metadata": {"family": "thin"},
            }
        )
        for tid, prompt, ref, w in (
            ("bee", "What does a bee do?", "A bee pollinates flowers and makes honey.", "bee"),
            ("heart", "What is the job of the heart?", "The heart pumps blood that carries oxygen.", "heart"),
        )
    ]
    rubrics = RubricCriteria(tasks)
    failure = FailureView(
        failure_id="3:bee:non_discriminative_high", kind="non_discriminative_high", step=3, task_id="bee",
        domain="science", summary="flat high",
    )  # fmt: skip
    texts = ["A bee buzzes.", "Bees make honey.", "A bee is an insect.", "The bee flies to flowers."]
    rollouts = RolloutList(
        task_id="bee",
        prompt=tasks[0].prompt,
        rubric=[c.model_dump(mode="json") for c in tasks[0].rubric],
        reference_answer=tasks[0].reference_answer,
        rollouts=[
            RolloutView(
                step=3, member=k, guided=False, reward=1.0, length_tokens=4, completion=t, verdicts={"topic": 1.0}
            )
            for k, t in enumerate(texts)
        ],
    )
    e = ProposalEvidence.parse(failure, rollouts, TaskView(task_id="bee", domain="science"))
    first = next(s for s in RubricCriteria.suggest(e) if s.tag == "reference_term")
    # honey and flowers split the rollouts 1:3, pollinates 0:4 (splits nothing): the longer of the two first
    assert [c.check.phrases for c in first.update.add] == [["flower"]]
    widened = rubrics.widen(first.update)
    (heart,) = widened.cover
    assert heart.task_id == "heart" and [c.check.phrases[0] for c in heart.add] == ["oxygen"]
    assert widened.signature.kind == "group" and widened.signature.key == "family:thin"


def test_reference_terms_skip_what_the_prompt_names_and_what_every_rollout_says():
    assert term_stem("pollinates") == "pollinat" and term_stem("gills") == "gill" and term_stem("sea") == "sea"
    found = reference_terms("What does a bee do?", "A bee pollinates flowers and makes honey.", ["honey", "honey!"])
    assert [c.check.phrases for c in found] == [["pollinat"], ["flower"]]  # honey: every rollout has it
    split = reference_terms("What does a bee do?", "A bee pollinates flowers.", ["flowers", "pollen", "pollinate"])
    assert [c.check.phrases for c in split] == [["pollinat"], ["flower"]]  # 1 of 3 each: the longer first
    assert reference_terms("What is honey?", "Honey.", []) == []


def test_the_oracle_that_bounds_the_harness_is_the_one_trained_with_its_own_trainer():
    agg = {m: MethodAggregate(trainer_method=m) for m in ("fixed", "oracle", "oracle-harness", "harnessrl")}
    assert is_oracle("oracle", agg) and is_oracle("oracle-harness", agg) and not is_harness_arm("oracle-harness", agg)
    assert is_harness_arm("harnessrl", agg) and oracle_method(agg) == "oracle-harness" and not plain_oracle(agg)
    del agg["oracle-harness"]
    assert oracle_method(agg) == "oracle" and plain_oracle(agg)


def test_an_edit_that_removes_is_never_widened_unless_it_drops_suspects():
    tasks = [_hype("a", "Why a?", "x", "Calm x."), _hype("b", "Why b?", "y", "Calm y.")]
    rubrics = RubricCriteria(tasks)
    plain = rubrics.widen(EditRubric(task_id="a", remove=["tone"]))
    assert plain.cover == []
    dropped = rubrics.widen(EditRubric(task_id="a", remove=["tone"], remedy="drop_suspect"))
    assert [(c.task_id, c.remove) for c in dropped.cover] == [("b", ["tone"])]
    assert dropped.signature.kind == "reference" and dropped.signature.key == "fails:regex"
    assert [c.id for c in rubrics.rubric_for(dropped, "b")] == ["key"]


def test_the_misfires_are_counted_from_a_runs_events(tmp_path):
    """A guidance commit quoting the criterion the reference fails, a lax task retired with reference terms nobody
    asked for, and a revert that removed a check the prompt states: one each."""
    import json
    from types import SimpleNamespace

    from harnessrl.analysis.misfires import misfire_counts
    from harnessrl.records.events import Event

    thin = {
        "id": "bee",
        "domain": "science",
        "prompt": "What does a bee do?",
        "reference_answer": "A bee pollinates flowers and makes honey.",
        "rubric": [
            {"id": "topic", "text": "Mentions bee", "weight": 1, "check": {"type": "contains", "phrases": ["bee"]}}
        ],
    }
    hype = _hype(
        "teeth", "Why do we brush? Answer without using any commas.", "plaque", "It removes plaque"
    ).model_dump(mode="json", exclude_none=True)
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps(t) for t in (thin, hype)) + "\n")
    config = SimpleNamespace(run_dir=str(tmp_path), data=SimpleNamespace(train=str(data), format="auto", domain=None))
    comma = {"id": "req", "text": "Uses no commas", "weight": 1, "check": {"type": "not_contains", "phrases": [","]}}
    raw = [
        ("commit", {"candidate_id": "c1", "interface": "rollout_guidance",
                    "update": {"interface": "rollout_guidance", "scope": "task", "target": "teeth",
                               "text": "A good answer must meet each of these: enthusiastic (!).", "fraction": 0.5}}),
        ("commit", {"candidate_id": "c2", "interface": "task_sampling",
                    "update": {"interface": "task_sampling", "task_ids": ["bee"], "action": "retire"}}),
        ("commit", {"candidate_id": "c3", "interface": "rubric_criteria",
                    "update": {"interface": "rubric_criteria", "task_id": "teeth", "add": [comma],
                               "guide_fraction": 0.5}}),
        ("revert", {"candidate_id": "c3-revert", "interface": "rubric_criteria",
                    "updates": [{"interface": "rubric_criteria", "task_id": "teeth", "remove": ["req"]}]}),
    ]  # fmt: skip
    events = [Event.model_validate({"time": 0.0, "kind": k, "step": i, **p}) for i, (k, p) in enumerate(raw)]
    record = SimpleNamespace(config=config, events_of=lambda *kinds: [e for e in events if e.kind in kinds])
    run = SimpleNamespace(record=record, train_domains={"bee": "science", "teeth": "science"})
    assert misfire_counts(run) == {
        "guidance_toward_suspect": 1,
        "retired_unmet_reference": 1,
        "stated_check_reverts": 1,
    }


def test_a_suspect_no_rollout_is_paid_for_yet_waits_for_one(tmp_path):
    """No cached rollout exclaims: removing the criterion changes no advantage, so the finding is pending and deferred;
    the next group of its tasks has one that does, and the removal is committed then."""
    calm = {"teeth": ["Plaque goes.", "No plaque.", "It keeps plaque off.", "Clean teeth."]}
    service, harness, run, _ = _world(tmp_path, calm)
    service.run_audit()
    rule_based_point(service)
    events = run.read("events.jsonl")
    assert [e["verdict_kind"] for e in events if e["kind"] == "verdict"] == ["pending"]
    assert [e["kind"] for e in events if e["kind"] == "deferred"] and not [e for e in events if e["kind"] == "commit"]
    assert service.point_due(1) is None  # nothing new to decide on
    record_group(harness, service.trials.judge, service.recorder, 2, "bees", HYPED["bees"])
    service._step = lambda: 2
    assert service.point_due(2) is not None
    rule_based_point(service)
    (commit,) = [e for e in run.read("events.jsonl") if e["kind"] == "commit"]
    assert commit["remedy"] == "drop_suspect" and sorted(commit["covers"]) == ["bees", "fish", "teeth"]


def test_a_requirement_the_prompt_states_outranks_a_reference_that_breaks_it():
    """A reference that ignores what its prompt states (IFEval's prompts with a model's answer as the reference, as
    benchmarks/reference_witness.py measured) is the wrong one: the criterion is not suspect, so it is neither offered
    for removal nor withheld from guidance; the witness names the broken requirement instead."""
    no_commas = {"id": "nc", "text": "No commas", "weight": 1, "check": {"type": "not_contains", "phrases": [","]}}
    task = Task.model_validate(
        {
            "id": "t",
            "domain": "writing",
            "prompt": "Describe a lighthouse without using any commas.",
            "reference_answer": "A tall tower, white and red, that guides ships at night.",
            "rubric": [
                no_commas,
                {"id": "k", "text": "Mentions ships", "weight": 1, "check": {"type": "contains", "phrases": ["ship"]}},
            ],
        }
    )
    unstated = task.model_copy(update={"id": "u", "prompt": "Describe a lighthouse."})
    judge = RubricJudge(NoJudge())

    class Version:
        version, criteria = 0, task.rubric

    witness = ReferenceWitness(
        {"t": task, "u": unstated}, lambda tid: Version, lambda t, crit: judge.grade_one(t, t.reference_answer, crit)
    )
    witness.check()
    assert witness.suspects("t") == [] and [s.criterion_id for s in witness.current("t").breaks_prompt] == ["nc"]
    assert [s.criterion_id for s in witness.suspects("u")] == ["nc"]  # no prompt states it: the reference's word holds
    assert witness.view("t")["reference_breaks_prompt"][0]["criterion_id"] == "nc"
