"""``harnessrl bench report``: ``results.md``, ``results.json`` and the plots of a bench folder.

The report states what the numbers support and no more: every figure is a mean with its seed spread
and the number of seeds behind it; a comparison is a paired per-seed difference with its sign count
and its intervals (over seeds, and over test tasks); fewer than 3 seeds, a held-out set that both
chooses and reports, or a figure the runs do not record is said in the report's notes, not hidden.
Where the runs are graded with gold rubrics, the proxy (rubric version 0) stands beside every gold
score, per task family, and the oracle (trained on gold) is reported as the bound, not as a rival.

This module reads the runs, writes results.json and assembles results.md from its sections, and prints the
results in the terminal. The sections live by concern: report_scores (per method, per domain and family,
the fault check), report_comparisons (against the baselines, the bound, the ablations, the oracle gap),
report_harness (what the harness did: repairs, decisions, misfires), report_notes (the notes), all written
with report_format (numbers and tables).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harnessrl.analysis.plots import write_plots
from harnessrl.analysis.repairs import family_curves, family_repairs, oracle_gap_paired, unnecessary_commits
from harnessrl.analysis.report_comparisons import (
    _ablation_lines,
    _bound_lines,
    _comparison_lines,
    _oracle_lines,
    _paired_gap_lines,
)
from harnessrl.analysis.report_format import _num, _stat, _table
from harnessrl.analysis.report_harness import (
    _decision_lines,
    _family_curve_lines,
    _misfire_lines,
    _repair_lines,
    _unnecessary_lines,
)
from harnessrl.analysis.report_harness import _seed_repair as _seed_repair  # importable here, as before the split
from harnessrl.analysis.report_notes import _notes, _row_notes
from harnessrl.analysis.report_scores import (
    _cost_table,
    _equal_cost_lines,
    _family_lines,
    _fault_lines,
    _headline,
    _per_group_table,
)
from harnessrl.analysis.results import (
    SameBenchmark,
    ablations,
    aggregate,
    baselines,
    best_baseline,
    best_baseline_figure,
    compare,
    fault_check,
    is_harness_arm,
    is_oracle,
    load_benches,
    oracle_bound,
    oracle_gap,
    run_figures,
    same_name,
    with_equal_cost,
)
from harnessrl.analysis.results_file import BenchResults
from harnessrl.analysis.rows import merge_rows
from harnessrl.analysis.test_reads import arms_scored, split_families
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import BenchManifest

__all__ = ["BenchReport", "print_results", "write_bench_report"]

logger = logging.getLogger(__name__)


@dataclass
class BenchReport:
    markdown: Path
    json: Path
    plots: dict[str, Path]
    results: BenchResults
    """What results.json holds, read back."""


def _finite(data: object) -> object:
    """``data`` with every NaN or infinite float made None (results.json is strict JSON), and the runs'
    private figures (keys starting with ``_``: per-task scores) left out."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {str(k): _finite(v) for k, v in data.items() if not str(k).startswith("_")}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def _shown(path: Path | str) -> str:
    """A run or bench path as the report shows it: relative to the repository root when absolute and
    inside one (so a committed results folder reads the same anywhere), else as given."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    for parent in p.parents:
        if (parent / ".git").exists():
            return str(p.relative_to(parent))
    return str(p)


def _test_split_lines(arms: dict[str, list[str]]) -> list[str]:
    """How many arms have been scored on this test split, and where (docs/design.md §8)."""
    if not arms:
        return []
    rows = [[f"`{m}`", ", ".join(f"`{r}`" for r in where)] for m, where in sorted(arms.items())]
    return [
        "## Arms scored on this test split",
        "",
        f"{len(arms)} arm(s) have been scored on this report's test split (the committed reports whose runs were "
        "scored on the same test tasks, this one included). A test figure is a maximum over the arms read on its "
        "split, not an estimate: arms and defaults are chosen on validation (docs/design.md §8).",
        "",
        *_table(["arm", "reports"], rows),
        "",
    ]


def _sources_line(results: BenchResults) -> str:
    """Where the runs come from: the bench folders, and the committed reports whose rows were taken."""
    dirs, files = results.bench_dirs, results.row_files
    parts = []
    if dirs or not files:
        parts.append(("Bench folders " if len(dirs) > 1 else "Bench folder ") + ", ".join(f"`{d}`" for d in dirs))
    if files:
        parts.append(
            ("run rows" if dirs else "Run rows")
            + " taken as they are from the committed report"
            + ("s " if len(files) > 1 else " ")
            + ", ".join(f"`{f}`" for f in files)
            + " (marked *row* in the runs table)"
        )
    configs = results.bench_configs or ([results.bench_config] if results.bench_config else [])
    if len(configs) > 1:  # one benchmark from several files: they train the same (only how they ran differs)
        return "; ".join(parts) + ", configs " + ", ".join(f"`{c}`" for c in configs) + " (they train the same)"
    return "; ".join(parts) + (f", config `{configs[0]}`" if configs else "")


def _markdown(results: BenchResults) -> str:
    """results.md from results.json's content, read back (:class:`~harnessrl.analysis.results_file.BenchResults`)."""
    agg, figures = results.methods, results.runs
    lines = [
        "# Benchmark results",
        "",
        _sources_line(results) + f"; report made {results.generated}.",
        f"{len(figures)} run(s), {sum(f.complete for f in figures)} finished. Methods: {', '.join(agg)}"
        + (f" (harness arms: {', '.join(results.harness_arms)})" if results.harness_arms else "")
        + (f"; the bound: {', '.join(results.oracles)}" if results.oracles else "")
        + ".",
        "",
    ]
    if results.notes:
        lines += ["**Read with care:**", ""] + [f"- {n}" for n in results.notes] + [""]
    lines += _headline(agg)
    lines += _equal_cost_lines(figures, agg)
    lines += ["", *_cost_table(agg)]
    for where, title in (
        ("test_at_best_per_domain", "at the best-validation checkpoint"),
        ("test_end_per_domain", "at the end"),
    ):
        lines += _per_group_table(agg, where, f"## Test score per domain, {title}")
    lines += _family_lines(agg)
    lines += _fault_lines(results.fault_check)
    lines += [
        "## HarnessRL against each baseline",
        "",
        *_comparison_lines(results.comparisons, agg, results.best_baseline, results.best_baseline_by),
        "",
    ]
    lines += _bound_lines(results.oracle_bound)
    lines += _ablation_lines(results.ablations, agg)
    lines += _oracle_lines(results.oracle_gap, agg)
    lines += _paired_gap_lines(results.oracle_gap_paired)
    lines += _family_curve_lines(results.family_curves)
    lines += _repair_lines(results.family_repairs)
    lines += _unnecessary_lines(results.unnecessary_commits)
    lines += _decision_lines(agg)
    lines += _misfire_lines(figures, agg)
    lines += _test_split_lines(results.test_split_arms)
    lines += ["## Plots", ""]
    for name, rel in results.plots.items():
        lines += [f"![{name}]({rel})", ""]
    lines += ["## Runs", ""]
    rows = [
        [
            f.method,
            str(f.seed),
            f.status,
            f"{f.steps}/{_num(f.max_steps, 0)}",
            f.graded_with or "n/a",
            _num(f.test_at_best),
            _num(f.test_end),
            _num(f.proxy_test_end),
            "n/a" if f.steps_to_best is None else str(f.steps_to_best),
            _num(f.wall_seconds / 60 if f.wall_seconds is not None else None, 1),
            f"{f.harness_commits} / {f.harness_rejections}",
            f"`{f.path}`" + (f" (*row* of `{f.rows_from}`)" if f.rows_from else ""),
        ]
        for f in figures
    ]
    lines += _table(
        [
            "method",
            "seed",
            "status",
            "steps",
            "graded with",
            "test @ best val",
            "test @ end",
            "proxy @ end",
            "steps to best",
            "wall (min)",
            "commits / rejections",
            "run directory",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def write_bench_report(
    bench_dir: str | Path | Sequence[str | Path],
    plots: bool = True,
    out: str | Path | None = None,
    rows: Sequence[str | Path] = (),
    rows_methods: Sequence[str] | None = None,
    same_benchmark: SameBenchmark = same_name,
) -> BenchReport:
    """Read every run of a bench folder, or of several read as one (:func:`load_benches`), and write
    ``results.md``, ``results.json`` and ``plots/*.png`` into ``out`` (default: the first bench folder).
    Run paths in them are relative to the repository root (or as given), and results.md links its plots
    relative to ``out``.

    ``rows``: committed reports' results.json whose run rows are reported beside the folders' runs, as they are
    (:func:`~harnessrl.analysis.rows.merge_rows`: the same bench, no method and seed twice; ``rows_methods``: only
    these methods' rows). With rows only, no folder, ``out`` is needed and no plot is drawn. ``same_benchmark``: whether
    two sources' bench configs are one benchmark (default: the same file name)."""
    roots = [Path(bench_dir)] if isinstance(bench_dir, str | Path) else [Path(d) for d in bench_dir]
    if not roots and not rows:
        raise HarnessRLError("nothing to report: give a bench folder (--dir) or a report's results.json (--rows)")
    if not roots and out is None:
        raise HarnessRLError("with --rows alone, say where the report goes (--out)")
    runs, manifest = load_benches(roots, same_benchmark) if roots else ([], BenchManifest())
    dest = Path(out) if out is not None else roots[0]
    figures = [run_figures(r).model_copy(update={"path": _shown(r.path)}) for r in runs]
    taken, manifest = merge_rows(figures, manifest, rows, rows_methods, shown=_shown, same=same_benchmark)
    dest.mkdir(parents=True, exist_ok=True)
    figures = with_equal_cost([*figures, *taken])
    agg = aggregate(figures, list(manifest.methods))
    repairs = family_repairs(runs, agg)
    curves = family_curves(runs, agg, taken)
    plot_paths = write_plots(runs, agg, dest / "plots", repairs=repairs, curves=curves) if plots and runs else {}
    results = BenchResults(
        bench_dir=", ".join(_shown(r) for r in roots),
        bench_dirs=[_shown(r) for r in roots],
        row_files=[_shown(r) for r in rows],
        bench_config=manifest.bench_config,
        bench_configs=manifest.bench_configs,
        method_settings=manifest.methods,
        generated=datetime.now(UTC).isoformat(timespec="seconds"),
        harness_arms=[m for m in agg if is_harness_arm(m, agg)],
        oracles=[m for m in agg if is_oracle(m, agg)],
        baselines=baselines(agg),
        best_baseline=best_baseline(agg),
        best_baseline_by=best_baseline_figure(agg),
        methods=agg,
        comparisons=compare(agg, figures),
        ablations=ablations(agg, manifest.methods),
        oracle_gap=oracle_gap(agg),
        oracle_gap_paired=oracle_gap_paired(agg),
        oracle_bound=oracle_bound(agg),
        family_curves=curves,
        family_repairs=repairs,
        unnecessary_commits=unnecessary_commits(runs, agg),
        fault_check=fault_check(agg),
        test_split_arms=arms_scored(dest.parent, split_families(figures), list(agg), dest.name),
        runs=figures,
        notes=_notes(figures, agg, manifest) + _row_notes(figures, agg, bool(plots)),
        plots={name: os.path.relpath(p, dest) for name, p in plot_paths.items()},
    )
    written = _finite(results.model_dump(mode="python"))  # results.json is strict JSON: no NaN
    results = BenchResults.read(written, "the report's results")
    md = dest / "results.md"
    md.write_text(_markdown(results), encoding="utf-8")
    js = dest / "results.json"
    js.write_text(json.dumps(written, indent=1, default=str, allow_nan=False), encoding="utf-8")
    return BenchReport(markdown=md, json=js, plots=plot_paths, results=results)


def print_results(report: BenchReport, console: Console) -> None:
    """The scores table and the comparisons' verdicts in the terminal."""
    agg = report.results.methods
    t = Table(title="Bench results (mean ± std over seeds)", title_justify="left")
    for col in (
        "method",
        "seeds",
        "test @ best val",
        "test @ end",
        "@ equal rollouts",
        "proxy @ end",
        "steps to best",
        "effective groups",
        "wall (min)",
    ):
        t.add_column(col, justify="left" if col == "method" else "right")
    for m, a in agg.items():
        n = len(a.seeds)
        t.add_row(
            m,
            str(n),
            _stat(a.test_at_best, n),
            _stat(a.test_end, n),
            _stat(a.test_at_equal_rollouts, n),
            _stat(a.proxy_test_end, n),
            _stat(a.steps_to_best, n, digits=1),
            _stat(a.effective_group_ratio, n, pct=True),
            _stat(a.wall_seconds, n, digits=1, scale=1 / 60),
        )
    console.print(t)
    for c in report.results.comparisons:
        console.print(
            f"{c.harness} vs {c.baseline}: test @ best val {c.test_at_best.verdict}; "
            f"steps to best {c.steps_to_best.verdict}",
            highlight=False,
        )
    for r in report.results.ablations:
        beyond = [f for f, d in r.per_family["test_at_best"].items() if d.beyond_spread]
        console.print(
            f"ablation {r.arm} − {r.reference} ({', '.join(r.changes)}): test @ best val "
            f"{_stat(r.test_at_best, r.test_at_best.n, signed=True)}, {r.test_at_best.verdict}; "
            f"families beyond the seed spread: {', '.join(beyond) or 'none'}",
            highlight=False,
        )
    gap = report.results.oracle_gap
    if gap and gap.at:
        shares = gap.at["test_at_best"].overall.shares
        if shares:
            console.print(
                f"share of the {gap.fixed}→{gap.oracle} gap closed (test @ best val): "
                + ", ".join(f"{m} {_num(v, 2)}" for m, v in shares.items()),
                highlight=False,
            )
    for n in report.results.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    plots_dir = report.markdown.parent / "plots"
    console.print(f"results: {report.markdown}, {report.json}; plots in {plots_dir}")
