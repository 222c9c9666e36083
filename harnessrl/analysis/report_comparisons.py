"""The report's comparisons: each harness arm against each baseline (paired by seed, with intervals over
seeds and over test tasks), the best baseline, the bound (the oracle against the best baseline), the
ablations against their reference arm, and the share of the oracle gap each method closes (of seed means,
and paired by seed)."""

from __future__ import annotations

from harnessrl.analysis.aggregates import Aggregates, PairedScore, Stat
from harnessrl.analysis.report_format import _interval, _num, _stat, _table
from harnessrl.analysis.results import baselines, best_baseline_choice
from harnessrl.analysis.results_file import (
    Ablation,
    Bootstrap,
    ComparedScore,
    Comparison,
    OracleBound,
    OracleGap,
    PairedGap,
)

MEASURES = (
    ("validation_best", "best validation (what arms are chosen on)"),
    ("test_at_best", "test @ best val"),
    ("test_end", "test @ end"),
    ("test_at_equal_rollouts", "test @ equal rollouts"),
    ("steps_to_best", "steps to best"),
)

SAMPLED_MEASURES = ("test_at_best", "test_end")
"""The measures whose scores carry a sampling standard error (an evaluation's own)."""


def _bound_lines(bound: OracleBound | None) -> list[str]:
    """The oracle against the best baseline: what a harness arm could show against it at these seeds."""
    if not bound:
        return []

    def cell(d: PairedScore) -> str:
        return f"{_stat(d, d.n, signed=True)}, 95% over seeds {_interval(d.ci95)} ({d.verdict})"

    return [
        f"**The bound.** {bound.oracle} − {bound.baseline} (the best baseline), paired by seed: at the best "
        f"checkpoint {cell(bound.test_at_best)}; at the end {cell(bound.test_end)}. The oracle trains on the "
        "gold rubrics, the bound of any rubric repair: where its interval reaches below 0, a harness arm's interval "
        "against the best baseline clearing 0 at these seeds would take more than repairing the rubrics.",
        "",
    ]


def _comparison_lines(
    comps: list[Comparison], agg: Aggregates, best: str | None, best_by: str | None = "test_at_best"
) -> list[str]:
    """The comparisons against each baseline; ``best`` is the report's best baseline, chosen on ``best_by`` (its
    results.json's ``best_baseline_by``: reports before 2026-12-07 have none and chose on ``test_at_best``)."""
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
                f"{c.harness} − {c.baseline}" + (" (best baseline)" if c.best_baseline else ""),
                str(c.test_at_best.n),
                _stat(c.test_at_best, c.test_at_best.n, signed=True),
                _stat(c.test_end, c.test_end.n, signed=True),
                _stat(c.test_at_equal_rollouts, c.test_at_equal_rollouts.n, signed=True),
                _stat(c.steps_to_best, c.steps_to_best.n, digits=1, signed=True),
                _num(c.steps_to_best.ratio_of_means, 2),
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
    sampled = any(_sampling_sd(c.measure(k)) is not None for c in comps for k in SAMPLED_MEASURES)
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
            d = c.measure(key)
            if d is None:  # an older report's comparison (no validation row)
                continue
            boot = _bootstrap(d)
            rows.append(
                [
                    f"{c.harness} − {c.baseline}",
                    label,
                    _num(d.mean, 1 if key == "steps_to_best" else 3, signed=True),
                    _interval(d.ci95, 1 if key == "steps_to_best" else 3),
                    "n/a"
                    if not boot
                    else f"{_num(boot.mean, signed=True)} [{_num(boot.low, signed=True)}, "
                    f"{_num(boot.high, signed=True)}] ({boot.tasks} tasks{_boot_seeds(boot, d)})",
                    *([f"{_num(d.std)} / {_num(_sampling_sd(d))}" if key in SAMPLED_MEASURES else ""]
                      if sampled else []),
                    d.verdict,
                ]
            )  # fmt: skip
    spread = ["std over seeds / answer sampling, a seed"] if sampled else []
    lines += _table(["pair", "measure", "mean Δ", "95% over seeds", "bootstrap over tasks", *spread, "verdict"], rows)
    lines.append("")
    for c in comps:
        lines.append(
            f"- **{c.harness} vs {c.baseline}**: test score at the best-validation checkpoint — "
            f"{c.harness} {c.test_at_best.verdict}; at the end — {c.test_end.verdict}; "
            f"at equal rollouts — {c.test_at_equal_rollouts.verdict}; "
            f"steps to best — {c.steps_to_best.verdict}."
        )
    if best is not None:
        lines += ["", *_best_baseline_lines(comps, agg, best, best_by)]
    return lines


