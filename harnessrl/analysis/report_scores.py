"""The report's per-method sections: the scores table, the scores at equal rollouts, the learning signal
and cost table, the scores per domain and per family (gold beside proxy, training per family), and the fault
check of fixed and the oracle per family."""

from __future__ import annotations

from harnessrl.analysis.aggregates import Aggregates, Stat
from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.report_format import Column, _num, _pair, _stat, _stat_cells, _table
from harnessrl.analysis.results_file import FaultCheck, FaultFigures, OracleMinusFixed

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


def _grading_line(agg: Aggregates) -> str:
    graded = {a.graded_with for a in agg.values()} - {None}
    if graded == {"gold"}:
        return (
            "Test scores are graded with the tasks' **gold rubrics** (what the prompt truly asks, never seen in "
            "training); *proxy* is the same completions graded with the training rubric (version 0)."
        )
    if graded == {"rubric"}:
        return "Test scores are graded with the tasks' rubric version 0 (no gold rubrics in these runs)."
    return "Test scores: " + ", ".join(f"{m} graded with {a.graded_with}" for m, a in agg.items()) + "."


def _headline(agg: Aggregates) -> list[str]:
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
        [m, f"{len(a.seeds)} ({len(a.complete_seeds)} finished)", *_stat_cells(a, SCORE_COLUMNS)]
        for m, a in agg.items()
    ]
    return lines + _table(["method", "seeds", *(c.header for c in SCORE_COLUMNS)], rows)


def _equal_cost_lines(figures: list[RunFigures], agg: Aggregates) -> list[str]:
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


def _cost_table(agg: Aggregates) -> list[str]:
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


def _per_group_table(agg: Aggregates, where: str, title: str, note: str = "") -> list[str]:
    groups = sorted({d for a in agg.values() for d in a.per_group(where)})
    if not groups:
        return []
    lines = [title, ""] + ([note, ""] if note else [])
    rows = [[m] + [_stat(a.per_group(where).get(d), len(a.seeds)) for d in groups] for m, a in agg.items()]
    return [*lines, *_table(["method", *groups], rows), ""]


def _mean(st: Stat | None) -> float | None:
    return st.mean if st is not None else None


def _family_lines(agg: Aggregates) -> list[str]:
    families = sorted({d for a in agg.values() for d in a.test_end_per_family})
    train_families = sorted({d for a in agg.values() for d in a.train_per_family})
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
            p = _mean(a.proxy_test_end_per_family.get(fam))
            g = _mean(a.test_end_per_family.get(fam))
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
            n = len(a.seeds)
            for fam in sorted(set(a.train_per_family) | set(a.clipped_per_family_end)):
                t = a.train_per_family.get(fam)
                rows.append(
                    [
                        m,
                        fam,
                        _stat(t.groups if t else None, n, digits=1),
                        _stat(t.flat_low if t else None, n, pct=True),
                        _stat(t.flat_high if t else None, n, pct=True),
                        _stat(t.clipped if t else None, n, pct=True),
                        _stat(a.clipped_per_family_end.get(fam), n, pct=True),
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


def _fault_lines(fc: FaultCheck | None) -> list[str]:
    if not fc or not fc.families:
        return []
    names = {r: name for r, name in (("fixed", fc.fixed), ("oracle", fc.oracle)) if name}
    roles = list(names)
    lines = [
        "## Fault check: " + " and ".join(names.values()) + " per family",
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
        header += [f"{names[r]}: flat low / high", f"{names[r]}: proxy / gold @ 0", f"{names[r]}: proxy / gold @ end"]
    if len(roles) == 2:
        header += ["oracle − fixed (gold @ end)", "beyond spread"]
    rows = []
    for row in fc.families:
        cells = [row.family, row.failure or "n/a"]
        for r in roles:
            x = row.role(r) or FaultFigures()
            cells += [
                _pair(x.flat_low, x.flat_high, pct=True),
                _pair(x.proxy_start, x.gold_start),
                _pair(x.proxy_end, x.gold_end),
            ]
        if len(roles) == 2:
            d = row.oracle_minus_fixed or OracleMinusFixed()
            beyond = d.exceeds_spread
            cells += [
                _stat(d, d.n, signed=True) + (f" (n={d.n})" if d.n and d.std is None else ""),
                "n/a" if beyond is None else ("yes" if beyond else "no"),
            ]
        rows.append(cells)
    return [*lines, *_table(header, rows), ""]
