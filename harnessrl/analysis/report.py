"""``harnessrl bench report``: ``results.md``, ``results.json`` and the plots of a bench folder.

The report states what the numbers support and no more: every figure is a mean with its seed spread
and the number of seeds behind it; a comparison is a paired per-seed difference with its sign count
and its intervals (over seeds, and over test tasks); fewer than 3 seeds, a held-out set that both
chooses and reports, or a figure the runs do not record is said in the report's notes, not hidden.
Where the runs are graded with gold rubrics, the proxy (rubric version 0) stands beside every gold
score, per task family, and the oracle (trained on gold) is reported as the bound, not as a rival.
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
from typing import Any

from rich.console import Console
from rich.table import Table

from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.misfires import MISFIRES
from harnessrl.analysis.plots import write_plots
from harnessrl.analysis.repairs import family_curves, family_repairs, oracle_gap_paired, unnecessary_commits
from harnessrl.analysis.results import (
    FIXED_METHOD,
    SameBenchmark,
    _reference,
    ablations,
    aggregate,
    baselines,
    best_baseline,
    compare,
    fault_check,
    is_harness_arm,
    is_oracle,
    load_benches,
    oracle_bound,
    oracle_gap,
    oracle_method,
    run_figures,
    runs_evolver,
    same_name,
    with_equal_cost,
)
from harnessrl.analysis.rows import merge_rows
from harnessrl.analysis.test_reads import arms_scored, split_families
from harnessrl.errors import HarnessRLError

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


@dataclass(frozen=True)
class Column:
    """One column of a per-method table: its header, the aggregated figure, and how it is shown."""

    header: str
    figure: str
    digits: int = 3
    pct: bool = False
    scale: float = 1.0


SCORE_COLUMNS = (
    Column("test @ best val", "test_at_best"),
    Column("test @ end", "test_end"),
    Column("test @ equal rollouts", "test_at_equal_rollouts"),
    Column("proxy test @ end", "proxy_test_end"),
    Column("test @ step 0", "test_start"),
    Column("best validation", "validation_best"),
    Column("steps to best", "steps_to_best", digits=1),
    Column("rollouts spent", "rollouts_spent", digits=0),
    Column("harness overhead", "harness_overhead_share", pct=True),
)
"""The scores table's columns after the method and its seeds."""

COST_COLUMNS = (
    Column("effective groups", "effective_group_ratio", pct=True),
    Column("flat, all low", "zero_std_all_low", pct=True),
    Column("flat, all high", "zero_std_all_high", pct=True),
    Column("clipped (training)", "train_clipped_share", pct=True),
    Column("clipped (test @ end)", "clipped_share_end", pct=True),
    Column("rollouts spent", "rollouts_spent", digits=0),
    Column("generated", "rollouts_generated", digits=0),
    Column("discarded", "rollouts_discarded", digits=0),
    Column("trial", "rollouts_trial", digits=0),
    Column("judge calls", "judge_calls", digits=0),
    Column("wall (min)", "wall_seconds", digits=1, scale=1 / 60),
    Column("harness overhead", "harness_overhead_share", pct=True),
)
"""The learning signal and cost table's columns after the method."""


def _stat_cells(a: dict[str, Any], columns: Sequence[Column]) -> list[str]:
    """A method's aggregated figures (``a``) as the cells of ``columns``."""
    n = len(a["seeds"])
    return [_stat(a[c.figure], n, digits=c.digits, pct=c.pct, scale=c.scale) for c in columns]


def _interval(lo_hi: list[float] | None, digits: int = 3) -> str:
    return "n/a" if not lo_hi else f"[{_num(lo_hi[0], digits, signed=True)}, {_num(lo_hi[1], digits, signed=True)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _finite(data: Any) -> Any:
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


