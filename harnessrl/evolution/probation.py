"""Probation: a hint committed without fresh rollouts, measured on the training groups that follow it, and kept or
reverted (docs/design.md §4, "Guidance measured in the group").

A hint for part of a group (rollout guidance) changes what the frozen policy generates, so measuring it the usual
way draws fresh rollouts: two arms of 8 per probed task, 12–16 at once, more than a fifth of training's rollouts
affords on a small run (``trials.max_rollout_share``). With ``trials.guidance_trial: in_group`` (the default) the
critic draws nothing: the hint is committed on probation, and each training group of the tasks it covers is the
trial, its guided members one arm and its unguided members the other (RuscaRL's guidance varies within the group
the same way, so every guided group carries its own control). What the hint is for is signal: a group whose rollouts all
fail alike teaches nothing, and a guided member that succeeds gives the group a spread.

:class:`ProbationTracker` gathers the guided groups of the covered tasks from the step the hint applies, and every
``look_groups`` groups takes a look: the share of them that give signal (reward spread above the trainer's flat
eps), its exact interval, against the share the same tasks' groups gave before the hint plus the smallest effect
worth a change (:func:`~harnessrl.critic.power.decide_share`, the error spent over at most ``max_looks`` looks as
``spending`` says: :func:`~harnessrl.critic.power.look_alpha`). **Kept** when
the interval's lower end reaches it; **reverted** when its upper end is below it (the data rule the effect out) or
the looks are spent undecided; otherwise the hint stays in force and the next look waits for more groups. Each look
is a ``probation`` event with its numbers and each arm's mean reward; a revert is applied at the next step boundary
(the rules the hint replaced come back, a new harness version) and is a ``revert`` event.

A rubric edit that states its checks as a hint (``EditRubric.guide_fraction``) names those checks (``checks``: per
task, the criterion ids it added). Its looks decide by the rule for added checks instead
(:func:`~harnessrl.critic.power.decide_split`): the rate at which the rollouts of its guided groups, every member,
break the checks, pooled, and the share of groups of ``G`` that rate splits, against ``split_threshold`` (the
check-split share's smallest effect, 0.2). Rollouts are four times the groups, and the share before needs no
estimate (the checks did not grade anything before): the share-of-groups rule, on the 16 groups of its 8 looks,
keeps a real rise of 0.5 from a share of 0 one time in five, the checks' rule an edit whose guided half meets the
checks half the time 97 times in 100 (``benchmarks/results/probation-rule``). With guided
members that meet the checks more often than the rest, the split share is at least the one at the pooled rate (by the
AM-GM inequality on the members' rates), and the count's variance at most the binomial's, so the rule stays on the
side of refusing.

A rubric edit whose added checks the pooled re-grade cannot decide yet (``trials.pending_checks: probation``,
:mod:`harnessrl.critic.regrade`) goes on probation at the first look at which one of its pooled groups splits: the
trial's evidence (``prior``: the rollouts that broke the checks, those graded, the looks taken) is carried in, every
training group of the covered tasks after the commit adds its rollouts (graded by the checks now in force), and
the looks continue the pending test's own (look ``k`` spends the error look ``k`` of the test would have), so the
edit is kept or reverted on the evidence and at the error the test without probation would have decided on; what
changes is that the repair grades the groups in between. Its policy trains on the checks meanwhile: a policy that
learns to meet them lowers the split share of later groups, so a look at pooled evidence, not the latest groups
alone, decides.

Locking: like the outcome tracker, a leaf lock of its own; it is fed on the training thread inside a step.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessrl.critic.config import TrialConfig
from harnessrl.critic.power import Spending, decide_share, decide_split
from harnessrl.critic.signal import CHECK_SPLIT_SHARE, SIGNAL_SHARE
from harnessrl.records.event_payloads import (
    CommitPayload,
    ProbationPayload,
    ProbationPrior,
    ProbationSplit,
    RevertPayload,
)

if TYPE_CHECKING:
    from harnessrl.interfaces.base import InterfaceUpdate
    from harnessrl.records.events import Event
    from harnessrl.records.steps import GroupRecord, Recorder, StepRecord

__all__ = ["REVERT_SUFFIX", "Probation", "ProbationLook", "ProbationRule", "ProbationTracker", "UpdateParser"]

REVERT_SUFFIX = "-revert"
"""A reverted probation's rules go back into the harness as an update of the candidate id ``<candidate><suffix>``;
its event is a ``revert`` of the candidate (never a ``commit``)."""

BEFORE_GROUPS = 4
"""The covered tasks' latest groups before the hint whose signal share is its baseline."""

UpdateParser = Callable[[Mapping[str, Any]], "InterfaceUpdate"]
"""An update as an event wrote it, parsed back into its interface's model (the run's harness knows its interfaces)."""


