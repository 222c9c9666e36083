"""Each interface's remedies live in the interface: ``suggest`` builds its own candidates with its own update
model from a typed evidence bundle, and the rule-based agent only orders and calls them."""

from __future__ import annotations

from harnessrl.interfaces import (
    EditRubric,
    ProposalEvidence,
    ReweightTasks,
    RolloutGuidance,
    RubricCriteria,
    SetGuidance,
    Suggestion,
    TaskSampling,
)
from harnessrl.interfaces.base import suggestions
from harnessrl.interfaces.evidence import Attempt, FailureView, RolloutList, RolloutView, TaskView, TrialView

RUBRIC = [
    {"id": "c1", "text": "Explains photosynthesis", "weight": 2, "kind": "judged"},
    {
        "id": "c2",
        "text": "Says 'light'",
        "weight": 1,
        "kind": "programmatic",
        "check": {"type": "contains", "phrases": ["light"]},
    },
]
REFERENCE = "Plants use sunlight to make sugar from water and carbon dioxide in their leaves."


def _evidence(kind: str, verdicts=(1.0, 1.0), words=(30, 40, 50, 60), **fields) -> ProposalEvidence:
    failure = FailureView(
        failure_id=f"3:t:{kind}",
        kind=kind,
        step=3,
        task_id="t",
        domain="science",
        summary=f"{kind} on t",
        evidence=fields.pop("evidence", {}),
        interface_hint="rubric_criteria",
    )
    rollouts = RolloutList(
        task_id="t",
        rubric=RUBRIC,
        reference_answer=REFERENCE,
        rollouts=[
            RolloutView(
                step=3,
                member=k,
                guided=False,
                reward=0.5,
                length_tokens=n,
                length_words=n,
                completion="x " * n,
                verdicts={"c1": verdicts[0], "c2": verdicts[1]},
            )
            for k, n in enumerate(words)
        ],
    )
    return ProposalEvidence.parse(failure, rollouts, TaskView(task_id="t", domain="science"), **fields)


def test_the_evidence_is_typed():
    e = _evidence("spurious_length")
    assert [c.id for c in e.rubric] == ["c1", "c2"] and e.rubric[1].check is not None
    assert e.sum_pos == 3.0 and e.max_pos == 2.0 and e.ref_words == 14
    assert e.criterion_means() == {"c1": 1.0, "c2": 1.0} and e.policy_words() == [30, 40, 50, 60]


def test_the_rubric_interface_proposes_its_own_edits():
    e = _evidence("spurious_length", words=(15, 40, 50, 60), evidence={"rho": 0.8, "n": 8})
    (first, revise, padding) = RubricCriteria.suggest(e)
    assert [first.tag, revise.tag, padding.tag] == ["length_pitfall", "length_revise", "padding_pitfall"]
    assert isinstance(first.update, EditRubric)
    (pitfall,) = first.update.add
    assert pitfall.weight == -1.5 and pitfall.check.type == "word_count" and pitfall.check.min == 18  # 1.2 x 14 + 1
    # the builder's arguments are what the remedy set (the tool implies the interface)
    args = first.builder_arguments()
    assert "interface" not in args and args["add"][0] == {
        "id": "length_pitfall",
        "text": "The response is longer than 17 words (padding instead of substance).",
        "weight": -1.5,
        "kind": "programmatic",
        "check": {"type": "word_count", "min": 18},
    }
    high = RubricCriteria.suggest(_evidence("non_discriminative_high"))
    # the reference states what no rollout does: a check of its key terms comes first (one a repair), then a judged
    # stricter criterion
    assert [s.tag for s in high] == ["reference_term", "reference_term_next", "stricter", "stricter_more"]
    assert high[3].update.remove == ["c1"]
    # "sunlight" is left out: the rubric asks for "light" already; none splits these rollouts, so the longest first
    (first,), (second,) = high[0].update.add, high[1].update.add
    assert (first.check.phrases, second.check.phrases) == (["carbon"], ["dioxid"])
    assert (first.id, second.id, first.weight) == ("reference_term_1", "reference_term_2", 2.0)


