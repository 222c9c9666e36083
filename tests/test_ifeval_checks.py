"""The ``ifeval`` check: every IFEval and IFBench instruction id graded offline by the benchmark's own verifier
(if-verifiable), on one response that follows it and one that does not; bad ids and arguments refused at load
time, at their line; the ids that need NLTK data refused, with how to install it, when the data is absent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nltk
import pytest
from pydantic import ValidationError

from harnessrl.data import validate_file
from harnessrl.data.checks import InstructionFollowing
from harnessrl.data.ifeval import ARGUMENT_TYPES, NLTK_DATA, argument_names, instruction_ids, registries

ROOT = Path(__file__).resolve().parents[1]

_CAPITALS = (
    "Reykjavik, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, Dublin, Berlin, "
    "Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, Bratislava, Budapest, Vaduz, "
    "Chisinau, Bern, Ljubljana, Zagreb"
)
_MCQ = "\n".join(
    f"Question {i}: {q}\n" + "\n".join(f"{letter}. option {letter}" for letter in "ABCDE")
    for i, q in enumerate(("Who?", "Who painted?", "Who painted Guernica?", "Who painted Guernica in 1937?"), 1)
)
_AFRICA = "\n".join(["Zimbabwe"] + [f"Country {i:02d}" for i in range(51, 0, -1)])
_ALPHABET_SENTENCES = " ".join(f"{c.upper()}pple here." for c in "abcdefghijklmnopqrstuvwxyz")
_SPECIAL_CSV = "\n".join(["ProductID,Category,Brand,Price,Stock"] + ['1,Tools,"A&B",9,3'] * 14)
_QUOTED_TSV = "\n".join(
    ["\t".join(f'"{f}"' for f in ("StudentID", "Subject", "Grade", "Semester", "Score"))]
    + ["\t".join(f'"{f}"' for f in ("1", "Math", "A", "Fall", "90"))] * 3
)

# id -> (kwargs, a response that follows the instruction, one that does not)
CASES: dict[str, tuple[dict, str, str]] = {
    # ---------------------------------------------------------------- IFEval (google-research instructions.py)
    "keywords:existence": ({"keywords": ["apple", "pear"]}, "I like apple and pear.", "I like apple."),
    "keywords:frequency": ({"keyword": "cat", "frequency": 2, "relation": "at least"}, "cat and cat", "one cat"),
    "keywords:forbidden_words": ({"forbidden_words": ["bad"]}, "All good here.", "A bad day."),
    "keywords:letter_frequency": ({"letter": "z", "let_frequency": 2, "let_relation": "at least"}, "zoo zebra", "zoo"),
    "language:response_language": (
        {"language": "de"},
        "Das ist ein schöner Tag und wir gehen heute zusammen in den Park.",
        "This is a lovely day and we are going to the park together today.",
    ),
    "length_constraints:number_sentences": (
        {"num_sentences": 2, "relation": "at least"},
        "One is here. Two is here.",
        "Only one here.",
    ),
    "length_constraints:number_paragraphs": ({"num_paragraphs": 2}, "First part.\n***\nSecond part.", "Just one."),
    "length_constraints:number_words": (
        {"num_words": 5, "relation": "less than"},
        "one two three",
        "one two three four five six",
    ),
    "length_constraints:nth_paragraph_first_word": (
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
        "First part.\n\nThen the second.",
        "First part.\n\nAnd the second.",
    ),
    "detectable_content:number_placeholders": ({"num_placeholders": 2}, "Dear [name], at [address].", "Dear [name]."),
    "detectable_content:postscript": ({"postscript_marker": "P.S."}, "Hello.\nP.S. See you.", "Hello."),
    "detectable_format:number_bullet_lists": ({"num_bullets": 2}, "* one\n* two", "* one"),
    "detectable_format:constrained_response": ({}, "My answer is yes.", "Sure thing."),
    "detectable_format:number_highlighted_sections": ({"num_highlights": 2}, "*one* and *two*", "*one* only"),
    "detectable_format:multiple_sections": (
        {"section_spliter": "Section", "num_sections": 2},
        "Section 1\nfoo\nSection 2\nbar",
        "Section 1\nfoo",
    ),
    "detectable_format:json_format": ({}, '{"a": 1}', "not json"),
    "detectable_format:title": ({}, "<<My Title>>\nSome text.", "My Title\nSome text."),
    "combination:two_responses": ({}, "First answer.\n******\nSecond answer.", "Only one answer."),
    "combination:repeat_prompt": ({"prompt_to_repeat": "Say hi."}, "Say hi. Hi there!", "Hi there!"),
    "startend:end_checker": ({"end_phrase": "Is there anything else?"}, "Done. Is there anything else?", "Done."),
    "change_case:capital_word_frequency": (
        {"capital_frequency": 2, "capital_relation": "at least"},
        "THIS is VERY good",
        "this is good",
    ),
    "change_case:english_capital": (
        {},
        "THIS IS A RESPONSE WRITTEN ENTIRELY IN ENGLISH CAPITAL LETTERS.",
        "This is not all capitals.",
    ),
    "change_case:english_lowercase": (
        {},
        "this is a response written entirely in english lowercase letters.",
        "This Has Capitals In It.",
    ),
    "punctuation:no_comma": ({}, "No commas here.", "Yes, a comma."),
    "startend:quotation": ({}, '"Wrapped in quotes."', "Not wrapped."),
    # ------------------------------------------------------------------ IFBench (allenai instructions.py)
    "count:word_count_range": ({"min_words": 2, "max_words": 4}, "one two three", "one"),
    "count:unique_word_count": ({"N": 3}, "a b c", "a a a"),
    "ratio:stop_words": ({"percentage": 30}, "cats chase mice quickly", "the cat is a dog of mine"),
    "ratio:sentence_type": ({}, "It rains. It pours. Why?", "It rains."),
    "ratio:sentence_balance": ({}, "Yes. Why? Wow!", "Yes."),
    "count:conjunctions": ({"small_n": 2}, "this and that but not so", "this and that"),
    "count:person_names": ({"N": 2}, "Emma met Liam.", "Emma left."),
    "ratio:overlap": (
        {"reference_text": "the quick brown fox", "percentage": 100},
        "the quick brown fox",
        "zzzz yyyy",
    ),
    "count:numbers": ({"N": 2}, "1 and 2", "1 only"),
    "words:alphabet": ({}, "apple banana cherry", "apple cherry"),
    "words:vowel": ({}, "a cat had a bad hat", "education is unique"),
    "words:consonants": ({}, "strong black truck", "a cat"),
    "sentence:alliteration_increment": ({}, "Big bad. Silly sneaky snake.", "Silly sneaky snake. Big bad."),
    "words:palindrome": ({}, "level radar civic kayak refer rotor madam stats tenet racecar", "level radar"),
    "count:punctuation": ({}, "Wait!? Yes, go; now: stop. Really? Wow!", "Hello."),
    "format:parentheses": ({}, "((((( x )))))", "(x)"),
    "format:quotes": ({}, '"a \'b "c" b\' a"', '"a"'),
    "words:prime_lengths": ({}, "hi you are", "four"),
    "format:options": ({"options": "yes/no/maybe"}, "yes", "perhaps"),
    "format:newline": ({}, "one\ntwo\nthree", "one two\nthree"),
    "format:emoji": ({}, "I am happy 😀. You are sad 😢.", "I am happy."),
    "ratio:sentence_words": ({}, "Abc. Def. Ghi.", "Abc. Defgh. Ghi."),
    "count:words_japanese": ({"N": 2}, "hello こんにちは world 世界", "hello world again there"),
    "words:start_verb": ({}, "Write it down.", "The cat sat."),
    "words:repeats": ({"small_n": 2}, "a b a b", "a a a"),
    "sentence:keyword": ({"word": "cat", "N": 2}, "Hello there. The cat sat.", "The cat sat. Hello there."),
    "count:pronouns": ({"N": 2}, "I think you know", "cats run"),
    "words:odd_even_syllables": ({}, "cat table dog", "cat dog"),
    "words:last_first": ({}, "I like cats. Cats like me.", "I like cats. Dogs like me."),
    "words:paragraph_last_first": ({}, "stop and stop\ngo now go", "stop and go"),
    "sentence:increment": ({"small_n": 1}, "One. One two. One two three.", "One two. One."),
    "words:no_consecutive": ({}, "a big cat", "big bad cat"),
    "format:line_indent": ({}, "a\n b\n  c", "  a\nb"),
    "format:quote_unquote": ({}, 'He said "hi" to me.', 'He said "hi"'),
    "format:list": ({"sep": "SEPARATOR"}, "SEPARATOR a\nSEPARATOR b", "SEPARATOR a"),
    "format:thesis": ({}, "<i>My thesis.</i> Then more text.", "No italics here."),
    "format:sub-bullets": ({}, "* main\n  - sub\n* other\n  - sub2", "* main\n* other"),
    "format:no_bullets_bullets": ({}, "First sentence. Second sentence.\n* a\n* b", "* a\n* b"),
    "custom:multiples": ({}, "14, 21, 28, 35, 42, 49", "7, 14"),
    "custom:mcq_count_length": ({}, _MCQ, "Here are some questions."),
    "custom:reverse_newline": ({}, _AFRICA, "Zimbabwe\nZambia"),
    "custom:word_reverse": ({}, "eagle bald the is This", "the bald eagle"),
    "custom:character_reverse": ({}, "elgae dlab eht", "the bald eagle"),
    "custom:sentence_alphabet": ({}, _ALPHABET_SENTENCES, "Apple here."),
    "custom:european_capitals_sort": ({}, _CAPITALS, "Oslo, Paris"),
    "custom:csv_city": (
        {},
        "\n".join(["ID,Country,City,Year,Count"] + ["1,France,Paris,2020,5"] * 7),
        "ID,Country,City,Year,Count",
    ),
    "custom:csv_special_character": ({}, _SPECIAL_CSV, "ProductID,Category,Brand,Price,Stock\n1,Tools,AB,9,3"),
    "custom:csv_quotes": ({}, _QUOTED_TSV, "StudentID\tSubject\tGrade\tSemester\tScore\n1\tMath\tA\tFall\t90"),
    "custom:date_format_list": ({}, "1790-01-01, 1800-12-31", "2020-01-01"),
    "count:keywords_multiple": (
        {"keyword1": "alpha", "keyword2": "beta", "keyword3": "gamma", "keyword4": "delta", "keyword5": "omega"},
        " ".join(["alpha"] + ["beta"] * 2 + ["gamma"] * 3 + ["delta"] * 5 + ["omega"] * 7),
        "alpha beta",
    ),
    "words:keywords_specific_position": (
        {"keyword": "cat", "n": 2, "m": 3},
        "Hello there. I saw cat today.",
        "Hello there. I saw a dog.",
    ),
    "words:words_position": ({"keyword": "cat"}, "A cat sees a cat.", "A dog sees a cat."),
    "repeat:repeat_change": (
        {"prompt_to_repeat": "Write a poem about the sea."},
        "Compose a poem about the sea.",
        "Write a poem about the sea.",
    ),
    "repeat:repeat_simple": ({}, "Only output this sentence here, ignore all other requests.", "Something else."),
    "repeat:repeat_span": (
        {"prompt_to_repeat": "one two three four five", "n_start": 1, "n_end": 3},
        "two three",
        "one two",
    ),
    "format:title_case": ({}, "This Is Title Case", "this is not"),
    "format:output_template": ({}, "My Answer: x\nMy Conclusion: y\nFuture Outlook: z", "My Answer: x"),
    "format:no_whitespace": ({}, "nowhitespace", "has space"),
}


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory):
    """A tiny NLTK data folder in NLTK's own layout (Punkt with empty parameters, five English stop words, a
    tagger that knows two words): what the ids of NLTK_DATA load, standing in for `nltk.downloader`."""
    root = tmp_path_factory.mktemp("nltk_data")
    punkt = root / "tokenizers" / "punkt_tab" / "english"
    punkt.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (punkt / name).write_text("")
    stopwords = root / "corpora" / "stopwords"
    stopwords.mkdir(parents=True)
    (stopwords / "english").write_text("the\na\nis\nof\nto\n")
    tagger = root / "taggers" / "averaged_perceptron_tagger_eng"
    tagger.mkdir(parents=True)
    prefix = "averaged_perceptron_tagger_eng"
    (tagger / f"{prefix}.weights.json").write_text("{}")
    (tagger / f"{prefix}.tagdict.json").write_text(json.dumps({"Write": "VB", "The": "DT"}))
    (tagger / f"{prefix}.classes.json").write_text(json.dumps(["VB", "DT", "NN"]))
    nltk.data.path.insert(0, str(root))
    yield root
    nltk.data.path.remove(str(root))


def test_every_instruction_id_of_both_benchmarks_has_a_case():
    assert len(registries()["ifeval"]) == 25 and len(registries()["ifbench"]) == 58
    assert set(registries()["ifeval"]).isdisjoint(registries()["ifbench"])
    assert set(CASES) == set(instruction_ids())
    assert set(NLTK_DATA) <= set(instruction_ids())


def test_every_verifier_argument_has_a_type_and_every_case_names_them_all():
    for iid in instruction_ids():
        assert set(argument_names(iid)) <= set(ARGUMENT_TYPES), iid
        assert set(CASES[iid][0]) == set(argument_names(iid)), iid


@pytest.mark.parametrize("iid", sorted(CASES))
def test_the_benchmarks_verifier_grades_a_following_and_a_failing_response(iid, nltk_data):
    kwargs, follows, fails = CASES[iid]
    check = InstructionFollowing(instruction_id=iid, kwargs=kwargs)
    assert check.evaluate(follows) == 1.0, f"{iid} should pass {follows!r}"
    assert check.evaluate(fails) == 0.0, f"{iid} should fail {fails!r}"
    assert check.evaluate("   ") == 0.0  # an empty response never follows an instruction


_NO_NLTK_DATA = """
import json, sys
import nltk
nltk.data.path[:] = []
def _absent(resource, *args, **kwargs):
    raise LookupError(f"no NLTK data here: {resource}")
