"""What a critic trial measured (:attr:`~harnessrl.records.trials.TrialResult.measurements`), a typed field per metric.

One flat model, :class:`TrialMeasurements`, rather than one per kind of trial: the settings every trial records come
first, then the interface adds what it decides on (guidance: its scope and target; sampling: the step and the tasks
it promotes; rubric: a hint's checks or a fade), and then the recipe it picks (re-grade, rollout arms, moved draws,
probation) adds its own; one trial can go through two of them (a rubric edit with a hint: its reference check, then
probation), and two recipes share fields (``feature``, ``probation``, the per-group verdicts). Each field says which
writer sets it.

The JSON stays the dict the critic wrote before these were typed: every model here is an
:class:`~harnessrl.records.as_written.AsWritten`, dumped
with the fields its writer set (a field set to None included: the reference guard of a task without a reference
answer), in the order they were set, and no other. So every field defaults to None (not written, absent from the
JSON), nested records' included: a run written before a field was added loads, and so does a key these models do
not know (an older run's, a plug-in interface's), kept as it came.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harnessrl.records.as_written import AsWritten

__all__ = [
    "CoveredTask",
    "CriterionView",
    "GroupReach",
    "HintMet",
    "LearningSignal",
    "PooledLook",
    "ProbationEvidence",
    "ProbationTerms",
    "Probe",
    "ProbedTask",
    "ReferenceGuard",
    "RubricFade",
    "SampledTask",
    "Setting",
    "SettingSides",
    "Shares",
    "SideTexts",
    "SideVerdicts",
    "SplitLook",
    "TrialMeasurements",
]


Setting = float | int | None
"""A sampling setting's value (temperature, top_p, max_tokens, ...)."""


class SideVerdicts(AsWritten):
    """Per group, a verdict on each side (``signal_share_per_group``: the group gives signal;
    ``criterion_signal_per_group``: its targeted criteria discriminate)."""

    baseline: list[bool] | None = None
    candidate: list[bool] | None = None


class SideTexts(AsWritten):
    """Texts on each side: the criteria a criterion-signal trial watches, or example completions."""

    baseline: list[str] | None = None
    candidate: list[str] | None = None


class SettingSides(AsWritten):
    """A sampling setting as the harness shapes a row now and with the candidate."""

    baseline: Setting = None
    candidate: Setting = None


class Shares(AsWritten):
    """A share under the current and the candidate sampling probabilities."""

    current: float | None = None
    candidate: float | None = None


class CriterionView(AsWritten):
    """One criterion of the candidate rubric: its id, text, weight and exact check (as its model dumps it)."""

    id: str | None = None
    text: str | None = None
    weight: float | int | None = None
    check: dict[str, Any] | None = None


class CoveredTask(AsWritten):
    """A task the candidate covers beside its own, re-graded with it: its cached rollouts and their steps."""

    task_id: str | None = None
    rollouts: int | None = None
    steps: list[int] | None = None


class LearningSignal(AsWritten):
    """The advantage gate of a re-grade (docs/design.md §4): what the candidate changes in what the trainer learns."""

    advantage_effect: float | None = None
    """The largest change to any cached rollout's advantage."""
    advantage_effect_per_group: list[float | None] | None = None
    tolerance: float | None = None
    """Below it a change is no effect (``signal.advantage_tolerance``)."""
    noise_floor_baseline: list[float | None] | None = None
    noise_floor_candidate: list[float | None] | None = None
    gives_signal_baseline: list[bool] | None = None
    gives_signal_candidate: list[bool] | None = None


class PooledLook(AsWritten):
    """One look of a sequential test pooled over tasks and looks (:mod:`harnessrl.critic.power`): what every look
    records, whichever rule it decides by."""

    tasks: list[str] | None = None
    new_rollouts: int | None = None
    """Rollouts this look added."""
    look: int | None = None
    max_looks: int | None = None
    alpha_spending: str | None = None
    alpha_per_look: float | None = None
    interval: list[float | None] | None = None


class SplitLook(PooledLook):
    """A look of the pooled test of added checks (``check_split_share``): the share of groups they would split."""

    broken: int | None = None
    """Pooled rollouts that break the checks."""
    rollouts: int | None = None
    """Pooled rollouts graded by them."""
    group_size: int | None = None
    split_share: float | None = None


