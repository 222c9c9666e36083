"""A method's figures over its seeds as typed records: what ``results.json`` writes under ``methods``.

:func:`stat` sums a figure over seeds into a :class:`Stat` (mean, sample std, min, max, n);
:func:`~harnessrl.analysis.results.aggregate` builds one :class:`MethodAggregate` per bench method from its runs'
:class:`~harnessrl.analysis.figures.RunFigures`, keeping each seed's own figures (:class:`SeedFigures`) for the
paired differences; :class:`Paired` and :class:`PairedScore` are such a difference over the seeds two methods share.
A report reads the aggregates back through the same models, so an older ``results.json`` (one that predates a figure)
reads with the figure empty (n = 0, n/a in the report).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, create_model

from harnessrl.analysis.figures import FamilyDecisions, RunFigures, TrialCost

__all__ = [
    "PER_GROUP",
    "SCALARS",
    "Aggregates",
    "MethodAggregate",
    "Number",
    "Paired",
    "PairedScore",
    "SeedFigures",
    "Stat",
    "TrainFamilyStats",
    "stat",
]

Number = int | float
"""A figure as computed: a count stays an int (results.json writes ``3``, not ``3.0``), a share or score a float."""


class _Record(BaseModel):
    # an older or newer report may carry a key this version does not read: it is left aside
    model_config = ConfigDict(extra="ignore")


class Stat(_Record):
    """A figure over seeds: mean, sample std (n >= 2), min, max and n of the values that exist."""

    mean: Number | None = Field(None, description="The mean (None: no seed has the figure).")
    std: Number | None = Field(None, description="The sample std (None below two seeds).")
    min: Number | None = Field(None, description="The smallest value.")
    max: Number | None = Field(None, description="The largest value.")
    n: int = Field(0, description="How many seeds have the figure.")


def stat(values: Sequence[Number | None]) -> Stat:
    """Mean, sample std (n >= 2), min, max and n of the values that exist."""
    vals = [v for v in values if v is not None]
    if not vals:
        return Stat()
    return Stat(
        mean=statistics.fmean(vals),
        std=statistics.stdev(vals) if len(vals) >= 2 else None,
        min=min(vals),
        max=max(vals),
        n=len(vals),
    )


class Paired(Stat):
    """Per-seed differences a - b of a figure over the seeds both methods have, as a :class:`Stat` of them."""

    per_seed: dict[str, Number] = Field(default_factory=dict, description="Seed -> the difference there.")
    higher: int = Field(0, description="Seeds where a is higher.")
    lower: int = Field(0, description="Seeds where a is lower.")


class PairedScore(Paired):
    """A paired difference with its verdict in plain words and its 95% t-interval over seeds."""

    verdict: str = Field("", description="What the signs over seeds support (no claim below 3 seeds).")
    ci95: list[float] | None = Field(None, description="The 95% t-interval of the mean (None below two seeds).")


class TrainFamilyStats(_Record):
    """A family's training figures (:class:`~harnessrl.analysis.figures.TrainFamily`) over seeds."""

    groups: Stat = Field(default_factory=Stat, description="Groups of the family trained.")
    flat_low: Stat = Field(default_factory=Stat, description="Share of them flat and uniformly low.")
    flat_high: Stat = Field(default_factory=Stat, description="Share of them flat and uniformly high.")
    clipped: Stat = Field(default_factory=Stat, description="Share of their completions clipped.")


PerGroupStats = dict[str, Stat]
"""A figure per domain or per family, over seeds."""


