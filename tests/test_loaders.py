"""Loaders: our JSONL, the RaR layout (JSONL and parquet), `datasets` tables, and every validation error."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harnessrl.data import Task, load_hf_dataset, load_tasks, validate_file
from harnessrl.data.checks import CHECK_TYPES, WordCount
from harnessrl.errors import DataValidationError, HarnessRLError, RowError


def crit(**kw) -> dict:
    return {"id": "c1", "text": "Names the Moon as the main cause.", "weight": 2, **kw}


def row(**kw) -> dict:
    return {
        "id": "t1",
        "domain": "science",
        "prompt": "Why are there tides?",
        "reference_answer": "Mostly the Moon's gravity.",
        "rubric": [crit()],
        **kw,
    }


def write_jsonl(path: Path, rows: list) -> Path:
    """Rows as JSON lines; a str row is written as-is (for broken lines)."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def one_error(tmp_path: Path, rows: list) -> RowError:
    report = validate_file(write_jsonl(tmp_path / "tasks.jsonl", rows))
    assert len(report.errors) == 1, [str(e) for e in report.errors]
    return report.errors[0]


def rar_row(**kw) -> dict:
    rubric = [
        {"title": "Essential: cause", "description": "Essential Criteria: Names the Moon's gravity.", "weight": 5},
        {"title": "Important: sun", "description": "Important Criteria: Mentions the Sun's role.", "weight": 3},
        {"title": "Pitfall: myth", "description": "Pitfall Criteria: Says the wind causes tides.", "weight": -2},
    ]
    return {
        "question": "Why are there tides?",
        "reference_answer": "The Moon's gravity, helped by the Sun.",
        "question_source": "earth-science",
        "rubric": rubric,
        "rubric_list": [r["description"] for r in rubric],
        "rubric_count": len(rubric),
        **kw,
    }


# ------------------------------------------------------------------------------------- our format
def test_our_jsonl_loads(tmp_path):
    rows = [
        row(),
        row(
            id="t2",
            domain="writing",
            prompt=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Write a haiku."}],
            reference_answer=None,
            rubric=[
                crit(text="Is at most 17 words.", weight=1, check={"type": "word_count", "max": 17}),
                crit(id="c2", text="Evokes a season.", weight="3"),
                crit(id="c3", text="Rhymes every line.", weight=-1),
            ],
            metadata={"poor_answer": "A poem."},
        ),
    ]
    path = write_jsonl(tmp_path / "tasks.jsonl", [rows[0], "", "   ", rows[1]])  # blank lines are skipped
    report = validate_file(path)
    assert report.ok and report.format == "harnessrl"
    assert [t.id for t in report.tasks] == ["t1", "t2"]
    t2 = report.tasks[1]
    assert isinstance(t2.rubric[0].check, WordCount) and t2.rubric[0].kind == "programmatic"
    assert t2.rubric[1].weight == 3.0
    assert t2.rubric[2].is_pitfall
    assert t2.metadata == {"poor_answer": "A poem."}
    assert load_tasks(path) == report.tasks


def test_default_domain_fills_only_missing(tmp_path):
    no_domain = {k: v for k, v in row(id="t2").items() if k != "domain"}
    path = write_jsonl(tmp_path / "tasks.jsonl", [row(), no_domain])
    tasks = load_tasks(path, default_domain="misc")
    assert [t.domain for t in tasks] == ["science", "misc"]


def test_our_parquet_loads_mixed_criteria(tmp_path):
    """Arrow unifies the structs of a rubric: keys one criterion lacks come back as None."""
    rows = [
        row(
            rubric=[
                crit(),
                crit(id="c2", text="Short.", weight=1, check={"type": "word_count", "max": 50}),
                crit(id="c3", text="Says 'Moon'.", weight=1, check={"type": "contains", "phrases": ["Moon"]}),
                crit(id="c4", text="Mentions wind.", weight=-1, kind="judged"),
            ],
            metadata={"source": "hand"},
        ),
        row(id="t2", metadata={"poor_answer": "Wind."}),
    ]
    path = tmp_path / "tasks.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    tasks = load_tasks(path)
    assert [c.kind for c in tasks[0].rubric] == ["judged", "programmatic", "programmatic", "judged"]
    assert tasks[0].rubric[2].check.evaluate("The moon.") == 1.0
    assert tasks[0].metadata == {"source": "hand"}
    assert tasks[1].metadata == {"poor_answer": "Wind."}