def test_a_length_bound_no_rollout_meets_is_raised_to_their_lower_quartile():
    """1.2 x the reference's 14 words is 17, and every rollout (30 to 60 words) breaks it: such a pitfall splits no
    group, so the bound is the rollouts' lower quartile (30); one rollout within 17 keeps it at 17."""
    raised = RubricCriteria.suggest(_evidence("spurious_length"))[0].update
    assert raised.add[0].check.min == 31 and "lower quartile" in raised.rationale
    (kept,) = RubricCriteria.suggest(_evidence("spurious_length", words=(15, 40, 50, 60)))[0].update.add
    assert kept.check.min == 18


def test_a_flat_group_whose_rollouts_commit_a_pitfall_is_hinted_to_avoid_it():
    e = _evidence("non_discriminative_low", verdicts=(0.0, 1.0))
    pit = e.rubric[0].model_copy(update={"id": "p", "text": "The response is longer than 17 words", "weight": -1.5})
    rollouts = [r.model_copy(update={"verdicts": {**r.verdicts, "p": 1.0}}) for r in e.rollouts]
    e = e.model_copy(update={"rubric": [*e.rubric, pit], "rollouts": rollouts})
    (guide, _more) = RolloutGuidance.suggest(e)
    assert guide.update.text == "A good answer must avoid each of these: the response is longer than 17 words."


def test_a_revision_reads_the_earlier_attempt_and_the_trial():
    first = RubricCriteria.suggest(_evidence("spurious_length", words=(15, 40, 50, 60)))[0]
    attempt = Attempt(tool="edit_rubric", payload=first.builder_arguments())
    trial = TrialView(
        accepted=False,
        verdict_kind="reference_guard",
        reason="rejected by the reference guard: the reference answer lost score",
    )
    e = _evidence("spurious_length", words=(15, 40, 50, 60), attempts=[attempt], trial=trial)
    revise = next(s for s in RubricCriteria.suggest(e) if s.tag == "length_revise")
    assert revise.update.add[0].check.min == 23  # looser: ceil(17 x 1.25) + 1
    # the typed verdict decides, not the reason's words: a refusal whose reason names the reference is tighter
    worded = TrialView(accepted=False, verdict_kind="not_reliable", reason="the reference answer's rank held")
    e = _evidence("spurious_length", words=(15, 40, 50, 60), attempts=[attempt], trial=worded)
    tighter = next(s for s in RubricCriteria.suggest(e) if s.tag == "length_revise")
    assert tighter.update.add[0].check.min < 18 and tighter.update.add[0].weight == -3.0
    guided = RolloutGuidance.suggest(_evidence("non_discriminative_low", verdicts=(0.0, 0.0)))
    assert [s.tag for s in guided] == ["guide", "guide_more"] and isinstance(guided[0].update, SetGuidance)
    assert guided[0].update.text.startswith("A good answer must meet each of these: explains photosynthesis")


def test_task_sampling_builds_any_of_its_remedies_by_name():
    e = _evidence("spurious_length")
    # a task whose reference states what its rollouts omit is not solved: it is never retired (its rubric is lax)
    assert [s.tag for s in TaskSampling.suggest(_evidence("non_discriminative_high"))] == ["demote"]
    solved = _evidence("non_discriminative_high").model_copy(update={"reference": None})
    assert [s.tag for s in TaskSampling.suggest(solved)] == ["retire", "demote"]
    # ... or once a check of a reference term was measured for the failure and refused: the tightened rubric splits
    # nothing either (a pending one has not decided yet)
    for kind, tags in (("futile", ["retire", "demote"]), ("pending", ["demote"])):
        tried = Attempt(
            tool="edit_rubric",
            payload={"remedy": "reference_term"},
            trial=TrialView(accepted=False, verdict_kind=kind),
        )
        e = _evidence("non_discriminative_high", attempts=[tried])
        assert [s.tag for s in TaskSampling.suggest(e)] == tags
    park = TaskSampling.suggestion("park", e)
    assert isinstance(park.update, ReweightTasks) and park.update.action == "park" and park.update.park_steps == 20
    assert TaskSampling.suggestion("no such remedy", e) is None


