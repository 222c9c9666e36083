"""Issue 29's faults, each as it was met, and what now holds:

1. the hold lease is the run's to set (``evolver.hold_s``): a client may ask for less, never for more;
2. a step the training pool cannot fill is refused before any run directory is written, naming the pool;
3. a full disk, whatever library's error says so, ends in one paragraph (what ran out, where, what is intact,
   how to resume), with ``run_end`` recorded, and ``--resume`` goes on once space is freed;
4. data: a UTF-8 byte-order mark, a size limit per field, a mapping that names an absent column, a preset row
   without its prompt column;
5. a resumed run's events count each rolled-back step once, and a stale ``.lock`` is said to be stale.

Quick but for three real runs on the tiny model (the lease, the full disk, the resumed run).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import datasets
import pytest
import yaml
from helpers import TINY_POLICY_TASKS

from harnessrl.data import load_hf_dataset, validate_file
from harnessrl.data.schema import MAX_CRITERION_CHARS, MAX_PROMPT_CHARS, MAX_REFERENCE_CHARS, Task
from harnessrl.errors import ConfigError, DataValidationError, HarnessRLError
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.interfaces.tools import HoldTraining
from harnessrl.records.checkpoints import last_checkpoint
from harnessrl.records.run_dir import LOCK_NAME, RunDir, is_disk_full
from harnessrl.records.steps import Recorder
from harnessrl.trainer.resume import roll_back
from harnessrl.trainer.run import train
from harnessrl.trainer.train_config import TrainConfig, load_train_config


def _row(tid: str, domain: str = "d") -> dict:
    return {
        "id": tid,
        "domain": domain,
        "prompt": f"Say something about {tid}.",
        "reference_answer": f"Something about {tid}.",
        "rubric": [{"id": "c1", "text": f"Mentions {tid}", "weight": 2}, {"id": "c2", "text": "Is kind", "weight": 1}],
    }


def _jsonl(path: Path, rows: list, prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))
    return path


def _config(run_dir: Path, train_file: Path, model: str = "unused", method: str = "fixed", **sections) -> TrainConfig:
    grpo = {"num_generations": 2, "tasks_per_step": 2, "max_completion_length": 4, "learning_rate": 1e-3,
            "max_steps": 2, "save_steps": 1, **sections.pop("grpo", {})}  # fmt: skip
    return TrainConfig.model_validate(
        {
            "run_dir": str(run_dir),
            "model": model,
            "device": "cpu",
            "method": method,
            "data": {"train": str(train_file), "validation": None, "test": None},
            "grpo": grpo,
            "eval": {"every_steps": None, "before_training": False},
            "harness": {"memory": {"enabled": False}},
            **sections,
        }
    )


# ------------------------------------------------------------------------------------------ 1. the lease


class Trainer(threading.Thread):
    """Steps 1, 2, 3, ... calling the service at every step boundary, as the evolution callback does."""

    def __init__(self, service: EvolutionService, steps: int):
        super().__init__(daemon=True)
        self.service, self.steps, self.step = service, steps, 0

    def run(self):
        for step in range(1, self.steps + 1):
            time.sleep(0.02)
            self.step = step
            self.service.step_boundary(step)


def test_a_client_asking_for_a_longer_lease_than_the_run_grants_gets_the_runs(tmp_path):
    """Once: `evolver.hold_s=20` in the run, an evolver asking 300 s (its own default) held training 300 s."""
    tasks = [Task.model_validate(_row("t1"))]
    trainer = None
    service = EvolutionService(
        Harness(tasks), Recorder(None), None, None, RunDir(tmp_path), list, lambda: trainer.step, max_hold_s=0.5
    )
    service.training = True
    trainer = Trainer(service, steps=6)
    trainer.start()
    got = service.hold_training(HoldTraining(seconds=3600, wait_s=5))  # and then the evolver dies: no release
    assert got.held and got.lease_s == 0.5
    assert "asked for a lease of 3600 s; this run grants at most 0.5 s (its evolver.hold_s)" in got.note
    trainer.join(timeout=120)  # held for the 3600 s asked, it would still be at its step after this
    assert not trainer.is_alive() and trainer.step == 6  # training went on after the run's lease
    (held,) = [e for e in RunDir(tmp_path).read("events.jsonl") if e.get("action") == "held"]
    assert (held["lease_s"], held["asked_s"]) == (0.5, 3600)
    assert service.hold.lease(0.2) == (0.2, "")  # less than the run's limit: as asked
    assert service.hold.lease(None)[0] == 0.5  # none named: the run's


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("one_torch_thread")
def test_a_run_holds_training_for_at_most_its_own_hold_s(tmp_path, tiny_model_dir):
    """A real run in external mode (`evolver.hold_s: 1`): an evolver that asks for an hour and dies holds it
    for the run's second, and training ends."""
    data = _jsonl(tmp_path / "train.jsonl", TINY_POLICY_TASKS)
    config = _config(
        tmp_path / "run", data, str(tiny_model_dir), "harnessrl", grpo={"max_steps": 3, "save_steps": 100},
        evolver={"mode": "external", "hold_s": 1.0},
    )  # fmt: skip
    seen: dict = {}

    def hook(trainer, run):
        from harnessrl.evolution.point import EvolutionCallback

        service = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, EvolutionCallback)).service

        def evolver():
            seen["hold"] = service.hold_training(HoldTraining(seconds=3600, wait_s=120))  # never released

        threading.Thread(target=evolver, daemon=True).start()

    summary = train(config, trainer_hook=hook)
    assert summary.steps == 3 and seen["hold"].held and seen["hold"].lease_s == 1.0
    events = RunDir(tmp_path / "run", create=False).read("events.jsonl")
    (point,) = [e for e in events if e["kind"] == "evolution_point"]
    # the lease ran out (the run's second, not the hour asked): training ended within the test's timeout, and the
    # point says it expired; how many seconds it took is a loaded machine's business, not asserted
    assert point["ended"] == "expired" and point["seconds"] > 0
    assert [(e["action"], e.get("lease_s")) for e in events if e["kind"] == "training_hold"] == [
        ("held", 1.0),
        ("expired", None),
    ]


