"""The training methods in one table: what each one changes, its resolved settings, and how a run describes it.

Every method goes through the same trainer, data, judge, evaluation and accounting; a method is only what
it turns on. ``harnessrl`` runs the evolver over DAPO's dynamic sampling; the baselines never do (detectors and
memory stay on): ``fixed`` is plain GRPO, ``dapo`` turns on the trainer's dynamic sampling, ``odf`` the
task-sampling interface's difficulty filter. ``oracle`` trains plain GRPO on the gold rubrics, and
``oracle-harness`` trains the harness's own trainer (the evolver over DAPO, hints allowed) on them: the ceiling a
rubric repair by the harness is measured against (docs/design.md section 8). The harness reads every group a step
graded, the ones DAPO drops too (docs/design.md section 4, "What the harness reads"). ``harnessrl-grpo`` runs the
evolver over plain GRPO (not in a default bench): the default until 2026-12-06, when the harness over DAPO with
guidance measured in the group met the gold bench's score aim over DAPO at 5 seeds and did no harm on its clean
variant (section 8).

Training (the run config's ``method`` and its validation, the run's start event and log), the bench (its
built-in methods, the ones a bench runs by default, the settings a method never reads) and the report read
this table, so a new method is one entry (:func:`register_method` adds one from outside).

This module reads a run config only through the attributes the callables use, and imports nothing of the
trainer, so :mod:`harnessrl.trainer.train_config` takes its method names from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

__all__ = [
    "METHOD_TABLE",
    "RENAMED_METHODS",
    "MethodSettings",
    "MethodSpec",
    "default_bench_methods",
    "method_names",
    "method_spec",
    "methods_described",
    "plain_method",
    "register_method",
]


MethodSettings = dict[str, JsonValue]
"""A method's resolved settings by name (``run_start``'s ``method_settings``), e.g. DAPO's ``eps``."""


@dataclass(frozen=True)
class MethodSpec:
    """One training method: what it turns on, and its settings as a run's start event and log show them."""

    name: str
    summary: str = ""
    """What it is, in a few words (the run config's ``method`` field lists them)."""
    evolver: bool = False
    """Whether the evolver runs (only the evolving harness)."""
    dynamic_sampling: bool = False
    """DAPO's drop-and-refill of flat groups (the ``dapo`` settings)."""
    difficulty_filter: bool = False
    """Online difficulty filtering inside task sampling (the ``odf`` settings)."""
    train_rubric: Literal["rubric", "gold"] | None = None
    """The rubric it trains on, when the method fixes it (the oracle: gold)."""
    settings: Callable[[Any], MethodSettings] = lambda config: {}
    """Its resolved settings (for ``run_start``), from the run config."""
    describe: Callable[[MethodSettings], str] = lambda s: ""
    """One line for the run's log, from :attr:`settings`."""
    settings_section: str | None = None
    """The run config's section only the methods naming it read (another method's run is the same whatever it
    holds)."""
    in_default_bench: bool = True
    """Whether a bench config that lists no methods runs it."""

    @property
    def plain(self) -> bool:
        """Plain GRPO: it turns nothing on (no evolver, no dynamic sampling, no difficulty filter)."""
        return not (self.evolver or self.dynamic_sampling or self.difficulty_filter)