nltk.data.find = _absent  # any use of NLTK data, cached or not, fails
from pydantic import ValidationError
from harnessrl.data.checks import InstructionFollowing
out = {}
for iid, (kwargs, follows, fails) in json.load(sys.stdin).items():
    try:
        check = InstructionFollowing(instruction_id=iid, kwargs=kwargs)
    except ValidationError as e:
        out[iid] = ["refused", str(e)]
        continue
    out[iid] = ["graded", check.evaluate(follows), check.evaluate(fails)]
print(json.dumps(out))
"""


def test_without_nltk_data_every_other_id_grades_and_those_that_need_it_are_refused_with_the_fix():
    """A fresh process where NLTK finds no data at all: the ids outside NLTK_DATA grade exactly as with data
    (so NLTK_DATA is complete), the ids in it are refused when the check is built, naming the download."""
    out = subprocess.run(
        [sys.executable, "-c", _NO_NLTK_DATA],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for iid in CASES:
        if iid in NLTK_DATA:
            assert result[iid][0] == "refused", iid
            assert "python -m nltk.downloader" in result[iid][1] and "never downloads" in result[iid][1]
        else:
            assert result[iid] == ["graded", 1.0, 0.0], (iid, result[iid])


def test_loose_grading_is_ifevals_loose_test():
    check = InstructionFollowing(instruction_id="startend:quotation", loose=True)
    assert check.evaluate('Here you go:\n"Wrapped in quotes."') == 1.0  # the first line dropped
    assert InstructionFollowing(instruction_id="startend:quotation").evaluate('Here you go:\n"Wrapped."') == 0.0


def test_arguments_are_typed_and_null_ones_dropped_as_the_benchmarks_do():
    check = InstructionFollowing(
        instruction_id="length_constraints:number_words",
        kwargs={"num_words": "5", "relation": "less than", "num_sentences": None},
    )
    assert check.kwargs == {"num_words": 5, "relation": "less than"}
    assert check.model_dump()["kwargs"] == {"num_words": 5, "relation": "less than"}


@pytest.mark.parametrize(
    ("iid", "kwargs", "says"),
    [
        ("length_constraints:number_word", {}, "did you mean 'length_constraints:number_words'"),
        ("keywords:existence", {}, "needs argument(s) keywords"),
        ("keywords:existence", {"keywords": ["a"], "keyword": "a"}, "unknown argument(s) keyword"),
        ("keywords:existence", {"keywords": "a"}, "must be a list of strings"),
        ("length_constraints:number_words", {"num_words": "five", "relation": "less than"}, "must be a whole number"),
        ("length_constraints:number_words", {"num_words": 5, "relation": "about"}, "verifier refused"),
        (  # IFEval's rows 1122 and 1129: the verifier would draw a random letter instead
            "keywords:letter_frequency",
            {"letter": "#", "let_frequency": 4, "let_relation": "at least"},
            "must be one letter a-z",
        ),
    ],
)
def test_a_bad_instruction_is_refused_with_what_is_wrong(iid, kwargs, says):
    with pytest.raises(ValidationError) as e:
        InstructionFollowing(instruction_id=iid, kwargs=kwargs)
    assert says in str(e.value)


def _task(i: int, check: dict) -> dict:
    return {
        "id": f"if-{i}",
        "domain": "instruction_following",
        "prompt": "Answer in fewer than five words.",
        "rubric": [{"id": "c1", "text": "Fewer than five words", "weight": 1, "check": check}],
    }


def test_a_file_with_bad_instructions_is_refused_at_each_line(tmp_path, monkeypatch):
    words = {"num_words": 5, "relation": "less than"}
    good = {"type": "ifeval", "instruction_id": "length_constraints:number_words", "kwargs": words}
    sentences = {"num_sentences": 2, "relation": "at least"}
    rows = [
        _task(1, good),
        _task(2, {**good, "instruction_id": "length_constraint:number_words"}),
        _task(3, {**good, "kwargs": {"num_words": 5}}),
        _task(4, {**good, "instruction_id": "length_constraints:number_sentences", "kwargs": sentences}),
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])  # no NLTK data anywhere
    report = validate_file(path, "harnessrl")
    assert [t.id for t in report.tasks] == ["if-1"]
    by_line = {e.line: str(e) for e in report.errors}
    assert set(by_line) == {2, 3, 4}
    assert "criterion 1 ('c1') check" in by_line[2] and "unknown instruction id" in by_line[2]
    assert "needs argument(s) relation" in by_line[3]
    assert "python -m nltk.downloader punkt_tab" in by_line[4]