def test_the_evolver_command_asks_for_the_live_runs_lease(tmp_path):
    from harnessrl.cli import _lease

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"evolver": {"mode": "external", "hold_s": 20}}))
    assert _lease(load_train_config(None, None).evolver, run) == 20  # the run's, not the command's default 300
    assert _lease(load_train_config(None, ["evolver.hold_s=5"]).evolver, run) == 5  # asked for less: as asked
    assert _lease(load_train_config(None, None).evolver, None) == 300  # --url: the default (the run cuts it)


# ------------------------------------------------------------------------------------ 2. a pool too small


@pytest.mark.parametrize(
    ("grpo", "said"),
    [
        ({"tasks_per_step": 5}, "a step needs 5 distinct ones (grpo.tasks_per_step 5)"),
        (
            {"tasks_per_step": 2, "gradient_accumulation_steps": 3},
            "a step needs 6 distinct ones (grpo.tasks_per_step 2 x grpo.gradient_accumulation_steps 3)",
        ),
    ],
)
def test_a_step_the_pool_cannot_fill_is_refused_before_any_run_dir_is_written(tmp_path, grpo, said):
    """Once: `-s grpo.tasks_per_step=41` on the demo's 40 tasks trained no step, wrote a run and exited 0."""
    data = _jsonl(tmp_path / "train.jsonl", [_row(f"t{i}") for i in range(4)])
    run = tmp_path / "run"
    with pytest.raises(ConfigError, match="the training pool holds 4 task") as e:
        train(_config(run, data, grpo=grpo))
    assert said in str(e.value) and "no step could be trained" in str(e.value)
    assert not run.exists()  # nothing written, not even the lock's directory