def test_a_remedy_that_builds_an_invalid_update_is_left_out(caplog):
    def broken(e):
        return EditRubric(task_id=e.task_id)  # changes nothing: invalid

    def fine(e):
        return EditRubric(task_id=e.task_id, remove=["c1"])

    out = suggestions(_evidence("criterion_saturated"), [("broken", broken), ("none", lambda e: None), ("fine", fine)])
    assert [s.tag for s in out] == ["fine"] and isinstance(out[0], Suggestion)
    assert "remedy broken built an invalid update" in caplog.text


# ------------------------------------------------------------------------------------------ induced criteria
from harnessrl.data.checks import Contains, NotContains, SentenceCount, StartsWith, WordCount  # noqa: E402
from harnessrl.interfaces.induction import induce_checks, stated_requirements, tightened_bound  # noqa: E402

NOCOMMA = "Describe a sunny day in one sentence, without using any commas."
SUNNY = "The warm sun shines on a quiet park full of happy people."


def test_what_a_prompt_states_is_read_as_exact_checks():
    found = {c.type: c for c, _ in stated_requirements(NOCOMMA)}
    assert found["not_contains"] == NotContains(phrases=[","])
    assert found["not_contains"].written() == {"type": "not_contains", "phrases": [","]}  # as the audit writes it
    assert found["sentence_count"] == SentenceCount(max=1)
    (limit,) = [c for c, _ in stated_requirements("In at most 20 words, explain why leaves are green.")]
    assert limit == WordCount(max=20)
    (tag,) = [c for c, _ in stated_requirements("What is 2+2? Reply in the form 'ANSWER: <number>'.")]
    assert tag == StartsWith(text="ANSWER:")
    opener = [c for c, _ in stated_requirements("What is gravity? Begin your answer with 'Gravity'.")]
    assert opener == [StartsWith(text="Gravity")]
    assert stated_requirements("Tell me about the sea.") == []


def test_an_induced_check_is_met_by_the_reference_and_splits_the_rollouts():
    rollouts = ["The sun is warm, bright and kind.", "A sunny day is nice.", "Sun, sky, sea.", "Warm sun."]
    (first, *_) = induce_checks(NOCOMMA, SUNNY, rollouts)
    assert first.check == NotContains(phrases=[","]) and (first.passes, first.total) == (2, 4)
    assert first.source == "prompt" and first.balance == 1.0
    # every rollout already passes (no split), or the reference fails it: nothing to induce
    assert induce_checks(NOCOMMA, SUNNY, ["A warm day.", "Sunny."]) == []
    assert [c.check.type for c in induce_checks(NOCOMMA, "Warm, bright, kind.", rollouts)] == []
    # a check the rubric has already is not proposed again
    assert all(c.check.type != "not_contains" for c in induce_checks(NOCOMMA, SUNNY, rollouts, [first.check]))


def test_a_saturated_bound_is_tightened_to_what_the_reference_meets():
    rollouts = ["one two three four five six", "one two three", "one two three four five six seven eight"]
    tight = tightened_bound(WordCount(max=80), "one two three four", rollouts)
    assert tight == WordCount(max=6) and tight.written() == {"type": "word_count", "max": 6}
    assert tightened_bound(WordCount(max=5), "one two three four five six", rollouts) is None
    assert tightened_bound(Contains(phrases=["x"]), None, rollouts) is None


def _lax(texts) -> ProposalEvidence:
    failure = FailureView(
        failure_id="3:n:non_discriminative_high",
        kind="non_discriminative_high",
        step=3,
        task_id="n",
        domain="writing",
        summary="all 4 rewards are uniformly high",
        interface_hint="rubric_criteria",
    )
    rollouts = RolloutList(
        task_id="n",
        prompt=NOCOMMA,
        reference_answer=SUNNY,
        rubric=[
            {"id": "topic", "text": "Mentions 'sun'", "weight": 1, "check": {"type": "contains", "phrases": ["sun"]}}
        ],
        rollouts=[
            RolloutView(
                step=3, member=k, guided=False, reward=1.0, length_tokens=9, completion=t, verdicts={"topic": 1.0}
            )
            for k, t in enumerate(texts)
        ],
    )
    return ProposalEvidence.parse(failure, rollouts)


