"""Run files read through harnessrl.records: the checkpoints' names, the roll-back's lines, harness.json, the tail of
metrics.jsonl and bench.json, each with a clear answer for a malformed file."""

from __future__ import annotations

import json
import logging

import pytest

from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import BenchManifest, read_bench_manifest
from harnessrl.records.checkpoints import (
    checkpoint_dir,
    checkpoint_folders,
    checkpoint_step,
    complete_checkpoint,
    last_checkpoint,
    step_of_checkpoint,
)
from harnessrl.records.run_dir import RunDir, read_jsonl_lines, read_tail
from harnessrl.records.run_record import Missing, last_logged_step, read_harness_file
from harnessrl.records.steps import rollout_file, rollout_files


def test_one_checkpoint_name_for_every_reader(tmp_path):
    run = RunDir(tmp_path / "run")
    assert checkpoint_dir(run, 7) == checkpoint_dir(run.path, 7) == run.checkpoints / "checkpoint-7"
    assert step_of_checkpoint("/x/checkpoint-12") == 12 and step_of_checkpoint("best") is None
    assert checkpoint_step(None) == 0 and checkpoint_step(checkpoint_dir(run, 3)) == 3
    with pytest.raises(ValueError, match="not a checkpoint-<step> folder"):
        checkpoint_step("final")
    for step in (2, 10):
        checkpoint_dir(run, step).mkdir()
        (checkpoint_dir(run, step) / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    checkpoint_dir(run, 12).mkdir()  # cut short: no trainer_state.json
    (run.checkpoints / "checkpoint-x").mkdir()
    (run.checkpoints / "checkpoint-16").write_text("a file")
    (run.checkpoints / "final").mkdir()
    assert [s for s, _ in checkpoint_folders(run)] == [2, 10, 12]  # by step, complete or not, folders only
    assert last_checkpoint(run.path, warn=False) == str(checkpoint_dir(run, 10))
    (checkpoint_dir(run, 12) / "trainer_state.json").write_text('{"global_st')  # torn mid-write
    assert not complete_checkpoint(checkpoint_dir(run, 12))
    assert checkpoint_folders(tmp_path / "no-run") == []


def test_jsonl_lines_keep_the_text_and_read_what_a_roll_back_decides_on(tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [
        '{"kind": "commit", "step": 3, "candidate_id": "c1"}',
        '{"kind": "trial", "step": "4", "candidate_id": 7}',
        '{"metric": 1.0}',
        "[1, 2]",
        '{"step": "x", "kind": "commit", "candidate_id": "c2"}',
        '{"kind": "fail',
    ]
    path.write_text("\n".join(rows[:3]) + "\n\n" + "\n".join(rows[3:]))
    lines = read_jsonl_lines(path)
    assert [line.text for line in lines] == rows  # blank lines left out, the rest as written
    assert [line.step for line in lines] == [3, 4, 0, None, None, None]
    assert [line.kind for line in lines] == ["commit", "trial", None, None, "commit", None]
    assert [line.candidate_id for line in lines] == ["c1", "7", None, None, "c2", None]
    assert read_jsonl_lines(tmp_path / "none.jsonl") == []


def test_harness_file_says_why_it_has_no_state(tmp_path):
    path = tmp_path / "harness.json"
    assert read_harness_file(path) == Missing("no harness.json: no harness state saved")
    for content in ("[]", "null"):
        path.write_text(content)
        assert read_harness_file(path) == Missing("harness.json is not a JSON object")
    path.write_text("{not json")
    with pytest.raises(HarnessRLError, match=r"harness\.json: cannot be read as JSON"):
        read_harness_file(path)
    path.write_text('{"versions": {"task_sampling": 1}}')
    assert read_harness_file(path) == {"versions": {"task_sampling": 1}}


def test_last_logged_step_passes_over_a_line_being_written(tmp_path):
    assert last_logged_step(tmp_path) is None
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n{"step": 3, "lo')
    assert last_logged_step(tmp_path) == 2
    assert read_tail(tmp_path / "metrics.jsonl", 1) == '{"step": 3, "lo'
    assert read_tail(tmp_path / "missing.log") == ""


def test_rollout_files_by_step(tmp_path):
    (tmp_path / "rollouts").mkdir()
    for step in (12, 3):
        rollout_file(tmp_path, step).write_text("")
    assert rollout_files(tmp_path) == [(3, rollout_file(tmp_path, 3)), (12, rollout_file(tmp_path, 12))]
    assert rollout_file(tmp_path, 3).name == "step_000003.jsonl"


def test_bench_manifest_read_back_or_a_fresh_one(tmp_path, caplog):
    """The bench goes on from its bench.json (methods, seeds and runs as written); a damaged one is named in a
    warning and a fresh manifest starts (the run folders say what ran)."""
    from harnessrl.bench.config import BenchConfig
    from harnessrl.bench.runner import _Manifest

    path = tmp_path / "bench.json"
    assert read_bench_manifest(path) is None
    run = {"attempts": [{"wall_seconds": 2.0}], "method": "harness", "seed": 1, "status": "done", "x": 1}
    data = {"created": "t0", "methods": {"harness": {"method": "harness"}}, "seeds": [1, 0], "runs": {"h/1": run}}
    path.write_text(json.dumps(data))
    manifest = read_bench_manifest(path)
    assert isinstance(manifest, BenchManifest)
    assert (manifest.created, manifest.methods, manifest.seeds) == ("t0", data["methods"], [1, 0])
    assert manifest.runs["h/1"].model_dump(mode="json") == run  # the row as written, its keys in order
    cfg = BenchConfig(base={"model": "tiny"}, out=str(tmp_path), methods=["fixed"], seeds=[2])
    kept = _Manifest(cfg, None).data
    assert kept.created == "t0" and kept.seeds == [0, 1, 2] and kept.model_dump(mode="json")["runs"] == {"h/1": run}
    for bad in ("{torn", "[1]", '{"seeds": "all"}'):
        path.write_text(bad)
        with caplog.at_level(logging.WARNING):
            fresh = _Manifest(cfg, None).data
        assert fresh.runs == {} and fresh.seeds == [2]
        assert "bench.json" in caplog.text and "starting a new one" in caplog.text
        caplog.clear()
