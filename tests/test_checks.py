"""Every programmatic check: passing and failing responses, bounds, options and bad configurations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from harnessrl.data.checks import (
    CHECK_TYPES,
    Contains,
    InstructionFollowing,
    NotContains,
    Regex,
    WordCount,
    count_words,
    parse_check,
    read_check,
    split_sentences,
    words,
)
from harnessrl.data.schema import Criterion


def check(**kw):
    """Build a check the way a rubric row does: a dict told apart by ``type``."""
    return parse_check(kw)


def test_every_check_type_has_a_test_here():
    """A new check type without a test in this file fails here."""
    source = Path(__file__).read_text(encoding="utf-8")
    tested = set(re.findall(r'type="([a-z_]+)"', source))
    untested = sorted(set(CHECK_TYPES) - tested)
    assert not untested, f"check types without tests in {Path(__file__).name}: {untested}"


def test_check_types_names_match_models():
    for name, cls in CHECK_TYPES.items():
        assert cls.model_fields["type"].default == name
    assert len(CHECK_TYPES) == 14


def test_unknown_type_rejected():
    with pytest.raises(ValidationError):
        check(type="wordcount", max=3)
    with pytest.raises(ValidationError):
        check(max=3)


def test_checks_are_frozen_and_forbid_extra_fields():
    c = check(type="word_count", max=3)
    with pytest.raises(ValidationError):
        c.max = 5  # type: ignore[misc]
    with pytest.raises(ValidationError):
        check(type="word_count", max_words=3)


# ------------------------------------------------------------------------------------------ ranges
def test_word_count():
    c = check(type="word_count", min=2, max=4)
    assert c.evaluate("one") == 0.0
    assert c.evaluate("one two") == 1.0  # min is inclusive
    assert c.evaluate("one two three four") == 1.0  # max is inclusive
    assert c.evaluate("one two three four five") == 0.0
    assert c.evaluate("") == 0.0


def test_word_count_tokenisation():
    c = check(type="word_count", max=3)
    # contractions and hyphenated words are one word; punctuation and a lone dash are none
    assert c.evaluate("Don't - well-known, ok!") == 1.0
    assert check(type="word_count", min=4).evaluate("Don't - well-known, ok!") == 0.0


def test_word_count_one_bound_each():
    assert check(type="word_count", max=2).evaluate("") == 1.0
    assert check(type="word_count", min=3).evaluate("a b c d e f g h") == 1.0
    assert check(type="word_count", min=3).evaluate("a b") == 0.0


@pytest.mark.parametrize("name", ["word_count", "sentence_count", "paragraph_count", "char_count", "bullet_count"])
def test_range_bounds_validated(name):
    with pytest.raises(ValidationError, match="needs 'min', 'max' or both"):
        check(type=name)
    with pytest.raises(ValidationError, match="min 5 > max 3"):
        check(type=name, min=5, max=3)
    with pytest.raises(ValidationError):
        check(type=name, min=-1)
    c = check(type=name, min=2, max=2)  # min == max is allowed
    assert c.min == c.max == 2


def test_sentence_count():
    c = check(type="sentence_count", min=2, max=3)
    assert c.evaluate("Tides rise.") == 0.0
    assert c.evaluate("Tides rise. They fall!") == 1.0
    assert c.evaluate("Tides rise. They fall! Why? The Moon.") == 0.0
    # a decimal point or a lower-case word after the dot is not a sentence end
    assert check(type="sentence_count", max=1).evaluate("Pi is 3.14 today. e.g. here.") == 1.0


def test_split_sentences():
    assert split_sentences("Hello there. How are you? I am fine! ok") == [
        "Hello there.",
        "How are you?",
        "I am fine! ok",
    ]
    assert split_sentences("") == []
    assert split_sentences("  \n\n  ") == []
    # every line is its own sentence: bullets and headings too
    assert split_sentences("# Title\n- first point\n- second point. Also this.") == [
        "# Title",
        "- first point",
        "- second point.",
        "Also this.",
    ]
    # closing quotes and brackets stay with their sentence
    assert split_sentences('He said "Stop." Then (he left.) Done') == ['He said "Stop."', "Then (he left.)", "Done"]
    # a number may start a sentence
    assert split_sentences("It ended. 42 remained.") == ["It ended.", "42 remained."]


def test_paragraph_count():
    c = check(type="paragraph_count", min=2, max=2)
    assert c.evaluate("One paragraph\nstill the same one.") == 0.0
    assert c.evaluate("First.\n\nSecond.") == 1.0
    assert c.evaluate("\n\nFirst.\n   \nSecond.\n\n") == 1.0  # whitespace-only lines separate too
    assert c.evaluate("A.\n\nB.\n\nC.") == 0.0
    assert check(type="paragraph_count", max=0).evaluate("   ") == 1.0


def test_char_count():
    c = check(type="char_count", min=3, max=5)
    assert c.evaluate("ab") == 0.0
    assert c.evaluate("abc") == 1.0
    assert c.evaluate("   abcde   \n") == 1.0  # surrounding whitespace does not count
    assert c.evaluate("abcdef") == 0.0


def test_bullet_count():
    c = check(type="bullet_count", min=2, max=3)
    assert c.evaluate("- one") == 0.0
    assert c.evaluate("- one\n* two") == 1.0
    assert c.evaluate("1. one\n2) two\n• three") == 1.0
    assert c.evaluate("- a\n- b\n- c\n- d") == 0.0
    # bold text, a hyphenated word or a number in prose is not a bullet
    assert check(type="bullet_count", max=0).evaluate("**Bold** start\nwell-known\nIn 2024 we") == 1.0
    # indented sub-bullets count
    assert check(type="bullet_count", min=2).evaluate("- top\n  - nested") == 1.0


# ----------------------------------------------------------------------------------------- phrases
def test_contains_all_default():
    c = check(type="contains", phrases=["Moon", "gravity"])
    assert c.mode == "all"
    assert c.evaluate("The moon's GRAVITY pulls.") == 1.0  # case-insensitive by default
    assert c.evaluate("The Moon pulls.") == 0.0


def test_contains_any():
    c = check(type="contains", phrases=["Moon", "gravity"], mode="any")
    assert c.evaluate("The moon pulls.") == 1.0
    assert c.evaluate("The Sun shines.") == 0.0


def test_contains_case_sensitive():
    c = check(type="contains", phrases=["DNA"], case_sensitive=True)
    assert c.evaluate("DNA is a molecule") == 1.0
    assert c.evaluate("dna is a molecule") == 0.0


def test_contains_casefold_handles_unicode():
    assert check(type="contains", phrases=["STRASSE"]).evaluate("die straße") == 1.0


@pytest.mark.parametrize("name", ["contains", "not_contains"])
def test_phrases_validated(name):
    with pytest.raises(ValidationError):
        check(type=name, phrases=[])
    with pytest.raises(ValidationError, match="must not be blank"):
        check(type=name, phrases=["ok", "  "])
    with pytest.raises(ValidationError):
        check(type=name)


def test_contains_bad_mode_rejected():
    with pytest.raises(ValidationError):
        check(type="contains", phrases=["a"], mode="some")


def test_not_contains():
    c = check(type="not_contains", phrases=["As an AI", "delve"])
    assert c.evaluate("Tides come from the Moon.") == 1.0
    assert c.evaluate("Let us DELVE into tides.") == 0.0
    assert c.evaluate("as an ai, I think") == 0.0
    cs = check(type="not_contains", phrases=["As an AI"], case_sensitive=True)
    assert cs.evaluate("as an ai, I think") == 1.0
    assert cs.evaluate("As an AI, I think") == 0.0


# ------------------------------------------------------------------------------------------- regex
def test_regex_must_match():
    c = check(type="regex", pattern=r"\b\d{4}\b")
    assert c.must_match is True
    assert c.evaluate("Founded in 1867.") == 1.0
    assert c.evaluate("Founded long ago.") == 0.0


def test_regex_must_not_match():
    c = check(type="regex", pattern=r"(?i)\bI think\b", must_match=False)
    assert c.evaluate("Tides are caused by the Moon.") == 1.0
    assert c.evaluate("i think tides are lunar.") == 0.0


def test_regex_ignore_case_and_multiline():
    assert check(type="regex", pattern="moon").evaluate("The Moon") == 0.0
    assert check(type="regex", pattern="moon", ignore_case=True).evaluate("The Moon") == 1.0
    text = "Intro\nAnswer: 42"
    assert check(type="regex", pattern=r"^Answer:").evaluate(text) == 1.0  # multiline by default
    assert check(type="regex", pattern=r"^Answer:", multiline=False).evaluate(text) == 0.0


@pytest.mark.parametrize("pattern", ["(a", "[z-a]", "*x"])
def test_invalid_regex_rejected(pattern):
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        check(type="regex", pattern=pattern)


# -------------------------------------------------------------------------------------------- json
def test_json_plain_and_invalid():
    c = check(type="json")
    assert c.evaluate('{"a": 1}') == 1.0
    assert c.evaluate("  [1, 2, 3]\n") == 1.0
    assert c.evaluate('{"a": 1') == 0.0
    assert c.evaluate("Here you go: {}") == 0.0
    assert c.evaluate("") == 0.0


def test_json_in_fence():
    c = check(type="json", required_keys=["answer"])
    assert c.evaluate('```json\n{"answer": 4}\n```') == 1.0
    assert c.evaluate('```\n{"answer": 4}\n```\n') == 1.0
    assert c.evaluate('```json\n{"answer": 4\n```') == 0.0
    # prose around the fence is not one JSON value
    assert c.evaluate('Sure!\n```json\n{"answer": 4}\n```') == 0.0


def test_json_required_keys():
    c = check(type="json", required_keys=["name", "age"])
    assert c.evaluate('{"name": "Ada", "age": 36, "x": 1}') == 1.0
    assert c.evaluate('{"name": "Ada"}') == 0.0
    # a list (even of objects with the keys) has no keys
    assert c.evaluate('[{"name": "Ada", "age": 36}]') == 0.0
    assert c.evaluate('"name age"') == 0.0


# ---------------------------------------------------------------------------------------- markdown
def test_markdown_headings():
    c = check(type="markdown", min_headings=2)
    assert c.evaluate("# Title\ntext\n## Part\nmore") == 1.0
    assert c.evaluate("# Title\ntext") == 0.0
    # a hashtag or seven hashes is not a heading
    assert c.evaluate("#hashtag\n####### too deep") == 0.0


def test_markdown_bullets():
    c = check(type="markdown", min_bullets=2)
    assert c.evaluate("- a\n- b") == 1.0
    assert c.evaluate("- a\nprose") == 0.0


def test_markdown_table():
    c = check(type="markdown", table=True)
    assert c.evaluate("| a | b |\n|---|---|\n| 1 | 2 |") == 1.0
    assert c.evaluate("| a | b |") == 0.0  # one row is not a table
    assert c.evaluate("a | b\n1 | 2") == 0.0


def test_markdown_bold():
    c = check(type="markdown", bold=True)
    assert c.evaluate("This is **key**.") == 1.0
    assert c.evaluate("This is __key__.") == 1.0
    assert c.evaluate("This is ** not bold **.") == 0.0
    assert c.evaluate("Plain *italic* text.") == 0.0


def test_markdown_combined():
    c = check(type="markdown", min_headings=1, min_bullets=1, bold=True)
    assert c.evaluate("# H\n- **point**") == 1.0
    assert c.evaluate("# H\n- point") == 0.0


def test_markdown_must_ask_for_something():
    with pytest.raises(ValidationError, match="asks for nothing"):
        check(type="markdown")
    with pytest.raises(ValidationError):
        check(type="markdown", min_headings=-1)


# ------------------------------------------------------------------------------- starts / ends with
def test_starts_with():
    c = check(type="starts_with", text="Answer:")
    assert c.evaluate("  answer: 42") == 1.0  # stripped, case-insensitive by default
    assert c.evaluate("The answer: 42") == 0.0
    cs = check(type="starts_with", text="Answer:", case_sensitive=True)
    assert cs.evaluate("Answer: 42") == 1.0
    assert cs.evaluate("answer: 42") == 0.0


def test_ends_with():
    c = check(type="ends_with", text="Any questions?")
    assert c.evaluate("Done. ANY QUESTIONS?\n\n") == 1.0
    assert c.evaluate("Any questions? Done.") == 0.0
    cs = check(type="ends_with", text="END", case_sensitive=True)
    assert cs.evaluate("the END") == 1.0
    assert cs.evaluate("the end") == 0.0


@pytest.mark.parametrize("name", ["starts_with", "ends_with"])
def test_starts_ends_need_text(name):
    with pytest.raises(ValidationError):
        check(type=name, text="")


# ------------------------------------------------------------------------------------- letter case
def test_letter_case_lower():
    c = check(type="letter_case", case="lower")
    assert c.evaluate("all lower, with 3 digits & ümlauts!") == 1.0
    assert c.evaluate("One capital") == 0.0


def test_letter_case_upper():
    c = check(type="letter_case", case="upper")
    assert c.evaluate("ALL CAPS 123!") == 1.0
    assert c.evaluate("ALL CAPs") == 0.0


def test_letter_case_without_letters_fails():
    assert check(type="letter_case", case="lower").evaluate("123 !?") == 0.0
    assert check(type="letter_case", case="upper").evaluate("") == 0.0


def test_letter_case_validated():
    with pytest.raises(ValidationError):
        check(type="letter_case", case="title")
    with pytest.raises(ValidationError):
        check(type="letter_case")


def test_one_word_counter_for_checks_detectors_and_the_evolver():
    """The word_count check, the detectors' words feature and the rule-based evolver's limits count alike:
    a pitfall "above N words" is measured in the words the policy's lengths were counted in."""
    from harnessrl.detection.features import word_count
    from harnessrl.interfaces.evidence import FailureView, ProposalEvidence

    text = "Well -- it's a well-known fact: 3 cats, 2 dogs… and  “quotes” !"
    n = count_words(text)
    assert n == len(words(text)) == 11
    failure = FailureView(
        failure_id="f", kind="spurious_length", step=1, task_id="t", domain="d", summary="", interface_hint=""
    )
    assert word_count(text) == n and ProposalEvidence(failure=failure, reference=text).ref_words == n
    check = WordCount(min=n, max=n)
    assert check.evaluate(text) == 1.0 and WordCount(max=n - 1).evaluate(text) == 0.0


