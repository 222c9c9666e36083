"""The run record: one typed reader of everything a run directory holds, for every part that reads a run back.

A run directory is written by one part (the trainer) and read by many: the bench's analysis, the run's own
report, its totals over every process, resume. Each reads it here, through :meth:`RunRecord.load`, never with a
``json.loads`` of its own, so each figure is parsed in one place and has one source (docs/design.md §2):

- ``config.yaml``: :class:`RunConfigView`, the settings a reader decides on (the method, the training data, the
  detectors' bounds, the step and completion budgets);
- ``metrics.jsonl``: :class:`MetricRow` per logged step (:meth:`RunRecord.series` reads one metric), and
  ``rolled_back/metrics.jsonl``: the rows of steps a killed process logged past its last checkpoint;
- ``steps.jsonl``: :class:`~harnessrl.records.steps.GroupRecord` per trained task group;
- ``eval.jsonl``: :class:`~harnessrl.records.evaluations.EvalResult` per evaluation (``evaluations``: the
  training's own, not ``harnessrl eval``'s; :func:`read_evaluations`);
- ``best.json``: :class:`BestCheckpoint`;
- ``events.jsonl``: :class:`~harnessrl.records.events.Event` per line;
- ``harness.json``: the interfaces' state and history, as written (:func:`read_harness_file`; typed by
  :meth:`~harnessrl.interfaces.harness.Harness.load`, a layer above, which reads it there too);
- ``summary.json``: :class:`RunSummaryRecord`, with the run's totals in its ``accounting``.

Where a run directory lacks a file, the field is :class:`Missing` with the reason (a run still going has no
summary; a run without a validation split no best checkpoint), and no reader falls back to another source. A
torn or malformed line is skipped with a warning (a killed process loses at most the line in flight).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.as_written import AsWritten, Number
from harnessrl.records.evaluations import EvalResult
from harnessrl.records.events import Event
from harnessrl.records.run_dir import read_json_file, read_jsonl_models, read_tail
from harnessrl.records.steps import GroupRecord

__all__ = [
    "Accounting",
    "BestCheckpoint",
    "EvolverSummary",
    "MetricRow",
    "Missing",
    "RunConfigView",
    "RunRecord",
    "RunSummaryRecord",
    "ScoresAtBest",
    "SplitSummary",
    "SummaryExtra",
    "finite_number",
    "last_logged_step",
    "read_best",
    "read_evaluations",
    "read_events",
    "read_harness_file",
    "read_metrics",
    "read_summary",
]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)


def finite_number(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (not a bool), else None: how every reader of a run takes a
    figure written as JSON."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


@dataclass(frozen=True)
class Missing:
    """A part of the run directory that is not there, and why."""

    reason: str


class _View(BaseModel):
    """A reader's view of a file: the fields it decides on, anything else ignored."""

    model_config = ConfigDict(extra="ignore")


# ------------------------------------------------------------------------------------------- config.yaml
class DataView(_View):
    train: str | None = Field(None, description="The training tasks' file (data.train).")
    format: str = Field("auto", description="Its format.")
    domain: str | None = Field(None, description="The domain of tasks that name none.")
    train_rubric: str | None = Field(None, description="What training grades with: rubric, or gold (clean).")


class GrpoView(_View):
    max_steps: int | None = Field(None, description="The steps the run is set to train.")
    max_completion_length: int | None = Field(None, description="The completion budget in tokens.")


class DetectorsView(_View):
    low: float | None = Field(None, description="A flat group's mean below this is uniformly low (None: default).")
    high: float | None = Field(None, description="A flat group's mean above this is uniformly high (None: default).")


class HarnessView(_View):
    detectors: DetectorsView = Field(default_factory=DetectorsView)


