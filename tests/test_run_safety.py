"""The tool server and the run directory as an attacker or an accident would meet them (issue 11, item 7).

- the tool server: loopback only, the token compared in constant time, request bodies and arguments
  bounded, no tool that takes a path, held-out tasks invisible to every tool;
- the run directory: one live process at a time (a lock naming the holder), a lock left by a killed
  process taken over;
- a full disk: ``harness.json``, ``config.yaml`` and the JSON files keep their previous content, and a
  checkpoint cut short mid-save is skipped by ``--resume``, which goes on from the last complete one.

Everything is offline and quick but one real two-step training run on the tiny model (the checkpoint
cut short by a full disk, then resumed).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import resource
import signal
import subprocess
import sys
import types
from pathlib import Path
from urllib.parse import urlparse

import helpers
import httpx
import pytest
from helpers import AcceptAll, build, call_tool
from pydantic import ValidationError

from harnessrl.data.schema import Task
from harnessrl.errors import HarnessRLError
from harnessrl.evolution import mcp_server
from harnessrl.evolution.mcp_server import MAX_REQUEST_BYTES, ToolServer
from harnessrl.evolution.service import CandidateError, EvolutionService
from harnessrl.interfaces import Harness, ReweightTasks
from harnessrl.interfaces.tools import (
    MAX_EVENT_PAYLOAD_CHARS,
    MAX_LIST_ITEMS,
    MAX_TEXT_CHARS,
    CommitUpdate,
    GetFailures,
    GetHarnessState,
    RecordEvent,
    RunTrial,
    tool_table,
)
from harnessrl.records.checkpoints import last_checkpoint
from harnessrl.records.run_dir import (
    LOCK_NAME,
    RunDir,
    RunDirInUseError,
    RunFileError,
    clear_run_dir,
    lock_run_dir,
    write_atomic,
)
from harnessrl.records.steps import Recorder
from harnessrl.trainer.run import load_run_tasks, train
from harnessrl.trainer.train_config import TrainConfig

# --------------------------------------------------------------------------------------------- fixtures


def _row(tid: str, domain: str) -> dict:
    return {
        "id": tid,
        "domain": domain,
        "prompt": f"Say something about {tid}.",
        "reference_answer": f"Something about {tid}.",
        "rubric": [
            {"id": "c1", "text": f"Mentions {tid}", "weight": 2},
            {"id": "c2", "text": "Writes at least one word", "weight": 1},
        ],
    }


TRAIN = [_row("fruit", "food"), _row("bread", "food"), _row("sky", "nature"), _row("rain", "nature")]
VALIDATION = [_row("v-soup", "food"), _row("v-fog", "nature")]
TEST = [_row("x-stew", "food"), _row("x-snow", "nature")]
HELD_OUT = [r["id"] for r in VALIDATION + TEST]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture
def data(tmp_path) -> dict[str, str]:
    d = tmp_path / "data"
    d.mkdir()
    return {
        "train": _jsonl(d / "train.jsonl", TRAIN),
        "validation": _jsonl(d / "validation.jsonl", VALIDATION),
        "test": _jsonl(d / "test.jsonl", TEST),
    }


def _config(run_dir: Path, data: dict[str, str], model: str = "unused", **grpo) -> TrainConfig:
    return TrainConfig.model_validate(
        {
            "run_dir": str(run_dir),
            "model": model,
            "device": "cpu",
            "method": "fixed",
            "data": data,
            "grpo": {
                "num_generations": 2,
                "tasks_per_step": 2,
                "max_completion_length": 8,
                "learning_rate": 1e-2,
                "max_steps": 2,
                "save_steps": 2,
                **grpo,
            },
            "eval": {"every_steps": None, "before_training": False, "max_new_tokens": 8, "batch_size": 4},
        }
    )


def _service(tasks: list[Task], run_dir: RunDir | None) -> EvolutionService:
    """The service as ``train()`` builds it: over a harness of the training tasks only."""
    harness = Harness(tasks)
    if run_dir is not None:
        harness.save(run_dir.harness)
    return EvolutionService(harness, Recorder(None), None, AcceptAll(), run_dir, failures=list, step=lambda: 3)


@pytest.fixture
def service(tmp_path, data) -> EvolutionService:
    tasks = load_run_tasks(_config(tmp_path / "run", data))
    assert {t.id for t in tasks.validation} | {t.id for t in tasks.test} == set(HELD_OUT)
    return _service(tasks.train, RunDir(tmp_path / "run"))


@pytest.fixture
def served(service):
    server = ToolServer(service)
    url, token = server.start()
    yield server, url, token
    server.stop()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def sdk_calls(url: str, token: str, calls: list[tuple[str, dict]]):
    return asyncio.run(helpers.sdk_calls(url, token, calls))


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


# --------------------------------------------------------------------------------------------- the server


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.com", ""])
def test_the_tool_server_refuses_any_host_but_loopback(service, host):
    with pytest.raises(HarnessRLError, match=r"loopback \(127\.0\.0\.1\) only") as e:
        ToolServer(service, host=host)
    assert "ssh -L" in str(e.value)  # and says how to reach it from elsewhere


def test_the_tool_server_listens_on_loopback(service):
    with ToolServer(service, host="localhost") as server:
        assert urlparse(server.url).hostname == "127.0.0.1"
        assert server._sock.getsockname()[0] == "127.0.0.1"


def test_the_token_is_compared_in_constant_time(monkeypatch):
    compared = []

    def spy(a, b):
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(mcp_server, "hmac", types.SimpleNamespace(compare_digest=spy))
    verifier = mcp_server._TokenVerifier("s3cret")
    assert asyncio.run(verifier.verify_token("s3cret")) is not None
    assert asyncio.run(verifier.verify_token("s3cre")) is None  # another length: still compare_digest
    assert asyncio.run(verifier.verify_token("sécret€")) is None  # non-ASCII: bytes, no exception
    assert len(compared) == 3 and all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in compared)


def test_an_oversized_request_body_is_refused_with_413(served):
    _server, url, token = served
    big = json.dumps({**INIT, "padding": "x" * MAX_REQUEST_BYTES}).encode()

    def chunks():  # no Content-Length: the limit counts what arrives
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    with httpx.Client(timeout=30) as http:
        assert http.post(url, content=big, headers={**ACCEPT, **auth(token)}).status_code == 413
        assert http.post(url, content=chunks(), headers={**ACCEPT, **auth(token)}).status_code == 413
        assert http.post(url, content=big, headers=ACCEPT).status_code == 401  # no token: refused before reading
        assert http.post(url, json=INIT, headers={**ACCEPT, **auth(token)}).status_code == 200
    with pytest.raises(HarnessRLError, match="positive"):
        ToolServer(_server.service, max_request_bytes=0)


def test_over_long_arguments_are_errors_the_client_reads(served):
    _server, url, token = served
    long_text = "y" * (MAX_TEXT_CHARS + 1)
    bad = [
        ("query_memory", {"mode": "similar_failures", "text": long_text}),
        ("get_failures", {"kinds": ["k"] * (MAX_LIST_ITEMS + 1)}),
        ("get_harness_state", {"task_id": "t" * 1000}),
        ("edit_rubric", {"task_id": "fruit", "remove": ["c2"], "rationale": long_text}),
        ("edit_rubric", {"task_id": "fruit", "reword": {"c1": long_text}}),
        ("edit_rubric", {"task_id": "fruit", "add": [{"id": "c9", "text": long_text, "weight": 1}]}),
        ("reweight_tasks", {"action": "retire", "task_ids": ["fruit"] * (MAX_LIST_ITEMS + 1)}),
        ("set_guidance", {"target": "fruit", "text": long_text}),
        ("record_event", {"kind": "give_up", "payload": {"note": "z" * (MAX_EVENT_PAYLOAD_CHARS + 1)}}),
    ]
    results = sdk_calls(url, token, [*bad, ("get_harness_state", {"task_id": "fruit"})])
    for (name, _), result in zip(bad, results, strict=False):
        assert result.isError and "at most" in text_of(result), name
    assert results[-1].isError is False  # the session goes on
    # the same bounds hold in-process (the evolver's graph may call the service directly)
    with pytest.raises(ValidationError, match=f"at most {MAX_TEXT_CHARS}"):
        build(_server.service, "rubric_criteria", task_id="fruit", remove=["c2"], rationale=long_text)
    with pytest.raises(ValidationError, match=f"at most {MAX_EVENT_PAYLOAD_CHARS}"):
        RecordEvent(kind="give_up", payload={"note": "z" * MAX_EVENT_PAYLOAD_CHARS})


def _fields(schema: dict) -> set[str]:
    """Every property name anywhere in a JSON schema."""
    out, stack = set(), [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            out |= set(node.get("properties", {}))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def test_no_tool_takes_a_path():
    words = ("path", "file", "dir", "folder", "url", "uri")
    for name, spec in tool_table().items():
        fields = _fields(spec.args.model_json_schema())
        assert not [f for f in fields if any(w in f.lower() for w in words)], name
        for field in spec.args.model_fields.values():
            assert "Path" not in repr(field.annotation), (name, field)


TASK_TOOLS = {  # each tool that names a task, called with a held-out id in its place
    "get_failures": lambda tid: {"task_id": tid},
    "query_memory": lambda tid: {"mode": "task_history", "task_id": tid},
    "inspect_rollouts": lambda tid: {"task_id": tid},
    "get_harness_state": lambda tid: {"task_id": tid},
    "reweight_tasks": lambda tid: {"action": "reweight", "task_ids": [tid], "weight": 2.0},
    "set_guidance": lambda tid: {"scope": "task", "target": tid, "text": "Think first.", "fraction": 0.5},
    "edit_rubric": lambda tid: {"task_id": tid, "remove": ["c2"]},
    "set_decoding": lambda tid: {"scope": "task", "target": tid, "temperature": 0.7},
}


def test_held_out_tasks_are_invisible_to_every_tool(served):
    server, url, token = served
    service = server.service
    assert set(service.harness.tasks) == {r["id"] for r in TRAIN}  # the service's harness: training tasks only
    names = {"task_id", "task_ids", "target"}
    taking = {n for n, s in service.tools().items() if names & set(s.args.model_fields)}
    assert taking <= set(TASK_TOOLS), f"a new tool names a task: add it to TASK_TOOLS ({taking - set(TASK_TOOLS)})"
    assert taking >= set(TASK_TOOLS) - {"set_decoding"}
    for tid in HELD_OUT:
        for name in sorted(taking):
            with pytest.raises(CandidateError, match=f"unknown task id.*{tid}") as e:
                call_tool(service, name, **TASK_TOOLS[name](tid))
            assert not [o for o in HELD_OUT if o != tid and o in str(e.value)]  # hints list training ids only
        results = sdk_calls(url, token, [(name, TASK_TOOLS[name](tid)) for name in sorted(taking)])
        assert all(r.isError and "unknown task id" in text_of(r) for r in results)
    # a training id goes through (the refusals are about the split, not the call)
    assert service.get_harness_state(GetHarnessState(task_id="fruit")).task.task_id == "fruit"
    assert service.get_failures(GetFailures(task_id="fruit")).failures == []
    assert not service.run_dir.read("events.jsonl")  # nothing was proposed for a held-out task


# --------------------------------------------------------------------------------------------- the lock


HOLD = (
    "import sys, time\n"
    "from harnessrl.records.run_dir import lock_run_dir\n"
    "lock = lock_run_dir(sys.argv[1])\n"
    "print('locked', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def holder(tmp_path):
    """A live process holding the lock of ``tmp_path / 'run'``."""
    path = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc, path
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_run_dir_in_use_by_a_live_process_is_refused(holder, data, caplog):
    proc, path = holder
    with pytest.raises(RunDirInUseError, match=f"pid {proc.pid} on host") as e:
        lock_run_dir(path)
    assert f"kill {proc.pid}" in str(e.value) and "another run_dir" in str(e.value)
    with pytest.raises(RunDirInUseError, match=f"pid {proc.pid}"):
        RunDir(path, create=False).lock()
    # training into it, or resuming it, is refused before anything is written
    for kw in ({}, {"resume": True}, {"overwrite": True}):
        with pytest.raises(RunDirInUseError, match=f"pid {proc.pid}"):
            train(_config(path, data), **kw)
    assert [p.name for p in path.iterdir()] == [LOCK_NAME]

    # the holder dies (SIGKILL: no clean-up); the OS dropped its flock, so the lock is taken over, and said to
    # be stale (issue 29: the file stayed with the dead pid, and nothing said so)
    proc.kill()
    proc.wait(timeout=30)
    caplog.set_level("INFO")
    with lock_run_dir(path) as lock:
        assert lock.held and lock.stale is not None and lock.stale.pid == proc.pid
        owner = json.loads((path / LOCK_NAME).read_text())
        assert owner["pid"] == os.getpid()
        warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warned) == 1 and f"{LOCK_NAME} was stale: pid {proc.pid} on host" in warned[0], warned
    assert not (path / LOCK_NAME).exists()  # released and removed; the directory's content stays
    assert path.is_dir()


def test_the_lock_is_exclusive_in_one_process_too_and_leaves_no_trace(tmp_path):
    path = tmp_path / "new-run"
    with lock_run_dir(path), pytest.raises(RunDirInUseError, match="already locked by this process"):
        lock_run_dir(path)
    assert not path.exists()  # made by the lock, left empty: removed with it
    with lock_run_dir(path) as lock:
        (path / "config.yaml").write_text("x")
    lock.release()  # idempotent
    assert sorted(p.name for p in path.iterdir()) == ["config.yaml"]


def test_the_lock_never_follows_a_symlink(tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    path = tmp_path / "run"
    path.mkdir()
    (path / LOCK_NAME).symlink_to(target)
    with pytest.raises(HarnessRLError, match="symbolic link: remove it"):
        lock_run_dir(path)
    assert target.read_text() == "keep me"


def test_a_refused_run_leaves_the_directory_as_it_was(tmp_path, data):
    path = tmp_path / "run"
    path.mkdir()
    (path / "config.yaml").write_text("an earlier run")
    with pytest.raises(HarnessRLError, match="--resume"):
        train(_config(path, data))
    assert sorted(p.name for p in path.iterdir()) == ["config.yaml"]  # the lock is gone again
    with lock_run_dir(path):  # and nobody holds it
        pass


def test_overwrite_clears_all_but_the_lock(tmp_path):
    path = tmp_path / "run"
    with lock_run_dir(path):
        (path / "checkpoints" / "checkpoint-2").mkdir(parents=True)
        (path / "harness.json").write_text("{}")
        (path / "link").symlink_to(tmp_path)
        clear_run_dir(path)
        assert [p.name for p in path.iterdir()] == [LOCK_NAME]
    assert tmp_path.is_dir()  # a symlink is removed, not followed


# --------------------------------------------------------------------------------------------- a full disk


def _enospc(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _torn_dump(obj, fp, **_k):
    fp.write('{"versions": {"task_sam')  # a part reached the file, then the disk was full
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


FAILURES = {
    "json.dump writes part, then ENOSPC": ("harnessrl.records.run_dir.json", "dump", _torn_dump),
    "fsync ENOSPC": ("harnessrl.records.run_dir.os", "fsync", _enospc),
    "no room for the temp file": ("harnessrl.records.run_dir.tempfile", "mkstemp", _enospc),
    "rename fails": ("harnessrl.records.run_dir.os", "replace", _enospc),
}


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("where", list(FAILURES))
def test_harness_save_on_a_full_disk_keeps_the_previous_file(tmp_path, monkeypatch, where):
    tasks = [Task.model_validate(r) for r in TRAIN]
    path = tmp_path / "harness.json"
    harness = Harness(tasks)
    harness.save(path)
    before = path.read_bytes()
    harness.apply(ReweightTasks(task_ids=["fruit"], weight=5.0), step=1)

    target, attr, fail = FAILURES[where]
    monkeypatch.setattr(target + "." + attr, fail)
    with pytest.raises(RunFileError) as e:
        harness.save(path)
    monkeypatch.undo()
    err = e.value
    assert isinstance(err, OSError) and isinstance(err, HarnessRLError) and err.errno == errno.ENOSPC
    assert "the disk is full" in str(err) and "keeps its previous content" in str(err) and "--resume" in str(err)
    assert path.read_bytes() == before and _no_temp_files(tmp_path)
    assert Harness.load(path, tasks).versions["task_sampling"] == 0
    harness.save(path)  # space again: the next save writes the new state
    assert Harness.load(path, tasks).versions["task_sampling"] == 1


def test_harness_save_refused_by_the_kernel_keeps_the_previous_file(tmp_path):
    """No mock: the kernel refuses the write (a file-size limit, EFBIG) as a full disk would (ENOSPC)."""
    tasks = [Task.model_validate(r) for r in TRAIN]
    path = tmp_path / "harness.json"
    harness = Harness(tasks)
    harness.save(path)
    before = path.read_bytes()
    for step in range(1, 30):  # a harness.json well past the limit below
        harness.apply(ReweightTasks(task_ids=["fruit"], weight=1.0 + step), step=step)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the process is killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, hard))
    try:
        with pytest.raises(RunFileError, match="keeps its previous content") as e:
            harness.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert e.value.errno == errno.EFBIG
    assert path.read_bytes() == before and _no_temp_files(tmp_path)


def test_run_dir_json_writers_on_a_full_disk_keep_the_previous_file(tmp_path, data, monkeypatch):
    run = RunDir(tmp_path / "run")
    config = _config(run.path, data)
    run.write_config(config)
    run.write_json("summary.json", {"steps": 1})
    before = {p: p.read_bytes() for p in (run.config, run.file("summary.json"))}
    monkeypatch.setattr("harnessrl.records.run_dir.os.fsync", _enospc)
    with pytest.raises(RunFileError, match="the disk is full"):
        run.write_json("summary.json", {"steps": 2})
    with pytest.raises(RunFileError, match=r"config\.yaml keeps its previous content"):
        run.write_config(config.model_copy(update={"seed": 99}))
    with pytest.raises(RunFileError, match=r"best\.json was not created"):
        run.write_json("best.json", {"step": 2})
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in before} == before
    assert not run.file("best.json").exists() and _no_temp_files(run.path)
    # a file's mode survives a rewrite; a new one is readable as before (0644, not mkstemp's 0600)
    os.chmod(run.file("summary.json"), 0o640)
    run.write_json("summary.json", {"steps": 3})
    run.write_json("best.json", {"step": 3})
    assert (run.file("summary.json").stat().st_mode & 0o777, run.file("best.json").stat().st_mode & 0o777) == (
        0o640,
        0o644,
    )


def test_a_commit_on_a_full_disk_keeps_the_previous_harness_json(service, monkeypatch):
    path = service.run_dir.harness
    before = path.read_bytes()
    cid = build(service, "task_sampling", action="reweight", task_ids=["fruit"], weight=3.0).candidate_id
    assert service.run_frozen_policy_trial(RunTrial(candidate_id=cid)).accepted
    monkeypatch.setattr("harnessrl.records.run_dir.os.fsync", _enospc)
    with pytest.raises(HarnessRLError, match=r"could not be written.*the disk is full"):
        service.commit_update(CommitUpdate(candidate_id=cid))
    monkeypatch.undo()
    assert path.read_bytes() == before  # the file on disk: the last good state


# --------------------------------------------------------------------------------------------- checkpoints


def _checkpoint(root: Path, step: int, state: str | None = '{"global_step": 0}') -> Path:
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights")
    if state is not None:
        (path / "trainer_state.json").write_text(state)
    return path


def test_resume_picks_the_last_complete_checkpoint(tmp_path, caplog):
    run = RunDir(tmp_path / "run")
    assert last_checkpoint(run) is None
    _checkpoint(run.checkpoints, 2)
    _checkpoint(run.checkpoints, 10)
    _checkpoint(run.checkpoints, 12, state=None)  # cut short before trainer_state.json
    _checkpoint(run.checkpoints, 14, state='{"global_st')  # cut short inside it
    (run.checkpoints / "checkpoint-16").write_text("not a directory")
    _checkpoint(run.checkpoints / "odd", 1)  # not at the top
    (run.checkpoints / "checkpoint-x").mkdir()
    (run.checkpoints / "final").mkdir()
    assert last_checkpoint(run) == str(run.checkpoints / "checkpoint-10")  # 10 > 2: by number, not by name
    assert sum("incomplete" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.usefixtures("one_torch_thread")
def test_a_checkpoint_cut_short_by_a_full_disk_then_resume(tmp_path, data, tiny_model_dir, monkeypatch):
    """A real run: the disk fills up while TRL writes checkpoint-2 (the weights are out, the optimizer
    and trainer state are not). The run stops with a message that says what to do, checkpoint-1 and
    harness.json are intact, and --resume goes on from checkpoint-1 to the end."""
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer

    run_path = tmp_path / "run"
    heldout = {"validation": None, "test": None}
    config = _config(run_path, {"train": data["train"], **heldout}, model=str(tiny_model_dir), save_steps=1)
    real_save = HarnessGRPOTrainer._save_optimizer_and_scheduler

    def full_disk_at_step_2(self, output_dir):
        if self.state.global_step == 2:
            Path(output_dir, "optimizer.pt").write_bytes(b"\x80partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(output_dir, "optimizer.pt")))
        return real_save(self, output_dir)

    monkeypatch.setattr(HarnessGRPOTrainer, "_save_optimizer_and_scheduler", full_disk_at_step_2)
    with pytest.raises(HarnessRLError, match="the disk filled up while saving checkpoint-2, at step 2") as e:
        train(config)
    monkeypatch.undo()
    run = RunDir(run_path, create=False)
    assert str(run.checkpoints / "checkpoint-1") in str(e.value) and "--resume" in str(e.value)
    assert (run.checkpoints / "checkpoint-1" / "trainer_state.json").exists()
    assert (run.checkpoints / "checkpoint-2").is_dir()
    assert not (run.checkpoints / "checkpoint-2" / "trainer_state.json").exists()
    assert last_checkpoint(run) == str(run.checkpoints / "checkpoint-1")
    Harness.load(run.harness, [Task.model_validate(r) for r in TRAIN])  # harness.json intact
    assert not (run_path / LOCK_NAME).exists()  # the failed run released its lock

    summary = train(config, resume=True)
    assert summary.steps == 2
    assert json.loads((run.checkpoints / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2
    starts = [e for e in run.read("events.jsonl") if e["kind"] == "run_start"]
    assert [s["resume"] for s in starts] == [False, True]


def test_write_atomic_leaves_no_temp_file_when_the_writer_raises(tmp_path):
    path = tmp_path / "f.json"
    write_atomic(path, lambda f: f.write("old"))

    def boom(f):
        f.write("new, half")
        raise ValueError("not serializable")

    with pytest.raises(ValueError, match="not serializable"):  # not an OSError: raised as it is
        write_atomic(path, boom)
    assert path.read_text() == "old" and _no_temp_files(tmp_path)


# --------------------------------------------------------------------------------------------- --overwrite, --resume


class SilentJudge:
    """A judge backend that answers nothing (a server that is down, a wrong model name)."""

    name = "silent"

    @classmethod
    def from_config(cls, config):
        return cls()

    def grade(self, requests):
        return [None] * len(requests)


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def _earlier_run(path: Path, data: dict[str, str]) -> dict[str, bytes]:
    """A run directory as a finished run leaves it (enough of it to miss if it went)."""
    run = RunDir(path)
    run.write_config(_config(path, data))
    run.write_json("summary.json", {"steps": 2})
    run.event("run_start", step=0)
    _checkpoint(run.checkpoints, 2)
    return _files(path)


@pytest.mark.usefixtures("one_torch_thread")
def test_overwrite_deletes_nothing_until_the_model_and_the_judge_are_built_and_answer(tmp_path, data, tiny_model_dir):
    """Once: --overwrite deleted the previous run, then found the model path wrong, and left a skeleton."""
    from harnessrl.judges import JudgeConfig

    path = tmp_path / "run"
    before = _earlier_run(path, data)
    refused = {
        "a model path that does not exist": (
            _config(path, data, model=str(tmp_path / "nonexistent")),
            "does not exist",
        ),
        "a judge that cannot be built": (
            _config(path, data, model=str(tiny_model_dir)).model_copy(
                update={"judge": JudgeConfig(backend="no_such_module:Judge")}
            ),
            "cannot import",
        ),
        "a judge that does not answer": (
            _config(path, data, model=str(tiny_model_dir)).model_copy(
                update={"judge": JudgeConfig(backend=f"{__name__}:SilentJudge")}
            ),
            "gave no verdict",
        ),
    }
    for what, (config, said) in refused.items():
        with pytest.raises(HarnessRLError, match=said):
            train(config, overwrite=True)
        assert _files(path) == before, f"{what}: the previous run was touched"


def test_resume_of_a_run_dir_that_does_not_exist_is_an_error_naming_it(tmp_path, data):
    """Once: a typo in run_dir with --resume trained a new run from scratch without a word."""
    typo = tmp_path / "runz"
    with pytest.raises(HarnessRLError, match=rf"--resume: {typo} holds no run to resume \(no such directory\)"):
        train(_config(typo, data), resume=True)
    assert not typo.exists()  # and nothing was made there
    typo.mkdir()
    with pytest.raises(HarnessRLError, match=r"no config\.yaml in it"):
        train(_config(typo, data), resume=True)
    assert list(typo.iterdir()) == []


@pytest.mark.usefixtures("one_torch_thread")
def test_resume_of_a_finished_run_says_so_and_trains_nothing(tmp_path, data, tiny_model_dir):
    """Once: --resume on a finished run trained past max_steps (step 3 of 2, a checkpoint-3, a second end)."""
    from typer.testing import CliRunner

    from harnessrl.cli import app

    path = tmp_path / "run"
    config = _config(path, {"train": data["train"], "validation": None, "test": None}, model=str(tiny_model_dir))
    first = train(config)
    assert first.steps == 2
    before = _files(path)
    again = train(config, resume=True)
    assert again.steps == 2 and again.run_dir == path
    assert _files(path) == before  # nothing trained, nothing written
    (path / "c.yaml").write_text(path.joinpath("config.yaml").read_text())
    out = CliRunner().invoke(app, ["train", "--config", str(path / "c.yaml"), "--resume"])
    assert out.exit_code == 0, out.output
    assert "is already finished: trained to step 2" in " ".join(out.output.split())
    assert not (path / "checkpoints" / "checkpoint-3").exists()
    assert [e["kind"] for e in RunDir(path, create=False).read("events.jsonl")].count("run_end") == 1


@pytest.mark.usefixtures("one_torch_thread")
def test_resume_of_a_run_stopped_while_it_ended_ends_it_without_training(tmp_path, data, tiny_model_dir):
    """Once: a bench run killed during its final evaluation (trained to max_steps, no summary.json) was refused
    on --resume as finished, so `bench run` could never complete it."""
    path = tmp_path / "run"
    config = _config(path, data, model=str(tiny_model_dir))
    first = train(config)
    assert first.steps == 2
    run = RunDir(path, create=False)
    ended = [r for r in run.read("eval.jsonl") if r["step"] == 2]
    assert {r["split"] for r in ended} == {"validation", "test"}
    # the state a kill during the final evaluation leaves: no summary, no final scores, no run_end
    (path / "summary.json").unlink()
    (path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.read("eval.jsonl") if r["step"] != 2))
    events = [e for e in run.read("events.jsonl") if e["kind"] != "run_end"]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))

    again = train(config, resume=True)
    assert again.steps == 2
    assert (path / "summary.json").is_file()
    assert not (path / "checkpoints" / "checkpoint-3").exists()  # no step trained past max_steps
    redone = [r for r in run.read("eval.jsonl") if r["step"] == 2]
    # the final evaluation again, of the last checkpoint's weights: the same scores on the same draws
    assert [(r["split"], r["overall"]) for r in redone] == [(r["split"], r["overall"]) for r in ended]
    assert again.eval["test"].final == first.eval["test"].final
    assert [e["kind"] for e in run.read("events.jsonl")].count("run_end") == 1
    # and once ended, a further --resume trains nothing and writes nothing
    before = _files(path)
    assert train(config, resume=True).steps == 2 and _files(path) == before
