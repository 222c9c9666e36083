"""A run's totals over every process that trained it, read back from its record.

A run that was killed and resumed is trained by several processes; what each counted in memory ends with
it. Its summary covers the whole run all the same, from what the run directory keeps (read through
:class:`~harnessrl.records.run_record.RunRecord`): failures (the ``failure`` events, each (step, task, kind,
criterion or feature) once: a step trained again after a resume detects its failures again), evolution points
in-process and external (``evolution_point`` events: an external evolver's hold is one, its seconds the time
training was held), trial seconds (``trial`` events), the wall time of the earlier processes (from each
``run_start`` to the last record before the next one) and their detector and memory seconds (their
``metrics.jsonl`` rows).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from harnessrl.records.event_payloads import EvolutionPointPayload, FailurePayload, TrialPayload
from harnessrl.records.events import Event
from harnessrl.records.run_record import RunRecord

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


def _failure_key(e: Event) -> tuple:
    """A detection, once however often it was written: its step, task, kind and subject (the criterion, feature
    or requirement its evidence names)."""
    failure = e.payload_as(FailurePayload)
    return e.step, failure.task_id, failure.failure, failure.typed_evidence.subject


def run_totals(record: RunRecord) -> RunTotals:
    """The totals of the run ``record`` reads, the process writing it now included."""
    totals = RunTotals()
    failures = {_failure_key(e): str(e.payload_as(FailurePayload).failure) for e in record.events_of("failure")}
    totals.failures = dict(Counter(failures.values()))
    for e in record.events_of("evolution_point"):
        point = e.payload_as(EvolutionPointPayload)
        totals.evolution_points += 1
        mode = point.mode or "in-process"
        totals.points_by_mode[mode] = totals.points_by_mode.get(mode, 0) + 1
        totals.evolver_seconds += _number(point.seconds)
    totals.trial_seconds = sum(_number(e.payload_as(TrialPayload).seconds) for e in record.events_of("trial"))

    starts = [e.time for e in record.events_of("run_start")]
    totals.processes = max(1, len(starts))
    if len(starts) < 2:
        return totals
    # the killed processes' last steps are in rolled_back/: their records count for the wall time too
    times = [e.time for e in record.events] + [_number(m.value("time")) for m in (*record.metrics, *record.rolled_back)]
    for begin, end in pairwise(starts):
        last = max((t for t in times if begin <= t < end), default=begin)
        totals.earlier_wall_seconds += last - begin
    # an earlier process's detector and memory time: its metrics rows, each the mean over the steps it logs
    previous = 0
    for row in sorted(record.metrics, key=lambda r: r.step):
        if "time/detectors" not in (row.model_extra or {}):
            continue
        steps, previous = row.step - previous, row.step
        if _number(row.value("time")) < starts[-1]:
            for name in ("detectors", "memory"):
                totals.earlier_monitor_seconds[name] += _number(row.value(f"time/{name}")) * max(1, steps)
    return totals
