"""The `harnessrl` command, offline: `data validate`, and `judge` with its errors and a scripted backend.

No model is loaded: a guard makes any build_judge call for a real backend fail the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harnessrl.judges as judges
from harnessrl.cli import app
from harnessrl.errors import DataValidationError, HarnessRLError
from harnessrl.judges import BackendVerdict, GradeRequest

runner = CliRunner()


def flat(text: str) -> str:
    """Output with rich's line wrapping (80 columns off a terminal) undone."""
    return " ".join(text.split())


class KeywordBackend:
    """Satisfied when the response contains the criterion's first word (lower-cased)."""

    name = "keyword"

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        out = []
        for r in requests:
            word = r.criterion.text.split()[0].lower()
            out.append(BackendVerdict(float(word in r.response.lower()), 0.9, f"looked for {word!r}"))
        return out


class KeywordFactory:
    @classmethod
    def from_config(cls, config) -> KeywordBackend:
        return KeywordBackend()


FAKE = f"{__name__}:KeywordFactory"


@pytest.fixture(autouse=True)
def no_real_judge(monkeypatch):
    """Any judge but the scripted one here would load a model: fail instead."""
    real = judges.build_judge

    def guarded(config=None):
        backend = getattr(config, "backend", None) or (config or {}).get("backend")
        assert backend == FAKE, f"test would build the real {backend!r} judge"
        return real(config)

    monkeypatch.setattr(judges, "build_judge", guarded)


def crit(cid: str, text: str, weight: float = 1, **kw) -> dict:
    return {"id": cid, "text": text, "weight": weight, **kw}


TASKS = [
    {
        "id": "tides",
        "domain": "science",
        "prompt": "Why are there tides?",
        "reference_answer": "The Moon's gravity pulls the oceans; the Sun helps.",
        "rubric": [
            crit("moon", "Moon is named as the main cause.", 2),
            crit("sun", "Sun is mentioned.", 1),
            crit("short", "At most 30 words.", 1, check={"type": "word_count", "max": 30}),
            crit("wind", "Wind is blamed.", -1),
        ],
        "metadata": {"poor_answer": "Wind pushes the water around."},
    },
    {
        "id": "haiku",
        "domain": "writing",
        "prompt": "Write a haiku about snow.",
        "rubric": [
            crit("snow", "Snow is mentioned.", 1),
            crit("lower", "All lower case.", 1, check={"type": "letter_case", "case": "lower"}),
        ],
    },
    {
        "id": "sum",
        "domain": "science",
        "prompt": "Summarise photosynthesis.",
        "rubric": [crit("light", "Light is named as the energy source.", 1)],
    },
]


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in TASKS) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def planted_file(tmp_path: Path) -> Path:
    bad_prompt = {**TASKS[1], "id": "bad-prompt", "prompt": ""}
    bad_check = {**TASKS[2], "id": "bad-check", "rubric": [crit("c", "x", check={"type": "nope"})]}
    odd_field = {**TASKS[2], "id": "odd", "[bold]odd[/bold]": 1}
    lines = [
        json.dumps(TASKS[0]),  # 1
        '{"id": "cut", "prompt": "Why',  # 2
        json.dumps(bad_prompt),  # 3
        json.dumps(TASKS[1]),  # 4
        json.dumps(bad_check),  # 5
        json.dumps(TASKS[0]),  # 6: duplicate id
        json.dumps(odd_field),  # 7: markup-looking field name
    ]
    path = tmp_path / "planted.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------- data validate
def test_data_validate_good_file(good_file):
    result = runner.invoke(app, ["data", "validate", str(good_file)])
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert "3 valid tasks (format: harnessrl)" in out
    assert "Tasks per domain" in out
    assert "science" in out and "writing" in out
    assert "criteria: 7" in out
    assert "tasks with a reference answer: 1" in out


def test_data_validate_rar_file_with_domain(tmp_path):
    row = {
        "question": "Why are there tides?",
        "reference_answer": "The Moon.",
        "rubric": [{"title": "Moon", "description": "Names the Moon.", "weight": 5}],
    }
    path = tmp_path / "rar.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["data", "validate", str(path), "--domain", "geoscience"])
    assert result.exit_code == 0, result.output
    assert "1 valid tasks (format: rar)" in flat(result.stdout)
    assert "geoscience" in result.stdout


