"""A bench's results, read back from its run directories: per-run figures, per-method aggregates, comparisons.

Every figure is computed from the run's record (:class:`~harnessrl.records.run_record.RunRecord`: its
config, metrics, trained groups, evaluations, best checkpoint, events and summary), each from one source, so a
report can be made while a bench is still running. A figure a run does not record is ``None`` (shown as n/a),
never a guess from another file and never an error: the run's totals (rollouts, judge calls, the harness's
seconds, the share of groups that carried a learning signal) are its summary's, so a run that has not ended
has none yet.

Evaluation rows carry a ``split``: ``validation`` chooses the best checkpoint (and defines steps to
best), ``test`` is only reported. Runs from before the split existed have one held-out set that
does both; the results say so (it flatters every method alike).

An evaluation graded with the gold rubrics (``graded_with: gold``) carries the proxy beside it, the
same completions graded with rubric version 0 (what training optimises): their distance over training
is reward hacking made visible, so both are reported overall and per task family (``metadata.family``
of the tasks). Training's own per-family figures (groups drawn, flat groups, clipped completions) come
from ``steps.jsonl`` and the run's training file. A run's *main* score (``test_at_best``, ``test_end``,
...) is the gold score when the run is graded with gold, else the rubric score, as before.

Comparisons go harness arm against baseline, paired by seed, with two intervals: a t-interval of the
per-seed differences (seed variation) and a paired bootstrap over test tasks (task sampling). The
``oracle`` method (plain GRPO trained on the gold rubrics) is not a baseline but the bound: each
method's share of the fixed→oracle gap says how much of what a rubric repair could gain it reached.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harnessrl.analysis.aggregates import (
    PER_GROUP,
    SCALARS,
    Aggregates,
    MethodAggregate,
    Number,
    Paired,
    PairedScore,
    SeedFigures,
    Stat,
    TrainFamilyStats,
    stat,
)
from harnessrl.analysis.figures import FamilyDecisions, RunFigures, TrialCost
from harnessrl.analysis.per_run import RunData, run_figures, with_equal_cost
from harnessrl.analysis.results_file import (
    Ablation,
    Bootstrap,
    ComparedScore,
    ComparedSteps,
    Comparison,
    FamilyAblation,
    FaultCheck,
    FaultFigures,
    FaultRow,
    GapAt,
    GapCell,
    OracleBound,
    OracleGap,
    OracleMinusFixed,
)
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import BenchManifest, Settings, read_bench_manifest
from harnessrl.records.run_record import finite_number
from harnessrl.trainer.methods import METHOD_TABLE, RENAMED_METHODS, MethodSpec, plain_method

__all__ = [
    "FIXED_METHOD",
    "ORACLE_METHOD",
    "BaselineChoice",
    "RunData",
    "RunFigures",
    "SameBenchmark",
    "aggregate",
    "agree",
    "baselines",
    "best_baseline",
    "best_baseline_choice",
    "compare",
    "fault_check",
    "is_harness_arm",
    "is_oracle",
    "load_benches",
    "load_runs",
    "oracle_gap",
    "oracle_method",
    "plain_oracle",
    "run_figures",
    "runs_evolver",
    "same_name",
    "stat",
    "t_interval",
    "task_bootstrap",
    "with_equal_cost",
]

ORACLE_METHOD = plain_method("gold")
"""The trainer method that trains plain GRPO on the gold rubrics (``oracle``, from the method table): the bound, not
a baseline."""

FIXED_METHOD = plain_method()
"""The trainer method the oracle gap starts from: plain GRPO on the training rubric (``fixed``, from the table)."""

MIN_ORACLE_GAP = 0.01
"""Below this oracle-minus-fixed difference a share of the gap is not computed (noise over a tiny gap)."""

BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 0

_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (no scipy needed)."""


FAMILY_SCORES = (
    "test_at_best_per_family",
    "test_end_per_family",
    "test_start_per_family",
    "proxy_test_at_best_per_family",
    "proxy_test_end_per_family",
    "proxy_test_start_per_family",
)
"""The per-family test scores of a run (main grading and proxy; at best validation, end, step 0)."""

TRAIN_FAMILY_FIGURES = tuple(TrainFamilyStats.model_fields)
"""The per-family training figures (``train_per_family``) aggregated over seeds."""


