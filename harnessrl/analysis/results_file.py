"""A bench report's ``results.json`` as typed records: :class:`BenchResults` and the models of its sections.

:func:`~harnessrl.analysis.report.write_bench_report` builds a :class:`BenchResults` (the methods over their seeds,
:mod:`~harnessrl.analysis.aggregates`; the comparisons, ablations, bound and oracle gaps,
:mod:`~harnessrl.analysis.results`; the repairs per family, the family curves and the clean variant's commits,
:mod:`~harnessrl.analysis.repairs`; the runs' own figures, :class:`~harnessrl.analysis.figures.RunFigures`), writes
it, and renders ``results.md`` from it read back. Every field is written in the order declared here, so a report's
JSON keeps its keys and their order. A committed ``results.json`` from before a section existed reads with that
section empty (:meth:`BenchResults.read`), so an older report renders as it was committed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harnessrl.analysis.aggregates import Aggregates, Number, Paired, PairedScore, Stat
from harnessrl.analysis.figures import RunFigures
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import Settings

__all__ = [
    "Ablation",
    "ArmRepairs",
    "BenchResults",
    "Bootstrap",
    "CleanArm",
    "CleanRun",
    "CommitRow",
    "ComparedScore",
    "ComparedSteps",
    "Comparison",
    "FamilyAblation",
    "FamilyCurvePoint",
    "FamilyCurves",
    "FamilyRepair",
    "FamilyRepairStats",
    "FaultCheck",
    "FaultFigures",
    "FaultRow",
    "GapAt",
    "GapCell",
    "OracleBound",
    "OracleGap",
    "OracleMinusFixed",
    "PairedGap",
    "PairedShare",
    "ShareCells",
    "UnnecessaryCommits",
]


class _Record(BaseModel):
    # an older or newer report may carry a key this version does not read: it is left aside
    model_config = ConfigDict(extra="ignore")


def _absent(value: object) -> bool:
    return value is None


# ------------------------------------------------------------------------------------------ comparisons
class Bootstrap(_Record):
    """A paired bootstrap over test tasks of one compared score (:func:`~harnessrl.analysis.results.task_bootstrap`)."""

    mean: float = Field(description="The mean difference over tasks.")
    low: float = Field(description="Its 2.5% point.")
    high: float = Field(description="Its 97.5% point.")
    tasks: int = Field(description="The test tasks it rests on.")
    seeds: list[int] = Field(default_factory=list, description="The seeds with per-task scores at both checkpoints.")
    draws: int = Field(0, description="The resamples drawn.")


class ComparedScore(PairedScore):
    """A harness arm minus a baseline on a test (or validation) score, with its intervals over seeds and tasks."""

    bootstrap: Bootstrap | None = Field(None, description="Over test tasks (None: no seed has per-task scores).")
    sampling_sd: float | None = Field(None, description="A seed's difference's sd from answer sampling alone.")


class ComparedSteps(PairedScore):
    """A harness arm minus a baseline in steps to best, with the ratio of their means."""

    ratio_of_means: float | None = Field(None, description="The arm's mean steps to best over the baseline's.")


class Comparison(_Record):
    """One harness arm against one baseline, paired by seed."""

    harness: str = Field(description="The harness arm.")
    baseline: str = Field(description="The baseline.")
    best_baseline: bool = Field(False, description="Whether the baseline is the bench's best.")
    validation_best: ComparedScore | None = Field(None, description="On what arms are chosen (older reports: none).")
    test_at_best: ComparedScore = Field(default_factory=ComparedScore)
    test_end: ComparedScore = Field(default_factory=ComparedScore)
    test_at_equal_rollouts: ComparedScore = Field(default_factory=ComparedScore)
    steps_to_best: ComparedSteps = Field(default_factory=ComparedSteps)

    def measure(self, key: str) -> PairedScore | None:
        """One compared measure by its name (``test_at_best``, ``steps_to_best``, ...)."""
        return getattr(self, key)


class OracleBound(_Record):
    """The oracle against the best baseline, paired by seed: the bound of any rubric repair."""

    oracle: str
    baseline: str
    test_at_best: PairedScore
    test_end: PairedScore


class FamilyAblation(Paired):
    """One family's paired difference arm - reference, beside the reference's seed spread there."""

    spread: float | None = Field(None, description="The reference's sample std over seeds of the family's score.")
    beyond_spread: bool | None = Field(None, description="One sign on every seed and a mean beyond the spread.")


class Ablation(_Record):
    """A harness arm against the arm whose settings it changes (arm minus reference)."""

    arm: str
    reference: str
    changes: Settings = Field(description="The settings the arm adds or gives another value.")
    test_at_best: PairedScore
    test_end: PairedScore
    rollouts_trial: Paired
    harness_overhead_share: Paired
    per_family: dict[str, dict[str, FamilyAblation]] = Field(description="Score -> family -> the difference.")

    def score(self, key: str) -> PairedScore:
        """``test_at_best`` or ``test_end``."""
        return getattr(self, key)


# ------------------------------------------------------------------------------------------ oracle gaps
class GapCell(_Record):
    """One oracle-gap figure: fixed's and the oracle's seed means, the gap, and each other method's share."""

    fixed: Number | None = None
    oracle: Number | None = None
    gap: Number | None = None
    shares: dict[str, float | None] = Field(default_factory=dict)
    means: dict[str, Number | None] = Field(default_factory=dict)
    note: str | None = None