@dataclass(frozen=True)
class ProbationRule:
    """How a probation decides: the smallest rise of the signal share worth keeping a hint (``threshold``), the
    coverage of the interval, the most looks, the guided groups between two looks, how the error is spent over the
    looks, and the smallest split share of a rubric edit's checks. Its numbers are the run's trial settings
    (:meth:`of`), which hold their defaults."""

    threshold: float
    confidence: float
    max_looks: int
    look_groups: int
    split_threshold: float
    spending: Spending

    @classmethod
    def of(cls, trials: TrialConfig | None = None) -> ProbationRule:
        """The rule a run's trial settings give (``evolver.trials``; None: their defaults): the signal share's and the
        check-split share's smallest effects, the interval's coverage, the looks and how the error is spent over
        them."""
        if trials is None:
            trials = TrialConfig()
        return cls(
            threshold=trials.signal.threshold(SIGNAL_SHARE),
            confidence=trials.confidence,
            max_looks=trials.max_looks,
            look_groups=trials.probation_look_groups,
            split_threshold=trials.signal.threshold(CHECK_SPLIT_SHARE),
            spending=trials.alpha_spending,
        )


@dataclass
class Probation:
    """One hint on probation: its candidate, the tasks it covers, the step it applies from, the updates that restore
    what it replaced, the signal share before it, and the guided groups seen so far (counts: they survive a resume
    through the ``probation`` events)."""

    candidate_id: str
    task_ids: list[str]
    applied_step: int
    revert: list[InterfaceUpdate]
    before_share: float | None
    before_groups: int
    groups: int = 0
    signal: int = 0
    looks: int = 0
    guided_sum: float = 0.0
    guided_n: int = 0
    unguided_sum: float = 0.0
    unguided_n: int = 0
    last_step: int = -1
    checks: dict[str, list[str]] = field(default_factory=dict)
    """Per task, the criteria a rubric edit with a hint added (empty: a hint alone, decided by the signal share)."""
    broken: int = 0
    graded: int = 0
    group_size: int = 0
    prior_looks: int = 0
    """Looks a pending test of its checks took before the commit (:meth:`ProbationTracker.start`'s ``prior``): its
    looks continue theirs."""

    def add(self, g: GroupRecord) -> None:
        k = g.guided
        self.groups += 1
        self.signal += int(not g.flat and g.std is not None)
        ids = self.checks.get(g.task_id) or []
        if ids:
            n = sum(r is not None for r in g.rewards)
            # a rollout breaks the checks when it fails any: at least the most any one of them is broken
            fails = [round((1.0 - m) * n) for c in ids if (m := g.criterion_means.get(c)) is not None]
            if fails:
                self.broken += max(fails)
                self.graded += n
                self.group_size = max(self.group_size, len(g.rewards))
        for i, r in enumerate(g.rewards):
            if r is None:
                continue
            if i < k:
                self.guided_sum, self.guided_n = self.guided_sum + r, self.guided_n + 1
            else:
                self.unguided_sum, self.unguided_n = self.unguided_sum + r, self.unguided_n + 1

    def event_fields(self) -> dict[str, Any]:
        """What its commit event records of it (a resumed run reopens it from them: :meth:`opened`)."""
        return CommitPayload(
            probation=True,
            revert=[u.model_dump(mode="json") for u in self.revert],
            signal_share_before=self.before_share,
            groups_before=self.before_groups,
            **({"probation_checks": self.checks} if self.checks else {}),
            **({"probation_prior": self.prior()} if self.prior_looks else {}),
        ).written()

    @classmethod
    def opened(cls, commit: CommitPayload, step: int, parse: UpdateParser) -> Probation:
        """The probation a ``commit`` event at ``step`` opened (:meth:`event_fields`), before any look."""
        p = cls(
            str(commit.candidate_id),
            list(commit.covers),
            commit.applies_from_step or step + 1,
            [parse(u) for u in commit.revert],
            commit.signal_share_before,
            commit.groups_before or 0,
            checks={t: list(ids) for t, ids in commit.probation_checks.items()},
        )
        if commit.probation_prior is not None:
            p.carry(commit.probation_prior)
        return p

    def carry(self, prior: ProbationPrior | Mapping[str, Any]) -> None:
        """Take in the evidence of the pending test its looks continue (:meth:`prior`'s fields)."""
        prior = ProbationPrior.model_validate(prior)
        self.broken, self.graded = prior.broken, prior.rollouts
        self.looks = self.prior_looks = prior.looks
        self.group_size = prior.group_size

    def prior(self) -> ProbationPrior:
        """The evidence carried from a pending test (with :attr:`prior_looks`), as counted now."""
        return ProbationPrior(
            broken=self.broken, rollouts=self.graded, looks=self.prior_looks, group_size=self.group_size
        )

    def seen(self, look: ProbationPayload, step: int) -> None:
        """Its counts as the ``probation`` event ``look`` at ``step`` recorded them (a resumed run's replay: the groups
        trained between that look and the checkpoint are not counted again)."""
        self.groups, self.signal, self.looks = look.groups, look.signal_groups, look.look
        if look.split is not None:
            self.broken, self.graded, self.group_size = look.split.broken, look.split.rollouts, look.split.group_size
        self.before_share, self.before_groups = look.signal_share_before, look.groups_before or 0
        self.guided_n, self.guided_sum = _arm(look.guided_rollouts, look.guided_mean_reward)
        self.unguided_n, self.unguided_sum = _arm(look.unguided_rollouts, look.unguided_mean_reward)
        self.last_step = step

    @classmethod
    def from_events(cls, events: Iterable[Event], through_step: int, parse: UpdateParser) -> dict[str, Probation]:
        """The probations still open at ``through_step`` (a resumed run's checkpoint), by candidate, from the run's
        events: opened by their ``commit`` on probation, brought to their last ``probation`` look's counts, closed by
        a decided look; a ``revert`` closes one whatever its step (``harness.json`` holds the rules it put back). The
        steps after the checkpoint are trained again and observed anew."""
        open_: dict[str, Probation] = {}
        for e in events:
            if e.kind not in ("commit", "probation", "revert"):
                continue
            payload = e.payload()
            cid = (
                payload.candidate_id if isinstance(payload, CommitPayload | ProbationPayload | RevertPayload) else None
            )
            if isinstance(payload, RevertPayload):
                open_.pop(str(cid), None)
            elif e.step is None or e.step > through_step or not cid:
                continue
            elif isinstance(payload, CommitPayload) and payload.probation:
                open_[cid] = cls.opened(payload, e.step, parse)
            elif isinstance(payload, ProbationPayload) and cid in open_:
                open_[cid].seen(payload, e.step)
                if payload.action:
                    open_.pop(cid)
        return open_

    def due(self, look_groups: int) -> bool:
        """Whether enough groups came since the commit for its next look."""
        return self.groups >= (self.looks - self.prior_looks + 1) * look_groups

    def target(self, rule: ProbationRule) -> float:
        """The signal share the guided groups must be shown to reach."""
        return min(1.0, (self.before_share or 0.0) + rule.threshold)

    def reverted(self, step: int, versions: list[int], reason: str) -> RevertPayload:
        """Its ``revert`` event at ``step``: the rules it replaced back from the next step (``versions``: the harness
        versions that put them back)."""
        return RevertPayload(
            candidate_id=self.candidate_id,
            interface=self.revert[0].interface if self.revert else None,
            versions=versions,
            applies_from_step=step + 1,
            covers=self.task_ids,
            reason=reason + ("" if self.revert else "; nothing to revert: the checks the prompts state stay"),
            updates=[u.model_dump(mode="json") for u in self.revert],
        )


