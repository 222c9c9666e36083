"""What the harness's repairs reached, per task family: the figures the repairs issue asks of a bench.

For each harness arm and training-task family (``metadata.family`` of the run's training tasks), per seed and
as mean ± std over seeds:

- **first detection**: the step of the first ``failure`` event on a task of the family, or the step of a
  ``rubric_audit`` event whose findings name one (step 0: the audit before training), whichever comes first;
- **first commit**: the ``applies_from_step`` of the first commit that changes a task of the family
  (:func:`~harnessrl.analysis.decisions.changed_tasks`), and which interface and remedy it was;
- **reach**: of the family's trained groups after the first detection (``steps.jsonl``, step above it), the
  share graded by a repaired rubric (``rubric_version > 0``, unless a probation's ``revert`` had taken the repair
  back by then) or trained under a committed guidance (``guided > 0``): how much of the family's training a
  repair touched.

Beside them: the share of the fixed→oracle gap each method closes **paired by seed**, overall and per family
(:func:`oracle_gap_paired`, next to the report's share of seed means); each family's test score at each
evaluation step for fixed, the oracle and the harness arms (:func:`family_curves`); and, on the clean variant
(the runs train on the gold rubrics, ``data.train_rubric: gold``, so no rubric needs a repair), every rubric
commit as an unnecessary one (:func:`unnecessary_commits`), beside the run's score against fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl.analysis.aggregates import Aggregates, Number, stat
from harnessrl.analysis.decisions import UpdateEvent, Verdict, audit_tasks, changed_tasks
from harnessrl.analysis.figures import RunFigures
from harnessrl.analysis.results import (
    FIXED_METHOD,
    MIN_ORACLE_GAP,
    RunData,
    _reference,
    is_harness_arm,
    oracle_method,
)
from harnessrl.analysis.results_file import (
    ArmRepairs,
    CleanArm,
    CleanRun,
    CommitRow,
    FamilyCurvePoint,
    FamilyCurves,
    FamilyRepair,
    FamilyRepairStats,
    PairedGap,
    PairedShare,
    ShareCells,
    UnnecessaryCommits,
)
from harnessrl.interfaces.rubric import RubricCriteria
from harnessrl.records.run_record import finite_number
from harnessrl.records.steps import GroupRecord

__all__ = [
    "REPAIR_FIGURES",
    "family_curves",
    "family_repairs",
    "is_clean_run",
    "oracle_gap_paired",
    "run_family_repairs",
    "unnecessary_commits",
]

RUBRIC_INTERFACE = RubricCriteria.name
"""The interface whose commits change a rubric (on the clean variant, every one is unnecessary)."""

REPAIR_FIGURES = ("first_detection", "first_commit", "reach", "rubric_commits")
"""The per-family repair figures aggregated over seeds (mean ± std) by :func:`family_repairs`."""


# ------------------------------------------------------------------------------------------ one run
def _families(run: RunData) -> dict[str, set[str]]:
    """Family -> its training task ids (tasks without ``metadata.family`` belong to none)."""
    out: dict[str, set[str]] = {}
    for tid in run.train_tasks:
        fam = run.family_of(tid)
        if fam is not None:
            out.setdefault(fam, set()).add(tid)
    return dict(sorted(out.items()))


def _detections(run: RunData, tasks: set[str]) -> tuple[int | None, str | None]:
    """The first detection on one of ``tasks``: its step and what found it (``failure: <kind>`` or
    ``rubric_audit``); (None, None) when nothing did."""
    found: list[tuple[int, str]] = []
    for e in run.record.events_of("failure", "rubric_audit"):
        if e.kind == "failure" and (failure := Verdict.parse(e)).task_id in tasks and e.step is not None:
            found.append((e.step, f"failure: {failure.failure or 'unknown'}"))
        elif e.kind == "rubric_audit" and tasks & set(audit_tasks(e)):
            found.append((e.step if e.step is not None else 0, "rubric_audit"))
    return min(found, key=lambda f: f[0]) if found else (None, None)


def _touches(commit: UpdateEvent, tasks: set[str], domains: dict[str, str]) -> list[str]:
    return [t for t in changed_tasks(commit, domains) if t in tasks]


def _rubric_in_force(run: RunData) -> dict[str, list[tuple[int, bool]]]:
    """Per task, from which step a rubric repair came into force (True: a rubric commit that changes it) or left it
    (False: the ``revert`` that ends a probation on it), in step order."""
    out: dict[str, list[tuple[int, bool]]] = {}
    changes = [e for e in run.commits() if e.interface == RUBRIC_INTERFACE]
    changes += [r for r in map(UpdateEvent.parse, run.record.events_of("revert")) if r.interface == RUBRIC_INTERFACE]
    for e in changes:
        for t in changed_tasks(e, run.train_domains):
            out.setdefault(t, []).append((e.applies_from_step or 0, e.kind == "commit"))
    return {t: sorted(v) for t, v in out.items()}


def _repaired(group: GroupRecord, in_force: dict[str, list[tuple[int, bool]]]) -> bool:
    """Whether a trained group was graded by a repaired rubric (a version after the task's first, unless the
    latest rubric change at its step was a probation's revert) or trained under a committed guidance."""
    latest = [on for step, on in in_force.get(group.task_id, ()) if step <= group.step]
    rubric = (group.rubric_version or 0) > 0 and (latest[-1] if latest else True)
    return rubric or (group.guided or 0) > 0


def run_family_repairs(run: RunData) -> dict[str, FamilyRepair]:
    """One run's repair figures per family (None where the run has none: no detection, no commit).

    Per family: ``first_detection`` (step) and ``detected_by``; ``first_commit`` (its ``applies_from_step``),
    ``first_commit_name`` (``interface:remedy``) and ``first_commit_by_interface``; ``commits`` and
    ``rubric_commits`` (how many commits changed a task of it), ``probation_commits`` (of them, on probation) and
    ``reverts`` (probations on it that ended reverted); ``groups`` (trained groups of it),
    ``groups_after_detection``, ``repaired_groups`` (of those, graded by a repaired rubric or guided) and
    ``reach`` (their share; None without a detection or a group after it)."""
    commits = run.commits()
    reverts = [UpdateEvent.parse(e) for e in run.record.events_of("revert")]
    in_force = _rubric_in_force(run)
    out: dict[str, FamilyRepair] = {}
    for fam, tasks in _families(run).items():
        detected, by = _detections(run, tasks)
        mine = [c for c in commits if _touches(c, tasks, run.train_domains)]
        mine.sort(key=lambda c: c.applies_from_step if c.applies_from_step is not None else float("inf"))
        first = mine[0] if mine else None
        by_interface: dict[str, int | None] = {}
        for c in mine:
            by_interface.setdefault(str(c.interface), c.applies_from_step)
        groups = [g for g in run.record.groups if g.task_id in tasks]
        after = [g for g in groups if detected is not None and g.step > detected]
        repaired = sum(_repaired(g, in_force) for g in after)
        out[fam] = FamilyRepair(
            first_detection=detected,
            detected_by=by,
            first_commit=first.applies_from_step if first else None,
            first_commit_name=first.name if first else None,
            first_commit_by_interface=by_interface,
            commits=len(mine),
            rubric_commits=sum(c.interface == RUBRIC_INTERFACE for c in mine),
            probation_commits=sum(c.probation for c in mine),
            reverts=sum(bool(_touches(r, tasks, run.train_domains)) for r in reverts),
            groups=len(groups),
            groups_after_detection=len(after) if detected is not None else None,
            repaired_groups=repaired if detected is not None else None,
            reach=repaired / len(after) if after else None,
        )
    return out


# ------------------------------------------------------------------------------------------ over seeds
def family_repairs(runs: Sequence[RunData], agg: Aggregates) -> dict[str, ArmRepairs]:
    """Per harness arm, per family: :data:`REPAIR_FIGURES` as mean ± std over the seeds that have them, and
    every seed's :func:`run_family_repairs` (``per_seed``); ``failure``: the family's injected failure."""
    out: dict[str, ArmRepairs] = {}
    for arm in (m for m in agg if is_harness_arm(m, agg)):
        per_seed = {str(r.seed): run_family_repairs(r) for r in sorted(runs, key=lambda r: r.seed) if r.method == arm}
        families = sorted({f for fams in per_seed.values() for f in fams})
        if not families:
            continue
        failure = agg[arm].family_failure
        out[arm] = ArmRepairs(
            seeds=[int(s) for s in per_seed],
            families={fam: _over_seeds(per_seed, fam, failure.get(fam)) for fam in families},
        )
    return out


def _over_seeds(per_seed: dict[str, dict[str, FamilyRepair]], fam: str, failure: str | None) -> FamilyRepairStats:
    """One family's repair figures over the seeds: mean ± std of each, the seeds that committed, every seed's."""
    mine = {s: f[fam] for s, f in per_seed.items() if fam in f}
    return FamilyRepairStats(
        failure=failure,
        **{k: stat([f.figure(k) for f in mine.values()]) for k in REPAIR_FIGURES},
        seeds_with_commit=sum(f.first_commit is not None for f in mine.values()),
        per_seed=mine,
    )


GAP_SCORES = ("test_at_best", "test_end")
"""The test scores whose oracle-gap share is paired by seed."""


def _seed_share(
    agg: Aggregates, method: str, ref: tuple[str, str], seed: str, key: str, fam: str | None
) -> tuple[float | None, Number | None]:
    """One seed's (method - fixed) / (oracle - fixed) and its gap; the share is None where the gap is below
    :data:`MIN_ORACLE_GAP` or a score is missing."""
    fixed, oracle = ref

    def score(m: str) -> Number | None:
        row = agg[m].per_seed.get(seed)
        if row is None:
            return None
        if fam is None:
            return finite_number(getattr(row, key))
        return finite_number((getattr(row, f"{key}_per_family") or {}).get(fam))

    m, f, o = score(method), score(fixed), score(oracle)
    gap = o - f if o is not None and f is not None else None
    share = (m - f) / gap if m is not None and gap is not None and gap >= MIN_ORACLE_GAP else None
    return share, gap


def _paired_share(agg: Aggregates, method: str, ref: tuple[str, str], key: str, fam: str | None) -> PairedShare:
    seeds = sorted(set(agg[method].per_seed) & set(agg[ref[0]].per_seed) & set(agg[ref[1]].per_seed), key=int)
    shares: dict[str, float | None] = {}
    gaps: dict[str, Number | None] = {}
    for s in seeds:
        shares[s], gaps[s] = _seed_share(agg, method, ref, s, key, fam)
    return PairedShare(
        **dict(stat(list(shares.values()))),
        per_seed=shares,
        gap_per_seed=gaps,
        seeds_without_gap=[s for s in seeds if (g := gaps[s]) is not None and g < MIN_ORACLE_GAP],
    )


def oracle_gap_paired(agg: Aggregates) -> PairedGap | None:
    """The share of the fixed→oracle gap each method closes, paired by seed: per seed (and per family) the
    ratio (method − fixed) / (oracle − fixed) of that seed's gold test scores, at the best-validation
    checkpoint and at the end, over the seeds where the oracle is at least :data:`MIN_ORACLE_GAP` ahead (the
    others are listed in ``seeds_without_gap``); mean ± std over those seeds. None without both a ``fixed``
    and an ``oracle`` method graded with gold."""
    oracle, fixed = oracle_method(agg), _reference(agg, FIXED_METHOD)
    if oracle is None or fixed is None or any(agg[m].graded_with != "gold" for m in (oracle, fixed)):
        return None
    others = [m for m in agg if m not in (oracle, fixed)]
    out = PairedGap(fixed=fixed, oracle=oracle, min_gap=MIN_ORACLE_GAP)
    for key in GAP_SCORES:
        where = f"{key}_per_family"
        families = sorted(set(agg[oracle].per_group(where)) | set(agg[fixed].per_group(where)))
        out.at[key] = {
            m: ShareCells(
                overall=_paired_share(agg, m, (fixed, oracle), key, None),
                per_family={fam: _paired_share(agg, m, (fixed, oracle), key, fam) for fam in families},
            )
            for m in others
        }
    return out


def _row_family_scores(row: RunFigures) -> dict[int, dict[str, float | None]]:
    """A report's run row's per-family test scores by step: what it carries, step 0 and the end only."""
    out: dict[int, dict[str, float | None]] = {}
    if row.test_start_per_family:
        out[0] = row.test_start_per_family
    if row.test_end_step is not None and row.test_end_per_family:
        out[row.test_end_step] = row.test_end_per_family
    return out


def family_curves(runs: Sequence[RunData], agg: Aggregates, rows: Sequence[RunFigures] = ()) -> FamilyCurves:
    """Per family, per method (fixed, the oracle, each harness arm): the family's test score (gold where the
    runs are graded with gold) at each evaluation step, mean ± std over the seeds evaluated there; ``rows``
    (committed reports' run figures, :mod:`~harnessrl.analysis.rows`) count at step 0 and at the end only."""
    methods = [m for m in (_reference(agg, FIXED_METHOD), oracle_method(agg)) if m is not None]
    methods += [m for m in agg if is_harness_arm(m, agg)]
    values: dict[str, dict[str, dict[int, list[float]]]] = {}
    scores = [(r.method, {e.step: e.per_family for e in r.eval_rows("test")}) for r in runs]
    scores += [(f.method, _row_family_scores(f)) for f in rows]
    for method, by_step in scores:
        if method not in methods:
            continue
        for step, per_family in by_step.items():
            for fam, v in per_family.items():
                if finite_number(v) is not None:
                    values.setdefault(str(fam), {}).setdefault(method, {}).setdefault(step, []).append(v)
    return {
        fam: {
            m: [FamilyCurvePoint(step=s, **dict(stat(by_step[s]))) for s in sorted(by_step)]
            for m in methods
            if (by_step := per_method.get(m))
        }
        for fam, per_method in sorted(values.items())
    }


# ------------------------------------------------------------------------------------------ the clean variant
def is_clean_run(run: RunData) -> bool:
    """Whether a run trains on the gold rubrics (``data.train_rubric: gold``: the clean variant's override),
    so that no rubric of its fails and any rubric repair is unnecessary."""
    return run.record.config.data.train_rubric == "gold"


def _commit_row(run: RunData, c: UpdateEvent) -> CommitRow:
    tasks = changed_tasks(c, run.train_domains)
    return CommitRow(
        step=c.applies_from_step,
        remedy=c.name,
        tasks=list(tasks),
        families=sorted({run.family_of(t) or t for t in tasks}),
        added=list(c.update.added_texts()),
    )


def _vs_fixed(agg: Aggregates, method: str, fixed: str | None, seed: int) -> dict[str, Number | None]:
    """A run's gold test scores minus fixed's of the same seed (None: either has none)."""
    mine = agg[method].per_seed.get(str(seed))
    theirs = agg[fixed].per_seed.get(str(seed)) if fixed is not None else None
    out: dict[str, Number | None] = {}
    for key in GAP_SCORES:
        a = finite_number(getattr(mine, key)) if mine is not None else None
        b = finite_number(getattr(theirs, key)) if theirs is not None else None
        out[key] = a - b if a is not None and b is not None else None
    return out


def unnecessary_commits(runs: Sequence[RunData], agg: Aggregates) -> UnnecessaryCommits | None:
    """On the clean variant, per harness run, every rubric commit (each an unnecessary one: a false accept
    of the critic): how many, per family, what each added; beside the run's gold test score minus fixed's of
    the same seed (at the best-validation checkpoint and at the end). None: no harness run trains on gold."""
    clean = [r for r in runs if is_harness_arm(r.method, agg) and is_clean_run(r)]
    if not clean:
        return None
    fixed = _reference(agg, FIXED_METHOD)
    rows = []
    for r in sorted(clean, key=lambda r: (list(agg).index(r.method), r.seed)):
        commits = [_commit_row(r, c) for c in r.commits() if c.interface == RUBRIC_INTERFACE]
        per_family: dict[str, int] = {}
        for c in commits:
            for fam in c.families:
                per_family[fam] = per_family.get(fam, 0) + 1
        rows.append(
            CleanRun(
                method=r.method,
                seed=r.seed,
                rubric_commits=len(commits),
                per_family=dict(sorted(per_family.items())),
                commits=commits,
                vs_fixed=_vs_fixed(agg, r.method, fixed, r.seed),
            )
        )
    arms = list(dict.fromkeys(row.method for row in rows))
    return UnnecessaryCommits(
        fixed=fixed,
        runs=rows,
        per_arm={
            arm: CleanArm(
                rubric_commits=stat([row.rubric_commits for row in rows if row.method == arm]),
                per_family=_summed([row.per_family for row in rows if row.method == arm]),
            )
            for arm in arms
        },
    )


def _summed(counts: Sequence[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, n in c.items():
            out[k] = out.get(k, 0) + n
    return dict(sorted(out.items()))
