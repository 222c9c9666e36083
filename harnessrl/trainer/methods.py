"""The training methods in one table: what each one changes, its resolved settings, and how a run describes it.

Every method goes through the same trainer, data, judge, evaluation and accounting; a method is only what
it turns on. ``harnessrl`` runs the evolver; the others never do (detectors and memory stay on): ``fixed``
is plain GRPO, ``dapo`` turns on the trainer's dynamic sampling, ``odf`` the task-sampling interface's
difficulty filter, ``oracle`` trains on the gold rubrics (the upper bound of any rubric repair).

This module reads a run config only through the attributes the callables use, and imports nothing of the
trainer, so :mod:`harnessrl.trainer.train_config` takes its method names from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["METHOD_NAMES", "METHOD_TABLE", "MethodSpec", "method_spec"]


@dataclass(frozen=True)
class MethodSpec:
    """One training method: what it turns on, and its settings as a run's start event and log show them."""

    name: str
    evolver: bool = False
    """Whether the evolver runs (only the evolving harness)."""
    dynamic_sampling: bool = False
    """DAPO's drop-and-refill of flat groups (the ``dapo`` settings)."""
    difficulty_filter: bool = False
    """Online difficulty filtering inside task sampling (the ``odf`` settings)."""
    train_rubric: Literal["rubric", "gold"] | None = None
    """The rubric it trains on, when the method fixes it (the oracle: gold)."""
    settings: Callable[[Any], dict[str, Any]] = lambda config: {}
    """Its resolved settings (for ``run_start``)."""
    describe: Callable[[dict[str, Any]], str] = lambda s: ""
    """One line for the run's log, from :attr:`settings`."""


METHOD_TABLE: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            "harnessrl",
            evolver=True,
            settings=lambda c: {
                "backend": c.evolver.backend,
                "mode": c.evolver.mode,
                "every_steps": c.evolver.every_steps,
            },
            describe=lambda s: (
                f"the evolving harness ({s['backend']} evolver, {s['mode']}, every {s['every_steps']} steps)"
            ),
        ),
        MethodSpec(
            "fixed",
            describe=lambda s: "plain GRPO; the harness never changes (detectors and memory stay on)",
        ),
        MethodSpec(
            "dapo",
            dynamic_sampling=True,
            settings=lambda c: {"eps": c.dapo_eps, "max_extra_groups": c.dapo_max_extra_groups},
            describe=lambda s: (
                f"plain GRPO with DAPO dynamic sampling (drop groups with reward std < {s['eps']}, "
                f"refill with up to {s['max_extra_groups']} extra groups a step); the harness never changes"
            ),
        ),
        MethodSpec(
            "odf",
            difficulty_filter=True,
            settings=lambda c: c.odf.model_dump(),
            describe=lambda s: (
                f"plain GRPO with online difficulty filtering (train on tasks whose mean reward over their last "
                f"{s['window']} groups is in [{s['low']}, {s['high']}]; re-probe skipped ones after "
                f"{s['reprobe_after']} steps); the harness never changes"
            ),
        ),
        MethodSpec(
            "oracle",
            train_rubric="gold",
            settings=lambda c: {"train_rubric": c.data.train_rubric},
            describe=lambda s: (
                "plain GRPO on the gold rubrics (the upper bound of any rubric repair); the harness never changes"
            ),
        ),
    )
}
"""Every training method by name, the evolving harness first."""

METHOD_NAMES: tuple[str, ...] = tuple(METHOD_TABLE)


def method_spec(name: str) -> MethodSpec:
    """The method called ``name`` (a ValueError listing the methods when there is none)."""
    try:
        return METHOD_TABLE[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; the methods are: {', '.join(METHOD_NAMES)}") from None
