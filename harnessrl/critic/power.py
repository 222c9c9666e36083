"""The decision rule for checks a candidate adds: how often the policy breaks them, and what that teaches.

A check added to a rubric changes what GRPO learns from a group only when it **splits** the group: some rollouts
pass it, some do not. If the frozen policy breaks the check at rate ``p``, a group of ``G`` rollouts is split
with probability ``s(p) = 1 - p**G - (1 - p)**G``; ``s`` is the expected share of the groups the check gives a
spread to (docs/design.md §4, "Acceptance with power"). The critic estimates ``p`` from the cached rollouts of
*every* task the candidate covers, pooled (each covered task's own instance of the check, graded exactly), and
decides on ``s``:

- **accepted** when the lower end of the interval of ``s`` reaches the smallest effect worth a change
  (``threshold``: ``signal.min_effect["check_split_share"]``, 0.2, one group in five), i.e. the check will split
  at least that share of groups, with confidence. An exact check has no judge noise, so this threshold is not
  set by the A/A noise of two arms of the same prompts as the signal share's 0.25 is: 0.2 is the smallest share
  worth a rubric change, a choice, and the false-accept rate it gives is measured (docs/design.md §8);
- **futile** when the upper end is below it: the data rule out a useful split (every pooled rollout passes:
  the policy already does it; every one fails: no rollout meets it yet, so guidance must come first);
- **pending** otherwise, while the sequential test has looks left: the candidate is measured again when more
  groups of its tasks have been graded, on all the evidence so far, instead of being refused and proposed again;
  once the looks are spent and the data still cannot decide it is **not reliable** (refused; a later proposal of
  it starts a new test).

The interval of ``p`` is Clopper-Pearson's exact one; ``s`` is concave and symmetric about ``p = 1/2``, so its
interval follows from the ends of ``p``'s. Looking again at growing data inflates the chance of a false accept,
so the error ``1 - confidence`` is spent over at most ``max_looks`` looks (:func:`look_alpha`, a union bound):
``halving`` (the default) spends half of it at the first look, a quarter at the second, and so on, the last look
taking what is left; ``equal`` spends an equal share at each (Bonferroni). Either way the chance that any look
accepts a check whose true ``s`` is below the threshold stays under ``(1 - confidence) / 2`` (the accepting side
of a two-sided interval). Halving keeps the first looks' power and lets a slow split be looked at more often: at
one group of four a look, a check broken at a rate of 0.75 (``s`` = 0.68) is accepted by the third look 47% of
the time with three equal looks and 69% by the eighth with halving over eight, at a false-accept rate of 1.8% at
``s`` = 0.185 (``benchmarks/sequential_looks.py``).
Unlike a bootstrap over one group of four (which shows no split in one resample of eight when the group splits
2:2, so its interval always reaches 0), this rule accepts a 2:2 split of a single group at its first look (``s`` in
[0.244, 0.875]); a 1:3 split stays pending, 3 of 8 pooled rollouts broken accepts, and so do 4 of 16 (a rate of a
quarter).

:func:`min_detectable_share` gives the smallest ``s`` the rule accepts with probability 0.8 at a sample size:
what a trial records as the smallest effect it could have detected.

**The fade of a hint that states checks** (:func:`decide_met`) asks the plain prompt: do the unguided members of the
guided groups, pooled, meet the checks alone at a rate ``m`` of at least ``floor`` (``signal.min_effect
["hint_met_rate"]``, 0.5: more often than not)? **Accepted** (the hint fades) when the lower end of ``m``'s interval
reaches ``floor``, **futile** (the hint stays) when its upper end is below it, pending in between, with the same
looks and the same spending of the error. Any ``m`` in ``(0, 1)`` already lets the checks split plain groups; the floor
asks more, that the policy has learnt what the hint states, because a guided member that meets it is also a
positive example trained under the plain prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.stats import beta, binom

from harnessrl.critic.acceptance import DETECTION_POWER

__all__ = [
    "Spending",
    "SplitEvidence",
    "SplitVerdict",
    "clopper_pearson",
    "decide_met",
    "decide_share",
    "decide_split",
    "look_alpha",
    "min_detectable_rate",
    "min_detectable_share",
    "mostly_broken",
    "split_share",
    "split_share_interval",
]


def split_share(p: float, group_size: int) -> float:
    """The share of groups of ``group_size`` that a check broken at rate ``p`` splits (some pass, some fail)."""
    return 1.0 - p**group_size - (1.0 - p) ** group_size


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """The exact two-sided ``1 - alpha`` interval of a rate seen ``k`` times in ``n``."""
    if n <= 0:
        return 0.0, 1.0
    lo = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def split_share_interval(k: int, n: int, group_size: int, alpha: float) -> tuple[float, float]:
    """The interval of :func:`split_share` implied by the Clopper-Pearson interval of the rate ``k / n``."""
    lo, hi = clopper_pearson(k, n, alpha)
    ends = (split_share(lo, group_size), split_share(hi, group_size))
    top = split_share(0.5, group_size) if lo <= 0.5 <= hi else max(ends)
    return min(ends), top


@dataclass(frozen=True)
class SplitVerdict:
    """A look's decision: its kind (accepted, pending, futile), the estimate of the split share, its interval,
    the rate and the data behind them, and the smallest share this sample could have detected."""

    kind: str
    share: float
    low: float
    high: float
    broken: int
    rollouts: int
    look: int
    alpha: float
    min_detectable: float | None


Spending = Literal["halving", "equal"]
"""How the error of a sequential test is spent over its looks (:func:`look_alpha`)."""


def look_alpha(confidence: float, look: int, max_looks: int, spending: Spending = "halving") -> float:
    """The error look ``look`` (1-based) of at most ``max_looks`` may spend, out of ``1 - confidence`` in all:
    ``equal`` gives each look the same share; ``halving`` gives look ``k`` half of what the looks before it left
    (``(1 - confidence) / 2**k``), and the last look all that is left (so one look spends the whole error). The
    looks' errors sum to ``1 - confidence`` at most, which bounds the chance that any look errs (a union bound)."""
    error, looks = 1.0 - confidence, max(1, max_looks)
    if spending == "equal":
        return error / looks
    if spending != "halving":
        raise ValueError(f"unknown alpha spending {spending!r}: use 'halving' or 'equal'")
    k = min(max(1, look), looks)
    return error / 2 ** (k - 1 if k == looks else k)