def aggregate(runs_figures: Sequence[RunFigures], methods: Sequence[str] | None = None) -> Aggregates:
    """Per method: the seeds, each figure's mean/std/n over them, per domain and per family too."""
    order = list(methods or [])
    for f in runs_figures:
        if f.method not in order:
            order.append(f.method)
    out: Aggregates = {}
    for method in order:
        rows = sorted((f for f in runs_figures if f.method == method), key=lambda f: f.seed)
        trainer_methods = {f.trainer_method for f in rows} - {None}
        graded = {f.graded_with for f in rows} - {None}
        families = sorted({d for f in rows for d in f.train_per_family or {}})
        out[method] = MethodAggregate(
            trainer_method=trainer_methods.pop() if len(trainer_methods) == 1 else None,
            graded_with=graded.pop() if len(graded) == 1 else ("mixed" if graded else None),
            seeds=[f.seed for f in rows],
            complete_seeds=[f.seed for f in rows if f.complete],
            family_failure={k: v for f in rows for k, v in (f.family_failure or {}).items()},
            per_seed={str(f.seed): _seed_figures(f) for f in rows},
            **{k: stat([getattr(f, k) for f in rows]) for k in SCALARS},
            **{where: _per_group(rows, where) for where in PER_GROUP},
            train_per_family={fam: _train_family(rows, fam) for fam in families},
            harness_decisions=_summed_decisions([f.harness_decisions or {} for f in rows]),
            trial_costs=_summed_costs([f.trial_costs or {} for f in rows]),
        )
    return out


def _seed_figures(f: RunFigures) -> SeedFigures:
    """A run's figures an aggregate keeps per seed (for the paired differences)."""
    return SeedFigures(**{k: getattr(f, k) for k in SeedFigures.model_fields})


def _per_group(rows: Sequence[RunFigures], where: str) -> dict[str, Stat]:
    """A ``{domain or family: value}`` figure over the runs, group by group."""
    groups = sorted({d for f in rows for d in getattr(f, where) or {}})
    return {d: stat([finite_number((getattr(f, where) or {}).get(d)) for f in rows]) for d in groups}


def _train_family(rows: Sequence[RunFigures], fam: str) -> TrainFamilyStats:
    """One family's training figures over the runs."""
    return TrainFamilyStats(
        **{
            k: stat([finite_number(getattr((f.train_per_family or {}).get(fam), k, None)) for f in rows])
            for k in TRAIN_FAMILY_FIGURES
        }
    )


def _summed_decisions(per_run: Sequence[dict[str, FamilyDecisions]]) -> dict[str, FamilyDecisions]:
    """The runs' :func:`~harnessrl.analysis.per_run.harness_decisions`, summed per family."""
    out: dict[str, FamilyDecisions] = {}
    for decisions in per_run:
        for fam, d in decisions.items():
            e = out.setdefault(fam, FamilyDecisions())
            for name, n in d.commits.items():
                e.commits[name] = e.commits.get(name, 0) + n
            for name, n in d.rejected.items():
                e.rejected[name] = e.rejected.get(name, 0) + n
            e.gave_up += d.gave_up
    return dict(sorted(out.items()))


def _summed_costs(per_run: Sequence[dict[str, TrialCost]]) -> dict[str, TrialCost]:
    """The runs' :func:`~harnessrl.analysis.per_run.trial_costs`, summed per remedy."""
    out: dict[str, TrialCost] = {}
    for costs in per_run:
        for name, d in costs.items():
            out[name] = out[name].plus(d) if name in out else TrialCost().plus(d)
    return dict(sorted(out.items()))


def _paired(a: MethodAggregate, b: MethodAggregate, key: str, group: str | None = None) -> Paired:
    """Per-seed differences a - b of a figure (of one domain or family of it) over the seeds both have."""

    def value(side: MethodAggregate, seed: str) -> Number | None:
        v = getattr(side.per_seed[seed], key)
        return finite_number((v or {}).get(group)) if group is not None else v

    seeds = sorted(set(a.per_seed) & set(b.per_seed), key=int)
    diffs = {s: value(a, s) - value(b, s) for s in seeds if value(a, s) is not None and value(b, s) is not None}
    return Paired(
        **dict(stat(list(diffs.values()))),
        per_seed=diffs,
        higher=sum(d > 0 for d in diffs.values()),
        lower=sum(d < 0 for d in diffs.values()),
    )