def test_data_validate_planted_defects(planted_file):
    result = runner.invoke(app, ["data", "validate", str(planted_file)])
    assert result.exit_code == 1
    err = result.stderr
    assert f"{planted_file}: 5 invalid row(s)" in flat(err)
    rows = [line for line in err.splitlines() if line.startswith("  ✗ ")]
    assert len(rows) == 5, err  # one line per bad row, never wrapped
    assert [r.split(":")[0] for r in rows] == [
        "  ✗ line 2",
        "  ✗ line 3 (task 'bad-prompt')",
        "  ✗ line 5 (task 'bad-check')",
        "  ✗ line 6 (task 'tides')",
        "  ✗ line 7 (task 'odd')",
    ]
    assert "truncated line" in rows[0]
    assert "prompt is empty" in rows[1]
    assert "unknown programmatic check 'nope'" in rows[2] and "word_count" in rows[2]
    assert "first seen on line 1" in rows[3]
    assert "unknown field '[bold]odd[/bold]'" in rows[4]  # row text is not read as markup
    assert "[red]" not in err
    assert "2 row(s) were valid" in flat(err)
    assert result.stdout == ""


def test_data_validate_explicit_format(good_file):
    result = runner.invoke(app, ["data", "validate", str(good_file), "--format", "rar"])
    assert result.exit_code == 1
    assert "3 invalid row(s)" in flat(result.stderr)


def test_data_validate_missing_file(tmp_path):
    result = runner.invoke(app, ["data", "validate", str(tmp_path / "nope.jsonl")])
    assert result.exit_code != 0
    assert isinstance(result.exception, HarnessRLError)
    assert "no such file" in str(result.exception)


def test_data_path():
    result = runner.invoke(app, ["data", "path"])
    assert result.exit_code == 0
    assert "train:" in result.stdout and "heldout.jsonl" in result.stdout


# ------------------------------------------------------------------------------------ judge errors
def judge_error(args: list[str]) -> str:
    result = runner.invoke(app, ["judge", *args])
    assert result.exit_code != 0
    assert isinstance(result.exception, HarnessRLError), result.exception
    return str(result.exception)


def test_judge_nothing_to_grade(good_file):
    msg = judge_error(["--data", str(good_file), "--task", "tides"])
    assert msg.startswith("nothing to grade")
    assert "--response" in msg and "--responses" in msg


def test_judge_unknown_task(good_file):
    msg = judge_error(["--data", str(good_file), "--task", "nope", "--response", "hi"])
    assert msg.startswith("unknown task 'nope'")
    msg = judge_error(["--data", str(good_file), "--task", "nope", "--reference"])
    assert msg == "unknown task 'nope'"


def test_judge_response_without_task(good_file):
    msg = judge_error(["--data", str(good_file), "--response", "hi"])
    assert "response: no task id" in msg


def test_judge_reference_and_poor_need_what_they_grade(good_file):
    assert "need --task ID" in judge_error(["--data", str(good_file), "--reference"])
    assert "has no reference answer" in judge_error(["--data", str(good_file), "--task", "sum", "--reference"])
    assert "has no metadata.poor_answer" in judge_error(["--data", str(good_file), "--task", "sum", "--poor"])


def test_judge_bad_responses_files(good_file, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert "no responses in it" in judge_error(["--data", str(good_file), "--responses", str(empty)])
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"response": "ok", "task_id": "tides"}\n{"response": \n', encoding="utf-8")
    assert "line 2: not valid JSON" in judge_error(["--data", str(good_file), "--responses", str(broken)])
    shape = tmp_path / "shape.jsonl"
    shape.write_text('{"text": "ok"}\n', encoding="utf-8")
    assert 'line 1: expected {"response"' in judge_error(["--data", str(good_file), "--responses", str(shape)])
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"response": "ok", "task_id": "ghost"}\n', encoding="utf-8")
    assert "unknown task 'ghost'" in judge_error(["--data", str(good_file), "--responses", str(unknown)])


def test_judge_invalid_task_file(planted_file):
    result = runner.invoke(app, ["judge", "--data", str(planted_file), "--task", "tides", "--response", "hi"])
    assert isinstance(result.exception, DataValidationError)
    assert [e.line for e in result.exception.errors] == [2, 3, 5, 6, 7]


def test_main_maps_harnessrl_error_to_exit_1(good_file):
    code = "import sys; from harnessrl.cli import main; sys.argv = ['harnessrl', *sys.argv[1:]]; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "judge", "--data", str(good_file), "--task", "nope", "--response", "hi"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "unknown task 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- judge, scripted
