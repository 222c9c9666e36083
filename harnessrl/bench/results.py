"""A bench's results, read back from its run directories: per-run figures, per-method aggregates, comparisons.

Everything is computed from the files a training run leaves (``config.yaml``, ``metrics.jsonl``,
``steps.jsonl``, ``eval.jsonl``, ``best.json``, ``summary.json``, ``events.jsonl``), so a report can be
made while a bench is still running, and for runs made by older versions. A figure a run does not
record is ``None`` (shown as n/a), never a guess and never an error.

Evaluation rows carry a ``split``: ``validation`` chooses the best checkpoint (and defines steps to
best), ``test`` is only reported. Runs from before the split existed have one held-out set that
does both; the results say so (it flatters every method alike).
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harnessrl.errors import HarnessRLError

__all__ = [
    "HARNESS_PREFIX",
    "RunData",
    "aggregate",
    "compare",
    "is_harness_arm",
    "load_runs",
    "run_figures",
    "stat",
]

logger = logging.getLogger(__name__)

HARNESS_PREFIX = "harnessrl"
"""For runs without a ``method`` setting: methods whose name starts with this are the harness's arms."""

TOTALS = {
    "rollouts_generated": "rollouts/generated",
    "rollouts_discarded": "rollouts/discarded",
    "rollouts_trial": "rollouts/trial",
    "judge_calls": "judge/calls_total",
}
"""Run totals: the summary's own figure (top level, else under ``accounting``), else the last logged
value of the cumulative metric named here (a run still going, or killed)."""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole JSON lines of a file (a torn last line of a live run is skipped silently)."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ValueError, OSError):
        logger.warning("%s is unreadable; ignored", path)
        return None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return None if math.isnan(v) or math.isinf(v) else float(v)