# ------------------------------------------------------------------------------------------ RaR
def check_rar_task(t: Task, domain: str = "earth-science") -> None:
    assert t.prompt == "Why are there tides?"
    assert t.domain == domain
    assert t.reference_answer == "The Moon's gravity, helped by the Sun."
    assert [c.id for c in t.rubric] == ["c1", "c2", "c3"]
    assert [c.weight for c in t.rubric] == [5.0, 3.0, -2.0]
    assert [c.is_pitfall for c in t.rubric] == [False, False, True]
    assert t.rubric[0].text == "Essential Criteria: Names the Moon's gravity."
    assert all(c.kind == "judged" for c in t.rubric)
    assert t.metadata["question_source"] == "earth-science"
    assert t.metadata["criterion_titles"] == ["Essential: cause", "Important: sun", "Pitfall: myth"]


def test_rar_jsonl_auto_detected(tmp_path):
    path = write_jsonl(tmp_path / "rar.jsonl", [rar_row(), rar_row(question="Why is the sky blue?")])
    report = validate_file(path)
    assert report.ok and report.format == "rar"
    check_rar_task(report.tasks[0])
    assert [t.id for t in report.tasks] == ["rar-000000", "rar-000001"]
    assert load_tasks(path, fmt="rar") == report.tasks


def test_rar_parquet(tmp_path):
    path = tmp_path / "rar.parquet"
    pq.write_table(pa.Table.from_pylist([rar_row(), rar_row(question="Why is the sky blue?")]), path)
    report = validate_file(path)
    assert report.ok and report.format == "rar"
    check_rar_task(report.tasks[0])
    assert report.tasks[1].prompt == "Why is the sky blue?"


