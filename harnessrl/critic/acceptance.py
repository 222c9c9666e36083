"""The critic's acceptance rule: a reliable *and* practical improvement, never a bare "new > old".

Each trial recipe (:mod:`harnessrl.critic.trials`) measures its metric on the frozen policy under the
current harness and under the candidate, resamples the improvement with a seeded bootstrap, and hands
the numbers here as a :class:`Measured`. :func:`percentile_interval` turns the bootstrap differences
into the ``confidence`` percentile interval of the improvement; :func:`decide` accepts the candidate
only when no guard objected (e.g. a rubric edit that pushes the reference answer below the policy),
the lower end of that interval is above zero **and** the improvement reaches the metric's smallest
effect worth a harness change (``threshold``: :meth:`~harnessrl.critic.signal.SignalConfig.threshold`).
The reason it gives says which, with the effect, the interval and the threshold.

A candidate that only takes harness away (a hint that fades: docs/design.md §4) need not improve the
signal, only keep it: its recipe sets a **non-inferiority margin** (``Measured.margin``, the metric's
smallest effect worth a change), and it is accepted when the interval's lower end is above ``-margin``, so
a loss the critic cannot rule out at that size rejects it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

__all__ = ["DETECTION_POWER", "Measured", "decide", "fmt", "percentile_interval"]

DETECTION_POWER = 0.8
"""The probability of acceptance at which an effect counts as detectable (the power of the critic's tests)."""


@dataclass
class Measured:
    """A trial's numbers, before the verdict."""

    baseline: float | None = None
    candidate: float | None = None
    improvement: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    guard: str | None = None  # the reference guard's reason to reject even when the interval is above 0
    advantage_effect: float | None = None
    margin: float | None = None  # non-inferiority: accept when ci_low > -margin (a candidate that removes harness)
    spread: float | None = None  # the bootstrap std of the improvement (for the smallest detectable effect)
    verdict: str | None = None  # a recipe that decides by its own rule (power.py): accepted, pending, futile, probation
    verdict_reason: str | None = None
    min_detectable: float | None = None  # the smallest improvement this trial could have detected


def percentile_interval(got: Measured, diffs: np.ndarray, confidence: float) -> Measured:
    """``got`` with its improvement (candidate - baseline, unless the recipe set it) and the ``confidence``
    percentile interval of the bootstrap differences ``diffs``."""
    if got.improvement is None and got.baseline is not None and got.candidate is not None:
        got.improvement = got.candidate - got.baseline
    c = confidence
    lo, hi = np.quantile(diffs, [(1 - c) / 2, (1 + c) / 2])
    got.ci_low, got.ci_high = float(lo), float(hi)
    got.spread = float(np.std(diffs))
    return got


def detectable(got: Measured, threshold: float, confidence: float) -> float | None:
    """The smallest improvement the rule could have detected on this trial's data: the recipe's own figure, else
    the larger of the threshold and the effect whose interval would clear 0 with probability 0.8 at the
    bootstrap's spread (normal approximation: (z_{(1+c)/2} + z_{0.8}) x spread)."""
    if got.min_detectable is not None or got.spread is None:
        return got.min_detectable
    z = float(norm.ppf((1 + confidence) / 2) + norm.ppf(DETECTION_POWER))
    return round(max(threshold, z * got.spread), 4)


def decide(got: Measured, metric: str, threshold: float, confidence: float) -> tuple[bool, str, str]:
    """The verdict on a trial that was measured to the end: (accepted, its
    :data:`~harnessrl.records.trials.VerdictKind`, the reason in one sentence)."""
    accepted, reason = _decide(got, metric, threshold, confidence)
    if got.guard:  # the one guard there is: a rubric candidate may not push the reference answer down
        return False, "reference_guard", reason
    if got.verdict is not None:
        return accepted, got.verdict, reason
    if accepted:
        return True, "accepted", reason
    if got.improvement is None or got.ci_low is None:
        return False, "unmeasurable", reason
    if got.margin is not None:
        return False, "inferior", reason
    return False, ("not_reliable" if got.ci_low <= 0 else "too_small"), reason


def _decide(got: Measured, metric: str, threshold: float, confidence: float) -> tuple[bool, str]:
    if got.guard:
        return False, got.guard
    if got.verdict is not None:
        return got.verdict in ("accepted", "probation"), got.verdict_reason or got.verdict
    if got.improvement is None or got.ci_low is None:
        return False, "nothing measurable: no improvement could be computed"
    if got.margin is not None:
        kept = (
            f"{metric} {fmt(got.baseline)} -> {fmt(got.candidate)} (change {got.improvement:.3f}, "
            f"{confidence:.0%} bootstrap interval [{got.ci_low:.3f}, {got.ci_high:.3f}], "
            f"non-inferiority margin {got.margin:g})"
        )
        if got.ci_low > -got.margin:
            return True, f"accepted: the learning signal holds without the harness it removes: {kept}"
        return False, f"rejected: removing it may cost more signal than the margin: {kept}"
    effect = (
        f"{metric} {fmt(got.baseline)} -> {fmt(got.candidate)} (improvement {got.improvement:.3f}, "
        f"{confidence:.0%} bootstrap interval [{got.ci_low:.3f}, {got.ci_high:.3f}], "
        f"smallest effect worth a change {threshold:g})"
    )
    if got.ci_low > 0 and got.improvement >= threshold:
        return True, f"accepted: {effect}"
    if got.ci_low <= 0:
        return False, f"rejected: the improvement is not reliably above 0: {effect}"
    return False, f"rejected: the improvement is real but too small to be worth a change: {effect}"


def fmt(x: float | None) -> str:
    """A measured value in a reason: three decimals, or n/a."""
    return "n/a" if x is None else f"{x:.3f}"