def _kind(low: float, high: float, n: int, threshold: float, look: int, max_looks: int) -> str:
    """accepted, futile, pending or not_reliable for an interval ``[low, high]`` on ``n`` observations."""
    if n and low >= threshold:
        return "accepted"
    if n and high < threshold:
        return "futile"
    if look < max_looks or not n:
        return "pending"
    return "not_reliable"  # the looks are spent and the data still cannot decide


def decide_split(
    broken: int,
    rollouts: int,
    group_size: int,
    threshold: float,
    confidence: float,
    look: int,
    max_looks: int,
    spending: Spending = "halving",
) -> SplitVerdict:
    """The rule of the module docstring on ``broken`` of ``rollouts`` pooled rollouts, at look ``look`` (1-based)
    of at most ``max_looks``, the error spent over the looks as ``spending`` says."""
    alpha = look_alpha(confidence, look, max_looks, spending)
    low, high = split_share_interval(broken, rollouts, group_size, alpha)
    share = split_share(broken / rollouts, group_size) if rollouts else 0.0
    kind = _kind(low, high, rollouts, threshold, look, max_looks)
    mde = min_detectable_share(rollouts, group_size, threshold, alpha)
    return SplitVerdict(kind, share, low, high, broken, rollouts, look, alpha, mde)


