"""The re-grading recipe (rubric criteria, ``EditRubric``): cached rollouts under the current and the candidate rubric.

The task's cached rollouts (``recorder.latest_rollouts``) *are* samples of the frozen policy, so a rubric
candidate is measured by re-grading them and the task's reference answer under both rubrics: nothing is
generated, and the judge's verdict cache means only the criteria the candidate adds or rewords reach the
backend. The comparison is *paired*: the same rollouts under both rubrics, resampled with the same indices.

The stages: gather the cached rollouts; grade them (and the reference) under both rubrics within the
budget; build the trainer's groups; the **advantage gate** (docs/design.md §4): a candidate whose largest
change to any rollout's advantage, under the trainer's reward scaling, is below
``signal.advantage_tolerance`` is rejected as "no effect on the learning signal" before any bootstrap
(reweighting a criterion every rollout passes is such a candidate); then the metric (the share of groups
that give signal or whose targeted criteria discriminate, the reference answer's rank, |Spearman rho| of
reward with length or a surface feature). Every rubric trial ends with the **reference guard**: the
reference answer's rank among the policy's rollouts may not fall below the policy's median.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from harnessrl.critic.acceptance import Measured, fmt, percentile_interval
from harnessrl.critic.budget import Rejected
from harnessrl.critic.context import TrialContext
from harnessrl.critic.power import (
    SplitEvidence,
    SplitVerdict,
    decide_met,
    decide_split,
    expected_groups_split,
    mostly_broken,
)
from harnessrl.critic.protocols import RubricVersionView
from harnessrl.critic.signal import (
    CHECK_SPLIT_SHARE,
    CRITERION_SIGNAL,
    HINT_MET_RATE,
    NO_EFFECT,
    REFERENCE_RANK,
    RHO_PREFIX,
    SIGNAL_SHARE,
    SUSPECT_EFFECT,
    advantage_effect,
    reference_rank,
)
from harnessrl.critic.stats import (
    Group,
    Side,
    correlation_fall,
    mean_reward_std,
    median,
    nan_if_none,
    none_if_nan,
    reference_rank_rows,
    resample_indices,
    rounded,
    rounded_all,
    share_verdict,
    surface_feature,
    verdict_row,
)
from harnessrl.data.checks import count_words
from harnessrl.data.schema import Criterion, Task
from harnessrl.records.measurements import (
    CoveredTask,
    CriterionView,
    HintMet,
    LearningSignal,
    ProbationEvidence,
    ProbationTerms,
    ReferenceGuard,
    SideTexts,
    SplitLook,
)
from harnessrl.records.steps import RolloutRecord

__all__ = ["RegradePart", "fresh_group_rollouts", "regrade"]


@dataclass
class _Regraded:
    """The cached rollouts' rewards and verdicts under both rubrics (NaN: missing), and the reference's."""

    rollouts: list[RolloutRecord]
    base: np.ndarray
    cand: np.ndarray
    rows_b: list[dict[str, float | None]]
    rows_c: list[dict[str, float | None]]
    ref_b: float | None
    ref_c: float | None

    @property
    def ok(self) -> np.ndarray:
        """Rollouts rewarded under both rubrics."""
        return ~np.isnan(self.base) & ~np.isnan(self.cand)


@dataclass(frozen=True)
class RegradePart:
    """One task of a rubric candidate: its current rubric version, the candidate's criteria for it, the criteria a
    criterion-signal trial watches on each side, and the exact checks the candidate adds to it."""

    task: Task
    current: RubricVersionView
    candidate: Sequence[Criterion]
    targeted: tuple[list[str], list[str]]
    added: Sequence[Criterion] = ()


def regrade(trial: TrialContext, parts: Sequence[RegradePart], on_probation: bool = False) -> Measured:
    """Re-grade the cached rollouts and reference answers of every task of the candidate (``parts``: its own task
    first, then those it covers) under the current and the candidate rubric, and measure the pooled groups.

    A task without cached rollouts adds no group (a covered task not drawn yet: its reference answer passed its
    instance when the repair was widened). The metric is measured on every group of every task together, except
    the reference answer's rank (the failure's own task); the reference guard holds on every task.
    ``on_probation``: the candidate only adds (its revert removes what it adds), so checks the data cannot decide
    yet may be committed on probation (``trials.pending_checks``; :func:`_split_share`)."""
    source = parts[0]
    graded: list[tuple[RegradePart, _Regraded]] = []
    for i, part in enumerate(parts):
        rollouts = _cached_rollouts(trial, part.task, part.current, part.candidate, record=i == 0)
        if len(rollouts) >= 2:
            graded.append((part, _grade(trial, part.task, rollouts, part.current.criteria, part.candidate, i == 0)))
    if not graded:
        raise Rejected("no cached rollouts to re-grade")
    if len(parts) > 1:
        trial.measurements.covered = [
            CoveredTask(task_id=p.task.id, rollouts=len(g.rollouts), steps=sorted({r.step for r in g.rollouts}))
            for p, g in graded
        ]
    groups = [
        g
        for part, regraded in graded
        for g in _groups(trial, regraded, part.current.criteria, part.candidate, part.targeted)
    ]
    trial.measurements.n_groups = len(groups)
    if not groups:
        raise Rejected("no cached group has 2 or more rewards under both rubrics")
    split = trial.metric in (CHECK_SPLIT_SHARE, HINT_MET_RATE)
    effect = _advantage_gate(trial, groups, gate=not split and trial.metric != SUSPECT_EFFECT)
    rng = np.random.default_rng(trial.config.seed)
    if split:
        got = _split_share(trial, graded, parts if on_probation else ())
    elif trial.metric in (SIGNAL_SHARE, CRITERION_SIGNAL):
        got = share_verdict(groups, trial.metric, trial.config, rng, trial.measurements)
    elif trial.metric == SUSPECT_EFFECT:
        got = _suspect_effect(trial, effect, graded)
    elif trial.metric == REFERENCE_RANK:
        if not any(p is source for p, _ in graded):
            raise Rejected(f"task {source.task.id} has no cached rollouts: the reference's rank cannot be measured")
        got = _reference_rank(trial, graded, rng)
    else:  # rho_reward_<feature>
        got = _correlation(trial, [g for _, g in graded], rng)
    got.advantage_effect = effect
    for part, regraded in graded:
        ok = regraded.ok
        own = part is source
        guard = _reference_guard(
            trial, part.task, regraded.ref_b, regraded.ref_c, regraded.base[ok], regraded.cand[ok], got, own
        )
        got.guard = got.guard or guard
    return got


# ---------------------------------------------------------------------------------------------- stages
def _cached_rollouts(
    trial: TrialContext, task: Task, current: RubricVersionView, candidate: Sequence[Criterion], record: bool = True
) -> list[RolloutRecord]:
    """The task's cached rollouts of its latest steps (the candidate's own task, ``record``: written to the
    measurements and topped up with fresh groups when ``min_regrade_groups`` asks for more)."""
    rollouts = trial.recorder.latest_rollouts(task.id)
    if not record:
        return rollouts
    m = trial.measurements
    m.task_id, m.rubric_version, m.candidate_rubric = task.id, current.version, _criteria_view(candidate)
    m.generations = 0
    m.n_rollouts = len(rollouts)
    m.steps = sorted({r.step for r in rollouts})
    return rollouts + _fresh_groups(trial, task, current, len(_groups_by_step(rollouts)))


def _fresh_groups(trial: TrialContext, task: Task, current: RubricVersionView, cached: int) -> list[RolloutRecord]:
    """Fresh groups of the frozen policy for ``task`` (its rows as the harness shapes them now), when the cached
    ones are fewer than ``min_regrade_groups`` and the budget and a sampler allow: re-graded like the cached ones
    (paired under both rubrics), they give the bootstrap enough groups to tell a real split from chance."""
    want = trial.config.min_regrade_groups - cached
    if want <= 0 or not trial.budget.can_sample:
        return []
    gsz = max(2, trial.advantage.group_size)
    room = (trial.config.max_rollouts - trial.budget.rollouts) // gsz
    n_groups = min(want, room)
    if n_groups <= 0:
        trial.measurements.fresh_groups = 0
        return []
    trial.budget.need_time(0.0, f"generating {n_groups} fresh group(s) of task {task.id} to re-grade")
    # each fresh group its own (negative) step: never one of training's
    fresh = fresh_group_rollouts(trial, [task] * n_groups, {task.id: current.version}, lambda k: -1 - k, gsz)
    trial.measurements.fresh_groups, trial.measurements.generations = n_groups, len(fresh)
    return fresh


def fresh_group_rollouts(
    trial: TrialContext,
    tasks: Sequence[Task],
    versions: Mapping[str, int],
    step_of: Callable[[int], int],
    group_size: int,
    trained: bool = True,
) -> list[RolloutRecord]:
    """One fresh group of the frozen policy for each of ``tasks`` (group ``k`` recorded at step ``step_of(k)``), its
    members' rows as the harness shapes them now, generated within the trial's budget; ungraded (``reward`` None):
    the caller grades them under the rubrics it compares. ``versions``: each task's rubric version, recorded on its
    rollouts; ``trained``: as recorded (false: a probe, never trained on)."""
    rows = [(task, trial.harness.row(task, m, group_size)) for task in tasks for m in range(group_size)]
    texts = trial.budget.sample_rows([row for _, row in rows])
    return [
        RolloutRecord(
            step=step_of(k // group_size),
            task_id=task.id,
            member=k % group_size,
            guided=bool(row.guided),
            rubric_version=versions[task.id],
            temperature=row.temperature,
            completion=text,
            length_tokens=0,
            length_words=count_words(text),
            reward=None,
            verdicts={},
            trained=trained,
        )
        for k, ((task, row), text) in enumerate(zip(rows, texts, strict=True))
    ]


def _grade(
    trial: TrialContext,
    task: Task,
    rollouts: list[RolloutRecord],
    base_rubric: Sequence[Criterion],
    cand_rubric: Sequence[Criterion],
    record: bool = True,
) -> _Regraded:
    """Every distinct completion (a collapsed group is graded once) and the reference under both rubrics,
    the baseline first: its verdicts fill the cache the candidate's unchanged criteria then hit."""
    ref = task.reference_answer
    texts = list(dict.fromkeys([r.completion for r in rollouts] + ([ref] if ref is not None else [])))
    base_res, cand_res = trial.budget.grade(
        task,
        texts,
        [base_rubric, cand_rubric],
        f"re-grading {len(texts)} texts under both rubrics",
        time_checks=[None, "re-grading under the candidate rubric"],
    )
    graded = _Regraded(
        rollouts=rollouts,
        base=np.array([nan_if_none(base_res[r.completion].reward) for r in rollouts]),
        cand=np.array([nan_if_none(cand_res[r.completion].reward) for r in rollouts]),
        rows_b=[verdict_row(base_res[r.completion]) for r in rollouts],
        rows_c=[verdict_row(cand_res[r.completion]) for r in rollouts],
        ref_b=base_res[ref].reward if ref is not None else None,
        ref_c=cand_res[ref].reward if ref is not None else None,
    )
    if not record:
        return graded
    ok, m = graded.ok, trial.measurements
    m.baseline_rewards = rounded_all(none_if_nan(graded.base))
    m.candidate_rewards = rounded_all(none_if_nan(graded.cand))
    m.reference_reward_baseline, m.reference_reward_candidate = rounded(graded.ref_b), rounded(graded.ref_c)
    m.policy_median_baseline = rounded(median(graded.base[ok])) if ok.any() else None
    m.policy_median_candidate = rounded(median(graded.cand[ok])) if ok.any() else None
    m.missing_rewards = int((~ok).sum())
    return graded


