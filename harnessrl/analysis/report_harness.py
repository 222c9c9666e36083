"""The report's sections on what the harness did: each family's test score over training, the repairs per
family (first detection, first commit, reach), the unnecessary commits of the clean variant, the decisions
and trial costs per family, and the misfires on failures no prompt states."""

from __future__ import annotations

from harnessrl.analysis.aggregates import Aggregates, MethodAggregate
from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.misfires import MISFIRES
from harnessrl.analysis.report_format import _num, _stat, _table
from harnessrl.analysis.results import FIXED_METHOD, is_harness_arm, runs_evolver
from harnessrl.analysis.results_file import ArmRepairs, FamilyCurves, FamilyRepair, UnnecessaryCommits


def _family_curve_lines(curves: FamilyCurves) -> list[str]:
    """Each family's test score at each evaluation step for fixed, the oracle and the harness arms."""
    if not curves:
        return []
    steps = sorted({p.step for per in curves.values() for points in per.values() for p in points})
    rows = []
    for fam, per_method in curves.items():
        for m, points in per_method.items():
            at, seeds = {p.step: p for p in points}, max(p.n for p in points)
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


def _seed_repair(s: str, f: FamilyRepair) -> str:
    """One seed's repair figures as ``seed: detected→committed (remedy), repaired/after``."""
    detected = "—" if f.first_detection is None else str(f.first_detection)
    committed = "—" if f.first_commit is None else f"{f.first_commit} ({f.first_commit_name})"
    reach = "" if f.groups_after_detection is None else f", {f.repaired_groups}/{f.groups_after_detection}"
    on, back = f.probation_commits, f.reverts
    probation = f" ({on} on probation, {back} reverted)" if on or back else ""
    return f"{s}: {detected}→{committed}{reach}{probation}"


def _repair_lines(repairs: dict[str, ArmRepairs]) -> list[str]:
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
    seeds = [f for a in repairs.values() for d in a.families.values() for f in d.per_seed.values()]
    if any(f.probation_commits or f.reverts for f in seeds):
        lines[-1:-1] = [
            "",
            "A repair on probation counts in reach only until a revert takes it back; where a family had any, the "
            "per-seed figures end with how many of its commits were on probation and how many probations ended "
            "reverted.",
        ]
    for arm, a in repairs.items():
        n = len(a.seeds)
        rows = []
        for fam, d in a.families.items():
            rows.append(
                [
                    fam,
                    d.failure or "n/a",
                    _stat(d.first_detection, n, digits=1),
                    _stat(d.first_commit, n, digits=1),
                    f"{d.seeds_with_commit} of {n}",
                    _stat(d.reach, n, pct=True),
                    _stat(d.rubric_commits, n, digits=1),
                    "; ".join(_seed_repair(s, f) for s, f in d.per_seed.items()),
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


def _unnecessary_lines(clean: UnnecessaryCommits | None) -> list[str]:
    """The clean variant's rubric commits, each unnecessary (training rubric = gold), beside the score."""
    if not clean:
        return []
    fixed = clean.fixed or FIXED_METHOD
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
            f"{r.method}/seed{r.seed}",
            str(r.rubric_commits),
            ", ".join(f"{f} ×{k}" for f, k in r.per_family.items()) or "none",
            _num(r.vs_fixed.get("test_at_best"), signed=True),
            _num(r.vs_fixed.get("test_end"), signed=True),
        ]
        for r in clean.runs
    ]
    lines += _table(
        ["run", "rubric commits", "per family", f"Δ test @ best val vs {fixed}", f"Δ test @ end vs {fixed}"], rows
    )
    lines.append("")
    for arm, a in clean.per_arm.items():
        st = a.rubric_commits
        per_family = ", ".join(f"{f} ×{k}" for f, k in a.per_family.items()) or "none"
        lines.append(f"- **{arm}**: {_stat(st, st.n, digits=1)} rubric commits a run; summed by family: {per_family}.")
    commits = [(r, c) for r in clean.runs for c in r.commits]
    if commits:
        lines += ["", "What each added:", ""]
        for r, c in commits:
            added = "; ".join(f'"{t}"' for t in c.added) or "no criterion (a reword, reweight or removal)"
            lines.append(
                f"- {r.method}/seed{r.seed}, from step {c.step}, {c.remedy} on "
                f"{', '.join(c.tasks) or 'n/a'} ({', '.join(c.families) or 'n/a'}): {added}"
            )
    return [*lines, ""]


def _decision_lines(agg: Aggregates) -> list[str]:
    """Per harness arm and family: what it committed (interface and remedy), what the critic refused and why,
    the failures it gave up; summed over the seeds (read from the runs' events)."""
    lines: list[str] = []
    for m, a in agg.items():
        decisions = a.harness_decisions
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
        if any("(on probation)" in k or k.endswith(":revert") for d in decisions.values() for k in d.commits):
            lines += [
                "*On probation*: a hint (or a rubric check with the hint that states it) committed without fresh "
                "rollouts, measured on its training groups (guided "
                "and unguided members the two arms) and kept or reverted by them; `:revert` the end of one whose "
                "groups gave no signal.",
                "",
            ]
        for fam, d in decisions.items():
            commits = ", ".join(f"{k} ×{n}" for k, n in sorted(d.commits.items())) or "none"
            rejected = ", ".join(f"{k} ×{n}" for k, n in sorted(d.rejected.items(), key=lambda x: -x[1])) or "none"
            rows.append([fam, commits, rejected, str(d.gave_up)])
        lines += [
            f"### {m} ({len(a.seeds)} seed(s))",
            "",
            *_table(["family", "committed", "rejected", "given up"], rows),
            "",
            *_trial_cost_lines(a),
        ]
    return lines


def _trial_cost_lines(a: MethodAggregate) -> list[str]:
    """One harness arm's trials by remedy, summed over its seeds, against the rollouts its training generated."""
    costs = a.trial_costs
    if not costs:
        return []
    generated = a.rollouts_generated
    trained = generated.mean * generated.n if generated.mean is not None else None
    rows = []
    for name, d in sorted(costs.items(), key=lambda kv: -kv[1].rollouts):
        rows.append(
            [
                name,
                f"{d.trials:.0f}",
                f"{d.accepted:.0f}",
                f"{d.rollouts:,.0f}",
                _num(d.rollouts / trained, pct=True) if trained else "n/a",
                f"{d.judge_calls:,.0f}",
                _num(d.seconds / 60, 1),
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


def _misfire_lines(figures: list[RunFigures], agg: Aggregates) -> list[str]:
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
