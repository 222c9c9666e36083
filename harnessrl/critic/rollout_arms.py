"""The rollout-arms recipe (rollout guidance, any interface that shapes rows): fresh rollouts now vs with the candidate.

Two arms of fresh rollouts of the frozen policy per probed task, ``rollouts_per_arm`` each, made of the
trainer's own groups: the rows the harness shapes now, and the rows it would shape with the candidate
(``Harness.row(..., overlay=update)``: prompt and sampling settings), both graded with the current rubric.
Members the candidate leaves alone are the same draw in both arms, so they are generated once and shared
(a paired stratum); only the changed members differ (an unpaired one).

**The probe order**: a candidate that reaches several tasks is probed on up to two of them, the
failure's task first, then tasks whose groups were recently flat, then tasks sampled now; tasks the
candidate does not change are skipped, and a task whose arms would overrun the budget is dropped rather
than overrun (none fits: rejected with a budget reason). The stages: plan the arms, fit them to the
budget, generate and grade each task's arms, build its groups, then measure (the share of groups that
give signal or whose targeted criterion discriminates, or |Spearman rho| of reward with a feature over
the pooled arms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harnessrl.critic.acceptance import Measured
from harnessrl.critic.budget import Rejected, bounds_text, count_judged
from harnessrl.critic.context import TrialContext
from harnessrl.critic.protocols import RowView
from harnessrl.critic.signal import CRITERION_SIGNAL, RHO_PREFIX
from harnessrl.critic.stats import (
    Group,
    Side,
    clip_example,
    correlation_fall,
    nan_if_none,
    none_if_nan,
    rounded,
    rounded_all,
    share_verdict,
    surface_feature,
    verdict_row,
)
from harnessrl.data.schema import Criterion, Task
from harnessrl.records.evidence import CriterionStreakEvidence
from harnessrl.records.failures import Failure
from harnessrl.records.measurements import ProbedTask, SettingSides, SideTexts

__all__ = ["PROBED_TASKS", "rollout_arms"]

PROBED_TASKS = 2
"""Tasks a trial of a candidate that reaches several tasks (a domain's guidance) probes at most."""


@dataclass
class _Plan:
    """One probed task's arms: each member's row now and with the candidate, and the members that differ."""

    task: Task
    base_rows: list[RowView]
    cand_rows: list[RowView]
    differ: list[int]


@dataclass
class _Arms:
    """One task's arms, generated and graded with its current rubric (rewards NaN: missing)."""

    base_texts: list[str]
    cand_texts: list[str]
    base: np.ndarray
    cand: np.ndarray
    verdicts: dict[str, dict[str, float | None]]
    rubric: list[Criterion]


def rollout_arms(trial: TrialContext, targets: Sequence[Task], describe: str) -> Measured:
    """Two arms of fresh rollouts on ``targets`` (the failure's task first, then recently flat and
    active ones; one task, or up to two of several): rows as shaped now vs with the candidate."""
    if not trial.budget.can_sample:
        raise Rejected(f"no policy sampler: a {trial.update.interface} trial needs fresh rollouts of the frozen policy")
    gsz, n = trial.probe_shape()
    fitted = _fit_budget(trial, _plans(trial, targets, describe, gsz, n), n)
    m = trial.measurements
    target_ids = _failure_criterion(trial.failure) if trial.metric == CRITERION_SIGNAL else set()
    per_task: list[ProbedTask] = []
    m.tasks = per_task
    groups: list[Group] = []
    pooled: list[_Arms] = []  # the arms with rewards enough, for correlations
    per_call = 0.0
    for plan in fitted:
        arms, per_call = _generate_and_grade(trial, plan, n, per_call)
        row, task_groups = _task_groups(trial, plan, arms, gsz, n, target_ids)
        if task_groups is not None:
            groups.extend(task_groups)
            pooled.append(arms)
        per_task.append(row)
    rng = np.random.default_rng(trial.config.seed)
    if trial.metric.startswith(RHO_PREFIX):
        return _correlation(trial, pooled, rng)
    if not groups:
        raise Rejected("no probed task has 2 or more rewards in both arms")
    return share_verdict(groups, trial.metric, trial.config, rng, m)


# ---------------------------------------------------------------------------------------------- stages
def _plans(trial: TrialContext, targets: Sequence[Task], describe: str, gsz: int, n: int) -> list[_Plan]:
    """The arms of the tasks to probe, in probe order, skipping tasks the candidate leaves as they are."""
    harness, update = trial.harness, trial.update
    plans: list[_Plan] = []
    unchanged: list[str] = []
    for task in _probe_order(trial, targets):
        # each arm is made of the trainer's own groups: G members, each shaped as the trainer shapes it
        base_rows = [harness.row(task, k % gsz, gsz) for k in range(n)]
        cand_rows = [harness.row(task, k % gsz, gsz, overlay=update) for k in range(n)]
        differ = [k for k in range(n) if base_rows[k] != cand_rows[k]]
        if differ:
            plans.append(_Plan(task, base_rows, cand_rows, differ))
        else:
            unchanged.append(task.id)
        if len(plans) == (1 if len(targets) == 1 else PROBED_TASKS):
            break
    trial.measurements.rollouts_per_arm, trial.measurements.group_size = n, gsz
    if unchanged:
        trial.measurements.tasks_unchanged = unchanged
    if not plans:
        raise Rejected(
            f"the candidate changes no prompt or sampling setting of {describe}"
            + (f" (tasks {unchanged} keep their own rule)" if unchanged else "")
        )
    return plans


def _fit_budget(trial: TrialContext, plans: list[_Plan], n: int) -> list[_Plan]:
    """The plans that fit the budget, in order: drop probed tasks rather than overrun; none fits: pending when only the
    run's share of rollouts is short (it grows as training generates, docs/design.md §4), else rejected."""
    budget, cfg = trial.budget, trial.config

    def cost(plan: _Plan) -> tuple[int, int]:  # rollouts (one arm, then the changed members), judge calls at most
        gens = n + len(plan.differ)
        return gens, gens * count_judged(trial.harness.rubrics.current(plan.task.id).criteria)

    fitted: list[_Plan] = []
    used, calls = 0, 0
    for plan in plans:
        gens, judge_calls = cost(plan)
        if not budget.fits(used + gens, calls + judge_calls):
            break
        fitted.append(plan)
        used, calls = used + gens, calls + judge_calls
    if not fitted:
        first = plans[0]
        gens, judge_calls = cost(first)
        need = f"probing task {first.task.id} needs {gens} rollouts ({n} per arm, {n - len(first.differ)} shared)"
        cap = trial.measurements.rollout_cap if trial.measurements.rollout_cap is not None else cfg.max_rollouts
        if gens <= cap and judge_calls <= cfg.max_judge_calls:
            # only the run's share is short, and it grows as training generates: not refused, measured later
            raise Rejected(
                f"pending: {need}; the run's trial allowance affords {cfg.max_rollouts} now (evolver.trials."
                "max_rollout_share of the rollouts training generated so far, less what trials spent): measured once "
                "training has generated enough",
                kind="pending",
            )
        # max_rollouts or the judge calls stop it, not the run's share: the bounds as configured, no word of the share
        bounds = bounds_text(cfg.model_copy(update={"max_rollouts": cap}))
        raise Rejected(f"budget: {need} and up to {judge_calls} judge calls; {bounds}", kind="budget")
    if len(fitted) < len(plans):
        trial.measurements.tasks_dropped_for_budget = [p.task.id for p in plans[len(fitted) :]]
    return fitted


def _generate_and_grade(trial: TrialContext, plan: _Plan, n: int, per_call: float) -> tuple[_Arms, float]:
    """A task's baseline arm, then only its changed members with the candidate (the others are shared),
    graded with the current rubric; and the seconds one rollout took (to check the time of the next)."""
    budget, task, differ = trial.budget, plan.task, plan.differ
    budget.need_time(per_call * n, f"generating the baseline arm of task {task.id}")
    t0 = budget.seconds
    base_texts = budget.sample_rows(plan.base_rows)
    per_call = (budget.seconds - t0) / max(1, n)
    budget.need_time(per_call * len(differ), f"generating the candidate arm of task {task.id}")
    fresh = budget.sample_rows([plan.cand_rows[k] for k in differ])
    cand_texts = list(base_texts)
    for k, text in zip(differ, fresh, strict=True):
        cand_texts[k] = text
    rubric = trial.harness.rubrics.current(task.id).criteria
    what = f"grading the arms of task {task.id}"
    (graded,) = budget.grade(task, base_texts + cand_texts, [rubric], what, time_checks=[what])
    arms = _Arms(
        base_texts=base_texts,
        cand_texts=cand_texts,
        base=np.array([nan_if_none(graded[t].reward) for t in base_texts]),
        cand=np.array([nan_if_none(graded[t].reward) for t in cand_texts]),
        verdicts={t: verdict_row(r) for t, r in graded.items()},
        rubric=rubric,
    )
    return arms, per_call


def _task_groups(
    trial: TrialContext, plan: _Plan, arms: _Arms, gsz: int, n: int, target_ids: set[str]
) -> tuple[ProbedTask, list[Group] | None]:
    """A probed task's row of the measurements, and its groups (None: too few rewards in an arm)."""
    base, cand, differ = arms.base, arms.cand, plan.differ
    crit_targets = [c.id for c in arms.rubric if c.id in target_ids]
    shared = [k for k in range(n) if k not in differ and not np.isnan(base[k])]
    d_b = [k for k in differ if not np.isnan(base[k])]
    d_c = [k for k in differ if not np.isnan(cand[k])]
    b0, c0 = plan.base_rows[0], plan.cand_rows[0]
    row = ProbedTask(
        task_id=plan.task.id,
        temperature=SettingSides(baseline=b0.temperature, candidate=c0.temperature),
        **_generation_changes(b0, c0),
        members_changed=differ,
        candidate_guided=[bool(plan.cand_rows[k].guided) for k in range(n)],
        baseline_rewards=rounded_all(none_if_nan(base)),
        candidate_rewards=rounded_all(none_if_nan(cand)),
        examples=SideTexts(
            baseline=[clip_example(arms.base_texts[k]) for k in differ[:2]],
            candidate=[clip_example(arms.cand_texts[k]) for k in differ[:2]],
        ),
    )
    vb, vc = base[~np.isnan(base)], cand[~np.isnan(cand)]
    if vb.size < 2 or vc.size < 2:
        return row, None
    noise, eps = trial.config.signal.verdict_noise, trial.advantage.flat_eps
    rows_b = [arms.verdicts[t] for t in arms.base_texts]
    rows_c = [arms.verdicts[t] for t in arms.cand_texts]
    side_b = Side.graded(base, rows_b, arms.rubric, noise, crit_targets, eps)
    side_c = Side.graded(cand, rows_c, arms.rubric, noise, crit_targets, eps)
    groups = _split_groups(side_b, side_c, gsz, shared, d_b, d_c)
    row.baseline_mean, row.baseline_std = rounded(vb.mean()), rounded(vb.std())
    row.candidate_mean, row.candidate_std = rounded(vc.mean()), rounded(vc.std())
    row.noise_floor_baseline, row.noise_floor_candidate = rounded(side_b.floor()), rounded(side_c.floor())
    row.gives_signal_baseline = [bool(g.base.gives_signal()) for g in groups]
    row.gives_signal_candidate = [bool(g.cand.gives_signal()) for g in groups]
    if crit_targets:
        row.targeted_criteria = crit_targets
    return row, groups


def _correlation(trial: TrialContext, pooled: list[_Arms], rng: np.random.Generator) -> Measured:
    """|Spearman rho| of reward with a feature over the pooled arms, each arm resampled on its own."""
    feature = trial.metric[len(RHO_PREFIX) :]
    fn = surface_feature(feature)
    if not pooled:
        raise Rejected("too few rewards in the arms to measure a correlation")
    rb, rc = np.concatenate([a.base for a in pooled]), np.concatenate([a.cand for a in pooled])
    fb = np.array([fn(t) for a in pooled for t in a.base_texts], dtype=float)
    fc = np.array([fn(t) for a in pooled for t in a.cand_texts], dtype=float)
    okb, okc = ~np.isnan(rb), ~np.isnan(rc)
    rb, fb, rc, fc = rb[okb], fb[okb], rc[okc], fc[okc]
    if rb.size < 4 or rc.size < 4:
        raise Rejected("fewer than 4 rewarded rollouts per arm: no correlation to measure")
    got = correlation_fall((rb, fb), (rc, fc), trial.config, rng, paired=False)
    trial.measurements.feature = feature
    return got


# ---------------------------------------------------------------------------------------------- helpers
def _probe_order(trial: TrialContext, targets: Sequence[Task]) -> list[Task]:
    """``targets`` in the order a rollout trial probes them: the failure's task, then tasks whose
    groups were recently flat, then tasks sampled now, then the rest."""
    if len(targets) <= 1:
        return list(targets)
    by_id = {t.id: t for t in targets}
    step = trial.next_step
    order: list[str] = []
    if trial.failure is not None and trial.failure.task_id in by_id:
        order.append(trial.failure.task_id)
    for record in reversed(trial.recorder.steps.values()):  # recently flat groups first
        order.extend(g.task_id for g in record.observed if g.flat and g.task_id in by_id)
    order.extend(t.id for t in targets if trial.harness.sampling.status_at(t.id, step) == "active")
    order.extend(by_id)
    return [by_id[tid] for tid in dict.fromkeys(order)]


def _failure_criterion(failure: Failure | None) -> set[str]:
    cid = failure.evidence.narrow(CriterionStreakEvidence).criterion_id if failure is not None else None
    return {str(cid)} if cid else set()


def _generation_changes(base: RowView, cand: RowView) -> dict[str, dict[str, SettingSides]]:
    """Sampling settings besides the temperature that the candidate changes (for the measurements: the row's
    ``generation``, left out when none changes)."""
    keys = sorted((set(base.generation) | set(cand.generation)) - {"temperature"})
    changed = {k: SettingSides(baseline=base.generation.get(k), candidate=cand.generation.get(k)) for k in keys}
    return {"generation": changed} if any(v.baseline != v.candidate for v in changed.values()) else {}


def _split_groups(
    side_b: Side, side_c: Side, gsz: int, shared: Sequence[int], d_b: Sequence[int], d_c: Sequence[int]
) -> list[Group]:
    """An arm's consecutive groups of ``gsz`` rollouts, each with its paired (shared) and unpaired strata."""
    out = []
    for start in range(0, side_b.rewards.size, gsz):
        idx = np.arange(start, start + gsz)
        local = {int(k): i for i, k in enumerate(idx)}

        def pick(members: Sequence[int], local: dict[int, int] = local) -> np.ndarray:
            return np.array([local[k] for k in members if k in local], dtype=int)

        b, c = side_b.take(idx), side_c.take(idx)
        if (~np.isnan(b.rewards)).sum() < 2 or (~np.isnan(c.rewards)).sum() < 2:
            continue
        sh = pick(shared)
        out.append(Group(b, c, [(sh, sh, True), (pick(d_b), pick(d_c), False)]))
    return out
