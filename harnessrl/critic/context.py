"""One trial in progress, as the recipes see it: what it reads, what it measures, what it has spent.

:class:`TrialContext` carries everything a recipe (:mod:`~harnessrl.critic.regrade`,
:mod:`~harnessrl.critic.rollout_arms`, :mod:`~harnessrl.critic.moved_draws`) needs: the frozen policy's
world (the harness, read through :class:`~harnessrl.critic.protocols.HarnessView`; the step records and
kept rollouts; the config and the trainer's advantage scaling), the candidate and the failure it answers,
the metric its interface chose, the running :class:`~harnessrl.critic.budget.Budget` and the measurements
so far. The kit handed to an interface, :class:`~harnessrl.critic.trials.Trial`, is this context with the
recipes as methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from harnessrl.critic.acceptance import Measured
from harnessrl.critic.budget import Budget, Rejected
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.power import SplitEvidence
from harnessrl.critic.protocols import HarnessView
from harnessrl.critic.signal import AdvantageSpec
from harnessrl.records.failures import Failure
from harnessrl.records.measurements import TrialMeasurements
from harnessrl.records.steps import Recorder

__all__ = ["TrialContext"]


@dataclass
class TrialContext:
    """One trial in progress: its inputs (read only), the candidate, and what it measured and spent so far."""

    harness: HarnessView
    recorder: Recorder
    config: TrialConfig
    advantage: AdvantageSpec
    update: Any
    failure: Failure | None
    metric: str
    budget: Budget
    measurements: TrialMeasurements
    split_evidence: SplitEvidence | None = None  # the pooled evidence of earlier looks at the same repair

    @property
    def next_step(self) -> int:
        """The step an update would apply from: one after the last recorded step."""
        last = max([*self.recorder.steps, *self.recorder.rollouts], default=0)
        return last + 1

    def probe_shape(self) -> tuple[int, int]:
        """Group size and rollouts of a probe arm: whole groups of the trainer's size (at most the arm)."""
        n = self.config.rollouts_per_arm
        gsz = max(2, min(self.advantage.group_size, n))
        return gsz, (n // gsz) * gsz

    def reject(self, reason: str, measured: Measured | None = None, kind: str = "invalid") -> NoReturn:
        """End the trial: rejected for ``reason`` (of ``kind``, a verdict kind), with whatever was measured."""
        raise Rejected(reason, measured, kind)
