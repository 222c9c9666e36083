"""The bench's figures as PNGs (matplotlib, Agg): curves per method with the seed spread, the gold and
proxy test scores side by side (overall and per task family), the gold score per family of fixed, the
oracle and each harness arm with its first repairs marked, and one seed's timeline of harness decisions.

Each curve is the mean over the seeds that have a value at that step, with a band of ± one sample
standard deviation where at least two seeds do; a figure nobody recorded is drawn as an empty panel
that says so, never left out silently.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from pathlib import Path

from harnessrl.analysis.aggregates import Aggregates
from harnessrl.analysis.decisions import Verdict
from harnessrl.analysis.results import FIXED_METHOD, RunData, _reference, is_harness_arm, oracle_method
from harnessrl.analysis.results_file import ArmRepairs, FamilyCurvePoint, FamilyCurves
from harnessrl.interfaces.registry import interface_classes

__all__ = ["PLOTS", "write_plots"]

logger = logging.getLogger(__name__)

PLOTS = {
    "test_score": "test_score.png",
    "effective_group_ratio": "effective_group_ratio.png",
    "zero_std": "zero_std_fraction.png",
    "score_vs_rollouts": "score_vs_rollouts.png",
    "harness_timeline": "harness_timeline.png",
    "gold_vs_proxy": "gold_vs_proxy.png",
    "gold_vs_proxy_per_family": "gold_vs_proxy_per_family.png",
    "gold_per_family": "gold_per_family.png",
}
"""Plot name -> file name under ``<bench>/plots/``."""

DECISIONS = ("proposal", "verdict", "commit")
"""The event kinds the timeline shows as the harness's decisions."""


def _band(per_seed: Sequence[Sequence[tuple[int, float]]]) -> tuple[list[int], list[float], list[float]]:
    """Steps, mean and std (0 where only one seed has the step) over the seeds' series."""
    values: dict[int, list[float]] = {}
    for series in per_seed:
        for step, v in series:
            values.setdefault(step, []).append(v)
    steps = sorted(values)
    means = [statistics.fmean(values[s]) for s in steps]
    stds = [statistics.stdev(values[s]) if len(values[s]) >= 2 else 0.0 for s in steps]
    return steps, means, stds


def _int_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True, min_n_ticks=1)  # one evaluated step so far: tick it, not fractions


Colour = tuple[float, float, float, float]
"""A method's line colour (RGBA, from matplotlib's tab10)."""


def _colours(methods: Sequence[str]) -> dict[str, Colour]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {m: cmap(i % 10) for i, m in enumerate(methods)}


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey", wrap=True)


def _mean_line(ax, series: Sequence[Sequence[tuple[int, float]]], colour, label: str, linestyle: str = "-") -> None:
    """The mean over seeds of ``series``, with a ± std band where two or more seeds have a value."""
    steps, mean, std = _band(series)
    marker = "o" if len(steps) < 15 else None
    _line_with_band(ax, steps, mean, std if len(series) >= 2 else None, colour, label, linestyle, marker)


def _row_line(ax, points: Sequence[FamilyCurvePoint], colour, label: str) -> None:
    """A method's curve from committed rows (mean and std at each step they have, step 0 and the end), dashed."""
    steps, mean = [p.step for p in points], [p.mean or 0.0 for p in points]
    _line_with_band(ax, steps, mean, [p.std or 0.0 for p in points], colour, label, "--", "s")


def _line_with_band(
    ax, steps, mean: Sequence[float], std: Sequence[float] | None, colour, label: str, linestyle: str, marker
) -> None:
    """A mean line, with a ± ``std`` band (lighter for a dashed line) unless ``std`` is None."""
    ax.plot(steps, mean, marker=marker, ms=3, color=colour, ls=linestyle, label=label)
    if std is not None:
        lo = [a - b for a, b in zip(mean, std, strict=True)]
        hi = [a + b for a, b in zip(mean, std, strict=True)]
        ax.fill_between(steps, lo, hi, color=colour, alpha=0.18 if linestyle == "-" else 0.08, lw=0)


def _curves(ax, runs: Sequence[RunData], methods: Sequence[str], colours, get, title: str, ylabel: str) -> None:
    drawn = False
    for m in methods:
        series = [s for s in (get(r) for r in runs if r.method == m) if s]
        if not series:
            continue
        _mean_line(ax, series, colours[m], f"{m} (n={len(series)})")
        drawn = True
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(_int_ticks())
    ax.set_ylabel(ylabel)
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, "not recorded by these runs")


def _eval_series(split: str):
    return lambda r: [(e.step, e.overall) for e in r.eval_rows(split)]