def t_interval(d: Stat) -> list[float] | None:
    """95% t-interval of the mean of per-seed differences (a :func:`stat` of them); None below 2 seeds."""
    n, mean, std = d.n, d.mean, d.std
    if n < 2 or mean is None or std is None:
        return None
    df = n - 1
    if df <= len(_T975):
        q = _T975[df - 1]
    else:  # Cornish-Fisher from the normal quantile: within 0.003 of t at 30 degrees of freedom
        z = statistics.NormalDist().inv_cdf(0.975)
        q = z + (z**3 + z) / (4 * df)
    half = q * std / math.sqrt(n)
    return [mean - half, mean + half]


def _verdict(d: Paired, *, higher_is_better: bool, good: str, bad: str) -> str:
    """Plain words for a paired difference: no claim from fewer than 3 seeds or from mixed signs."""
    n = d.n
    if n == 0:
        return "no seed has both figures"
    wins, losses = (d.higher, d.lower) if higher_is_better else (d.lower, d.higher)
    if not wins and not losses:
        return f"the same on every seed ({n})"
    counts = f"{good} on {wins} of {n} seed(s), {bad} on {losses}"
    if n < 3:
        return f"{counts}; fewer than 3 seeds: no conclusion"
    for side, k in ((good, wins), (bad, losses)):
        if k == n:
            if abs(d.mean or 0.0) > (d.std or 0.0):
                return f"{side} on every seed ({n})"
            return f"{side} on every seed ({n}), but by amounts that vary more than their mean"
    return f"{counts}; the sign changes between seeds: no consistent difference"


def _paired_score(a: MethodAggregate, b: MethodAggregate, key: str) -> PairedScore:
    """A test score's per-seed differences a - b, with its verdict and 95% t-interval over seeds."""
    d = _paired(a, b, key)
    return PairedScore(
        **dict(d), verdict=_verdict(d, higher_is_better=True, good="higher", bad="lower"), ci95=t_interval(d)
    )


def _spec(method: str, agg: Aggregates) -> MethodSpec | None:
    """The method table's entry for a bench method's runs' ``method`` setting (its name now when renamed since). A
    setting the table does not know (a method registered elsewhere, or none recorded) falls back to the bench
    method's own name when the table knows that; None when neither is in the table (the method is then a baseline)."""
    for name in (agg[method].trainer_method if method in agg else None, method):
        spec = METHOD_TABLE.get(RENAMED_METHODS.get(name, name)) if name is not None else None
        if spec is not None:
            return spec
    return None


def is_harness_arm(method: str, agg: Aggregates) -> bool:
    """A method that runs the evolving harness on the training rubrics: its runs' ``method`` setting (config.yaml)
    names a method that runs the evolver (``harnessrl``, ``harnessrl-grpo``, or a name it had when the runs were made:
    ``harnessrl-dapo``) and does not train on the gold rubrics (that is an oracle)."""
    spec = _spec(method, agg)
    return spec is not None and spec.evolver and spec.train_rubric != "gold"


def is_oracle(method: str, agg: Aggregates) -> bool:
    """An oracle, by its runs' ``method`` setting: a method the table says trains on the gold rubrics (``oracle``,
    plain GRPO; ``oracle-harness``, the harness's own trainer): the bound of any rubric repair, never a baseline the
    harness is compared against."""
    spec = _spec(method, agg)
    return spec is not None and spec.train_rubric == "gold"


def oracle_method(agg: Aggregates) -> str | None:
    """The bench method that stands for the ceiling of any rubric repair: the oracle trained with the harness's own
    trainer (``oracle-harness``) when the bench has one, else plain GRPO on the gold rubrics (``oracle``, which is
    then a bound for plain GRPO, not for the harness: :func:`plain_oracle` says so); None without an oracle."""
    oracles = [m for m in agg if is_oracle(m, agg)]
    same_trainer = [m for m in oracles if (spec := _spec(m, agg)) is not None and spec.evolver]
    return (same_trainer or oracles or [None])[0]


def runs_evolver(method: str, agg: Aggregates) -> bool:
    """Whether a bench method's runs run the evolver (a harness arm, or the oracle trained by the harness)."""
    spec = _spec(method, agg)
    return spec is not None and spec.evolver


def plain_oracle(agg: Aggregates) -> bool:
    """Whether the bench's oracle (:func:`oracle_method`) is plain GRPO on gold, not the harness's own trainer."""
    oracle = oracle_method(agg)
    spec = _spec(oracle, agg) if oracle is not None else None
    return spec is not None and not spec.evolver


