"""Task / Criterion schema: prompts, kinds, weights, rubric soundness, prompt helpers."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from harnessrl.data import ChatMessage, Criterion, Task, prompt_text
from harnessrl.data.checks import Contains, WordCount


def crit(**kw) -> dict:
    return {"id": "c1", "text": "Is concise.", "weight": 1, **kw}


def task(**kw) -> dict:
    return {"id": "t1", "domain": "science", "prompt": "Explain tides.", "rubric": [crit()], **kw}


# ----------------------------------------------------------------------------------------- prompts
def test_text_prompt_and_messages():
    t = Task.model_validate(task())
    assert t.prompt == "Explain tides."
    assert t.messages() == [{"role": "user", "content": "Explain tides."}]
    assert prompt_text(t.prompt) == "Explain tides."


def test_chat_prompt_and_messages():
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Explain tides."},
    ]
    t = Task.model_validate(task(prompt=chat))
    assert all(isinstance(m, ChatMessage) for m in t.prompt)
    assert t.messages() == chat
    assert prompt_text(t.prompt) == "system: Be brief.\nuser: Explain tides."
    # dict turns work the same as ChatMessage turns
    assert prompt_text(chat) == "system: Be brief.\nuser: Explain tides."


def test_single_turn_chat_prompt_text_is_its_content():
    t = Task.model_validate(task(prompt=[{"role": "user", "content": "Hi there"}]))
    assert prompt_text(t.prompt) == "Hi there"
    assert prompt_text([{"role": "user", "content": "Hi there"}]) == "Hi there"


@pytest.mark.parametrize("prompt", ["", "   \n\t"])
def test_blank_text_prompt_rejected(prompt):
    with pytest.raises(ValidationError, match="prompt is empty"):
        Task.model_validate(task(prompt=prompt))


@pytest.mark.parametrize(
    "prompt",
    [
        [],
        [{"role": "system", "content": "Be brief."}],
        [{"role": "user", "content": "   "}],
        [{"role": "assistant", "content": "Hello"}],
    ],
)
def test_chat_prompt_without_user_text_rejected(prompt):
    with pytest.raises(ValidationError, match="no non-empty user message"):
        Task.model_validate(task(prompt=prompt))


def test_chat_prompt_bad_role_rejected():
    with pytest.raises(ValidationError):
        Task.model_validate(task(prompt=[{"role": "robot", "content": "hi"}]))


def test_chat_message_extra_field_rejected():
    with pytest.raises(ValidationError):
        ChatMessage.model_validate({"role": "user", "content": "hi", "name": "x"})


# ------------------------------------------------------------------------------------------ kinds
def test_judged_is_default_kind():
    c = Criterion.model_validate(crit())
    assert c.kind == "judged" and c.check is None and not c.is_pitfall


def test_kind_inferred_from_check():
    c = Criterion.model_validate(crit(check={"type": "word_count", "max": 80}))
    assert c.kind == "programmatic"
    assert isinstance(c.check, WordCount) and c.check.max == 80


def test_check_dispatched_by_type():
    c = Criterion.model_validate(crit(check={"type": "contains", "phrases": ["moon"]}))
    assert isinstance(c.check, Contains)
    assert c.check.evaluate("The Moon pulls.") == 1.0


def test_judged_with_check_rejected():
    with pytest.raises(ValidationError, match="judged criterion has no 'check'"):
        Criterion.model_validate(crit(kind="judged", check={"type": "word_count", "max": 80}))


def test_programmatic_without_check_rejected():
    with pytest.raises(ValidationError, match="programmatic criterion needs a 'check'"):
        Criterion.model_validate(crit(kind="programmatic"))


def test_unknown_kind_rejected():
    with pytest.raises(ValidationError):
        Criterion.model_validate(crit(kind="vibes"))


def test_criterion_text_stripped_and_blank_rejected():
    assert Criterion.model_validate(crit(text="  Names the Moon.  ")).text == "Names the Moon."
    with pytest.raises(ValidationError, match="criterion text is blank"):
        Criterion.model_validate(crit(text="  \n "))


def test_criterion_empty_id_and_extra_field_rejected():
    with pytest.raises(ValidationError):
        Criterion.model_validate(crit(id=""))
    with pytest.raises(ValidationError):
        Criterion.model_validate(crit(priority="high"))


def test_criterion_is_frozen():
    c = Criterion.model_validate(crit())
    with pytest.raises(ValidationError):
        c.weight = 5  # type: ignore[misc]


# ---------------------------------------------------------------------------------------- weights
@pytest.mark.parametrize(("given", "expected"), [(2, 2.0), (0.5, 0.5), ("3", 3.0), ("-1.5", -1.5), (" 2 ", 2.0)])
def test_numeric_weights_accepted(given, expected):
    c = Criterion.model_validate(crit(weight=given))
    assert c.weight == expected
    assert isinstance(c.weight, float)
    assert c.is_pitfall == (expected < 0)


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("heavy", "is not a number"),
        (None, "is not a number"),
        (True, "is not a number"),
        (False, "is not a number"),
        ([1], "is not a number"),
        (float("nan"), "not a finite number"),
        ("nan", "not a finite number"),
        (float("inf"), "not a finite number"),
        ("-inf", "not a finite number"),
        (0, "weight is 0"),
        ("0.0", "weight is 0"),
    ],
)
def test_bad_weights_rejected(given, reason):
    with pytest.raises(ValidationError, match=reason):
        Criterion.model_validate(crit(weight=given))


def test_missing_weight_rejected():
    data = crit()
    del data["weight"]
    with pytest.raises(ValidationError):
        Criterion.model_validate(data)


# ----------------------------------------------------------------------------------------- rubric
def test_empty_rubric_rejected():
    with pytest.raises(ValidationError, match="rubric is empty"):
        Task.model_validate(task(rubric=[]))


def test_rubric_without_positive_weight_rejected():
    rubric = [crit(id="p1", weight=-1), crit(id="p2", weight=-2)]
    with pytest.raises(ValidationError, match="no criterion with a positive weight"):
        Task.model_validate(task(rubric=rubric))


def test_duplicate_criterion_ids_rejected():
    with pytest.raises(ValidationError, match="criterion id 'c1' appears twice"):
        Task.model_validate(task(rubric=[crit(), crit(text="Another.")]))


def test_pitfall_alongside_positive_criterion():
    t = Task.model_validate(task(rubric=[crit(), crit(id="myth", text="Repeats a myth.", weight=-2)]))
    assert [c.is_pitfall for c in t.rubric] == [False, True]


# -------------------------------------------------------------------------------- reference, misc
@pytest.mark.parametrize("ref", [None, "", "   \n"])
def test_blank_reference_is_none(ref):
    assert Task.model_validate(task(reference_answer=ref)).reference_answer is None


def test_reference_kept():
    assert Task.model_validate(task(reference_answer="The Moon.")).reference_answer == "The Moon."


def test_task_extra_field_rejected_and_metadata_free():
    with pytest.raises(ValidationError):
        Task.model_validate(task(source="x"))
    t = Task.model_validate(task(metadata={"source": "x", "n": 3}))
    assert t.metadata == {"source": "x", "n": 3}


@pytest.mark.parametrize("field", ["id", "domain"])
def test_task_empty_id_or_domain_rejected(field):
    with pytest.raises(ValidationError):
        Task.model_validate(task(**{field: ""}))


def test_task_round_trips_through_json():
    t = Task.model_validate(
        task(rubric=[crit(check={"type": "word_count", "min": 3, "max": 9}), crit(id="c2", weight=-1)])
    )
    again = Task.model_validate_json(t.model_dump_json())
    assert again == t
    assert math.isclose(again.rubric[1].weight, -1.0)
