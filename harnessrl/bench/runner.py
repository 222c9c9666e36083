"""Runs a benchmark: every (method, seed) as its own ``harnessrl train`` process.

Each run is a separate process so that a crash, a hang or a memory leak in one costs that run only.
By default runs go one at a time: on a CPU box they share its few cores, and timings of runs that
compete for them are not comparable. ``jobs=N`` runs N at once, each with ``cores // N`` torch threads
(at least one; ``OMP_NUM_THREADS``), which uses the cores for scores (deterministic per seed at a fixed
thread count) at the price of comparable wall times. The bench is resumable from its output folder alone:

- a run whose ``summary.json`` reports all its steps is **skipped**;
- a run that stopped part-way **resumes** (``--resume``) from its last checkpoint, or starts again
  (``--overwrite``) when it never reached one;
- a missing run **starts**.

A run whose folder was made with other settings than the bench now resolves is refused (the results
would mix configurations) unless ``rerun_changed`` says to start it again. ``bench.json`` in the
output folder records every run: its command, status, attempts with wall time and exit code, and the
error and log tail of a failure; each run's output goes to ``<out>/<method>/seed<k>.log``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harnessrl.bench.config import BenchConfig, TrainSettings, resolve_train_config
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.records.bench_files import (
    BENCH_MANIFEST,
    BenchManifest,
    ManifestAttempt,
    ManifestRun,
    read_bench_manifest,
)
from harnessrl.records.checkpoints import checkpoint_folders
from harnessrl.records.run_dir import read_tail
from harnessrl.records.run_record import Missing, last_logged_step, read_summary
from harnessrl.trainer.methods import METHOD_TABLE

__all__ = [
    "CommandRunner",
    "RunJob",
    "failed_runs",
    "inspect_run",
    "plan_jobs",
    "run_bench",
    "subprocess_runner",
    "threads_per_run",
]

logger = logging.getLogger(__name__)

Action = Literal["skip", "start", "resume", "restart"]
MANIFEST = BENCH_MANIFEST


@dataclass
class RunJob:
    """One (method, seed) of a bench and what to do about it now."""

    method: str
    seed: int
    run_dir: Path
    config_path: Path
    log_path: Path
    settings: TrainSettings
    action: Action
    reason: str
    max_steps: int
    command: list[str] = field(default_factory=list)
    threads: int | None = None  # torch threads of the run's process (None: the environment's)

    @property
    def key(self) -> str:
        return f"{self.method}/seed{self.seed}"


class CommandRunner(Protocol):
    """Runs a job's command to the end and returns its exit code; calls ``poll()`` every few seconds."""

    def __call__(self, job: RunJob, poll: Callable[[], None], timeout_s: float | None) -> int: ...


# ------------------------------------------------------------------------------------------ planning
def _expected_steps(settings: TrainSettings) -> int:
    return int((settings.get("grpo") or {}).get("max_steps") or 0)


def inspect_run(run_dir: Path, max_steps: int) -> tuple[Literal["done", "partial", "missing"], str]:
    """Whether a run folder holds a finished run, a part of one, or nothing (with a few words why).

    ``harnessrl train`` writes ``summary.json`` last, so a readable one means the run finished (a run
    may end before ``max_steps``, e.g. when a method runs out of tasks; a changed ``max_steps`` is a
    changed config, which :func:`plan_jobs` catches)."""
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return "missing", "no run yet"
    if not (run_dir / "summary.json").is_file():
        return "partial", "stopped before its summary.json"
    try:
        summary = read_summary(run_dir)
    except HarnessRLError:
        summary = Missing("damaged")
    if isinstance(summary, Missing):
        return "partial", "summary.json is unreadable"
    return "done", f"finished ({summary.steps} of {max_steps} steps)"


def _has_checkpoint(run_dir: Path) -> bool:
    return bool(checkpoint_folders(run_dir))


def _normal(data: Any) -> Any:
    return json.loads(json.dumps(yaml.safe_load(yaml.safe_dump(data, sort_keys=True)), sort_keys=True, default=str))


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [prefix.rstrip(".")]