def _test_score(plt, runs, methods, colours, path: Path) -> None:
    split = any(r.has_split for r in runs)
    fig, axes = plt.subplots(1, 2 if split else 1, figsize=(12 if split else 7, 4.5), squeeze=False)
    if split:
        _curves(axes[0][0], runs, methods, colours, _eval_series("validation"), "Validation score", "score")
        _curves(axes[0][1], runs, methods, colours, _eval_series("test"), "Test score (reported only)", "score")
    else:
        _curves(
            axes[0][0],
            runs,
            methods,
            colours,
            _eval_series("test"),
            "Held-out score (one set chooses and reports)",
            "score",
        )
    fig.suptitle("Evaluation score over training steps (mean ± std over seeds)")
    _save(plt, fig, path)


def _effective(plt, runs, methods, colours, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _curves(
        ax,
        runs,
        methods,
        colours,
        lambda r: r.record.series("effective_group_ratio"),
        "Effective-group ratio (groups with reward std > eps)",
        "share of groups",
    )
    ax.set_ylim(-0.02, 1.02)
    _save(plt, fig, path)


def _zero_std(plt, runs, methods, colours, agg: Aggregates, path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _curves(
        axes[0],
        runs,
        methods,
        colours,
        lambda r: r.record.series("frac_reward_zero_std/all_low"),
        "Flat groups, all low",
        "share of groups",
    )
    _curves(
        axes[1],
        runs,
        methods,
        colours,
        lambda r: r.record.series("frac_reward_zero_std/all_high"),
        "Flat groups, all high",
        "share of groups",
    )
    ax = axes[2]
    low = [agg[m].zero_std_all_low.mean for m in methods]
    high = [agg[m].zero_std_all_high.mean for m in methods]
    if any(v is not None for v in low + high):
        lo = [v or 0.0 for v in low]
        hi = [v or 0.0 for v in high]
        ax.bar(methods, lo, color="tab:blue", label="all low")
        ax.bar(methods, hi, bottom=lo, color="tab:orange", label="all high")
        ax.legend(fontsize=8)
        ax.tick_params(axis="x", rotation=20)
    else:
        _empty(ax, "not recorded by these runs")
    ax.set_title("Mean share of flat groups per method")
    _save(plt, fig, path)


def _score_vs_rollouts(plt, runs, methods, colours, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for m in methods:
        by_step: dict[int, list[tuple[float, float]]] = {}
        for r in (r for r in runs if r.method == m):
            spent = r.rollouts_spent()
            evals = r.eval_rows("test")
            if not evals:
                continue
            pts = []
            for e in evals:
                before = [v for s, v in spent if s <= e.step]
                pts.append((before[-1] if before else 0.0, e.overall))
                by_step.setdefault(e.step, []).append(pts[-1])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colours[m], alpha=0.3, lw=1)
        if not by_step:
            continue
        n = max(len(v) for v in by_step.values())
        # the mean at each evaluation step over the seeds evaluated there
        xs = [statistics.fmean(p[0] for p in by_step[s]) for s in sorted(by_step)]
        ys = [statistics.fmean(p[1] for p in by_step[s]) for s in sorted(by_step)]
        ax.plot(xs, ys, color=colours[m], lw=2.2, marker="o", ms=3, label=f"{m} (n={n})")
        drawn = True
    ax.set_title("Test score against rollouts spent (thin: seeds, thick: mean)")
    ax.set_xlabel("rollouts spent (generated incl. discarded, plus critic trials)")
    ax.set_ylabel("test score")
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no test evaluations recorded")
    _save(plt, fig, path)


def _test_scores(run: RunData, family: str | None, proxy: bool) -> list[tuple[int, float]]:
    """``(step, score)`` of a run's test evaluations: the main grading or the proxy beside it, overall or
    of one family (steps without that score left out)."""
    out = []
    for e in run.eval_rows("test"):
        scores = e.proxy if proxy else e
        v = None if scores is None else scores.overall if family is None else scores.per_family.get(family)
        if v is not None:
            out.append((e.step, v))
    return out


def _gold_proxy_panel(ax, runs: Sequence[RunData], methods: Sequence[str], colours, family: str | None) -> bool:
    """Per method, the main test score (solid; gold where graded with gold) and the proxy (dashed, same
    colour); returns whether anything was drawn."""
    drawn = False
    for m in methods:
        mine = [r for r in runs if r.method == m]
        main = [s for s in (_test_scores(r, family, proxy=False) for r in mine) if s]
        proxy = [s for s in (_test_scores(r, family, proxy=True) for r in mine) if s]
        gold = any(r.graded_with() == "gold" for r in mine)
        if main:
            _mean_line(ax, main, colours[m], f"{m} {'gold' if gold else 'score'} (n={len(main)})")
            drawn = True
        if proxy:
            _mean_line(ax, proxy, colours[m], f"{m} proxy", linestyle="--")
            drawn = True
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(_int_ticks())
    ax.set_ylim(-0.02, 1.02)
    return drawn


def _gold_vs_proxy(plt, runs, methods, colours, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.8))
    if _gold_proxy_panel(ax, runs, methods, colours, None):
        ax.legend(fontsize=8, ncol=2)
    else:
        _empty(ax, "no test evaluations recorded")
    gold = any(r.graded_with() == "gold" for r in runs)
    ax.set_title(
        "Test score: gold (solid) and proxy, rubric v0 (dashed); their distance is reward hacking"
        if gold
        else "Test score (no gold grading in these runs: no proxy beside it)",
        fontsize=10,
    )
    ax.set_ylabel("test score")
    _save(plt, fig, path)


def _test_families(runs: Sequence[RunData]) -> list[str]:
    return sorted({f for r in runs for e in r.eval_rows("test") for f in e.per_family})


def _family_grid(plt, families: Sequence[str]):
    ncols = min(4, len(families))
    nrows = -(-len(families) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows + 0.6), squeeze=False)
    for j in range(len(families), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    return fig, axes, ncols


def _save_with_legend_below(plt, fig, axes, path: Path, title: str) -> None:
    """One legend under the panels with every line any panel has (labels without their panel's counts)."""
    legend: dict[str, object] = {}  # label -> its line's handle
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label.split(" (n=")[0], h)
    labels, handles = list(legend), list(legend.values())
    ncol = min(6, len(handles)) or 1
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
    fig.suptitle(title)
    legend_inches = (0.2 + 0.22 * -(-len(handles) // ncol)) if handles else 0.0  # rows of the legend below
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _gold_vs_proxy_per_family(plt, runs, methods, colours, path: Path) -> None:
    families = _test_families(runs)
    if not families:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _empty(ax, "no task families in these runs' test evaluations (tasks without metadata.family)")
        ax.set_title("Test score per family: gold (solid) and proxy (dashed)")
        _save(plt, fig, path)
        return
    fig, axes, ncols = _family_grid(plt, families)
    for i, fam in enumerate(families):
        ax = axes[i // ncols][i % ncols]
        if not _gold_proxy_panel(ax, runs, methods, colours, fam):
            _empty(ax, "not recorded")
        ax.set_title(fam)
        if i % ncols == 0:
            ax.set_ylabel("test score")
    _save_with_legend_below(
        plt, fig, axes, path, "Test score per family: gold (solid) and proxy, rubric v0 (dashed); mean ± std over seeds"
    )


def _gold_per_family(
    plt, runs, agg: Aggregates, colours, repairs: dict[str, ArmRepairs], path: Path, curves: FamilyCurves
) -> None:
    """Per family, the main test score (gold where graded with gold) of fixed, the oracle and each harness arm,
    with each arm's seed-mean first commit on the family marked (dotted line); a method whose seeds are committed
    rows only is drawn from ``curves`` at step 0 and the end (dashed)."""
    arms = [m for m in agg if is_harness_arm(m, agg)]
    methods = [m for m in (_reference(agg, FIXED_METHOD), oracle_method(agg), *arms) if m is not None]
    families = _test_families([r for r in runs if r.method in methods])
    title = "Test score per family (dotted: an arm's mean first commit there)"
    if not families:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _empty(ax, "no task families in these runs' test evaluations (tasks without metadata.family)")
        ax.set_title(title, fontsize=10)
        _save(plt, fig, path)
        return
    fig, axes, ncols = _family_grid(plt, families)
    for i, fam in enumerate(families):
        ax = axes[i // ncols][i % ncols]
        drawn = False
        for m in methods:
            series = [s for s in (_test_scores(r, fam, proxy=False) for r in runs if r.method == m) if s]
            if series:
                _mean_line(ax, series, colours[m], f"{m} (n={len(series)})")
                drawn = True
            elif points := [p for p in (curves.get(fam) or {}).get(m) or [] if p.mean is not None]:
                _row_line(ax, points, colours[m], f"{m} (committed rows, n={max(p.n for p in points)})")
                drawn = True
            family = repairs[m].families.get(fam) if m in repairs else None
            if family is not None and family.first_commit.mean is not None:
                ax.axvline(family.first_commit.mean, color=colours[m], ls=":", lw=1.2, label=f"{m} first commit")
        if not drawn:
            _empty(ax, "not recorded")
        ax.set_title(fam)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(_int_ticks())
        ax.set_ylim(-0.02, 1.02)
        if i % ncols == 0:
            ax.set_ylabel("test score")
    _save_with_legend_below(plt, fig, axes, path, f"{title}, mean ± std over seeds")


def timeline_run(runs: Sequence[RunData], agg: Aggregates) -> RunData | None:
    """The run whose decisions the timeline shows: the first harness arm's lowest seed that made any."""
    arms = sorted(agg, key=lambda m: not is_harness_arm(m, agg))
    for m in arms:
        for r in sorted((r for r in runs if r.method == m), key=lambda r: r.seed):
            if r.record.events_of(*DECISIONS):
                return r
    return None


def _timeline(plt, run: RunData | None, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 4))
    # one row per registered interface, and any other interface the run's decisions name (a plug-in
    # installed where the run trained but not here)
    decisions = [Verdict.parse(e) for e in run.record.events_of(*DECISIONS)] if run else []
    named = [d.interface for d in decisions if d.interface]
    rows = [*dict.fromkeys([*interface_classes(), *named]), "failures"]
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(_int_ticks())
    if run is None:
        _empty(ax, "no harness decisions in any run (no proposals, verdicts or commits in events.jsonl)")
        ax.set_title("Harness decisions")
    else:
        y = {name: i for i, name in enumerate(rows)}
        marks = {
            "proposed": dict(marker=".", color="grey", s=30),
            "rejected": dict(marker="x", color="tab:red", s=60),
            "accepted": dict(marker="o", facecolors="none", edgecolors="tab:blue", s=60),
            "committed": dict(marker="^", color="tab:green", s=90),
        }
        points: dict[str, list[tuple[float, float]]] = {k: [] for k in marks}
        for e in run.record.events_of("failure", *DECISIONS):
            step, kind, d = e.step, e.kind, Verdict.parse(e)
            if step is None:
                continue
            if kind == "failure":
                points.setdefault("failure", []).append((step, y["failures"]))
            elif d.interface in y and kind == "proposal":
                points["proposed"].append((step, y[d.interface] - 0.15))
            elif d.interface in y and kind == "verdict" and d.verdict in ("accepted", "rejected"):
                points[d.verdict].append((step, y[d.interface]))
            elif d.interface in y and kind == "commit":
                points["committed"].append((step, y[d.interface] + 0.15))
        for kind, pts in points.items():
            if not pts:
                continue
            style = marks.get(kind, dict(marker="|", color="dimgrey", s=40))
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=f"{kind} ({len(pts)})", **style)
        for e in run.record.events_of("evolution_point"):
            if e.step is not None:
                ax.axvline(e.step, color="lightgrey", lw=0.8, zorder=0)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_title(f"Harness decisions of {run.method}, seed {run.seed} (grey lines: evolution points)")
    _save(plt, fig, path)


def write_plots(
    runs: Sequence[RunData],
    agg: Aggregates,
    out_dir: str | Path,
    repairs: dict[str, ArmRepairs] | None = None,
    curves: FamilyCurves | None = None,
) -> dict[str, Path]:
    """Every bench plot into ``out_dir``; returns plot name -> path. ``repairs``: the per-family repair figures
    (:func:`~harnessrl.analysis.repairs.family_repairs`) whose first commits the per-family gold plot marks;
    ``curves``: the per-family test curves (:func:`~harnessrl.analysis.repairs.family_curves`), from which it draws a
    method that has only committed rows (step 0 and the end)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    methods = list(agg)
    colours = _colours(methods)
    paths = {name: out / fname for name, fname in PLOTS.items()}
    _test_score(plt, runs, methods, colours, paths["test_score"])
    _effective(plt, runs, methods, colours, paths["effective_group_ratio"])
    _zero_std(plt, runs, methods, colours, agg, paths["zero_std"])
    _score_vs_rollouts(plt, runs, methods, colours, paths["score_vs_rollouts"])
    _timeline(plt, timeline_run(runs, agg), paths["harness_timeline"])
    _gold_vs_proxy(plt, runs, methods, colours, paths["gold_vs_proxy"])
    _gold_vs_proxy_per_family(plt, runs, methods, colours, paths["gold_vs_proxy_per_family"])
    _gold_per_family(plt, runs, agg, colours, repairs or {}, paths["gold_per_family"], curves or {})
    return paths


def _save(plt, fig, path: Path) -> None:
    """Lay the figure out, write it as a PNG and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
