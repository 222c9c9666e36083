"""The report's *Read with care* notes: failed, unfinished or too few runs, held-out sets that both choose
and report, differing grading, best checkpoints at the last step, the oracle as a bound; and, for runs taken
from committed reports' rows, which figures those rows cannot give."""

from __future__ import annotations

from harnessrl.analysis.aggregates import Aggregates
from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.results import FIXED_METHOD, _reference, is_harness_arm, is_oracle, oracle_method
from harnessrl.records.bench_files import BenchManifest


def _notes(figures: list[RunFigures], agg: Aggregates, manifest: BenchManifest) -> list[str]:
    notes = []
    failed = [
        f"{key} ({row.error.splitlines()[0] if row.error else row.status})"
        for key, row in manifest.runs.items()
        if row.status in ("failed", "interrupted")
    ]
    if failed:
        notes.append(f"Runs that failed or were interrupted (see bench.json and their logs): {', '.join(failed)}.")
    empty = [m for m, a in agg.items() if not a.seeds]
    if empty:
        notes.append(f"No run of {', '.join(empty)} has recorded anything: they have no figures.")
    few = [f"{m} ({len(a.seeds)})" for m, a in agg.items() if 0 < len(a.seeds) < 3]
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
    graded = {m: a.graded_with for m, a in agg.items() if a.graded_with}
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
        counts = ", ".join(f"{m} {at_end[m]} of {len(agg[m].seeds)}" for m in agg if m in at_end)
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


def _row_notes(figures: list[RunFigures], agg: Aggregates, plots: bool) -> list[str]:
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
