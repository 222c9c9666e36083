"""The moved-draws recipe (task sampling, ``ReweightTasks``): the signal of the draws new sampling probabilities move.

Each task's within-group signal comes from the **replayed sides**: its most recent step records
(``recorder.steps``; a group's own verdicts while its step's rollouts are kept, else its per-criterion
means), or, for the tasks the update promotes, from a probe batch of fresh rollouts (those without records
first, as far as the budget goes). The metric is ``moved_signal_share``: of the draws the candidate
probabilities (``sampling.probabilities_with``) move from some tasks to others, the share that give
signal where they land vs where they were (a change to one task moves only its share of a batch, so the
batch-wide share could change by no more than that); the batch-wide expectation under both distributions
is recorded beside it (``batch_signal_share``). The stages: replay, probe, the tasks with statistics,
measure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harnessrl.critic.acceptance import Measured, percentile_interval
from harnessrl.critic.budget import Rejected, bounds_text, count_judged
from harnessrl.critic.context import TrialContext
from harnessrl.critic.signal import NO_EFFECT
from harnessrl.critic.stats import (
    Side,
    clip_example,
    nan_if_none,
    none_if_nan,
    resample_indices,
    rounded,
    rounded_all,
    verdict_row,
)
from harnessrl.data.schema import Task
from harnessrl.records.measurements import Probe, SampledTask, Shares
from harnessrl.records.steps import GroupRecord

__all__ = ["REPLAY_GROUPS", "moved_draws"]

REPLAY_GROUPS = 4
"""Most recent step records of a task replayed by a sampling trial."""

_TaskStats = dict[str, tuple[str, list[Side]]]
"""Task id -> (where its groups come from: "probe" or "replay", its groups)."""


def moved_draws(
    trial: TrialContext,
    p: dict[str, float],
    q: dict[str, float],
    changed_ids: Sequence[str],
    promoted: Sequence[str],
) -> Measured:
    """The share of the draws moving from sampling probabilities ``p`` to ``q`` that give signal,
    where they land vs where they were; ``promoted`` tasks are probed with fresh rollouts."""
    replay = _replay(trial)
    stats = _probe(trial, promoted, replay)
    for tid, rows in replay.items():
        if tid not in stats and tid in p and rows:
            stats[tid] = ("replay", rows)
    known = _tasks_with_stats(trial, p, q, changed_ids, stats)
    return _measure(trial, p, q, known, stats)


# ---------------------------------------------------------------------------------------------- stages
def _replay(trial: TrialContext) -> dict[str, list[Side]]:
    """Each task's most recent recorded groups (at most :data:`REPLAY_GROUPS`), newest first."""
    replay: dict[str, list[Side]] = {}
    for record in reversed(trial.recorder.steps.values()):
        for g in record.observed:
            rows = replay.setdefault(g.task_id, [])
            if len(rows) < REPLAY_GROUPS:
                side = _replayed_side(trial, g)
                if side is not None:
                    rows.append(side)
    return replay


def _probe(trial: TrialContext, promoted: Sequence[str], replay: dict[str, list[Side]]) -> _TaskStats:
    """Probe the promoted tasks, those with no records first, as far as the budget goes (a task with
    records that does not fit is replayed instead; one without is a rejection)."""
    budget, cfg = trial.budget, trial.config
    gsz, n = trial.probe_shape()
    stats: _TaskStats = {}
    probes: list[Probe] = []
    for tid in sorted(promoted, key=lambda t: bool(replay.get(t))):
        task = trial.harness.tasks[tid]
        judged = count_judged(trial.harness.rubrics.current(tid).criteria)
        fits = budget.fits(budget.rollouts + n, budget.judge_calls + n * judged)
        if not budget.can_sample or not fits:
            if replay.get(tid):
                continue  # replayed instead
            if not budget.can_sample:
                raise Rejected(f"no policy sampler to probe promoted task {tid}, which has no step records")
            raise Rejected(
                f"budget: probing promoted task {tid} needs {n} rollouts and up to {n * judged} judge calls "
                f"({budget.rollouts} rollouts, {budget.judge_calls} judge calls spent; "
                f"{bounds_text(cfg, trial.measurements.rollout_allowance)})"
            )
        probe, sides = _probe_task(trial, task, gsz, n)
        probes.append(probe)
        if sides:
            stats[tid] = ("probe", sides)
    if probes:
        trial.measurements.probes = probes
    return stats


def _probe_task(trial: TrialContext, task: Task, gsz: int, n: int) -> tuple[Probe, list[Side]]:
    """Fresh rollouts of one task as the harness shapes them now, graded, in the trainer's groups."""
    budget, tid = trial.budget, task.id
    budget.need_time(0.0, f"probing promoted task {tid}")
    texts = budget.sample_rows([trial.harness.row(task, k % gsz, gsz) for k in range(n)])
    rubric = trial.harness.rubrics.current(tid).criteria
    (graded,) = budget.grade(task, texts, [rubric], f"grading the probe of task {tid}")
    rewards = np.array([nan_if_none(graded[t].reward) for t in texts])
    rows = [verdict_row(graded[t]) for t in texts]
    side = Side.graded(rewards, rows, rubric, trial.config.signal.verdict_noise, eps=trial.advantage.flat_eps)
    # the probe's groups, as the trainer would form them
    sides = [side.take(np.arange(j, j + gsz)) for j in range(0, n, gsz)]
    sides = [sd.take(np.flatnonzero(~np.isnan(sd.rewards))) for sd in sides]
    sides = [sd for sd in sides if sd.rewards.size >= 2]
    probe = Probe(
        task_id=tid,
        rewards=rounded_all(none_if_nan(rewards)),
        gives_signal=[bool(sd.gives_signal()) for sd in sides],
        examples=[clip_example(t) for t in texts[:2]],
    )
    return probe, sides


