"""One run's bench figures as a typed record: what ``results.json`` writes per run, and what ``--rows`` reads back.

:func:`~harnessrl.analysis.per_run.run_figures` builds a :class:`RunFigures` from a run's folder; a report writes each
as a row of its ``results.json`` (:meth:`RunFigures.to_row`), and ``harnessrl bench report --rows`` reads those rows
back through the same model (:meth:`RunFigures.from_row`), so a row that does not fit is refused naming its file and
the field. A figure a run does not record is None (n/a in the report); a figure newer than the report a row comes from
is None too, and listed in the row's :attr:`RunFigures.missing`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harnessrl.errors import HarnessRLError

__all__ = [
    "RECORDED",
    "CurvePoint",
    "FamilyDecisions",
    "RunFigures",
    "TrainFamily",
    "TrialCost",
]

PerGroup = dict[str, float | None]
"""A figure per domain or per task family (None: not scored there)."""


class _Figures(BaseModel):
    # a row of an older or newer report may carry a figure this version no longer computes: it is left aside
    model_config = ConfigDict(extra="ignore")


class CurvePoint(_Figures):
    """One test evaluation of a run, with what had been spent to reach it."""

    step: int = Field(description="The training step evaluated.")
    score: float | None = Field(None, description="The main test score (gold when graded with gold).")
    proxy: float | None = Field(None, description="The same completions graded with rubric version 0 (gold runs).")
    rollouts_spent: float | None = Field(
        None, description="Rollouts spent by that step (generated and trial); None: the run logged none."
    )


class TrainFamily(_Figures):
    """A task family's training figures from ``steps.jsonl``."""

    groups: int = Field(description="Groups of the family trained.")
    flat_low: float = Field(description="Share of them flat with a mean below harness.detectors.low.")
    flat_high: float = Field(description="Share of them flat with a mean above harness.detectors.high.")
    clipped: float | None = Field(
        None, description="Share of their completions cut at grpo.max_completion_length (None: no budget)."
    )


class FamilyDecisions(_Figures):
    """What the harness did on one task family (its task id when it has none)."""

    commits: dict[str, int] = Field(
        default_factory=dict, description="Commits by interface and remedy (``task_sampling:park``, ...)."
    )
    rejected: dict[str, int] = Field(default_factory=dict, description="Rejected candidates by why they were refused.")
    gave_up: int = Field(0, description="Failures the evolver gave up on.")


class TrialCost(_Figures):
    """The critic's trials of one remedy's candidates and what they spent."""

    trials: int = Field(0, description="Trials run.")
    accepted: int = Field(0, description="Trials whose candidate was accepted.")
    rollouts: float = Field(0, description="Rollouts the trials generated.")
    judge_calls: float = Field(0, description="Judge calls they made.")
    seconds: float = Field(0, description="Seconds they took.")

    def plus(self, other: TrialCost) -> TrialCost:
        """The two summed, field by field (as counted: a count that was never a float stays an int)."""
        return TrialCost.model_construct(**{k: getattr(self, k) + getattr(other, k) for k in TrialCost.model_fields})