def _groups(
    trial: TrialContext,
    graded: _Regraded,
    base_rubric: Sequence[Criterion],
    cand_rubric: Sequence[Criterion],
    targeted: tuple[list[str], list[str]],
) -> list[Group]:
    """The trainer's groups of the cached rollouts, each paired under both rubrics (rollouts rewarded under
    both only; a group needs 2)."""
    m = trial.measurements
    targets_b, targets_c = targeted
    if trial.metric == CRITERION_SIGNAL and m.targeted_criteria is None:
        m.targeted_criteria = SideTexts(baseline=targets_b, candidate=targets_c)
    noise, eps = trial.config.signal.verdict_noise, trial.advantage.flat_eps
    side_b = Side.graded(graded.base, graded.rows_b, base_rubric, noise, targets_b, eps)
    side_c = Side.graded(graded.cand, graded.rows_c, cand_rubric, noise, targets_c, eps)
    ok = graded.ok
    groups: list[Group] = []
    for idx in _groups_by_step(graded.rollouts):
        keep = np.array([i for i in idx if ok[i]], dtype=int)
        if keep.size >= 2:
            groups.append(Group.paired(side_b.take(keep), side_c.take(keep)))
    return groups


def _advantage_gate(trial: TrialContext, groups: list[Group], gate: bool = True) -> float:
    """Does the candidate change anything the trainer learns from? The largest change to any rollout's
    advantage (rejected as no effect below the tolerance, when ``gate``); marks the groups it leaves as they were.
    Checks a candidate adds are not gated here: whether they split any group is their own metric, and groups
    that none splits yet leave them pending, not refused (:mod:`harnessrl.critic.power`)."""
    tol = trial.config.signal.advantage_tolerance
    spec = trial.advantage
    effect, per_group = advantage_effect([g.base.rewards for g in groups], [g.cand.rewards for g in groups], spec)
    for g, e in zip(groups, per_group, strict=True):
        g.unchanged = e < tol  # its advantages stay as they were: so does whether it gives signal
    trial.measurements.learning_signal = LearningSignal(
        advantage_effect=rounded(effect),
        advantage_effect_per_group=rounded_all(per_group),
        tolerance=tol,
        noise_floor_baseline=rounded_all([g.base.floor() for g in groups]),
        noise_floor_candidate=rounded_all([g.cand.floor() for g in groups]),
        gives_signal_baseline=[bool(g.base.gives_signal()) for g in groups],
        gives_signal_candidate=[bool(g.cand.gives_signal()) for g in groups],
    )
    if gate and effect < tol:
        spread_b, spread_c = mean_reward_std([g.base for g in groups]), mean_reward_std([g.cand for g in groups])
        raise Rejected(
            f"{NO_EFFECT}: the candidate rubric changes no cached rollout's advantage by more than "
            f"{effect:.3f} (tolerance {tol:g}) under the trainer's reward scaling "
            f"({spec.scale_rewards}), so training would learn exactly what it learns now; "
            f"raw group reward std {fmt(spread_b)} -> {fmt(spread_c)} is a rescaling, not a signal",
            Measured(advantage_effect=effect),
            kind="no_effect",
        )
    return effect