def _reference(agg: Aggregates, trainer_method: str) -> str | None:
    """The method that stands for a built-in one (:data:`FIXED_METHOD`, :data:`ORACLE_METHOD`): the bench method of
    that name when its runs' ``method`` setting is it, else the first whose runs' setting is it."""
    if trainer_method in agg and agg[trainer_method].trainer_method == trainer_method:
        return trainer_method
    return next((m for m, a in agg.items() if a.trainer_method == trainer_method), None)


def baselines(agg: Aggregates) -> list[str]:
    """The methods a harness arm is compared against: neither a harness arm nor the oracle."""
    return [m for m in agg if not is_harness_arm(m, agg) and not is_oracle(m, agg)]


def best_baseline(agg: Aggregates) -> str | None:
    """The baseline with the highest mean best validation score, over the seeds every baseline has
    (:func:`best_baseline_choice`): arms are chosen on validation, never on test (docs/design.md section 8). Runs
    without a validation figure (older reports' rows) fall back to the test score at the best-validation checkpoint.
    None: no baseline has either."""
    choice = best_baseline_choice(agg)
    return None if choice is None else choice.method


@dataclass(frozen=True)
class BaselineChoice:
    """The best baseline (:func:`best_baseline_choice`): its method, the mean it won with and the seeds of that mean."""

    method: str
    score: float
    seeds: list[int]


def best_baseline_choice(agg: Aggregates) -> BaselineChoice | None:
    """The best baseline, the mean it won with and the seeds that mean is over: the seeds every scored baseline
    has the figure on (a baseline run on fewer seeds is compared on those, never one mean over other seeds beside
    another's: a seed can be easier for every method); all seeds where they share none, and for a report that chose
    on test (older rows, as it was made). None: no baseline is scored."""
    key = best_baseline_figure(agg)
    if key is None:
        return None
    scored = [m for m in baselines(agg) if agg[m].figure(key).mean is not None]
    has = {m: {int(s) for s, f in agg[m].per_seed.items() if getattr(f, key, None) is not None} for m in scored}
    shared = sorted(set.intersection(*has.values())) if has and key == "validation_best" else []

    def mean(m: str) -> float:
        if not shared:
            return agg[m].figure(key).mean or 0.0
        return statistics.fmean(getattr(agg[m].per_seed[str(s)], key) for s in shared)

    best = max(scored, key=mean)
    return BaselineChoice(best, mean(best), shared or sorted(set.union(*has.values())))


def best_baseline_figure(agg: Aggregates) -> str | None:
    """The figure :func:`best_baseline` chooses on: ``validation_best`` where every baseline has one, else (older
    rows) ``test_at_best`` where one has it; None: neither."""
    bases = baselines(agg)
    if bases and all(agg[m].validation_best.mean is not None for m in bases):
        return "validation_best"
    if any(agg[m].test_at_best.mean is not None for m in bases):
        return "test_at_best"
    return None


CHECKPOINT_STEP = {
    "test_at_best": "steps_to_best",
    "test_end": "test_end_step",
    "test_at_equal_rollouts": "equal_rollouts_step",
}
"""Each compared test score -> the run figure naming the step of the evaluation it comes from."""


def task_bootstrap(
    runs_figures: Sequence[RunFigures],
    arm: str,
    base: str,
    key: str,
    draws: int = BOOTSTRAP_DRAWS,
    seed: int = BOOTSTRAP_SEED,
) -> Bootstrap | None:
    """Paired bootstrap over test tasks of ``arm - base`` at one compared checkpoint (``key``).

    Per task, the difference of the two runs' per-task scores at that checkpoint, averaged over the seeds
    both have; the task ids are resampled with replacement ``draws`` times (a fixed ``seed``) and the
    mean difference taken each time. Returns the mean over tasks, the 2.5% and 97.5% points, and how many
    tasks and seeds it rests on; None when no seed has per-task scores at both checkpoints."""
    by = {(f.method, f.seed): f for f in runs_figures}
    per_task: dict[str, list[float]] = {}
    seeds = []
    for (method, s), fa in sorted(by.items(), key=lambda kv: kv[0][1]):
        fb = by.get((base, s))
        if method != arm or fb is None:
            continue
        ta = fa.test_per_task.get(getattr(fa, CHECKPOINT_STEP[key]))  # type: ignore[arg-type]
        tb = fb.test_per_task.get(getattr(fb, CHECKPOINT_STEP[key]))  # type: ignore[arg-type]
        common = sorted(set(ta or {}) & set(tb or {}))
        if not common:
            continue
        seeds.append(s)
        for t in common:
            per_task.setdefault(t, []).append(ta[t] - tb[t])  # type: ignore[index]
    if not per_task:
        return None
    diffs = [statistics.fmean(per_task[t]) for t in sorted(per_task)]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(draws))
    cuts = statistics.quantiles(means, n=40, method="inclusive")  # 2.5% steps: first 2.5%, last 97.5%
    return Bootstrap(
        mean=statistics.fmean(diffs), low=cuts[0], high=cuts[-1], tasks=len(diffs), seeds=seeds, draws=draws
    )


