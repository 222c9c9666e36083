"""Resuming a run that was killed: what a resumed run restores, and the run directory made to agree with the
checkpoint it goes on from.

This module is the one home of resume: the run (:mod:`harnessrl.trainer.run_stages`) asks it at each stage, and
it asks each part for its own saved state. The run's records (metrics, events, totals) are read through
:mod:`harnessrl.records.run_record`, as the report and the bench's analysis read them. What a resumed run
restores, and from where:

============================ ========================================== ======================================
what                         from                                       here
============================ ========================================== ======================================
the policy, optimizer, step  the last complete ``checkpoint-<step>``    :mod:`~harnessrl.records.checkpoints`
the harness                  ``harness.json`` (every committed update)  :func:`restore_harness`
the step records             ``steps.jsonl``, ``rollouts/`` (after      :func:`restore_records`
                             rolling back the steps after the
                             checkpoint; missing commit events written)
the trainer's counters       the last ``metrics.jsonl`` row             :func:`restore_accounting`
the detectors' windows, the  the kept step records and rollouts          :func:`restore_listeners`
critic's step records
handled failures, the        ``events.jsonl`` (``failure_handled``,     :func:`restore_listeners`
evolver's counts             the evolver's decisions)
hints on probation           ``events.jsonl`` (``commit`` on            ``Probation.from_events`` (asked
                             probation, ``probation``, ``revert``)      by :func:`restore_listeners`)
the critic's pending tests   ``pending_tests.json`` (each pending       :func:`restore_listeners`
                             repair's pooled rollouts and looks, those
                             after the checkpoint left out)
the run's totals             the records of every earlier process       :func:`restored_totals`
the training memory          its own store in the run directory, kept    (nothing to do)
                             as it is (it keeps the re-run steps' rows
                             beside the first ones)
============================ ========================================== ======================================

Every run file is read through :mod:`harnessrl.records` (the checkpoints' names and completeness, the rows' steps
for the roll-back, the step records); this module decides what to do with them.

What a kill (SIGKILL, power loss) can leave, and what ``--resume`` does with it:

- **Steps after the last checkpoint** were trained, recorded, and are now trained again (the policy goes
  back to the checkpoint). Their rows leave ``steps.jsonl``, ``metrics.jsonl``, ``eval.jsonl`` and
  ``discarded_groups.jsonl`` (and their kept rollouts) for ``rolled_back/`` before training goes on, so
  each step is recorded once: :func:`roll_back`. So do their events (failures, evaluations, evolution points,
  holds, attributions, trials, outcomes...: the re-run detects and decides again, and a reader of
  ``events.jsonl`` counts each once), but for what still stands: the ``commit`` of an update the harness kept
  and the proposal, trial and verdict of that candidate (its evidence). The ``run_end`` of a process that
  stopped on a full disk goes too, whatever its step: the run did not end there. Nothing is deleted; a torn
  last line goes to ``rolled_back/`` too.
- **Committed harness updates are never lost.** ``harness.json`` is rewritten atomically at every
  commit, so the harness resumes with every update committed before the kill, including updates
  committed after the checkpoint: those apply to the re-run steps as well (the harness is not versioned
  per step; the ``run_start`` event of the resumed run names the rolled-back steps and the harness
  versions it resumes with). A commit whose event the kill cut off is written at resume, marked
  ``recovered_at_resume`` (:func:`reconcile_commits`).
- **The detectors' windows and the critic's step records** are rebuilt from the kept step records and
  rollouts (:func:`replay`), so failure detection and sampling trials go on where they were instead of
  starting empty. Failures detected at or before the checkpoint stay in ``events.jsonl`` and the memory, and
  those an evolution point handled are not offered to the evolver again; those of the re-run steps are
  detected again (their first events are in ``rolled_back/events.jsonl``; the memory keeps both).
- **Candidates measured but not committed** are dropped: their trial measured a policy that no longer
  exists. The memory and the events keep them (proposal, trial, verdict); the evolver proposes again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.evolution.probation import REVERT_SUFFIX
from harnessrl.interfaces.harness import Harness
from harnessrl.records.checkpoints import checkpoint_step, last_checkpoint
from harnessrl.records.run_dir import JsonlLine, RunDir, read_jsonl_lines
from harnessrl.records.run_record import RunRecord, read_events, read_metrics
from harnessrl.records.steps import Recorder, StepRecord, read_group_records, rollout_files
from harnessrl.trainer.totals import RunTotals, run_totals

if TYPE_CHECKING:
    from harnessrl.data.schema import Task
    from harnessrl.evolution.service import EvolutionService

__all__ = [
    "ROLLED_BACK",
    "Resumed",
    "reconcile_commits",
    "replay",
    "restore_accounting",
    "restore_harness",
    "restore_listeners",
    "restore_records",
    "restored_totals",
    "roll_back",
]

logger = logging.getLogger(__name__)

ROLLED_BACK = "rolled_back"
_STEP_FILES = ("steps.jsonl", "metrics.jsonl", "eval.jsonl", "discarded_groups.jsonl")


@dataclass
class Resumed:
    """Where a run goes on from: the checkpoint (None: a fresh run, or no complete checkpoint yet, training starts
    over) and the steps after it whose records were rolled back."""

    checkpoint: str | None = None
    rolled_back: list[int] = field(default_factory=list)

    @property
    def step(self) -> int:
        """The checkpoint's step (0: none)."""
        return checkpoint_step(self.checkpoint)


