"""``harnessrl bench report``: ``results.md``, ``results.json`` and the plots of a bench folder.

The report states what the numbers support and no more: every figure is a mean with its seed spread
and the number of seeds behind it; a comparison is a paired per-seed difference with its sign count;
fewer than 3 seeds, a held-out set that both chooses and reports, or a figure the runs do not record
is said in the report's notes, not hidden.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from harnessrl.bench.plots import write_plots
from harnessrl.bench.results import aggregate, compare, is_harness_arm, load_runs, run_figures

__all__ = ["BenchReport", "print_results", "write_bench_report"]

logger = logging.getLogger(__name__)


@dataclass
class BenchReport:
    markdown: Path
    json: Path
    plots: dict[str, Path]
    results: dict[str, Any]


# ------------------------------------------------------------------------------------------ formatting
def _num(v: float | None, digits: int = 3, pct: bool = False, signed: bool = False) -> str:
    if v is None:
        return "n/a"
    if pct:
        return f"{v:+.1%}" if signed else f"{v:.1%}"
    if digits == 0:
        return f"{v:+,.0f}" if signed else f"{v:,.0f}"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _stat(
    st: dict[str, Any],
    seeds: int | None = None,
    digits: int = 3,
    pct: bool = False,
    scale: float = 1.0,
    signed: bool = False,
) -> str:
    """``mean ± std`` (n shown when fewer seeds than the method has have the figure)."""
    if not st or st.get("mean") is None:
        return "n/a"
    text = _num(st["mean"] * scale, digits, pct, signed)
    if st.get("std") is not None:
        text += f" ± {_num(st['std'] * scale, digits, pct)}"
    if seeds is None or st["n"] != seeds:
        text += f" (n={st['n']})"
    return text


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


# ------------------------------------------------------------------------------------------ content
def _notes(figures: list[dict[str, Any]], agg: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    notes = []
    failed = [
        f"{key} ({str(row.get('error') or '').splitlines()[0] if row.get('error') else row.get('status')})"
        for key, row in (manifest.get("runs") or {}).items()
        if row.get("status") in ("failed", "interrupted")
    ]
    if failed:
        notes.append(f"Runs that failed or were interrupted (see bench.json and their logs): {', '.join(failed)}.")
    empty = [m for m, a in agg.items() if not a["seeds"]]
    if empty:
        notes.append(f"No run of {', '.join(empty)} has recorded anything: they have no figures.")
    few = [f"{m} ({len(a['seeds'])})" for m, a in agg.items() if 0 < len(a["seeds"]) < 3]
    if few:
        notes.append(
            f"Fewer than 3 seeds for {', '.join(few)}: spreads are rough and no comparison below draws a conclusion."
        )
    legacy = sorted({f["method"] for f in figures if not f["split"].startswith("validation")})
    if legacy:
        notes.append(
            f"Runs of {', '.join(legacy)} evaluate one held-out set that both chooses the best checkpoint and is "
            "reported as the test score: this flatters every method alike (newer runs keep validation and test apart)."
        )
    incomplete = [f"{f['method']}/seed{f['seed']} ({f['status']})" for f in figures if not f["complete"]]
    if incomplete:
        notes.append(f"Not finished, counted with what they recorded so far: {', '.join(incomplete)}.")
    partial = sorted({f["method"] for f in figures if f["rollouts_spent_source"].startswith("steps.jsonl")})
    if partial:
        notes.append(
            f"Runs of {', '.join(partial)} do not log rollouts/generated: their rollouts spent count trained "
            "rollouts only (no discarded or critic-trial rollouts)."
        )
    at_end = {}
    for f in figures:
        if f["steps_to_best"] is not None and f["steps"] and f["steps_to_best"] >= f["steps"]:
            at_end[f["method"]] = at_end.get(f["method"], 0) + 1
    if at_end:
        counts = ", ".join(f"{m} {at_end[m]} of {len(agg[m]['seeds'])}" for m in agg if m in at_end)
        notes.append(
            f"Best validation score at the last step ({counts} runs): those runs may still be improving, so "
            "their steps to best are lower bounds and a longer run could change the comparison."
        )
    no_test_at_best = [
        f"{f['method']}/seed{f['seed']}"
        for f in figures
        if f["steps_to_best"] is not None and f["test_at_best"] is None
    ]
    if no_test_at_best:
        notes.append(f"No test evaluation at the best validation step for {', '.join(no_test_at_best)}.")
    return notes


def _comparison_lines(comps: list[dict[str, Any]]) -> list[str]:
    if not comps:
        return ["No comparison: the bench needs a harness arm (a method run with `method: harnessrl`) and a baseline."]
    lines = [
        "Paired by seed, harness minus baseline: a positive score difference and a negative steps difference "
        "favour the harness. Each cell is the mean ± std of the per-seed differences.",
        "",
    ]
    rows = []
    for c in comps:
        rows.append(
            [
                f"{c['harness']} − {c['baseline']}",
                str(c["test_at_best"]["n"]),
                _stat(c["test_at_best"], c["test_at_best"]["n"], signed=True),
                _stat(c["test_end"], c["test_end"]["n"], signed=True),
                _stat(c["steps_to_best"], c["steps_to_best"]["n"], digits=1, signed=True),
                _num(c["steps_to_best"]["ratio_of_means"], 2),
            ]
        )
    lines += _table(
        ["pair", "seeds", "Δ test @ best val", "Δ test @ end", "Δ steps to best", "steps-to-best ratio"], rows
    )
    lines.append("")
    for c in comps:
        lines.append(
            f"- **{c['harness']} vs {c['baseline']}**: test score at the best-validation checkpoint — "
            f"{c['harness']} {c['test_at_best']['verdict']}; at the end — {c['test_end']['verdict']}; "
            f"steps to best — {c['steps_to_best']['verdict']}."
        )
    return lines


def _markdown(results: dict[str, Any], bench_dir: Path) -> str:
    agg, figures = results["methods"], results["runs"]
    lines = [
        "# Benchmark results",
        "",
        f"Bench folder `{bench_dir}`"
        + (f", config `{results['bench_config']}`" if results.get("bench_config") else "")
        + f"; report made {results['generated']}.",
        f"{len(figures)} run(s), {sum(f['complete'] for f in figures)} finished. Methods: {', '.join(agg)}.",
        "",
    ]
    if results["notes"]:
        lines += ["**Read with care:**", ""] + [f"- {n}" for n in results["notes"]] + [""]

    lines += [
        "## Scores per method",
        "",
        "Mean ± sample std over seeds (n given where fewer seeds have the figure). *Test @ best val*: the test "
        "score at the checkpoint with the best validation score; *steps to best*: the step of that checkpoint.",
        "",
    ]
    rows = []
    for m, a in agg.items():
        n = len(a["seeds"])
        rows.append(
            [
                m,
                f"{n} ({len(a['complete_seeds'])} finished)",
                _stat(a["test_at_best"], n),
                _stat(a["test_end"], n),
                _stat(a["test_start"], n),
                _stat(a["validation_best"], n),
                _stat(a["steps_to_best"], n, digits=1),
            ]
        )
    lines += _table(
        ["method", "seeds", "test @ best val", "test @ end", "test @ step 0", "best validation", "steps to best"], rows
    )
    lines += ["", "## Learning signal and cost", ""]
    rows = []
    for m, a in agg.items():
        n = len(a["seeds"])
        rows.append(
            [
                m,
                _stat(a["effective_group_ratio"], n, pct=True),
                _stat(a["zero_std_all_low"], n, pct=True),
                _stat(a["zero_std_all_high"], n, pct=True),
                _stat(a["rollouts_spent"], n, digits=0),
                _stat(a["rollouts_generated"], n, digits=0),
                _stat(a["rollouts_discarded"], n, digits=0),
                _stat(a["rollouts_trial"], n, digits=0),
                _stat(a["judge_calls"], n, digits=0),
                _stat(a["wall_seconds"], n, digits=1, scale=1 / 60),
                _stat(a["harness_overhead_share"], n, pct=True),
            ]
        )
    lines += _table(
        [
            "method",
            "effective groups",
            "flat, all low",
            "flat, all high",
            "rollouts spent",
            "generated",
            "discarded",
            "trial",
            "judge calls",
            "wall (min)",
            "harness overhead",
        ],
        rows,
    )
    lines += [
        "",
        "*Effective groups*: share of task groups whose reward std is above eps (mean over steps). *Rollouts spent*: "
        "generated (incl. discarded) plus critic-trial rollouts. *Harness overhead*: detectors, memory, evolution "
        "points and trials as a share of the training process's wall time. *Wall*: the bench's measured time for "
        "the run, all attempts and process start-up included.",
        "",
    ]
    for where, title in (
        ("test_at_best_per_domain", "at the best-validation checkpoint"),
        ("test_end_per_domain", "at the end"),
    ):
        domains = sorted({d for a in agg.values() for d in a[where]})
        if not domains:
            continue
        lines += [f"## Test score per domain, {title}", ""]
        rows = [[m] + [_stat(a[where].get(d, {}), len(a["seeds"])) for d in domains] for m, a in agg.items()]
        lines += [*_table(["method", *domains], rows), ""]

    lines += ["## HarnessRL against each baseline", "", *_comparison_lines(results["comparisons"]), ""]
    lines += ["## Plots", ""]
    for name, rel in results["plots"].items():
        lines += [f"![{name}]({rel})", ""]
    lines += ["## Runs", ""]
    rows = [
        [
            f["method"],
            str(f["seed"]),
            f["status"],
            f"{f['steps']}/{_num(f['max_steps'], 0)}",
            _num(f["test_at_best"]),
            _num(f["test_end"]),
            "n/a" if f["steps_to_best"] is None else str(f["steps_to_best"]),
            _num(f["wall_seconds"] / 60 if f["wall_seconds"] is not None else None, 1),
            f"{f['harness_commits']} / {f['harness_rejections']}",
            f"`{f['path']}`",
        ]
        for f in figures
    ]
    lines += _table(
        [
            "method",
            "seed",
            "status",
            "steps",
            "test @ best val",
            "test @ end",
            "steps to best",
            "wall (min)",
            "commits / rejections",
            "run directory",
        ],
        rows,
    )
    return "\n".join(lines) + "\n"


def write_bench_report(bench_dir: str | Path, plots: bool = True) -> BenchReport:
    """Read every run of a bench folder and write ``results.md``, ``results.json`` and ``plots/*.png``."""
    root = Path(bench_dir)
    runs, manifest = load_runs(root)
    figures = [run_figures(r) for r in runs]
    agg = aggregate(figures, list((manifest.get("methods") or {}).keys()))
    plot_paths = write_plots(runs, agg, root / "plots") if plots else {}
    results: dict[str, Any] = {
        "bench_dir": str(root),
        "bench_config": manifest.get("bench_config"),
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "harness_arms": [m for m in agg if is_harness_arm(m, agg)],
        "methods": agg,
        "comparisons": compare(agg),
        "runs": figures,
        "notes": _notes(figures, agg, manifest),
        "plots": {name: os.path.relpath(p, root) for name, p in plot_paths.items()},
    }
    md = root / "results.md"
    md.write_text(_markdown(results, root), encoding="utf-8")
    js = root / "results.json"
    js.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    return BenchReport(markdown=md, json=js, plots=plot_paths, results=results)


def print_results(report: BenchReport, console: Console) -> None:
    """The scores table and the comparisons' verdicts in the terminal."""
    agg = report.results["methods"]
    t = Table(title="Bench results (mean ± std over seeds)", title_justify="left")
    for col in ("method", "seeds", "test @ best val", "test @ end", "steps to best", "effective groups", "wall (min)"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for m, a in agg.items():
        n = len(a["seeds"])
        t.add_row(
            m,
            str(n),
            _stat(a["test_at_best"], n),
            _stat(a["test_end"], n),
            _stat(a["steps_to_best"], n, digits=1),
            _stat(a["effective_group_ratio"], n, pct=True),
            _stat(a["wall_seconds"], n, digits=1, scale=1 / 60),
        )
    console.print(t)
    for c in report.results["comparisons"]:
        console.print(
            f"{c['harness']} vs {c['baseline']}: test @ best val {c['test_at_best']['verdict']}; "
            f"steps to best {c['steps_to_best']['verdict']}",
            highlight=False,
        )
    for n in report.results["notes"]:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    console.print(f"results: {report.markdown}, {report.json}; plots in {report.markdown.parent / 'plots'}")