# ---------------------------------------------------------------------------------------------- metrics
def _reference_rank(
    trial: TrialContext, graded: Sequence[tuple[RegradePart, _Regraded]], rng: np.random.Generator
) -> Measured:
    """Each task's reference answer's rank among its own rewarded rollouts under both rubrics, averaged over the tasks
    the candidate covers with rollouts (the failure's own task first; a repair that reaches several tasks is
    measured on all of them), with a paired bootstrap that resamples each task's rollouts apart."""
    source_task = graded[0][0].task
    if source_task.reference_answer is None:
        raise Rejected("task has no reference answer: the reference's rank cannot be measured")
    parts = []
    for part, g in graded:
        ok = g.ok
        if part.task.reference_answer is None or g.ref_b is None or g.ref_c is None or ok.sum() < 2:
            if part is graded[0][0]:
                why = (
                    "the judge gave no reward for the reference answer under one of the rubrics"
                    if g.ref_b is None or g.ref_c is None
                    else "fewer than 2 cached rollouts have rewards under both rubrics"
                )
                raise Rejected(why)
            continue
        parts.append((g.ref_b, g.ref_c, g.base[ok], g.cand[ok]))
    diffs = np.zeros(trial.config.bootstrap)
    for ref_b, ref_c, b, c in parts:
        idx = resample_indices(rng, b.size, trial.config.bootstrap)
        diffs += reference_rank_rows(ref_c, c[idx]) - reference_rank_rows(ref_b, b[idx])
    diffs /= len(parts)
    got = Measured(
        baseline=float(np.mean([reference_rank(rb, b) for rb, _, b, _ in parts])),
        candidate=float(np.mean([reference_rank(rc, c) for _, rc, _, c in parts])),
    )
    trial.measurements.reference_rank_tasks = len(parts)
    return percentile_interval(got, diffs, trial.config.confidence)


