"""A judge measured on someone's own labels: the label rows and their errors, the figures (AUC, accuracy,
Brier, the reliability table) on a scripted judge with known numbers, and `harnessrl bench judge --labels`.

Only the last test loads a model (the embedded semantic judge, a few seconds), on the example file."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.cli import app
from harnessrl.data import Criterion, JudgeLabel, Task, load_judge_labels
from harnessrl.data.labels import validate_label_rows, validate_labels_file
from harnessrl.errors import DataValidationError, JudgeError
from harnessrl.judges import BackendVerdict, GradeRequest
from harnessrl.judges.quality import agreement, expected_calibration_error, reliability

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


class ValueBackend:
    """Reads its verdict off the response: a number is the verdict, "none" is no verdict, anything else 0.5."""

    name = "value"

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        out: list[BackendVerdict | None] = []
        for r in requests:
            try:
                out.append(BackendVerdict(float(r.response), 0.9, "read off the response"))
            except ValueError:
                out.append(None if r.response == "none" else BackendVerdict(0.5, 0.1, "not a number"))
        return out


class ValueFactory:
    @classmethod
    def from_config(cls, config) -> ValueBackend:
        return ValueBackend()


FAKE = f"{__name__}:ValueFactory"


def label(verdict: str, y: int, domain: str = "science", line: int = 1) -> JudgeLabel:
    crit = Criterion(id="c", text="Names the Moon.", weight=1)
    return JudgeLabel(line, "Why are there tides?", verdict, crit, y, domain)


# known numbers: positives score 0.9, 0.7, 0.3; negatives 0.6, 0.2, 0.1
KNOWN = [("0.9", 1), ("0.7", 1), ("0.3", 1), ("0.6", 0), ("0.2", 0), ("0.1", 0)]


# ------------------------------------------------------------------------------------------ figures
def test_agreement_known_numbers():
    labels = [label(v, y, "science" if k < 3 else "writing") for k, (v, y) in enumerate(KNOWN)]
    ag = agreement(ValueBackend(), labels, bins=5)
    assert (ag.n, ag.positives, ag.missing) == (6, 3, 0)
    assert ag.auc == pytest.approx(8 / 9)  # 0.3 is above two of the three negatives, 0.9 and 0.7 above all
    assert ag.accuracy == pytest.approx(4 / 6)  # 0.3 (label 1) and 0.6 (label 0) are on the wrong side of 0.5
    assert ag.brier == pytest.approx((0.01 + 0.09 + 0.49 + 0.36 + 0.04 + 0.01) / 6)
    bins = [(b.n, b.mean_verdict, b.label_rate) for b in ag.calibration]
    assert [b[0] for b in bins] == [1, 2, 0, 2, 1]
    assert bins[0][1:] == pytest.approx((0.1, 0.0))
    assert bins[1][1:] == pytest.approx((0.25, 0.5))
    assert math.isnan(bins[2][1]) and math.isnan(bins[2][2])
    assert bins[3][1:] == pytest.approx((0.65, 0.5))
    assert bins[4][1:] == pytest.approx((0.9, 1.0))
    assert ag.ece == pytest.approx((0.1 + 2 * 0.25 + 2 * 0.15 + 0.1) / 6)
    # one domain holds only positives: its AUC is undefined, never a number made up
    assert math.isnan(ag.per_domain["science"]["auc"]) and ag.per_domain["science"]["accuracy"] == pytest.approx(2 / 3)
    assert ag.per_domain["writing"]["n"] == 3 and ag.per_domain["writing"]["positives"] == 0
    d = ag.to_dict()
    assert d["per_domain"]["science"]["auc"] is None and d["calibration"][2]["mean_verdict"] is None
    json.dumps(d, allow_nan=False)  # JSON-ready: no NaN


def test_missing_and_broken_verdicts_are_left_out_and_counted():
    labels = [label(v, y) for v, y in KNOWN] + [label("none", 1), label("1.5", 0), label("nan", 1)]
    ag = agreement(ValueBackend(), labels)
    assert ag.missing == 3 and ag.n == 6
    assert ag.auc == pytest.approx(8 / 9)
    assert ag.verdicts[-3:] == [None, None, None] and ag.verdicts[0] == pytest.approx(0.9)


def test_agreement_refuses_a_backend_that_loses_rows():
    class Short(ValueBackend):
        def grade(self, requests):
            return super().grade(requests)[:-1]

    with pytest.raises(JudgeError, match="returned 1 verdicts for 2 labelled rows"):
        agreement(Short(), [label("0.9", 1), label("0.1", 0)])


def test_reliability_edges():
    table = reliability([0.0, 0.2, 0.6, 1.0], [0, 0, 1, 1], bins=5)
    assert [b.n for b in table] == [1, 1, 0, 1, 1]  # an edge value opens its bin; 1.0 closes the last
    assert (table[0].lo, table[-1].hi) == (0.0, 1.0)
    assert expected_calibration_error(table) == pytest.approx((0 + 0.2 + 0.4 + 0) / 4)
    assert [b.n for b in reliability([], [], bins=3)] == [0, 0, 0]
    assert math.isnan(expected_calibration_error(reliability([], [], bins=3)))
    with pytest.raises(ValueError, match="at least 1"):
        reliability([0.5], [1], bins=0)


# --------------------------------------------------------------------------------------------- rows
TASK = Task(
    id="tides",
    domain="science",
    prompt="Why are there tides?",
    reference_answer="The Moon's gravity pulls the oceans.",
    rubric=[
        Criterion(id="moon", text="Names the Moon.", weight=2),
        Criterion(id="wind", text="Blames the wind.", weight=-1),
        Criterion(id="short", text="At most 30 words.", weight=1, check={"type": "word_count", "max": 30}),
    ],
)


def standalone(**kw) -> dict:
    return {"prompt": "Why are there tides?", "response": "The Moon.", "criterion": "Names the Moon.", "label": 1} | kw


def test_both_row_shapes_resolve():
    rows = [
        standalone(domain="geo", weight=-2, reference_answer="The Moon.", note="kept out of grading"),
        standalone(prompt=[{"role": "user", "content": "Why tides?"}], label=False, criterion_id="moon-1"),
        {"task_id": "tides", "criterion_id": "wind", "response": "Wind.", "label": 1.0, "metadata": {"by": "ann"}},
    ]
    report = validate_label_rows(enumerate(rows, 1), "labels.jsonl", [TASK], "tasks.jsonl")
    assert report.errors == []
    a, b, c = report.labels
    assert (a.domain, a.criterion.weight, a.criterion.id, a.reference_answer, a.label) == (
        "geo",
        -2,
        "line-1",
        "The Moon.",
        1,
    )
    assert (b.domain, b.prompt, b.label, b.criterion.id, b.reference_answer) == (
        "general",
        "Why tides?",
        0,
        "moon-1",
        None,
    )
    # a task row takes its prompt, criterion (a pitfall here), reference answer and domain from the task
    assert (c.task_id, c.domain, c.prompt, c.criterion, c.reference_answer) == (
        "tides",
        "science",
        "Why are there tides?",
        TASK.rubric[1],
        TASK.reference_answer,
    )


BAD_ROWS = [
    standalone(),  # 1: good
    standalone(label="yes"),  # 2
    {k: v for k, v in standalone().items() if k != "criterion"},  # 3
    {"task_id": "tides", "criterion_id": "sun", "response": "x", "label": 0},  # 4
    {"task_id": "ghost", "criterion_id": "moon", "response": "x", "label": 0},  # 5
    {"task_id": "tides", "criterion_id": "short", "response": "x", "label": 1},  # 6
    standalone(criterion="  "),  # 7
    standalone(weight=0),  # 8
    standalone(lable=1),  # 9
    {"task_id": "tides", "criterion_id": "moon", "prompt": "Q", "response": "x", "label": 1},  # 10
    standalone(prompt=""),  # 11
    {"task_id": "tides", "criterion_id": "moon", "response": "The Moon pulls.", "label": 1},  # 12: good
]


def test_bad_rows_each_get_one_error_and_good_rows_are_kept():
    report = validate_label_rows(enumerate(BAD_ROWS, 1), "labels.jsonl", [TASK], "tasks.jsonl")
    assert [x.line for x in report.labels] == [1, 12]
    errors = {e.line: str(e) for e in report.errors}
    assert sorted(errors) == list(range(2, 12))
    assert errors[2] == (
        "line 2: label: must be 0 or 1 (1: the response does what the criterion says, or commits it when it is "
        "a pitfall), got 'yes'"
    )
    assert errors[3].startswith("line 3: missing criterion (a row needs either prompt, response, criterion, label")
    assert (
        errors[4]
        == "line 4 (task 'tides'): criterion_id: task 'tides' has no criterion 'sun' (its criteria: moon, wind, short)"
    )
    assert "task 'ghost' is not in tasks.jsonl" in errors[5] and "--tasks FILE" in errors[5]
    assert (
        "criterion 'short' of task 'tides' is programmatic" in errors[6] and "label judged criteria only" in errors[6]
    )
    assert errors[7] == "line 7: criterion text is blank: say in words what the response must (not) do"
    assert errors[8] == "line 8: weight is 0: use a positive weight, or a negative one for a pitfall"
    assert errors[9] == "line 9: unknown field 'lable' in row (put free data under 'metadata')"
    assert "also gives prompt" in errors[10] and "keep task_id and criterion_id, or drop them" in errors[10]
    assert errors[11] == "line 11: prompt is empty"


def test_task_rows_without_tasks_and_empty_files(tmp_path):
    row = {"task_id": "tides", "criterion_id": "moon", "response": "x", "label": 1}
    (err,) = validate_label_rows([(1, row)], "labels.jsonl").errors
    assert "no tasks file was given: pass it with --tasks FILE" in str(err)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    (err,) = validate_labels_file(empty).errors
    assert err.line == 0 and "holds no labelled rows" in str(err)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(standalone(label=2)) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"run `harnessrl bench judge --labels .*bad.jsonl` again"):
        load_judge_labels(bad, [TASK])


def test_bundled_labels_resolve_against_the_bundled_sample():
    labels = load_judge_labels()
    assert len(labels) == 120 and all(x.task_id and x.criterion.check is None for x in labels)
    assert len({x.domain for x in labels}) == 5


def test_example_labels_file_is_valid():
    tasks = validate_labels_file(EXAMPLES / "judge_tasks.jsonl")  # not a labels file: every row is refused
    assert tasks.labels == [] and tasks.errors
    from harnessrl.data import load_tasks

    report = validate_labels_file(
        EXAMPLES / "judge_labels.jsonl", load_tasks(EXAMPLES / "judge_tasks.jsonl"), "examples/judge_tasks.jsonl"
    )
    assert report.errors == []
    assert len(report.labels) >= 20 and len({x.domain for x in report.labels}) == 3
    assert {x.task_id is None for x in report.labels} == {True, False}  # both row shapes
    assert {x.label for x in report.labels} == {0, 1}


# ---------------------------------------------------------------------------------------------- CLI
def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_cli_json_on_known_numbers(tmp_path):
    rows = [standalone(response=v, label=y, domain="a" if k % 2 else "b") for k, (v, y) in enumerate(KNOWN)]
    labels = write_jsonl(tmp_path / "labels.jsonl", rows)
    result = runner.invoke(app, ["bench", "judge", "--labels", str(labels), "--backend", FAKE, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["judge"], out["rows"], out["invalid_rows"], out["n"], out["missing"]) == ("value", 6, 0, 6, 0)
    assert out["auc"] == pytest.approx(8 / 9) and out["accuracy"] == pytest.approx(4 / 6)
    assert [b["n"] for b in out["calibration"]] == [1, 2, 0, 2, 1]
    assert set(out["per_domain"]) == {"a", "b"}
    assert [v["verdict"] for v in out["verdicts"]] == pytest.approx([0.9, 0.7, 0.3, 0.6, 0.2, 0.1])
    assert out["verdicts"][0] == {
        "line": 1,
        "domain": "b",
        "task_id": None,
        "criterion_id": "line-1",
        "label": 1,
        "verdict": 0.9,
    }
    assert "reference_vs_poor" not in out and "throughput" not in out  # bundled-sample figures only
    assert out["errors"] == []


def test_cli_tables_and_tasks_file(tmp_path):
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [TASK.model_dump(exclude_none=True)])
    rows = [
        {"task_id": "tides", "criterion_id": "moon", "response": "0.8", "label": 1},
        {"task_id": "tides", "criterion_id": "wind", "response": "0.3", "label": 0},
        standalone(response="0.55", label=1, domain="geo"),
        standalone(response="0.1", label=1, domain="geo", criterion="Names [bold]the Moon[/bold]."),
    ]
    labels = write_jsonl(tmp_path / "labels.jsonl", rows)
    args = ["bench", "judge", "--labels", str(labels), "--tasks", str(tasks), "--backend", FAKE, "--bins", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Agreement with 4 labels (3 positive)" in out
    assert "Largest disagreements" in out and "Names [bold]the Moon[/bold]." in out  # row text is no markup
    assert "science" in out and "geo" in out
    assert "Calibration: label rate per verdict bin (ECE" in out
    assert "[0.00, 0.50)" in out and "[0.50, 1.00]" in out
    # the same rows against the bundled sample (no --tasks): its 'tides' is unknown there
    result = runner.invoke(app, ["bench", "judge", "--labels", str(labels), "--backend", FAKE, "--json"])
    assert result.exit_code == 1
    errors = json.loads(result.stdout)["errors"]
    assert [e["line"] for e in errors] == [1, 2] and json.loads(result.stdout)["n"] == 2
    assert "is not in the bundled sample" in errors[0]["message"]
    result = runner.invoke(app, ["bench", "judge", "--tasks", str(tasks), "--backend", FAKE])
    assert "pass --labels FILE too" in str(result.exception)


def test_cli_bad_rows_reported_like_data_validate(tmp_path):
    labels = tmp_path / "labels.jsonl"
    rows = [json.dumps(standalone(response="0.9")), '{"prompt": "cut', json.dumps(standalone(label="yes"))]
    rows.append(json.dumps(standalone(response="0.2", label=0)))
    labels.write_text("\n".join(rows) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["bench", "judge", "--labels", str(labels), "--backend", FAKE])
    assert result.exit_code == 1
    err = result.stderr
    assert f"{labels}: 2 invalid row(s)" in " ".join(err.split())
    shown = [line for line in err.splitlines() if line.startswith("  ✗ ")]  # one unwrapped line per bad row
    assert [r.split(":")[0] for r in shown] == ["  ✗ line 2", "  ✗ line 3"]
    assert "truncated line" in shown[0] and "label: must be 0 or 1" in shown[1]
    assert "2 row(s) were valid" in " ".join(err.split())
    # nothing valid is lost: the two good rows are measured and printed
    assert "Agreement with 2 labels (1 positive)" in result.stdout
    assert "2 invalid row(s) left out" in " ".join(result.stdout.split())


def test_cli_no_valid_row_loads_no_judge(tmp_path, monkeypatch):
    import harnessrl.judges as judges

    monkeypatch.setattr(judges, "build_judge", lambda *a, **k: pytest.fail("a judge was built for nothing"))
    labels = write_jsonl(tmp_path / "labels.jsonl", [standalone(label=3)])
    result = runner.invoke(app, ["bench", "judge", "--labels", str(labels)])
    assert result.exit_code == 1
    err = " ".join(result.stderr.split())
    assert "1 invalid row(s)" in err and "0 row(s) were valid" in err


def test_cli_bundled_labels_still_give_every_figure():
    args = ["bench", "judge", "--backend", FAKE, "--max-tasks", "1", "--requests", "4", "--batch-sizes", "2"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["labels"] == "the bundled hand labels" and out["n"] == 120
    assert out["auc"] == 0.5  # every verdict 0.5: all ties
    assert out["reference_vs_poor"]["tasks"] == 5 and out["throughput"][0]["batch_size"] == 2


def test_cli_help_documents_the_labels():
    result = runner.invoke(app, ["bench", "judge", "--help"])
    text = " ".join(result.stdout.replace("│", " ").split())
    for word in (
        "--labels",
        "--tasks",
        "--bins",
        "--json",
        "reference_answer, domain, weight",
        "task_id, criterion_id",
    ):
        assert word in text


def test_cli_example_file_with_the_embedded_judge():
    """The real command on the example labels, with the default (embedded semantic) judge: a few seconds."""
    args = ["bench", "judge", "--labels", str(EXAMPLES / "judge_labels.jsonl")]
    result = runner.invoke(app, [*args, "--tasks", str(EXAMPLES / "judge_tasks.jsonl"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["judge"] == "semantic" and out["n"] == out["rows"] == 21 and out["missing"] == 0
    assert set(out["per_domain"]) == {"cooking", "science", "writing"}
    assert sum(b["n"] for b in out["calibration"]) == 21
    assert out["auc"] > 0.5  # better than chance, as docs/judges.md's example output shows