# ---------------------------------------------------------------------------------------------- 3. a full disk


def test_a_full_disk_is_read_from_the_libraries_own_errors(tmp_path, monkeypatch):
    from safetensors import SafetensorError

    assert is_disk_full(SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert is_disk_full(sqlite3.OperationalError("database or disk is full"))
    assert is_disk_full(RuntimeError("x")) is False and is_disk_full(ValueError("no space")) is False
    torch_short_write = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    assert not is_disk_full(torch_short_write)  # it names no cause: only beside a file system that is full
    assert not is_disk_full(torch_short_write, tmp_path)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1 << 20))
    assert is_disk_full(torch_short_write, tmp_path)


@pytest.mark.usefixtures("one_torch_thread")
def test_a_full_disk_ends_in_one_paragraph_with_run_end_and_resume_goes_on(tmp_path, tiny_model_dir, monkeypatch):
    """Once: safetensors' SafetensorError ('No space left on device (os error 28)', not an OSError) ended the run
    in a 40-line traceback, without run_end."""
    import transformers.modeling_utils as mu
    from safetensors import SafetensorError

    data = _jsonl(tmp_path / "train.jsonl", TINY_POLICY_TASKS)
    config = _config(tmp_path / "run", data, str(tiny_model_dir))
    real = mu.safe_save_file

    def full_at_checkpoint_2(tensors, filename, *args, **kwargs):
        if "checkpoint-2" in str(filename):
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(mu, "safe_save_file", full_at_checkpoint_2)
    with pytest.raises(HarnessRLError) as e:
        train(config)
    monkeypatch.undo()
    said = str(e.value)
    assert "\n" not in said  # one paragraph
    for part in (
        "the disk filled up while saving checkpoint-2, at step 2",
        "No space left on device (os error 28)",
        "Intact: checkpoint-1 (the last complete checkpoint); harness.json",
        "checkpoint-2 was cut short: --resume skips it",
        f"then run the same command with --resume: it goes on from {tmp_path / 'run/checkpoints/checkpoint-1'}",
        "run_end is recorded in events.jsonl (reason: disk_full)",
    ):
        assert part in said, (part, said)
    run = RunDir(tmp_path / "run", create=False)
    (end,) = [e for e in run.read("events.jsonl") if e["kind"] == "run_end"]
    assert (end["step"], end["reason"], end["resume_from"]) == (2, "disk_full", "checkpoint-1")
    assert not (run.path / LOCK_NAME).exists()

    summary = train(config, resume=True)  # space freed (the save works again)
    assert summary.steps == 2 and last_checkpoint(run) == str(run.checkpoints / "checkpoint-2")
    ends = [e for e in run.read("events.jsonl") if e["kind"] == "run_end"]
    assert [e.get("reason") for e in ends] == [None]  # the failed end was of step 2, trained again
    assert [e.get("reason") for e in run.read("rolled_back/events.jsonl") if e["kind"] == "run_end"] == ["disk_full"]


# ---------------------------------------------------------------------------------------------------- 4. data


def test_a_jsonl_file_with_a_byte_order_mark_loads(tmp_path):
    """Once: 'Unexpected UTF-8 BOM' for a file a Windows editor saved."""
    report = validate_file(_jsonl(tmp_path / "bom.jsonl", [_row("t1"), _row("t2")], prefix=b"\xef\xbb\xbf"))
    assert report.ok and [t.id for t in report.tasks] == ["t1", "t2"]