def test_judge_json_with_scripted_backend(good_file):
    result = runner.invoke(
        app,
        [
            "judge",
            "--data",
            str(good_file),
            "--task",
            "tides",
            "--response",
            "The Moon pulls the water.",
            "--reference",
            "--poor",
            "--backend",
            FAKE,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [o["label"] for o in out] == ["response", "reference answer", "poor answer"]
    given, ref, poor = out
    # moon 2 + short 1 of 4, sun 0, no wind
    assert given["reward"] == pytest.approx(3 / 4)
    assert {v["criterion_id"]: v["source"] for v in given["verdicts"]}["short"] == "programmatic"
    assert ref["reward"] == pytest.approx(1.0)
    # only short (1 of 4) and the wind pitfall: (1 − 1) / 4
    assert poor["reward"] == pytest.approx(0.0)


def test_judge_responses_file_and_table(good_file, tmp_path):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(
        '{"response": "snow falls\\nsoftly", "task_id": "haiku"}\n{"response": "Light drives it."}\n',
        encoding="utf-8",
    )
    result = runner.invoke(
        app, ["judge", "--data", str(good_file), "--task", "sum", "--responses", str(responses), "--backend", FAKE]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "haiku (writing) — responses.jsonl:1 — judge: keyword" in out
    assert "sum (science) — responses.jsonl:2 — judge: keyword" in out
    assert out.count("reward = 1.000") == 2
    assert "judge calls: 2, missing verdicts: 0" in out


def test_judge_text_responses_and_config(good_file, tmp_path):
    text = tmp_path / "answers.txt"
    text.write_text("SNOW ON THE HILL\\nquiet\n", encoding="utf-8")
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: {FAKE}\n  missing_retries: 0\n", encoding="utf-8")
    result = runner.invoke(
        app,
        [
            "judge",
            "--data",
            str(good_file),
            "--task",
            "haiku",
            "--responses",
            str(text),
            "--config",
            str(cfg),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    (res,) = json.loads(result.stdout)
    v = {x["criterion_id"]: x["value"] for x in res["verdicts"]}
    assert v == {"snow": 1.0, "lower": 0.0}  # "\n" in a text line is a newline; upper case fails
    assert res["reward"] == pytest.approx(0.5)


# ----------------------------------------------------------------------------- run directories (issue 20)
def _harnessrl(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from harnessrl.cli import main; sys.argv = ['harnessrl', *sys.argv[1:]]; main()"
    env = {**os.environ, "COLUMNS": "400"}  # one message, one line
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("name", ["harness.json", "summary.json", "best.json"])
def test_a_corrupt_run_file_is_a_one_line_error_naming_it(tmp_path, name):
    from harnessrl.records.run_dir import RunDir

    run = RunDir(tmp_path / "run").path
    (run / name).write_text('{"versions": {"task_sam', encoding="utf-8")  # cut short
    proc = _harnessrl("report", "--run-dir", str(run))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (said,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert said.startswith(f"error: {run / name}: cannot be read as JSON") and "damaged" in said


def test_a_bad_setting_names_where_it_came_from(tmp_path):
    from harnessrl.trainer.train_config import load_train_config

    path = tmp_path / "c.yaml"
    path.write_text("grpo:\n  max_stepz: 3\n", encoding="utf-8")
    with pytest.raises(HarnessRLError) as e:
        load_train_config(path, ["grpo.learning_rate=fast", "seed=1"])
    said = str(e.value)
    assert f"invalid settings (in {path} and -s)" in said
    assert "grpo.learning_rate (from -s grpo.learning_rate=fast)" in said
    assert f"grpo.max_stepz (from {path}): unknown setting" in said
    with pytest.raises(HarnessRLError, match=r"grpo.num_generations \(from -s grpo=\{num_generations: 1\}\)"):
        load_train_config(None, ["grpo={num_generations: 1}"])


def test_train_ends_non_zero_when_the_final_evaluation_has_no_score(tmp_path, monkeypatch):
    import harnessrl.trainer.run as run_module
    from harnessrl.records.run_dir import RunDir

    RunDir(tmp_path / "run").config.write_text("method: fixed\n")  # a run directory has its config from the start
    unscored = "no task of 2 could be scored: every completion's reward is missing"
    summary = run_module.RunSummary(
        run_dir=tmp_path / "run",
        steps=2,
        wall_seconds=1.0,
        eval={"test": {"before": None, "final": None, "final_step": 2, "final_no_score_reason": unscored}},
    )
    monkeypatch.setattr(run_module, "train", lambda config, **kw: summary)
    out = runner.invoke(app, ["train", "-s", f"run_dir={tmp_path / 'run'}"])
    assert out.exit_code == 1
    assert "the final test evaluation has no score" in flat(out.output) and unscored in flat(out.output)