SCORE_COMPARISONS = ("test_at_best", "test_end", "test_at_equal_rollouts")
"""The test scores each harness arm is compared on against each baseline."""

SAMPLING_SE = {"test_at_best": "test_at_best_se", "test_end": "test_end_se"}
"""Each compared test score with a sampling standard error -> the run figure holding it (an evaluation's own: the
score at equal rollouts is one of several evaluations, and has none)."""


def compare(agg: Aggregates, runs_figures: Sequence[RunFigures] = ()) -> list[Comparison]:
    """Each harness arm against each baseline (not the oracle): paired per-seed differences (harness minus
    baseline) of the test score at the best-validation checkpoint, at the end and at equal rollouts
    spent, and of steps to best; each with its 95% t-interval over seeds and, given the runs' figures,
    a paired bootstrap over test tasks. ``best_baseline`` marks the comparison with the best baseline."""
    arms = [m for m in agg if is_harness_arm(m, agg)]
    best = best_baseline(agg)
    out = []
    for arm in arms:
        for base in baselines(agg):
            a, b = agg[arm], agg[base]
            steps = _paired(a, b, "steps_to_best")
            ma, mb = a.steps_to_best.mean, b.steps_to_best.mean
            out.append(
                Comparison(
                    harness=arm,
                    baseline=base,
                    best_baseline=base == best,
                    # what arms are chosen on (section 8)
                    validation_best=ComparedScore(**dict(_paired_score(a, b, "validation_best"))),
                    **{
                        key: ComparedScore(
                            **dict(_paired_score(a, b, key)),
                            bootstrap=task_bootstrap(runs_figures, arm, base, key) if runs_figures else None,
                            sampling_sd=sampling_sd(a, b, SAMPLING_SE[key]) if key in SAMPLING_SE else None,
                        )
                        for key in SCORE_COMPARISONS
                    },
                    steps_to_best=ComparedSteps(
                        **dict(steps),
                        verdict=_verdict(steps, higher_is_better=False, good="fewer steps", bad="more steps"),
                        ci95=t_interval(steps),
                        ratio_of_means=ma / mb if ma is not None and mb else None,
                    ),
                )
            )
    return out


def sampling_sd(a: MethodAggregate, b: MethodAggregate, se_key: str) -> float | None:
    """The sd a seed's paired difference a - b has from the evaluations' sampling of answers alone (each score's
    ``sampling_se``, ``se_key`` of the runs' figures): the root mean over the paired seeds of se_a^2 + se_b^2.
    Set beside the spread of the differences over seeds, it says how much of that spread is the evaluation's
    draw rather than training's. None when a paired seed's evaluation has no such figure (greedy, older runs)."""
    seeds = sorted(set(a.per_seed) & set(b.per_seed), key=int)
    pairs = [(getattr(a.per_seed[s], se_key), getattr(b.per_seed[s], se_key)) for s in seeds]
    if not pairs or any(x is None or y is None for x, y in pairs):
        return None
    return math.sqrt(statistics.fmean(x * x + y * y for x, y in pairs))


def oracle_bound(agg: Aggregates) -> OracleBound | None:
    """The oracle against the best baseline, paired by seed like :func:`compare`'s rows, at the best checkpoint and
    at the end: the oracle is the bound of any rubric repair, so this says what a harness arm that repaired every
    rubric as gold does could show against the best baseline at these seeds. None without an oracle or a baseline."""
    oracle, best = oracle_method(agg), best_baseline(agg)
    if oracle is None or best is None:
        return None
    return OracleBound(
        oracle=oracle, baseline=best, **{key: _paired_score(agg[oracle], agg[best], key) for key in ABLATION_SCORES}
    )


ABLATION_SCORES = ("test_at_best", "test_end")
"""The test scores an ablation arm is compared on against its reference, overall and per family."""

ABLATION_COSTS = ("rollouts_trial", "harness_overhead_share")
"""What an ablation changes in the harness's cost, paired by seed against its reference."""


