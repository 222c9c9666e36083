"""Rubric criteria: a versioned rubric per task; version 0 is the dataset's and never changes.

Edits add a criterion (a stricter one, or a pitfall with a negative weight against a hack), remove,
reword or reweight one. Each applied edit makes a new version of that task's rubric; the reward
always uses the current version, evaluation always uses version 0. ``preview`` builds a candidate
rubric without applying it, which is what a critic re-grades cached rollouts with.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from harnessrl.data.schema import Criterion, Task
from harnessrl.interfaces.base import AppliedUpdate, InterfaceUpdate

__all__ = ["EditRubric", "RubricCriteria", "RubricVersion"]


class EditRubric(InterfaceUpdate):
    """Edit one task's rubric. ``add`` new criteria (a stricter criterion when every rollout passes a
    lax one; a pitfall with a negative weight against a reward hack such as padding, keyword stuffing
    or a format trick; a programmatic check with ``check`` for anything formal), ``remove`` criteria by
    id, ``reword`` a loose criterion (id -> new text) or ``reweight`` one (id -> new weight). Use it
    when scores are uniformly high on a lax rubric, or when higher scores stop meaning better answers."""

    interface: Literal["rubric_criteria"] = "rubric_criteria"
    task_id: str = Field(min_length=1)
    add: list[Criterion] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)
    reword: dict[str, str] = Field(default_factory=dict)
    reweight: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _changes_something(self):
        if not (self.add or self.remove or self.reword or self.reweight):
            raise ValueError("an EditRubric must add, remove, reword or reweight at least one criterion")
        if any(w == 0 for w in self.reweight.values()):
            raise ValueError("reweight to 0 is not allowed: remove the criterion instead")
        return self


class RubricVersion(BaseModel):
    version: int
    step: int
    criteria: list[Criterion]
    candidate_id: str | None = None


class RubricCriteria:
    """The rubric-criteria interface. With no update applied every task uses version 0 (plain GRPO)."""

    name = "rubric_criteria"

    def __init__(self, tasks: list[Task]):
        self.versions: dict[str, list[RubricVersion]] = {
            t.id: [RubricVersion(version=0, step=0, criteria=list(t.rubric))] for t in tasks
        }
        self.version = 0
        self.history: list[AppliedUpdate] = []

    def current(self, task_id: str) -> RubricVersion:
        try:
            return self.versions[task_id][-1]
        except KeyError:
            raise ValueError(f"unknown task id {task_id!r}: the rubric interface knows only training tasks") from None

    def original(self, task_id: str) -> list[Criterion]:
        """Version 0, the dataset's rubric (what evaluation grades with)."""
        return self.versions[task_id][0].criteria

    def preview(self, update: EditRubric) -> list[Criterion]:
        """The rubric ``update`` would make, without applying it; raises ValueError when it is invalid."""
        crits = {c.id: c for c in self.current(update.task_id).criteria}
        unknown = [cid for cid in (*update.remove, *update.reword, *update.reweight) if cid not in crits]
        if unknown:
            raise ValueError(f"task {update.task_id!r} has no criterion {unknown}; current ids: {sorted(crits)}")
        for cid in update.remove:
            del crits[cid]
        # re-validated (not model_copy): a blank text or a non-finite weight must be rejected here too
        for cid, text in update.reword.items():
            if cid in crits:
                crits[cid] = Criterion.model_validate({**crits[cid].model_dump(), "text": text})
        for cid, w in update.reweight.items():
            if cid in crits:
                crits[cid] = Criterion.model_validate({**crits[cid].model_dump(), "weight": w})
        for c in update.add:
            cid = c.id
            n = 2
            while cid in crits:  # never silently replace an existing criterion
                cid = f"{c.id}_{n}"
                n += 1
            crits[cid] = c if cid == c.id else c.model_copy(update={"id": cid})
        out = list(crits.values())
        if not any(c.weight > 0 for c in out):
            raise ValueError("the edited rubric would have no positive weight: the reward would be undefined")
        return out

    def apply(self, update: EditRubric, step: int, candidate_id: str | None = None) -> int:
        """Apply an edit from ``step`` on; returns the task's new rubric version."""
        criteria = self.preview(update)
        new = RubricVersion(
            version=self.current(update.task_id).version + 1, step=step, criteria=criteria, candidate_id=candidate_id
        )
        self.versions[update.task_id].append(new)
        self.version += 1
        self.history.append(
            AppliedUpdate(version=self.version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return new.version

    def to_dict(self) -> dict:
        # version 0 comes from the data; only edited tasks' later versions are stored
        return {
            "version": self.version,
            "history": [h.model_dump() for h in self.history],
            "edited": {tid: [v.model_dump() for v in vs[1:]] for tid, vs in self.versions.items() if len(vs) > 1},
        }

    @classmethod
    def from_dict(cls, data: dict, tasks: list[Task]) -> RubricCriteria:
        obj = cls(tasks)
        obj.version = data.get("version", 0)
        obj.history = [AppliedUpdate.model_validate(h) for h in data.get("history", [])]
        for tid, vs in data.get("edited", {}).items():
            if tid not in obj.versions:
                raise ValueError(f"saved rubric edits name task {tid!r}, which is not in the training data")
            obj.versions[tid].extend(RubricVersion.model_validate(v) for v in vs)
        return obj