def test_rar_parquet_bad_row_numbers(tmp_path):
    path = tmp_path / "rar.parquet"
    rows = [
        rar_row(),
        rar_row(question=""),
        rar_row(),
        rar_row(rubric=[{"title": "x", "description": "", "weight": -1}]),
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    report = validate_file(path)
    assert [e.line for e in report.errors] == [2, 4]
    assert "prompt is empty" in report.errors[0].message
    assert "no criterion with a positive weight" in report.errors[1].message
    assert len(report.tasks) == 2


def test_rar_text_falls_back_to_title(tmp_path):
    rubric = [
        {"title": "Names the Moon", "description": "", "weight": 1},
        {"title": "Mentions the Sun", "description": None, "weight": 1},
        {"title": "", "description": "Says 'gravity'", "weight": 1},
    ]
    (t,) = load_tasks(write_jsonl(tmp_path / "rar.jsonl", [rar_row(rubric=rubric)]))
    assert [c.text for c in t.rubric] == ["Names the Moon", "Mentions the Sun", "Says 'gravity'"]


def test_rar_domain_sources(tmp_path):
    rows = [
        rar_row(),  # question_source
        rar_row(question_source=None),  # nothing: general
        rar_row(question_source="", id="given"),  # an own id is kept
        rar_row(domain="physics"),  # an explicit domain wins
    ]
    path = write_jsonl(tmp_path / "rar.jsonl", rows)
    tasks = load_tasks(path)
    assert [t.domain for t in tasks] == ["earth-science", "general", "general", "physics"]
    assert tasks[2].id == "given"
    assert "question_source" not in tasks[1].metadata
    # a default domain replaces the question source (e.g. `--domain medicine` for RaR-Medicine)
    assert [t.domain for t in load_tasks(path, default_domain="med")] == ["med", "med", "med", "physics"]


@pytest.mark.parametrize(
    ("rubric", "reason"),
    [
        ([{"title": "a", "description": "b"}], "rubric item 1 has no weight"),
        ([{"title": "a", "description": "b", "weight": 1}, "oops"], "rubric item 2 must be an object"),
        ("not a list", "rubric must be a list"),
        ([{"title": "a", "description": "b", "weight": "heavy"}], "weight 'heavy' is not a number"),
        ([{"title": " ", "description": "", "weight": 1}], "criterion text is blank"),
    ],
)
def test_rar_bad_rubric(tmp_path, rubric, reason):
    path = write_jsonl(tmp_path / "rar.jsonl", [rar_row(), rar_row(rubric=rubric)])
    report = validate_file(path, fmt="rar")
    assert len(report.errors) == 1
    assert report.errors[0].line == 2
    assert reason in report.errors[0].message


def test_rar_missing_rubric_names_its_column(tmp_path):
    r = rar_row()
    del r["rubric"]
    report = validate_file(write_jsonl(tmp_path / "rar.jsonl", [r]), fmt="rar")
    assert report.errors[0].line == 1
    assert report.errors[0].message.startswith("missing rubric (the rar format reads it from the column 'rubric'")


def test_auto_detects_ours_when_first_row_is_ours(tmp_path):
    report = validate_file(write_jsonl(tmp_path / "t.jsonl", [row()]))
    assert report.format == "harnessrl"
    # a RaR row in a file that started as ours is judged as ours: 'question' is an unknown field
    report = validate_file(write_jsonl(tmp_path / "m.jsonl", [row(), rar_row()]))
    assert report.format == "harnessrl"
    assert [e.line for e in report.errors] == [2]


def test_unknown_format_rejected(tmp_path):
    with pytest.raises(HarnessRLError, match="unknown data format 'csv'"):
        validate_file(write_jsonl(tmp_path / "t.jsonl", [row()]), fmt="csv")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- `datasets` tables
def test_hf_dataset_with_mapping():
    ds = datasets.Dataset.from_list(
        [
            {
                "uid": 7,
                "question": "Why are there tides?",
                "area": "science",
                "answer": "The Moon.",
                "criteria": [
                    {"id": "moon", "text": "Names the Moon.", "weight": 2},
                    {"id": "short", "text": "Is short.", "weight": 1, "check": {"type": "word_count", "max": 40}},
                    {"id": "wind", "text": "Blames the wind.", "weight": -1, "kind": "judged"},
                ],
                "extra": "ignored",
            },
            {
                "uid": 8,
                "question": "Say hi.",
                "area": "chat",
                "answer": None,
                "criteria": [{"id": "hi", "text": "Greets.", "weight": 1}],
                "extra": "ignored",
            },
        ]
    )
    mapping = {"id": "uid", "prompt": "question", "domain": "area", "reference_answer": "answer", "rubric": "criteria"}
    t1, t2 = load_hf_dataset(ds, mapping)
    assert (t1.id, t1.domain, t1.prompt, t1.reference_answer) == ("7", "science", "Why are there tides?", "The Moon.")
    assert [c.kind for c in t1.rubric] == ["judged", "programmatic", "judged"]
    assert t1.rubric[1].check == WordCount(max=40)
    assert t1.rubric[2].is_pitfall
    assert (t2.id, t2.reference_answer) == ("8", None)


def test_hf_dataset_rubric_as_json_string_and_default_domain():
    rubric = json.dumps([{"id": "c1", "text": "Names the Moon.", "weight": 1}])
    ds = datasets.Dataset.from_list([{"q": "Why tides?", "r": rubric}, {"q": "Why rain?", "r": rubric}])
    tasks = load_hf_dataset(ds, {"prompt": "q", "rubric": "r"}, default_domain="science")
    assert [t.id for t in tasks] == ["task-000000", "task-000001"]
    assert {t.domain for t in tasks} == {"science"}
    assert tasks[0].rubric[0].text == "Names the Moon."


def test_hf_dataset_bad_rows_listed():
    ds = datasets.Dataset.from_list(
        [
            {"q": "ok", "r": json.dumps([{"id": "c1", "text": "x", "weight": 1}])},
            {"q": "ok", "r": "[{not json"},
            {"q": "", "r": json.dumps([{"id": "c1", "text": "x", "weight": 1}])},
        ]
    )
    with pytest.raises(DataValidationError) as ei:
        load_hf_dataset(ds, {"prompt": "q", "rubric": "r"}, default_domain="d", source="my-set")
    errs = ei.value.errors
    assert [e.line for e in errs] == [2, 3]
    assert "rubric column is a string but not JSON" in errs[0].message
    assert "prompt is empty" in errs[1].message
    assert ei.value.source == "my-set" and "my-set: 2 invalid row(s)" in str(ei.value)


def test_hf_dataset_rar_layout_and_plain_list():
    tasks = load_hf_dataset(datasets.Dataset.from_list([rar_row()]), fmt="rar")
    check_rar_task(tasks[0])
    # any iterable of dicts works too
    assert load_hf_dataset([row()], fmt="hf")[0].id == "t1"


def test_hf_dataset_empty():
    with pytest.raises(DataValidationError, match="dataset is empty"):
        load_hf_dataset([])


# ----------------------------------------------------------------------------- every error path
def test_not_json_truncated_line(tmp_path):
    e = one_error(tmp_path, [row(), json.dumps(row(id="t2"))[:40]])
    assert e.line == 2
    assert "not valid JSON (truncated line?)" in e.message
    assert str(e).startswith("line 2: ")


def test_every_cut_of_a_line_reads_as_truncated(tmp_path):
    full = json.dumps(row())
    cuts = [full[:n] for n in range(1, len(full))]
    report = validate_file(write_jsonl(tmp_path / "cuts.jsonl", cuts))
    assert len(report.errors) == len(cuts) and not report.tasks
    assert all("not valid JSON (truncated line?)" in e.message for e in report.errors), [
        (e.line, cuts[e.line - 1][-12:], e.message) for e in report.errors if "truncated" not in e.message
    ]


def test_not_json_garbage(tmp_path):
    e = one_error(tmp_path, ["{'id': 't1'}", row()])
    assert e.line == 1
    assert e.message.startswith("not valid JSON:") and "column 2" in e.message
    assert "truncated" not in e.message


@pytest.mark.parametrize(
    ("value", "kind"), [("[1, 2]", "list"), ('"text"', "str"), ("42", "int"), ("null", "NoneType")]
)
def test_non_object_row(tmp_path, value, kind):
    e = one_error(tmp_path, [row(), value])
    assert e.line == 2 and e.message == f"a row must be a JSON object, got {kind}"


def test_missing_prompt(tmp_path):
    r = row()
    del r["prompt"]
    e = one_error(tmp_path, [r])
    assert (e.line, e.task_id, e.message) == (1, "t1", "missing prompt")
    assert str(e) == "line 1 (task 't1'): missing prompt"


@pytest.mark.parametrize(
    ("prompt", "reason"),
    [
        ("   ", "prompt is empty"),
        ([], "prompt has no non-empty user message"),
        ([{"role": "system", "content": "x"}], "prompt has no non-empty user message"),
        (5, "prompt must be text or a list of {role, content} chat messages"),
    ],
)
def test_empty_or_bad_prompt(tmp_path, prompt, reason):
    e = one_error(tmp_path, [row(), row(id="t2", prompt=prompt)])
    assert e.line == 2 and e.task_id == "t2"
    assert e.message == reason


def test_empty_rubric(tmp_path):
    e = one_error(tmp_path, [row(rubric=[])])
    assert e.line == 1 and e.message.startswith("rubric is empty")


def test_blank_criterion_text(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(), crit(id="c2", text="  ")])])
    assert e.line == 1
    assert e.message.startswith("criterion 2 ('c2') text: criterion text is blank")