def ablation_reference(arm: str, settings: dict[str, Settings], arms: Sequence[str]) -> tuple[str, Settings] | None:
    """The harness arm ``arm`` is an ablation of, and the settings it changes.

    ``settings`` are the bench's method settings (``bench.json``'s ``methods``). The reference is the other
    harness arm all of whose setting keys ``arm`` also sets, with the fewest settings changed (added or given
    another value); the first such arm in ``arms`` on a tie. None: no arm's settings are within ``arm``'s."""
    mine = settings.get(arm)
    if mine is None:
        return None
    best: tuple[int, str, Settings] | None = None
    for ref in arms:
        theirs = settings.get(ref)
        if ref == arm or theirs is None or not set(theirs) <= set(mine):
            continue
        changes = {k: v for k, v in mine.items() if k not in theirs or theirs[k] != v}
        if changes and (best is None or len(changes) < best[0]):
            best = (len(changes), ref, changes)
    return (best[1], best[2]) if best else None


def _family_ablation(a: MethodAggregate, ref: MethodAggregate, where: str, fam: str) -> FamilyAblation:
    """One family's paired difference arm - reference, beside the reference's seed spread there."""
    d = _paired(a, ref, where, fam)
    theirs = ref.per_group(where).get(fam)
    spread = theirs.std if theirs is not None else None
    one_sign = d.n > 0 and d.n in (d.higher, d.lower)
    beyond = None if spread is None or not d.n else bool(one_sign and abs(d.mean or 0.0) > spread)
    return FamilyAblation(**dict(d), spread=spread, beyond_spread=beyond)


def ablations(agg: Aggregates, settings: dict[str, Settings]) -> list[Ablation]:
    """Each harness arm against the arm whose settings it changes (:func:`ablation_reference`): paired per-seed
    differences, arm minus reference, of the test score (overall and per family, at the best-validation
    checkpoint and at the end) and of the harness's cost (trial rollouts, wall-time share).

    Per family, ``spread`` is the reference's sample std over seeds of that family's score (None below two
    seeds), and ``beyond_spread`` says whether the difference has one sign on every paired seed and a mean
    larger than that spread: the test of a remedy earning its place on a family."""
    arms = [m for m in agg if is_harness_arm(m, agg)]
    out = []
    for arm in arms:
        found = ablation_reference(arm, settings, arms)
        if found is None:
            continue
        ref, changes = found
        a, r = agg[arm], agg[ref]
        per_family = {}
        for key in ABLATION_SCORES:
            where = f"{key}_per_family"
            common = sorted(set(a.per_group(where)) & set(r.per_group(where)))
            per_family[key] = {fam: _family_ablation(a, r, where, fam) for fam in common}
        out.append(
            Ablation(
                arm=arm,
                reference=ref,
                changes=changes,
                **{key: _paired_score(a, r, key) for key in ABLATION_SCORES},
                **{key: _paired(a, r, key) for key in ABLATION_COSTS},
                per_family=per_family,
            )
        )
    return out


def _gap_cell(agg: Aggregates, oracle: str, fixed: str, get: Callable[[MethodAggregate], Number | None]) -> GapCell:
    """One oracle-gap figure: fixed's and the oracle's seed means, the gap, and each other method's share."""
    o, f = get(agg[oracle]), get(agg[fixed])
    means = {m: get(a) for m, a in agg.items()}
    if o is None or f is None:
        missing = " and ".join(m for m, v in ((fixed, f), (oracle, o)) if v is None)
        return GapCell(fixed=f, oracle=o, means=means, note="not recorded by " + missing)
    if o - f < MIN_ORACLE_GAP:
        return GapCell(
            fixed=f,
            oracle=o,
            gap=o - f,
            shares={m: None for m in agg if m not in (oracle, fixed)},
            means=means,
            note=f"the oracle is not ahead of fixed by {MIN_ORACLE_GAP} (gap {o - f:+.3f}): "
            "no share of a gap this small",
        )
    shares = {m: (v - f) / (o - f) if v is not None else None for m, v in means.items() if m not in (oracle, fixed)}
    return GapCell(fixed=f, oracle=o, gap=o - f, shares=shares, means=means)


def _family_mean(a: MethodAggregate, where: str, fam: str) -> Number | None:
    """A method's seed mean of a per-family figure on one family (None: no seed scored it)."""
    st = a.per_group(where).get(fam)
    return st.mean if st is not None else None