# ------------------------------------------------------------------------------------------ ifeval
def test_ifeval_check_grades_with_the_benchmarks_verifier():
    """One id here; tests/test_ifeval_checks.py grades every IFEval and IFBench id."""
    c = check(type="ifeval", instruction_id="punctuation:no_comma")
    assert c.evaluate("No commas here.") == 1.0
    assert c.evaluate("Yes, a comma.") == 0.0
    with pytest.raises(ValidationError, match="unknown instruction id"):
        check(type="ifeval", instruction_id="punctuation:no_commas")


# ------------------------------------------------------------------------------------------ checks as they travel
def test_a_check_built_in_code_is_written_as_one_read_from_a_file():
    """A check the harness builds (``WordCount(max=80)``) carries its ``type`` as a field set, so a rubric edit's
    criterion dumped with the fields set (as events.jsonl writes it) has the tag and loads back; ``written()`` is the
    check as a rubric's ``check`` object: the type first, then the fields given."""
    built, read = WordCount(max=80), check(type="word_count", max=80)
    assert built == read and built.model_fields_set == read.model_fields_set == {"type", "max"}
    crit = Criterion(id="c", text="At most 80 words.", weight=1.0, kind="programmatic", check=built)
    dumped = crit.model_dump(mode="json", exclude_unset=True)
    assert dumped["check"] == {"max": 80, "type": "word_count"}
    assert Criterion.model_validate(dumped) == crit
    assert built.written() == {"type": "word_count", "max": 80}
    assert list(Regex(pattern="!", multiline=False).written()) == ["type", "pattern", "multiline"]
    assert parse_check(built.written()) == built


def test_reading_a_check_from_a_record():
    assert read_check({"type": "contains", "phrases": ["sea"]}) == Contains(phrases=["sea"])
    assert read_check({"type": "contains", "phrases": []}) is None  # no valid check
    assert read_check(None) is None and read_check("word_count") is None
    with pytest.raises(ValueError, match="phrases"):
        parse_check({"type": "contains", "phrases": []})


@pytest.mark.parametrize(
    ("built", "key"),
    [
        (WordCount(max=20), "word_count:max"),
        (WordCount(min=2, max=4), "word_count:min,max"),
        (NotContains(phrases=[","]), "not_contains:[',']"),
        (NotContains(phrases=["sea"]), "not_contains:words"),
        (Contains(phrases=["sea", "ship"]), "contains:words"),
        (Regex(pattern="!"), "regex"),
        (check(type="letter_case", case="lower"), "letter_case:lower"),
        (InstructionFollowing(instruction_id="punctuation:no_comma"), "not_contains:[',']"),
        (InstructionFollowing(instruction_id="startend:quotation"), "ifeval:startend:quotation"),
    ],
)
def test_each_check_names_the_kind_of_requirement_it_states(built, key):
    assert built.requirement_key() == key