def test_a_lax_rubric_gets_the_exact_criterion_its_prompt_asks_for_before_anything_judged():
    out = RubricCriteria.suggest(_lax(["The sun, the sky.", "Sun is here.", "Sunny, warm.", "A sun day."]))
    assert [s.tag for s in out][:1] == ["induced"]
    (crit,) = out[0].update.add
    assert crit.check.type == "not_contains" and crit.weight == 1.0 and crit.text == "Uses no commas at all"
    # what the prompt states comes first even when this group does not split on it: the critic decides on the
    # pooled groups of every task that states it; the judged stricter criterion follows
    flat = RubricCriteria.suggest(_lax(["The sun is here.", "Sun is warm.", "Sunny day.", "A sun day."]))
    tags = [s.tag for s in flat]
    assert tags[0] == "induced" and "stricter" in tags


def test_induced_criteria_can_be_turned_off_for_an_ablation():
    from harnessrl.interfaces.evidence import SuggestSettings
    from harnessrl.trainer.train_config import TrainConfig

    texts = ["The sun, the sky.", "Sun is here.", "Sunny, warm.", "A sun day."]
    off = _lax(texts).model_copy(update={"settings": SuggestSettings(induced_criteria=False)})
    assert next(s.tag for s in RubricCriteria.suggest(off)) == "stricter"
    config = TrainConfig.model_validate({"evolver": {"graph": {"remedies": {"induced_criteria": False}}}})
    assert config.evolver.graph.remedies.induced_criteria is False


def test_a_stated_requirement_no_rollout_meets_is_proposed_with_its_hint():
    """'Without commas' and every rollout uses one: a check alone would split no group, so it comes with a hint to
    half of each group (one update); a requirement some rollouts meet stays a plain check."""
    out = RubricCriteria.suggest(_lax(["The sun, the sky.", "Sun, here.", "Sunny, warm.", "A sun, day."]))
    assert [s.tag for s in out][:3] == ["induced", "induced_guided", "reference_term"]  # 'one sentence' is met
    first = out[1]
    assert first.update.guide_fraction == 0.5 and out[0].update.guide_fraction == 0
    assert first.update.add[0].check.type == "not_contains" and "no group" in first.update.rationale
    met = RubricCriteria.suggest(_lax(["The sun, the sky.", "Sun is here.", "Sunny, warm.", "A sun day."]))
    assert met[0].tag == "induced" and met[0].update.guide_fraction == 0


def test_an_audit_requirement_refused_on_pooled_rollouts_that_break_it_comes_back_with_its_hint():
    """The audit's no-comma finding: the task's own rollouts split 1:3, so the plain check comes first; once it was
    refused on pooled rollouts of which one in twelve met it, the next remedy is the check with its hint."""
    check = {"type": "not_contains", "phrases": [","]}
    key = "not_contains:[',']"
    failure = FailureView(
        failure_id="3:n:unchecked_requirement",
        kind="unchecked_requirement",
        step=3,
        task_id="n",
        domain="writing",
        summary="the audit found 'Uses no commas at all'",
        evidence={"requirement_key": key, "requirement": check, "requirement_text": "Uses no commas at all"},
    )
    texts = ["The sun, the sky.", "Sun is here.", "Sunny, warm.", "A sun, day."]
    lax = _lax(texts)
    e = lax.model_copy(update={"failure": failure})
    assert [s.tag for s in RubricCriteria.suggest(e)] == ["requirement"]  # 1 of 4 meets it: a check can split
    refused = Attempt(
        candidate_id="c1",
        interface="rubric_criteria",
        tool="edit_rubric",
        payload={"remedy": "requirement", "add": [{"id": "req", "text": "x", "weight": 1, "check": check}]},
        trial=TrialView(accepted=False, reason="not reliable", measurements={"split": {"broken": 11, "rollouts": 12}}),
    )
    again = e.model_copy(update={"attempts": [refused]})
    (only,) = RubricCriteria.suggest(again)  # the plain check is not offered again: it cannot split
    assert only.tag == "requirement_guided"
    guided = only.update
    assert guided.guide_fraction == 0.5 and "1 of 12 pooled rollouts met it" in guided.rationale