class MethodAggregate(_Record):
    """One bench method over its seeds: each figure's :class:`Stat`, per domain and per family too, and each seed's
    own figures (for the paired differences), in the order ``results.json`` writes them."""

    trainer_method: str | None = Field(None, description="The runs' method setting (None: none, or several).")
    graded_with: str | None = Field(None, description="gold, rubric, or mixed (None: no evaluation).")
    seeds: list[int] = Field(default_factory=list, description="The seeds run, in order.")
    complete_seeds: list[int] = Field(default_factory=list, description="Of them, the runs that ended.")
    family_failure: dict[str, str] = Field(default_factory=dict, description="Each family's injected failure.")
    per_seed: dict[str, SeedFigures] = Field(default_factory=dict, description="Seed -> its run's figures.")
    # the scalar figures (SCALARS, in this order)
    test_at_best: Stat = Field(default_factory=Stat)
    test_at_best_se: Stat = Field(default_factory=Stat)
    test_end: Stat = Field(default_factory=Stat)
    test_end_se: Stat = Field(default_factory=Stat)
    test_start: Stat = Field(default_factory=Stat)
    test_at_equal_rollouts: Stat = Field(default_factory=Stat)
    proxy_test_at_best: Stat = Field(default_factory=Stat)
    proxy_test_end: Stat = Field(default_factory=Stat)
    proxy_test_start: Stat = Field(default_factory=Stat)
    proxy_test_at_equal_rollouts: Stat = Field(default_factory=Stat)
    equal_rollouts_budget: Stat = Field(default_factory=Stat)
    equal_rollouts_step: Stat = Field(default_factory=Stat)
    validation_best: Stat = Field(default_factory=Stat)
    steps_to_best: Stat = Field(default_factory=Stat)
    effective_group_ratio: Stat = Field(default_factory=Stat)
    zero_std_all_low: Stat = Field(default_factory=Stat)
    zero_std_all_high: Stat = Field(default_factory=Stat)
    clipped_share_end: Stat = Field(default_factory=Stat)
    train_clipped_share: Stat = Field(default_factory=Stat)
    rollouts_generated: Stat = Field(default_factory=Stat)
    rollouts_discarded: Stat = Field(default_factory=Stat)
    rollouts_trial: Stat = Field(default_factory=Stat)
    rollouts_spent: Stat = Field(default_factory=Stat)
    judge_calls: Stat = Field(default_factory=Stat)
    wall_seconds: Stat = Field(default_factory=Stat)
    harness_overhead_seconds: Stat = Field(default_factory=Stat)
    harness_overhead_share: Stat = Field(default_factory=Stat)
    harness_commits: Stat = Field(default_factory=Stat)
    harness_rejections: Stat = Field(default_factory=Stat)
    # the per-domain and per-family figures (PER_GROUP, in this order)
    test_at_best_per_domain: PerGroupStats = Field(default_factory=dict)
    test_end_per_domain: PerGroupStats = Field(default_factory=dict)
    test_at_best_per_family: PerGroupStats = Field(default_factory=dict)
    test_end_per_family: PerGroupStats = Field(default_factory=dict)
    test_start_per_family: PerGroupStats = Field(default_factory=dict)
    proxy_test_at_best_per_family: PerGroupStats = Field(default_factory=dict)
    proxy_test_end_per_family: PerGroupStats = Field(default_factory=dict)
    proxy_test_start_per_family: PerGroupStats = Field(default_factory=dict)
    clipped_per_family_end: PerGroupStats = Field(default_factory=dict)
    # training per family, and what the harness did
    train_per_family: dict[str, TrainFamilyStats] = Field(default_factory=dict)
    harness_decisions: dict[str, FamilyDecisions] = Field(
        default_factory=dict, description="What the harness did per family, summed over the seeds."
    )
    trial_costs: dict[str, TrialCost] = Field(
        default_factory=dict, description="The critic's trials per remedy, summed over the seeds."
    )

    def figure(self, key: str) -> Stat:
        """A scalar figure over seeds by its name (one of :data:`SCALARS`)."""
        return getattr(self, key)

    def per_group(self, key: str) -> PerGroupStats:
        """A per-domain or per-family figure over seeds by its name (one of :data:`PER_GROUP`)."""
        return getattr(self, key)


SCALARS = tuple(k for k, f in MethodAggregate.model_fields.items() if f.annotation is Stat)
"""The per-run figures aggregated over seeds (each a :class:`Stat` of :class:`MethodAggregate`)."""

PER_GROUP = tuple(k for k, f in MethodAggregate.model_fields.items() if f.annotation == PerGroupStats)
"""The per-run ``{domain or family: value}`` figures aggregated over seeds, group by group."""

SeedFigures = create_model(
    "SeedFigures",
    __base__=_Record,
    __doc__="One seed's run figures an aggregate keeps (:data:`SCALARS`, :data:`PER_GROUP` and the training per "
    "family), as :class:`~harnessrl.analysis.figures.RunFigures` holds them.",
    **{
        k: (RunFigures.model_fields[k].annotation, Field(None, description=RunFigures.model_fields[k].description))
        for k in (*SCALARS, *PER_GROUP, "train_per_family")
    },
)
"""One seed's figures of a method, read by name (:meth:`MethodAggregate.figure`'s keys): the paired differences'
source."""

MethodAggregate.model_rebuild()

Aggregates = dict[str, MethodAggregate]
"""The bench's methods, in report order, each over its seeds."""