class RunConfigView(_View):
    """What readers take from ``config.yaml`` (the resolved configuration the trainer wrote)."""

    method: str | None = Field(None, description="The trainer method (None: a run from before the setting).")
    run_dir: str | None = None
    data: DataView = Field(default_factory=DataView)
    grpo: GrpoView = Field(default_factory=GrpoView)
    harness: HarnessView = Field(default_factory=HarnessView)


# ------------------------------------------------------------------------------------------- rows
class MetricRow(BaseModel):
    """One line of ``metrics.jsonl``: the step and its logged values (TRL's and HarnessRL's, by name)."""

    model_config = ConfigDict(extra="allow")

    step: int

    def value(self, key: str) -> float | None:
        """A logged number (None: not logged in this row, or not a finite number)."""
        return finite_number((self.model_extra or {}).get(key))


class ScoresAtBest(AsWritten):
    """``best.json``'s ``test``: the test split's scores at the best step (reported, never used to choose), and its
    ``proxy`` (the same completions graded with rubric version 0) as the same kind of record, without per-task
    scores."""

    overall: float | None = None
    per_domain: dict[str, float | None] = Field(default_factory=dict)
    per_family: dict[str, float | None] = Field(default_factory=dict)
    no_score_reason: str | None = None
    sampling_se: float | None = None
    proxy: ScoresAtBest | None = None


class BestCheckpoint(AsWritten):
    """``best.json``: the step with the best validation score, that score, and the checkpoint saved there. The
    evaluation callback (:class:`~harnessrl.trainer.callbacks.EvalCallback`) builds it and writes it as it was set;
    every reader reads it back here (``summary.json``'s ``best`` is the same record)."""

    step: int
    overall: float
    split: str = Field("held-out", description="The split that chose it (validation; held-out: one set).")
    graded_with: str = "rubric"
    per_domain: dict[str, float | None] = Field(default_factory=dict)
    per_family: dict[str, float | None] = Field(default_factory=dict)
    proxy: float | None = Field(None, description="The validation score graded with rubric version 0 (gold runs).")
    test: ScoresAtBest | None = Field(None, description="The test scores at that step (also in eval.jsonl).")
    checkpoint: str | None = None


class Accounting(AsWritten):
    """The run's totals over every process that trained it (``summary.json``'s ``accounting``; the trainer's other
    counters, e.g. ``judge_calls_total``, kept as written)."""

    rollouts_generated: float | None = None
    rollouts_discarded: float | None = None
    rollouts_trial: float | None = None
    judge_calls: float | None = None
    effective_group_ratio: float | None = None
    wall_seconds: float | None = None
    harness_overhead_seconds: float | None = None
    harness_overhead_share: float | None = None
    evolver_seconds: Number | None = None
    trial_seconds: Number | None = None
    detector_seconds: Number | None = None
    memory_seconds: Number | None = None
    processes: int | None = Field(None, description="How many processes trained the run (a resume adds one).")


class SplitSummary(AsWritten):
    """One evaluation split in ``summary.json``'s ``eval``: its score before training, at the end and (validation)
    the best one, or (test) the one at the best-validation step. A key the run had no figure for is absent."""

    graded_with: str | None = Field(None, description="gold or rubric.")
    before: float | None = Field(None, description="The score at step 0 (None: no evaluation before training).")
    final: float | None = Field(None, description="The last evaluation's score (None: it scored no task).")
    final_step: int | None = None
    final_per_domain: dict[str, float | None] | None = None
    final_per_family: dict[str, float | None] | None = None
    final_proxy: float | None = Field(None, description="The last evaluation graded with rubric version 0 (gold).")
    final_no_score_reason: str | None = Field(None, description="Why the last evaluation has no score.")
    best: float | None = Field(None, description="Validation: the best score.")
    best_step: int | None = Field(None, description="Validation: the step of the best score.")
    at_best: float | None = Field(None, description="Test: the score at the best-validation step.")
    at_best_per_domain: dict[str, float | None] | None = None
    at_best_per_family: dict[str, float | None] | None = None
    at_best_proxy: float | None = None