def _suspect_effect(trial: TrialContext, effect: float, graded: Sequence[tuple[RegradePart, _Regraded]]) -> Measured:
    """The removal of criteria the references fail (:data:`~harnessrl.critic.signal.SUSPECT_EFFECT`): accepted when it
    changes some cached rollout's advantage by the gate's tolerance, pending when it changes none yet; the references'
    mean rank among their rollouts before and after is reported beside it."""
    tol = trial.config.signal.advantage_tolerance
    ranks = [
        (reference_rank(g.ref_b, g.base[g.ok]), reference_rank(g.ref_c, g.cand[g.ok]))
        for _, g in graded
        if g.ref_b is not None and g.ref_c is not None and g.ok.sum() >= 1
    ]
    got = Measured(
        baseline=float(np.mean([b for b, _ in ranks])) if ranks else None,
        candidate=float(np.mean([c for _, c in ranks])) if ranks else None,
        improvement=effect,
    )
    trial.measurements.reference_rank_tasks = len(ranks)
    said = f"largest change to a cached rollout's advantage {effect:.3f} (tolerance {tol:g})"
    if effect >= tol:
        got.verdict = "accepted"
        got.verdict_reason = (
            f"accepted: the criterion the references fail changes what training learns ({said}); the references' "
            f"mean rank among their rollouts {fmt(got.baseline)} -> {fmt(got.candidate)}"
        )
    else:
        got.verdict = "pending"
        got.verdict_reason = (
            f"pending: no cached rollout does what the criterion pays for yet ({said}): removing it would teach "
            "nothing now"
        )
    return got