METHOD_TABLE: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(
            "fixed",
            summary="plain GRPO",
            describe=lambda s: "plain GRPO; the harness never changes (detectors and memory stay on)",
        ),
        MethodSpec(
            "dapo",
            summary="DAPO dynamic sampling",
            dynamic_sampling=True,
            settings_section="dapo",
            settings=lambda c: {"eps": c.dapo_eps, "max_extra_groups": c.dapo_max_extra_groups},
            describe=lambda s: (
                f"plain GRPO with DAPO dynamic sampling (drop groups with reward std < {s['eps']}, "
                f"refill with up to {s['max_extra_groups']} extra groups a step); the harness never changes"
            ),
        ),
        MethodSpec(
            "odf",
            summary="online difficulty filtering",
            difficulty_filter=True,
            settings_section="odf",
            settings=lambda c: c.odf.model_dump(),
            describe=lambda s: (
                f"plain GRPO with online difficulty filtering (train on tasks whose mean reward over their last "
                f"{s['window']} groups is in [{s['low']}, {s['high']}]; re-probe skipped ones after "
                f"{s['reprobe_after']} steps); the harness never changes"
            ),
        ),
        MethodSpec(
            "harnessrl",
            summary="the evolving harness over DAPO dynamic sampling",
            evolver=True,
            dynamic_sampling=True,
            settings_section="dapo",
            settings=lambda c: {
                "backend": c.evolver.backend,
                "mode": c.evolver.mode,
                "every_steps": c.evolver.every_steps,
                "eps": c.dapo_eps,
                "max_extra_groups": c.dapo_max_extra_groups,
            },
            describe=lambda s: (
                f"the evolving harness ({s['backend']} evolver, {s['mode']}, every {s['every_steps']} steps) over "
                f"DAPO dynamic sampling (drop groups with reward std < {s['eps']}, refill with up to "
                f"{s['max_extra_groups']} extra groups a step; the harness reads the dropped groups too)"
            ),
        ),
        MethodSpec(
            "harnessrl-grpo",
            summary="the evolving harness over plain GRPO",
            evolver=True,
            in_default_bench=False,
            settings=lambda c: {
                "backend": c.evolver.backend,
                "mode": c.evolver.mode,
                "every_steps": c.evolver.every_steps,
            },
            describe=lambda s: (
                f"the evolving harness ({s['backend']} evolver, {s['mode']}, every {s['every_steps']} steps) over "
                "plain GRPO"
            ),
        ),
        MethodSpec(
            "oracle-harness",
            summary="the evolving harness over DAPO dynamic sampling, on the gold rubrics",
            evolver=True,
            dynamic_sampling=True,
            train_rubric="gold",
            in_default_bench=False,  # it needs a suite whose tasks carry gold rubrics
            settings_section="dapo",
            settings=lambda c: {
                "train_rubric": c.data.train_rubric,
                "backend": c.evolver.backend,
                "every_steps": c.evolver.every_steps,
                "eps": c.dapo_eps,
                "max_extra_groups": c.dapo_max_extra_groups,
            },
            describe=lambda s: (
                f"the evolving harness ({s['backend']} evolver, every {s['every_steps']} steps) over DAPO dynamic "
                f"sampling (eps {s['eps']}, up to {s['max_extra_groups']} extra groups a step), trained on the gold "
                "rubrics: the ceiling of any rubric repair by the harness's own trainer (docs/design.md section 8)"
            ),
        ),
        MethodSpec(
            "oracle",
            summary="plain GRPO on the gold rubrics",
            train_rubric="gold",
            in_default_bench=False,  # it needs a suite whose tasks carry gold rubrics
            settings=lambda c: {"train_rubric": c.data.train_rubric},
            describe=lambda s: (
                "plain GRPO on the gold rubrics (the upper bound of any rubric repair); the harness never changes"
            ),
        ),
    )
}
"""Every training method by name, in the order a bench runs them: the baselines, the evolving harness, the oracle."""

RENAMED_METHODS: dict[str, str] = {"harnessrl-dapo": "harnessrl"}
"""Methods by an earlier name -> their name now (a config naming an old one gets an error that says which): on
2026-12-06 the harness over DAPO became ``harnessrl`` and the harness over plain GRPO ``harnessrl-grpo``."""


def plain_method(train_rubric: Literal["rubric", "gold"] | None = None) -> str:
    """The first method of the table that trains plain GRPO (:attr:`MethodSpec.plain`) on ``train_rubric`` (None:
    the run's own training rubric): ``fixed``, and ``oracle`` for the gold rubrics. ``fixed`` is also what a run config
    means by the deprecated ``evolver.enabled: false`` without a method. A ValueError when the table has none."""
    found = next((n for n, s in METHOD_TABLE.items() if s.plain and s.train_rubric == train_rubric), None)
    if found is None:
        raise ValueError(
            f"no method of the table trains plain GRPO on {train_rubric or 'the training'} rubrics: register one "
            "(harnessrl.trainer.methods.register_method) that turns nothing on"
        )
    return found


def method_names() -> tuple[str, ...]:
    """Every method's name, in the table's order."""
    return tuple(METHOD_TABLE)


def method_spec(name: str) -> MethodSpec:
    """The method called ``name`` (a ValueError listing the methods when there is none)."""
    try:
        return METHOD_TABLE[name]
    except KeyError:
        if name in RENAMED_METHODS:
            raise ValueError(
                f"method {name!r} is called {RENAMED_METHODS[name]!r} since 2026-12-06 (the harness's default trainer "
                f"is DAPO's dynamic sampling; the harness over plain GRPO is 'harnessrl-grpo'): use "
                f"{RENAMED_METHODS[name]!r}"
            ) from None
        raise ValueError(f"unknown method {name!r}; the methods are: {', '.join(METHOD_TABLE)}") from None


def register_method(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` to the table: training, the bench and the report know it from then on. A name the table
    has already is refused (a ValueError naming it)."""
    if spec.name in METHOD_TABLE:
        raise ValueError(f"method {spec.name!r} is registered already; choose another name")
    METHOD_TABLE[spec.name] = spec
    return spec


def default_bench_methods() -> tuple[str, ...]:
    """The methods a bench config that lists none runs, in the table's order."""
    return tuple(name for name, spec in METHOD_TABLE.items() if spec.in_default_bench)


def methods_described() -> str:
    """Each method's name and summary, and which runs the evolver (for the run config's ``method`` field)."""
    listed = "; ".join(f"{name}: {spec.summary}" if spec.summary else name for name, spec in METHOD_TABLE.items())
    evolving = [name for name, spec in METHOD_TABLE.items() if spec.evolver]
    return f"{listed}. Only {' and '.join(evolving)} {'runs' if len(evolving) == 1 else 'run'} the evolver."