def _arm(n: int | None, mean: float | None) -> tuple[int, float]:
    """An arm's rollouts and reward sum from a look's count and mean."""
    n = n or 0
    return n, float(mean) * n if mean is not None else 0.0


@dataclass(frozen=True)
class ProbationLook:
    """One look at a probation: its verdict kind (accepted: kept; futile or not_reliable: reverted; pending) and its
    ``probation`` event."""

    probation: Probation
    kind: str
    step: int
    payload: ProbationPayload = field(default_factory=ProbationPayload)

    @property
    def decided(self) -> bool:
        return self.kind != "pending"

    @property
    def reverts(self) -> bool:
        return self.kind in ("futile", "not_reliable")

    def reason(self) -> str:
        """Why it decided, in words (a revert's reason): the checks' rule, or the signal share."""
        f = self.payload
        head = f"probation {self.kind} at look {f.look}: "
        if (split := f.split) is not None:
            return (
                head + f"{split.broken} of {split.rollouts} rollouts of {f.groups} guided groups broke the checks, "
                f"split share {split.split_share}, interval {split.interval} against {split.threshold}"
            )
        groups = f"{f.signal_groups} of {f.groups} guided groups gave signal"
        return head + f"{groups}, interval {f.interval} against {f.target}"


def _share(groups: Sequence[GroupRecord]) -> float | None:
    return round(sum(not g.flat and g.std is not None for g in groups) / len(groups), 4) if groups else None