class GapAt(_Record):
    overall: GapCell
    per_family: dict[str, GapCell] = Field(default_factory=dict)


class OracleGap(_Record):
    """The share of the fixed→oracle gap each method closes, on seed means."""

    oracle: str
    fixed: str
    plain: bool = Field(False, description="The oracle is plain GRPO on gold (older reports: always, and no key).")
    min_gap: float
    note: str | None = None
    at: dict[str, GapAt] = Field(default_factory=dict, description="``test_at_best`` / ``test_end`` -> the cells.")


class PairedShare(Stat):
    """A method's share of the oracle gap per seed, over the seeds where the gap is large enough."""

    per_seed: dict[str, float | None] = Field(default_factory=dict)
    gap_per_seed: dict[str, Number | None] = Field(default_factory=dict)
    seeds_without_gap: list[str] = Field(default_factory=list)


class ShareCells(_Record):
    overall: PairedShare
    per_family: dict[str, PairedShare] = Field(default_factory=dict)


class PairedGap(_Record):
    """The share of the fixed→oracle gap each method closes, paired by seed."""

    fixed: str
    oracle: str
    min_gap: float
    at: dict[str, dict[str, ShareCells]] = Field(default_factory=dict, description="Score -> method -> its cells.")


# ------------------------------------------------------------------------------------------ repairs
class _AtStep(_Record):
    step: int


class FamilyCurvePoint(Stat, _AtStep):
    """A family's test score at one evaluation step, over the seeds evaluated there."""


FamilyCurves = dict[str, dict[str, list[FamilyCurvePoint]]]
"""Family -> method -> its points in step order."""


class FamilyRepair(_Record):
    """One run's repair figures on one family (:func:`~harnessrl.analysis.repairs.run_family_repairs`)."""

    first_detection: int | None = None
    detected_by: str | None = None
    first_commit: int | None = None
    first_commit_name: str | None = None
    first_commit_by_interface: dict[str, int | None] = Field(default_factory=dict)
    commits: int = 0
    rubric_commits: int = 0
    probation_commits: int = 0
    reverts: int = 0
    groups: int = 0
    groups_after_detection: int | None = None
    repaired_groups: int | None = None
    reach: float | None = None

    def figure(self, key: str) -> Number | None:
        """One of :data:`~harnessrl.analysis.repairs.REPAIR_FIGURES` by its name."""
        return getattr(self, key)


class FamilyRepairStats(_Record):
    """One family's repair figures over an arm's seeds, and every seed's."""

    failure: str | None = None
    first_detection: Stat = Field(default_factory=Stat)
    first_commit: Stat = Field(default_factory=Stat)
    reach: Stat = Field(default_factory=Stat)
    rubric_commits: Stat = Field(default_factory=Stat)
    seeds_with_commit: int = 0
    per_seed: dict[str, FamilyRepair] = Field(default_factory=dict)


class ArmRepairs(_Record):
    seeds: list[int]
    families: dict[str, FamilyRepairStats]


class CommitRow(_Record):
    """A rubric commit of a clean-variant run: from which step, which remedy, on what, what it added."""

    step: int | None = None
    remedy: str
    tasks: list[str]
    families: list[str]
    added: list[str]


