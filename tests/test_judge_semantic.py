"""The embedded semantic judge: satisfying responses above failing ones, anchors, batching, labels."""

from __future__ import annotations

import pytest

from harnessrl.data import Task, load_judge_labels
from harnessrl.judges import GradeRequest, RubricJudge, build_judge
from harnessrl.judges.quality import agreement, auc
from harnessrl.judges.semantic import SemanticJudge, criterion_query, passages


@pytest.fixture(scope="module")
def backend() -> SemanticJudge:
    return SemanticJudge()


CASES = [
    # (prompt, reference, criterion, satisfying response, failing response)
    (
        "What are common side effects of ACE inhibitors such as lisinopril?",
        "ACE inhibitors such as lisinopril often cause a dry, persistent cough. They can raise blood "
        "potassium and cause dizziness. Rarely they cause angioedema, a swelling of the face and throat.",
        "States that ACE inhibitors can cause a dry cough",
        "Many people on lisinopril develop a persistent dry cough.",
        "Lisinopril lowers blood pressure. Take it every morning with water.",
    ),
    (
        "Why do we have seasons on Earth?",
        "Seasons happen because Earth's axis is tilted about 23.5 degrees. As Earth orbits the Sun, each "
        "hemisphere is tilted toward the Sun for part of the year and gets more direct sunlight.",
        "Explains that seasons are caused by the tilt of Earth's axis",
        "The seasons come from the tilt of Earth's rotation axis relative to its orbit.",
        "Seasons are a natural cycle that people have celebrated for thousands of years.",
    ),
    (
        "Write a two-line poem about the sea at night.",
        "Moonlight spills on the restless sea, / the dark waves hum a lullaby to me.",
        "Mentions the moon or moonlight on the water",
        "Under the pale moon the water glitters silver.",
        "The waves crash loudly against the rocks all day.",
    ),
    (
        "You are a pirate captain. Greet your new crew.",
        "Ahoy, ye scurvy dogs! Welcome aboard the Black Gull. Swab the deck and stow yer gear.",
        "Speaks in pirate dialect such as 'ahoy' or 'matey'",
        "Ahoy mateys, welcome aboard me ship!",
        "Hello everyone, welcome to the team meeting. Please sign the attendance sheet.",
    ),
]


def _req(prompt, ref, crit_text, response, weight=3.0):
    t = Task.model_validate(
        {
            "id": "x",
            "domain": "d",
            "prompt": prompt,
            "reference_answer": ref,
            "rubric": [{"id": "c1", "text": crit_text, "weight": weight}],
        }
    )
    return GradeRequest(prompt, response, t.rubric[0], ref)


@pytest.mark.parametrize("case", CASES, ids=[c[2][:30] for c in CASES])
def test_satisfying_response_scores_above_failing_one(backend, case):
    prompt, ref, crit, good, bad = case
    v_good, v_bad = backend.grade([_req(prompt, ref, crit, good), _req(prompt, ref, crit, bad)])
    assert v_good is not None and v_bad is not None
    assert v_good.value > v_bad.value
    assert v_bad.value < 0.5
    assert 0.0 <= v_good.confidence <= 1.0


def test_off_topic_response_fails_every_criterion(backend):
    reqs = [_req(p, r, c, "I enjoy cooking pasta with fresh basil on Sundays.") for p, r, c, _, _ in CASES]
    assert all(v.value < 0.2 for v in backend.grade(reqs))


def test_reference_answer_meets_its_content_criteria(backend):
    # the pirate case is about style ("speaks in dialect"): MiniLM does not see style, a known blind spot
    reqs = [_req(p, r, c, r) for p, r, c, _, _ in CASES[:3]]
    assert all(v.value > 0.5 for v in backend.grade(reqs))


def test_batch_order_and_composition_do_not_change_values(backend):
    reqs = [_req(p, r, c, x) for p, r, c, good, bad in CASES for x in (good, bad)]
    together = [v.value for v in backend.grade(reqs)]
    alone = [backend.grade([q])[0].value for q in reversed(reqs)][::-1]
    assert together == pytest.approx(alone, abs=1e-5)


def test_passages_and_query():
    assert criterion_query("The response should mention the moon") == "Mention the moon"
    assert criterion_query("States that X") == "States that X"
    ps = passages("One. Two. Three.")
    assert ps[:3] == ["One.", "Two.", "Three."] and "One. Two." in ps and "One. Two. Three." in ps
    assert passages("") == ["(empty response)"]


def test_longer_response_never_scores_lower(backend):
    """The known spurious signal: best-passage scores can only grow as a response grows."""
    p, r, c, good, _ = CASES[0]
    short = backend.grade([_req(p, r, c, good)])[0].value
    longer = backend.grade([_req(p, r, c, good + " Also drink water. Exercise daily. Sleep well.")])[0].value
    assert longer >= short - 1e-6


def test_build_judge_default_is_semantic():
    judge = build_judge()
    assert isinstance(judge, RubricJudge) and judge.name == "semantic"


def test_auc_helper():
    assert auc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert auc([0.1, 0.2, 0.9], [1, 1, 0]) == 0.0
    assert auc([0.5, 0.5], [1, 0]) == 0.5


@pytest.mark.timeout(900)  # about 30 s on an idle two-core machine: sized for a loaded one, as the GPU check's run
def test_agreement_with_hand_labels(backend):
    """The embedded judge against the bundled hand-labelled set: better than chance, as docs/benchmarks.md
    ("Measured") reports."""
    labels = load_judge_labels()
    assert len(labels) >= 100
    report = agreement(backend, labels)
    assert report.n == len(labels)
    assert 0 < report.positives < report.n
    assert report.auc > 0.6
    assert report.accuracy > 0.55