def oracle_gap(agg: Aggregates) -> OracleGap | None:
    """The share of the fixed→oracle gap each method closes, ``(method - fixed) / (oracle - fixed)`` on the
    seed-mean gold test scores at the best-validation checkpoint and at the end, overall and per family;
    None without both a ``fixed`` and an ``oracle`` method. A gap below :data:`MIN_ORACLE_GAP` gets no
    share (its cell's ``note`` says so); runs not graded with gold get none either (``note``)."""
    oracle, fixed = oracle_method(agg), _reference(agg, FIXED_METHOD)
    if oracle is None or fixed is None:
        return None
    gap = OracleGap(oracle=oracle, fixed=fixed, plain=plain_oracle(agg), min_gap=MIN_ORACLE_GAP)
    ungraded = [m for m in (fixed, oracle) if agg[m].graded_with != "gold"]
    if ungraded:
        gap.note = (
            f"{', '.join(ungraded)} not graded with the gold rubrics: the oracle's gap is only meaningful on gold"
        )
        return gap
    for key in ("test_at_best", "test_end"):
        where = f"{key}_per_family"
        families = sorted(set(agg[oracle].per_group(where)) | set(agg[fixed].per_group(where)))
        gap.at[key] = GapAt(
            overall=_gap_cell(agg, oracle, fixed, lambda a, key=key: a.figure(key).mean),
            per_family={
                fam: _gap_cell(agg, oracle, fixed, lambda a, w=where, fam=fam: _family_mean(a, w, fam))
                for fam in families
            },
        )
    return gap


def _fault_figures(a: MethodAggregate, fam: str) -> FaultFigures:
    """A method's figures on one family for the fault check (seed means)."""
    train = a.train_per_family.get(fam)
    return FaultFigures(
        groups=train.groups.mean if train else None,
        flat_low=train.flat_low.mean if train else None,
        flat_high=train.flat_high.mean if train else None,
        gold_start=_family_mean(a, "test_start_per_family", fam),
        proxy_start=_family_mean(a, "proxy_test_start_per_family", fam),
        gold_end=_family_mean(a, "test_end_per_family", fam),
        proxy_end=_family_mean(a, "proxy_test_end_per_family", fam),
    )


def fault_check(agg: Aggregates) -> FaultCheck | None:
    """Does each injected failure show where it should? For ``fixed`` and ``oracle`` (those present), per
    family: the training shares of flat all-low and all-high groups, the proxy and gold test scores at
    step 0 and at the end (seed means), and oracle minus fixed on gold at the end with the spread of the
    per-seed differences (``exceeds_spread``: the mean difference is larger than their std). The oracle here is
    plain GRPO on gold when the bench has it (does the failure hurt fixed GRPO: the same trainer on the two rubrics),
    else the bench's oracle."""
    fixed, oracle = _reference(agg, FIXED_METHOD), _reference(agg, ORACLE_METHOD) or oracle_method(agg)
    present = {role: m for role, m in (("fixed", fixed), ("oracle", oracle)) if m is not None}
    if not present:
        return None
    families = sorted(
        {
            fam
            for m in present.values()
            for fam in (*agg[m].train_per_family, *(f for where in FAMILY_SCORES for f in agg[m].per_group(where)))
        }
    )
    failures = {k: v for m in present.values() for k, v in agg[m].family_failure.items()}
    rows = []
    for fam in families:
        gap = None
        if fixed is not None and oracle is not None:
            d = _paired(agg[oracle], agg[fixed], "test_end_per_family", fam)
            gap = OracleMinusFixed(**dict(d), exceeds_spread=None if d.std is None else abs(d.mean or 0.0) > d.std)
        rows.append(
            FaultRow(
                family=fam,
                failure=failures.get(fam),
                **{role: _fault_figures(agg[m], fam) for role, m in present.items()},
                oracle_minus_fixed=gap,
            )
        )
    return FaultCheck(fixed=fixed, oracle=oracle, families=rows)


SameBenchmark = Callable[[str, str], bool]
"""Whether two bench configs (as their manifests name them) are one benchmark; the CLI passes
:func:`harnessrl.bench.config.same_benchmark` (they train the same), a bare call compares the names."""


def same_name(a: str, b: str) -> bool:
    """Two bench configs are one benchmark when they are one file (the rule when nothing can read them)."""
    return a == b


