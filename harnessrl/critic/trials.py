"""Critic trials on the frozen policy: measure a candidate harness update before it is committed.

The just-in-time critic accepts a candidate only after measuring its effect on the *current* policy,
whose weights do not change while a trial runs (docs/design.md §4). This module is the entry point:
:meth:`FrozenPolicyTrials.run` asks the update's interface (through :class:`TrialHarness`, never naming
one) which metric to measure and how (its ``metric`` and ``trial`` methods,
:class:`~harnessrl.interfaces.base.Interface`), hands the interface a :class:`Trial` (the kit: the
candidate, the failure, the budget, the measurements, and the recipes as methods), and decides on the
numbers. The recipes, each in its own module, and the built-in interfaces that use them:

- **re-grading** (:meth:`Trial.regrade`, :mod:`harnessrl.critic.regrade`; rubric criteria, ``EditRubric``):
  the task's cached rollouts and reference answer under the current and the candidate rubric, paired,
  nothing generated; with the advantage gate and the reference guard;
- **rollout arms** (:meth:`Trial.rollout_arms`, :mod:`harnessrl.critic.rollout_arms`; rollout guidance,
  ``SetGuidance``, and the default for any interface that shapes rows, e.g. a plug-in's sampling
  settings): fresh rollouts of the frozen policy with the rows shaped now and with the candidate;
- **moved draws** (:meth:`Trial.moved_draws`, :mod:`harnessrl.critic.moved_draws`; task sampling,
  ``ReweightTasks``): the signal of the draws a change of sampling probabilities moves, from replayed
  step records and probes of promoted tasks.

The critic measures **the learning signal as the trainer computes it** (docs/design.md §4,
:mod:`harnessrl.critic.signal`): GRPO learns from each group's advantages, which a per-group change
``r -> a*r + b`` (``a > 0``) leaves as they were, so no metric moves under such a change. The metric
follows the failure the candidate answers (the interface's ``metric``, by default
:func:`~harnessrl.interfaces.base.failure_metric`): the **share of groups that give signal** (reward spread
above the judge's own noise under the rubric that graded them) for non-discriminative groups (sampling
trials: the same share over the draws the candidate moves); the **share of groups in which the targeted
criterion tells rollouts apart** for a saturated or dead criterion; |Spearman rho| of reward with length
or the flagged surface feature for spurious rewards; the **reference answer's rank** among the policy's
rollouts when the reference scores below the policy. The statistics are :mod:`harnessrl.critic.stats`.

Acceptance is noise-aware *and* practical: the rollouts are resampled ``bootstrap`` times with a
seeded generator (within groups; the same draws under both sides where the comparison is paired),
and the candidate is accepted only when the lower end of the ``confidence`` percentile interval of the
improvement is above zero **and** the improvement reaches the metric's smallest effect worth a harness
change (``signal.min_effect``): the rule is :func:`~harnessrl.critic.acceptance.decide`. Fresh rollouts
come from a :class:`~harnessrl.critic.protocols.PolicySampler`. Every result carries what was measured
and what it cost (:class:`~harnessrl.records.trials.TrialResult`); a trial that would exceed
``max_rollouts``, ``max_judge_calls`` or ``max_seconds`` stops and is rejected with a reason starting
with "budget" (:mod:`harnessrl.critic.budget`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from harnessrl.critic.acceptance import Measured, decide, detectable
from harnessrl.critic.budget import Budget, Rejected
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.context import TrialContext
from harnessrl.critic.moved_draws import moved_draws
from harnessrl.critic.power import SplitEvidence
from harnessrl.critic.protocols import HarnessView, PolicySampler, RubricVersionView
from harnessrl.critic.regrade import RegradePart, fresh_group_rollouts, regrade
from harnessrl.critic.rollout_arms import rollout_arms
from harnessrl.critic.signal import (
    CHECK_SPLIT_SHARE,
    CRITERION_SIGNAL,
    MOVED_SIGNAL_SHARE,
    NO_EFFECT,
    REFERENCE_RANK,
    SIGNAL_SHARE,
    AdvantageSpec,
)
from harnessrl.critic.stats import rounded
from harnessrl.data.schema import Criterion, Task
from harnessrl.judges.rubric_judge import RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.measurements import ProbationTerms, TrialMeasurements
from harnessrl.records.steps import Recorder, RolloutRecord
from harnessrl.records.trials import TrialCost, TrialResult

__all__ = [
    "CHECK_SPLIT_SHARE",
    "CRITERION_SIGNAL",
    "MOVED_SIGNAL_SHARE",
    "NO_EFFECT",
    "REFERENCE_RANK",
    "SIGNAL_SHARE",
    "FrozenPolicyTrials",
    "MeasuredInterface",
    "PolicySampler",
    "Probe",
    "Trial",
    "TrialConfig",
    "TrialCost",
    "TrialHarness",
    "TrialResult",
    "repair_key",
]

logger = logging.getLogger(__name__)


class Probe(NamedTuple):
    """What :meth:`FrozenPolicyTrials.probe` made: the graded rollouts (none when refused), what they cost, and why
    they were refused (None: made)."""

    rollouts: list[RolloutRecord]
    cost: TrialCost
    error: str | None = None


class MeasuredInterface(Protocol):
    """What the critic asks of a candidate's interface (:class:`~harnessrl.interfaces.base.Interface`):
    the metric a trial of the update measures, and the trial itself (a recipe of the kit)."""

    def metric(self, update: Any, failure: Failure | None) -> str: ...

    def trial(self, update: Any, trial: Trial) -> Measured: ...

    def targets(self, update: Any) -> list[Task]: ...


@runtime_checkable
class TrialHarness(HarnessView, Protocol):
    """The harness as the critic reads it (:class:`~harnessrl.interfaces.harness.Harness` is one): what the
    recipes read, and the interface an update belongs to."""

    def interface(self, update: Any) -> MeasuredInterface: ...


class Trial(TrialContext):
    """One trial in progress, handed to the interface whose candidate it measures: the candidate, the
    failure it answers, the metric, the running budget and the measurements so far, and the recipes an
    interface's :meth:`~harnessrl.interfaces.base.Interface.trial` picks from.

    - :meth:`regrade`: the same cached rollouts graded under the current and a candidate rubric (paired,
      nothing generated);
    - :meth:`rollout_arms`: fresh rollouts of the frozen policy, each group member as the harness shapes
      it now and as it would with the candidate (``Harness.row(..., overlay=update)``);
    - :meth:`moved_draws`: the signal of the draws a change of sampling probabilities moves;
    - :meth:`probation`: nothing now; the candidate is committed and measured on the training groups after it;
    - :meth:`reject`: end the trial with a rejection and a reason.
    """

    @staticmethod
    def part(
        task: Task,
        current: RubricVersionView,
        candidate: Sequence[Criterion],
        targeted: tuple[list[str], list[str]],
        added: Sequence[Criterion] = (),
    ) -> RegradePart:
        """One task of a rubric candidate for :meth:`regrade`: ``current`` (a rubric version: ``.version``,
        ``.criteria``), the ``candidate`` criteria, the criteria a criterion-signal trial watches on each side
        (``targeted``), and the exact checks the candidate adds to it (``added``)."""
        return RegradePart(task, current, candidate, targeted, tuple(added))

    def regrade(self, parts: Sequence[RegradePart], on_probation: bool = False) -> Measured:
        """Re-grade the cached rollouts and reference answers of every task of the candidate (``parts``, its own
        task first) under the current and the candidate rubric, pooled (:mod:`harnessrl.critic.regrade`).
        ``on_probation``: the candidate only adds, so checks the data cannot decide yet may be committed on
        probation once a pooled group splits (``trials.pending_checks``)."""
        return regrade(self, parts, on_probation)

    def rollout_arms(self, targets: Sequence[Task], describe: str) -> Measured:
        """Two arms of fresh rollouts on ``targets`` (the failure's task first, then recently flat and
        active ones; one task, or up to two of several): rows as shaped now vs with the candidate."""
        return rollout_arms(self, targets, describe)

    def probation(self, targets: Sequence[Task], describe: str, checks: dict[str, list[str]] | None = None) -> Measured:
        """Nothing generated: the candidate is committed on probation and its trial is the training groups of
        ``targets`` that follow it, their guided and unguided members the two arms (``trials.guidance_trial:
        in_group``; the tool service's :class:`~harnessrl.evolution.probation.ProbationTracker` looks at them and
        keeps or reverts it). ``checks``: per task, the criteria a rubric edit with a hint adds; its looks decide by
        the rate at which the guided groups' rollouts break them (the rule for added checks)."""
        ids = [t.id for t in targets]
        self.measurements.probation = ProbationTerms(
            tasks=ids,
            look_groups=self.config.probation_look_groups,
            max_looks=self.config.max_looks,
            threshold=self.config.signal.threshold(SIGNAL_SHARE),
            **(
                {"checks": checks, "split_threshold": self.config.signal.threshold(CHECK_SPLIT_SHARE)} if checks else {}
            ),
        )
        if checks:
            reason = (
                f"on probation: {describe} is committed without fresh rollouts; the next training groups of its "
                f"{len(ids)} task(s), graded by the checks it adds, are the trial, a look every "
                f"{self.config.probation_look_groups} guided groups (at most {self.config.max_looks}): kept once the "
                f"rate at which their rollouts break the checks is shown to split at least "
                f"{self.config.signal.threshold(CHECK_SPLIT_SHARE):g} of groups, reverted when the data rule that out "
                "or cannot decide"
            )
            return Measured(verdict="probation", verdict_reason=reason)
        reason = (
            f"on probation: {describe} is committed without fresh rollouts; the guided and unguided members of the "
            f"next training groups of its {len(ids)} task(s) are the trial, a look every "
            f"{self.config.probation_look_groups} guided groups (at most {self.config.max_looks}): kept once the share "
            f"of them that give signal is shown {self.config.signal.threshold(SIGNAL_SHARE):g} above the share before "
            "it, reverted when the data rule that out or cannot decide"
        )
        return Measured(verdict="probation", verdict_reason=reason)

    def moved_draws(
        self, p: dict[str, float], q: dict[str, float], changed: Sequence[str], promoted: Sequence[str]
    ) -> Measured:
        """The share of the draws moving from sampling probabilities ``p`` to ``q`` that give signal,
        where they land vs where they were; ``promoted`` tasks are probed with fresh rollouts."""
        return moved_draws(self, p, q, changed, promoted)