@pytest.mark.parametrize("weight", ["heavy", None, True])
def test_non_numeric_weight(tmp_path, weight):
    e = one_error(tmp_path, [row(rubric=[crit(weight=weight)])])
    assert e.line == 1
    assert e.message == f"criterion 1 ('c1') weight: weight {weight!r} is not a number"


def test_zero_weight(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(weight=0)])])
    assert "criterion 1 ('c1') weight: weight is 0" in e.message


def test_no_positive_weight(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(weight=-1), crit(id="c2", weight=-3)])])
    assert e.line == 1
    assert e.message == "rubric has no criterion with a positive weight: the reward would be undefined"


def test_duplicate_task_ids_name_first_line(tmp_path):
    report = validate_file(write_jsonl(tmp_path / "t.jsonl", [row(), row(id="t2"), "", row(), row(id="t2")]))
    assert [(e.line, e.task_id) for e in report.errors] == [(4, "t1"), (5, "t2")]
    assert report.errors[0].message == "duplicate task id (first seen on line 1)"
    assert report.errors[1].message == "duplicate task id (first seen on line 2)"
    assert [t.id for t in report.tasks] == ["t1", "t2"]


def test_duplicate_criterion_ids(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(), crit(text="Other.")])])
    assert e.message == "criterion id 'c1' appears twice in the rubric"