def _correlation(trial: TrialContext, graded: Sequence[_Regraded], rng: np.random.Generator) -> Measured:
    """|Spearman rho| of reward with length (the trainer's token counts) or a surface feature, under both rubrics.
    Over several tasks, each task's rewards and features are replaced by their ranks within the task first, so the
    pooled correlation is one of within-task orderings (tasks differ in length and score, which says nothing)."""
    feature = trial.metric[len(RHO_PREFIX) :]
    fn = None if feature == "length" else surface_feature(feature)
    cols: list[list[np.ndarray]] = [[], [], []]
    for g in graded:
        rollouts, ok = g.rollouts, g.ok
        feat = _length_of(rollouts) if fn is None else np.array([fn(r.completion) for r in rollouts], dtype=float)
        b, c, f = g.base[ok], g.cand[ok], feat[ok]
        if len(graded) > 1:
            b, c, f = (_within_ranks(x) for x in (b, c, f))
        for col, x in zip(cols, (b, c, f), strict=True):
            col.append(x)
    b, c, f = (np.concatenate(col) if col else np.array([]) for col in cols)
    if b.size < 4:
        raise Rejected("fewer than 4 cached rollouts have rewards under both rubrics: no correlation to measure")
    trial.measurements.feature, trial.measurements.feature_values = feature, rounded_all(f.tolist())
    return correlation_fall((b, f), (c, f), trial.config, rng, paired=True)