def agree(
    merged: BenchManifest,
    method_from: dict[str, str],
    source: str,
    manifest: BenchManifest,
    same: SameBenchmark = same_name,
) -> None:
    """Fold one source's bench config and method settings (``manifest``) into ``merged``, or refuse where they
    disagree with the sources before it (``method_from``: method -> the first source that named it), naming both: one
    report reads one benchmark (``same``: two configs that differ only in how their runs were run, a wall-clock limit
    say, are one), and one name is one arm. Every config read is listed in ``merged.bench_configs``."""
    config = manifest.bench_config
    first = merged.bench_config
    if config is not None and first not in (None, config) and not same(first, config):
        raise HarnessRLError(
            f"{source} was run from bench config {config!r}, the sources before it from "
            f"{first!r}, and the two do not train the same (their base training config or overrides differ, or "
            "one cannot be read from here): one report reads one benchmark (report them apart)"
        )
    merged.bench_config = first or config
    merged.bench_configs = [c for c in dict.fromkeys([*merged.bench_configs, first, config]) if c]
    for method, settings in manifest.methods.items():
        if method in merged.methods and merged.methods[method] != settings:
            raise HarnessRLError(
                f"method {method!r} has other settings in {source} ({settings}) than in {method_from[method]} "
                f"({merged.methods[method]}): one name, one arm (name one of them differently in its bench "
                "config's method_settings, or report the sources apart)"
            )
        merged.methods.setdefault(method, settings)
        method_from.setdefault(method, source)


def load_benches(
    bench_dirs: Sequence[str | Path], same: SameBenchmark = same_name
) -> tuple[list[RunData], BenchManifest]:
    """The runs of one or several bench folders read as one bench, and their manifests merged.

    Several folders are how a study grows: ablations run in another folder from the baselines, a seed added
    later, two lines of runs side by side on one machine. They merge only where they agree (:func:`agree`): one
    bench config, one set of settings per method name, and one run per method and seed; anything else is an
    error that names the folders, so no report silently mixes two configurations under one name."""
    if not bench_dirs:
        raise HarnessRLError("no bench folder given (pass --dir once per folder made by `harnessrl bench run`)")
    if len(bench_dirs) == 1:
        return load_runs(bench_dirs[0])
    runs: list[RunData] = []
    merged = BenchManifest()
    method_from: dict[str, str] = {}  # method -> the first folder that named it
    run_from: dict[str, str] = {}  # method/seed<k> -> the folder holding that run
    for folder in bench_dirs:
        part, manifest = load_runs(folder)
        agree(merged, method_from, str(folder), manifest, same)
        for run in part:
            key = f"{run.method}/seed{run.seed}"
            if key in run_from:
                raise HarnessRLError(
                    f"{key} is in both {run_from[key]} and {folder}: a report takes one run per method and seed "
                    "(leave one folder out, or report them apart)"
                )
            run_from[key] = str(folder)
            runs.append(run)
        # a row for a run another folder holds (one not run here, say) must not replace that folder's row
        merged.runs.update({k: row for k, row in manifest.runs.items() if run_from.get(k) in (None, str(folder))})
    return runs, merged


def load_runs(bench_dir: str | Path) -> tuple[list[RunData], BenchManifest]:
    """Every run under a bench folder (``<dir>/<method>/seed<k>``) and the bench manifest (empty without one).

    Runs listed in ``bench.json`` come in its order; any other ``seed<k>`` folder with a config.yaml is
    read too."""
    root = Path(bench_dir)
    if not root.is_dir():
        raise HarnessRLError(f"{root}: no such bench folder (make one with `harnessrl bench run`)")
    manifest = read_bench_manifest(root / "bench.json") or BenchManifest()
    runs: list[RunData] = []
    seen: set[Path] = set()
    for row in manifest.runs.values():
        path = Path(row.run_dir or "")
        if not path.is_dir():
            alt = root / str(row.method) / f"seed{row.seed}"  # the folder was moved
            path = alt if alt.is_dir() else path
        if path.is_dir() and (path / "config.yaml").is_file():
            runs.append(RunData.read(path, str(row.method), int(row.seed or 0), row))
            seen.add(path.resolve())
    for cfg in sorted(root.glob("*/seed*/config.yaml")):
        path = cfg.parent
        if path.resolve() in seen:
            continue
        try:
            seed = int(path.name.removeprefix("seed"))
        except ValueError:
            continue
        runs.append(RunData.read(path, path.parent.name, seed))
    if not runs:
        raise HarnessRLError(
            f"{root}: no runs found (expected <method>/seed<k>/config.yaml folders made by `harnessrl bench run`)"
        )
    return runs, manifest
