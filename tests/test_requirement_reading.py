"""stated_requirements: what a prompt states, read as exact checks (harnessrl/interfaces/induction.py), and a
check's requirement_key(), the kind of requirement it states; measured on IFEval's labelled prompts
(tests/data/ifeval_input_data.jsonl, scored by benchmarks/requirement_reading.py). The checks are compared as
written (a rubric's ``check`` object, as the audit's event writes it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import load_script

from harnessrl.data.checks import InstructionFollowing, parse_check
from harnessrl.interfaces.induction import stated_requirements

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "requirement_reading.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def checks(prompt: str) -> list[dict]:
    """The checks the prompt states, as written."""
    return [c.written() for c, _ in stated_requirements(prompt)]


def requirement_key(check: dict) -> str:
    """The requirement key of a check written as JSON; an IFEval check is left unbuilt (its key reads only its id
    and arguments, and some verifiers need NLTK data that is absent here)."""
    if check["type"] == "ifeval":
        return InstructionFollowing.model_construct(**check).requirement_key()
    return parse_check(check).requirement_key()


def ifeval(iid: str, **kwargs) -> dict:
    return {"type": "ifeval", "instruction_id": iid, "kwargs": kwargs}


REQUEST = "Write an email to my boss telling him that I am quitting."
CASES = [
    # the misses the reading used to have
    ("Write a riddle. Do not use any commas.", {"type": "not_contains", "phrases": [","]}),
    (
        "Write a riddle about auspices but make sure you don't use any commas.",
        {"type": "not_contains", "phrases": [","]},
    ),
    (
        "Write a poem. You are not allowed to use any commas in your response.",
        {"type": "not_contains", "phrases": [","]},
    ),
    ("Write a poem. Wrap your entire response with double quotation marks.", ifeval("startend:quotation")),
    ("Write a poem. Put double quotation marks around your entire response.", ifeval("startend:quotation")),
    (
        f"{REQUEST}\nFirst repeat the request word for word without change, then give your answer (1. do not say "
        "any words or characters before repeating the request; 2. the request you need to repeat does not include "
        "this sentence)",
        ifeval("combination:repeat_prompt", prompt_to_repeat=REQUEST),
    ),
    (
        f"First repeat the request below word for word without change, then give your answer. Do not say any "
        f"words or characters before repeating the request. {REQUEST}",
        ifeval("combination:repeat_prompt", prompt_to_repeat=REQUEST),
    ),
    (
        'Write a haiku about a lion that includes the keywords "forests" and "riddle".',
        {"type": "contains", "phrases": ["forests", "riddle"]},
    ),
    ("Include keywords lamp, storm in the response.", {"type": "contains", "phrases": ["lamp", "storm"]}),
    ("Write a short blog post about a trip to Japan using less than 300 words.", {"type": "word_count", "max": 299}),
    ("Respond with at most 150 words.", {"type": "word_count", "max": 150}),
    ("Use no more than 149 words.", {"type": "word_count", "max": 149}),
    (
        "Write a blog post with 400 or more words about hammocks.",
        ifeval("length_constraints:number_words", num_words=400, relation="at least"),
    ),
    ("Write at least 1,000 words.", ifeval("length_constraints:number_words", num_words=1000, relation="at least")),
    # the project's own bench prompts
    ("In at most 20 words, explain why leaves are green.", {"type": "word_count", "max": 20}),
    ("Describe a sunny day in one sentence, without using any commas.", {"type": "sentence_count", "max": 1}),
    ("What is a volcano? Begin your answer with 'A volcano'.", {"type": "starts_with", "text": "A volcano"}),
    ("What is the capital of France? Reply in the form 'ANSWER: <city>'.", {"type": "starts_with", "text": "ANSWER:"}),
    ("Write a short sentence that uses the word 'sun'.", {"type": "contains", "phrases": ["sun"]}),
    # the other kinds
    ("Answer in all lowercase letters. No capital letters are allowed.", {"type": "letter_case", "case": "lower"}),
    (
        "Your entire response should be in English, and in all capital letters.",
        {"type": "letter_case", "case": "upper"},
    ),
    ("Please use JSON format.", {"type": "json"}),
    ("Your answer must contain exactly 3 bullet points.", {"type": "bullet_count", "min": 3, "max": 3}),
    (
        'End your entire response with the exact phrase "Is there anything else I can help with?"',
        {"type": "ends_with", "text": "Is there anything else I can help with?"},
    ),
    ("End your response with the exact question: Is it?", {"type": "ends_with", "text": "Is it?"}),
    (
        'The word "rock" should not appear in your response.',
        ifeval("keywords:forbidden_words", forbidden_words=["rock"]),
    ),
    (
        "Do not mention the word Taylor, Swift, or Together.",
        ifeval("keywords:forbidden_words", forbidden_words=["Taylor", "Swift", "Together"]),
    ),
    (
        "Make sure to use the word war at least 8 times.",
        ifeval("keywords:frequency", keyword="war", frequency=8, relation="at least"),
    ),
    (
        "The word 'future' should appear at most once.",
        ifeval("keywords:frequency", keyword="future", frequency=2, relation="less than"),
    ),
    (
        "In your entire response, the letter t should appear at most once.",
        ifeval("keywords:letter_frequency", letter="t", let_frequency=2, let_relation="less than"),
    ),
    (
        'Do not include the letter "c" anywhere in your response.',
        ifeval("keywords:letter_frequency", letter="c", let_frequency=1, let_relation="less than"),
    ),
    (
        "The email must contain a title wrapped in double angular brackets, i.e. <<title>>.",
        ifeval("detectable_format:title"),
    ),
    (
        "Give exactly two different responses separated by 6 asterisk symbols ******.",
        ifeval("combination:two_responses"),
    ),
    (
        "Write a story of exactly 2 paragraphs. Separate the paragraphs with the markdown divider: ***",
        ifeval("length_constraints:number_paragraphs", num_paragraphs=2),
    ),
    (
        'Your file should have 4 sections, and each section should start with "SECTION X".',
        ifeval("detectable_format:multiple_sections", section_spliter="SECTION", num_sections=4),
    ),
    (
        "Write exactly 4 paragraphs. Use 2 new lines to separate paragraphs. Start the 4th paragraph with the word "
        '"elm".',
        ifeval("length_constraints:nth_paragraph_first_word", num_paragraphs=4, nth_paragraph=4, first_word="elm"),
    ),
    (
        "Include at least 7 placeholders represented by square brackets, such as [location].",
        ifeval("detectable_content:number_placeholders", num_placeholders=7),
    ),
    (
        "Highlight at least 3 sections with markdown, i.e. *highlighted section*.",
        ifeval("detectable_format:number_highlighted_sections", num_highlights=3),
    ),
    (
        "Please respond using only the Kannada language, no other language is allowed.",
        ifeval("language:response_language", language="kn"),
    ),
    (
        "At the end of your response, please explicitly add a postscript starting with P.P.S",
        ifeval("detectable_content:postscript", postscript_marker="P.P.S"),
    ),
    (
        'Your answer must contain one of the following exact phrases: "My answer is yes.", "My answer is no.", '
        '"My answer is maybe."',
        ifeval("detectable_format:constrained_response"),
    ),
]


PARAPHRASES = [  # phrasings written by hand, not taken from IFEval's prompts
    ("Commas are not allowed.", {"type": "not_contains", "phrases": [","]}),
    ("Don't use any capital letters.", {"type": "letter_case", "case": "lower"}),
    ("Respond in capital letters only.", {"type": "letter_case", "case": "upper"}),
    ("Keep it below 50 words.", {"type": "word_count", "max": 49}),
    ("Limit your answer to 80 words.", {"type": "word_count", "max": 80}),
    (
        "It should be longer than 299 words.",
        ifeval("length_constraints:number_words", num_words=300, relation="at least"),
    ),
    (
        "Make sure 'leaf' appears at least 4 times.",
        ifeval("keywords:frequency", keyword="leaf", frequency=4, relation="at least"),
    ),
    (
        'Mention "leaf" no less than 4 times.',
        ifeval("keywords:frequency", keyword="leaf", frequency=4, relation="at least"),
    ),
    ("Exclude the word 'cheese'.", ifeval("keywords:forbidden_words", forbidden_words=["cheese"])),
    (
        "The words lamp and storm should not appear.",
        ifeval("keywords:forbidden_words", forbidden_words=["lamp", "storm"]),
    ),
    (
        'The words "oolong" and "matcha" must appear in your answer.',
        {"type": "contains", "phrases": ["oolong", "matcha"]},
    ),
    ('Your final sentence must be "Peace out."', {"type": "ends_with", "text": "Peace out."}),
    (
        "Finish your response with this exact phrase Any other questions?. No other words should follow.",
        {"type": "ends_with", "text": "Any other questions?"},
    ),
    ("Please include a P.S. at the end.", ifeval("detectable_content:postscript", postscript_marker="P.S.")),
    ("The whole response must be in the Spanish language.", ifeval("language:response_language", language="es")),
    ("Separate your 4 paragraphs with * * *.", ifeval("length_constraints:number_paragraphs", num_paragraphs=4)),
    (
        "Organize the answer into 3 parts, labeled Part X.",
        ifeval("detectable_format:multiple_sections", section_spliter="Part", num_sections=3),
    ),
    ("Use exactly 2 bullets.", {"type": "bullet_count", "min": 2, "max": 2}),
    (
        "Repeat the following request exactly as given, then answer it: Write a limerick about a cat.",
        ifeval("combination:repeat_prompt", prompt_to_repeat="Write a limerick about a cat."),
    ),
]
CASES += PARAPHRASES


@pytest.mark.parametrize(("prompt", "expected"), CASES, ids=[f"{i}-{c['type']}" for i, (_, c) in enumerate(CASES)])
def test_a_stated_requirement_is_read_as_its_check(prompt, expected):
    found = checks(prompt)
    assert expected in found, found
    for check, text in stated_requirements(prompt):
        assert parse_check(check.written()) == check  # every check reads back as written
        assert text and len(text) < 120 and "\n" not in text  # a short criterion sentence


def test_the_bench_prompts_read_as_before():
    assert checks("Describe a sunny day in one sentence, without using any commas.") == [
        {"type": "not_contains", "phrases": [","]},
        {"type": "sentence_count", "max": 1},
    ]
    assert checks("In at most 20 words, explain why leaves are green.") == [{"type": "word_count", "max": 20}]
    assert checks("What is gravity? Begin your answer with 'Gravity'.") == [{"type": "starts_with", "text": "Gravity"}]
    assert checks("List three fruits as bullet points, and nothing else.") == []
    assert checks("What is 7391 multiplied by 58? Reply with the number only.") == []
    assert checks("Tell me about the sea.") == []


def test_a_forbidden_word_is_never_also_required():
    """ "Do not include the word X" used to become a ``contains`` check beside the ``not_contains`` one."""
    found = checks('Write a song about rocks. Do not include the word "rock" in your response.')
    assert found == [ifeval("keywords:forbidden_words", forbidden_words=["rock"])]
    found = checks('Include the word "sea". Do not use the words "sea" or "ship".')
    assert not any(c["type"] == "contains" for c in found), found
    assert ifeval("keywords:forbidden_words", forbidden_words=["sea", "ship"]) in found


def test_counted_capital_words_are_not_a_letter_case():
    for prompt in (
        "Use words with all capital letters to highlight key abilities, but less than 10 times.",
        "Include some words in all capital letters, 5 to 10 such capitalized words.",
        "Respond with at least 20 sentences and have more than 4 words be in all capital letters.",
    ):
        assert not [c for c in checks(prompt) if c["type"] in ("letter_case", "word_count")], prompt
    assert checks("Use all capital letters; not a single word should contain lowercase letters.") == [
        {"type": "letter_case", "case": "upper"}
    ]


def test_no_two_findings_contradict_each_other(bench):
    """On every IFEval prompt: one letter case at most, no word both required and forbidden, word bounds that an
    answer can meet, and every check builds."""
    for row in bench.load():
        found = checks(row["prompt"])
        cases = {c["case"] for c in found if c["type"] == "letter_case"}
        assert len(cases) <= 1, row["key"]
        required = {w.casefold() for c in found if c["type"] == "contains" for w in c["phrases"]}
        forbidden = {w.casefold() for c in found if c["type"] == "not_contains" for w in c["phrases"]}
        forbidden |= {
            w.casefold()
            for c in found
            if c.get("instruction_id") == "keywords:forbidden_words"
            for w in c["kwargs"]["forbidden_words"]
        }
        assert not required & forbidden, row["key"]
        most = [c["max"] for c in found if c["type"] == "word_count"]
        least = [c["kwargs"]["num_words"] for c in found if requirement_key(c) == "word_count:min"]
        assert not most or not least or max(least) <= min(most), row["key"]
        assert len(found) == len({str(c) for c in found}), row["key"]


# ----------------------------------------------------------------------------------------------- requirement_key

EQUIVALENT = [  # a native check and the IFEval check that states the same requirement
    ({"type": "not_contains", "phrases": [","]}, ifeval("punctuation:no_comma")),
    ({"type": "word_count", "max": 99}, ifeval("length_constraints:number_words", num_words=100, relation="less than")),
    ({"type": "word_count", "min": 300}, ifeval("length_constraints:number_words", num_words=300, relation="at least")),
    (
        {"type": "sentence_count", "max": 4},
        ifeval("length_constraints:number_sentences", num_sentences=5, relation="less than"),
    ),
    (
        {"type": "sentence_count", "min": 5},
        ifeval("length_constraints:number_sentences", num_sentences=5, relation="at least"),
    ),
    ({"type": "letter_case", "case": "lower"}, ifeval("change_case:english_lowercase")),
    ({"type": "letter_case", "case": "upper"}, ifeval("change_case:english_capital")),
    ({"type": "json"}, ifeval("detectable_format:json_format")),
    ({"type": "ends_with", "text": "Bye."}, ifeval("startend:end_checker", end_phrase="Bye.")),
    ({"type": "bullet_count", "min": 3, "max": 3}, ifeval("detectable_format:number_bullet_lists", num_bullets=3)),
    ({"type": "contains", "phrases": ["sea", "ship"]}, ifeval("keywords:existence", keywords=["sea", "ship"])),
    (
        {"type": "contains", "phrases": ["sea"]},
        ifeval("keywords:frequency", keyword="sea", frequency=1, relation="at least"),
    ),
    ({"type": "not_contains", "phrases": ["sea"]}, ifeval("keywords:forbidden_words", forbidden_words=["sea"])),
    (
        {"type": "not_contains", "phrases": ["sea"]},
        ifeval("keywords:frequency", keyword="sea", frequency=1, relation="less than"),
    ),
]


@pytest.mark.parametrize(("native", "benchmark"), EQUIVALENT, ids=[b["instruction_id"] for _, b in EQUIVALENT])
def test_a_native_check_and_its_ifeval_twin_have_one_key(native, benchmark):
    assert requirement_key(native) == requirement_key(benchmark)


def test_requirement_keys_tell_kinds_apart():
    keys = {
        requirement_key(c)
        for c in (
            {"type": "not_contains", "phrases": [","]},
            {"type": "not_contains", "phrases": [";"]},
            {"type": "not_contains", "phrases": ["sea"]},
            {"type": "word_count", "max": 20},
            ifeval("length_constraints:number_words", num_words=300, relation="at least"),
            ifeval("keywords:frequency", keyword="sea", frequency=3, relation="at least"),
            ifeval("startend:quotation"),
            ifeval("combination:repeat_prompt", prompt_to_repeat="Hi."),
        )
    }
    assert len(keys) == 8
    assert requirement_key(ifeval("keywords:frequency", keyword="a", frequency=3, relation="at least")) == (
        "ifeval:keywords:frequency"
    )


def test_every_emitted_check_keys_as_the_ifeval_instructions_it_states(bench):
    """For each check the reading emits on IFEval's prompts, the key of the native check equals the key of each
    IFEval instruction it states (the benchmark's table), so a rubric's native check and an IFEval check of one
    requirement are found the same."""
    seen = set()
    for row in bench.load():
        for check in checks(row["prompt"]):
            key, stated = requirement_key(check), bench.as_instructions(parse_check(check)) or []
            if not stated:
                continue  # starts_with: no IFEval instruction states it
            if len(stated) == 1:
                assert requirement_key(ifeval(stated[0][0], **stated[0][1])) == key, check
            else:  # a range (a native min and max) states one IFEval instruction per bound: each is part of it
                kind, bounds = key.split(":")
                assert all(
                    requirement_key(ifeval(iid, **kwargs)) in {f"{kind}:{b}" for b in bounds.split(",")}
                    for iid, kwargs in stated
                ), check
            seen.add(requirement_key(check))
    assert {"not_contains:[',']", "word_count:max", "word_count:min", "contains:words", "not_contains:words"} <= seen
    assert "ifeval:combination:repeat_prompt" in seen and "ifeval:startend:quotation" in seen


# ----------------------------------------------------------------------------------------------- on IFEval

HELD_OUT_RECALL = 0.886  # reached: 367/414 (benchmarks/results/requirement-reading/results.md)
HELD_OUT_PRECISION = 0.951  # reached: 367/386
MARGIN = 0.015


def test_the_committed_ifeval_file_is_whole(bench):
    rows = bench.load()
    assert len(rows) == 541 and len({r["key"] for r in rows}) == 541
    assert all(len(r["instruction_id_list"]) == len(r["kwargs"]) for r in rows)


def test_recall_and_precision_on_the_held_out_half_do_not_regress(bench):
    """The rules were tuned on IFEval's even keys; the odd keys are held out (benchmarks/requirement_reading.py)."""
    result = bench.score(bench.split(bench.load())["held-out (odd key)"])
    assert result["labels"] == 414
    assert result["recall"] >= HELD_OUT_RECALL - MARGIN, result["recall"]
    assert result["precision"] >= HELD_OUT_PRECISION - MARGIN, result["precision"]
