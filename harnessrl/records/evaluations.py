"""``eval.jsonl``'s rows: one model, :class:`EvalResult`, that evaluation builds and writes and every reader of the
run gets back (:func:`~harnessrl.records.run_record.read_evaluations`).

A row is written whole by the evaluation (every field, in the order declared here); what a row from an older run
lacks reads as its default (a run from before the splits has no ``split``, one from before gold grading no
``graded_with``), so a reader takes every row of every run through the same model. Rows that ``harnessrl eval``
appends carry a ``source`` (and the checkpoint it scored): they are not part of the training's curve and no
reader of the run's evaluations gets them.

This module is a data type at the bottom of the layers: it imports nothing of the package.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue, field_validator

__all__ = ["EvalResult", "EvalSplit", "GradeWith", "ScoreSet"]

EvalSplit = Literal["validation", "test"]
"""Validation chooses the best checkpoint; test is only reported."""

GradeWith = Literal["gold", "rubric"]
"""What an evaluation's main score is graded with: the tasks' gold rubrics, or their rubric version 0."""


class ScoreSet(BaseModel):
    """One grading of an evaluation's completions: overall (mean over tasks), per domain, per family, per task.

    ``overall`` is None when no task could be scored (``no_score_reason`` says why), never NaN."""

    overall: float | None = None
    per_domain: dict[str, float] = Field(default_factory=dict)
    per_family: dict[str, float] = Field(default_factory=dict, description="By metadata.family; empty: no families.")
    per_task: dict[str, float | None] = Field(default_factory=dict)
    no_score_reason: str | None = None
    sampling_se: float | None = Field(
        default=None,
        description="The standard error of `overall` from sampling the answers (the checkpoint and tasks held): "
        "sqrt(sum of each task's answer-reward variance over its answers) / tasks; None below 2 answers a task.",
    )


class EvalResult(BaseModel):
    """Scores on one evaluation split, graded with ``graded_with`` (overall, per domain, per family, per
    task), the proxy beside a gold score, and the share of completions cut at the token budget: one line of
    ``eval.jsonl``."""

    step: int
    split: EvalSplit | None = Field(default=None, description="None: a row from before the splits existed.")
    overall: float | None = None
    per_domain: dict[str, float] = Field(default_factory=dict)
    per_task: dict[str, float | None] = Field(default_factory=dict)
    tasks: int = Field(default=0, description="How many tasks were evaluated (0: a row that does not say).")
    seconds: float = Field(default=0.0, description="How long it took (0: a row that does not say).")
    samples: list[dict[str, JsonValue]] = Field(
        default_factory=list, description="A few (task, response, reward) examples."
    )
    completions_per_task: int = Field(default=1, description="1: greedy; k > 1: mean reward of k sampled completions.")
    graded_with: GradeWith = Field(
        default="rubric", description="gold: the gold rubrics; rubric: rubric version 0 (rows from before: rubric)."
    )
    per_family: dict[str, float] = Field(default_factory=dict)
    no_score_reason: str | None = None
    sampling_se: float | None = Field(
        default=None, description="The standard error of `overall` from sampling the answers (ScoreSet)."
    )
    proxy: ScoreSet | None = Field(
        default=None, description="Graded with rubric version 0 when the main score is gold (the proxy)."
    )
    clipped_share: float | None = Field(
        default=None, description="Share of completions whose length reached the token budget (cut, not ended)."
    )
    clipped_per_family: dict[str, float] = Field(default_factory=dict)

    @field_validator("graded_with", mode="before")
    @classmethod
    def _rubric_when_unsaid(cls, v: Any) -> Any:
        return "rubric" if v is None else v

    @property
    def gold(self) -> ScoreSet | None:
        """The gold scores (None when graded with the rubric)."""
        return self.scores if self.graded_with == "gold" else None

    @property
    def scores(self) -> ScoreSet:
        """The main grading as a :class:`ScoreSet`."""
        return ScoreSet(
            overall=self.overall,
            per_domain=self.per_domain,
            per_family=self.per_family,
            per_task=self.per_task,
            no_score_reason=self.no_score_reason,
            sampling_se=self.sampling_se,
        )

    @property
    def rubric_scores(self) -> ScoreSet:
        """Graded with rubric version 0 (the proxy), whatever the main grading."""
        return self.proxy if self.proxy is not None else self.scores