def _tasks_with_stats(
    trial: TrialContext, p: dict[str, float], q: dict[str, float], changed_ids: Sequence[str], stats: _TaskStats
) -> list[str]:
    """The tasks with statistics that either distribution samples (recorded in the measurements); rejected
    when none of the tasks the update changes has any."""
    m = trial.measurements
    known = [t for t in p if t in stats and (p[t] > 0 or q[t] > 0)]
    changed = [t for t in changed_ids if t in stats]
    m.tasks = {
        t: SampledTask(
            p_current=rounded(p[t], 5),
            p_candidate=rounded(q[t], 5),
            source=stats[t][0],
            groups=len(stats[t][1]),
            std=rounded(float(np.mean([v.rewards.std() for v in stats[t][1]]))),
            signal_share=rounded(float(np.mean([v.gives_signal() for v in stats[t][1]]))),
        )
        for t in known
    }
    missing = [t for t in changed_ids if t not in stats]
    if missing:
        m.tasks_without_stats = missing
    m.probability_mass_covered = Shares(
        current=rounded(sum(p[t] for t in known)), candidate=rounded(sum(q[t] for t in known))
    )
    if not changed:
        raise Rejected(f"no step records or probes for the tasks this update changes ({list(changed_ids)})")
    return known


def _measure(
    trial: TrialContext, p: dict[str, float], q: dict[str, float], known: list[str], stats: _TaskStats
) -> Measured:
    """The moved draws' share that gives signal where they land vs where they were, with a bootstrap over
    each task's groups' rollouts."""
    m = trial.measurements
    pw = np.array([p[t] for t in known])
    qw = np.array([q[t] for t in known])
    if pw.sum() <= 0 or qw.sum() <= 0:
        raise Rejected("no task with known reward stats would be sampled under one of the distributions")
    pw, qw = pw / pw.sum(), qw / qw.sum()
    moved = float(np.abs(qw - pw).max())
    m.largest_probability_change = rounded(moved, 6)
    if moved < 1e-6:
        raise Rejected(
            f"{NO_EFFECT}: the candidate leaves the sampling probabilities of every task with known reward "
            "statistics as they are (the trainer would draw the same batches)",
            kind="no_effect",
        )
    share = np.array([np.mean([v.gives_signal() for v in stats[t][1]]) for t in known])
    # the draws the candidate moves: mass leaves the tasks whose probability falls (where those draws
    # are now) and lands on those whose probability rises; both sides sum to the moved share
    delta = qw - pw
    moved_mass = float(np.clip(delta, 0, None).sum())
    m.moved_probability = rounded(moved_mass, 6)
    m.batch_signal_share = Shares(current=rounded(float(pw @ share)), candidate=rounded(float(qw @ share)))
    rng = np.random.default_rng(trial.config.seed)
    n_boot = trial.config.bootstrap
    draws = np.empty((n_boot, len(known)))
    for j, t in enumerate(known):
        per_group = [side.take(resample_indices(rng, side.rewards.size, n_boot)).gives_signal() for side in stats[t][1]]
        draws[:, j] = np.mean(per_group, axis=0)
    diffs = draws @ delta / moved_mass
    got = Measured(
        baseline=float(np.clip(-delta, 0, None) @ share) / moved_mass,
        candidate=float(np.clip(delta, 0, None) @ share) / moved_mass,
    )
    return percentile_interval(got, diffs, trial.config.confidence)


# ---------------------------------------------------------------------------------------------- helpers
def _replayed_side(trial: TrialContext, g: GroupRecord) -> Side | None:
    """A recorded group as a :class:`~harnessrl.critic.stats.Side`: its own rollouts' verdicts when they are
    still kept, else its per-criterion means for every rollout (the noise floor from the group's means)."""
    vals = np.array([nan_if_none(v) for v in g.rewards], dtype=float)
    if (~np.isnan(vals)).sum() < 2:
        return None
    versions = trial.harness.rubrics.versions.get(g.task_id) or []
    rubric = versions[g.rubric_version].criteria if g.rubric_version < len(versions) else []
    kept = [r for r in trial.recorder.rollouts.get(g.step, []) if r.task_id == g.task_id]
    # a group's own verdicts while its step is kept; its per-criterion means otherwise
    same = len(kept) == len(vals)
    rows = [dict(r.verdicts) for r in kept] if same else [dict(g.criterion_means)] * len(vals)
    side = Side.graded(vals, rows, rubric, trial.config.signal.verdict_noise, eps=trial.advantage.flat_eps)
    return side.take(np.flatnonzero(~np.isnan(vals)))