class HintMet(PooledLook):
    """A look of the fade test of a hint that states checks (``hint_met_rate``): its unguided rollouts that meet
    them alone."""

    met: int | None = None
    unguided_rollouts: int | None = None
    met_rate: float | None = None
    floor: float | None = None
    """The rate the unguided rollouts must be shown to reach."""


class ProbationEvidence(AsWritten):
    """The pending test a probation continues: its broken and graded rollouts, its looks and group size."""

    broken: int | None = None
    rollouts: int | None = None
    looks: int | None = None
    group_size: int | None = None


class ProbationTerms(AsWritten):
    """A candidate committed on probation: the tasks whose training groups are its trial and how they are looked at
    (:class:`~harnessrl.evolution.probation.ProbationTracker`). Written by ``Trial.probation`` (a hint, a rubric edit
    with a hint: ``threshold``, and ``checks`` when it adds any) and by a re-grade whose pooled test split a group
    (``checks``, ``evidence``, ``split_groups``)."""

    tasks: list[str] | None = None
    look_groups: int | None = None
    max_looks: int | None = None
    threshold: float | None = None
    """The signal share a guided group must add (a hint's looks)."""
    checks: dict[str, list[str]] | None = None
    """Per task, the checks it adds (its looks decide by the rate rollouts break them)."""
    split_threshold: float | None = None
    evidence: ProbationEvidence | None = None
    split_groups: int | None = None
    """Pooled groups the checks split when it went on probation."""


class ReferenceGuard(AsWritten):
    """The reference guard of one task: the reference answer's rank among the policy's rollouts, before and under
    the candidate rubric (``task_id``: a covered task's, in ``reference_guard_covered``)."""

    task_id: str | None = None
    reference_reward: float | None = None
    policy_median: float | None = None
    reference_rank_baseline: float | None = None
    reference_rank_candidate: float | None = None
    passed: bool | None = None


class ProbedTask(AsWritten):
    """One probed task of a rollout-arms trial: its rows as shaped now and with the candidate, the arms' rewards and,
    when both arms have 2 rewards or more, their spread and signal per group."""

    task_id: str | None = None
    temperature: SettingSides | None = None
    generation: dict[str, SettingSides] | None = None
    """Sampling settings besides the temperature that the candidate changes (only when it changes one)."""
    members_changed: list[int] | None = None
    candidate_guided: list[bool] | None = None
    baseline_rewards: list[float | None] | None = None
    candidate_rewards: list[float | None] | None = None
    examples: SideTexts | None = None
    baseline_mean: float | None = None
    baseline_std: float | None = None
    candidate_mean: float | None = None
    candidate_std: float | None = None
    noise_floor_baseline: float | None = None
    noise_floor_candidate: float | None = None
    gives_signal_baseline: list[bool] | None = None
    gives_signal_candidate: list[bool] | None = None
    targeted_criteria: list[str] | None = None


class Probe(AsWritten):
    """Fresh rollouts of a task a sampling candidate promotes: their rewards, which groups give signal, examples."""

    task_id: str | None = None
    rewards: list[float | None] | None = None
    gives_signal: list[bool] | None = None
    examples: list[str] | None = None


class SampledTask(AsWritten):
    """A task with statistics in a sampling trial: its probabilities now and with the candidate, and its groups'."""

    p_current: float | None = None
    p_candidate: float | None = None
    source: str | None = None
    """Where its groups come from: ``probe`` or ``replay``."""
    groups: int | None = None
    std: float | None = None
    signal_share: float | None = None


class GroupReach(AsWritten):
    """Whether a task a candidate parks is within reach: the recent rollouts of its group of the data above the
    flat-low threshold, and the share of groups they would split."""

    groups: list[str] | None = None
    tasks: int | None = None
    rollouts: int | None = None
    above_low: int | None = None
    low: float | None = None
    split_share_interval: list[float] | None = None


class RubricFade(AsWritten):
    """A fade of a rubric's hint: the share of each group it is stated to, now and after, and the checks it states."""

    from_: float | None = Field(default=None, alias="from")
    to: float | None = None
    checks: dict[str, list[str]] | None = None