def _within_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` scaled to [0, 1] (ties share their mean rank; one value: 0.5)."""
    if x.size <= 1:
        return np.full(x.shape, 0.5)
    return (rankdata(x) - 1) / (x.size - 1)


def _split_share(
    trial: TrialContext, graded: Sequence[tuple[RegradePart, _Regraded]], probation: Sequence[RegradePart] = ()
) -> Measured:
    """The share of groups the added checks would split, from the rate at which the frozen policy's cached rollouts
    break them, pooled over every task and over the earlier looks at the same repair (:mod:`harnessrl.critic.power`);
    the verdict is the power rule's (accepted, pending or futile). The fade of a hint (``hint_met_rate``: ``added``
    holds the checks the hint states) counts only the unguided rollouts and decides by the fade rule.

    A pending verdict whose pooled groups include one the checks split, and whose pooled rollouts meet the checks at
    least as often as they break them, becomes ``probation`` when ``probation`` holds the candidate's parts (every
    task it covers) and ``trials.pending_checks`` is ``probation``: the edit is committed now and the same test goes
    on over the training groups after it (:func:`_probation`). Checks broken more often than met stay pending: the
    evolver may then propose them with a hint (gold bench seed 1 at 0ce58c7 committed `brief`'s 20-word check on
    probation at 3 of 4 broken, the policy broke it in 56 of the next 56 rollouts and it was reverted at step 33,
    where waiting had let the evolver commit it with a hint at step 2)."""
    fade = trial.metric == HINT_MET_RATE
    evidence = trial.split_evidence if trial.split_evidence is not None else SplitEvidence()
    at, new = trial.next_step - 1, 0
    for part, g in graded:
        if not part.added:
            continue
        for r in g.rollouts:
            if fade and (r.guided or r.rubric_version != part.current.version):
                continue  # a fade counts the unguided members of the groups under the hint in force
            broken = not all(c.check is not None and c.check.evaluate(r.completion) >= 1 for c in part.added)
            new += evidence.add(r.step, r.task_id, r.member, broken, at)
    if new:
        evidence.look(at)
    look = max(1, evidence.looks)
    if fade:
        return _fade_verdict(trial, evidence, new, look)
    cfg, gsz = trial.config, max(2, trial.advantage.group_size)
    threshold = cfg.signal.threshold(CHECK_SPLIT_SHARE)
    v = decide_split(
        evidence.broken, evidence.rollouts, gsz, threshold, cfg.confidence, look, cfg.max_looks, cfg.alpha_spending
    )
    trial.measurements.split = SplitLook(
        broken=v.broken,
        rollouts=v.rollouts,
        **_look(trial, evidence, new, v),
        group_size=gsz,
        split_share=rounded(v.share),
        interval=[rounded(v.low), rounded(v.high)],
    )
    rate = f"{v.broken} of {v.rollouts} pooled rollouts over {len(evidence.tasks())} task(s) break the added checks"
    numbers = (
        f"{rate}: {CHECK_SPLIT_SHARE} {v.share:.3f} ({expected_groups_split(v.share)}), "
        f"{1 - v.alpha:.1%} interval [{v.low:.3f}, {v.high:.3f}], smallest effect worth a change {threshold:g}, "
        f"look {v.look} of {cfg.max_looks}"
    )
    reasons = {
        "accepted": f"accepted: {numbers}",
        "pending": f"pending: the data cannot decide yet ({numbers}); measured again when more groups are graded",
        "not_reliable": f"rejected: the data could not decide in {cfg.max_looks} look(s) ({numbers})",
        "futile": f"rejected: the checks would split fewer groups than worth a change ({numbers})"
        + (
            "; no rollout meets them yet: guidance must come first"
            if v.broken == v.rollouts
            else "; the policy already meets them"
            if v.broken == 0
            else ""
        ),
    }
    kind = v.kind
    met = not mostly_broken(v.broken, v.rollouts)  # met at least as often as broken: signal at once
    if kind == "pending" and probation and cfg.pending_checks == "probation" and met and evidence.split_groups():
        kind = "probation"
        reasons[kind] = _probation(trial, evidence, probation, v, gsz, numbers)
    return Measured(
        baseline=0.0,
        candidate=v.share,
        improvement=v.share,
        ci_low=v.low,
        ci_high=v.high,
        verdict=kind,
        verdict_reason=reasons[kind],
        min_detectable=v.min_detectable,
    )


def _probation(
    trial: TrialContext,
    evidence: SplitEvidence,
    parts: Sequence[RegradePart],
    v: SplitVerdict,
    group_size: int,
    numbers: str,
) -> str:
    """A pending test whose pooled groups split: the checks go on probation (the trial's verdict; this gives its
    reason), the evidence so far carried into it (``measurements.probation``: per task, the checks it adds; the
    broken and graded rollouts and the looks taken), so the probation's looks continue the same sequential test
    (:class:`~harnessrl.evolution.probation.ProbationTracker`) and its error stays the one this test spends."""
    cfg = trial.config
    checks = {p.task.id: [c.id for c in p.added] for p in parts if p.added}
    trial.measurements.probation = ProbationTerms(
        tasks=list(checks),
        checks=checks,
        look_groups=cfg.probation_look_groups,
        max_looks=cfg.max_looks,
        split_threshold=cfg.signal.threshold(CHECK_SPLIT_SHARE),
        evidence=ProbationEvidence(broken=v.broken, rollouts=v.rollouts, looks=v.look, group_size=group_size),
        split_groups=evidence.split_groups(),
    )
    return (
        f"on probation: the data cannot decide yet ({numbers}) but {evidence.split_groups()} pooled group(s) split; "
        f"the checks are committed over the {len(checks)} task(s) they cover and the same test goes on over their "
        f"training groups, a look every {cfg.probation_look_groups} groups (at most {cfg.max_looks} looks in all): "
        "kept once accepted, reverted when it ends futile or undecided"
    )


def _look(trial: TrialContext, evidence: SplitEvidence, new: int, v: SplitVerdict) -> dict[str, object]:
    """What a look of a pooled test records whichever rule it decides by (the fields of
    :class:`~harnessrl.records.measurements.PooledLook`, in the order the split and the fade write them)."""
    cfg = trial.config
    return {
        "tasks": evidence.tasks(),
        "new_rollouts": new,
        "look": v.look,
        "max_looks": cfg.max_looks,
        "alpha_spending": cfg.alpha_spending,
        "alpha_per_look": round(v.alpha, 4),
    }


def _fade_verdict(trial: TrialContext, evidence: SplitEvidence, new: int, look: int) -> Measured:
    """The fade of a hint that states checks (:func:`~harnessrl.critic.power.decide_met`): the pooled unguided
    rollouts that meet the checks alone, against the rate they must be shown to reach (``hint_met_rate``'s)."""
    cfg = trial.config
    floor = cfg.signal.threshold(HINT_MET_RATE)
    met = evidence.rollouts - evidence.broken
    v = decide_met(met, evidence.rollouts, floor, cfg.confidence, look, cfg.max_looks, cfg.alpha_spending)
    trial.measurements.hint_met = HintMet(
        met=met,
        unguided_rollouts=v.rollouts,
        **_look(trial, evidence, new, v),
        met_rate=rounded(v.share),
        interval=[rounded(v.low), rounded(v.high)],
        floor=floor,
    )
    numbers = (
        f"{met} of {v.rollouts} unguided rollouts over {len(evidence.tasks())} task(s) meet the checks the hint "
        f"states without it: rate {v.share:.3f}, {1 - v.alpha:.1%} interval [{v.low:.3f}, {v.high:.3f}] against "
        f"{floor:g}, look {v.look} of {cfg.max_looks}"
    )
    reasons = {
        "accepted": f"accepted: the hint may fade ({numbers})",
        "pending": f"pending: the data cannot decide yet ({numbers}); measured again when more groups are graded",
        "not_reliable": f"rejected: the data could not decide in {cfg.max_looks} look(s) ({numbers}); the hint stays",
        "futile": f"rejected: without the hint the checks are met less often than that ({numbers}); the hint stays",
    }
    return Measured(
        baseline=floor,
        candidate=v.share,
        improvement=v.share - floor,
        ci_low=v.low - floor,
        ci_high=v.high - floor,
        verdict=v.kind,
        verdict_reason=reasons[v.kind],
        min_detectable=v.min_detectable,
    )


def _reference_guard(
    trial: TrialContext,
    task: Task,
    ref_b: float | None,
    ref_c: float | None,
    base: np.ndarray,
    cand: np.ndarray,
    got: Measured,
    own: bool = True,
) -> str | None:
    """The reference answer must keep its place: its rank among the policy's rollouts may not fall
    below the policy's median under the candidate rubric (unless it was already below it). ``own``: the
    candidate's own task (its guard is ``reference_guard`` in the measurements; a covered task's is listed in
    ``reference_guard_covered``)."""
    m = trial.measurements
    if ref_c is None or ref_b is None or base.size == 0:
        if own:
            m.reference_guard = None  # no reference answer: nothing to guard
        return None
    rank_b, rank_c = reference_rank(ref_b, base), reference_rank(ref_c, cand)
    passed = rank_c >= min(0.5, rank_b)
    entry = ReferenceGuard(
        **({} if own else {"task_id": task.id}),
        reference_reward=rounded(ref_c),
        policy_median=rounded(median(cand)),
        reference_rank_baseline=rounded(rank_b),
        reference_rank_candidate=rounded(rank_c),
        passed=passed,
    )
    if own:
        m.reference_guard = entry
    else:
        m.reference_guard_covered = [*(m.reference_guard_covered or []), entry]
    if passed:
        return None
    return (
        f"rejected by the reference guard: under the candidate rubric the reference answer of task {task.id} scores "
        f"{ref_c:.3f} and ranks above {rank_c:.0%} of the policy's rollouts (before: {ref_b:.3f}, {rank_b:.0%}), "
        f"below the policy's median {median(cand):.3f}; the candidate punishes good answers too "
        f"({trial.metric} {fmt(got.baseline)} -> {fmt(got.candidate)})"
    )


# ---------------------------------------------------------------------------------------------- helpers
def _groups_by_step(rollouts: Sequence[RolloutRecord]) -> list[list[int]]:
    """Indices of each group: consecutive rollouts of one step; a member number that does not rise
    starts a new group (a task drawn twice in one step makes two groups)."""
    groups: list[list[int]] = []
    prev: RolloutRecord | None = None
    for i, r in enumerate(rollouts):
        if prev is None or r.step != prev.step or r.member <= prev.member:
            groups.append([])
        groups[-1].append(i)
        prev = r
    return groups


def _length_of(rollouts: Sequence[RolloutRecord]) -> np.ndarray:
    """Token lengths when the trainer recorded them, else word counts."""
    if rollouts and all(r.length_tokens > 0 for r in rollouts):
        return np.array([r.length_tokens for r in rollouts], dtype=float)
    return np.array([r.length_words for r in rollouts], dtype=float)


def _criteria_view(criteria: Sequence[Criterion]) -> list[CriterionView]:
    return [
        CriterionView(id=c.id, text=c.text, weight=c.weight, **({"check": c.check.model_dump()} if c.check else {}))
        for c in criteria
    ]
