"""`bench run --jobs N` (runs at once, the cores shared out) and the base policy's evaluation done once a bench."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from harnessrl.bench.config import BenchConfig, resolve_train_config
from harnessrl.bench.runner import RunJob, run_bench, threads_per_run
from harnessrl.data import Task
from harnessrl.records.run_dir import RunDir
from harnessrl.trainer.callbacks import EvalCallback
from harnessrl.trainer.evaluation import EvalResult


def _bench(tmp_path: Path, **kw) -> BenchConfig:
    data = {
        "base": {"model": "tiny", "device": "cpu", "grpo": {"max_steps": 2}},
        "methods": ["fixed", "harnessrl"],
        "seeds": [0, 1],
        "out": str(tmp_path / "bench"),
        **kw,
    }
    return BenchConfig.model_validate(data)


class OverlapTrain:
    """A fake `harnessrl train` that takes a while and records how many runs went at once."""

    def __init__(self, seconds: float = 0.3, interrupt: str | None = None):
        self.seconds, self.interrupt = seconds, interrupt
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.threads: list[int | None] = []

    def __call__(self, job: RunJob, poll, timeout_s) -> int:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.threads.append(job.threads)
        try:
            if job.key == self.interrupt:
                raise KeyboardInterrupt
            t0 = time.monotonic()
            while time.monotonic() - t0 < self.seconds:
                poll()  # raises KeyboardInterrupt when the bench is being stopped
                time.sleep(0.02)
            run = job.run_dir
            run.mkdir(parents=True, exist_ok=True)
            (run / "config.yaml").write_text(yaml.safe_dump(job.settings), encoding="utf-8")
            (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in (1, 2)))
            (run / "summary.json").write_text(json.dumps({"steps": job.max_steps, "wall_seconds": 1.0}))
            return 0
        finally:
            with self.lock:
                self.now -= 1


def test_jobs_run_at_once_with_the_cores_shared_out(tmp_path):
    fake = OverlapTrain()
    manifest = run_bench(_bench(tmp_path), runner=fake, jobs=2)
    assert fake.peak == 2
    assert set(fake.threads) == {threads_per_run(2)}
    assert {r.status for r in manifest.runs.values()} == {"done"}
    saved = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert all(r["attempts"][0]["threads"] == threads_per_run(2) for r in saved["runs"].values())
    one = OverlapTrain(seconds=0.05)
    run_bench(_bench(tmp_path / "one"), runner=one)  # the default: one after another, the environment's threads
    assert one.peak == 1 and set(one.threads) == {None}


def test_threads_per_run():
    assert threads_per_run(2, cores=2) == 1
    assert threads_per_run(3, cores=2) == 1
    assert threads_per_run(2, cores=16) == 8
    assert threads_per_run(1, cores=4) == 4


def test_an_interrupt_stops_every_running_job(tmp_path):
    # the other job would run for ten minutes, past the test's timeout: it was stopped, not waited for
    fake = OverlapTrain(seconds=600.0, interrupt="harnessrl/seed0")
    with pytest.raises(KeyboardInterrupt):
        run_bench(_bench(tmp_path), runner=fake, jobs=2)
    runs = json.loads((tmp_path / "bench" / "bench.json").read_text())["runs"]
    assert runs["harnessrl/seed0"]["status"] == "interrupted"
    assert runs["fixed/seed0"]["status"] == "interrupted"
    assert runs["fixed/seed1"]["status"] == "pending"


def test_every_run_of_a_bench_shares_the_base_evaluation_folder(tmp_path):
    cfg = _bench(tmp_path)
    folders = {resolve_train_config(cfg, m, s)["eval"]["base_cache"] for m in ("fixed", "harnessrl") for s in (0, 1)}
    assert folders == {str(tmp_path / "bench" / "base_eval")}
    own = _bench(tmp_path, overrides={"eval.base_cache": None})
    assert resolve_train_config(own, "fixed", 0)["eval"]["base_cache"] is None


class CountingEval:
    def __init__(self):
        self.calls: list[tuple[str, int]] = []

    def __call__(self, model, tokenizer, tasks, judge, *, step, split, **kw):
        self.calls.append((split, step))
        return EvalResult(
            step=step,
            split=split,
            overall=0.5 + step / 100,
            per_domain={"a": 0.5},
            per_task={t.id: 0.5 for t in tasks},
            tasks=len(tasks),
            seconds=0.0,
        )


def _task(tid: str) -> Task:
    return Task.model_validate(
        {"id": tid, "domain": "a", "prompt": "q", "rubric": [{"id": "c", "text": "Answers", "weight": 1}]}
    )


def test_the_base_policy_is_evaluated_once_for_every_run(tmp_path, monkeypatch):
    import harnessrl.trainer.callbacks as callbacks

    fake = CountingEval()
    monkeypatch.setattr(callbacks, "evaluate_policy", fake)
    splits = {"validation": [_task("v")], "test": [_task("t")]}
    cache = tmp_path / "base_eval"
    judge = SimpleNamespace(name="semantic")

    def callback(run: str, model: str = "embedded", tasks=splits) -> EvalCallback:
        return EvalCallback(
            RunDir(tmp_path / run),
            tasks,
            judge,
            every_steps=2,
            before_training=True,
            max_new_tokens=4,
            batch_size=2,
            base_cache=cache,
            policy_identity={"model": model},
        )

    state = SimpleNamespace(global_step=0, max_steps=2, is_world_process_zero=True)
    first = callback("a")
    first.on_train_begin(None, state, None)
    assert fake.calls == [("validation", 0), ("test", 0)] and len(list(cache.glob("*.json"))) == 2
    second = callback("b")
    second.on_train_begin(None, state, None)
    assert fake.calls == [("validation", 0), ("test", 0)]  # reused: nothing evaluated again
    assert [r.overall for r in second.results] == [0.5, 0.5]
    assert len(RunDir(tmp_path / "b").read("eval.jsonl")) == 2  # the run still records its own rows
    # a later step is always evaluated; another model or other tasks are another cache entry
    state.global_step = 2
    second.on_train_end(None, state, None)
    assert fake.calls[-2:] == [("validation", 2), ("test", 2)]
    callback("c", model="other").on_train_begin(None, SimpleNamespace(**{**state.__dict__, "global_step": 0}), None)
    assert fake.calls[-2:] == [("validation", 0), ("test", 0)]
    # a broken cache file is evaluated again and rewritten
    for path in cache.glob("*.json"):
        path.write_text("{broken", encoding="utf-8")
    n = len(fake.calls)
    callback("d").on_train_begin(None, SimpleNamespace(**{**state.__dict__, "global_step": 0}), None)
    assert len(fake.calls) == n + 2
    assert all(
        EvalResult.model_validate_json(p.read_text()) for p in cache.glob("*.json") if "broken" not in p.read_text()
    )


def test_a_setting_the_method_never_reads_does_not_make_a_finished_run_stale(tmp_path):
    from harnessrl.bench.runner import plan_jobs

    cfg = _bench(tmp_path)
    run_bench(cfg, runner=OverlapTrain(seconds=0.0))
    # the evolver's trial budget changes: fixed never runs the evolver, harnessrl does
    changed = _bench(tmp_path, overrides={"evolver.trials.max_new_tokens": 30})
    with pytest.raises(Exception, match=r"2 run\(s\) .* other settings") as err:
        plan_jobs(changed)
    assert "harnessrl/seed0: evolver.trials.max_new_tokens" in str(err.value) and "fixed/seed" not in str(err.value)
    jobs = plan_jobs(changed, rerun_changed=True)
    assert {j.key: j.action for j in jobs} == {
        "fixed/seed0": "skip",
        "harnessrl/seed0": "restart",
        "fixed/seed1": "skip",
        "harnessrl/seed1": "restart",
    }


def test_what_the_harness_did_is_read_from_the_events_per_family(tmp_path):
    from harnessrl.analysis.per_run import RunData, harness_decisions

    run = tmp_path / "run"
    run.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    rows = [
        {
            "id": t,
            "domain": "d",
            "prompt": "q",
            "rubric": [{"id": "c", "text": "x", "weight": 1}],
            "metadata": {"family": f},
        }
        for t, f in (("a1", "lax"), ("a2", "lax"), ("b1", "hard"))
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (run / "config.yaml").write_text(yaml.safe_dump({"data": {"train": str(tasks)}}), encoding="utf-8")
    events = [
        {"kind": "proposal", "candidate_id": "c1", "update": {"task_id": "a1", "rationale": "x [rule-based: induced]"}},
        {"kind": "verdict", "candidate_id": "c1", "verdict": "accepted", "reason": "accepted: ..."},
        {
            "kind": "commit",
            "candidate_id": "c1",
            "interface": "rubric_criteria",
            "update": {"task_id": "a1", "rationale": "x [rule-based: induced]"},
        },
        {
            "kind": "proposal",
            "candidate_id": "c2",
            "update": {"task_id": "a2", "rationale": "y [rule-based: stricter]"},
        },
        {
            "kind": "verdict",
            "candidate_id": "c2",
            "verdict": "rejected",
            "reason": "rejected by the reference guard: the reference ...",
        },
        {
            "kind": "commit",
            "candidate_id": "c3",
            "interface": "task_sampling",
            "update": {"task_ids": ["b1"], "action": "park"},
        },
        {"kind": "give_up", "task_id": "a2", "failure_kind": "non_discriminative_high"},
    ]
    (run / "events.jsonl").write_text("".join(json.dumps({"time": 0, "step": 5, **e}) + "\n" for e in events))
    got = {fam: d.model_dump() for fam, d in harness_decisions(RunData.read(run, "harnessrl", 0)).items()}
    assert got == {
        "hard": {"commits": {"task_sampling:park": 1}, "rejected": {}, "gave_up": 0},
        "lax": {
            "commits": {"rubric_criteria:induced": 1},
            "rejected": {"rejected by the reference guard": 1},
            "gave_up": 1,
        },
    }
