"""The run record: one typed reader of a run directory, Missing(reason) where a file is not there, and the
run's totals over every process read through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harnessrl.errors import HarnessRLError
from harnessrl.records import Missing, RunRecord
from harnessrl.records.run_record import read_summary
from harnessrl.trainer.totals import run_totals


def _jsonl(path: Path, rows: list[dict], torn: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + torn, encoding="utf-8")


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    config = {"method": "harnessrl", "data": {"train": "t.jsonl"}, "grpo": {"max_steps": 3}, "other": {"x": 1}}
    (run / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return run


def test_a_run_still_going_says_what_it_lacks_and_skips_a_torn_line(tmp_path):
    run = _run(tmp_path)
    _jsonl(run / "metrics.jsonl", [{"step": 1, "reward": 0.5, "rollouts/generated": 8}], torn='{"step": 2, "rew')
    _jsonl(
        run / "eval.jsonl",
        [
            {"step": 0, "split": "test", "overall": 0.2, "per_domain": {"a": 0.2}},
            {"step": 0, "split": "validation", "overall": None, "no_score_reason": "judge failed"},
            {"step": -1, "overall": 0.9, "source": "harnessrl eval"},  # not part of the training's curve
        ],
    )
    record = RunRecord.load(run)
    assert record.config.method == "harnessrl" and record.config.grpo.max_steps == 3
    assert record.series("reward") == [(1, 0.5)] and record.last_step == 1
    assert [(e.split, e.overall, e.graded_with) for e in record.evaluations] == [
        ("test", 0.2, "rubric"),
        ("validation", None, "rubric"),
    ]
    assert not record.ended and record.summary == Missing("no summary.json: the run has not ended")
    assert isinstance(record.accounting, Missing) and isinstance(record.best, Missing)
    assert isinstance(record.harness, Missing)


def test_the_totals_are_the_summarys_accounting(tmp_path):
    run = _run(tmp_path)
    summary = {"steps": 3, "wall_seconds": 10.0, "accounting": {"rollouts_generated": 24, "judge_calls": 48}}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (run / "best.json").write_text(json.dumps({"step": 2, "overall": 0.4, "split": "validation"}), encoding="utf-8")
    record = RunRecord.load(run)
    assert record.ended and record.accounting.rollouts_generated == 24 and record.accounting.rollouts_trial is None
    assert record.best.step == 2 and read_summary(run).steps == 3


def test_not_a_run_directory_and_a_damaged_file_are_errors(tmp_path):
    with pytest.raises(HarnessRLError, match=r"is .* a run directory"):
        RunRecord.load(tmp_path)
    run = _run(tmp_path)
    (run / "summary.json").write_text('{"steps": 3, "wall', encoding="utf-8")
    with pytest.raises(HarnessRLError, match=r"summary\.json: cannot be read as JSON"):
        RunRecord.load(run)


def test_totals_over_a_killed_and_resumed_run(tmp_path):
    """Two processes: failures once per (step, task, kind, criterion), every evolution point and trial, and the
    first process's wall time up to its last record (its rolled-back metrics included)."""
    run = _run(tmp_path)
    failure = {"kind": "failure", "step": 1, "task_id": "a", "failure": "lax", "evidence": {"criterion_id": "c1"}}
    events = [
        {"time": 100.0, "kind": "run_start", "step": 0},
        {"time": 101.0, **failure},
        {"time": 102.0, "kind": "evolution_point", "step": 1, "seconds": 2.0},
        {"time": 103.0, "kind": "trial", "step": 1, "seconds": 1.5},
        {"time": 200.0, "kind": "run_start", "step": 1},
        {"time": 201.0, **failure},  # the step trained again detects it again: counted once
        {"time": 202.0, "kind": "evolution_point", "step": 2, "seconds": 3.0, "mode": "external"},
    ]
    _jsonl(run / "events.jsonl", events)
    _jsonl(run / "metrics.jsonl", [{"step": 1, "time": 104.0, "time/detectors": 0.5, "time/memory": 0.25}])
    _jsonl(run / "rolled_back" / "metrics.jsonl", [{"step": 2, "time": 150.0}])
    totals = run_totals(RunRecord.load(run))
    assert totals.failures == {"lax": 1} and totals.processes == 2
    assert totals.evolution_points == 2 and totals.points_by_mode == {"in-process": 1, "external": 1}
    assert totals.evolver_seconds == 5.0 and totals.trial_seconds == 1.5
    assert totals.earlier_wall_seconds == 50.0  # 100 -> 150, the rolled-back step's record
    assert totals.earlier_monitor_seconds == {"detectors": 0.5, "memory": 0.25}


def test_the_summary_is_written_as_the_reader_reads_it_its_keys_in_the_files_order():
    """summary.json is the reader's own model dumped: every top-level key in the order the file has always had, a
    split's keys as set (a validation split has no at_best, a scored one no final_no_score_reason), and the
    totals' counters as written (an int stays an int)."""
    from harnessrl.records.run_record import Accounting, RunSummaryRecord, SplitSummary

    validation = SplitSummary(graded_with="gold", before=None, final=0.5, final_step=2)
    validation.best, validation.best_step = 0.5, 2
    summary = RunSummaryRecord(
        run_dir=Path("/runs/a"),
        steps=2,
        wall_seconds=3.5,
        eval={"validation": validation},
        accounting=Accounting.model_validate({"rollouts_generated": 8.0, "trial_seconds": 0, "processes": 1}),
    )
    written = summary.model_dump(mode="json")
    assert list(written) == [
        "run_dir", "steps", "wall_seconds", "timings", "eval_before", "eval_after", "best", "reward_first",
        "reward_last", "extra", "method", "evolver_enabled", "steps_to_best", "eval", "accounting",
    ]  # fmt: skip
    assert written["run_dir"] == "/runs/a"
    assert written["eval"] == {
        "validation": {
            "graded_with": "gold",
            "before": None,
            "final": 0.5,
            "final_step": 2,
            "best": 0.5,
            "best_step": 2,
        }
    }
    assert json.dumps(written["accounting"]) == '{"rollouts_generated": 8.0, "trial_seconds": 0, "processes": 1}'
    assert RunSummaryRecord.model_validate(json.loads(json.dumps(written))).model_dump(mode="json") == written