def repair_key(update: Any) -> str:
    """What identifies one repair across looks and proposers: its interface, and either the signature it covers
    (a widened repair: the kinds of requirement are the signature's key, each task's own numbers and phrases are
    its instance) or its task and exactly what it adds (each check with its parameters, a judged criterion by its
    text). Not its wording, its criterion ids or who built it."""
    sig = getattr(update, "signature", None)
    if sig is not None:
        return json.dumps([update.interface, sig.kind, sig.key])
    adds = sorted(
        json.dumps(c.check.model_dump(mode="json"), sort_keys=True) if c.check is not None else c.text
        for c in getattr(update, "add", None) or []
    )
    task = str(getattr(update, "task_id", "") or getattr(update, "target", ""))
    return json.dumps([update.interface, task, adds])


class FrozenPolicyTrials:
    """Runs critic trials of candidate harness updates on the frozen policy.

    Args:
        harness: the interfaces (read only: candidates are previewed, never applied).
        recorder: the step records and the kept rollouts of the last steps.
        judge: the training judge (its verdict cache makes rubric trials cheap).
        sampler: generates with the frozen policy (None: guidance trials and probe batches are
            rejected; rubric trials and replay-only sampling trials still run).
        config: bounds and statistics.
        advantage: how the trainer turns rewards into advantages (its ``scale_rewards`` and group
            size: :meth:`AdvantageSpec.from_args` of its GRPO config); default TRL's group scaling.
    """

    def __init__(
        self,
        harness: TrialHarness,
        recorder: Recorder,
        judge: RubricJudge,
        sampler: PolicySampler | None,
        config: TrialConfig | None = None,
        advantage: AdvantageSpec | None = None,
    ):
        self.harness = harness
        self.recorder = recorder
        self.judge = judge
        self.sampler = sampler
        self.config = config or TrialConfig()
        self.advantage = advantage or AdvantageSpec()
        self.split_evidence: dict[str, SplitEvidence] = {}
        """The pooled evidence of the looks at each repair still pending (:mod:`harnessrl.critic.power`), by
        :func:`repair_key`: a later look at the same repair, whoever proposed it, adds to it."""

    def run(
        self, update: Any, candidate_id: str, failure: Failure | None = None, *, max_rollouts: int | None = None
    ) -> TrialResult:
        """Measure ``update`` (any interface's) on the frozen policy and decide; never applies it.

        The update's interface chooses the metric and the recipe (its ``metric`` and ``trial``). ``max_rollouts``
        lowers the config's bound for this trial (what the run's ``max_rollout_share`` leaves)."""
        interface = self.harness.interface(update)
        trial = self._start(update, failure, interface.metric(update, failure), max_rollouts)
        key = repair_key(update)
        if trial.metric == CHECK_SPLIT_SHARE:
            trial.split_evidence = self.split_evidence.setdefault(key, SplitEvidence())
        got, reason, kind = Measured(), "", "unmeasurable"
        try:
            got = interface.trial(update, trial)
        except Rejected as e:
            reason, got, kind = e.reason, e.measured or got, e.kind
        result = self._result(candidate_id, trial, got, reason, kind)
        if result.verdict_kind != "pending":
            self.split_evidence.pop(key, None)  # decided: a later proposal of it starts a new test
        logger.info(
            "trial %s (%s, %s): %s [%d rollouts, %d judge calls, %.1f s]",
            candidate_id,
            update.interface,
            result.metric,
            result.reason,
            result.cost.rollouts,
            result.cost.judge_calls,
            result.cost.seconds,
        )
        return result

    def pending_tests(self) -> dict[str, SplitEvidence]:
        """The pooled evidence of each repair whose test is pending and has taken a look, by :func:`repair_key`:
        what a resumed run restores (:meth:`restore_pending`)."""
        return {k: v for k, v in self.split_evidence.items() if v.looks}

    def restore_pending(self, tests: Mapping[str, SplitEvidence]) -> None:
        """Go on with pending tests saved by an earlier process (:meth:`pending_tests`): a later look at one of
        these repairs adds to its evidence and spends the error of its next look."""
        self.split_evidence.update(tests)

    def probe(self, tasks: Sequence[Task], *, max_rollouts: int | None = None) -> Probe:
        """One fresh group of the frozen policy for each of ``tasks``, graded by the run's judge under each task's
        current rubric as a training group is (reward and verdicts), recorded at step 0 and ``trained`` false: the
        rubric audit's probes before step 1 (:meth:`~harnessrl.evolution.service.EvolutionService.probe_audit`).
        What a step of training would be, measured without training on it; within ``max_rollouts`` (None: the
        groups asked for) and the judge's bound. A probe the budget or the sampler refuses keeps no rollout and says
        why (``error``); its cost, what was spent before, is there either way."""
        gsz = max(2, self.advantage.group_size)
        want = len(tasks) * gsz  # a probe is bounded by the run's share, not by one trial's max_rollouts
        cap = want if max_rollouts is None else min(want, max_rollouts)
        kit = self._trial(self.config.model_copy(update={"max_rollouts": cap}), None, None, "", TrialMeasurements())
        current = {t.id: self.harness.rubrics.current(t.id) for t in tasks}
        graded: list[RolloutRecord] = []
        try:
            versions = {t: v.version for t, v in current.items()}
            rollouts = fresh_group_rollouts(kit, tasks, versions, lambda _: 0, gsz, trained=False)
            for task in tasks:
                mine = [r for r in rollouts if r.task_id == task.id]
                texts = [r.completion for r in mine]
                (results,) = kit.budget.grade(task, texts, [current[task.id].criteria], "a probe group")
                graded += [
                    r.model_copy(
                        update={
                            "reward": results[r.completion].reward,
                            "verdicts": {v.criterion_id: v.value for v in results[r.completion].verdicts},
                        }
                    )
                    for r in mine
                ]
        except Rejected as e:
            return Probe([], kit.budget.cost(), e.reason)
        return Probe(graded, kit.budget.cost())

    def _start(self, update: Any, failure: Failure | None, metric: str, max_rollouts: int | None = None) -> Trial:
        """A trial of ``update`` beginning now: its budget running, and the settings it measures with recorded."""
        config = self.config
        if max_rollouts is not None and max_rollouts < config.max_rollouts:
            config = config.model_copy(update={"max_rollouts": max(0, max_rollouts)})
        measurements = TrialMeasurements(
            failure_kind=failure.kind if failure else None,
            bootstrap=self.config.bootstrap,
            confidence=self.config.confidence,
            seed=self.config.seed,
            scale_rewards=self.advantage.scale_rewards,
            verdict_noise=self.config.signal.verdict_noise,
        )
        if max_rollouts is not None:
            measurements.rollout_allowance, measurements.rollout_cap = max_rollouts, self.config.max_rollouts
        return self._trial(config, update, failure, metric, measurements)

    def _trial(
        self, config: TrialConfig, update: Any, failure: Failure | None, metric: str, measurements: TrialMeasurements
    ) -> Trial:
        """The kit of a trial (or a probe) under ``config``, its budget running from now."""
        return Trial(
            harness=self.harness,
            recorder=self.recorder,
            config=config,
            advantage=self.advantage,
            update=update,
            failure=failure,
            metric=metric,
            budget=Budget(config, self.judge, self.sampler),
            measurements=measurements,
        )

    def _result(self, candidate_id: str, trial: Trial, got: Measured, reason: str, kind: str) -> TrialResult:
        """The verdict (the acceptance rule, unless the trial was rejected with ``reason`` of ``kind``) and what it
        cost."""
        threshold = self.config.signal.threshold(trial.metric)
        accepted = False
        if not reason:
            accepted, kind, reason = decide(got, trial.metric, threshold, self.config.confidence)
        update = trial.update
        try:
            covers = [t.id for t in self.harness.interface(update).targets(update)]
        except ValueError:  # an update whose target is no training task: it covers none
            covers = []
        return TrialResult(
            candidate_id=candidate_id,
            interface=trial.update.interface,
            metric=trial.metric,
            baseline=rounded(got.baseline),
            candidate=rounded(got.candidate),
            improvement=rounded(got.improvement),
            ci_low=rounded(got.ci_low),
            ci_high=rounded(got.ci_high),
            threshold=threshold,
            margin=got.margin,
            advantage_effect=rounded(got.advantage_effect),
            accepted=accepted,
            verdict_kind=kind,
            min_detectable_effect=detectable(got, threshold, self.config.confidence),
            remedy=getattr(update, "remedy", None),
            covers=covers,
            reason=reason,
            measurements=trial.measurements,
            cost=trial.budget.cost(),
        )