def restore_harness(run: RunDir, tasks: Sequence[Task], **settings: Any) -> Harness | None:
    """The harness as last saved (``harness.json``: every update committed before the kill, those after the
    checkpoint included), with the run's ``settings``; None when the run saved none yet."""
    if not run.harness.exists():
        return None
    return Harness.load(run.harness, tasks, **settings)


def restore_records(run: RunDir, harness: Harness, recorder: Recorder, main: bool = True) -> Resumed:
    """The run directory made to agree with its last complete checkpoint (on the main process: the records of the
    steps after it rolled back, a commit whose event a kill cut off written), and the kept rollouts loaded into
    ``recorder``."""
    resumed = Resumed(checkpoint=last_checkpoint(run))
    if main:
        resumed.rolled_back = roll_back(run, resumed.step)
        reconcile_commits(run, harness)
    recorder.load_rollouts()
    return resumed


def restore_accounting(run: RunDir, accounting: dict[str, float]) -> None:
    """The trainer's cumulative counters (rollouts, judge calls, ...) go on from the last ``metrics.jsonl`` row
    that has them."""
    metrics = read_metrics(run.path)
    last = next((m for m in reversed(metrics) if m.value("rollouts/generated") is not None), None)
    for k in accounting:
        accounting[k] = (last.value(k) if last is not None else None) or 0


def restore_listeners(
    run: RunDir,
    resumed: Resumed,
    recorder: Recorder,
    observe: Callable[..., Any] | None,
    service: EvolutionService | None,
    window: int,
) -> None:
    """What listens to the steps goes on where it was: the detectors' windows and the critic's step records from
    the last ``window`` steps' records (:func:`replay`, ``observe`` the failure detector's, None off the main
    process), and what earlier processes' evolution points decided (handled failures, the evolver's counts) from
    ``events.jsonl`` up to the checkpoint (``service``: None when the run has no evolver)."""
    replay(run, recorder, observe, window=window)
    if service is not None:
        events = read_events(run.path)
        service.replay_events(events, through_step=resumed.step)
        looks = service.restore_pending(through_step=resumed.step)
        if looks:
            logger.info("pending tests go on from their looks at step %d: %s", resumed.step, looks)


def restored_totals(record: RunRecord) -> RunTotals:
    """The whole run's totals, every earlier process of a resumed run included (:mod:`harnessrl.trainer.totals`
    reads them back from the run's record)."""
    return run_totals(record)