def test_a_field_over_its_size_limit_is_refused_naming_its_line(tmp_path):
    """Once: a 50 MB reference_answer was taken without a word."""
    rows = [
        _row("ok"),
        {**_row("big-ref"), "reference_answer": "x" * (MAX_REFERENCE_CHARS + 1)},
        {**_row("big-prompt"), "prompt": [{"role": "user", "content": "x" * (MAX_PROMPT_CHARS + 1)}]},
        {**_row("big-crit"), "rubric": [{"id": "c1", "text": "x" * (MAX_CRITERION_CHARS + 1), "weight": 1}]},
    ]
    errors = [str(e) for e in validate_file(_jsonl(tmp_path / "t.jsonl", rows)).errors]
    assert errors == [
        f"line 2 (task 'big-ref'): reference_answer: {MAX_REFERENCE_CHARS + 1:,} characters long, over the limit of "
        f"{MAX_REFERENCE_CHARS:,} (harnessrl.data.schema.MAX_REFERENCE_CHARS): shorten it, or leave it out (it is "
        "optional)",
        f"line 3 (task 'big-prompt'): prompt: {MAX_PROMPT_CHARS + 1:,} characters long, over the limit of "
        f"{MAX_PROMPT_CHARS:,} (harnessrl.data.schema.MAX_PROMPT_CHARS): shorten its turns",
        f"line 4 (task 'big-crit'): criterion 1 ('c1') text: {MAX_CRITERION_CHARS + 1:,} characters long, over the "
        f"limit of {MAX_CRITERION_CHARS:,} (harnessrl.data.schema.MAX_CRITERION_CHARS): shorten it",
    ]


def test_a_mapping_that_names_an_absent_column_says_which_and_what_the_dataset_has():
    """Once: 'line 1: missing domain; missing rubric', and `harnessrl data validate dataset` (no such file)."""
    ds = datasets.Dataset.from_list([{"question": "Why tides?", "criteria": "[]", "area": "x"}])
    with pytest.raises(ConfigError) as e:
        load_hf_dataset(ds, {"prompt": "question", "rubric": "rubrics", "domain": "topic"})
    said = str(e.value)
    assert "mapping['rubric'] names the column 'rubrics', which dataset does not have" in said
    assert "mapping['domain'] names the column 'topic'" in said
    assert "Its columns: 'question', 'criteria', 'area'" in said and "default_domain=" in said
    assert "harnessrl data validate" not in said
    with pytest.raises(ConfigError, match="dataset has no 'rubric' column and the mapping names none"):
        load_hf_dataset(ds, {"prompt": "question"}, default_domain="science")


def test_bad_dataset_rows_point_at_load_hf_dataset_not_at_a_file():
    ds = datasets.Dataset.from_list([{"q": "", "r": json.dumps([{"id": "c1", "text": "x", "weight": 1}])}])
    with pytest.raises(DataValidationError) as e:
        load_hf_dataset(ds, {"prompt": "q", "rubric": "r"}, default_domain="d")
    assert "run `load_hf_dataset(dataset, ...)` again" in str(e.value)
    assert "harnessrl data validate" not in str(e.value)


def test_a_preset_row_without_its_prompt_column_names_the_column(tmp_path):
    """Once: a RaR row without `question` said only 'missing prompt'."""
    rar = {"question": "Why tides?", "rubric": [{"title": "Moon", "description": "Names the Moon.", "weight": 2}]}
    no_question = {k: v for k, v in rar.items() if k != "question"}
    (error,) = validate_file(_jsonl(tmp_path / "rar.jsonl", [rar, no_question])).errors
    assert str(error) == (
        "line 2: missing prompt (the rar format reads it from the column 'question', which this row lacks; "
        "the row's columns: 'rubric')"
    )


# ------------------------------------------------------------------------------------ 5. a resumed run's events


