"""The rubric interface's typed update: :class:`EditRubric` (add, remove, reword, reweight criteria of one
task's rubric, and the instances of a repair for the tasks that share its signature), the bounds an edit
keeps, and :func:`new_criterion`, how an edit's criterion is built.

The interface's state (the versioned rubrics) is :mod:`harnessrl.interfaces.rubric`; the edits it suggests
for each failure kind are :mod:`harnessrl.interfaces.rubric_remedies`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from harnessrl.data.checks import Check
from harnessrl.data.schema import Criterion
from harnessrl.interfaces.base import InterfaceUpdate

__all__ = [
    "MAX_EDIT_CRITERION_CHARS",
    "MAX_GUIDE_FRACTION",
    "MAX_RUBRIC_CRITERIA",
    "MAX_WEIGHT",
    "CoveredEdit",
    "EditRubric",
    "criterion_requirement",
    "new_criterion",
]

MAX_EDIT_CRITERION_CHARS = 1000
"""Longest criterion text the evolver's edit may write (added or reworded): one or two sentences. A dataset's
own criteria are held to the far looser :data:`~harnessrl.data.schema.MAX_CRITERION_CHARS` when loaded."""
MAX_WEIGHT = 100.0
"""Largest criterion weight, in absolute value, an edit may set."""
MAX_RUBRIC_CRITERIA = 32
"""Most criteria an edit may leave a rubric with (a dataset rubric that has more may keep them)."""
MAX_GUIDE_FRACTION = 0.75
"""Largest share of a group an edit's hint may reach: the rest stays unguided, so the policy still learns the plain
prompt."""

_CriterionText = Annotated[str, Field(min_length=1, max_length=MAX_EDIT_CRITERION_CHARS)]
_Weight = Annotated[float, Field(ge=-MAX_WEIGHT, le=MAX_WEIGHT)]


class CoveredEdit(BaseModel):
    """A repair's instance for one more task that shares its signature: the criteria added to that task's rubric
    (built from its own prompt and reference answer), or removed from it (its own criteria of the signature)."""

    task_id: str = Field(min_length=1)
    add: list[Criterion] = Field(default_factory=list, max_length=8)
    """Empty only in a fade (``EditRubric.fade_to``), which changes no criterion, or in a removal."""
    remove: list[str] = Field(default_factory=list, max_length=MAX_RUBRIC_CRITERIA)
    """The task's own criteria of the signature this repair removes (a criterion its reference fails)."""


class EditRubric(InterfaceUpdate):
    """Edit one task's rubric. ``add`` new criteria (a stricter criterion when every rollout passes a
    lax one; a pitfall with a negative weight against a reward hack such as padding, keyword stuffing
    or a format trick; a programmatic check with ``check`` for anything formal), ``remove`` criteria by
    id, ``reword`` a loose criterion (id -> new text) or ``reweight`` one (id -> new weight). Use it
    when scores are uniformly high on a lax rubric, or when higher scores stop meaning better answers.
    ``fade_to`` alone fades the hint a rubric states once the unguided members meet it without it."""

    interface: Literal["rubric_criteria"] = "rubric_criteria"
    task_id: str = Field(min_length=1)
    add: list[Criterion] = Field(default_factory=list, max_length=8)
    remove: list[str] = Field(default_factory=list, max_length=MAX_RUBRIC_CRITERIA)
    reword: dict[str, _CriterionText] = Field(default_factory=dict, max_length=MAX_RUBRIC_CRITERIA)
    reweight: dict[str, _Weight] = Field(default_factory=dict, max_length=MAX_RUBRIC_CRITERIA)
    cover: list[CoveredEdit] = Field(
        default_factory=list,
        description="Leave empty: the trainer adds the instances of this repair for every other task that shares its "
        "signature (the same stated requirement, or the same group of the data).",
    )
    guide_fraction: float = Field(
        default=0.0,
        ge=0.0,
        le=MAX_GUIDE_FRACTION,
        description="Above 0: the criteria this edit adds are also stated as a hint to this share of each changed "
        "task's group while they are in force, so some rollouts meet them. Use it for a requirement the prompt "
        "states that no rollout meets yet: a check alone would split no group. The edit and its hint are one update, "
        "committed on probation and kept only when the guided groups give signal (docs/design.md §4).",
    )
    fade_to: float | None = Field(
        default=None,
        ge=0.0,
        le=MAX_GUIDE_FRACTION,
        description="Set only to fade the hint a rubric states (criteria added with guide_fraction) once the "
        "unguided members meet them alone: the share of each changed task's group that still sees it, below the "
        "share now (0: none). The criteria stay as they are; nothing else may change (docs/design.md §4).",
    )

    def task_ids(self) -> list[str]:
        """Every task this edit changes: its own, then the covered ones."""
        return [self.task_id, *(c.task_id for c in self.cover)]

    def fades(self) -> bool:
        """Whether this edit only fades the rubric's hint (``fade_to``), changing no criterion."""
        return self.fade_to is not None

    @model_validator(mode="after")
    def _changes_something(self):
        changes = bool(self.add or self.remove or self.reword or self.reweight)
        if self.fades():
            if changes or self.guide_fraction > 0 or any(c.add for c in self.cover):
                raise ValueError(
                    "fade_to fades the hint the rubric states and changes nothing else: make the criteria's "
                    "change (add, remove, reword, reweight, guide_fraction) a separate edit"
                )
            return self
        if not changes:
            raise ValueError(
                "an EditRubric must add, remove, reword or reweight at least one criterion (or fade the rubric's "
                "hint with fade_to)"
            )
        empty = [c.task_id for c in self.cover if not (c.add or c.remove)]
        if empty:
            raise ValueError(
                f"the instances for {empty} add or remove no criterion: leave cover empty, the trainer fills it"
            )
        if any(w == 0 for w in self.reweight.values()):
            raise ValueError("reweight to 0 is not allowed: remove the criterion instead")
        if self.guide_fraction > 0 and (self.remove or self.reword or self.reweight):
            raise ValueError(
                "guide_fraction > 0 is for an edit that only adds criteria (it is measured on probation and reverted "
                "by removing what it added): make the removal, rewording or reweighting a separate edit"
            )
        if self.guide_fraction > 0 and not any(c.weight > 0 for c in self.add):
            raise ValueError(
                "guide_fraction > 0 states the criteria the edit adds as a hint: add at least one criterion with a "
                "positive weight (what a good answer does), or set guide_fraction to 0"
            )
        for c in self.add:
            if len(c.text) > MAX_EDIT_CRITERION_CHARS:
                raise ValueError(
                    f"added criterion {c.id!r} has {len(c.text)} characters of text: at most "
                    f"{MAX_EDIT_CRITERION_CHARS}; say in one or two sentences what the response must (not) do"
                )
            if abs(c.weight) > MAX_WEIGHT:
                raise ValueError(
                    f"added criterion {c.id!r} has weight {c.weight:g}: "
                    f"keep it between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}"
                )
        return self


def new_criterion(cid: str, text: str, weight: float, check: Check | None = None) -> Criterion:
    """A criterion to add: judged, or programmatic with ``check`` (validated like a dataset's)."""
    if check is None:
        return Criterion(id=cid, text=text, weight=weight)
    return Criterion(id=cid, text=text, weight=weight, kind="programmatic", check=check)


def criterion_requirement(criterion: Criterion) -> str | None:
    """The requirement a criterion's exact check asks (None: a judged criterion)."""
    return criterion.check.requirement_key() if criterion.check is not None else None