def _inert(settings: Any) -> set[str]:
    """Sections of a run's settings its method never reads: the evolver's for a method that does not run it,
    DAPO's and ODF's for the other methods (a change there cannot change what the run did)."""
    if not isinstance(settings, dict):
        return set()
    spec = METHOD_TABLE.get(settings.get("method"))  # type: ignore[arg-type]
    own = spec.settings_section if spec is not None else None
    out = {s.settings_section for s in METHOD_TABLE.values() if s.settings_section and s.settings_section != own}
    # a config.yaml from before the method decided alone says so in its evolver.enabled (written then, never now)
    runs_evolver = spec.evolver if spec is not None else (settings.get("evolver") or {}).get("enabled", True)
    if not runs_evolver:
        out.add("evolver")
    return out


DERIVED_ALIASES = ("evolver.enabled",)
"""Settings an older config.yaml wrote that only repeated another one (``method``): never a change of their own."""


def _changed_settings(old: TrainSettings, new: TrainSettings) -> list[str]:
    """The settings a run made with ``old`` would have run differently under ``new``."""
    inert = _inert(old) & _inert(new)
    return [
        d
        for d in _differences(_normal(old), _normal(new))
        if d.split(".", 1)[0] not in inert and d not in DERIVED_ALIASES
    ]