def _bootstrap(d: PairedScore) -> Bootstrap | None:
    """A compared score's bootstrap over tasks (steps to best have none)."""
    return d.bootstrap if isinstance(d, ComparedScore) else None


def _sampling_sd(d: PairedScore | None) -> float | None:
    """A compared score's sd from answer sampling (None: not a test score, or not recorded)."""
    return d.sampling_sd if isinstance(d, ComparedScore) else None


def _boot_seeds(boot: Bootstrap, d: Stat) -> str:
    """The seeds a bootstrap over tasks rests on, where fewer than the paired seeds have per-task scores."""
    return f", seeds {', '.join(map(str, boot.seeds))} only" if len(boot.seeds) < d.n else ""


def _best_baseline_lines(comps: list[Comparison], agg: Aggregates, best: str, on: str | None) -> list[str]:
    chosen = (
        "highest mean best validation score, the split arms are chosen on, "
        if on == "validation_best"
        else "highest mean test score at the best-validation checkpoint "
    )
    choice = best_baseline_choice(agg) if on == "validation_best" else None
    score, seeds = (choice.score, choice.seeds) if choice and choice.method == best else (agg[best].figure(on).mean, [])
    fewer = any(len(agg[m].per_seed) > len(seeds) for m in baselines(agg)) and seeds
    over = f" over seeds {', '.join(map(str, seeds))}, the ones every baseline has" if fewer else ""
    lines = [f"**Best baseline: {best}** ({chosen}among {', '.join(baselines(agg))}{over}: {_num(score)})."]
    for c in (c for c in comps if c.baseline == best):
        v = c.validation_best
        if v is not None and v.mean is not None:
            lines.append(
                f"- {c.harness} − {best} on validation (best validation score): {_num(v.mean, signed=True)} "
                f"(95% over seeds {_interval(v.ci95)}): {v.verdict}."
            )
        d = c.test_at_best
        if d.mean is None:
            lines.append(f"- {c.harness} − {best}: no seed has both figures.")
            continue
        side = "above" if d.mean > 0 else "below" if d.mean < 0 else "level with"
        boot = d.bootstrap
        lines.append(
            f"- {c.harness} − {best} at the best-validation checkpoint: {_num(d.mean, signed=True)} "
            f"(95% over seeds {_interval(d.ci95)}"
            + (
                f"; over tasks [{_num(boot.low, signed=True)}, {_num(boot.high, signed=True)}]{_boot_seeds(boot, d)}"
                if boot
                else ""
            )
            + f"): on the mean the harness is {side} the best baseline; {d.verdict}."
        )
    return lines


def _ablation_lines(rows: list[Ablation], agg: Aggregates) -> list[str]:
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
        changes = ", ".join(f"`{k}: {v}`" for k, v in r.changes.items())
        n = r.test_at_best.n
        table.append(
            [
                f"{r.arm} − {r.reference}",
                changes,
                str(n),
                _stat(r.test_at_best, n, signed=True),
                _stat(r.test_end, n, signed=True),
                _stat(r.rollouts_trial, n, digits=0, signed=True),
                _stat(r.harness_overhead_share, n, pct=True, signed=True),
            ]
        )
    lines += _table(
        ["pair", "changes", "seeds", "Δ test @ best val", "Δ test @ end", "Δ trial rollouts", "Δ harness overhead"],
        table,
    )
    families = sorted({f for r in rows for per in r.per_family.values() for f in per})
    failure = {k: v for a in agg.values() for k, v in a.family_failure.items()}
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
                d = r.per_family[key].get(fam)
                text = "n/a" if not d or d.mean is None else _stat(d, r.score(key).n, signed=True)
                cells.append(f"**{text}**" if d and d.beyond_spread else text)
            table.append([f"{r.arm} − {r.reference}", str(r.score(key).n), *cells])
        spread_of = {r.reference: r.per_family[key] for r in rows}  # the reference's, whichever arm
        for ref, spread in spread_of.items():
            table.append(
                [f"seed spread of {ref}", "", *[_num(d.spread if (d := spread.get(f)) else None) for f in families]]
            )
        lines += _table(["pair", "seeds", *families], table)
    lines.append("")
    for r in rows:
        beyond = [
            f"{fam} ({_num(d.mean, signed=True)})" for fam, d in r.per_family["test_at_best"].items() if d.beyond_spread
        ]
        lines.append(
            f"- **{r.arm}** (changes {', '.join(r.changes)} of {r.reference}): at the best-validation "
            f"checkpoint {r.test_at_best.verdict}; families beyond the seed spread: "
            + (", ".join(beyond) if beyond else "none")
            + "."
        )
    return [*lines, ""]