def _rewrite(path: Path, lines: list[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_STANDS = frozenset({"commit", "proposal", "trial", "verdict", "revert"})
"""Event kinds of a committed candidate that stay after a roll-back: the update stays in the harness (and so does a
hint's revert at the end of its probation: ``harness.json`` holds it)."""


def _committed(lines: list[JsonlLine]) -> set[str]:
    """The candidate ids of the ``commit`` events among ``lines``."""
    return {line.candidate_id for line in lines if line.kind == "commit" and line.candidate_id}


def roll_back(run: RunDir, step: int) -> list[int]:
    """Move every record of a step after ``step`` (the checkpoint resumed from) to ``rolled_back/``, events
    included but for a committed update's (see the module docstring); returns the steps moved. A line that
    does not parse (torn by the kill) is moved too."""
    rolled: set[int] = set()
    out = run.path / ROLLED_BACK
    for name in (*_STEP_FILES, "events.jsonl"):
        path = run.path / name
        lines = read_jsonl_lines(path)
        committed = _committed(lines) if name == "events.jsonl" else set()
        keep, drop = [], []
        for line in lines:
            if line.step is None:  # torn by the kill
                drop.append(line.text)
                continue
            stands = line.kind in _STANDS and line.candidate_id in committed
            if line.step > step and not stands:
                drop.append(line.text)
                rolled.add(line.step)
            elif line.kind == "run_end":  # an earlier process's end (a full disk): the run goes on
                drop.append(line.text)
            else:
                keep.append(line.text)
        if drop:
            out.mkdir(exist_ok=True)
            with open(out / name, "a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in drop))
            _rewrite(path, keep)
    for n, path in rollout_files(run.path):
        if n > step:
            (out / "rollouts").mkdir(parents=True, exist_ok=True)
            os.replace(path, out / "rollouts" / path.name)
            rolled.add(n)
    if rolled:
        logger.info("resuming from step %d: the records of steps %s moved to %s/", step, sorted(rolled), out)
    return sorted(rolled)


def replay(run: RunDir, recorder: Recorder, observe: Any = None, window: int = 16) -> int:
    """Rebuild the last ``window`` steps' records from ``steps.jsonl`` (and DAPO's dropped groups from
    ``discarded_groups.jsonl``) into ``recorder.steps`` (nothing is written) and pass each, with its kept rollouts,
    to ``observe(record, rollouts, regrade=False)`` (the failure detector's ``observe``: its windows refill without
    asking the judge again; the failures it returns were recorded before the kill). The rubric audit's probes, step
    0's groups (``evolver.audit_probe_tasks``), come back into ``recorder`` only. Returns the number of steps
    replayed."""
    path = run.path / "steps.jsonl"
    if not path.exists():
        return 0
    by_step, dropped = read_group_records(path), read_group_records(run.path / "discarded_groups.jsonl")
    if 0 in dropped:  # the rubric audit's probes (no step of training): the audit's counts, never the detectors'
        recorder.restore(StepRecord(step=0, groups=[], discarded=dropped[0]))
    steps = sorted(by_step)[-window:]
    for step in steps:
        record = StepRecord(step=step, groups=by_step[step], discarded=dropped.get(step, []))
        recorder.restore(record)
        if observe is not None:
            observe(record, recorder.rollouts.get(step), regrade=False)
    return len(steps)


def reconcile_commits(run: RunDir, harness: Harness) -> list[str]:
    """Write a ``commit`` event for every update in the harness whose commit event is missing (the kill
    came between saving ``harness.json`` and writing the event); returns their candidate ids. A probation's
    revert is in the harness as ``<candidate>-revert`` and in the events as a ``revert`` event of the candidate:
    it is no commit (one missing is written as a ``revert`` event), and one event stands for every version a
    commit or a revert applied."""
    logged = set()
    for e in read_events(run.path):
        if e.kind == "commit":
            logged.add(getattr(e, "candidate_id", None))
        elif e.kind == "revert":
            logged.add(f"{getattr(e, 'candidate_id', None)}{REVERT_SUFFIX}")
    missing: list[str] = []
    for name, interface in harness.interfaces.items():
        for applied in interface.history:
            if applied.candidate_id and applied.candidate_id not in logged and applied.candidate_id not in missing:
                reverted = applied.candidate_id.removesuffix(REVERT_SUFFIX)
                run.event(
                    "revert" if reverted != applied.candidate_id else "commit",
                    step=max(0, applied.step - 1),
                    candidate_id=reverted,
                    interface=name,
                    version=applied.version,
                    applies_from_step=applied.step,
                    update=applied.update,
                    recovered_at_resume=True,
                )
                missing.append(applied.candidate_id)
    return missing