def _validated_settings(data: TrainSettings, method: str, seed: int) -> TrainSettings:
    """The complete, validated training settings of one run (every default written out)."""
    from pydantic import ValidationError

    from harnessrl.trainer.train_config import TrainConfig

    try:
        cfg = TrainConfig.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "config"
            if err["type"] == "extra_forbidden":
                hint = "unknown setting of the training config"
                if where == "method":
                    hint += (
                        ": this version of the trainer has no 'method' setting, which the built-in methods "
                        "select; give each method its overrides in method_settings instead"
                    )
                lines.append(f"  {where}: {hint}")
            else:
                lines.append(f"  {where}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError(f"method {method!r}, seed {seed}: invalid training settings:\n" + "\n".join(lines)) from None
    return cfg.model_dump(mode="json")


def train_command(config_path: Path, action: Action) -> list[str]:
    """The command line of one run: this interpreter, ``harnessrl.cli train``, and resume/overwrite."""
    cmd = [sys.executable, "-m", "harnessrl.cli", "train", "--config", str(config_path)]
    if action == "resume":
        cmd.append("--resume")
    elif action == "restart":
        cmd.append("--overwrite")
    return cmd


def _refuse_run_dir_as_out(cfg: BenchConfig) -> None:
    """Refuse an output folder that is a single training run's directory (a common slip of --out)."""
    if (cfg.out_path / "config.yaml").is_file() and (cfg.out_path / "metrics.jsonl").exists():
        raise HarnessRLError(
            f"{cfg.out} is a training run's directory, not a bench output folder: choose another --out"
        )


def plan_jobs(cfg: BenchConfig, *, rerun_changed: bool = False) -> list[RunJob]:
    """Every run of the bench with its action, all settings validated before any run starts.

    Raises :class:`ConfigError` for invalid settings, and for runs made with other settings than the
    bench resolves now (unless ``rerun_changed``)."""
    _refuse_run_dir_as_out(cfg)
    jobs: list[RunJob] = []
    changed: list[str] = []
    # seed-major: an interrupted bench still has every method on its first seeds, comparable side by side
    for seed in cfg.seeds:
        for method in cfg.methods:
            settings = _validated_settings(resolve_train_config(cfg, method, seed), method, seed)
            run_dir = cfg.run_dir(method, seed)
            max_steps = _expected_steps(settings)
            state, why = inspect_run(run_dir, max_steps)
            action: Action
            diff: list[str] = []
            if state != "missing" and (run_dir / "config.yaml").is_file():
                try:
                    old = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
                except (yaml.YAMLError, OSError):
                    old = None
                diff = _changed_settings(old, settings) if isinstance(old, dict) else ["config.yaml"]
            if diff and not rerun_changed:
                changed.append(f"  {method}/seed{seed}: {', '.join(diff[:6])}{' ...' if len(diff) > 6 else ''}")
            if state == "missing":
                action, reason = "start", why
            elif diff:
                action, reason = "restart", f"settings changed ({', '.join(diff[:3])})"
            elif state == "done":
                action, reason = "skip", why
            elif _has_checkpoint(run_dir):
                action, reason = "resume", f"{why}; resuming from its last checkpoint"
            else:
                action, reason = "restart", f"{why}, with no checkpoint to resume from"
            config_path = cfg.out_path / method / f"seed{seed}.yaml"
            jobs.append(
                RunJob(
                    method=method,
                    seed=seed,
                    run_dir=run_dir,
                    config_path=config_path,
                    log_path=cfg.out_path / method / f"seed{seed}.log",
                    settings=settings,
                    action=action,
                    reason=reason,
                    max_steps=max_steps,
                    command=train_command(config_path, action),
                )
            )
    if changed:
        raise ConfigError(
            f"{len(changed)} run(s) in {cfg.out} were made with other settings than the bench resolves now:\n"
            + "\n".join(changed)
            + "\nMixing them would compare different configurations: pass --rerun-changed to run them again, "
            "or choose another --out"
        )
    return jobs


# ------------------------------------------------------------------------------------------ running
def subprocess_runner(job: RunJob, poll: Callable[[], None], timeout_s: float | None) -> int:
    """Run the job's command as a child process, output appended to its log; the exit code (124: timed out).

    Ctrl-C stops the child as well (it is asked to stop, then killed after 30 s) and is raised again.
    ``job.threads`` (when set) is the child's torch thread count (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``)."""
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    if job.threads is not None:
        env.update(OMP_NUM_THREADS=str(job.threads), MKL_NUM_THREADS=str(job.threads))
    with open(job.log_path, "a", encoding="utf-8") as log:
        log.write(f"\n=== {datetime.now(UTC).isoformat(timespec='seconds')} {' '.join(job.command)}\n")
        log.flush()
        # the child takes SIGINT even when the bench itself was started with it ignored (`nohup ... &` in a
        # script): a stop asks it first, so the trainer closes its files
        proc = subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_default_sigint)
        t0 = time.monotonic()
        try:
            while True:
                try:
                    return proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    poll()
                    if timeout_s is not None and time.monotonic() - t0 > timeout_s:
                        _stop(proc)
                        log.write(f"\n=== stopped by the bench after {timeout_s:.0f} s (timeout_minutes)\n")
                        return 124
        except BaseException:
            _stop(proc)
            raise


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGINT stop the bench as Ctrl-C does (``KeyboardInterrupt``: every running run is asked to
    stop and recorded), also when the bench was started in the background by a script, where the shell leaves
    SIGINT ignored, and when it is stopped with a plain ``kill``. Outside the main thread: nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)  # lets the trainer close its files
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Manifest:
    """``bench.json``: what the bench ran, each run's status and attempts; rewritten atomically."""

    def __init__(self, cfg: BenchConfig, source: str | None):
        self.path = cfg.out_path / MANIFEST
        try:
            old = read_bench_manifest(self.path) or BenchManifest()
        except HarnessRLError as e:  # a damaged bench.json: its runs' folders are intact and say what ran
            logger.warning("%s; starting a new one", e)
            old = BenchManifest()
        self.data = BenchManifest(
            bench_config=source,
            out=cfg.out,
            created=old.created or _now(),
            updated=_now(),
            # methods and seeds of earlier invocations stay (e.g. one run with --methods), in their order
            methods={**old.methods, **{m: cfg.known_methods()[m] for m in cfg.methods}},
            seeds=sorted({*old.seeds, *cfg.seeds}),
            runs=dict(old.runs),  # each row as it was written
        )

    def run(self, job: RunJob) -> ManifestRun:
        row = self.data.runs.setdefault(job.key, ManifestRun(attempts=[]))
        if "attempts" not in row.model_fields_set:  # a row of an older bench.json without attempts
            row.attempts = []
        row.method = job.method
        row.seed = job.seed
        row.run_dir = str(job.run_dir)
        row.config = str(job.config_path)
        row.log = str(job.log_path)
        return row

    def save(self) -> None:
        self.data.updated = _now()
        for row in self.data.runs.values():
            row.wall_seconds = round(sum(a.wall_seconds or 0.0 for a in row.attempts), 1)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{MANIFEST}.tmp")
        # bench_configs is a merged manifest's (a report's), never a bench folder's
        written = self.data.model_dump(mode="json", exclude={"bench_configs"})
        try:
            tmp.write_text(json.dumps(written, indent=1, default=str), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as e:  # the previous bench.json stays as it was: the write goes through a temp file
            raise HarnessRLError(
                f"could not write {self.path}: {e.strerror or e}. The runs' own folders are intact; "
                "free disk space (finished runs' checkpoints/checkpoint-<step> folders can go) and run the "
                "bench again to go on from where it stopped."
            ) from e


def drop_resume_checkpoints(run_dir: Path) -> int:
    """Delete a finished run's ``checkpoints/checkpoint-<step>`` folders (what an interrupted run resumes
    from; a finished one never does), keeping ``best`` and ``final``. Returns the bytes freed."""
    import shutil

    freed = 0
    for _, ckpt in checkpoint_folders(run_dir):
        freed += sum(f.stat().st_size for f in ckpt.rglob("*") if f.is_file())
        shutil.rmtree(ckpt)
    return freed


def _write_settings(job: RunJob) -> None:
    job.config_path.parent.mkdir(parents=True, exist_ok=True)
    header = f"# resolved by `harnessrl bench run` for method {job.method!r}, seed {job.seed}; do not edit\n"
    job.config_path.write_text(header + yaml.safe_dump(job.settings, sort_keys=False), encoding="utf-8")


def threads_per_run(jobs: int, cores: int | None = None) -> int:
    """Torch threads for each of ``jobs`` runs at once: the cores shared out, at least one."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores // max(1, jobs))


def run_bench(
    cfg: BenchConfig,
    *,
    runner: CommandRunner | None = None,
    console: Console | None = None,
    rerun_changed: bool = False,
    dry_run: bool = False,
    source: str | None = None,
    jobs: int = 1,
) -> BenchManifest:
    """Run every job of the bench that is not finished; returns the manifest (also in ``bench.json``; with
    ``dry_run``, the one the bench would start from, unwritten).

    ``jobs``: how many runs go at once (each with :func:`threads_per_run` torch threads when more than one).
    A failed run is recorded and the bench goes on with the next one. Raises ``KeyboardInterrupt``
    again after recording the interrupted runs (every running one is stopped)."""
    if jobs < 1:
        raise HarnessRLError(f"--jobs {jobs}: run at least one job at a time")
    runner = runner or subprocess_runner
    console = console or Console()
    planned = plan_jobs(cfg, rerun_changed=rerun_changed)
    if jobs > 1:
        for job in planned:
            job.threads = threads_per_run(jobs)
    return _run_planned(cfg, planned, runner, console, dry_run, source, jobs)


def _run_planned(
    cfg: BenchConfig,
    jobs: list[RunJob],
    runner: CommandRunner,
    console: Console,
    dry_run: bool,
    source: str | None,
    parallel: int,
) -> BenchManifest:
    _print_plan(jobs, console)
    manifest = _Manifest(cfg, source)
    for job in jobs:
        row = manifest.run(job)
        if "status" not in row.model_fields_set:
            row.status = "pending"
        if job.action == "skip":
            row.status = "done"
        row.last_action = job.action
    if dry_run:
        return manifest.data
    manifest.save()
    todo = [j for j in jobs if j.action != "skip"]
    bench = _Bench(cfg, runner, console, manifest)
    with _stop_signals(), bench.progress:
        bench.overall = bench.progress.add_task("bench", total=len(jobs), completed=len(jobs) - len(todo), detail="")
        bench.run_all(todo, parallel)
        bench.progress.update(bench.overall, detail="")
    return manifest.data


class _Bench:
    """The runs of one ``bench run`` in progress: the manifest and the progress line (shared by the workers
    under one lock), and the stop every worker obeys once Ctrl-C reached the main thread."""

    def __init__(self, cfg: BenchConfig, runner: CommandRunner, console: Console, manifest: _Manifest):
        import threading

        self.cfg, self.runner, self.manifest = cfg, runner, manifest
        self.timeout_s = cfg.timeout_minutes * 60 if cfg.timeout_minutes else None
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self.overall: Any = None
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.running: dict[str, str] = {}

    def run_all(self, todo: list[RunJob], parallel: int) -> None:
        """Every run of ``todo``, ``parallel`` at a time (one: in this thread, so Ctrl-C reaches the run)."""
        from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

        if parallel <= 1:
            for job in todo:
                self.run(job)
            return
        pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="bench-run")
        futures = [pool.submit(self.run, job) for job in todo]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in done:
                f.result()  # a worker's own error (not a run's failure, which is recorded) goes up
        except BaseException:
            self.stop.set()
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)

    def _show(self, key: str | None = None, text: str | None = None) -> None:
        if key is not None:
            if text is None:
                self.running.pop(key, None)
            else:
                self.running[key] = text
        self.progress.update(self.overall, detail="; ".join(self.running.values()))

    def run(self, job: RunJob) -> None:
        """One run: started (its settings written, an attempt recorded), polled, and its outcome recorded."""
        if self.stop.is_set():  # the bench is stopping: this run stays pending
            return
        label = f"{job.method} seed {job.seed}"
        with self.lock:
            row = self.manifest.run(job)
            _write_settings(job)
            job.run_dir.parent.mkdir(parents=True, exist_ok=True)
            attempt = ManifestAttempt(action=job.action, started=_now(), command=job.command)
            if job.threads is not None:
                attempt.threads = job.threads
            row.attempts.append(attempt)
            row.status = "running"
            self.manifest.save()
            self._show(job.key, f"{label}: {job.action}")

        def poll() -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            step = last_logged_step(job.run_dir)
            with self.lock:
                self._show(job.key, f"{label}: " + ("starting" if step is None else f"step {step}/{job.max_steps}"))

        t0 = time.perf_counter()
        launch_error = None
        try:
            rc = self.runner(job, poll, self.timeout_s)
        except KeyboardInterrupt:
            self.stop.set()  # before this worker could take the next run
            with self.lock:
                _ended(attempt, round(time.perf_counter() - t0, 1), None)
                row.status, row.error = "interrupted", "stopped by Ctrl-C; run the bench again to resume"
                self._show(job.key)
                self.manifest.save()
            raise
        except Exception as e:  # the run could not even be started: record it and go on with the next
            logger.exception("running %s failed", job.key)
            rc, launch_error = -1, f"{type(e).__name__}: {e}"
        self._record(job, row, attempt, label, rc, time.perf_counter() - t0, launch_error)

    def _record(
        self,
        job: RunJob,
        row: ManifestRun,
        attempt: ManifestAttempt,
        label: str,
        rc: int,
        wall: float,
        launch_error: str | None,
    ) -> None:
        state, why = inspect_run(job.run_dir, job.max_steps)
        freed = 0
        if rc == 0 and state == "done" and not self.cfg.keep_resume_checkpoints:
            freed = drop_resume_checkpoints(job.run_dir)
        log = self.progress.console.log
        with self.lock:
            _ended(attempt, round(wall, 1), rc)
            if rc == 0 and state == "done":
                row.status = "done"
                row.forget("error", "log_tail")
                log(f"[green]✓[/] {label}: {why} in {wall / 60:.1f} min")
                if freed:
                    log(f"  dropped its resume checkpoints ({freed / 2**30:.1f} GiB)")
            else:
                if launch_error is not None:
                    problem = f"could not be run ({launch_error})"
                elif rc == 124 and self.timeout_s is not None:
                    problem = f"stopped after timeout_minutes={self.cfg.timeout_minutes:g}"
                elif rc == 0:
                    problem = f"exited 0 but the run is not complete ({why})"
                else:
                    problem = f"exited with code {rc}"
                row.status = "failed"
                row.error, row.log_tail = problem, read_tail(job.log_path)
                log(f"[red]✗[/] {label}: {problem} (log: {job.log_path})")
            self.manifest.save()
            self.progress.advance(self.overall)
            self._show(job.key)


def _ended(attempt: ManifestAttempt, wall_seconds: float, returncode: int | None) -> None:
    """An attempt's end, in the order bench.json has always written it: when, how long, and its exit code."""
    attempt.ended = _now()
    attempt.wall_seconds = wall_seconds
    attempt.returncode = returncode


def _print_plan(jobs: Sequence[RunJob], console: Console) -> None:
    from rich.table import Table

    t = Table(title=f"Bench plan: {len(jobs)} run(s)", title_justify="left")
    for col in ("method", "seed", "action", "why", "run directory"):
        t.add_column(col)
    colour = {"skip": "dim", "start": "cyan", "resume": "yellow", "restart": "magenta"}
    for j in jobs:
        t.add_row(j.method, str(j.seed), f"[{colour[j.action]}]{j.action}[/]", j.reason, str(j.run_dir))
    console.print(t)


def failed_runs(manifest: BenchManifest) -> list[str]:
    """Keys of the runs whose status is failed or interrupted."""
    return [k for k, r in manifest.runs.items() if r.status in ("failed", "interrupted")]
