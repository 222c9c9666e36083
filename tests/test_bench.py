"""`harnessrl bench`: the bench config, the resumable runner, the report, and one tiny end-to-end bench.

The runner is tested with a fake command runner that writes what a training run leaves; the report
with run directories written by hand (known numbers in, known aggregates out). The end-to-end test
runs every method for 2 steps on a tiny random Llama, each as a real `harnessrl train` process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml
from helpers import task_row
from typer.testing import CliRunner

from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.report import write_bench_report
from harnessrl.analysis.results import aggregate, compare, load_runs, run_figures
from harnessrl.bench.config import BenchConfig, apply_overrides, builtin_methods, load_bench_config
from harnessrl.bench.runner import RunJob, failed_runs, plan_jobs, run_bench, subprocess_runner
from harnessrl.cli import app
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.trainer.methods import default_bench_methods

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
cli = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


def _bench(tmp_path: Path, **kw) -> BenchConfig:
    data = {
        "base": {"model": "tiny", "device": "cpu", "grpo": {"max_steps": 2}},
        "methods": ["fixed", "harnessrl"],
        "seeds": [0, 1],
        "out": str(tmp_path / "bench"),
        **kw,
    }
    return BenchConfig.model_validate(data)


def _write_yaml(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- bench config
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"methodz": ["fixed"]}, "methodz: unknown setting"),
        ({"methods": ["fixed", "grpo"]}, "unknown method 'grpo'; known: fixed, dapo, odf, harnessrl"),
        ({"methods": ["fixed", "harnessrl-dapo"]}, "'harnessrl-dapo' is called 'harnessrl' since 2026-12-06"),
        ({"methods": ["fixed", "fixed"]}, "name a method twice"),
        ({"methods": []}, "methods"),
        ({"seeds": [0, 0]}, "repeat a seed"),
        ({"seeds": [-1]}, "seeds must be 0 or more"),
        ({"overrides": {"seed": 3}}, "'seed' is set by the bench"),
        ({"overrides": {"run_dir": "x"}}, "'run_dir' is set by the bench"),
        ({"overrides": {"grpo..max_steps": 3}}, "is not a setting"),
        ({"method_settings": {"plots": {}}}, "reserved"),
        ({"method_settings": {"a/b": {}}}, "must start with a letter or digit"),
        ({"timeout_minutes": 0}, "timeout_minutes"),
    ],
)
def test_bench_config_errors_say_what_is_wrong(tmp_path, change, message):
    data = {"base": {"model": "tiny"}, **change}
    path = _write_yaml(tmp_path / "bench.yaml", data)
    with pytest.raises(ConfigError) as e:
        load_bench_config(path)
    assert message in flat(str(e.value))
    assert str(path) in str(e.value)


def test_bench_config_needs_its_base_and_reads_it_from_its_folder(tmp_path):
    with pytest.raises(ConfigError, match="base"):
        load_bench_config(_write_yaml(tmp_path / "nobase.yaml", {"methods": ["fixed"]}))
    with pytest.raises(ConfigError, match="not found"):
        load_bench_config(_write_yaml(tmp_path / "b.yaml", {"base": "missing.yaml"}))
    sub = tmp_path / "cfg"
    sub.mkdir()
    _write_yaml(sub / "train.yaml", {"model": "tiny", "grpo": {"max_steps": 3}})
    cfg = load_bench_config(_write_yaml(sub / "b.yaml", {"base": "train.yaml", "out": str(tmp_path / "o")}))
    assert cfg.base_settings()["grpo"]["max_steps"] == 3
    with pytest.raises(ConfigError, match="not valid YAML"):
        (tmp_path / "broken.yaml").write_text("base: [", encoding="utf-8")
        load_bench_config(tmp_path / "broken.yaml")


def test_methods_are_named_overrides_and_resolve_in_order(tmp_path):
    cfg = _bench(
        tmp_path,
        overrides={"grpo.max_steps": 3, "grpo.learning_rate": 0.1},
        method_settings={
            "fixed": {"method": "fixed", "grpo.learning_rate": 0.2},  # replaces the built-in
            "harnessrl-llm": {"method": "harnessrl", "evolver.backend": "llm", "evolver.llm": {"model": "m"}},
        },
        methods=["fixed", "dapo", "harnessrl-llm"],
    )
    assert set(cfg.known_methods()) == {*builtin_methods(), "harnessrl-llm"}
    jobs = plan_jobs(cfg)
    # seed-major: an interrupted bench still has every method on its first seeds
    assert [(j.method, j.seed) for j in jobs] == [(m, s) for s in (0, 1) for m in ("fixed", "dapo", "harnessrl-llm")]
    by = {(j.method, j.seed): j.settings for j in jobs}
    assert by["fixed", 0]["grpo"]["learning_rate"] == 0.2 and by["dapo", 0]["grpo"]["learning_rate"] == 0.1
    assert by["fixed", 1]["grpo"]["max_steps"] == 3 and by["fixed", 1]["seed"] == 1
    assert by["dapo", 1]["run_dir"] == str(tmp_path / "bench" / "dapo" / "seed1")
    assert by["harnessrl-llm", 0]["evolver"]["backend"] == "llm"
    assert by["harnessrl-llm", 0]["evolver"]["llm"]["model"] == "m"
    # whether the evolver runs is the method's alone: the settings never write the deprecated evolver.enabled
    assert by["fixed", 0]["method"] == "fixed" and by["harnessrl-llm", 0]["method"] == "harnessrl"
    assert "enabled" not in by["fixed", 0]["evolver"]
    # a mapping value merges into its section instead of replacing it
    merged = apply_overrides({"grpo": {"a": 1, "b": 2}}, {"grpo": {"b": 3}, "x.y.z": 4})
    assert merged == {"grpo": {"a": 1, "b": 3}, "x": {"y": {"z": 4}}}
    with pytest.raises(ConfigError, match="not a section"):
        apply_overrides({"grpo": 1}, {"grpo.x": 2})


def test_invalid_training_settings_fail_before_anything_runs(tmp_path):
    cfg = _bench(tmp_path, method_settings={"odd": {"grpo.max_steps": 0}}, methods=["fixed", "odd"])
    with pytest.raises(ConfigError) as e:
        plan_jobs(cfg)
    assert "method 'odd', seed 0" in str(e.value) and "grpo.max_steps" in str(e.value)
    cfg = _bench(tmp_path, overrides={"grpo.bogus": 1})
    with pytest.raises(ConfigError, match=r"grpo\.bogus: unknown setting"):
        plan_jobs(cfg)
    assert not (tmp_path / "bench").exists()


def test_selection_from_the_command_line_is_validated(tmp_path):
    cfg = _bench(tmp_path)
    sel = cfg.select(methods=["harnessrl"], seeds=[2], out=str(tmp_path / "other"))
    assert (sel.methods, sel.seeds, sel.out) == (["harnessrl"], [2], str(tmp_path / "other"))
    with pytest.raises(ConfigError, match="unknown method 'nope'"):
        cfg.select(methods=["nope"])


@pytest.mark.parametrize("name", ["bench-cpu.yaml", "bench-gpu.yaml", "bench-gold.yaml"])
def test_shipped_bench_configs_validate(tmp_path, name):
    cfg = load_bench_config(CONFIGS / name).select(out=str(tmp_path / "out"))
    jobs = plan_jobs(cfg)
    # every method a bench runs by default; the oracle needs gold rubrics: only the gold suite's bench runs it
    expected = set(default_bench_methods()) | ({"oracle"} if name == "bench-gold.yaml" else set())
    assert {j.method for j in jobs} >= expected
    assert len({j.seed for j in jobs}) >= 3
    assert all(j.action == "start" for j in jobs)
    methods = {j.method: j.settings["method"] for j in jobs}
    assert all(methods[m] == m for m in builtin_methods() if m in methods)
    if name == "bench-gpu.yaml":
        s = next(j.settings for j in jobs if j.method == "harnessrl-llm")
        assert s["evolver"]["backend"] == "llm" and s["generation"]["backend"] == "vllm"
        assert s["judge"]["backend"] == "openai" and "/" in s["model"]


# --------------------------------------------------------------------------------------- runner
class FakeTrain:
    """Stands in for `harnessrl train`: writes config.yaml, metrics and (unless told not to) summary.json."""

    def __init__(self, fail: set[str] = frozenset(), stop_at: dict[str, int] | None = None, rc0_incomplete=()):
        self.calls: list[RunJob] = []
        self.fail, self.stop_at, self.rc0_incomplete = fail, stop_at or {}, set(rc0_incomplete)

    def __call__(self, job: RunJob, poll, timeout_s) -> int:
        self.calls.append(job)
        assert job.config_path.is_file(), "the resolved config is written before the run starts"
        assert yaml.safe_load(job.config_path.read_text())["run_dir"] == str(job.run_dir)
        poll()
        if job.key in self.fail:
            job.log_path.write_text("Traceback ...\nRuntimeError: boom\n", encoding="utf-8")
            return 1
        run = job.run_dir
        if "--overwrite" in job.command and run.exists():
            import shutil

            shutil.rmtree(run)
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.yaml").write_text(yaml.safe_dump(job.settings), encoding="utf-8")
        steps = self.stop_at.get(job.key, job.max_steps)
        with open(run / "metrics.jsonl", "a") as f:
            for s in range(1, steps + 1):
                f.write(json.dumps({"step": s, "reward": 0.5}) + "\n")
        if steps >= job.max_steps and job.key not in self.rc0_incomplete:
            (run / "checkpoints" / f"checkpoint-{steps}").mkdir(parents=True, exist_ok=True)
            (run / "checkpoints" / f"checkpoint-{steps}" / "optimizer.pt").write_bytes(b"x" * 1000)
            (run / "checkpoints" / "final").mkdir(exist_ok=True)
            (run / "summary.json").write_text(json.dumps({"steps": steps, "wall_seconds": 1.0}))
            return 0
        if steps:
            (run / "checkpoints" / f"checkpoint-{steps}").mkdir(parents=True)
        return 0 if job.key in self.rc0_incomplete else 1


def test_runner_starts_then_skips_finished_runs(tmp_path):
    cfg = _bench(tmp_path)
    fake = FakeTrain()
    manifest = run_bench(cfg, runner=fake, source="bench.yaml")
    assert [j.key for j in fake.calls] == ["fixed/seed0", "harnessrl/seed0", "fixed/seed1", "harnessrl/seed1"]
    assert all(j.action == "start" and "--resume" not in j.command for j in fake.calls)
    assert fake.calls[0].command[:4] == [sys.executable, "-m", "harnessrl.cli", "train"]
    saved = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert saved["runs"] == manifest.model_dump(mode="json")["runs"]
    assert {k: r["status"] for k, r in saved["runs"].items()} == dict.fromkeys(saved["runs"], "done")
    row = saved["runs"]["fixed/seed1"]
    assert row["attempts"][0]["returncode"] == 0 and row["wall_seconds"] >= 0
    assert row["config"].endswith("fixed/seed1.yaml") and row["log"].endswith("fixed/seed1.log")
    assert saved["bench_config"] == "bench.yaml" and saved["methods"]["fixed"] == {"method": "fixed"}

    again = FakeTrain()
    run_bench(cfg, runner=again)
    assert again.calls == []
    saved = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert all(r["last_action"] == "skip" and len(r["attempts"]) == 1 for r in saved["runs"].values())


def test_finished_runs_drop_their_resume_checkpoints_unless_kept(tmp_path):
    cfg = _bench(tmp_path, seeds=[0], methods=["fixed"])
    run_bench(cfg, runner=FakeTrain())
    ckpts = tmp_path / "bench" / "fixed" / "seed0" / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["final"]  # checkpoint-<step> gone, final kept
    kept = _bench(tmp_path / "kept", seeds=[0], methods=["fixed"], keep_resume_checkpoints=True)
    run_bench(kept, runner=FakeTrain())
    ckpts = tmp_path / "kept" / "bench" / "fixed" / "seed0" / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["checkpoint-2", "final"]


def test_a_full_disk_stops_the_bench_with_a_clear_error(tmp_path, monkeypatch):
    cfg = _bench(tmp_path, seeds=[0], methods=["fixed"])
    run_bench(cfg, runner=FakeTrain())
    manifest = tmp_path / "bench" / "bench.json"
    before = manifest.read_text()

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(HarnessRLError, match=r"No space left on device.*free disk space"):
        run_bench(cfg, runner=FakeTrain())
    monkeypatch.undo()
    assert manifest.read_text() == before  # the last good manifest survives


def test_runner_resumes_restarts_and_records_failures(tmp_path):
    cfg = _bench(tmp_path, seeds=[0, 1, 2], methods=["fixed"])
    # seed0 crashes; seed1 stops after one step with a checkpoint; seed2 exits 0 without finishing
    first = FakeTrain(fail={"fixed/seed0"}, stop_at={"fixed/seed1": 1}, rc0_incomplete={"fixed/seed2"})
    manifest = run_bench(cfg, runner=first)
    runs = manifest.runs
    assert runs["fixed/seed0"].status == "failed" and "RuntimeError: boom" in runs["fixed/seed0"].log_tail
    assert runs["fixed/seed1"].status == "failed" and "exited with code 1" in runs["fixed/seed1"].error
    assert (
        runs["fixed/seed2"].status == "failed" and "exited 0 but the run is not complete" in runs["fixed/seed2"].error
    )
    assert failed_runs(manifest) == ["fixed/seed0", "fixed/seed1", "fixed/seed2"]
    (tmp_path / "bench" / "fixed" / "seed0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "bench" / "fixed" / "seed0" / "events.jsonl").write_text("{}\n")  # crashed early: no checkpoint

    jobs = {j.key: j for j in plan_jobs(cfg)}
    assert (jobs["fixed/seed0"].action, jobs["fixed/seed0"].command[-1]) == ("restart", "--overwrite")
    assert (jobs["fixed/seed1"].action, jobs["fixed/seed1"].command[-1]) == ("resume", "--resume")
    assert "checkpoint" in jobs["fixed/seed1"].reason
    second = FakeTrain()
    manifest = run_bench(cfg, runner=second)
    assert {j.key: j.action for j in second.calls} == {
        "fixed/seed0": "restart",
        "fixed/seed1": "resume",
        "fixed/seed2": "resume",
    }
    assert failed_runs(manifest) == []
    assert all(len(r.attempts) == 2 for r in manifest.runs.values())
    assert "error" not in manifest.model_dump(mode="json")["runs"]["fixed/seed0"]
    saved = json.loads((tmp_path / "bench" / "bench.json").read_text())
    assert "error" not in saved["runs"]["fixed/seed0"] and "log_tail" not in saved["runs"]["fixed/seed0"]


def test_runs_made_with_other_settings_are_refused_unless_rerun(tmp_path):
    cfg = _bench(tmp_path, methods=["fixed"], seeds=[0])
    run_bench(cfg, runner=FakeTrain())
    changed = _bench(tmp_path, methods=["fixed"], seeds=[0], overrides={"grpo.learning_rate": 0.5})
    with pytest.raises(ConfigError) as e:
        plan_jobs(changed)
    assert "fixed/seed0: grpo.learning_rate" in str(e.value) and "--rerun-changed" in str(e.value)
    fake = FakeTrain()
    run_bench(changed, runner=fake, rerun_changed=True)
    assert [j.action for j in fake.calls] == ["restart"] and fake.calls[0].command[-1] == "--overwrite"
    assert [j.action for j in plan_jobs(changed)] == ["skip"]


def test_an_interrupted_bench_records_it_and_stops(tmp_path):
    cfg = _bench(tmp_path, methods=["fixed"], seeds=[0, 1])

    def interrupted(job, poll, timeout_s):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench(cfg, runner=interrupted)
    runs = json.loads((tmp_path / "bench" / "bench.json").read_text())["runs"]
    assert runs["fixed/seed0"]["status"] == "interrupted" and runs["fixed/seed1"]["status"] == "pending"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_bench_stopped_by_a_signal_records_it_even_where_sigint_was_ignored(tmp_path, signum):
    """`kill` (SIGTERM), or SIGINT to a bench a script started in the background (the shell leaves SIGINT
    ignored there), stops it as Ctrl-C does: the running run is recorded as interrupted, the rest stay pending."""
    cfg = _bench(tmp_path, methods=["fixed"], seeds=[0, 1])
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:

        def killed(job, poll, timeout_s):
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises here
            return 0

        with pytest.raises(KeyboardInterrupt):
            run_bench(cfg, runner=killed)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the bench's handlers are gone again
    finally:
        signal.signal(signal.SIGINT, old)
    runs = json.loads((tmp_path / "bench" / "bench.json").read_text())["runs"]
    assert runs["fixed/seed0"]["status"] == "interrupted" and runs["fixed/seed1"]["status"] == "pending"


def test_a_run_that_cannot_start_is_recorded_and_the_bench_goes_on(tmp_path):
    cfg = _bench(tmp_path, methods=["fixed"], seeds=[0, 1])
    fake = FakeTrain()

    def flaky(job, poll, timeout_s):
        if job.seed == 0:
            raise OSError("no such interpreter")
        return fake(job, poll, timeout_s)

    manifest = run_bench(cfg, runner=flaky)
    assert manifest.runs["fixed/seed0"].status == "failed"
    assert "could not be run (OSError: no such interpreter)" in manifest.runs["fixed/seed0"].error
    assert manifest.runs["fixed/seed1"].status == "done"


def test_bench_run_command_reports_and_exits_1_on_a_failed_run(tmp_path, monkeypatch):
    import harnessrl.bench.runner as runner_module

    def fake(job, poll, timeout_s):
        if job.method == "fixed":
            job.log_path.write_text("MemoryError\n")
            return 1
        make_run(Path(job.run_dir).parents[1], job.method, job.seed, val={0: 0.1, 2: 0.2}, test={0: 0.1, 2: 0.3})
        (job.run_dir / "config.yaml").write_text(yaml.safe_dump(job.settings))
        return 0

    monkeypatch.setattr(runner_module, "subprocess_runner", fake)
    path = _write_yaml(
        tmp_path / "b.yaml",
        {"base": {"model": "tiny", "grpo": {"max_steps": 2}}, "out": str(tmp_path / "o"), "seeds": [0]},
    )
    result = cli.invoke(app, ["bench", "run", "--config", str(path), "--methods", "fixed,harnessrl"])
    assert result.exit_code == 1
    out = flat(result.output)
    assert "1 run(s) failed: fixed/seed0" in out
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert list(res["methods"]) == ["fixed", "harnessrl"] and res["methods"]["fixed"]["seeds"] == []
    assert res["methods"]["harnessrl"]["test_end"]["mean"] == 0.3
    assert any("fixed/seed0 (exited with code 1)" in n for n in res["notes"])
    assert any("No run of fixed has recorded anything" in n for n in res["notes"])


def test_a_harness_arm_is_known_by_its_method_setting(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        make_run(root, "mine", seed, val={0: 0.1, 2: 0.2}, test={0: 0.1, 2: 0.3}, trainer_method="harnessrl")
        make_run(root, "harnessrl-off", seed, val={0: 0.1, 2: 0.2}, test={0: 0.1, 2: 0.2}, trainer_method="fixed")
    res = write_bench_report(root, plots=False).results.model_dump()
    assert res["harness_arms"] == ["mine"]
    assert [(c["harness"], c["baseline"]) for c in res["comparisons"]] == [("mine", "harnessrl-off")]
    assert res["comparisons"][0]["test_end"]["mean"] == pytest.approx(0.1)
    # any method that runs the evolver is a harness arm: the harness over plain GRPO too, and runs made when the
    # harness over DAPO was called harnessrl-dapo
    for seed in (0, 1, 2):
        make_run(root, "over-grpo", seed, val={0: 0.1, 2: 0.2}, test={0: 0.1, 2: 0.25}, trainer_method="harnessrl-grpo")
        make_run(root, "old-name", seed, val={0: 0.1, 2: 0.2}, test={0: 0.1, 2: 0.25}, trainer_method="harnessrl-dapo")
    assert write_bench_report(root, plots=False).results.harness_arms == ["mine", "old-name", "over-grpo"]


def test_the_dapo_section_counts_for_every_method_that_reads_it(tmp_path):
    cfg = _bench(tmp_path, methods=["fixed", "harnessrl", "harnessrl-grpo"], seeds=[0])
    run_bench(cfg, runner=FakeTrain())
    changed = _bench(
        tmp_path, methods=["fixed", "harnessrl", "harnessrl-grpo"], seeds=[0], overrides={"dapo.max_extra_groups": 1}
    )
    with pytest.raises(ConfigError) as e:  # the harness (over DAPO) reads it; plain GRPO, with or without it, does not
        plan_jobs(changed)
    msg = str(e.value)
    assert "harnessrl/seed0: dapo.max_extra_groups" in msg
    assert "fixed/seed0" not in msg and "harnessrl-grpo/seed0" not in msg


def test_a_run_directory_as_bench_output_is_refused(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "config.yaml").write_text("seed: 0\n")
    (tmp_path / "bench" / "metrics.jsonl").write_text("")
    with pytest.raises(HarnessRLError, match="training run's directory"):
        plan_jobs(_bench(tmp_path))


def test_subprocess_runner_logs_output_and_enforces_the_timeout(tmp_path):
    def job(code: str) -> RunJob:
        return RunJob(
            method="m",
            seed=0,
            run_dir=tmp_path / "run",
            config_path=tmp_path / "c.yaml",
            log_path=tmp_path / "logs" / "m.log",
            settings={},
            action="start",
            reason="",
            max_steps=1,
            command=[sys.executable, "-c", code],
        )

    polls = []
    assert subprocess_runner(job("print('hello from the run')"), lambda: polls.append(1), None) == 0
    assert "hello from the run" in (tmp_path / "logs" / "m.log").read_text()
    assert subprocess_runner(job("raise SystemExit(3)"), lambda: None, None) == 3
    # a run past its limit is stopped: 124, not the 0 it would end with after its minute (no wall-clock bound:
    # a loaded machine is slow, not wrong)
    assert subprocess_runner(job("import time; time.sleep(60)"), lambda: None, 0.5) == 124
    assert "stopped by the bench" in (tmp_path / "logs" / "m.log").read_text()


# --------------------------------------------------------------------------------------- report
def _jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_run(
    root: Path,
    method: str,
    seed: int,
    val: dict[int, float],
    test: dict[int, float],
    *,
    steps: int = 4,
    eff: float = 0.5,
    low: float = 0.25,
    high: float = 0.25,
    generated: int = 8,
    trial: int = 0,
    judge: int = 16,
    wall: float = 100.0,
    overhead: float | None = 10.0,
    split: bool = True,
    events=(),
    summary: bool = True,
    trainer_method: str | None = None,
) -> Path:
    """A run directory as the trainer leaves it, with known numbers."""
    run = root / method / f"seed{seed}"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(
        yaml.safe_dump({"method": trainer_method or method, "seed": seed, "grpo": {"max_steps": steps}}),
        encoding="utf-8",
    )
    _jsonl(
        run / "metrics.jsonl",
        [
            {
                "step": s,
                "reward": 0.1 * s,
                "effective_group_ratio": eff,
                "frac_reward_zero_std/all_low": low,
                "frac_reward_zero_std/all_high": high,
                "rollouts/generated": generated * s,
                "rollouts/discarded": 0,
                "rollouts/trial": trial * s,
                "judge/calls": judge,  # this step's
                "judge/calls_total": judge * s,  # cumulative
            }
            for s in range(1, steps + 1)
        ]
        + [{"step": steps, "train_runtime": 12.0}],
    )
    rows = []
    for name, scores in (("validation", val), ("test", test)):
        if not split and name == "validation":
            continue
        for step, v in scores.items():
            row = {"step": step, "overall": v, "per_domain": {"a": v + 0.1, "b": v - 0.1}, "tasks": 4}
            if split:
                row["split"] = name
            rows.append(row)
    rows.append({"step": -1, "overall": 0.99, "per_domain": {}, "source": "harnessrl eval"})  # not a curve point
    _jsonl(run / "eval.jsonl", rows)
    chooser = val if split else test
    best = max(sorted(chooser), key=lambda s: chooser[s])
    (run / "best.json").write_text(json.dumps({"step": best, "overall": chooser[best]}))
    if summary:  # the run's totals in its accounting, as the trainer writes them
        accounting = {
            "rollouts_generated": generated * steps,
            "rollouts_discarded": 0,
            "rollouts_trial": trial * steps,
            "judge_calls": judge * steps,
            "effective_group_ratio": eff,
            "wall_seconds": wall,
            "harness_overhead_seconds": overhead,
        }
        (run / "summary.json").write_text(json.dumps({"steps": steps, "wall_seconds": wall, "accounting": accounting}))
    _jsonl(run / "events.jsonl", list(events))
    return run


DECISIONS = [
    {"time": 0.0, "kind": "failure", "step": 1, "failure": "non_discriminative_low", "task_id": "t1"},
    {
        "time": 0.0,
        "kind": "proposal",
        "step": 1,
        "interface": "rollout_guidance",
        "candidate_id": "c1",
        "update": {"task_id": "t1", "rationale": "flat low [rule-based: guide]"},
    },
    {
        "time": 0.0,
        "kind": "trial",
        "step": 1,
        "interface": "rollout_guidance",
        "candidate_id": "c1",
        "result": {"accepted": False, "cost": {"rollouts": 8, "judge_calls": 4, "seconds": 3.0}},
    },
    {"time": 0.0, "kind": "verdict", "step": 1, "interface": "rollout_guidance", "verdict": "rejected"},
    {"time": 0.0, "kind": "proposal", "step": 2, "interface": "rubric_criteria", "candidate_id": "c2"},
    {
        "time": 0.0,
        "kind": "trial",
        "step": 2,
        "interface": "rubric_criteria",
        "candidate_id": "c2",
        "result": {"accepted": True, "cost": {"rollouts": 0, "judge_calls": 12, "seconds": 0.5}},
    },
    {"time": 0.0, "kind": "verdict", "step": 2, "interface": "rubric_criteria", "verdict": "accepted"},
    {"time": 0.0, "kind": "commit", "step": 2, "interface": "rubric_criteria", "version": 1},
    {"time": 0.0, "kind": "evolution_point", "step": 2, "seconds": 1.0},
]


@pytest.fixture
def synthetic_bench(tmp_path) -> Path:
    root = tmp_path / "bench"
    # fixed: best validation at step 4, test there 0.30 + seed/100
    for seed in (0, 1, 2):
        make_run(
            root,
            "fixed",
            seed,
            val={0: 0.2, 2: 0.25, 4: 0.3},
            test={0: 0.2, 2: 0.24, 4: 0.30 + seed / 100},
            eff=0.4,
            wall=200.0,
            overhead=0.0,
        )
    # harnessrl: best validation at step 2, test there 0.35 + seed/100; spends trial rollouts
    for seed in (0, 1, 2):
        make_run(
            root,
            "harnessrl",
            seed,
            val={0: 0.2, 2: 0.4, 4: 0.35},
            test={0: 0.2, 2: 0.35 + seed / 100, 4: 0.33},
            eff=0.6,
            trial=2,
            wall=250.0,
            overhead=25.0,
            events=DECISIONS,
        )
    # dapo: two seeds only, one of them unfinished
    make_run(root, "dapo", 0, val={0: 0.2, 4: 0.3}, test={0: 0.2, 4: 0.28})
    make_run(root, "dapo", 1, val={0: 0.2, 2: 0.22}, test={0: 0.2, 2: 0.21}, summary=False)
    return root


def test_report_aggregates_a_synthetic_bench(synthetic_bench):
    rep = write_bench_report(synthetic_bench)
    res = json.loads(rep.json.read_text())
    assert set(res["methods"]) == {"fixed", "harnessrl", "dapo"}
    fixed, harness, dapo = (res["methods"][m] for m in ("fixed", "harnessrl", "dapo"))
    assert fixed["seeds"] == [0, 1, 2] and fixed["test_at_best"]["n"] == 3
    assert fixed["test_at_best"]["mean"] == pytest.approx(0.31)
    assert fixed["test_at_best"]["std"] == pytest.approx(0.01)
    assert harness["test_at_best"]["mean"] == pytest.approx(0.36)
    assert harness["test_end"]["mean"] == pytest.approx(0.33) and harness["test_end"]["std"] == pytest.approx(0.0)
    assert fixed["steps_to_best"]["mean"] == 4 and harness["steps_to_best"]["mean"] == 2
    assert harness["validation_best"]["mean"] == pytest.approx(0.4)
    assert harness["test_start"]["mean"] == pytest.approx(0.2)
    assert harness["test_at_best_per_domain"]["a"]["mean"] == pytest.approx(0.46)
    assert fixed["effective_group_ratio"]["mean"] == pytest.approx(0.4)
    assert harness["zero_std_all_low"]["mean"] == pytest.approx(0.25)
    assert harness["rollouts_generated"]["mean"] == 32 and harness["rollouts_trial"]["mean"] == 8
    assert harness["rollouts_spent"]["mean"] == 40 and fixed["rollouts_spent"]["mean"] == 32
    assert harness["judge_calls"]["mean"] == 64
    assert harness["harness_overhead_share"]["mean"] == pytest.approx(0.1)
    assert fixed["harness_overhead_share"]["mean"] == 0.0
    assert harness["harness_commits"]["mean"] == 1 and harness["harness_rejections"]["mean"] == 1
    # the trials by remedy, summed over the 3 seeds (a proposal without a tag is named by the interface)
    assert harness["trial_costs"] == {
        "rollout_guidance:guide": {"trials": 3, "accepted": 0, "rollouts": 24, "judge_calls": 12, "seconds": 9.0},
        "rubric_criteria:update": {"trials": 3, "accepted": 3, "rollouts": 0, "judge_calls": 36, "seconds": 1.5},
    }
    md = rep.markdown.read_text()
    assert "rollouts training generated (96), the judge calls" in md
    assert "| rollout_guidance:guide | 3 | 0 | 24 | 25.0% | 12 | 0.1 |" in md
    assert dapo["seeds"] == [0, 1] and dapo["complete_seeds"] == [0]

    comps = {(c["harness"], c["baseline"]): c for c in res["comparisons"]}
    assert set(comps) == {("harnessrl", "fixed"), ("harnessrl", "dapo")}
    c = comps["harnessrl", "fixed"]
    assert c["test_at_best"]["mean"] == pytest.approx(0.05) and c["test_at_best"]["n"] == 3
    assert c["test_at_best"]["verdict"] == "higher on every seed (3)"
    assert c["steps_to_best"]["mean"] == -2 and c["steps_to_best"]["verdict"] == "fewer steps on every seed (3)"
    assert c["steps_to_best"]["ratio_of_means"] == pytest.approx(0.5)
    assert "fewer than 3 seeds: no conclusion" in comps["harnessrl", "dapo"]["test_at_best"]["verdict"]

    md = rep.markdown.read_text()
    assert "## Scores per method" in md and "## HarnessRL against each baseline" in md
    assert "| fixed | 3 (3 finished) | 0.310 ± 0.010 |" in md
    assert "Fewer than 3 seeds for dapo (2)" in md
    assert "dapo/seed1" in md and "Not finished" in md
    assert "wins" not in md.lower()
    assert "Best validation score at the last step (dapo 1 of 2, fixed 3 of 3 runs)" in md
    for name, path in rep.plots.items():
        assert path.is_file() and path.stat().st_size > 5000, name
        assert f"]({path.relative_to(synthetic_bench)})" in md


def test_mixed_results_are_reported_as_mixed():
    figs = []
    for seed, (h, b) in enumerate([(0.4, 0.3), (0.3, 0.35), (0.5, 0.45)]):
        for method, v in (("harnessrl", h), ("fixed", b)):
            figs.append(
                RunFigures(
                    method=method,
                    trainer_method=method,
                    seed=seed,
                    path="",
                    complete=True,
                    status="done",
                    split="validation/test",
                    rollouts_spent_source="",
                    steps=4,
                    test_curve=[],
                    test_at_best=v,
                    test_end=v,
                    steps_to_best=2,
                    test_at_best_per_domain={},
                    test_end_per_domain={},
                )
            )
    c = compare(aggregate(figs))[0].model_dump()
    assert c["test_at_best"]["higher"] == 2 and c["test_at_best"]["lower"] == 1
    assert "no consistent difference" in c["test_at_best"]["verdict"]
    assert c["steps_to_best"]["mean"] == 0 and c["steps_to_best"]["verdict"] == "the same on every seed (3)"


def test_report_without_splits_or_metrics_says_so_and_shows_na(tmp_path):
    root = tmp_path / "bench"
    for seed in (0, 1, 2):
        make_run(root, "fixed", seed, val={}, test={0: 0.2, 4: 0.3}, split=False, overhead=None)
    bare = root / "harnessrl" / "seed0"
    bare.mkdir(parents=True)
    (bare / "config.yaml").write_text("seed: 0\n")  # started, nothing else recorded yet
    (bare / "metrics.jsonl").write_text('{"step": 1, "reward": 0.2}\n{"step": 2, "rew')  # torn last line

    rep = write_bench_report(root)
    res = rep.results.model_dump()
    fixed = res["methods"]["fixed"]
    assert fixed["test_at_best"]["mean"] == pytest.approx(0.3) and fixed["steps_to_best"]["mean"] == 4
    assert fixed["harness_overhead_seconds"]["n"] == 0
    assert res["methods"]["harnessrl"]["test_at_best"]["mean"] is None
    md = rep.markdown.read_text()
    assert "one held-out set that both chooses the best checkpoint" in md
    assert "| harnessrl | 1 (0 finished) | n/a |" in md
    assert all(p.is_file() for p in rep.plots.values())


def test_totals_come_from_the_summary_alone_and_a_run_not_ended_has_none(tmp_path):
    """The run's totals have one source, its summary's accounting: never the logged counters or steps.jsonl."""
    run = make_run(tmp_path / "bench", "fixed", 0, val={0: 0.1}, test={0: 0.1}, steps=2, eff=0.4)
    _jsonl(run / "metrics.jsonl", [{"step": 1, "effective_group_ratio": 0.9, "rollouts/generated": 1000}, {"step": 2}])
    f = run_figures(load_runs(tmp_path / "bench")[0][0])
    assert f.effective_group_ratio == pytest.approx(0.4) and f.rollouts_generated == 16
    assert f.rollouts_spent == 16 and f.steps == 2
    (run / "summary.json").unlink()  # still going (or killed): no totals yet, the steps logged so far
    f = run_figures(load_runs(tmp_path / "bench")[0][0])
    assert not f.complete and f.steps == 2
    assert f.effective_group_ratio is None and f.rollouts_spent is None and f.judge_calls is None


def test_wall_time_counts_every_attempt_of_a_resumed_run(tmp_path):
    root = tmp_path / "bench"
    run = make_run(root, "harnessrl", 0, val={0: 0.1}, test={0: 0.1}, wall=100.0, overhead=10.0)
    manifest = {
        "runs": {
            "harnessrl/seed0": {
                "method": "harnessrl",
                "seed": 0,
                "run_dir": str(run),
                "status": "done",
                "wall_seconds": 300.0,
            }
        }
    }
    (root / "bench.json").write_text(json.dumps(manifest))
    f = run_figures(load_runs(root)[0][0])
    assert f.wall_seconds == 300.0  # two processes, as the bench timed them
    assert f.harness_overhead_share == pytest.approx(0.1)  # within the process that measured it
    manifest["runs"]["harnessrl/seed0"].update(status="running", wall_seconds=0.0)  # going again: not timed yet
    (root / "bench.json").write_text(json.dumps(manifest))
    (run / "summary.json").unlink()
    assert run_figures(load_runs(root)[0][0]).wall_seconds is None


def test_bench_report_command(synthetic_bench):
    result = cli.invoke(app, ["bench", "report", "--dir", str(synthetic_bench)])
    assert result.exit_code == 0, result.output
    out = flat(result.output)
    assert "harnessrl vs fixed: test @ best val higher on every seed (3)" in out
    assert (synthetic_bench / "results.md").is_file()
    result = cli.invoke(app, ["bench", "report", "--dir", str(synthetic_bench / "nothing")])
    assert result.exit_code != 0 and "no such bench folder" in str(result.exception)


def test_bench_run_command_dry_run_and_bad_lists(tmp_path):
    path = _write_yaml(
        tmp_path / "b.yaml", {"base": {"model": "tiny", "grpo": {"max_steps": 2}}, "out": str(tmp_path / "o")}
    )
    result = cli.invoke(
        app, ["bench", "run", "--config", str(path), "--dry-run", "--methods", "dapo,odf", "--seeds", "5"]
    )
    assert result.exit_code == 0, result.output
    assert "Bench plan: 2 run(s)" in result.output and "odf" in result.output
    assert not (tmp_path / "o").exists()
    result = cli.invoke(app, ["bench", "run", "--config", str(path), "--seeds", "a,b"])
    assert result.exit_code != 0 and "comma-separated" in str(result.exception)


# --------------------------------------------------------------------------------------- end to end
def _task(tid: str, domain: str, prompt: str, reference: str, judged: str) -> dict:
    """A task whose gold rubric is what its prompt asks (the judged criterion): the oracle trains on it and
    evaluation grades with it, while every other method trains on the proxy (judged plus a word count)."""
    row = task_row(tid, domain, prompt, reference, judged, words="at most five words")
    return {**row, "gold_rubric": [{"id": "g1", "text": judged, "weight": 1}]}


@pytest.mark.slow
@pytest.mark.timeout(900)  # a whole bench of every method: minutes on a loaded two-core machine
def test_every_method_end_to_end_on_a_tiny_model(tmp_path, tiny_model_dir):
    """Every built-in method for 2 steps as real `harnessrl train` processes, then the report."""
    from harnessrl.trainer.train_config import DataConfig, TrainConfig

    rows = {
        "train": [
            _task("fruit", "food", "Name a fruit.", "An apple.", "Names a fruit such as an apple"),
            _task("bread", "food", "How is bread made?", "Baked from flour.", "Mentions flour"),
            _task("sky", "nature", "Why is the sky blue?", "Scattered sunlight.", "Mentions scattered sunlight"),
            _task("rain", "nature", "Where does rain come from?", "From clouds.", "Mentions clouds"),
        ],
        "validation": [
            _task("v-soup", "food", "Name a soup.", "Tomato soup.", "Names a soup"),
            _task("v-snow", "nature", "What is snow?", "Frozen water.", "Says snow is frozen water"),
        ],
        "test": [
            _task("t-tea", "food", "Name a tea.", "Green tea.", "Names a tea"),
            _task("t-wind", "nature", "What is wind?", "Moving air.", "Says wind is moving air"),
        ],
    }
    files = {}
    for name, data in rows.items():
        files[name] = tmp_path / f"{name}.jsonl"
        _jsonl(files[name], data)
    if "validation" in DataConfig.model_fields:
        data = {"train": str(files["train"]), "validation": str(files["validation"]), "test": str(files["test"])}
    else:  # a trainer from before the validation/test split
        data = {"train": str(files["train"]), "validation": str(files["test"]), "test": str(files["test"])}
    methods = list(builtin_methods()) if "method" in TrainConfig.model_fields else ["fixed", "harnessrl"]
    bench = {
        "out": str(tmp_path / "bench"),
        "methods": methods,
        "seeds": [0],
        "timeout_minutes": 5,
        "keep_resume_checkpoints": True,  # the resume below needs a finished run's last checkpoint
        "base": {
            "model": str(tiny_model_dir),
            "device": "cpu",
            "data": data,
            "grpo": {
                "num_generations": 2,
                "tasks_per_step": 2,
                "max_completion_length": 8,
                "learning_rate": 1e-2,
                "max_steps": 2,
                "save_steps": 1,
            },
            "harness": {"memory": {"enabled": False}, "detectors": {"eps": 0.02}},
            "evolver": {"every_steps": 1},
            "eval": {"every_steps": 1, "max_new_tokens": 8, "batch_size": 4},
        },
    }
    if "method" not in TrainConfig.model_fields:
        bench["method_settings"] = {"fixed": {"evolver.enabled": False}, "harnessrl": {"evolver.enabled": True}}
    path = _write_yaml(tmp_path / "bench.yaml", bench)
    t0 = time.perf_counter()
    result = cli.invoke(app, ["bench", "run", "--config", str(path)])
    print(f"tiny bench, {len(methods)} runs: {time.perf_counter() - t0:.1f} s")
    manifest = json.loads((tmp_path / "bench" / "bench.json").read_text())
    for key, row in manifest["runs"].items():
        assert row["status"] == "done", f"{key}: {row.get('error')}"
    assert result.exit_code == 0, result.output

    res = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert list(res["methods"]) == methods
    for m in methods:
        a = res["methods"][m]
        assert a["seeds"] == [0] and a["complete_seeds"] == [0]
        assert a["test_at_best"]["mean"] is not None and a["test_end"]["mean"] is not None
        assert a["steps_to_best"]["mean"] in (0, 1, 2)
        assert a["rollouts_spent"]["mean"] >= 2 * 2 * 2
        assert a["wall_seconds"]["mean"] > 0
    assert all(
        (tmp_path / "bench" / "plots" / p).is_file()
        for p in (
            "test_score.png",
            "effective_group_ratio.png",
            "zero_std_fraction.png",
            "score_vs_rollouts.png",
            "harness_timeline.png",
        )
    )
    md = (tmp_path / "bench" / "results.md").read_text()
    assert "Fewer than 3 seeds" in md

    # run again: everything is finished, nothing runs
    result = cli.invoke(app, ["bench", "run", "--config", str(path), "--no-report"])
    assert result.exit_code == 0 and result.output.count("skip") == len(methods)

    # a run killed after its last checkpoint (no summary.json) resumes from it
    (tmp_path / "bench" / "harnessrl" / "seed0" / "summary.json").unlink()
    result = cli.invoke(app, ["bench", "run", "--config", str(path), "--methods", "harnessrl", "--no-report"])
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "bench" / "bench.json").read_text())["runs"]["harnessrl/seed0"]
    assert row["status"] == "done" and row["attempts"][-1]["command"][-1] == "--resume"
    assert (tmp_path / "bench" / "harnessrl" / "seed0" / "summary.json").is_file()