class EvolverSummary(AsWritten):
    """``summary.json``'s ``extra.evolver``: the evolution points over the whole run, and the evolver's counts
    (``evolver/<what>/<kind>`` keys, kept as written)."""

    points: int = 0
    points_by_mode: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0

    def counts(self) -> dict[str, float]:
        """The evolver's counts by name (``evolver/proposed/rubric_criteria``, ...)."""
        return {k: v for k, v in (self.model_extra or {}).items() if isinstance(v, int | float)}


class SummaryExtra(AsWritten):
    """``summary.json``'s ``extra``: where each part ran, the failures detected, the monitor's seconds, the
    memory's record counts and the evolver's figures."""

    devices: dict[str, str | None] = Field(default_factory=dict, description="Where each part ran (run_start's).")
    failures: dict[str, int] = Field(default_factory=dict, description="Failures detected, by kind, each once.")
    monitor_seconds: dict[str, float] = Field(default_factory=dict, description="detectors and memory.")
    memory_records: dict[str, int] = Field(default_factory=dict, description="The memory's records, by collection.")
    evolver: EvolverSummary = Field(default_factory=EvolverSummary)


class RunSummaryRecord(_View):
    """``summary.json``: written once, when the run ends (:func:`~harnessrl.trainer.run_summary.finish_run` builds
    it), and read back by every reader of the run. Its fields are in the order the file holds them."""

    run_dir: Path | None = Field(None, description="The run directory (where it was when the run ended).")
    steps: int
    wall_seconds: float
    timings: dict[str, float] = Field(default_factory=dict)
    eval_before: float | None = None
    eval_after: float | None = None
    best: BestCheckpoint | None = Field(None, description="best.json as it was at the end (None: none).")
    reward_first: float | None = None
    reward_last: float | None = None
    extra: SummaryExtra = Field(default_factory=SummaryExtra)
    method: str | None = None
    evolver_enabled: bool = True
    steps_to_best: int | None = None
    eval: dict[str, SplitSummary] = Field(default_factory=dict)
    accounting: Accounting = Field(default_factory=Accounting)


def _file(path: Path, model: type[_M], why: str) -> _M | Missing:
    data = read_json_file(path)
    if data is None:
        return Missing(why)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        why = f"{path.name} is not a {model.__name__}: {e.errors()[0]['msg']}"
        logger.warning("%s: %s; read as missing", path, why)
        return Missing(why)


def read_summary(run_dir: str | Path) -> RunSummaryRecord | Missing:
    """A run's ``summary.json`` alone (whether it ended, and its totals), or why there is none."""
    return _file(Path(run_dir) / "summary.json", RunSummaryRecord, "no summary.json: the run has not ended")


def read_events(run_dir: str | Path) -> tuple[Event, ...]:
    """A run's ``events.jsonl`` alone, typed (what a resumed run replays while its process is still starting)."""
    return tuple(read_jsonl_models(Path(run_dir) / "events.jsonl", Event))


def read_evaluations(run_dir: str | Path) -> tuple[EvalResult, ...]:
    """A run's ``eval.jsonl``: the training's own evaluations, in the order written (the rows ``harnessrl eval``
    appended, which carry a ``source``, are not part of the training's curve)."""
    path = Path(run_dir) / "eval.jsonl"
    return tuple(read_jsonl_models(path, EvalResult, keep=lambda row: row.get("source") is None))


def read_metrics(run_dir: str | Path) -> tuple[MetricRow, ...]:
    """A run's ``metrics.jsonl`` alone, typed (where a resumed trainer's counters go on from)."""
    return tuple(read_jsonl_models(Path(run_dir) / "metrics.jsonl", MetricRow))