class CleanRun(_Record):
    method: str
    seed: int
    rubric_commits: int
    per_family: dict[str, int]
    commits: list[CommitRow]
    vs_fixed: dict[str, Number | None] = Field(description="Score -> the run's minus fixed's of the same seed.")


class CleanArm(_Record):
    rubric_commits: Stat
    per_family: dict[str, int]


class UnnecessaryCommits(_Record):
    """On the clean variant, every rubric commit of each harness run (each an unnecessary one)."""

    fixed: str | None = None
    runs: list[CleanRun]
    per_arm: dict[str, CleanArm]


# ------------------------------------------------------------------------------------------ fault check
class FaultFigures(_Record):
    """One role's (fixed, the oracle) figures on a family: training's flat shares, proxy and gold at 0 and at end."""

    groups: Number | None = None
    flat_low: Number | None = None
    flat_high: Number | None = None
    gold_start: Number | None = None
    proxy_start: Number | None = None
    gold_end: Number | None = None
    proxy_end: Number | None = None


class OracleMinusFixed(Paired):
    exceeds_spread: bool | None = Field(None, description="The mean difference is larger than their std.")


class FaultRow(_Record):
    family: str
    failure: str | None = None
    fixed: FaultFigures | None = Field(None, exclude_if=_absent)
    oracle: FaultFigures | None = Field(None, exclude_if=_absent)
    oracle_minus_fixed: OracleMinusFixed | None = Field(None, exclude_if=_absent)

    def role(self, name: str) -> FaultFigures | None:
        """``fixed`` or ``oracle``'s figures (None: the bench has no such method)."""
        return getattr(self, name)


class FaultCheck(_Record):
    fixed: str | None = None
    oracle: str | None = None
    families: list[FaultRow] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------ the file
class BenchResults(_Record):
    """``results.json``: where the runs come from, the methods over their seeds, every comparison and section of
    ``results.md``, the runs' own figures, the notes and the plots; in the order the file writes them."""

    bench_dir: str = Field("", description="The bench folders, joined (older reports: the one folder).")
    bench_dirs: list[str] = Field(default_factory=list)
    row_files: list[str] = Field(default_factory=list, description="Committed reports whose run rows were taken.")
    bench_config: str | None = None
    bench_configs: list[str] = Field(default_factory=list)
    method_settings: dict[str, Settings] = Field(default_factory=dict)
    generated: str = Field("", description="When the report was made.")
    harness_arms: list[str] = Field(default_factory=list)
    oracles: list[str] = Field(default_factory=list)
    baselines: list[str] = Field(default_factory=list)
    best_baseline: str | None = None
    best_baseline_by: str | None = Field("test_at_best", description="The figure it was chosen on (older: test).")
    methods: Aggregates = Field(default_factory=dict)
    comparisons: list[Comparison] = Field(default_factory=list)
    ablations: list[Ablation] = Field(default_factory=list)
    oracle_gap: OracleGap | None = None
    oracle_gap_paired: PairedGap | None = None
    oracle_bound: OracleBound | None = None
    family_curves: FamilyCurves = Field(default_factory=dict)
    family_repairs: dict[str, ArmRepairs] = Field(default_factory=dict)
    unnecessary_commits: UnnecessaryCommits | None = None
    fault_check: FaultCheck | None = None
    test_split_arms: dict[str, list[str]] = Field(default_factory=dict)
    runs: list[RunFigures] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    plots: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _one_folder(cls, data: Any) -> Any:
        """Reports made before several folders were read name one folder, in ``bench_dir`` only."""
        if isinstance(data, dict) and "bench_dirs" not in data and data.get("bench_dir"):
            return {**data, "bench_dirs": [data["bench_dir"]]}
        return data

    @classmethod
    def read(cls, data: object, source: str) -> BenchResults:
        """A ``results.json``'s content; an error naming ``source`` and the fields that do not fit."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            bad = "; ".join(f"`{'.'.join(map(str, err['loc']))}` {err['msg'].lower()}" for err in e.errors()[:3])
            raise HarnessRLError(
                f"{source}: not a bench report's results.json ({bad}); make it again with `harnessrl bench report`"
            ) from None