class TrialMeasurements(AsWritten):
    """Everything a critic trial measured, a field per metric; a field its trial did not write is None and absent
    from the JSON."""

    # ------------------------------------------------------------ the trial's settings (every trial)
    failure_kind: str | None = None
    """The kind of failure the candidate answers (None: none)."""
    bootstrap: int | None = None
    """Bootstrap resamples."""
    confidence: float | None = None
    seed: int | None = None
    scale_rewards: str | None = None
    """How the trainer scales rewards into advantages."""
    verdict_noise: float | None = None
    rollout_allowance: int | None = None
    """What the run's ``max_rollout_share`` left this trial (written only when it bounds it)."""
    rollout_cap: int | None = None
    """The configured ``max_rollouts`` (beside ``rollout_allowance``)."""

    # ------------------------------------------------------------ the interface's
    scope: str | None = None
    """Guidance: ``task`` or ``domain``."""
    target: str | None = None
    """Guidance: the task id or domain."""
    fades: bool | None = None
    """Guidance: the candidate only takes guidance away (measured for non-inferiority)."""
    step: int | None = None
    """Sampling: the step the probabilities are those of."""
    action: str | None = None
    """Sampling: the update's action."""
    promoted: list[str] | None = None
    """Sampling: the tasks the update makes sampled again."""
    group_reach: GroupReach | None = None
    """Sampling: a park's check that its task is out of reach."""
    reference_fails_added_checks: list[str] | None = None
    """Rubric with a hint: the tasks whose reference answer fails the checks it would state."""
    fade: RubricFade | None = None
    """Rubric: the fade of a hint."""

    # ------------------------------------------------------------ re-grade (rubric)
    task_id: str | None = None
    """The candidate's own task."""
    rubric_version: int | None = None
    candidate_rubric: list[CriterionView] | None = None
    generations: int | None = None
    """Fresh rollouts generated to top up the cached groups."""
    n_rollouts: int | None = None
    """Cached rollouts of the candidate's own task."""
    steps: list[int] | None = None
    """The steps they come from."""
    fresh_groups: int | None = None
    baseline_rewards: list[float | None] | None = None
    candidate_rewards: list[float | None] | None = None
    reference_reward_baseline: float | None = None
    reference_reward_candidate: float | None = None
    policy_median_baseline: float | None = None
    policy_median_candidate: float | None = None
    missing_rewards: int | None = None
    """Rollouts without a reward under one of the rubrics."""
    covered: list[CoveredTask] | None = None
    """A repair over several tasks: each task re-graded."""
    targeted_criteria: SideTexts | None = None
    """The criteria a criterion-signal trial watches on each side."""
    n_groups: int | None = None
    learning_signal: LearningSignal | None = None
    split: SplitLook | None = None
    hint_met: HintMet | None = None
    reference_rank_tasks: int | None = None
    """Tasks the reference answer's rank was averaged over."""
    feature_values: list[float | None] | None = None
    reference_guard: ReferenceGuard | None = None
    """The own task's guard (set to None: no reference answer to guard)."""
    reference_guard_covered: list[ReferenceGuard] | None = None

    # ------------------------------------------------------------ rollout arms (guidance)
    rollouts_per_arm: int | None = None
    group_size: int | None = None
    tasks_unchanged: list[str] | None = None
    """Tasks the candidate leaves as they are (not probed)."""
    tasks_dropped_for_budget: list[str] | None = None

    # ------------------------------------------------------------ moved draws (sampling)
    probes: list[Probe] | None = None
    tasks_without_stats: list[str] | None = None
    probability_mass_covered: Shares | None = None
    largest_probability_change: float | None = None
    moved_probability: float | None = None
    batch_signal_share: Shares | None = None

    # ------------------------------------------------------------ shared by recipes
    tasks: list[ProbedTask] | dict[str, SampledTask] | None = None
    """Rollout arms: each probed task's row; moved draws: each task with statistics, by id."""
    signal_share_per_group: SideVerdicts | None = None
    criterion_signal_per_group: SideVerdicts | None = None
    group_std_baseline: list[float | None] | None = None
    group_std_candidate: list[float | None] | None = None
    feature: str | None = None
    """A correlation trial's feature (``rho_reward_<feature>``)."""
    probation: ProbationTerms | None = None