def read_harness_file(path: str | Path) -> dict[str, JsonValue] | Missing:
    """A saved harness (a run's ``harness.json``): the interfaces' state by name, beside ``versions`` and
    ``summary``, as written; or why there is none (no such file, or not a JSON object). Raises
    :class:`~harnessrl.errors.HarnessRLError` naming the file when it is not JSON at all (damaged)."""
    path = Path(path)
    if not path.exists():
        return Missing(f"no {path.name}: no harness state saved")
    data = read_json_file(path)
    return data if isinstance(data, dict) else Missing(f"{path.name} is not a JSON object")


def last_logged_step(run_dir: str | Path) -> int | None:
    """The step of the last whole row of a run's ``metrics.jsonl``, read from its end while the run may still be
    writing it (a line being written is passed over); None when there is none yet."""
    for line in reversed(read_tail(Path(run_dir) / "metrics.jsonl", 5).splitlines()):
        try:
            return MetricRow.model_validate_json(line).step
        except ValueError:
            continue
    return None


def read_best(run_dir: str | Path) -> BestCheckpoint | Missing:
    """A run's ``best.json``, or why there is none."""
    return _file(Path(run_dir) / "best.json", BestCheckpoint, "no best.json: the run has no validation score yet")


@dataclass(frozen=True)
class RunRecord:
    """A run directory, read once and typed (see the module docstring for each field's file)."""

    path: Path
    config: RunConfigView
    metrics: tuple[MetricRow, ...]
    groups: tuple[GroupRecord, ...]
    evaluations: tuple[EvalResult, ...]
    """The training's own evaluations (rows of ``harnessrl eval`` are not part of the curve; a row whose grading
    failed has no ``overall``)."""
    events: tuple[Event, ...]
    best: BestCheckpoint | Missing
    summary: RunSummaryRecord | Missing
    harness: dict[str, JsonValue] | Missing
    rolled_back: tuple[MetricRow, ...] = ()
    """The metrics rows a killed process logged after its last checkpoint (moved aside by the resume)."""

    @classmethod
    def load(cls, run_dir: str | Path) -> RunRecord:
        """Read the run directory ``run_dir``; raises :class:`~harnessrl.errors.HarnessRLError` when its
        ``config.yaml`` is missing or does not parse (not a run directory), or a whole JSON file is damaged."""
        path = Path(run_dir)
        # the whole JSON files first: a damaged one is named whatever else the directory lacks
        harness, best, summary = read_harness_file(path / "harness.json"), read_best(path), read_summary(path)
        try:
            config = RunConfigView.model_validate(yaml.safe_load((path / "config.yaml").read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError, ValidationError) as e:
            raise HarnessRLError(f"{path}/config.yaml cannot be read ({e}): is {path} a run directory?") from None
        return cls(
            path=path,
            config=config,
            metrics=read_metrics(path),
            groups=tuple(read_jsonl_models(path / "steps.jsonl", GroupRecord)),
            evaluations=read_evaluations(path),
            events=read_events(path),
            best=best,
            summary=summary,
            harness=harness,
            rolled_back=tuple(read_jsonl_models(path / "rolled_back" / "metrics.jsonl", MetricRow)),
        )

    @property
    def ended(self) -> bool:
        """Whether the run ended (its summary is written)."""
        return not isinstance(self.summary, Missing)

    @property
    def accounting(self) -> Accounting | Missing:
        """The run's totals, or why there are none (the summary, written at the run's end, holds them)."""
        return self.summary if isinstance(self.summary, Missing) else self.summary.accounting

    @property
    def last_step(self) -> int:
        """The last step the run logged (0: none yet)."""
        return max((m.step for m in self.metrics), default=0)

    def series(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of a logged metric, the last value of each step, in step order."""
        by_step = {m.step: v for m in self.metrics if (v := m.value(key)) is not None}
        return sorted(by_step.items())

    def events_of(self, *kinds: str) -> list[Event]:
        """The events of these kinds, in the order they were written."""
        return [e for e in self.events if e.kind in kinds]
