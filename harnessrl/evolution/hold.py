"""The training hold: when the evolver's trials and commits may run, and the step boundary training waits at.

A trial or a commit needs the policy frozen. It has that while training is stopped at a step boundary (an
in-process evolution point, :meth:`TrainingHold.at_boundary`, or an external evolver's granted hold,
:meth:`TrainingHold.hold`) or while no training runs at all; one that arrives mid-step is refused with the
reason (:meth:`TrainingHold.policy_still`). An external evolver's hold is a lease: the trainer, at its next
step boundary (:meth:`TrainingHold.step_boundary`), waits until the evolver releases it or the lease runs
out, and in either case until the trials and commits in flight (the busy count) have ended. The run sets how
long a lease may be (``evolver.hold_s``, :attr:`TrainingHold.max_lease_s`): a client may ask for less, never for
more (a longer request is granted at the run's limit, and the answer says so), so an evolver that dies holding
training stalls it for at most that long, whatever it asked for. Each stop is an
evolution point of the run: a :class:`Point` counts its trials, their seconds, the failures handled and the
updates committed, and an external one ends with an ``evolution_point`` event.

Locking: one condition (:attr:`TrainingHold._cond`) guards the lease, the step the trainer stopped at, the
busy count and the current point. It is a leaf lock: nothing else is taken while it is held (the events are
written after it is released; the refusal callback of :meth:`TrainingHold.policy_still` must take no lock).
The training thread waits on it at a step boundary, without the trainer's policy lock and never with the
tool service's lock; a tool takes it only briefly, before it takes the service's lock and after it let that
go (``with hold.policy_still(...), service.lock:``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from harnessrl.evolution.candidates import CandidateError
from harnessrl.interfaces.tools import HoldState
from harnessrl.records.event_payloads import EvolutionPointPayload, TrainingHoldPayload

__all__ = ["AtBoundary", "Point", "TrainingHold"]

logger = logging.getLogger(__name__)

_DEFAULT_LEASE_S = 300.0
"""The lease of a request that names none, on a hold with no limit of its own (``evolver.hold_s``'s default)."""

EventWriter = Callable[..., None]
"""``event(payload, /, step=...)``: writes one event of the run (never raises)."""


@dataclass
class Point:
    """One evolution point as the trainer side sees it: where training stopped, and what it cost."""

    step: int
    mode: Literal["in-process", "external"]  # the trainer stopped itself, or an evolver's hold stopped it
    trials: int = 0
    trial_seconds: float = 0.0
    handled: int = 0
    committed: int = 0

    def stats(self, **more: Any) -> EvolutionPointPayload:
        """Its ``evolution_point`` event: its mode, trials and their seconds, failures handled, updates committed
        (``more``: the event's other fields, e.g. its held seconds)."""
        return EvolutionPointPayload(
            **more,
            mode=self.mode,
            trials=self.trials,
            trial_seconds=round(self.trial_seconds, 3),
            handled=self.handled,
            committed=self.committed,
        )


class TrainingHold:
    """Whether the policy may move, and an evolver's hold on training (see the module docstring).

    Args:
        step: returns the current training step (the last one trained).
        event: writes one event of the run (``training_hold``, ``evolution_point``).
        max_lease_s: the longest lease this run grants (its ``evolver.hold_s``); None: as long as asked.
    """

    def __init__(self, step: Callable[[], int], event: EventWriter, max_lease_s: float | None = None):
        self._step = step
        self._event = event
        self.max_lease_s = max_lease_s
        """The longest lease granted: a longer request gets this (the run's ``evolver.hold_s``)."""
        self._cond = threading.Condition()
        self._until: float | None = None  # when the lease runs out; None: no hold asked or granted
        self._lease_s = 0.0
        self._paused_at: int | None = None  # the step boundary the trainer waits at
        self._busy = 0  # trials and commits in flight: training stays stopped until they end
        self._last = "no evolver has held training yet"
        self.point: Point | None = None
        """The evolution point training is stopped at now (None: not stopped)."""
        self.training = False
        """Set by the trainer's evolution callback while training runs."""

    def lease(self, seconds: float | None) -> tuple[float, str]:
        """The lease granted for a request of ``seconds`` (None: the run's limit) and a note when it is not what
        was asked for."""
        limit = self.max_lease_s
        if seconds is None:
            return (limit if limit is not None else _DEFAULT_LEASE_S), ""
        if limit is None or seconds <= limit:
            return seconds, ""
        return limit, (
            f"asked for a lease of {seconds:g} s; this run grants at most {limit:g} s (its evolver.hold_s): held for "
            f"{limit:g} s. Renew the hold (call hold_training again) before it runs out to keep training stopped"
        )

    def hold(self, seconds: float | None, wait_s: float) -> HoldState:
        """Ask the trainer to stop at its next step boundary for a lease of ``seconds`` (at most
        :attr:`max_lease_s`; None: that limit); wait up to ``wait_s`` for it to stop. Asking again while held
        renews the lease."""
        if not self.training and self._paused_at is None:
            return HoldState(
                held=False, step=self._step(), training=False, note="no training is running here: nothing to hold"
            )
        asked = seconds
        seconds, capped = self.lease(seconds)
        with self._cond:
            renewed = self._until is not None
            self._lease_s = seconds
            self._until = time.monotonic() + seconds
            self._cond.notify_all()
            held = self._cond.wait_for(lambda: self._paused_at is not None, timeout=wait_s)
            step = self._paused_at if held and self._paused_at is not None else self._step()
            left = self._until - time.monotonic() if held and self._until is not None else None
        if not held:
            with self._cond:
                self._until = None  # no boundary came (training ended?): nothing is left pending
            return HoldState(
                held=False, step=step, note=f"the trainer did not reach a step boundary within {wait_s:g} s"
            )
        if not renewed:
            extra = {"asked_s": asked} if capped else {}
            self._event(TrainingHoldPayload(action="held", lease_s=seconds, **extra), step=step)
        return HoldState(
            held=True,
            step=step,
            expires_in_s=round(left, 3) if left is not None else None,
            lease_s=seconds,
            note=capped,
        )

    def release(self) -> HoldState:
        """End the hold: the trainer goes on at once."""
        with self._cond:
            was = self._until is not None
            self._until = None
            self._cond.notify_all()
            step = self._paused_at if self._paused_at is not None else self._step()
        if was:
            self._event(TrainingHoldPayload(action="released"), step=step)
        return HoldState(held=False, step=step, note="released" if was else "there was no hold")

    def step_boundary(self, step: int) -> None:
        """The trainer at the end of ``step``: while an evolver holds training, wait here (see
        :meth:`EvolutionService.step_boundary <harnessrl.evolution.service.EvolutionService.step_boundary>`)."""
        with self._cond:
            if self._until is None:
                return
            t0 = time.monotonic()
            self._until = t0 + self._lease_s  # the lease runs from the moment training stops
            self._paused_at = step
            self.point = Point(step=step, mode="external")
            self._cond.notify_all()
            while self._busy or (self._until is not None and time.monotonic() < self._until):
                left = self._until - time.monotonic() if self._until is not None else 1.0
                self._cond.wait(timeout=min(1.0, max(0.01, left)))
            expired = self._until is not None
            self._until = None
            self._paused_at = None
            point, self.point = self.point, None
            ended = "expired" if expired else "released"
            self._last = f"the last hold, at step {step}, {'ran out' if expired else 'was released'}"
        held_s = time.monotonic() - t0
        if expired:
            logger.warning("the evolver's hold on training expired at step %d (not released); training goes on", step)
            self._event(TrainingHoldPayload(action="expired"), step=step)
        self._event(point.stats(seconds=round(held_s, 3), ended=ended), step=step)

    def at_boundary(self, step: int) -> AtBoundary:
        """A context in which the trainer is stopped at ``step`` (an in-process evolution point): a hold asked
        meanwhile is granted at once and ends with it. Its value, once the context has ended, holds the
        point's trial count and seconds (:meth:`Point.stats`)."""
        return AtBoundary(self, step)

    @contextlib.contextmanager
    def policy_still(self, tool: str, on_refused: Callable[[], None] = lambda: None) -> Iterator[None]:
        """Run ``tool`` (a trial or a commit) only while the policy cannot move: training stopped at a step
        boundary, or not running; training stays stopped until it ends. Refused otherwise with a
        :class:`~harnessrl.evolution.candidates.CandidateError` that says why, after ``on_refused()``
        (called under the hold's condition: it must take no lock)."""
        with self._cond:
            if self.training and self._paused_at is None:
                on_refused()
                asked = " (a hold was asked for: wait for hold_training to say held)" if self._until else ""
                raise CandidateError(
                    f"{tool} refused: training is not held, the trainer is training on from step "
                    f"{self._step()} ({self._last}){asked}. A trial and a commit need the policy "
                    "frozen: call hold_training and wait until it answers held=true, then call "
                    f"{tool} while the hold lasts (renew it with hold_training, or ask for a longer lease)"
                )
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()


class AtBoundary:
    """:meth:`TrainingHold.at_boundary`'s context."""

    def __init__(self, hold: TrainingHold, step: int):
        self.hold, self.step = hold, step
        self.stats: EvolutionPointPayload | None = None

    def __enter__(self) -> AtBoundary:
        hold = self.hold
        with hold._cond:
            hold._paused_at = self.step
            hold.point = Point(step=self.step, mode="in-process")
            hold._cond.notify_all()
        return self

    def __exit__(self, *exc: object) -> None:
        hold = self.hold
        with hold._cond:
            while hold._busy:  # a trial still running (the point timed out): the policy waits
                hold._cond.wait(timeout=1.0)
            hold._paused_at = None
            hold._until = None
            point, hold.point = hold.point, None
        self.stats = point.stats() if point is not None else None