# ------------------------------------------------------------------------------------------ content
def _notes(figures: list[RunFigures], agg: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
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
    # a run that has not evaluated or logged yet (just started) says nothing about how it evaluates or counts
    evaluated = [f for f in figures if f.test_curve or f.validation_best is not None]
    legacy = sorted({f.method for f in evaluated if not f.split.startswith("validation")})
    if legacy:
        notes.append(
            f"Runs of {', '.join(legacy)} evaluate one held-out set that both chooses the best checkpoint and is "
            "reported as the test score: this flatters every method alike (newer runs keep validation and test apart)."
        )
    graded = {m: a.get("graded_with") for m, a in agg.items() if a.get("graded_with")}
    if len(set(graded.values())) > 1:
        notes.append(
            "Methods are graded differently ("
            + ", ".join(f"{m}: {g}" for m, g in graded.items())
            + "): their test scores are not on one scale and comparisons between them mean little."
        )
    incomplete = [f"{f.method}/seed{f.seed} ({f.status})" for f in figures if not f.complete]
    if incomplete:
        notes.append(
            f"Not finished, counted with what they recorded so far: {', '.join(incomplete)}. A run's totals "
            "(rollouts, judge calls, effective groups, the harness's overhead) are its summary's, written when it "
            "ends: n/a until then."
        )
    at_end = {}
    for f in figures:
        if f.steps_to_best is not None and f.steps and f.steps_to_best >= f.steps:
            at_end[f.method] = at_end.get(f.method, 0) + 1
    if at_end:
        counts = ", ".join(f"{m} {at_end[m]} of {len(agg[m]['seeds'])}" for m in agg if m in at_end)
        notes.append(
            f"Best validation score at the last step ({counts} runs): those runs may still be improving, so "
            "their steps to best are lower bounds and a longer run could change the comparison."
        )
    no_test_at_best = [
        f"{f.method}/seed{f.seed}" for f in figures if f.steps_to_best is not None and f.test_at_best is None
    ]
    if no_test_at_best:
        notes.append(f"No test evaluation at the best validation step for {', '.join(no_test_at_best)}.")
    no_family = sorted({f.method for f in figures if f.graded_with == "gold" and f.steps and not f.train_per_family})
    if no_family:
        notes.append(
            f"The training tasks of {', '.join(no_family)} could not be read here (config.yaml `data.train`), or "
            "have no metadata.family: their per-family training figures are n/a."
        )
    oracles = [m for m in agg if is_oracle(m, agg)]
    if oracles:
        notes.append(
            f"{', '.join(oracles)} trains on the gold rubrics: it is the upper bound of any rubric repair, not a "
            "baseline; it is reported beside the others and in the oracle gap, never compared against as a rival."
        )
    return notes


def _runs_list(figures: list[RunFigures], order: list[str]) -> str:
    """``fixed seeds 0, 1, 2; oracle seed 0``: the runs of ``figures`` by method, methods in ``order``."""
    seeds: dict[str, list[int]] = {}
    for f in sorted(figures, key=lambda f: order.index(f.method)):
        seeds.setdefault(f.method, []).append(f.seed)
    return "; ".join(f"{m} seed{'s' if len(s) > 1 else ''} {', '.join(map(str, sorted(s)))}" for m, s in seeds.items())


def _row_notes(figures: list[RunFigures], agg: dict[str, Any], plots: bool) -> list[str]:
    """Which runs came from committed reports' rows, and which figures those rows cannot give (by run)."""
    rows = [f for f in figures if f.rows_from]
    if not rows:
        return []
    notes = [
        f"Runs taken from the committed report `{src}` (its rows as that report computed them from the raw runs, "
        f"which are not read here): {_runs_list([f for f in rows if f.rows_from == src], list(agg))}. Their test "
        "score at equal rollouts is recomputed from their test curves against this report's runs of the same seed."
        for src in dict.fromkeys(f.rows_from for f in rows)
    ]
    arms = {m for m in agg if is_harness_arm(m, agg)}
    curved = {m for m in (_reference(agg, FIXED_METHOD), oracle_method(agg)) if m} | arms
    lacking = [
        (
            "their per-task test scores, so the bootstrap over test tasks rests on the other seeds (its cells name "
            "them where fewer than the paired seeds)",
            [f for f in rows if not is_oracle(f.method, agg)],
        ),
        (
            "their per-family test scores between step 0 and the end (the per-family curve has only those two "
            "steps of them)",
            [f for f in rows if f.method in curved],
        ),
        (
            "their events and trained groups: repairs per family, unnecessary commits on the clean variant and the "
            "timeline leave them out (what the harness did, per family, is their rows' own count)",
            [f for f in rows if f.method in arms],
        ),
        ("their trial costs by remedy", [f for f in rows if f.method in arms and f.trial_costs is None]),
    ]
    lacking += [
        (f"`{key}` (the report they come from predates it)", [f for f in rows if key in f.missing])
        for key in sorted({k for f in rows for k in f.missing if k != "trial_costs"})
    ]
    if plots and len(rows) < len(figures):
        what = (
            "their curves: the plots are drawn from the bench folders' runs (the per-family gold plot draws them at "
            "step 0 and the end, dashed)"
        )
        lacking.append((what, rows))
    notes += [f"Not in the rows of {_runs_list(fs, list(agg))}: {what}." for what, fs in lacking if fs]
    if plots and len(rows) == len(figures):
        notes.append("No plots: they are drawn from the runs' own files, and no bench folder was given.")
    return notes


def _grading_line(agg: dict[str, Any]) -> str:
    graded = {a.get("graded_with") for a in agg.values()} - {None}
    if graded == {"gold"}:
        return (
            "Test scores are graded with the tasks' **gold rubrics** (what the prompt truly asks, never seen in "
            "training); *proxy* is the same completions graded with the training rubric (version 0)."
        )
    if graded == {"rubric"}:
        return "Test scores are graded with the tasks' rubric version 0 (no gold rubrics in these runs)."
    return "Test scores: " + ", ".join(f"{m} graded with {a.get('graded_with')}" for m, a in agg.items()) + "."


def _headline(agg: dict[str, Any]) -> list[str]:
    lines = [
        "## Scores per method",
        "",
        _grading_line(agg),
        "",
        "Mean ± sample std over seeds (n given where fewer seeds have the figure). *Test @ best val*: the test "
        "score at the checkpoint with the best validation score; *@ equal rollouts*: at the last evaluation "
        "within its seed's rollout budget (below); *steps to best*: the step of the best-validation checkpoint; "
        "*harness overhead*: the harness's share of the training process's wall time.",
        "",
    ]
    rows = [
        [m, f"{len(a['seeds'])} ({len(a['complete_seeds'])} finished)", *_stat_cells(a, SCORE_COLUMNS)]
        for m, a in agg.items()
    ]
    return lines + _table(["method", "seeds", *(c.header for c in SCORE_COLUMNS)], rows)


def _equal_cost_lines(figures: list[RunFigures], agg: dict[str, Any]) -> list[str]:
    seeds = sorted({f.seed for f in figures if f.equal_rollouts_budget is not None})
    if not seeds:
        return []
    lines = [
        "",
        "**Equal rollouts.** Per seed, the budget is the smallest total of rollouts spent (generated, DAPO's "
        "discarded included, plus critic trials) by any method of that seed; each run is scored at its last test "
        "evaluation whose cumulative rollouts spent is within it. Cells: the step used (its test score).",
        "",
    ]
    by = {(f.method, f.seed): f for f in figures}
    rows = []
    for s in seeds:
        budget = next(f.equal_rollouts_budget for f in figures if f.seed == s)
        cells = []
        for m in agg:
            f = by.get((m, s))
            if f is None:
                cells.append("—")
            elif f.equal_rollouts_step is None:
                cells.append("n/a")
            else:
                cells.append(f"step {f.equal_rollouts_step} ({_num(f.test_at_equal_rollouts)})")
        rows.append([str(s), _num(budget, 0), *cells])
    return lines + _table(["seed", "budget (rollouts)", *agg], rows)


def _cost_table(agg: dict[str, Any]) -> list[str]:
    lines = ["## Learning signal and cost", ""]
    rows = [[m, *_stat_cells(a, COST_COLUMNS)] for m, a in agg.items()]
    lines += _table(["method", *(c.header for c in COST_COLUMNS)], rows)
    lines += [
        "",
        "*Effective groups*: share of task groups whose reward std is above eps (mean over steps). *Clipped*: share "
        "of completions cut at the token budget (training: `grpo.max_completion_length`; test: the evaluation's). "
        "*Rollouts spent*: generated (incl. discarded) plus critic-trial rollouts. *Harness overhead*: detectors, "
        "memory, evolution points and trials as a share of the training process's wall time. *Wall*: the bench's "
        "measured time for the run, all attempts and process start-up included.",
        "",
    ]
    return lines


def _per_group_table(agg: dict[str, Any], where: str, title: str, note: str = "") -> list[str]:
    groups = sorted({d for a in agg.values() for d in a[where]})
    if not groups:
        return []
    lines = [title, ""] + ([note, ""] if note else [])
    rows = [[m] + [_stat(a[where].get(d, {}), len(a["seeds"])) for d in groups] for m, a in agg.items()]
    return [*lines, *_table(["method", *groups], rows), ""]


def _family_lines(agg: dict[str, Any]) -> list[str]:
    families = sorted({d for a in agg.values() for d in a["test_end_per_family"]})
    train_families = sorted({d for a in agg.values() for d in a["train_per_family"]})
    if not families and not train_families:
        return []
    lines = ["## Test score per family", ""]
    lines += _per_group_table(agg, "test_at_best_per_family", "### Test score at the best-validation checkpoint")
    lines += _per_group_table(agg, "test_end_per_family", "### Test score at the end")
    lines += _per_group_table(
        agg, "proxy_test_at_best_per_family", "### Proxy (rubric version 0) at the best-validation checkpoint"
    )
    lines += _per_group_table(agg, "proxy_test_end_per_family", "### Proxy (rubric version 0) at the end")
    gap_rows = []
    for m, a in agg.items():
        cells = []
        for fam in families:
            p = (a["proxy_test_end_per_family"].get(fam) or {}).get("mean")
            g = (a["test_end_per_family"].get(fam) or {}).get("mean")
            cells.append(_num(p - g, signed=True) if p is not None and g is not None else "n/a")
        if any(c != "n/a" for c in cells):
            gap_rows.append([m, *cells])
    if gap_rows:
        lines += [
            "### Proxy minus gold at the end",
            "",
            "Seed means. A proxy well above gold where the training rubric is flawed is the reward hacking the "
            "gold rubrics make visible; on the controls the two should agree.",
            "",
            *_table(["method", *families], gap_rows),
            "",
        ]
    if train_families:
        lines += [
            "### Training per family",
            "",
            "From steps.jsonl (the trained groups) and the run's training tasks: groups drawn, the share of them "
            "flat and uniformly low (mean below `harness.detectors.low`) or high (above `high`), and the share of "
            "completions cut at the token budget, in training and in the test evaluation at the end.",
            "",
        ]
        rows = []
        for m, a in agg.items():
            n = len(a["seeds"])
            for fam in sorted(set(a["train_per_family"]) | set(a["clipped_per_family_end"])):
                t = a["train_per_family"].get(fam) or {}
                rows.append(
                    [
                        m,
                        fam,
                        _stat(t.get("groups") or {}, n, digits=1),
                        _stat(t.get("flat_low") or {}, n, pct=True),
                        _stat(t.get("flat_high") or {}, n, pct=True),
                        _stat(t.get("clipped") or {}, n, pct=True),
                        _stat(a["clipped_per_family_end"].get(fam) or {}, n, pct=True),
                    ]
                )
        lines += _table(
            [
                "method",
                "family",
                "groups drawn",
                "flat, all low",
                "flat, all high",
                "clipped (training)",
                "clipped (test)",
            ],
            rows,
        )
        lines.append("")
    return lines


def _pair(a: float | None, b: float | None, pct: bool = False) -> str:
    return f"{_num(a, 2, pct)} / {_num(b, 2, pct)}"


def _fault_lines(fc: dict[str, Any] | None) -> list[str]:
    if not fc or not fc["families"]:
        return []
    roles = [r for r in ("fixed", "oracle") if fc.get(r)]
    lines = [
        "## Fault check: " + " and ".join(fc[r] for r in roles) + " per family",
        "",
        "Does each injected failure show where it should? Training: the share of a family's groups flat at a "
        "uniformly low / high reward. Test: proxy / gold score (seed means) at step 0 and at the end."
        + (
            " *Oracle − fixed*: gold at the end, mean ± std of the per-seed differences; *beyond spread*: whether "
            "the mean is larger than that std (n/a from one seed)."
            if len(roles) == 2
            else ""
        ),
        "",
    ]
    header = ["family", "injected failure"]
    for r in roles:
        header += [f"{fc[r]}: flat low / high", f"{fc[r]}: proxy / gold @ 0", f"{fc[r]}: proxy / gold @ end"]
    if len(roles) == 2:
        header += ["oracle − fixed (gold @ end)", "beyond spread"]
    rows = []
    for row in fc["families"]:
        cells = [row["family"], row.get("failure") or "n/a"]
        for r in roles:
            x = row[r]
            cells += [
                _pair(x["flat_low"], x["flat_high"], pct=True),
                _pair(x["proxy_start"], x["gold_start"]),
                _pair(x["proxy_end"], x["gold_end"]),
            ]
        if len(roles) == 2:
            d = row["oracle_minus_fixed"]
            beyond = d["exceeds_spread"]
            cells += [
                _stat(d, d["n"], signed=True) + (f" (n={d['n']})" if d["n"] and d["std"] is None else ""),
                "n/a" if beyond is None else ("yes" if beyond else "no"),
            ]
        rows.append(cells)
    return [*lines, *_table(header, rows), ""]


MEASURES = (
    ("test_at_best", "test @ best val"),
    ("test_end", "test @ end"),
    ("test_at_equal_rollouts", "test @ equal rollouts"),
    ("steps_to_best", "steps to best"),
)

SAMPLED_MEASURES = ("test_at_best", "test_end")
"""The measures whose scores carry a sampling standard error (an evaluation's own)."""


def _bound_lines(bound: dict[str, Any] | None) -> list[str]:
    """The oracle against the best baseline: what a harness arm could show against it at these seeds."""
    if not bound:
        return []

    def cell(d: dict[str, Any]) -> str:
        return f"{_stat(d, d['n'], signed=True)}, 95% over seeds {_interval(d.get('ci95'))} ({d['verdict']})"

    return [
        f"**The bound.** {bound['oracle']} − {bound['baseline']} (the best baseline), paired by seed: at the best "
        f"checkpoint {cell(bound['test_at_best'])}; at the end {cell(bound['test_end'])}. The oracle trains on the "
        "gold rubrics, the bound of any rubric repair: where its interval reaches below 0, a harness arm's interval "
        "against the best baseline clearing 0 at these seeds would take more than repairing the rubrics.",
        "",
    ]


def _comparison_lines(comps: list[dict[str, Any]], agg: dict[str, Any]) -> list[str]:
    if not comps:
        return [
            "No comparison: the bench needs a harness arm (a method run with `method: harnessrl`) and a baseline "
            "(the oracle is the bound, not a baseline)."
        ]
    lines = [
        "Paired by seed, harness minus baseline: a positive score difference and a negative steps difference "
        "favour the harness. Each cell is the mean ± std of the per-seed differences.",
        "",
    ]
    rows = []
    for c in comps:
        rows.append(
            [
                f"{c['harness']} − {c['baseline']}" + (" (best baseline)" if c.get("best_baseline") else ""),
                str(c["test_at_best"]["n"]),
                _stat(c["test_at_best"], c["test_at_best"]["n"], signed=True),
                _stat(c["test_end"], c["test_end"]["n"], signed=True),
                _stat(c["test_at_equal_rollouts"], c["test_at_equal_rollouts"]["n"], signed=True),
                _stat(c["steps_to_best"], c["steps_to_best"]["n"], digits=1, signed=True),
                _num(c["steps_to_best"]["ratio_of_means"], 2),
            ]
        )
    lines += _table(
        [
            "pair",
            "seeds",
            "Δ test @ best val",
            "Δ test @ end",
            "Δ test @ equal rollouts",
            "Δ steps to best",
            "steps-to-best ratio",
        ],
        rows,
    )
    # runs whose evaluations sample answers say how much of a difference is that draw (older reports: no column)
    sampled = any(c[k].get("sampling_sd") is not None for c in comps for k in SAMPLED_MEASURES)
    lines += [
        "",
        "**Intervals.** *Over seeds*: the 95% t-interval of the mean per-seed difference (seed variation; n/a from "
        "one seed). *Over test tasks*: a paired bootstrap (2000 draws, fixed seed) resampling the test tasks, each "
        "task's difference averaged over seeds (task sampling only: it says nothing of seed variation)."
        + (
            " *Answer sampling, a seed*: the sd a seed's difference has from the evaluations' draw of answers alone "
            "(each score's sampling standard error, from its answers' spread within each task); beside the std over "
            "seeds, it says how much of the seeds' spread is the evaluation's draw rather than training's "
            "(`harnessrl eval --completions` draws more)."
            if sampled
            else ""
        ),
        "",
    ]
    rows = []
    for c in comps:
        for key, label in MEASURES:
            d = c[key]
            boot = d.get("bootstrap")
            rows.append(
                [
                    f"{c['harness']} − {c['baseline']}",
                    label,
                    _num(d["mean"], 1 if key == "steps_to_best" else 3, signed=True),
                    _interval(d.get("ci95"), 1 if key == "steps_to_best" else 3),
                    "n/a"
                    if not boot
                    else f"{_num(boot['mean'], signed=True)} [{_num(boot['low'], signed=True)}, "
                    f"{_num(boot['high'], signed=True)}] ({boot['tasks']} tasks{_boot_seeds(boot, d)})",
                    *([f"{_num(d.get('std'))} / {_num(d.get('sampling_sd'))}" if key in SAMPLED_MEASURES else ""]
                      if sampled else []),
                    d["verdict"],
                ]
            )  # fmt: skip
    spread = ["std over seeds / answer sampling, a seed"] if sampled else []
    lines += _table(["pair", "measure", "mean Δ", "95% over seeds", "bootstrap over tasks", *spread, "verdict"], rows)
    lines.append("")
    for c in comps:
        lines.append(
            f"- **{c['harness']} vs {c['baseline']}**: test score at the best-validation checkpoint — "
            f"{c['harness']} {c['test_at_best']['verdict']}; at the end — {c['test_end']['verdict']}; "
            f"at equal rollouts — {c['test_at_equal_rollouts']['verdict']}; "
            f"steps to best — {c['steps_to_best']['verdict']}."
        )
    best = best_baseline(agg)
    if best is not None:
        lines += ["", *_best_baseline_lines(comps, agg, best)]
    return lines


def _boot_seeds(boot: dict[str, Any], d: dict[str, Any]) -> str:
    """The seeds a bootstrap over tasks rests on, where fewer than the paired seeds have per-task scores."""
    seeds = boot.get("seeds") or []
    return f", seeds {', '.join(map(str, seeds))} only" if len(seeds) < (d.get("n") or 0) else ""


def _best_baseline_lines(comps: list[dict[str, Any]], agg: dict[str, Any], best: str) -> list[str]:
    lines = [
        f"**Best baseline: {best}** (highest mean test score at the best-validation checkpoint among "
        f"{', '.join(baselines(agg))}: {_num(agg[best]['test_at_best']['mean'])})."
    ]
    for c in (c for c in comps if c["baseline"] == best):
        d = c["test_at_best"]
        if d["mean"] is None:
            lines.append(f"- {c['harness']} − {best}: no seed has both figures.")
            continue
        side = "above" if d["mean"] > 0 else "below" if d["mean"] < 0 else "level with"
        boot = d.get("bootstrap")
        lines.append(
            f"- {c['harness']} − {best} at the best-validation checkpoint: {_num(d['mean'], signed=True)} "
            f"(95% over seeds {_interval(d.get('ci95'))}"
            + (
                f"; over tasks [{_num(boot['low'], signed=True)}, {_num(boot['high'], signed=True)}]"
                f"{_boot_seeds(boot, d)}"
                if boot
                else ""
            )
            + f"): on the mean the harness is {side} the best baseline; {d['verdict']}."
        )
    return lines


def _ablation_lines(rows: list[dict[str, Any]], agg: dict[str, Any]) -> list[str]:
    """Each ablation arm against its reference: overall, cost, and per family beside the seed spread."""
    if not rows:
        return []
    lines = [
        "## Ablations: each arm against the arm whose settings it changes",
        "",
        "An arm's *reference* is the harness arm of this bench whose settings (bench.json) it keeps, changing the "
        "fewest. Paired by seed, **arm minus reference**: a negative score difference means the reference's "
        "setting (the remedy the arm turns off) helped. Each cell is the mean ± std of the per-seed differences.",
        "",
    ]
    table = []
    for r in rows:
        changes = ", ".join(f"`{k}: {v}`" for k, v in r["changes"].items())
        n = r["test_at_best"]["n"]
        table.append(
            [
                f"{r['arm']} − {r['reference']}",
                changes,
                str(n),
                _stat(r["test_at_best"], n, signed=True),
                _stat(r["test_end"], n, signed=True),
                _stat(r["rollouts_trial"], n, digits=0, signed=True),
                _stat(r["harness_overhead_share"], n, pct=True, signed=True),
            ]
        )
    lines += _table(
        ["pair", "changes", "seeds", "Δ test @ best val", "Δ test @ end", "Δ trial rollouts", "Δ harness overhead"],
        table,
    )
    families = sorted({f for r in rows for key in r["per_family"] for f in r["per_family"][key]})
    failure = {k: v for a in agg.values() for k, v in (a.get("family_failure") or {}).items()}
    for key, title in (("test_at_best", "at the best-validation checkpoint"), ("test_end", "at the end")):
        lines += [
            "",
            f"### Per family, {title}",
            "",
            "Arm minus reference per family (mean ± std over the paired seeds; **bold**: one sign on every seed and "
            "larger than the seed spread). *Seed spread*: the reference's sample std over seeds of the family's "
            "score (n/a from one seed).",
            "",
        ]
        table = [["injected failure", "", *[failure.get(f, "n/a") for f in families]]]
        for r in rows:
            cells = []
            for fam in families:
                d = r["per_family"][key].get(fam)
                text = "n/a" if not d or d["mean"] is None else _stat(d, r[key]["n"], signed=True)
                cells.append(f"**{text}**" if d and d.get("beyond_spread") else text)
            table.append([f"{r['arm']} − {r['reference']}", str(r[key]["n"]), *cells])
        spread_of = {r["reference"]: r["per_family"][key] for r in rows}  # the reference's, whichever arm
        for ref, spread in spread_of.items():
            table.append([f"seed spread of {ref}", "", *[_num((spread.get(f) or {}).get("spread")) for f in families]])
        lines += _table(["pair", "seeds", *families], table)
    lines.append("")
    for r in rows:
        beyond = [
            f"{fam} ({_num(d['mean'], signed=True)})"
            for fam, d in r["per_family"]["test_at_best"].items()
            if d.get("beyond_spread")
        ]
        lines.append(
            f"- **{r['arm']}** (changes {', '.join(r['changes'])} of {r['reference']}): at the best-validation "
            f"checkpoint {r['test_at_best']['verdict']}; families beyond the seed spread: "
            + (", ".join(beyond) if beyond else "none")
            + "."
        )
    return [*lines, ""]


def _oracle_lines(gap: dict[str, Any] | None, agg: dict[str, Any]) -> list[str]:
    if gap is None:
        return []
    lines = [
        "## Oracle gap",
        "",
        f"The share of the {gap['fixed']}→{gap['oracle']} gap each method closes: (method − {gap['fixed']}) / "
        f"({gap['oracle']} − {gap['fixed']}), on seed-mean gold test scores. 1 reaches the oracle (what any rubric "
        f"repair could reach), 0 is no better than {gap['fixed']}, below 0 worse; n/a where the oracle is not "
        f"ahead by at least {gap['min_gap']} (a share of a smaller gap is noise).",
        "",
    ]
    if gap.get("plain"):  # reports made before 2026-12-07 have no such key: their oracle was always plain GRPO
        lines += [
            f"{gap['oracle']} is plain GRPO on the gold rubrics, not the harness's own trainer (DAPO's refill, hints): "
            "a bound for plain GRPO, not a ceiling for the harness; run `oracle-harness` for that (docs/design.md §8).",
            "",
        ]
    if gap.get("note"):
        return [*lines, f"No share: {gap['note']}.", ""]
    others = [m for m in agg if m not in (gap["oracle"], gap["fixed"])]
    for key, title in (("test_at_best", "at the best-validation checkpoint"), ("test_end", "at the end")):
        at = gap["at"][key]
        families = list(at["per_family"])
        cells = {"overall": at["overall"], **at["per_family"]}
        rows = [
            [f"gap ({gap['oracle']} − {gap['fixed']})", *(_num(c["gap"], signed=True) for c in cells.values())],
        ]
        rows += [[m, *(_num(c["shares"].get(m), 2) for c in cells.values())] for m in others]
        lines += [f"### Share of the gap closed, {title}", "", *_table(["", "overall", *families], rows)]
        small = [name for name, c in cells.items() if c["gap"] is not None and c["note"]]
        if small:
            lines += [
                "",
                f"n/a where the oracle is less than {gap['min_gap']} ahead of {gap['fixed']}: {', '.join(small)} "
                "(there training on the gold rubrics gains nothing over the training rubric: a failure there, if "
                "any, shows as flat groups or a wasted budget, not as an oracle gap).",
            ]
        lines.append("")
    if not others:
        lines += [f"(No other method than {gap['fixed']} and {gap['oracle']} yet: only the gaps are shown.)", ""]
    return lines


def _paired_gap_lines(gap: dict[str, Any] | None) -> list[str]:
    """The share of the oracle gap closed per seed (overall and per family), mean ± std over the seeds."""
    if not gap or not any(gap["at"].values()):
        return []
    lines = [
        "## Share of the oracle gap closed, paired by seed",
        "",
        f"Per seed, (method − {gap['fixed']}) / ({gap['oracle']} − {gap['fixed']}) of that seed's gold test scores, "
        f"overall and per family; mean ± std over the seeds where {gap['oracle']} is at least {gap['min_gap']} ahead "
        "of fixed there (n given where fewer seeds than the method's paired ones count). Unlike the share of seed "
        "means above, a seed's share is measured against its own gap.",
        "",
    ]
    for key, title in (("test_at_best", "at the best-validation checkpoint"), ("test_end", "at the end")):
        at = gap["at"].get(key) or {}
        if not at:
            continue
        families = sorted({f for cells in at.values() for f in cells["per_family"]})
        rows = []
        for m, cells in at.items():
            row = [m]
            for c in (cells["overall"], *(cells["per_family"].get(f) or {} for f in families)):
                row.append(_stat(c, len(c.get("per_seed") or {}), digits=2, signed=True) if c else "n/a")
            rows.append(row)
        lines += [f"### {title[0].upper()}{title[1:]}", "", *_table(["method", "overall", *families], rows), ""]
        first = next(iter(at.values()))
        small = [
            f"{name} (seed{'s' if len(c['seeds_without_gap']) > 1 else ''} {', '.join(c['seeds_without_gap'])})"
            for name, c in (("overall", first["overall"]), *first["per_family"].items())
            if c["seeds_without_gap"]
        ]
        if small:
            lines += [
                f"Seeds where {gap['oracle']} is not {gap['min_gap']} ahead of {gap['fixed']}: {'; '.join(small)}.",
                "",
            ]
    return lines


def _family_curve_lines(curves: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Each family's test score at each evaluation step for fixed, the oracle and the harness arms."""
    if not curves:
        return []
    steps = sorted({p["step"] for per in curves.values() for points in per.values() for p in points})
    rows = []
    for fam, per_method in curves.items():
        for m, points in per_method.items():
            at, seeds = {p["step"]: p for p in points}, max(p["n"] for p in points)
            rows.append([fam, m, *(_stat(at[s], seeds) if s in at else "n/a" for s in steps)])
    return [
        "## Test score per family over training",
        "",
        "Per family, the test score (gold where graded with gold) at each evaluation step, mean ± std over the "
        "seeds evaluated there (n where fewer than the most): fixed, the oracle and each harness arm (plot "
        "`gold_per_family.png`).",
        "",
        *_table(["family", "method", *(f"step {s}" for s in steps)], rows),
        "",
    ]


def _seed_repair(s: str, f: dict[str, Any]) -> str:
    """One seed's repair figures as ``seed: detected→committed (remedy), repaired/after``."""
    detected = "—" if f["first_detection"] is None else str(f["first_detection"])
    committed = "—" if f["first_commit"] is None else f"{f['first_commit']} ({f['first_commit_name']})"
    reach = "" if f["groups_after_detection"] is None else f", {f['repaired_groups']}/{f['groups_after_detection']}"
    on, back = f.get("probation_commits") or 0, f.get("reverts") or 0
    probation = f" ({on} on probation, {back} reverted)" if on or back else ""
    return f"{s}: {detected}→{committed}{reach}{probation}"


def _repair_lines(repairs: dict[str, Any]) -> list[str]:
    """Per harness arm and family: first detection, first commit, reach, over seeds and per seed."""
    if not repairs:
        return []
    lines = [
        "## Repairs per family",
        "",
        "From each run's events and trained groups. *First detection*: the step of the first failure detected on "
        "a task of the family (or of a rubric audit naming one). *First commit*: the step from which the first "
        "committed update changing a task of the family applies. *Reach*: of the family's trained groups after the "
        "first detection, the share graded by a repaired rubric (rubric version > 0) or trained under a committed "
        "guidance (guided > 0). Mean ± std over the seeds that have the figure (n where fewer). *Per seed*: "
        "`seed: detection→first commit (interface:remedy), repaired/trained groups after the detection`.",
        "",
    ]
    seeds = [f for a in repairs.values() for d in a["families"].values() for f in d["per_seed"].values()]
    if any(f.get("probation_commits") or f.get("reverts") for f in seeds):
        lines[-1:-1] = [
            "",
            "A repair on probation counts in reach only until a revert takes it back; where a family had any, the "
            "per-seed figures end with how many of its commits were on probation and how many probations ended "
            "reverted.",
        ]
    for arm, a in repairs.items():
        n = len(a["seeds"])
        rows = []
        for fam, d in a["families"].items():
            rows.append(
                [
                    fam,
                    d.get("failure") or "n/a",
                    _stat(d["first_detection"], n, digits=1),
                    _stat(d["first_commit"], n, digits=1),
                    f"{d['seeds_with_commit']} of {n}",
                    _stat(d["reach"], n, pct=True),
                    _stat(d["rubric_commits"], n, digits=1),
                    "; ".join(_seed_repair(s, f) for s, f in d["per_seed"].items()),
                ]
            )
        header = ["family", "injected failure", "first detection", "first commit", "seeds with a commit", "reach"]
        lines += [
            f"### {arm} ({n} seed(s))",
            "",
            *_table([*header, "rubric commits", "per seed"], rows),
            "",
        ]
    return lines


def _unnecessary_lines(clean: dict[str, Any] | None) -> list[str]:
    """The clean variant's rubric commits, each unnecessary (training rubric = gold), beside the score."""
    if not clean:
        return []
    fixed = clean.get("fixed") or "fixed"
    lines = [
        "## Unnecessary commits: rubric repairs where the training rubric is gold",
        "",
        "These runs train on the gold rubrics (`data.train_rubric: gold`): no rubric fails, so every rubric commit "
        "is unnecessary (a false accept of the critic). Per harness run: how many, per family, and its gold test "
        f"score minus {fixed}'s of the same seed.",
        "",
    ]
    rows = [
        [
            f"{r['method']}/seed{r['seed']}",
            str(r["rubric_commits"]),
            ", ".join(f"{f} ×{k}" for f, k in r["per_family"].items()) or "none",
            _num(r["vs_fixed"]["test_at_best"], signed=True),
            _num(r["vs_fixed"]["test_end"], signed=True),
        ]
        for r in clean["runs"]
    ]
    lines += _table(
        ["run", "rubric commits", "per family", f"Δ test @ best val vs {fixed}", f"Δ test @ end vs {fixed}"], rows
    )
    lines.append("")
    for arm, a in clean["per_arm"].items():
        st = a["rubric_commits"]
        per_family = ", ".join(f"{f} ×{k}" for f, k in a["per_family"].items()) or "none"
        lines.append(
            f"- **{arm}**: {_stat(st, st['n'], digits=1)} rubric commits a run; summed by family: {per_family}."
        )
    commits = [(r, c) for r in clean["runs"] for c in r["commits"]]
    if commits:
        lines += ["", "What each added:", ""]
        for r, c in commits:
            added = "; ".join(f'"{t}"' for t in c["added"]) or "no criterion (a reword, reweight or removal)"
            lines.append(
                f"- {r['method']}/seed{r['seed']}, from step {c['step']}, {c['remedy']} on "
                f"{', '.join(c['tasks']) or 'n/a'} ({', '.join(c['families']) or 'n/a'}): {added}"
            )
    return [*lines, ""]


def _decision_lines(agg: dict[str, Any]) -> list[str]:
    """Per harness arm and family: what it committed (interface and remedy), what the critic refused and why,
    the failures it gave up; summed over the seeds (read from the runs' events)."""
    lines: list[str] = []
    for m, a in agg.items():
        decisions = a.get("harness_decisions") or {}
        if not is_harness_arm(m, agg) or not decisions:
            continue
        if not lines:
            lines += [
                "## What the harness did, per family",
                "",
                "Summed over the seeds, from each run's events: the updates committed (interface: remedy), the "
                "candidates the critic rejected (by the kind of reason), and the failures given up.",
                "",
            ]
        rows = []
        if any("(on probation)" in k or k.endswith(":revert") for d in decisions.values() for k in d["commits"]):
            lines += [
                "*On probation*: a hint (or a rubric check with the hint that states it) committed without fresh "
                "rollouts, measured on its training groups (guided "
                "and unguided members the two arms) and kept or reverted by them; `:revert` the end of one whose "
                "groups gave no signal.",
                "",
            ]
        for fam, d in decisions.items():
            commits = ", ".join(f"{k} ×{n}" for k, n in sorted(d["commits"].items())) or "none"
            rejected = ", ".join(f"{k} ×{n}" for k, n in sorted(d["rejected"].items(), key=lambda x: -x[1])) or "none"
            rows.append([fam, commits, rejected, str(d["gave_up"])])
        lines += [
            f"### {m} ({len(a['seeds'])} seed(s))",
            "",
            *_table(["family", "committed", "rejected", "given up"], rows),
            "",
            *_trial_cost_lines(a),
        ]
    return lines


def _trial_cost_lines(a: dict[str, Any]) -> list[str]:
    """One harness arm's trials by remedy, summed over its seeds, against the rollouts its training generated."""
    costs = a.get("trial_costs") or {}
    if not costs:
        return []
    generated = a["rollouts_generated"]
    trained = generated["mean"] * generated["n"] if generated.get("mean") is not None else None
    rows = []
    for name, d in sorted(costs.items(), key=lambda kv: -kv[1]["rollouts"]):
        rows.append(
            [
                name,
                f"{d['trials']:.0f}",
                f"{d['accepted']:.0f}",
                f"{d['rollouts']:,.0f}",
                _num(d["rollouts"] / trained, pct=True) if trained else "n/a",
                f"{d['judge_calls']:,.0f}",
                _num(d["seconds"] / 60, 1),
            ]
        )
    return [
        "Its critic's trials by remedy (summed over the seeds): the rollouts they generated, also as a share of the "
        "rollouts training generated"
        + (f" ({trained:,.0f})" if trained else "")
        + ", the judge calls and the minutes they took.",
        "",
        *_table(["remedy", "trials", "accepted", "trial rollouts", "of training's", "judge calls", "minutes"], rows),
        "",
    ]


def _misfire_lines(figures: list[RunFigures], agg: dict[str, Any]) -> list[str]:
    """The misfires the reference evidence exists to prevent, summed over each harness arm's runs."""
    arms = [m for m in agg if runs_evolver(m, agg)]
    rows = []
    for m in arms:
        counted = [f.misfires for f in figures if f.method == m and f.misfires]
        if counted:
            rows.append([m, str(len(counted)), *(str(sum(c.get(k, 0) for c in counted)) for k in MISFIRES)])
    if not rows:
        return []
    return [
        "## Misfires on failures no prompt states",
        "",
        'Summed over each arm\'s runs (docs/design.md §4, "The reference as witness"): guidance commits whose hint '
        "quotes a criterion the task's own reference fails; tasks retired as solved while their rubric asked for none "
        "of the key terms their reference states; reverts that removed a check of a requirement the prompt states.",
        "",
        *_table(
            ["method", "runs", "guidance toward a suspect", "retired, reference unmet", "stated check reverted"], rows
        ),
        "",
    ]


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


def _sources_line(results: dict[str, Any]) -> str:
    """Where the runs come from: the bench folders, and the committed reports whose rows were taken."""
    dirs, files = results["bench_dirs"], results.get("row_files") or []
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
    configs = results.get("bench_configs") or ([results["bench_config"]] if results.get("bench_config") else [])
    if len(configs) > 1:  # one benchmark from several files: they train the same (only how they ran differs)
        return "; ".join(parts) + ", configs " + ", ".join(f"`{c}`" for c in configs) + " (they train the same)"
    return "; ".join(parts) + (f", config `{configs[0]}`" if configs else "")


def _markdown(results: dict[str, Any]) -> str:
    """results.md from results.json's content (its runs read back through :class:`RunFigures`)."""
    agg, figures = results["methods"], [RunFigures.model_validate(r) for r in results["runs"]]
    lines = [
        "# Benchmark results",
        "",
        _sources_line(results) + f"; report made {results['generated']}.",
        f"{len(figures)} run(s), {sum(f.complete for f in figures)} finished. Methods: {', '.join(agg)}"
        + (f" (harness arms: {', '.join(results['harness_arms'])})" if results["harness_arms"] else "")
        + (f"; the bound: {', '.join(results['oracles'])}" if results["oracles"] else "")
        + ".",
        "",
    ]
    if results["notes"]:
        lines += ["**Read with care:**", ""] + [f"- {n}" for n in results["notes"]] + [""]
    lines += _headline(agg)
    lines += _equal_cost_lines(figures, agg)
    lines += ["", *_cost_table(agg)]
    for where, title in (
        ("test_at_best_per_domain", "at the best-validation checkpoint"),
        ("test_end_per_domain", "at the end"),
    ):
        lines += _per_group_table(agg, where, f"## Test score per domain, {title}")
    lines += _family_lines(agg)
    lines += _fault_lines(results["fault_check"])
    lines += ["## HarnessRL against each baseline", "", *_comparison_lines(results["comparisons"], agg), ""]
    lines += _bound_lines(results.get("oracle_bound"))
    lines += _ablation_lines(results.get("ablations") or [], agg)
    lines += _oracle_lines(results["oracle_gap"], agg)
    lines += _paired_gap_lines(results.get("oracle_gap_paired"))
    lines += _family_curve_lines(results.get("family_curves") or {})
    lines += _repair_lines(results.get("family_repairs") or {})
    lines += _unnecessary_lines(results.get("unnecessary_commits"))
    lines += _decision_lines(agg)
    lines += _misfire_lines(figures, agg)
    lines += _test_split_lines(results.get("test_split_arms") or {})
    lines += ["## Plots", ""]
    for name, rel in results["plots"].items():
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
    empty: dict[str, Any] = {"bench_config": None, "methods": {}, "runs": {}}
    runs, manifest = load_benches(roots, same_benchmark) if roots else ([], empty)
    dest = Path(out) if out is not None else roots[0]
    figures = [run_figures(r).model_copy(update={"path": _shown(r.path)}) for r in runs]
    taken, manifest = merge_rows(figures, manifest, rows, rows_methods, shown=_shown, same=same_benchmark)
    dest.mkdir(parents=True, exist_ok=True)
    figures = with_equal_cost([*figures, *taken])
    agg = aggregate(figures, list((manifest.get("methods") or {}).keys()))
    repairs = family_repairs(runs, agg)
    curves = family_curves(runs, agg, taken)
    plot_paths = write_plots(runs, agg, dest / "plots", repairs=repairs, curves=curves) if plots and runs else {}
    results: dict[str, Any] = {
        "bench_dir": ", ".join(_shown(r) for r in roots),
        "bench_dirs": [_shown(r) for r in roots],
        "row_files": [_shown(r) for r in rows],
        "bench_config": manifest.get("bench_config"),
        "bench_configs": manifest.get("bench_configs") or [],
        "method_settings": manifest.get("methods") or {},
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "harness_arms": [m for m in agg if is_harness_arm(m, agg)],
        "oracles": [m for m in agg if is_oracle(m, agg)],
        "baselines": baselines(agg),
        "best_baseline": best_baseline(agg),
        "methods": agg,
        "comparisons": compare(agg, figures),
        "ablations": ablations(agg, manifest.get("methods") or {}),
        "oracle_gap": oracle_gap(agg),
        "oracle_gap_paired": oracle_gap_paired(agg),
        "oracle_bound": oracle_bound(agg),
        "family_curves": curves,
        "family_repairs": repairs,
        "unnecessary_commits": unnecessary_commits(runs, agg),
        "fault_check": fault_check(agg),
        "test_split_arms": arms_scored(dest.parent, split_families(figures), list(agg), dest.name),
        "runs": [f.to_row() for f in figures],
        "notes": _notes(figures, agg, manifest) + _row_notes(figures, agg, bool(plots)),
        "plots": {name: os.path.relpath(p, dest) for name, p in plot_paths.items()},
    }
    results = _finite(results)
    md = dest / "results.md"
    md.write_text(_markdown(results), encoding="utf-8")
    js = dest / "results.json"
    js.write_text(json.dumps(results, indent=1, default=str, allow_nan=False), encoding="utf-8")
    return BenchReport(markdown=md, json=js, plots=plot_paths, results=results)


def print_results(report: BenchReport, console: Console) -> None:
    """The scores table and the comparisons' verdicts in the terminal."""
    agg = report.results["methods"]
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
        n = len(a["seeds"])
        t.add_row(
            m,
            str(n),
            _stat(a["test_at_best"], n),
            _stat(a["test_end"], n),
            _stat(a["test_at_equal_rollouts"], n),
            _stat(a["proxy_test_end"], n),
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
    for r in report.results.get("ablations") or []:
        beyond = [f for f, d in r["per_family"]["test_at_best"].items() if d.get("beyond_spread")]
        console.print(
            f"ablation {r['arm']} − {r['reference']} ({', '.join(r['changes'])}): test @ best val "
            f"{_stat(r['test_at_best'], r['test_at_best']['n'], signed=True)}, {r['test_at_best']['verdict']}; "
            f"families beyond the seed spread: {', '.join(beyond) or 'none'}",
            highlight=False,
        )
    gap = report.results.get("oracle_gap")
    if gap and gap.get("at"):
        shares = gap["at"]["test_at_best"]["overall"]["shares"]
        if shares:
            console.print(
                f"share of the {gap['fixed']}→{gap['oracle']} gap closed (test @ best val): "
                + ", ".join(f"{m} {_num(v, 2)}" for m, v in shares.items()),
                highlight=False,
            )
    for n in report.results["notes"]:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    plots_dir = report.markdown.parent / "plots"
    console.print(f"results: {report.markdown}, {report.json}; plots in {plots_dir}")