def _oracle_lines(gap: OracleGap | None, agg: Aggregates) -> list[str]:
    if gap is None:
        return []
    lines = [
        "## Oracle gap",
        "",
        f"The share of the {gap.fixed}→{gap.oracle} gap each method closes: (method − {gap.fixed}) / "
        f"({gap.oracle} − {gap.fixed}), on seed-mean gold test scores. 1 reaches the oracle (what any rubric "
        f"repair could reach), 0 is no better than {gap.fixed}, below 0 worse; n/a where the oracle is not "
        f"ahead by at least {gap.min_gap} (a share of a smaller gap is noise).",
        "",
    ]
    if gap.plain:  # reports made before 2026-12-07 have no such key: their oracle was always plain GRPO
        lines += [
            f"{gap.oracle} is plain GRPO on the gold rubrics, not the harness's own trainer (DAPO's refill, hints): "
            "a bound for plain GRPO, not a ceiling for the harness; run `oracle-harness` for that (docs/design.md §8).",
            "",
        ]
    if gap.note:
        return [*lines, f"No share: {gap.note}.", ""]
    others = [m for m in agg if m not in (gap.oracle, gap.fixed)]
    for key, title in (("test_at_best", "at the best-validation checkpoint"), ("test_end", "at the end")):
        at = gap.at[key]
        families = list(at.per_family)
        cells = {"overall": at.overall, **at.per_family}
        rows = [
            [f"gap ({gap.oracle} − {gap.fixed})", *(_num(c.gap, signed=True) for c in cells.values())],
        ]
        rows += [[m, *(_num(c.shares.get(m), 2) for c in cells.values())] for m in others]
        lines += [f"### Share of the gap closed, {title}", "", *_table(["", "overall", *families], rows)]
        small = [name for name, c in cells.items() if c.gap is not None and c.note]
        if small:
            lines += [
                "",
                f"n/a where the oracle is less than {gap.min_gap} ahead of {gap.fixed}: {', '.join(small)} "
                "(there training on the gold rubrics gains nothing over the training rubric: a failure there, if "
                "any, shows as flat groups or a wasted budget, not as an oracle gap).",
            ]
        lines.append("")
    if not others:
        lines += [f"(No other method than {gap.fixed} and {gap.oracle} yet: only the gaps are shown.)", ""]
    return lines


def _paired_gap_lines(gap: PairedGap | None) -> list[str]:
    """The share of the oracle gap closed per seed (overall and per family), mean ± std over the seeds."""
    if not gap or not any(gap.at.values()):
        return []
    lines = [
        "## Share of the oracle gap closed, paired by seed",
        "",
        f"Per seed, (method − {gap.fixed}) / ({gap.oracle} − {gap.fixed}) of that seed's gold test scores, "
        f"overall and per family; mean ± std over the seeds where {gap.oracle} is at least {gap.min_gap} ahead "
        "of fixed there (n given where fewer seeds than the method's paired ones count). Unlike the share of seed "
        "means above, a seed's share is measured against its own gap.",
        "",
    ]
    for key, title in (("test_at_best", "at the best-validation checkpoint"), ("test_end", "at the end")):
        at = gap.at.get(key) or {}
        if not at:
            continue
        families = sorted({f for cells in at.values() for f in cells.per_family})
        rows = []
        for m, cells in at.items():
            row = [m]
            for c in (cells.overall, *(cells.per_family.get(f) for f in families)):
                row.append(_stat(c, len(c.per_seed), digits=2, signed=True) if c else "n/a")
            rows.append(row)
        lines += [f"### {title[0].upper()}{title[1:]}", "", *_table(["method", "overall", *families], rows), ""]
        first = next(iter(at.values()))
        small = [
            f"{name} (seed{'s' if len(c.seeds_without_gap) > 1 else ''} {', '.join(c.seeds_without_gap)})"
            for name, c in (("overall", first.overall), *first.per_family.items())
            if c.seeds_without_gap
        ]
        if small:
            lines += [
                f"Seeds where {gap.oracle} is not {gap.min_gap} ahead of {gap.fixed}: {'; '.join(small)}.",
                "",
            ]
    return lines
