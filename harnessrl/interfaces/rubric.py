"""Rubric criteria: a versioned rubric per task; version 0 is the dataset's and never changes.

Edits add a criterion (a stricter one, or a pitfall with a negative weight against a hack), remove,
reword or reweight one. Each applied edit makes a new version of that task's rubric; the reward
always uses the current version, evaluation always uses version 0. ``preview`` builds a candidate
rubric without applying it, which is what a critic re-grades cached rollouts with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from harnessrl.critic.signal import REFERENCE_RANK
from harnessrl.data.schema import Criterion, Task
from harnessrl.interfaces.base import AppliedUpdate, HarnessContext, Interface, InterfaceUpdate, failure_metric
from harnessrl.records.failures import Failure

if TYPE_CHECKING:
    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = [
    "MAX_CRITERION_CHARS",
    "MAX_RUBRIC_CRITERIA",
    "MAX_WEIGHT",
    "EditRubric",
    "RubricCriteria",
    "RubricVersion",
    "criteria_view",
]

MAX_CRITERION_CHARS = 1000
"""Longest criterion text an edit may write (added or reworded)."""
MAX_WEIGHT = 100.0
"""Largest criterion weight, in absolute value, an edit may set."""
MAX_RUBRIC_CRITERIA = 32
"""Most criteria an edit may leave a rubric with (a dataset rubric that has more may keep them)."""

_CriterionText = Annotated[str, Field(min_length=1, max_length=MAX_CRITERION_CHARS)]
_Weight = Annotated[float, Field(ge=-MAX_WEIGHT, le=MAX_WEIGHT)]


class EditRubric(InterfaceUpdate):
    """Edit one task's rubric. ``add`` new criteria (a stricter criterion when every rollout passes a
    lax one; a pitfall with a negative weight against a reward hack such as padding, keyword stuffing
    or a format trick; a programmatic check with ``check`` for anything formal), ``remove`` criteria by
    id, ``reword`` a loose criterion (id -> new text) or ``reweight`` one (id -> new weight). Use it
    when scores are uniformly high on a lax rubric, or when higher scores stop meaning better answers."""

    interface: Literal["rubric_criteria"] = "rubric_criteria"
    task_id: str = Field(min_length=1)
    add: list[Criterion] = Field(default_factory=list, max_length=8)
    remove: list[str] = Field(default_factory=list, max_length=MAX_RUBRIC_CRITERIA)
    reword: dict[str, _CriterionText] = Field(default_factory=dict, max_length=MAX_RUBRIC_CRITERIA)
    reweight: dict[str, _Weight] = Field(default_factory=dict, max_length=MAX_RUBRIC_CRITERIA)

    @model_validator(mode="after")
    def _changes_something(self):
        if not (self.add or self.remove or self.reword or self.reweight):
            raise ValueError("an EditRubric must add, remove, reword or reweight at least one criterion")
        if any(w == 0 for w in self.reweight.values()):
            raise ValueError("reweight to 0 is not allowed: remove the criterion instead")
        for c in self.add:
            if len(c.text) > MAX_CRITERION_CHARS:
                raise ValueError(
                    f"added criterion {c.id!r} has {len(c.text)} characters of text: at most {MAX_CRITERION_CHARS}; "
                    "say in one or two sentences what the response must (not) do"
                )
            if abs(c.weight) > MAX_WEIGHT:
                raise ValueError(
                    f"added criterion {c.id!r} has weight {c.weight:g}: "
                    f"keep it between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}"
                )
        return self


class RubricVersion(BaseModel):
    version: int
    step: int
    criteria: list[Criterion]
    candidate_id: str | None = None


class RubricCriteria(Interface):
    """The rubric-criteria interface. With no update applied every task uses version 0 (plain GRPO).

    It owns the rubric each rollout is graded with (:meth:`current`, :attr:`versions`)."""

    name = "rubric_criteria"
    update_type = EditRubric
    builder_tool = "edit_rubric"
    answers = ("criterion_dead",)
    hint_for = (
        "non_discriminative_high",
        "spurious_length",
        "spurious_feature",
        "reference_below_policy",
        "criterion_saturated",
        "judge_disagreement",
    )
    evolver_text = (
        "the task's rubric; add a stricter criterion, a pitfall (negative weight) against a reward hack, a "
        "programmatic check, "
        "reword a loose criterion or reweight one. Blame it when scores are uniformly high on a lax rubric, "
        "or when higher scores stop meaning better answers (length, a surface feature, the reference "
        "answer scoring below the policy)."
    )

    def __init__(self, tasks: Sequence[Task]):
        self.tasks = {t.id: t for t in tasks}
        self.versions: dict[str, list[RubricVersion]] = {
            t.id: [RubricVersion(version=0, step=0, criteria=list(t.rubric))] for t in tasks
        }
        self._version = 0
        self._history: list[AppliedUpdate] = []

    @property
    def version(self) -> int:
        return self._version

    @property
    def history(self) -> list[AppliedUpdate]:
        return self._history

    def current(self, task_id: str) -> RubricVersion:
        try:
            return self.versions[task_id][-1]
        except KeyError:
            raise ValueError(f"unknown task id {task_id!r}: the rubric interface knows only training tasks") from None

    def original(self, task_id: str) -> list[Criterion]:
        """Version 0, the dataset's rubric (what evaluation grades with)."""
        return self.versions[task_id][0].criteria

    def rubric_with(self, update: EditRubric) -> list[Criterion]:
        """The rubric ``update`` would make, without applying it; raises ValueError when it is invalid."""
        crits = {c.id: c for c in self.current(update.task_id).criteria}
        size_now = len(crits)
        unknown = [cid for cid in (*update.remove, *update.reword, *update.reweight) if cid not in crits]
        if unknown:
            raise ValueError(f"task {update.task_id!r} has no criterion {unknown}; current ids: {sorted(crits)}")
        for cid in update.remove:
            crits.pop(cid, None)  # a repeated id removes it once
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
            raise ValueError(
                "the edited rubric would have no positive weight, so the reward would be undefined: keep at "
                "least one criterion with a positive weight (remove fewer, or add one in their place)"
            )
        limit = max(MAX_RUBRIC_CRITERIA, size_now)
        if len(out) > limit:
            raise ValueError(
                f"the edited rubric would have {len(out)} criteria (now {size_now}): at most {limit}; "
                "add fewer, or remove or reword criteria instead"
            )
        return out

    def apply(self, update: EditRubric, step: int, candidate_id: str | None = None) -> int:
        """Apply an edit from ``step`` on; returns the task's new rubric version."""
        criteria = self.rubric_with(update)
        new = RubricVersion(
            version=self.current(update.task_id).version + 1, step=step, criteria=criteria, candidate_id=candidate_id
        )
        self.versions[update.task_id].append(new)
        self._version += 1
        self._history.append(
            AppliedUpdate(version=self._version, step=step, update=update.model_dump(), candidate_id=candidate_id)
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
    def from_dict(cls, data: Mapping[str, Any], tasks: Sequence[Task]) -> RubricCriteria:
        obj = cls(tasks)
        obj._version = data.get("version", 0)
        obj._history = [AppliedUpdate.model_validate(h) for h in data.get("history", [])]
        for tid, vs in data.get("edited", {}).items():
            if tid not in obj.versions:
                raise ValueError(f"saved rubric edits name task {tid!r}, which is not in the training data")
            obj.versions[tid].extend(RubricVersion.model_validate(v) for v in vs)
        return obj

    # ------------------------------------------------------------------ as a harness interface
    @classmethod
    def create(cls, ctx: HarnessContext) -> RubricCriteria:
        return cls(list(ctx.tasks.values()))

    @classmethod
    def restore(cls, data: Mapping[str, Any], ctx: HarnessContext) -> RubricCriteria:
        return cls.from_dict(data, list(ctx.tasks.values()))

    def targets(self, update: EditRubric) -> list[Task]:
        self.current(update.task_id)  # ValueError for an unknown task
        return [self.tasks[update.task_id]]

    def describe(self, update: EditRubric) -> str:
        return f"the rubric of task {update.task_id!r}"

    def preview(self, update: EditRubric, step: int) -> dict[str, Any]:
        current = self.current(update.task_id)
        after = self.rubric_with(update)
        old = {c.id: c for c in current.criteria}
        new = {c.id: c for c in after}
        return {
            "rubric_version_now": current.version,
            "added": [i for i in new if i not in old],
            "removed": [i for i in old if i not in new],
            "changed": [i for i in new if i in old and new[i] != old[i]],
            "rubric_after": criteria_view(after),
        }

    def target_state(self, update: EditRubric) -> Any:
        return self.current(update.task_id).version

    # ------------------------------------------------------------------ how the critic measures a candidate
    def metric(self, update: EditRubric, failure: Failure | None) -> str:
        """From the failure; for reference_below_policy, the reference answer's rank among the rollouts."""
        return failure_metric(failure, reference_rank=REFERENCE_RANK)

    def trial(self, update: EditRubric, trial: Trial) -> Measured:
        """Re-grade the task's cached rollouts (samples of the frozen policy) and its reference answer
        under the current and the candidate rubric: paired, nothing generated (:meth:`Trial.regrade`).
        A criterion-signal trial watches the failure's criterion and every criterion the candidate
        rewords, reweights, removes (baseline side) or adds (candidate side)."""
        try:
            task = self.targets(update)[0]
            candidate = self.rubric_with(update)
        except ValueError as e:
            trial.reject(f"invalid candidate: {e}")
        current = self.current(task.id)
        cid = trial.failure.evidence.get("criterion_id") if trial.failure is not None else None
        touched = ({str(cid)} if cid else set()) | set(update.reword) | set(update.reweight)
        base_ids, cand_ids = touched | set(update.remove), touched | {c.id for c in update.add}
        return trial.regrade(
            task,
            current,
            candidate,
            targeted=(
                [c.id for c in current.criteria if c.id in base_ids],
                [c.id for c in candidate if c.id in cand_ids],
            ),
        )

    # ------------------------------------------------------------------ the evolver and the report
    def summary(self) -> dict[str, Any]:
        edited = {tid: vs[-1].version for tid, vs in self.versions.items() if len(vs) > 1}
        return {**super().summary(), "edited_tasks": dict(sorted(edited.items()))}

    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        current = self.current(task.id)
        return {"rubric_version": current.version, "rubric": criteria_view(current.criteria)}


def criteria_view(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    """Criteria as plain JSON objects (id, text, weight, kind, check) for the evolver's tools."""
    return [c.model_dump(mode="json", exclude_none=True) for c in criteria]
