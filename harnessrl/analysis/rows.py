"""Run rows of committed reports, merged into a report beside the runs read from bench folders.

A committed report's ``results.json`` keeps one row per run (its ``runs`` list): the
:class:`~harnessrl.analysis.figures.RunFigures` :func:`~harnessrl.analysis.per_run.run_figures` computed from the raw
run folder, which is not committed. When those folders are gone and more seeds are run later, ``harnessrl bench report
--rows <results.json>`` reads the rows back through that model, beside the new folders' runs, so every table pairs all
the seeds; a row that does not fit it is refused, naming its file and the field.

What a row cannot give is never guessed: the per-task test scores (kept out of results.json, so the bootstrap
over test tasks rests on the other seeds), the per-family test score between step 0 and the end, the events
and trained groups (repairs per family, unnecessary commits, the timeline), the run's curves (plots), and any
figure newer than the report (its ``missing``); the report's notes list which methods and seeds lack each. The
equal-rollouts score is recomputed from the row's test curve, as for any run, since its budget is the
smallest spent by this report's runs of the seed.

Rows merge only where they agree with the folders (:func:`~harnessrl.analysis.results.agree`): the same bench
config, the same settings for a method both have (an older report records only each run's trainer method and
max steps, so a method whose folder settings say more cannot be checked and is refused), and no method and
seed twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import JsonValue

from harnessrl.analysis.figures import REQUIRED, RunFigures
from harnessrl.analysis.results import SameBenchmark, agree, same_name
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import BenchManifest, read_report_file

__all__ = ["REQUIRED", "ROWS_FROM", "merge_rows", "row_figures"]

ROWS_FROM = "rows_from"
"""The run figure naming the results.json a row was taken from (None on a run read from its folder)."""


def row_figures(row: dict[str, JsonValue], source: str, index: int = 0) -> RunFigures:
    """One results.json row (``index`` of its ``runs``) as the per-run figures the report aggregates, read through
    :class:`~harnessrl.analysis.figures.RunFigures`: with ``rows_from`` (``source``) and, in ``missing``, the figures
    the report was written before (None: not recorded); the private per-task scores are never in a row. A row that
    does not fit the model is refused naming ``source`` and the field."""
    return RunFigures.from_row(row, source, index)


def _steps(n: float | None) -> str:
    return "an unrecorded number of" if n is None else f"{n:g}"


def _check_unrecorded(source: str, method: str, rows: list[RunFigures], merged: BenchManifest, by: str) -> None:
    """Without recorded settings, a row's trainer method must be all its folder settings say."""
    settings = merged.methods.get(method)
    if settings is None:
        return
    trainer = {r.trainer_method for r in rows}
    if set(settings) != {"method"} or trainer != {settings["method"]}:
        raise HarnessRLError(
            f"method {method!r} has settings {settings} in {by}; {source} records no settings, only its runs' "
            f"trainer method ({', '.join(sorted(map(str, trainer)))}): the settings cannot be checked equal (report "
            "them apart, or leave the method out of the rows with --rows-methods)"
        )


def merge_rows(
    figures: Sequence[RunFigures],
    manifest: BenchManifest,
    files: Sequence[str | Path],
    methods: Sequence[str] | None = None,
    shown: Callable[[str | Path], str] = str,
    same: SameBenchmark = same_name,
) -> tuple[list[RunFigures], BenchManifest]:
    """The rows of ``files`` (committed reports' results.json, each shown in messages and figures by ``shown``)
    to report beside the folders' run ``figures`` and their merged ``manifest`` (``bench_config``, ``methods``),
    and the manifest with the rows' bench config and recorded settings folded in.

    ``methods``: take only these methods' rows (default: all). Refused, naming both sources: a method and seed
    that a folder or an earlier file already has; another bench config, or a report without one beside folders
    that record one; other settings for a method (an older report records none: then a row's trainer method
    must be all the folder's settings say, and its max steps the folder runs' of that method)."""
    merged = manifest.model_copy(update={"methods": dict(manifest.methods)})
    method_from = dict.fromkeys(merged.methods, "the bench folders")
    run_from = {(f.method, f.seed): f.path for f in figures}
    max_steps: dict[str, float | None] = {}
    for f in figures:
        max_steps[f.method] = max_steps.get(f.method) or f.max_steps
    out: list[RunFigures] = []
    wanted = set(methods or ())
    seen: set[str] = set()
    for file in files:
        source = shown(file)
        data = read_report_file(file)
        rows = [
            row_figures(r, source, i) for i, r in enumerate(data.runs or []) if not wanted or r.get("method") in wanted
        ]
        seen |= {r.method for r in rows}
        config = data.bench_config
        if config is None and merged.bench_config is not None:
            raise HarnessRLError(
                f"{source} records no bench config: it cannot be checked to come from the bench of the folders "
                f"({merged.bench_config!r})"
            )
        settings = data.method_settings or {}
        taken = sorted({r.method for r in rows})
        recorded = {m: settings[m] for m in taken if m in settings}
        agree(merged, method_from, source, BenchManifest(bench_config=config, methods=recorded), same)
        for m in (m for m in taken if m not in recorded):
            _check_unrecorded(source, m, [r for r in rows if r.method == m], merged, method_from.get(m, ""))
        for f in rows:
            key = (f.method, f.seed)
            if key in run_from:
                raise HarnessRLError(
                    f"{f.method}/seed{f.seed} is in both {run_from[key]} and {source}: a report takes one run "
                    "per method and seed (leave the method out of the rows with --rows-methods, or report apart)"
                )
            if f.method in max_steps and f.max_steps != max_steps[f.method]:
                raise HarnessRLError(
                    f"{f.method}/seed{f.seed} of {source} ran {_steps(f.max_steps)} steps, the runs of "
                    f"{f.method} in the bench folders {_steps(max_steps[f.method])}: not one benchmark (report apart)"
                )
            run_from[key] = source
            out.append(f)
    unknown = sorted(wanted - seen)
    if unknown:
        raise HarnessRLError(f"no row of {', '.join(unknown)} in {', '.join(map(shown, files)) or 'no file'}")
    return out, merged