def decide_met(
    met: int,
    rollouts: int,
    floor: float,
    confidence: float,
    look: int,
    max_looks: int,
    spending: Spending = "halving",
) -> SplitVerdict:
    """The fade rule of the module docstring: ``met`` of ``rollouts`` pooled unguided rollouts meet the checks a hint
    states, at look ``look`` of at most ``max_looks``, against the rate ``floor``. The verdict's ``share``, ``low``
    and ``high`` are the met rate and its interval, ``broken`` the rollouts that do not meet them."""
    alpha = look_alpha(confidence, look, max_looks, spending)
    low, high = clopper_pearson(met, rollouts, alpha)
    kind = _kind(low, high, rollouts, floor, look, max_looks)
    mde = min_detectable_rate(rollouts, floor, alpha)
    rate = met / rollouts if rollouts else 0.0
    return SplitVerdict(kind, rate, low, high, rollouts - met, rollouts, look, alpha, mde)


def decide_share(
    hits: int,
    groups: int,
    threshold: float,
    confidence: float,
    look: int,
    max_looks: int,
    spending: Spending = "halving",
) -> SplitVerdict:
    """The same rule on a share seen directly: ``hits`` of ``groups`` groups gave signal (a probation's guided
    groups, :mod:`harnessrl.evolution.probation`), its Clopper-Pearson interval against ``threshold``, the error
    spent over ``max_looks`` looks as ``spending`` says. ``broken``/``rollouts`` of the verdict hold
    ``hits``/``groups``."""
    alpha = look_alpha(confidence, look, max_looks, spending)
    low, high = clopper_pearson(hits, groups, alpha)
    share = hits / groups if groups else 0.0
    kind = _kind(low, high, groups, threshold, look, max_looks)
    return SplitVerdict(
        kind, share, low, high, hits, groups, look, alpha, min_detectable_rate(groups, threshold, alpha)
    )


def _first_powered_rate(n: int, accepts_at: Callable[[int], bool], rates: np.ndarray) -> float | None:
    """The smallest of ``rates`` at which ``k ~ Binomial(n, rate)`` gives ``accepts_at(k)`` with probability
    :data:`DETECTION_POWER` (None: none does, or no ``k`` is accepted at all)."""
    if n <= 0:
        return None
    ks = np.arange(n + 1)
    accepts = np.array([accepts_at(int(k)) for k in ks])
    if not accepts.any():
        return None
    power = (binom.pmf(ks[None, :], n, rates[:, None]) * accepts[None, :]).sum(axis=1)
    hits = np.flatnonzero(power >= DETECTION_POWER)
    return None if hits.size == 0 else float(rates[hits[0]])


def min_detectable_rate(n: int, threshold: float, alpha: float) -> float | None:
    """The smallest rate whose ``n`` observations the Clopper-Pearson rule accepts (lower end at or above
    ``threshold``) with probability :data:`DETECTION_POWER` (None: no rate does at this ``n``)."""
    rate = _first_powered_rate(n, lambda k: clopper_pearson(k, n, alpha)[0] >= threshold, np.arange(1, 201) / 200)
    return None if rate is None else round(rate, 3)


def min_detectable_share(rollouts: int, group_size: int, threshold: float, alpha: float) -> float | None:
    """The smallest split share the rule accepts with probability :data:`DETECTION_POWER` at ``rollouts``
    pooled rollouts and a look's error ``alpha`` (None: no rate does, the sample is too small for any
    acceptance)."""
    rate = _first_powered_rate(
        rollouts,
        lambda k: split_share_interval(k, rollouts, group_size, alpha)[0] >= threshold,
        0.5 * np.arange(1, 201) / 200,  # rates in (0, 1/2]: s is symmetric about 1/2
    )
    return None if rate is None else round(split_share(rate, group_size), 3)