def test_the_events_of_rolled_back_steps_move_aside_but_a_kept_commit_stands(tmp_path):
    run = RunDir(tmp_path)
    run.event("run_start", step=0)
    for step in (1, 2, 3, 4):
        run.event("failure", step=step, task_id="t1", failure="non_discriminative_low")
    run.event("proposal", step=3, candidate_id="c3-1", interface="task_sampling")
    run.event("trial", step=3, candidate_id="c3-1", interface="task_sampling")
    run.event("verdict", step=3, candidate_id="c3-1", interface="task_sampling", verdict="accepted")
    run.event("commit", step=3, candidate_id="c3-1", interface="task_sampling")
    run.event("proposal", step=3, candidate_id="c3-2", interface="task_sampling")
    run.event("verdict", step=3, candidate_id="c3-2", interface="task_sampling", verdict="rejected")
    run.event("evolution_point", step=3, seconds=1.0)
    run.event("training_hold", step=4, action="held")
    run.event("run_end", step=2, reason="disk_full")  # a process that stopped on a full disk: the run goes on
    assert roll_back(run, 2) == [3, 4]
    kept = [(e["kind"], e["step"], e.get("candidate_id")) for e in run.read("events.jsonl")]
    assert kept == [
        ("run_start", 0, None),
        ("failure", 1, None),
        ("failure", 2, None),
        ("proposal", 3, "c3-1"),  # the committed update stays in the harness, and its evidence with it
        ("trial", 3, "c3-1"),
        ("verdict", 3, "c3-1"),
        ("commit", 3, "c3-1"),
    ]
    aside = [(e["kind"], e["step"]) for e in RunDir(tmp_path / "rolled_back").read("events.jsonl")]
    assert aside == [
        ("failure", 3),
        ("failure", 4),
        ("proposal", 3),
        ("verdict", 3),
        ("evolution_point", 3),
        ("training_hold", 4),
        ("run_end", 2),
    ]
    assert roll_back(run, 2) == []  # a second resume from the same checkpoint moves nothing


def _failures(run: RunDir) -> Counter:
    return Counter((e["step"], e["task_id"], e["failure"]) for e in run.read("events.jsonl") if e["kind"] == "failure")


@pytest.mark.usefixtures("one_torch_thread")
def test_a_resumed_run_records_each_steps_failures_once_and_says_the_lock_was_stale(tmp_path, tiny_model_dir, caplog):
    """Once: after a kill at step 4 (last checkpoint at 2) and --resume, step 4's failure events were there twice;
    the dead process's .lock stayed, and nothing said it was stale."""
    data = _jsonl(tmp_path / "train.jsonl", TINY_POLICY_TASKS)
    config = _config(tmp_path / "run", data, str(tiny_model_dir), grpo={"max_steps": 4, "save_steps": 2})
    assert train(config).steps == 4
    run = RunDir(tmp_path / "run", create=False)
    first = _failures(run)
    assert {s for s, _, _ in first} & {3, 4}  # failures in the steps that will be re-run
    # what a SIGKILL during step 4 leaves: no checkpoint-4, no summary, no end; the lock file with a dead pid
    shutil.rmtree(run.checkpoints / "checkpoint-4")
    (run.path / "summary.json").unlink()
    (run.path / LOCK_NAME).write_text(json.dumps({"pid": 999_999_999, "host": "h", "since": time.time()}))
    caplog.set_level("WARNING")
    assert train(config, resume=True).steps == 4
    events = run.read("events.jsonl")
    again = _failures(run)
    assert {k for k in again if k[0] <= 2} == {k for k in first if k[0] <= 2}
    assert {k[0] for k in again} & {3, 4}  # the re-run's, once each: at most one per group of its task and step
    groups = Counter((g["step"], g["task_id"]) for g in run.read("steps.jsonl"))
    assert all(n <= groups[key[:2]] for key, n in again.items()), again
    assert [e["kind"] for e in events].count("run_end") == 1
    start = [e for e in events if e["kind"] == "run_start"][-1]
    assert start["rolled_back_steps"] == [3, 4] and start["stale_lock"]["pid"] == 999_999_999
    assert any(f"{LOCK_NAME} was stale: pid 999999999 on host h" in r.getMessage() for r in caplog.records)
    assert not (run.path / LOCK_NAME).exists()
