"""The public rubric sets' presets: each fixture (tests/data/presets/, in that set's own layout) validates through
the path `harnessrl data validate` takes, a bad row of each is refused at its line with a readable reason, and a
preset is a run config's `data.format` and the command's `--format`."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from typer.testing import CliRunner

from harnessrl.cli import app
from harnessrl.data import load_hf_dataset, load_tasks, validate_file
from harnessrl.data.loaders import FILE_FORMATS, PRESETS
from harnessrl.errors import DataValidationError
from harnessrl.trainer.train_config import DataConfig, TrainConfig

FIXTURES = Path(__file__).parent / "data" / "presets"
FILES = {
    "rubrichub": "rubrichub.jsonl",
    "openrubrics": "openrubrics.jsonl",
    "healthbench": "healthbench.jsonl",
    "rlvr-ifeval": "rlvr_ifeval.jsonl",
}
runner = CliRunner()


def fixture_rows(preset: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / FILES[preset]).read_text(encoding="utf-8").splitlines()]


def test_every_preset_but_rar_has_a_fixture_here():
    assert set(PRESETS) == {"rar", *FILES}  # rar's layout is tested in tests/test_loaders.py
    assert set(FILE_FORMATS) == {"auto", "harnessrl", *PRESETS}


@pytest.mark.parametrize("preset", sorted(FILES))
def test_each_fixture_validates_in_its_preset(preset):
    report = validate_file(FIXTURES / FILES[preset], preset)  # what `harnessrl data validate` calls
    assert report.ok, [str(e) for e in report.errors]
    assert report.format == preset
    assert len(report.tasks) == len(fixture_rows(preset)) >= 3


def test_rubrichub_points_are_weights_and_tags_are_kept():
    tasks = validate_file(FIXTURES / FILES["rubrichub"], "rubrichub").raise_if_invalid()
    medical, writing, following = tasks
    assert [t.domain for t in tasks] == ["Medical", "Writing", "Instruction_Following"]
    assert [c.weight for c in medical.rubric] == [7, 9, -8]
    assert medical.rubric[2].is_pitfall and medical.rubric[2].text == "Recommends aspirin for the child."
    assert medical.reference_answer is None  # RubricHub's ground_truth is empty
    assert medical.id == "rubrichub-000000" and medical.metadata["data_source"] == "Medical"
    assert following.metadata["criterion_tags"][1] == {"verifier": "rule", "function": "no_comma", "parameters": {}}
    assert all(c.kind == "judged" for c in following.rubric)  # RubricHub's rule functions are not released
    assert isinstance(writing.prompt, list) and writing.prompt[0].role == "user"


def test_openrubrics_rubric_text_becomes_criteria_with_their_kind():
    first = validate_file(FIXTURES / FILES["openrubrics"], "openrubrics").raise_if_invalid()[0]
    assert [c.text for c in first.rubric] == [
        "The response suggests exactly five distinct artifacts.",
        "The response gives one sentence per artifact.",
        "The response explains why each artifact is mysterious, not only what it is.",  # a continued line
        "The response communicates clearly and is well organized.",
    ]
    assert {c.weight for c in first.rubric} == {1.0}
    assert first.metadata == {
        "source": "ultrafeedback",
        "criterion_tags": ["hard_rule", "hard_rule", "principle", "principle"],
    }
    assert first.domain == "ultrafeedback" and first.reference_answer is None


def test_healthbench_negative_points_are_pitfalls_and_the_ideal_completion_is_the_reference():
    first, second, _ = validate_file(FIXTURES / FILES["healthbench"], "healthbench").raise_if_invalid()
    assert first.id == "1f548d5b-cd00-49a0-b327-283a2e00debd" and first.domain == "health"
    assert [c.weight for c in first.rubric] == [9, 5, -7] and first.rubric[2].is_pitfall
    assert first.reference_answer.startswith("Reach out to your doctor")
    assert first.metadata["example_tags"] == ["theme:emergency_referrals", "physician_agreed_category:emergent"]
    assert first.metadata["criterion_tags"][0] == ["level:example", "axis:completeness"]
    assert first.metadata["ideal_completions_group"] == "Group 1"
    assert second.reference_answer is None and [m.role for m in second.prompt] == ["user", "assistant", "user"]


def test_rlvr_ifeval_ground_truth_becomes_ifeval_checks_in_the_benchmarks_words():
    json_text, python_literal, ifeval_row = validate_file(
        FIXTURES / FILES["rlvr-ifeval"], "rlvr-ifeval"
    ).raise_if_invalid()
    assert [c.check.instruction_id for c in json_text.rubric] == [
        "length_constraints:number_words",
        "punctuation:no_comma",
    ]
    assert json_text.rubric[0].text == "Answer with less than 50 words."  # IFEval's own description
    assert all(c.kind == "programmatic" and c.weight == 1 for c in json_text.rubric)
    assert json_text.reference_answer is None  # the layout has none; the schema's reference is optional
    assert json_text.id == "ifmc_00001" and json_text.metadata["constraint_type"] == "multi"
    assert [c.check.instruction_id for c in python_literal.rubric] == ["detectable_format:title", "keywords:existence"]
    assert ifeval_row.id == "1001" and ifeval_row.prompt.startswith("Write a short note")  # google/IFEval's row
    no_comma = json_text.rubric[1].check
    assert no_comma.evaluate("The sky scatters blue light most.") == 1.0
    assert no_comma.evaluate("Light scatters, so the sky is blue.") == 0.0


# one bad row per preset, put on line 2 of that set's fixture: what the error must say
BAD_ROWS = {
    "rubrichub": (
        lambda r: {**r, "reward_model": {**r["reward_model"], "rubrics": [{"criterion": "Is kind.", "tags": {}}]}},
        "Rubrics item 1 has no points",
    ),
    "openrubrics": (lambda r: {**r, "rubric": "The response is good."}, "rubric text has no numbered criteria"),
    "healthbench": (
        lambda r: {**r, "rubrics": [{"criterion": "Is kind.", "points": 0, "tags": []}]},
        "criterion 1 ('c1') weight: weight is 0",
    ),
    "rlvr-ifeval": (
        lambda r: {**r, "ground_truth": json.dumps({"func_name": "validate_lowercase", "N": None})},
        "names open-instruct's own check 'validate_lowercase'",
    ),
}


@pytest.mark.parametrize("preset", sorted(BAD_ROWS))
def test_a_bad_row_of_each_preset_is_refused_at_its_line(preset, tmp_path):
    rows = fixture_rows(preset)
    spoil, says = BAD_ROWS[preset]
    rows.insert(1, spoil(rows[0]))
    path = tmp_path / FILES[preset]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    report = validate_file(path, preset)
    assert len(report.tasks) == len(rows) - 1
    assert [e.line for e in report.errors] == [2]
    assert says in str(report.errors[0]), str(report.errors[0])


def test_rlvr_ifeval_refuses_unknown_ids_and_mismatched_lists_at_their_lines(tmp_path):
    row = fixture_rows("rlvr-ifeval")[0]
    unknown = {**row, "key": "u", "ground_truth": json.dumps([{"instruction_id": ["no_such:id"], "kwargs": [{}]}])}
    uneven = {
        **row,
        "key": "v",
        "ground_truth": json.dumps([{"instruction_id": ["punctuation:no_comma"], "kwargs": []}]),
    }
    path = tmp_path / "rlvr.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (row, unknown, uneven)), encoding="utf-8")
    errors = {e.line: str(e) for e in validate_file(path, "rlvr-ifeval").errors}
    assert "unknown instruction id 'no_such:id'" in errors[2]
    assert "two lists of the same length" in errors[3]


@pytest.mark.parametrize("preset", sorted(FILES))
def test_data_validate_reads_each_preset(preset):
    result = runner.invoke(app, ["data", "validate", str(FIXTURES / FILES[preset]), "--format", preset])
    assert result.exit_code == 0, result.output
    assert f"valid tasks (format: {preset})" in " ".join(result.stdout.split())


def test_data_validate_prints_a_bad_preset_row_at_its_line(tmp_path):
    rows = fixture_rows("healthbench")
    rows[2] = {**rows[2], "rubrics": "not a list"}
    path = tmp_path / "hb.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = runner.invoke(app, ["data", "validate", str(path), "--format", "healthbench"])
    assert result.exit_code == 1
    assert "✗ line 3" in result.stderr and "rubrics is text but not JSON" in " ".join(result.stderr.split())


def test_data_validate_help_lists_the_presets():
    result = runner.invoke(app, ["data", "validate", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert all(name in text for name in PRESETS)


def test_a_run_config_names_a_preset_as_data_format():
    assert DataConfig(format="rubrichub").format == "rubrichub"
    with pytest.raises(ValueError, match="healthbench"):  # the error lists the valid names
        DataConfig(format="health-bench")
    cfg = TrainConfig.model_validate({"data": {"train": "hb.jsonl", "format": "healthbench"}})
    assert cfg.data.format == "healthbench"


def test_a_datasets_table_in_a_presets_layout_loads():
    """Parquet and `datasets` give the same rows through Arrow (null-filled struct keys included)."""
    table = datasets.Dataset.from_list(fixture_rows("healthbench"))
    tasks = load_hf_dataset(table, fmt="healthbench", source="healthbench")
    assert [len(t.rubric) for t in tasks] == [3, 3, 2]
    assert tasks[0].reference_answer.startswith("Reach out")


# ------------------------------------------------------------------ a column missing, a layout taken for another
def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# each preset's prompt column, and the field it reads there
PROMPT_COLUMNS = {"rubrichub": "prompt", "openrubrics": "instruction", "healthbench": "prompt"}


@pytest.mark.parametrize("preset", sorted(PROMPT_COLUMNS))
def test_a_preset_row_without_its_prompt_column_names_it_and_lists_the_columns_it_has(preset, tmp_path):
    row = fixture_rows(preset)[0]
    column = PROMPT_COLUMNS[preset]
    lacking = {k: v for k, v in row.items() if k != column}
    (error,) = validate_file(_write(tmp_path / "x.jsonl", [lacking]), preset).errors
    message = str(error)
    assert f"missing prompt (the {preset} format reads it from the column {column!r}, which this row lacks" in message
    assert "the row's columns: " + ", ".join(repr(k) for k in lacking) in message


@pytest.mark.parametrize(
    ("preset", "drop", "says"),
    [
        ("healthbench", "rubrics", "missing rubric, a list of {criterion, points} (the healthbench format reads it "
         "from the column 'rubrics', which this row lacks"),
        ("openrubrics", "rubric", "missing rubric, the rubric text, one numbered criterion a line (the openrubrics "
         "format reads it from the column 'rubric'"),
        ("rlvr-ifeval", "ground_truth", "missing rubric, the instruction ids and their kwargs (the rlvr-ifeval "
         "format reads it from the column 'ground_truth' or 'instruction_id_list'"),
    ],
)  # fmt: skip
def test_a_preset_row_without_its_rubric_column_names_it_and_lists_the_columns_it_has(preset, drop, says, tmp_path):
    lacking = {k: v for k, v in fixture_rows(preset)[0].items() if k != drop}
    (error,) = validate_file(_write(tmp_path / "x.jsonl", [lacking]), preset).errors
    assert says in str(error) and "the row's columns: " in str(error)


def test_a_renamed_column_is_suggested_but_not_one_the_layout_reads_for_something_else(tmp_path):
    rar = {"question": "Why tides?", "rubrics": [{"title": "Moon", "description": "Names the Moon.", "weight": 2}]}
    (error,) = validate_file(_write(tmp_path / "rar.jsonl", [rar]), "rar").errors
    assert str(error).endswith("the row's columns: 'question', 'rubrics'; did you mean 'rubrics'?)")
    row = {k: v for k, v in fixture_rows("healthbench")[0].items() if k != "prompt"}  # prompt_id is the id's column
    (error,) = validate_file(_write(tmp_path / "hb.jsonl", [row]), "healthbench").errors
    assert "did you mean" not in str(error)


@pytest.mark.parametrize("preset", sorted(FILES))
def test_auto_reads_each_presets_fixture_in_its_layout(preset):
    report = validate_file(FIXTURES / FILES[preset])  # --format auto
    assert report.ok and report.format == preset and report.format_note is None


def test_auto_says_which_preset_it_took_a_file_lacking_a_column_for(tmp_path):
    """Once: a HealthBench file whose rows lacked `prompt` was read as our own format, with errors about fields
    (missing id, unknown field 'prompt_id', ...) that never said the file had been taken for another layout."""
    rows = [{k: v for k, v in r.items() if k != "prompt"} for r in fixture_rows("healthbench")]
    path = _write(tmp_path / "hb.jsonl", rows)
    report = validate_file(path)
    assert report.format == "healthbench" and len(report.errors) == len(rows)
    assert report.format_note.startswith("--format auto took this file for the healthbench layout (its first row has ")
    assert "'prompt_id'" in report.format_note and "criteria with criterion/points" in report.format_note
    assert "pass --format (harnessrl, rar, rubrichub, openrubrics, rlvr-ifeval)" in report.format_note
    assert all("reads it from the column 'prompt'" in str(e) for e in report.errors)
    result = runner.invoke(app, ["data", "validate", str(path)], env={"COLUMNS": "300"})
    assert result.exit_code == 1
    assert "took this file for the healthbench layout" in " ".join(result.stderr.split())
    with pytest.raises(DataValidationError, match="took this file for the healthbench layout"):
        load_tasks(path)  # what `harnessrl train` reads a data file with


def test_auto_takes_rubric_items_of_a_presets_shape_as_that_preset(tmp_path):
    """RaR's criteria ({title, description, weight}) under our column names: read as RaR, which names `question`."""
    row = {"prompt": "Why tides?", "rubric": [{"title": "Moon", "description": "Names the Moon.", "weight": 2}]}
    report = validate_file(_write(tmp_path / "r.jsonl", [row]))
    assert report.format == "rar" and "criteria with description/title" in report.format_note
    assert "reads it from the column 'question'" in str(report.errors[0])


def test_auto_reads_ours_when_no_preset_matches_and_says_so_only_then(tmp_path):
    ours = {"id": "t1", "domain": "d", "prompt": "Hi", "rubric": [{"id": "c1", "text": "Greets", "weight": 1}]}
    odd = {"id": "t2", "question_text": "Hi", "criteria": [{"id": "c1", "text": "Greets", "weight": 1}]}
    report = validate_file(_write(tmp_path / "odd.jsonl", [odd]))
    assert report.format == "harnessrl" and "match no preset's layout" in report.format_note
    report = validate_file(_write(tmp_path / "ours.jsonl", [ours, {**ours, "id": "t2", "rubric": []}]))
    assert report.format == "harnessrl" and len(report.errors) == 1 and report.format_note is None