class ProbationTracker:
    """The hints on probation (see the module docstring).

    Args:
        recorder: the trainer's recorder (the covered tasks' groups before a hint).
        rule: how a look decides.
    """

    def __init__(self, recorder: Recorder | None, rule: ProbationRule | None = None):
        self.recorder = recorder
        self.rule = rule or ProbationRule.of()
        self._lock = threading.Lock()
        self._open: dict[str, Probation] = {}
        self._decided: list[ProbationLook] = []

    def start(
        self,
        candidate_id: str,
        task_ids: list[str],
        applied_step: int,
        revert: list[InterfaceUpdate],
        checks: dict[str, list[str]] | None = None,
        prior: ProbationPrior | Mapping[str, Any] | None = None,
    ) -> Probation:
        """Put ``candidate_id``'s hint on probation from ``applied_step``: the signal share of its tasks' latest
        groups before it is the baseline; with ``checks`` (per task, the criteria a rubric edit added) the looks
        decide by the rule for added checks (module docstring). ``prior``: the evidence of a pending test of those
        checks (``broken``, ``rollouts``, ``looks``, ``group_size``), which its looks continue."""
        steps = list(self.recorder.steps.values()) if self.recorder is not None else []
        before = [g for r in steps if r.step < applied_step for g in r.observed if g.task_id in task_ids]
        before = before[-BEFORE_GROUPS:]
        p = Probation(
            candidate_id, list(task_ids), applied_step, list(revert), _share(before), len(before), checks=checks or {}
        )
        if prior:
            p.carry(prior)
        with self._lock:
            self._open[candidate_id] = p
        return p

    def reopen(self, p: Probation) -> None:
        """A probation a resumed run's events left open (its counts as its last look saw them)."""
        with self._lock:
            self._open[p.candidate_id] = p

    def open(self) -> list[Probation]:
        with self._lock:
            return list(self._open.values())

    def observe(self, record: StepRecord) -> list[ProbationLook]:
        """A trained step's record: its guided groups of covered tasks feed the open probations; returns the looks
        taken now (a decided one also waits for :meth:`settle`)."""
        looks = []
        with self._lock:
            for p in list(self._open.values()):
                if record.step < p.applied_step or record.step <= p.last_step:
                    continue
                p.last_step = record.step
                for g in record.observed:  # DAPO's dropped groups too: a flat one is a look's evidence
                    # a rubric edit's checks grade every member: its groups count after its hint faded too
                    if g.task_id in p.task_ids and (g.guided > 0 or p.checks):
                        p.add(g)
                if p.due(self.rule.look_groups):
                    look = self._look(p, record.step)
                    looks.append(look)
                    if look.decided:
                        self._open.pop(p.candidate_id)
                        self._decided.append(look)
        return looks

    def settle(self) -> list[ProbationLook]:
        """The decided looks not yet acted on (the service reverts or keeps them at a step boundary)."""
        with self._lock:
            out, self._decided = self._decided, []
        return out

    def replay(self, events: Iterable[Event], through_step: int, parse: UpdateParser) -> None:
        """Reopen the probations a resumed run's ``events`` left open at ``through_step``
        (:meth:`Probation.from_events`)."""
        for p in Probation.from_events(events, through_step, parse).values():
            self.reopen(p)

    def _look(self, p: Probation, step: int) -> ProbationLook:
        r = self.rule
        p.looks += 1
        target = p.target(r)
        v = decide_share(p.signal, p.groups, target, r.confidence, p.looks, r.max_looks, r.spending)
        mean = lambda s, n: round(s / n, 4) if n else None  # noqa: E731
        look = ProbationPayload(
            candidate_id=p.candidate_id,
            task_ids=p.task_ids,
            applied_step=p.applied_step,
            look=p.looks,
            max_looks=r.max_looks,
            **({"looks_before_commit": p.prior_looks} if p.prior_looks else {}),
            groups=p.groups,
            signal_groups=p.signal,
            signal_share=round(v.share, 4),
            interval=[round(v.low, 4), round(v.high, 4)],
            alpha_spending=r.spending,
            alpha_per_look=round(v.alpha, 4),
            signal_share_before=p.before_share,
            groups_before=p.before_groups,
            target=round(target, 4),
            min_detectable=v.min_detectable,
            guided_mean_reward=mean(p.guided_sum, p.guided_n),
            unguided_mean_reward=mean(p.unguided_sum, p.unguided_n),
            guided_rollouts=p.guided_n,
            unguided_rollouts=p.unguided_n,
        )
        if p.checks:  # the checks' rule decides; the signal share is reported beside it
            gsz = max(2, p.group_size)
            v = split = decide_split(
                p.broken, p.graded, gsz, r.split_threshold, r.confidence, p.looks, r.max_looks, r.spending
            )
            look.split = ProbationSplit(
                broken=split.broken,
                rollouts=split.rollouts,
                group_size=gsz,
                split_share=round(split.share, 4),
                interval=[round(split.low, 4), round(split.high, 4)],
                threshold=r.split_threshold,
                min_detectable=split.min_detectable,
            )
        look.decided_by = "check_split_share" if p.checks else "signal_share"
        look.verdict_kind = v.kind
        look.action = {"accepted": "kept", "futile": "reverted", "not_reliable": "reverted"}.get(v.kind)
        return ProbationLook(p, v.kind, step, look)