class RunFigures(_Figures):
    """One run's figures, in the order ``results.json`` writes them (None where the run does not record one)."""

    # what the run is
    method: str = Field(description="The bench method (its folder under the bench).")
    seed: int = Field(description="The run's seed.")
    path: str = Field(description="The run directory (relative to the repository root in a report).")
    complete: bool = Field(description="Whether the run ended (wrote summary.json).")
    status: str = Field(description="The bench's status of the run (done, running, failed, ...), else done/incomplete.")
    trainer_method: str | None = Field(None, description="The run config's method (None: a run from before it).")
    max_steps: float | None = Field(None, description="grpo.max_steps of the run.")
    split: str = Field(description="validation/test, or the one held-out set of runs from before the split.")
    # scores
    validation_best: float | None = Field(None, description="The best validation score (best.json).")
    steps_to_best: int | None = Field(None, description="The step of the best validation score.")
    test_at_best: float | None = Field(None, description="The test score at the best-validation step.")
    test_at_best_per_domain: PerGroup | None = Field(None, description="test_at_best per task domain.")
    test_at_best_se: float | None = Field(None, description="test_at_best's standard error from sampling answers.")
    test_end: float | None = Field(None, description="The test score of the last test evaluation.")
    test_end_se: float | None = Field(None, description="test_end's standard error from sampling answers.")
    test_end_step: int | None = Field(None, description="The step of the last test evaluation.")
    test_end_per_domain: PerGroup | None = Field(None, description="test_end per task domain.")
    test_start: float | None = Field(None, description="The test score at step 0 (None: not evaluated there).")
    zero_std_all_low: float | None = Field(None, description="Mean share of flat all-low groups over the steps.")
    zero_std_all_high: float | None = Field(None, description="Mean share of flat all-high groups over the steps.")
    # totals
    rollouts_spent_source: str = Field(description="What rollouts_spent adds up.")
    rollouts_generated: float | None = Field(None, description="Rollouts generated by training (summary.json).")
    rollouts_discarded: float | None = Field(None, description="Of them, discarded by DAPO's dynamic sampling.")
    rollouts_trial: float | None = Field(None, description="Rollouts generated by the critic's trials.")
    judge_calls: float | None = Field(None, description="Judge calls of the run.")
    rollouts_spent: float | None = Field(None, description="rollouts_generated + rollouts_trial.")
    effective_group_ratio: float | None = Field(None, description="Share of groups that carried a learning signal.")
    wall_seconds: float | None = Field(None, description="Wall time: the bench's measure, else the trainer's.")
    harness_overhead_seconds: float | None = Field(None, description="Seconds the harness took in training.")
    harness_overhead_share: float | None = Field(None, description="The harness's share of the trainer's wall time.")
    steps: int | None = Field(description="Steps trained (the summary's, else the last logged).")
    # the harness's decisions
    harness_commits: int | None = Field(None, description="Commit events.")
    harness_rejections: int | None = Field(None, description="Rejecting verdicts.")
    harness_decisions: dict[str, FamilyDecisions] | None = Field(None, description="What the harness did per family.")
    trial_costs: dict[str, TrialCost] | None = Field(None, description="The critic's trials per remedy.")
    misfires: dict[str, int] | None = Field(None, description="Misfires on failures no prompt states, by kind.")
    # gold grading, per family
    graded_with: str | None = Field(None, description="gold, rubric or mixed (None: no evaluation).")
    test_at_best_per_family: PerGroup | None = Field(None, description="test_at_best per task family.")
    test_end_per_family: PerGroup | None = Field(None, description="test_end per task family.")
    test_start_per_family: PerGroup | None = Field(None, description="test_start per task family.")
    proxy_test_at_best: float | None = Field(None, description="The proxy score beside test_at_best.")
    proxy_test_at_best_per_family: PerGroup | None = Field(None, description="proxy_test_at_best per task family.")
    proxy_test_end: float | None = Field(None, description="The proxy score beside test_end.")
    proxy_test_end_per_family: PerGroup | None = Field(None, description="proxy_test_end per task family.")
    proxy_test_start: float | None = Field(None, description="The proxy score beside test_start.")
    proxy_test_start_per_family: PerGroup | None = Field(None, description="proxy_test_start per task family.")
    clipped_share_end: float | None = Field(None, description="Share of the last test evaluation's answers clipped.")
    clipped_per_family_end: PerGroup | None = Field(None, description="clipped_share_end per task family.")
    test_curve: list[CurvePoint] = Field(description="Every test evaluation, in step order.")
    test_per_task: dict[int, dict[str, float]] = Field(
        default_factory=dict,
        exclude=True,
        description="Per-task test scores by step, for the bootstrap over tasks (never written to results.json).",
    )
    # training, per family
    train_per_family: dict[str, TrainFamily] | None = Field(None, description="Training figures per task family.")
    train_clipped_share: float | None = Field(None, description="Share of all trained completions clipped.")
    family_failure: dict[str, str] | None = Field(None, description="Each family's injected failure (metadata).")
    # at equal rollouts (:func:`~harnessrl.analysis.per_run.with_equal_cost`)
    equal_rollouts_budget: float | None = Field(None, description="The seed's budget: the least any run spent.")
    equal_rollouts_step: int | None = Field(None, description="The last test evaluation within the budget.")
    test_at_equal_rollouts: float | None = Field(None, description="The test score there.")
    proxy_test_at_equal_rollouts: float | None = Field(None, description="The proxy score there.")
    # a row of a committed report
    rows_from: str | None = Field(
        None,
        exclude_if=lambda v: v is None,
        description="The results.json a row was taken from (None: read from a run; then not written).",
    )
    missing: list[str] = Field(
        default_factory=list,
        exclude=True,
        description="The figures the row's report was written before (None here: not recorded).",
    )

    def to_row(self) -> dict[str, object]:
        """The row ``results.json`` writes (``rows_from`` only for a row taken from a committed report)."""
        return self.model_dump(mode="python")

    @classmethod
    def from_row(cls, row: Any, source: str, index: int) -> RunFigures:
        """A ``results.json`` row (``index`` of the ``runs`` of ``source``) read back: the figures it lacks are None
        and listed in :attr:`missing`. A row that does not fit is a HarnessRLError naming the file and the field."""
        if not isinstance(row, dict):
            raise HarnessRLError(f"{source}: run row {index} is not a mapping: not a bench report's results.json")
        absent = [k for k in REQUIRED if k not in row]
        if absent:
            raise HarnessRLError(
                f"a run row of {source} (row {index}) has no {', '.join(absent)}: not a bench report's results.json "
                "(give the results.json a `harnessrl bench report` wrote)"
            )
        try:
            figures = cls.model_validate({**row, "rows_from": source})
        except ValidationError as e:
            where = f"{row.get('method')}/seed{row.get('seed')}"
            bad = "; ".join(
                f"`{'.'.join(map(str, err['loc']))}` {err['msg'].lower()} (it is {_short(err['input'])})"
                for err in e.errors(include_url=False)[:3]
            )
            raise HarnessRLError(
                f"{source}: run row {index} ({where}) does not read as a run's figures: {bad}. Fix the field in that "
                "file (or make the report again with `harnessrl bench report`), or leave the method out with "
                "--rows-methods"
            ) from None
        figures.missing = sorted(RECORDED - row.keys())
        return figures


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


REQUIRED = tuple(name for name, field in RunFigures.model_fields.items() if field.is_required())
"""What a row must have to be read as a run: the model's required fields (every report since the bench's first
records them)."""

RECORDED = frozenset(RunFigures.model_fields) - {
    "test_per_task",
    "missing",
    "rows_from",
    "equal_rollouts_budget",
    "equal_rollouts_step",
    "test_at_equal_rollouts",
    "proxy_test_at_equal_rollouts",
}
"""The figures a run's folder gives (what a row from an older report may lack); the equal-rollouts figures are
recomputed for every run, rows included."""
