"""A run's summary: :class:`RunSummary`, written once at the end (``summary.json`` and ``run_end``) and read back by
a resumed run that finds its run finished.

:func:`finish_run` closes the memory, saves the harness and writes the summary; the figures cover the whole run,
every earlier process of a resumed run included (read back from its records, :func:`restored_totals
<harnessrl.trainer.resume.restored_totals>`), and each evaluation split's scores before training, at the end and at
the best-validation step.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from harnessrl.records.run_record import (
    Accounting,
    BestCheckpoint,
    EvolverSummary,
    Missing,
    RunRecord,
    RunSummaryRecord,
    SplitSummary,
    SummaryExtra,
    read_summary,
)
from harnessrl.trainer.resume import restored_totals

if TYPE_CHECKING:
    from harnessrl.records.run_dir import RunDir
    from harnessrl.trainer.run_state import RunState

__all__ = ["RunSummary", "finish_run", "saved_summary"]

logger = logging.getLogger(__name__)


RunSummary = RunSummaryRecord
"""A run's summary as ``summary.json`` holds it: its steps and wall time, the evaluations before, after and at
the best checkpoint (``eval``, per split), the rewards of its first and last steps, and its totals
(``accounting``; ``extra``: devices, failures, the monitor's and the evolver's figures). One model, the records'
:class:`~harnessrl.records.run_record.RunSummaryRecord`: the trainer builds it and every reader reads it."""


def saved_summary(run: RunDir) -> RunSummary | None:
    """A run's summary as it saved it (summary.json), or None when it has none (not ended yet, or stopped while
    it ended)."""
    saved = read_summary(run.path)
    if isinstance(saved, Missing):
        return None
    return saved.model_copy(update={"run_dir": run.path})


def finish_run(r: RunState) -> RunSummary:
    """The memory closed, the harness saved, and the whole run's summary written (summary.json, run_end)."""
    run, trainer = r.run, r.trainer
    assert run is not None and r.harness is not None
    r.attachment.close()
    memory_counts = r.attachment.memory_counts
    if not r.main:
        return RunSummary(
            run_dir=run.path, steps=trainer.state.global_step, wall_seconds=time.perf_counter() - r.t_start
        )
    r.harness.save(run.harness)
    summary = _whole_run(r, memory_counts)
    # written once, each figure in one place: the run's totals are in its accounting (RunRecord reads them there)
    run.write_json("summary.json", summary.model_dump(mode="json"))
    run.event("run_end", step=summary.steps, wall_seconds=summary.wall_seconds)
    for split, entry in summary.eval.items():
        if entry.final is None and "final" in entry.model_fields_set:
            logger.error("the run's final %s evaluation has no score: %s", split, entry.final_no_score_reason)
    return summary


def _whole_run(r: RunState, memory_counts: dict[str, int]) -> RunSummary:
    """The whole run's totals, every earlier process of a resumed run included (read back from its records)."""
    config, run, trainer, eval_cb, monitor = r.config, r.run, r.trainer, r.eval_cb, r.attachment.monitor
    assert run is not None and r.tasks is not None
    record = RunRecord.load(run.path)
    totals = restored_totals(record)
    wall = time.perf_counter() - r.t_start + totals.earlier_wall_seconds
    rewards = [v for m in record.metrics if (v := m.value("reward")) is not None]
    # the reported curve is the test split's (validation's when a run has no test split)
    reported = "test" if r.tasks.test else "validation"
    evals = eval_cb.split_results(reported) if eval_cb else []
    best = eval_cb.best if eval_cb else None
    monitor_seconds = {k: v + totals.earlier_monitor_seconds.get(k, 0.0) for k, v in monitor.seconds.items()}
    overhead = totals.evolver_seconds + sum(monitor_seconds.values())
    groups = [v for m in record.metrics if (v := m.value("effective_group_ratio")) is not None]
    accounting = Accounting.model_validate(
        {
            **{k.replace("/", "_"): v for k, v in trainer.accounting_metrics().items()},
            "judge_calls": trainer.accounting_metrics()["judge/calls_total"],
            "effective_group_ratio": sum(groups) / len(groups) if groups else None,
            "wall_seconds": wall,
            "evolver_seconds": totals.evolver_seconds,
            "trial_seconds": totals.trial_seconds,
            "detector_seconds": monitor_seconds.get("detectors", 0.0),
            "memory_seconds": monitor_seconds.get("memory", 0.0),
            "harness_overhead_seconds": overhead,
            "harness_overhead_share": overhead / wall if wall else None,
            "processes": totals.processes,
        }
    )
    return RunSummary(
        run_dir=run.path,
        steps=trainer.state.global_step,
        wall_seconds=wall,
        timings=dict(trainer.timings),
        eval_before=next((e.overall for e in evals if e.step == 0), None),
        eval_after=evals[-1].overall if evals else None,
        best=best,
        reward_first=rewards[0] if rewards else None,
        reward_last=rewards[-1] if rewards else None,
        method=config.method,
        evolver_enabled=config.runs_evolver,
        steps_to_best=best.step if best else None,
        eval=_eval_summary(eval_cb, best) if eval_cb else {},
        accounting=accounting,
        extra=SummaryExtra(
            devices=r.devices,
            failures=totals.failures,
            monitor_seconds=monitor_seconds,
            memory_records=memory_counts,
            evolver=EvolverSummary.model_validate(
                {
                    "points": totals.evolution_points,
                    "points_by_mode": totals.points_by_mode,
                    "seconds": totals.evolver_seconds,
                    **(r.attachment.evolution.service.metrics() if r.attachment.evolution else {}),
                }
            ),
        ),
    )


def _eval_summary(eval_cb, best: BestCheckpoint | None) -> dict[str, SplitSummary]:
    """Per split: the score before training, at the end, and (test) at the best-validation step."""
    out: dict[str, SplitSummary] = {}
    for split in eval_cb.splits:
        rows = eval_cb.split_results(split)
        if not rows:
            continue
        final = rows[-1]
        entry = SplitSummary(
            graded_with=final.graded_with,
            before=next((r.overall for r in rows if r.step == 0), None),
            final=final.overall,
            final_step=final.step,
            final_per_domain=final.per_domain,
            final_per_family=final.per_family,
            final_proxy=final.proxy.overall if final.proxy is not None else None,
        )
        if final.overall is None:
            entry.final_no_score_reason = final.no_score_reason
        if split == "validation":
            entry.best = best.overall if best else None
            entry.best_step = best.step if best else None
        elif best is not None:
            at = next((r for r in rows if r.step == best.step), None)
            entry.at_best = at.overall if at else None
            entry.at_best_per_domain = at.per_domain if at else None
            entry.at_best_per_family = at.per_family if at else None
            entry.at_best_proxy = at.proxy.overall if at and at.proxy is not None else None
        out[split] = entry
    return out
