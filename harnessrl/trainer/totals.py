"""A run's totals over every process that trained it, read back from its records.

A run that was killed and resumed is trained by several processes; what each counted in memory ends with
it. Its summary covers the whole run all the same, from what the run directory keeps: failures (the
``failure`` events, each (step, task, kind, criterion or feature) once: a step trained again after a resume
detects its failures again), evolution points in-process and external (``evolution_point`` events: an
external evolver's hold is one, its seconds the time training was held), trial seconds (``trial`` events),
the wall time of the earlier processes (from each ``run_start`` to the last record before the next one) and
their detector and memory seconds (their ``metrics.jsonl`` rows).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from harnessrl.records.run_dir import RunDir, read_jsonl

__all__ = ["RunTotals", "run_totals"]


@dataclass
class RunTotals:
    """What every process of a run did, together (see the module docstring for where each comes from)."""

    failures: dict[str, int] = field(default_factory=dict)
    evolution_points: int = 0
    points_by_mode: dict[str, int] = field(default_factory=dict)
    evolver_seconds: float = 0.0
    trial_seconds: float = 0.0
    processes: int = 1
    earlier_wall_seconds: float = 0.0
    earlier_monitor_seconds: dict[str, float] = field(default_factory=lambda: {"detectors": 0.0, "memory": 0.0})


def _number(v: Any) -> float:
    return float(v) if isinstance(v, int | float) else 0.0


def run_totals(run: RunDir) -> RunTotals:
    """The totals of ``run`` from its events and metrics, the process writing them now included."""
    events = run.read("events.jsonl")
    totals = RunTotals()
    failures: dict[tuple, str] = {}
    for e in events:
        kind = e.get("kind")
        if kind == "failure":
            ev = e.get("evidence") or {}
            key = (e.get("step"), e.get("task_id"), e.get("failure"), ev.get("criterion_id") or ev.get("feature"))
            failures[key] = str(e.get("failure"))
        elif kind == "evolution_point":
            totals.evolution_points += 1
            mode = str(e.get("mode") or "in-process")
            totals.points_by_mode[mode] = totals.points_by_mode.get(mode, 0) + 1
            totals.evolver_seconds += _number(e.get("seconds"))
        elif kind == "trial":
            totals.trial_seconds += _number(e.get("seconds"))
    totals.failures = dict(Counter(failures.values()))

    starts = [_number(e.get("time")) for e in events if e.get("kind") == "run_start"]
    totals.processes = max(1, len(starts))
    if len(starts) < 2:
        return totals
    metrics = run.read("metrics.jsonl")
    rolled_back = read_jsonl(run.path / "rolled_back" / "metrics.jsonl")  # the killed processes' last steps
    times = [_number(r.get("time")) for r in (*events, *metrics, *rolled_back)]
    for begin, end in pairwise(starts):
        last = max((t for t in times if begin <= t < end), default=begin)
        totals.earlier_wall_seconds += last - begin
    # an earlier process's detector and memory time: its metrics rows, each the mean over the steps it logs
    previous = 0
    for row in sorted(metrics, key=lambda r: _number(r.get("step"))):
        if "time/detectors" not in row or not isinstance(row.get("step"), int):
            continue
        steps, previous = row["step"] - previous, row["step"]
        if _number(row.get("time")) < starts[-1]:
            for name in ("detectors", "memory"):
                totals.earlier_monitor_seconds[name] += _number(row.get(f"time/{name}")) * max(1, steps)
    return totals