def test_unknown_programmatic_check_lists_valid_names(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(check={"type": "wordcount", "max": 5})])])
    assert e.line == 1
    assert "criterion 1 ('c1') check: unknown programmatic check 'wordcount'" in e.message
    for name in CHECK_TYPES:
        assert name in e.message


def test_check_without_type(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(check={"max": 5})])])
    assert "check has no 'type' (valid types: " in e.message


@pytest.mark.parametrize(
    ("check", "reason"),
    [
        ({"type": "word_count", "max_words": 80}, "unknown field 'max_words' in criterion 1 ('c1') check"),
        ({"type": "word_count", "min": 9, "max": 3}, "criterion 1 ('c1') check: check 'word_count' has min 9 > max 3"),
        ({"type": "regex", "pattern": "(a"}, "criterion 1 ('c1') check pattern: pattern '(a' is not a valid"),
    ],
)
def test_bad_check_config(tmp_path, check, reason):
    e = one_error(tmp_path, [row(rubric=[crit(check=check)])])
    assert reason in e.message


def test_kind_check_mismatch(tmp_path):
    e = one_error(tmp_path, [row(rubric=[crit(kind="programmatic")])])
    assert e.message.startswith("criterion 1 ('c1'): a programmatic criterion needs a 'check'")
    e = one_error(tmp_path, [row(rubric=[crit(kind="judged", check={"type": "json"})])])
    assert e.message.startswith("criterion 1 ('c1'): a judged criterion has no 'check'")


def test_unknown_field(tmp_path):
    e = one_error(tmp_path, [row(source="web")])
    assert e.message == "unknown field 'source' in row (put free data under 'metadata')"
    e = one_error(tmp_path, [row(rubric=[crit(priority=1)])])
    assert e.message == "unknown field 'priority' in criterion 1 ('c1')"


def test_missing_domain(tmp_path):
    r = row()
    del r["domain"]
    assert one_error(tmp_path, [r]).message == "missing domain"


def test_several_problems_in_one_row_one_message(tmp_path):
    e = one_error(tmp_path, [row(prompt="", rubric=[crit(weight="x"), crit(id="c2", text=" ")])])
    assert e.line == 1
    assert "prompt is empty" in e.message
    assert "criterion 1 ('c1') weight" in e.message and "criterion 2 ('c2') text" in e.message


@pytest.mark.parametrize("content", ["", "\n\n   \n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    report = validate_file(path)
    assert [(e.line, e.message) for e in report.errors] == [(0, "file is empty: it holds no tasks")]
    with pytest.raises(DataValidationError, match="file is empty"):
        load_tasks(path)


def test_empty_parquet(tmp_path):
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"question": pa.array([], pa.string())}), path)
    assert "file is empty" in validate_file(path).errors[0].message


def test_nonexistent_file(tmp_path):
    with pytest.raises(HarnessRLError, match="no such file"):
        validate_file(tmp_path / "nope.jsonl")
    with pytest.raises(HarnessRLError, match="no such file"):
        load_tasks(tmp_path / "nope.jsonl")


def test_broken_parquet_and_non_utf8(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(HarnessRLError, match="not a readable parquet file"):
        validate_file(bad)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(row(prompt="caf\u00e9")).encode("latin-1").replace(b"\\u00e9", b"\xe9"))
    with pytest.raises(HarnessRLError, match="not UTF-8"):
        validate_file(latin)