def mostly_broken(broken: float, rollouts: float) -> bool:
    """Whether added checks are broken by more of ``rollouts`` than meet them: the policy does not meet them yet, so a
    check alone splits few groups and its pooled test decides slowly. A pending test of such checks waits for a hint
    (``evolver.graph.revise_unmet_pending``); one met at least as often may go on probation alone
    (``trials.pending_checks``)."""
    return rollouts > 0 and 2 * broken > rollouts


@dataclass
class SplitEvidence:
    """The pooled evidence on one candidate repair over the looks so far: each rollout graded once (by its step,
    task and member), whether it breaks the candidate's checks, and the training step at which each look was taken
    (a resumed run keeps the looks up to its checkpoint: :meth:`until`)."""

    outcomes: dict[tuple[int, str, int], bool] = field(default_factory=dict)
    fresh: list[tuple[int, bool]] = field(default_factory=list)  # fresh rollouts a trial drew: (look step, broken)
    look_steps: list[int] = field(default_factory=list)  # the last recorded training step at each look

    def add(self, step: int, task_id: str, member: int, broken: bool, at: int = 0) -> bool:
        """Record one rollout's outcome (a fresh one, not of a training step, has ``step < 0``; ``at``: the look's
        step, when it was drawn); whether it is new evidence."""
        if step < 0:
            self.fresh.append((at, broken))
            return True
        key = (step, task_id, member)
        if key in self.outcomes:
            return False
        self.outcomes[key] = broken
        return True

    def look(self, at: int) -> int:
        """Count one more look, taken when ``at`` was the last recorded training step; the looks so far."""
        self.look_steps.append(at)
        return self.looks

    @property
    def looks(self) -> int:
        return len(self.look_steps)

    def until(self, step: int) -> SplitEvidence:
        """The evidence as it stood after the looks taken at or before training step ``step`` (a resumed run's
        checkpoint): the outcomes of later steps, the fresh rollouts and the looks of later looks left out."""
        return SplitEvidence(
            outcomes={k: v for k, v in self.outcomes.items() if k[0] <= step},
            fresh=[f for f in self.fresh if f[0] <= step],
            look_steps=[at for at in self.look_steps if at <= step],
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON object of the evidence (:meth:`from_json` reads it back)."""
        return {
            "outcomes": [[s, t, m, b] for (s, t, m), b in sorted(self.outcomes.items())],
            "fresh": [list(f) for f in self.fresh],
            "look_steps": list(self.look_steps),
        }

    @classmethod
    def from_json(cls, data: Any) -> SplitEvidence:
        """The evidence :meth:`to_json` wrote; ValueError naming what is wrong when ``data`` is not that."""
        try:
            return cls(
                outcomes={(int(s), str(t), int(m)): bool(b) for s, t, m, b in data["outcomes"]},
                fresh=[(int(at), bool(b)) for at, b in data["fresh"]],
                look_steps=[int(at) for at in data["look_steps"]],
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"not a pending test's evidence ({type(e).__name__}: {e}): expected an object with 'outcomes' "
                "([step, task, member, broken] rows), 'fresh' ([look step, broken] rows) and 'look_steps'"
            ) from None

    @property
    def broken(self) -> int:
        return sum(self.outcomes.values()) + sum(b for _, b in self.fresh)

    @property
    def rollouts(self) -> int:
        return len(self.outcomes) + len(self.fresh)

    def tasks(self) -> list[str]:
        return sorted({k[1] for k in self.outcomes})

    def split_groups(self) -> int:
        """The training groups (a step's rollouts of one task) in which some rollouts break the checks and some
        meet them: the groups the checks would have given signal to."""
        groups: dict[tuple[int, str], set[bool]] = {}
        for (step, task_id, _), broken in self.outcomes.items():
            groups.setdefault((step, task_id), set()).add(broken)
        return sum(len(seen) == 2 for seen in groups.values())


def expected_groups_split(share: float) -> str:
    """``share`` as words for a reason: 'about 68% of groups split'."""
    return "no group split" if share <= 0 else f"about {share:.0%} of groups split"