@dataclass
class RunData:
    """The files of one run, read once."""

    method: str
    seed: int
    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    best: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path, method: str, seed: int, manifest: dict[str, Any] | None = None) -> RunData:
        config: dict[str, Any] = {}
        if (path / "config.yaml").is_file():
            try:
                config = yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8")) or {}
            except yaml.YAMLError:
                logger.warning("%s/config.yaml is unreadable; ignored", path)
        best = _read_json(path / "best.json")
        summary = _read_json(path / "summary.json")
        return cls(
            method=method,
            seed=seed,
            path=path,
            config=config if isinstance(config, dict) else {},
            metrics=[m for m in _read_jsonl(path / "metrics.jsonl") if isinstance(m.get("step"), int)],
            groups=_read_jsonl(path / "steps.jsonl"),
            # rows written by `harnessrl eval` (they carry a "source") are not part of the training curve
            evals=[
                e for e in _read_jsonl(path / "eval.jsonl") if "source" not in e and _num(e.get("overall")) is not None
            ],
            events=_read_jsonl(path / "events.jsonl"),
            best=best if isinstance(best, dict) else None,
            summary=summary if isinstance(summary, dict) else None,
            manifest=manifest or {},
        )

    # ------------------------------------------------------------------------------- series
    def series(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of a logged metric, the last value of each step, in step order."""
        by_step: dict[int, float] = {}
        for m in self.metrics:
            v = _num(m.get(key))
            if v is not None:
                by_step[m["step"]] = v
        return sorted(by_step.items())

    @property
    def has_split(self) -> bool:
        """Whether the run evaluates a validation and a test split (newer runs) or one held-out set."""
        return any("split" in e for e in self.evals)

    def eval_rows(self, split: str) -> list[dict[str, Any]]:
        """Evaluation rows of ``validation`` or ``test``, one per step (the last), in step order; a run
        without splits answers its held-out rows for both."""
        rows = [e for e in self.evals if e.get("split") == split] if self.has_split else list(self.evals)
        by_step = {int(e.get("step", -1)): e for e in rows}
        return [by_step[s] for s in sorted(by_step)]

    def effective_group_ratio(self) -> list[tuple[int, float]]:
        """Share of groups with reward std above eps, per step: the trainer's metric, else 1 - flat share."""
        s = self.series("effective_group_ratio")
        if s:
            return s
        flat = self.series("frac_reward_zero_std/eps")
        if flat:
            return [(k, 1.0 - v) for k, v in flat]
        per_step: dict[int, list[bool]] = {}
        for g in self.groups:
            if isinstance(g.get("step"), int) and isinstance(g.get("flat"), bool):
                per_step.setdefault(g["step"], []).append(not g["flat"])
        return [(k, sum(v) / len(v)) for k, v in sorted(per_step.items()) if v]

    def rollouts_spent(self) -> tuple[list[tuple[int, float]], str]:
        """Cumulative rollouts spent by each step (generated incl. discarded, plus critic trials), and
        where the figure comes from."""
        generated = self.series("rollouts/generated")
        if generated:
            trial = dict(self.series("rollouts/trial"))
            out, last_trial = [], 0.0
            for step, g in generated:
                last_trial = trial.get(step, last_trial)
                out.append((step, g + last_trial))
            return out, "rollouts/generated + rollouts/trial"
        per_step: dict[int, int] = {}
        for g in self.groups:
            if isinstance(g.get("step"), int):
                per_step[g["step"]] = per_step.get(g["step"], 0) + len(g.get("rewards") or [])
        total, out = 0, []
        for step in sorted(per_step):
            total += per_step[step]
            out.append((step, float(total)))
        return out, "steps.jsonl (trained rollouts only: no discarded or trial rollouts recorded)"

    def decisions(self) -> list[dict[str, Any]]:
        """The harness's decisions: proposals, trial verdicts (accepted / rejected) and commits."""
        return [e for e in self.events if e.get("kind") in ("proposal", "verdict", "commit")]


def _find(data: Any, *paths: str) -> float | None:
    """The first number found at one of the dotted ``paths`` of a nested dict."""
    for p in paths:
        node = data
        for k in p.split("."):
            node = node.get(k) if isinstance(node, dict) else None
        if _num(node) is not None:
            return _num(node)
    return None


def _harness_overhead_seconds(run: RunData) -> float | None:
    """Seconds the harness took (detectors, memory, evolution points incl. trials): the summary's own
    figure when it has one, else its evolver and monitor seconds, else the ``time/evolver`` metric."""
    s = run.summary or {}
    direct = _find(s, "harness_overhead_seconds", "accounting.harness_overhead_seconds")
    if direct is not None:
        return direct
    extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
    parts = []
    evolver = _find(extra, "evolver.seconds")
    if evolver is not None:
        parts.append(evolver)
    monitor = extra.get("monitor_seconds")
    if isinstance(monitor, dict):
        parts += [v for v in map(_num, monitor.values()) if v is not None]
    if parts:
        return sum(parts)
    evo = run.series("time/evolver")
    return sum(v for _, v in evo) if evo else None


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None


def run_figures(run: RunData) -> dict[str, Any]:
    """One run's figures (``None`` where the run does not record one)."""
    validation, test = run.eval_rows("validation"), run.eval_rows("test")
    best_step = best_overall = None
    if (
        isinstance(run.best, dict)
        and isinstance(run.best.get("step"), int)
        and _num(run.best.get("overall")) is not None
    ):
        best_step, best_overall = run.best["step"], _num(run.best["overall"])
    elif validation:
        top = max(validation, key=lambda e: (e["overall"], -int(e.get("step", 0))))
        best_step, best_overall = int(top["step"]), float(top["overall"])
    test_at_best = next((e for e in test if e.get("step") == best_step), None) if best_step is not None else None
    if isinstance(run.best, dict) and isinstance(run.best.get("test"), dict) and run.has_split:
        test_at_best = run.best["test"]  # the trainer's own record: {overall, per_domain} at the best step
    test_end = test[-1] if test else None
    summary = run.summary or {}
    # wall time: what the bench measured over all of the run's attempts (a resumed run's summary only
    # counts its last process), else the run's own figure; the overhead share stays within one process
    trainer_wall = _find(summary, "wall_seconds")
    wall = _num(run.manifest.get("wall_seconds")) or trainer_wall
    overhead = _harness_overhead_seconds(run)
    rollouts, rollouts_source = run.rollouts_spent()
    effective = _find(summary, "accounting.effective_group_ratio")
    if effective is None:
        effective = _mean(v for _, v in run.effective_group_ratio())
    figures: dict[str, Any] = {
        "method": run.method,
        "seed": run.seed,
        "path": str(run.path),
        "complete": run.summary is not None,
        "status": run.manifest.get("status") or ("done" if run.summary is not None else "incomplete"),
        "trainer_method": run.config.get("method"),
        "steps": int(_find(summary, "steps") or (run.metrics[-1]["step"] if run.metrics else 0)),
        "max_steps": _find(run.config, "grpo.max_steps"),
        "split": "validation/test" if run.has_split else "held-out (one set both chooses and reports)",
        "validation_best": best_overall,
        "steps_to_best": best_step,
        "test_at_best": _num(test_at_best.get("overall")) if test_at_best else None,
        "test_at_best_per_domain": dict(test_at_best.get("per_domain") or {}) if test_at_best else {},
        "test_end": _num(test_end.get("overall")) if test_end else None,
        "test_end_step": test_end.get("step") if test_end else None,
        "test_end_per_domain": dict(test_end.get("per_domain") or {}) if test_end else {},
        "test_start": _num(test[0]["overall"]) if test and test[0].get("step") == 0 else None,
        "effective_group_ratio": effective,
        "zero_std_all_low": _mean(v for _, v in run.series("frac_reward_zero_std/all_low")),
        "zero_std_all_high": _mean(v for _, v in run.series("frac_reward_zero_std/all_high")),
        "rollouts_spent": rollouts[-1][1] if rollouts else None,
        "rollouts_spent_source": rollouts_source,
        "wall_seconds": wall,
        "harness_overhead_seconds": overhead,
        "harness_overhead_share": overhead / (trainer_wall or wall)
        if overhead is not None and (trainer_wall or wall)
        else None,
    }
    for name, key in TOTALS.items():
        total = _find(summary, name, f"accounting.{name}")
        if total is None:
            logged = run.series(key)
            total = logged[-1][1] if logged else None
        figures[name] = total
    if figures["rollouts_generated"] is not None:  # the run's own totals, when it has them
        figures["rollouts_spent"] = figures["rollouts_generated"] + (figures["rollouts_trial"] or 0.0)
        figures["rollouts_spent_source"] = "rollouts_generated + rollouts_trial"
    commits = [e for e in run.events if e.get("kind") == "commit"]
    verdicts = [e for e in run.events if e.get("kind") == "verdict"]
    figures["harness_commits"] = len(commits)
    figures["harness_rejections"] = sum(e.get("verdict") == "rejected" for e in verdicts)
    return figures


def stat(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean, sample std (n >= 2), min, max and n of the values that exist."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    return {
        "mean": statistics.fmean(vals),
        "std": statistics.stdev(vals) if len(vals) >= 2 else None,
        "min": min(vals),
        "max": max(vals),
        "n": len(vals),
    }


SCALARS = (
    "test_at_best",
    "test_end",
    "test_start",
    "validation_best",
    "steps_to_best",
    "effective_group_ratio",
    "zero_std_all_low",
    "zero_std_all_high",
    "rollouts_generated",
    "rollouts_discarded",
    "rollouts_trial",
    "rollouts_spent",
    "judge_calls",
    "wall_seconds",
    "harness_overhead_seconds",
    "harness_overhead_share",
    "harness_commits",
    "harness_rejections",
)
"""The per-run figures aggregated over seeds."""


def aggregate(runs_figures: Sequence[dict[str, Any]], methods: Sequence[str] | None = None) -> dict[str, Any]:
    """Per method: the seeds, each figure's mean/std/n over them, and per-domain test scores."""
    order = list(methods or [])
    for f in runs_figures:
        if f["method"] not in order:
            order.append(f["method"])
    out: dict[str, Any] = {}
    for method in order:
        rows = sorted((f for f in runs_figures if f["method"] == method), key=lambda f: f["seed"])
        trainer_methods = {f.get("trainer_method") for f in rows} - {None}
        agg: dict[str, Any] = {
            "trainer_method": trainer_methods.pop() if len(trainer_methods) == 1 else None,
            "seeds": [f["seed"] for f in rows],
            "complete_seeds": [f["seed"] for f in rows if f["complete"]],
            "per_seed": {str(f["seed"]): {k: f.get(k) for k in SCALARS} for f in rows},
        }
        for k in SCALARS:
            agg[k] = stat([f.get(k) for f in rows])
        for where in ("test_at_best_per_domain", "test_end_per_domain"):
            domains = sorted({d for f in rows for d in f[where]})
            agg[where] = {d: stat([_num(f[where].get(d)) for f in rows]) for d in domains}
        out[method] = agg
    return out


def _paired(a: dict[str, Any], b: dict[str, Any], key: str) -> dict[str, Any]:
    """Per-seed differences a - b of a figure over the seeds both have."""
    seeds = sorted(set(a["per_seed"]) & set(b["per_seed"]), key=int)
    diffs = {
        s: a["per_seed"][s][key] - b["per_seed"][s][key]
        for s in seeds
        if a["per_seed"][s].get(key) is not None and b["per_seed"][s].get(key) is not None
    }
    st = stat(list(diffs.values()))
    st["per_seed"] = diffs
    st["higher"] = sum(d > 0 for d in diffs.values())
    st["lower"] = sum(d < 0 for d in diffs.values())
    return st


def _verdict(d: dict[str, Any], *, higher_is_better: bool, good: str, bad: str) -> str:
    """Plain words for a paired difference: no claim from fewer than 3 seeds or from mixed signs."""
    n = d["n"]
    if n == 0:
        return "no seed has both figures"
    wins, losses = (d["higher"], d["lower"]) if higher_is_better else (d["lower"], d["higher"])
    counts = f"{good} on {wins} of {n} seed(s), {bad} on {losses}"
    if n < 3:
        return f"{counts}; fewer than 3 seeds: no conclusion"
    for side, k in ((good, wins), (bad, losses)):
        if k == n:
            if abs(d["mean"]) > (d["std"] or 0.0):
                return f"{side} on every seed ({n})"
            return f"{side} on every seed ({n}), but by amounts that vary more than their mean"
    return f"{counts}; the sign changes between seeds: no consistent difference"


def is_harness_arm(method: str, agg: dict[str, Any]) -> bool:
    """A method that runs the evolving harness: its runs' ``method`` setting says so (older runs, which
    have none, go by the name: ``harnessrl...``)."""
    trainer_method = agg.get(method, {}).get("trainer_method")
    return trainer_method == "harnessrl" if trainer_method else method.startswith(HARNESS_PREFIX)


def compare(agg: dict[str, Any]) -> list[dict[str, Any]]:
    """Each harness arm against each baseline: paired per-seed differences (harness minus baseline)
    of test score at the best-validation checkpoint, test score at the end, and steps to best."""
    arms = [m for m in agg if is_harness_arm(m, agg)]
    baselines = [m for m in agg if not is_harness_arm(m, agg)]
    out = []
    for arm in arms:
        for base in baselines:
            row: dict[str, Any] = {"harness": arm, "baseline": base}
            for key in ("test_at_best", "test_end"):
                d = _paired(agg[arm], agg[base], key)
                d["verdict"] = _verdict(d, higher_is_better=True, good="higher", bad="lower")
                row[key] = d
            d = _paired(agg[arm], agg[base], "steps_to_best")
            d["verdict"] = _verdict(d, higher_is_better=False, good="fewer steps", bad="more steps")
            ma, mb = agg[arm]["steps_to_best"]["mean"], agg[base]["steps_to_best"]["mean"]
            d["ratio_of_means"] = ma / mb if ma is not None and mb else None
            row["steps_to_best"] = d
            out.append(row)
    return out


def load_runs(bench_dir: str | Path) -> tuple[list[RunData], dict[str, Any]]:
    """Every run under a bench folder (``<dir>/<method>/seed<k>``) and the bench manifest (or ``{}``).

    Runs listed in ``bench.json`` come in its order; any other ``seed<k>`` folder with a config.yaml is
    read too."""
    root = Path(bench_dir)
    if not root.is_dir():
        raise HarnessRLError(f"{root}: no such bench folder (make one with `harnessrl bench run`)")
    manifest = _read_json(root / "bench.json") or {}
    runs: list[RunData] = []
    seen: set[Path] = set()
    for row in (manifest.get("runs") or {}).values():
        path = Path(row.get("run_dir") or "")
        if not path.is_dir():
            alt = root / str(row.get("method")) / f"seed{row.get('seed')}"  # the folder was moved
            path = alt if alt.is_dir() else path
        if path.is_dir() and (path / "config.yaml").is_file():
            runs.append(RunData.read(path, str(row["method"]), int(row["seed"]), row))
            seen.add(path.resolve())
    for cfg in sorted(root.glob("*/seed*/config.yaml")):
        path = cfg.parent
        if path.resolve() in seen:
            continue
        try:
            seed = int(path.name.removeprefix("seed"))
        except ValueError:
            continue
        runs.append(RunData.read(path, path.parent.name, seed))
    if not runs:
        raise HarnessRLError(
            f"{root}: no runs found (expected <method>/seed<k>/config.yaml folders made by `harnessrl bench run`)"
        )
    return runs, manifest