PLANTED = [
    row(id="good1"),  # 1
    '{"id": "bad-json", "prompt": "x",',  # 2: truncated
    row(id="good2", domain="math"),  # 3
    row(id="no-prompt", prompt=""),  # 4
    "",  # 5: blank, skipped
    row(id="heavy", rubric=[crit(weight="heavy")]),  # 6
    row(id="pitfalls-only", rubric=[crit(weight=-1)]),  # 7
    row(id="good1"),  # 8: duplicate of line 1
    row(id="bad-check", rubric=[crit(check={"type": "nope"})]),  # 9
    "[1, 2, 3]",  # 10
    row(id="good3", domain="math", rubric=[crit(), crit(id="p", text="Rambles.", weight=-1)]),  # 11
    row(id="extra", colour="red"),  # 12
]


def test_planted_defects_one_message_per_bad_row(tmp_path):
    path = write_jsonl(tmp_path / "planted.jsonl", PLANTED)
    report = validate_file(path)
    assert [t.id for t in report.tasks] == ["good1", "good2", "good3"]
    assert [e.line for e in report.errors] == [2, 4, 6, 7, 8, 9, 10, 12]
    by_line = {e.line: e for e in report.errors}
    assert "truncated line" in by_line[2].message
    assert by_line[4].message == "prompt is empty"
    assert "weight 'heavy' is not a number" in by_line[6].message
    assert "no criterion with a positive weight" in by_line[7].message
    assert "first seen on line 1" in by_line[8].message
    assert "unknown programmatic check 'nope'" in by_line[9].message
    assert "got list" in by_line[10].message
    assert "unknown field 'colour'" in by_line[12].message

    with pytest.raises(DataValidationError) as ei:
        load_tasks(path)
    err = ei.value
    assert err.errors == report.errors
    text = str(err)
    assert f"{path}: 8 invalid row(s)" in text
    assert f"harnessrl data validate {path}" in text
    for line in (2, 4, 6, 7, 8, 9, 10, 12):
        assert f"  line {line}" in text


def test_error_message_caps_at_50_rows(tmp_path):
    path = write_jsonl(tmp_path / "many.jsonl", [row(id=f"t{i}", prompt="") for i in range(60)])
    with pytest.raises(DataValidationError) as ei:
        load_tasks(path)
    assert len(ei.value.errors) == 60
    assert "... and 10 more" in str(ei.value)
    assert "line 51 " not in str(ei.value)


# ------------------------------------------------------------------------------------------ summary
def test_summary_figures(tmp_path):
    rows = [
        row(id="a", domain="science", rubric=[crit(), crit(id="p", text="Myth.", weight=-1)]),
        row(
            id="b",
            domain="science",
            reference_answer="",
            rubric=[
                crit(),
                crit(id="w", text="Short.", weight=1, check={"type": "word_count", "max": 9}),
                crit(id="x", text="Cites.", weight=1),
                crit(id="y", text="Says Moon.", weight=1, check={"type": "contains", "phrases": ["Moon"]}),
            ],
        ),
        row(id="c", domain="math"),
        "not json",
    ]
    report = validate_file(write_jsonl(tmp_path / "t.jsonl", rows))
    assert not report.ok
    s = report.summary()
    assert s == {
        "tasks": 3,
        "domains": {"math": 1, "science": 2},
        "criteria": 7,
        "criteria_per_task": {"min": 1, "mean": 2.33, "max": 4},
        "pitfall_share": round(1 / 7, 3),
        "programmatic_share": round(2 / 7, 3),
        "with_reference": 2,
        "with_gold_rubric": 0,
    }
    assert list(s["domains"]) == ["math", "science"]  # sorted


def test_summary_of_nothing():
    from harnessrl.data.loaders import ValidationReport

    s = ValidationReport(source="x").summary()
    assert s["tasks"] == 0 and s["criteria"] == 0
    assert s["criteria_per_task"] == {"min": 0, "mean": 0.0, "max": 0}
    assert s["pitfall_share"] == 0.0 and s["programmatic_share"] == 0.0
