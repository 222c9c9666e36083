"""Rubric criteria: a versioned rubric per task; version 0 is the dataset's and never changes.

Edits add a criterion (a stricter one, or a pitfall with a negative weight against a hack), remove,
reword or reweight one. Each applied edit makes a new version of that task's rubric; the reward
always uses the current version, evaluation always uses version 0. ``preview`` builds a candidate
rubric without applying it, which is what a critic re-grades cached rollouts with.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from harnessrl.critic.signal import CHECK_SPLIT_SHARE, REFERENCE_RANK
from harnessrl.data.checks import check_passes, words
from harnessrl.data.schema import Criterion, Task, prompt_text, task_group
from harnessrl.interfaces.base import (
    AppliedUpdate,
    HarnessContext,
    Interface,
    InterfaceUpdate,
    Signature,
    Suggestion,
    failure_metric,
    suggestions,
)
from harnessrl.interfaces.evidence import ProposalEvidence, as_sentence, clip_text, excerpt, number, round_weight
from harnessrl.interfaces.induction import InducedCheck, requirement_key, stated_requirements, tightened_bound
from harnessrl.records.failures import Failure

if TYPE_CHECKING:
    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = [
    "MAX_CRITERION_CHARS",
    "MAX_RUBRIC_CRITERIA",
    "MAX_WEIGHT",
    "CoveredEdit",
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


class CoveredEdit(BaseModel):
    """A repair's instance for one more task that shares its signature: the criteria added to that task's rubric
    (built from its own prompt and reference answer)."""

    task_id: str = Field(min_length=1)
    add: list[Criterion] = Field(min_length=1, max_length=8)


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
    cover: list[CoveredEdit] = Field(
        default_factory=list,
        description="Leave empty: the trainer adds the instances of this repair for every other task that shares its "
        "signature (the same stated requirement, or the same group of the data).",
    )

    def task_ids(self) -> list[str]:
        """Every task this edit changes: its own, then the covered ones."""
        return [self.task_id, *(c.task_id for c in self.cover)]

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
        "unchecked_requirement",
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

    def rubric_for(self, update: EditRubric, task_id: str) -> list[Criterion]:
        """The rubric ``update`` would make for ``task_id`` (its own task, or one it covers), without applying it;
        raises ValueError when it is invalid."""
        if task_id == update.task_id:
            return self.rubric_with(update)
        covered = next((c for c in update.cover if c.task_id == task_id), None)
        if covered is None:
            raise ValueError(f"the edit does not cover task {task_id!r}")
        return self.rubric_with(EditRubric(task_id=task_id, add=covered.add))

    def rubric_with(self, update: EditRubric) -> list[Criterion]:
        """The rubric ``update`` would make for its own task, without applying it; raises ValueError when it is
        invalid."""
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
        """Apply an edit from ``step`` on, to its task and every task it covers (all or nothing); returns its own
        task's new rubric version."""
        rubrics = {tid: self.rubric_for(update, tid) for tid in update.task_ids()}
        for tid, criteria in rubrics.items():
            new = RubricVersion(
                version=self.current(tid).version + 1, step=step, criteria=criteria, candidate_id=candidate_id
            )
            self.versions[tid].append(new)
        self._version += 1
        self._history.append(
            AppliedUpdate(version=self._version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return self.current(update.task_id).version

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
        for tid in update.task_ids():
            self.current(tid)  # ValueError for an unknown task
        return [self.tasks[tid] for tid in update.task_ids()]

    def describe(self, update: EditRubric) -> str:
        if update.cover and update.signature is not None:
            return f"the rubrics of task {update.task_id!r} and {len(update.cover)} more sharing {update.signature.key}"
        return f"the rubric of task {update.task_id!r}"

    def preview(self, update: EditRubric, step: int) -> dict[str, Any]:
        current = self.current(update.task_id)
        after = self.rubric_with(update)
        old = {c.id: c for c in current.criteria}
        new = {c.id: c for c in after}
        out: dict[str, Any] = {
            "rubric_version_now": current.version,
            "added": [i for i in new if i not in old],
            "removed": [i for i in old if i not in new],
            "changed": [i for i in new if i in old and new[i] != old[i]],
            "rubric_after": criteria_view(after),
        }
        if update.cover:
            for c in update.cover:
                self.rubric_for(update, c.task_id)  # ValueError: an instance that does not apply
            out["covers"] = [
                {
                    "task_id": c.task_id,
                    "added": [x.text for x in c.add],
                    "rubric_version_now": self.current(c.task_id).version,
                }
                for c in update.cover
            ]
            out["signature"] = update.signature.model_dump() if update.signature else None
        return out

    def target_state(self, update: EditRubric) -> Any:
        if not update.cover:
            return self.current(update.task_id).version
        return {tid: self.current(tid).version for tid in update.task_ids()}

    # ------------------------------------------------------------------ a repair that reaches its signature
    def widen(self, update: EditRubric) -> EditRubric:
        """An edit that only adds criteria, extended to every other training task that shares its signature
        (docs/design.md §4): when each added criterion is an exact check of a requirement the task's prompt
        states, every task whose prompt states requirements of the same kinds (:func:`requirement_key`) that
        its rubric does not check yet, each with its own instance (its own numbers and phrases), kept only
        where its reference answer passes it; else, for a remedy with a group instance (a length or padding
        pitfall), the tasks of the same group of the data (:func:`~harnessrl.data.schema.task_group`). Any
        other edit is the task's own. What an evolver wrote in ``cover`` or ``signature`` is not trusted: the cover
        is computed here, afresh."""
        update = update.model_copy(update={"cover": [], "signature": None})
        if not update.add or update.remove or update.reword or update.reweight or update.task_id not in self.tasks:
            return update
        widened = self._requirement_cover(update) or self._group_cover(update)
        return widened or update

    def _requirement_cover(self, update: EditRubric) -> EditRubric | None:
        source = self.tasks[update.task_id]
        added = [(c, _key(c)) for c in update.add]
        if any(k is None for _, k in added):
            return None
        stated = {requirement_key(ch) for ch, _ in stated_requirements(prompt_text(source.prompt))}
        if not all(k in stated for _, k in added):
            return None
        cover: list[CoveredEdit] = []
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            if task.id == source.id:
                continue
            own = {
                requirement_key(ch): (ch, text) for ch, text in reversed(stated_requirements(prompt_text(task.prompt)))
            }
            checked = {k for c in self.current(task.id).criteria if (k := _key(c)) is not None}
            add = []
            for crit, key in added:
                if key in checked or key not in own:
                    continue
                check, text = own[key]
                if task.reference_answer is not None and not check_passes(check, task.reference_answer):
                    continue
                add.append(_criterion(crit.id, text, crit.weight, check))
            if add:
                cover.append(CoveredEdit(task_id=task.id, add=add))
        key = "+".join(sorted({str(k) for _, k in added}))
        sig = Signature(kind="requirement", key=key, tasks=[source.id, *(c.task_id for c in cover)])
        return update.model_copy(update={"cover": cover, "signature": sig})

    def _group_cover(self, update: EditRubric) -> EditRubric | None:
        build = _GROUP_INSTANCES.get(update.remedy or "")
        if build is None:
            return None
        source = self.tasks[update.task_id]
        group = task_group(source)
        cover: list[CoveredEdit] = []
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            if task.id == source.id or task_group(task) != group:
                continue
            add = [x for c in update.add if (x := build(c, source, task)) is not None]
            if len(add) == len(update.add):
                cover.append(CoveredEdit(task_id=task.id, add=add))
        if not cover:
            return None
        sig = Signature(kind="group", key=group, tasks=[source.id, *(c.task_id for c in cover)])
        return update.model_copy(update={"cover": cover, "signature": sig})

    # ------------------------------------------------------------------ how the critic measures a candidate
    def metric(self, update: EditRubric, failure: Failure | None) -> str:
        """From the failure; for reference_below_policy, the reference answer's rank among the rollouts. An edit
        that only adds exact checks, for a lax rubric, a saturated criterion or a requirement the rubric does not
        check, is measured by the share of groups the checks would split (:mod:`harnessrl.critic.power`)."""
        adds_checks = bool(update.add) and all(c.check is not None for c in update.add)
        adds_only = not (update.remove or update.reword or update.reweight)
        if adds_checks and adds_only and failure is not None and failure.kind in _SPLIT_KINDS:
            return CHECK_SPLIT_SHARE
        return failure_metric(failure, reference_rank=REFERENCE_RANK)

    def trial(self, update: EditRubric, trial: Trial) -> Measured:
        """Re-grade the cached rollouts (samples of the frozen policy) and the reference answers of every task
        the edit changes, under the current and the candidate rubric: paired, pooled, nothing generated
        (:meth:`Trial.regrade`). A criterion-signal trial watches the failure's criterion and every criterion
        the candidate rewords, reweights, removes (baseline side) or adds (candidate side)."""
        try:
            tasks = self.targets(update)
            candidates = [self.rubric_for(update, t.id) for t in tasks]
        except ValueError as e:
            trial.reject(f"invalid candidate: {e}")
        cid = trial.failure.evidence.get("criterion_id") if trial.failure is not None else None
        touched = ({str(cid)} if cid else set()) | set(update.reword) | set(update.reweight)
        parts = []
        for task, candidate in zip(tasks, candidates, strict=True):
            current = self.current(task.id)
            own = update if task.id == update.task_id else next(c for c in update.cover if c.task_id == task.id)
            added = {c.id for c in own.add}
            base_ids = touched | set(update.remove) if task.id == update.task_id else set()
            cand_ids = (touched if task.id == update.task_id else set()) | added
            parts.append(
                trial.part(
                    task,
                    current,
                    candidate,
                    targeted=(
                        [c.id for c in current.criteria if c.id in base_ids],
                        [c.id for c in candidate if c.id in cand_ids],
                    ),
                    added=[c for c in candidate if c.id in added and c.check is not None],
                )
            )
        return trial.regrade(parts)

    # ------------------------------------------------------------------ the evolver and the report
    def summary(self) -> dict[str, Any]:
        edited = {tid: vs[-1].version for tid, vs in self.versions.items() if len(vs) > 1}
        return {**super().summary(), "edited_tasks": dict(sorted(edited.items()))}

    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        current = self.current(task.id)
        return {"rubric_version": current.version, "rubric": criteria_view(current.criteria)}

    # ------------------------------------------------------------------ its remedies
    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """Its playbook for the failure's kind, best first (see :data:`_PLAYBOOK`): a stricter criterion for a
        lax rubric, a length or feature pitfall against a spurious reward, the reference's key points or
        length when the reference scores below the policy, a saturated criterion reworded stricter (grounded
        in the reference answer), replaced or dropped (never reweighted: that is an affine change of a group's
        rewards GRPO's advantages do not see), a partial criterion towards a dead one, a checkable wording for
        one the judge disagrees with itself on."""
        order = _PLAYBOOK.get(evidence.failure.kind, ("stricter",))
        return suggestions(evidence, [(tag, _REMEDIES[tag]) for tag in order])


def criteria_view(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    """Criteria as plain JSON objects (id, text, weight, kind, check) for the evolver's tools."""
    return [c.model_dump(mode="json", exclude_none=True) for c in criteria]


_SPLIT_KINDS = frozenset({"unchecked_requirement", "non_discriminative_high", "criterion_saturated"})
"""Failure kinds whose added exact checks are judged by the share of groups they split."""


def _key(criterion: Criterion) -> str | None:
    """The requirement a criterion's exact check asks (None: a judged criterion)."""
    if criterion.check is None:
        return None
    return requirement_key(criterion.check.model_dump(mode="json", exclude_none=True))


def _length_instance(crit: Criterion, source: Task, task: Task) -> Criterion | None:
    """A length pitfall (``word_count`` with a ``min``) for ``task``: the limit its prompt states, else the source's
    limit scaled by the two reference answers' lengths."""
    check = crit.check.model_dump(mode="json", exclude_none=True) if crit.check is not None else {}
    if check.get("type") != "word_count" or check.get("min") is None:
        return None
    stated = [c["max"] for c, _ in stated_requirements(prompt_text(task.prompt)) if c.get("type") == "word_count"]
    if stated and stated[0] is not None:
        limit = int(stated[0])
    else:
        src_words, own_words = len((source.reference_answer or "").split()), len((task.reference_answer or "").split())
        if not src_words or not own_words:
            return None
        limit = math.ceil((int(check["min"]) - 1) * own_words / src_words)
    text = f"The response is longer than {limit} words (padding instead of substance)."
    return _criterion(crit.id, text, crit.weight, {"type": "word_count", "min": limit + 1})


def _same_instance(crit: Criterion, source: Task, task: Task) -> Criterion | None:
    """A criterion that says nothing of its task (a padding or feature pitfall) is its own instance everywhere."""
    return crit


_GROUP_INSTANCES: dict[str, Callable[[Criterion, Task, Task], Criterion | None]] = {
    "length_pitfall": _length_instance,
    "length_revise": _length_instance,
    "padding_pitfall": _same_instance,
    "feature_pitfall": _same_instance,
    "feature_heavier": _same_instance,
}
"""The remedies whose repair reaches the task's group of the data, each with how it is built for another task."""


# ---------------------------------------------------------------------------------------------- remedies
#
# Each failure kind's remedies, in the order they are tried (each is a function below, named in _PLAYBOOK):
# - uniformly high: an exact criterion induced from what the prompt states and the reference answer meets that
#   splits the rollouts (harnessrl.interfaces.induction) -> the next such criterion -> a stricter judged
#   criterion derived from the saturated criteria (mean verdict >= 0.9), weighted like the heaviest criterion
#   -> the same at twice the weight *in place of* the saturated ones (a task is retired as solved only after
#   these: the fallback);
# - spurious length: a programmatic word_count pitfall (negative weight, half the rubric's positive weight)
#   above length_margin (1.2) x the reference answer's words (the policy's median without a reference) ->
#   after a reject, looser (x1.25) when the trial says the reference answer lost score, else tighter (1.0 x
#   the reference, twice the weight) -> a judged padding pitfall;
# - spurious feature: a pitfall against it (bullet count, repeated "!", keyword stuffing) -> heavier -> a
#   judged padding pitfall;
# - reference below policy: a length pitfall when the policy writes much longer than the reference, else a
#   criterion asking for the reference's key points -> the other one;
# - saturated criterion: a saturated bound check tightened to the bound the reference meets and part of the
#   rollouts miss; a judged one reworded stricter, grounded in the reference answer (its sentence closest to
#   the criterion) -> an induced exact criterion -> a harder criterion in its place -> drop it. Never a
#   reweight: a criterion every rollout passes adds the same to every reward of a group, so reweighting it is
#   an affine change the advantages do not see (the critic rejects it as "no effect on the learning signal");
# - dead criterion: a criterion the policy can partly meet (a first step towards the dead one);
# - spurious length (above): the limit is the prompt's own ("at most 20 words") when it states one;
# - judge disagreement: reword the criterion to be explicitly checkable -> reweight it down.

_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+\S", re.MULTILINE)


def _criterion(cid: str, text: str, weight: float, check: dict[str, Any] | None = None) -> Criterion:
    """A criterion to add: judged, or programmatic with ``check`` (validated like a dataset's)."""
    data: dict[str, Any] = {"id": cid, "text": text, "weight": weight}
    if check is not None:
        data.update(kind="programmatic", check=check)
    return Criterion.model_validate(data)


@dataclass(frozen=True)
class _Target:
    """The criterion a failure names (in the rubric, or only in the failure's evidence)."""

    id: str
    text: str
    weight: float | None
    programmatic: bool
    in_rubric: bool


def _target(e: ProposalEvidence) -> _Target | None:
    cid = e.ev.get("criterion_id") or e.ev.get("worst_criterion")
    crit = e.criterion(cid)
    if crit is not None:
        return _Target(crit.id, crit.text, crit.weight, crit.check is not None or crit.kind == "programmatic", True)
    if cid and e.ev.get("criterion_text"):
        return _Target(str(cid), str(e.ev["criterion_text"]), number(e.ev.get("weight")), False, False)
    return None


def _saturated(e: ProposalEvidence) -> list[Criterion]:
    """The judged positive criteria every rollout passes (mean verdict >= 0.9), else all judged ones, else all."""
    means = e.criterion_means()
    judged = [c for c in e.positive if c.kind == "judged"]
    return [c for c in judged if means.get(c.id, 0) >= 0.9] or judged or e.positive


def _stricter_text(texts: Sequence[str]) -> str:
    return clip_text(
        "Goes beyond the basics on every point, with specific, concrete detail (a generic or passing mention "
        "does not count): " + "; ".join(as_sentence(t) for t in texts[:3] if t) + ".",
        600,
    )


def _stricter(e: ProposalEvidence, heavier: bool = False) -> EditRubric | None:
    sat = _saturated(e)
    if not sat:
        return None
    weight = e.max_pos * (2 if heavier else 1)
    ids = ", ".join(c.id for c in sat)
    why = f"every rollout passes {ids}; a stricter judged criterion derived from them (weight {round_weight(weight)})"
    remove: list[str] = []
    if heavier:
        # in place of the saturated criteria, not beside them reweighted: a criterion every rollout passes only
        # shifts every reward alike (an affine change GRPO's advantages do not see)
        rubric_ids = {x.id for x in e.rubric}
        remove = [c.id for c in sat if c.id in rubric_ids]
        if remove:
            why += " in place of the saturated criteria, since the first one left the group flat"
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion("stricter", _stricter_text([c.text for c in sat]), round_weight(weight))],
        **({"remove": remove} if remove else {}),
        rationale=f"The rubric is too lax ({e.summary}): {why}.",
    )


def _prompt_word_limit(e: ProposalEvidence) -> int | None:
    """The word limit the prompt states, if any (and induced criteria are on)."""
    if not e.settings.induced_criteria:
        return None
    for check, _ in stated_requirements(e.prompt or ""):
        if check["type"] == "word_count":
            return int(check["max"])
    return None


def _length_limit(e: ProposalEvidence, factor: float) -> tuple[int, str] | None:
    stated = _prompt_word_limit(e)
    if stated is not None and factor >= 1.0:
        return stated, f"the limit the prompt states ({stated} words)"
    if e.ref_words:
        return math.ceil(factor * e.ref_words), f"{factor:g} × the reference answer's {e.ref_words} words"
    lengths = e.policy_words()
    if lengths:
        med = statistics.median(lengths)
        return math.ceil(med), f"the policy's median length ({med:g} words; the task has no reference answer)"
    return None


def _length_pitfall_edit(e: ProposalEvidence, limit: int, weight: float, why: str) -> EditRubric:
    text = f"The response is longer than {limit} words (padding instead of substance)."
    pitfall = _criterion("length_pitfall", text, -round_weight(weight), {"type": "word_count", "min": limit + 1})
    return EditRubric(task_id=e.task_id, add=[pitfall], rationale=why)


def _length_pitfall(e: ProposalEvidence, margin: float | None = None) -> EditRubric | None:
    got = _length_limit(e, margin or e.settings.length_margin)
    if got is None:
        return None
    limit, basis = got
    weight = 0.5 * e.sum_pos
    return _length_pitfall_edit(
        e,
        limit,
        weight,
        f"Reward rises with length (Spearman rho {e.ev.get('rho')} over {e.ev.get('n')} rollouts), so padding pays. A "
        f"word_count pitfall above {limit} words ({basis}) with weight -{round_weight(weight)} makes padding cost "
        "reward while an answer of the reference's length keeps its score.",
    )


def _previous_limit(e: ProposalEvidence) -> int | None:
    for a in reversed(e.attempts_with("edit_rubric")):
        for c in a.payload.get("add") or []:
            check = (c.get("check") if isinstance(c, dict) else None) or {}
            if check.get("type") == "word_count" and number(check.get("min")):
                return int(check["min"]) - 1
    return None


def _length_revise(e: ProposalEvidence) -> EditRubric | None:
    """After a reject: looser when the reference answer lost score, the policy's median when the pitfall never
    fired, else tighter at twice the weight."""
    prev = _previous_limit(e)
    reason = (e.trial.reason if e.trial else None) or ""
    measured = json.dumps(e.trial.measurements if e.trial else {}).lower()
    if prev is None:
        return _length_pitfall(e, 1.0)
    lengths = e.policy_words()
    if "reference" in reason.lower():
        limit = math.ceil(prev * 1.25)
        weight = 0.5 * e.sum_pos
        why = f"the trial says the reference answer lost score ({reason}); a looser limit ({prev} → {limit} words)"
    elif lengths and max(lengths) <= prev:
        limit = max(1, math.ceil(statistics.median(lengths)))
        weight = 0.5 * e.sum_pos
        why = f"no rollout was longer than {prev} words, so the pitfall never fired; the policy's median {limit}"
    else:
        base = e.ref_words or prev
        limit = min(prev - 1, math.ceil(1.0 * base)) if prev > 1 else prev
        weight = 1.0 * e.sum_pos
        why = f"the correlation did not fall enough ({reason or measured[:200]}); a tighter limit ({prev} → {limit})"
        why += f" at twice the weight (-{round_weight(weight)})"
    return _length_pitfall_edit(e, limit, weight, f"Revision after the critic's reject: {why}.")


def _padding_pitfall(e: ProposalEvidence) -> EditRubric:
    text = "The response pads its length with repetition, filler or restated points instead of adding substance."
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion("padding_pitfall", text, -round_weight(0.5 * e.sum_pos))],
        rationale="A length limit did not pass the critic; a judged pitfall against padding targets the hack "
        "itself rather than length.",
    )


def _feature_pitfall(e: ProposalEvidence, heavier: bool = False) -> EditRubric | None:
    feature = str(e.ev.get("feature") or "")
    weight = -round_weight((1.0 if heavier else 0.5) * e.sum_pos)
    if feature == "bullets":
        n = max(len(_BULLET.findall(e.reference or "")) + 2, 4)
        text = f"The response uses more than {n - 1} bullet lines (list padding)."
        crit = _criterion("bullet_pitfall", text, weight, {"type": "bullet_count", "min": n})
    elif feature == "exclamations":
        text = "The response uses more than one exclamation mark (hype instead of content)."
        crit = _criterion("exclamation_pitfall", text, weight, {"type": "regex", "pattern": "!.*!", "multiline": False})
    elif feature:
        word = e.ev.get("word")
        what = f" (e.g. '{word}')" if word else ""
        cid = f"{re.sub(r'[^a-z0-9_]+', '_', feature.lower())}_pitfall"
        crit = _criterion(
            cid,
            f"The response games the grader through {feature.replace('_', ' ')}{what} instead of substance.",
            weight,
        )
    else:
        return None
    return EditRubric(
        task_id=e.task_id,
        add=[crit],
        rationale=f"Reward rises with {feature} (rho {e.ev.get('rho')}, partial given length "
        f"{e.ev.get('partial_rho_given_length')}): a pitfall against it with weight {weight}.",
    )


def _reference_criterion(e: ProposalEvidence) -> EditRubric | None:
    if not e.reference:
        return None
    text = clip_text(f'Covers the key points of this reference answer: "{excerpt(e.reference, 60)}"', 900)
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion("reference_points", text, round_weight(e.max_pos))],
        rationale=f"The reference answer scores below the policy ({e.ev.get('reference_reward')} vs median "
        f"{e.ev.get('median_reward')}): a criterion for the reference's key points restores the order.",
    )


def _reference_length(e: ProposalEvidence) -> EditRubric | None:
    if not e.ref_words or not e.policy_words():
        return None
    return _length_pitfall(e)


def _writes_longer_than_reference(e: ProposalEvidence) -> bool:
    lengths = e.policy_words()
    return bool(e.ref_words and lengths and statistics.median(lengths) > 1.2 * e.ref_words)


def _reference_first(e: ProposalEvidence) -> EditRubric | None:
    return _reference_length(e) if _writes_longer_than_reference(e) else _reference_criterion(e)


def _reference_second(e: ProposalEvidence) -> EditRubric | None:
    return _reference_criterion(e) if _writes_longer_than_reference(e) else _reference_length(e)


def _reweight_down(e: ProposalEvidence) -> EditRubric | None:
    crit = _target(e)
    if crit is None or crit.weight is None or crit.weight <= 0:
        return None
    new = round_weight(max(0.1, crit.weight * 0.5))
    if new == crit.weight:
        return None
    return EditRubric(
        task_id=e.task_id,
        reweight={crit.id: new},
        rationale=f"Criterion {crit.id} no longer tells responses apart ({e.summary}); reweighting it "
        f"{crit.weight:g} → {new:g} gives the criteria that still discriminate more of the reward.",
    )


def _reword(e: ProposalEvidence, suffix: str, rationale: str) -> EditRubric | None:
    """Reword the failure's criterion by appending ``suffix``; ``rationale`` may use ``{id}``."""
    crit = _target(e)
    if crit is None or not crit.text:
        return None
    text = crit.text.rstrip(".")
    return EditRubric(
        task_id=e.task_id, reword={crit.id: clip_text(f"{text}{suffix}", 600)}, rationale=rationale.format(id=crit.id)
    )


def _reword_stricter(e: ProposalEvidence) -> EditRubric | None:
    return _reword(
        e,
        ", with specific, concrete detail (a passing mention does not count).",
        "Criterion {id} is judged loosely (every rollout passes it); reworded stricter.",
    )


def _reword_checkable(e: ProposalEvidence) -> EditRubric | None:
    return _reword(
        e,
        " (count it only when the response states it explicitly).",
        f"The judge disagrees with itself on criterion {{id}} (mean |Δ| {e.ev.get('mean_abs_delta')}); "
        "reworded to be explicitly checkable.",
    )


_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "as",
        "is",
        "are",
        "be",
        "it",
        "its",
        "this",
        "that",
        "response",
        "answer",
        "mentions",
        "explains",
        "describes",
        "gives",
        "states",
        "includes",
    ]
)


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in words(text) if len(w) > 2 and w.lower() not in _STOP}


def _grounding(e: ProposalEvidence, text: str) -> str | None:
    """The reference answer's sentence that shares the most content words with a criterion's ``text``."""
    if not e.reference:
        return None
    want = _content_words(text)
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", e.reference) if len(s.split()) >= 4]
    if not sentences:
        return None
    return clip_text(max(sentences, key=lambda s: len(want & _content_words(s))), 300)


def _reword_grounded(e: ProposalEvidence) -> EditRubric | None:
    """A saturated criterion, reworded stricter and grounded in what the reference answer actually says."""
    crit = _target(e)
    if crit is None or not crit.text or crit.programmatic:
        return None  # a programmatic check's verdict does not depend on its wording
    quote = _grounding(e, crit.text)
    if quote is None:
        return _reword_stricter(e)
    text = crit.text.rstrip(".")
    return EditRubric(
        task_id=e.task_id,
        reword={crit.id: clip_text(f'{text}, as specifically as the reference answer does: "{quote}"', 600)},
        rationale=f"Every rollout passes criterion {crit.id} ({e.summary}), so it adds the same to every reward and "
        "nothing to the advantage; reworded stricter, grounded in the reference answer's own sentence, so that "
        "only rollouts that say it as specifically pass.",
    )


def _replace_harder(e: ProposalEvidence) -> EditRubric | None:
    """A harder criterion in the saturated one's place, at its weight."""
    crit = _target(e)
    if crit is None or not crit.text or crit.weight is None or crit.weight <= 0:
        return None
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion(f"{crit.id}_strict", _stricter_text([crit.text]), round_weight(crit.weight))],
        **({"remove": [crit.id]} if crit.in_rubric else {}),
        rationale=f"Criterion {crit.id} is saturated and a stricter wording did not pass the critic: a harder "
        f"criterion in its place (weight {crit.weight:g}), so this part of the rubric tells rollouts apart again.",
    )


def _drop_saturated(e: ProposalEvidence) -> EditRubric | None:
    """Drop the saturated criterion: what it adds to a group's rewards beyond a constant is judge noise."""
    crit = _target(e)
    if crit is None or not crit.in_rubric:
        return None
    if not [c for c in e.positive if c.id != crit.id]:
        return None  # the rubric needs a positive criterion left
    return EditRubric(
        task_id=e.task_id,
        remove=[crit.id],
        rationale=f"Criterion {crit.id} stays saturated and no stricter version passed the critic: what it adds to "
        "a group's rewards beyond a constant is the judge's noise, so drop it.",
    )


def _partial_criterion(e: ProposalEvidence) -> EditRubric | None:
    """A dead criterion: add one the policy can partly meet now, a first step towards it."""
    crit = _target(e)
    if crit is None or not crit.text or crit.weight is None or crit.weight <= 0:
        return None
    text = f"Makes a clear start on this, even if incomplete: {as_sentence(clip_text(crit.text, 300))}."
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion(f"{crit.id}_partial", text, round_weight(max(0.1, 0.5 * crit.weight)))],
        rationale=f"No rollout meets criterion {crit.id} (recent means {e.ev.get('recent_means')}), so it adds "
        "nothing to the advantage; a criterion the policy can partly meet now gives the group a spread towards it.",
    )


def _induced_candidates(e: ProposalEvidence) -> list[InducedCheck]:
    """The requirements the prompt states that the rubric does not check and the reference answer passes, those
    that split the task's own rollouts first (a split of one group is not needed: the critic measures the
    candidate on the pooled groups of every task that states the requirement)."""
    if not e.settings.induced_criteria:
        return []
    checked = {_key(c) for c in e.rubric}
    rollouts = e.completions()
    found: list[InducedCheck] = []
    for check, text in stated_requirements(e.prompt or ""):
        if requirement_key(check) in checked or any(requirement_key(f.check) == requirement_key(check) for f in found):
            continue
        try:
            if e.reference is not None and not check_passes(check, e.reference):
                continue
            passes = sum(check_passes(check, r) for r in rollouts)
        except ValueError:
            continue
        found.append(InducedCheck(check, text, "prompt", passes, len(rollouts)))
    return sorted(found, key=lambda c: -c.balance)


def _induced(e: ProposalEvidence, rank: int = 0) -> EditRubric | None:
    """An exact criterion the prompt states (or a bound the reference meets) that splits the rollouts."""
    found = _induced_candidates(e)
    if len(found) <= rank:
        return None
    c = found[rank]
    cid = f"induced_{c.check['type']}"
    if any(x.id == cid for x in e.rubric):
        cid = f"{cid}_{len(e.rubric)}"
    what = "the prompt asks for it" if c.source == "prompt" else "the reference answer meets it"
    return EditRubric(
        task_id=e.task_id,
        add=[_criterion(cid, c.text, round_weight(e.max_pos), c.check)],
        rationale=f"The rubric does not check what the prompt asks ({e.summary}): an exact criterion, {c.text!r}: "
        f"{what}, the reference answer passes it and {c.passes} of {c.total} rollouts do, so it gives the group "
        "a spread the judge cannot blur.",
    )


def _tightened(e: ProposalEvidence) -> EditRubric | None:
    """A saturated bound check, tightened to the bound the reference meets and part of the rollouts miss."""
    crit = e.criterion(e.ev.get("criterion_id"))
    if not e.settings.induced_criteria or crit is None or crit.check is None or crit.weight <= 0:
        return None
    old = crit.check.model_dump(mode="json", exclude_none=True)
    new = tightened_bound(old, e.reference, e.completions())
    if new is None:
        return None
    text = f"{crit.text.rstrip('.')} (at most {new['max']}, the bound the reference answer meets)"
    return EditRubric(
        task_id=e.task_id,
        remove=[crit.id],
        add=[_criterion(f"{crit.id}_tight", clip_text(text, 600), round_weight(crit.weight), new)],
        rationale=f"Every rollout passes the bound of criterion {crit.id} ({old.get('max')}); tightened to "
        f"{new['max']}, which the reference answer meets and part of the rollouts miss.",
    )


def _requirement(e: ProposalEvidence) -> EditRubric | None:
    """The requirement the rubric audit found the prompt states and the rubric does not check (the failure's
    ``requirement_key``), as this task's own exact criterion; the trainer widens it to every task that states it."""
    key = e.ev.get("requirement_key")
    for check, text in stated_requirements(e.prompt or ""):
        if requirement_key(check) != key:
            continue
        if any(_key(c) == key for c in e.rubric):
            return None  # checked already (a repair landed since the audit)
        cid = f"req_{check['type']}"
        if any(x.id == cid for x in e.rubric):
            cid = f"{cid}_{len(e.rubric)}"
        return EditRubric(
            task_id=e.task_id,
            add=[_criterion(cid, text, round_weight(e.max_pos), check)],
            rationale=f"The prompt states a requirement its rubric does not check ({e.summary}): {text!r}, exact, "
            "weighted like the heaviest criterion, for every task whose prompt states it.",
        )
    return None


def _saturated_first(e: ProposalEvidence) -> EditRubric | None:
    crit = _target(e)
    return _tightened(e) if crit is not None and crit.programmatic else _reword_grounded(e)


_REMEDIES: dict[str, Callable[[ProposalEvidence], EditRubric | None]] = {
    "requirement": _requirement,
    "induced": _induced,
    "induced_next": lambda e: _induced(e, rank=1),
    "tightened_or_reworded": _saturated_first,
    "stricter": _stricter,
    "stricter_more": lambda e: _stricter(e, heavier=True),
    "length_pitfall": _length_pitfall,
    "length_revise": _length_revise,
    "padding_pitfall": _padding_pitfall,
    "feature_pitfall": _feature_pitfall,
    "feature_heavier": lambda e: _feature_pitfall(e, heavier=True),
    "reference_first": _reference_first,
    "reference_second": _reference_second,
    "reword_grounded": _reword_grounded,
    "replace_harder": _replace_harder,
    "drop": _drop_saturated,
    "partial": _partial_criterion,
    "reword_checkable": _reword_checkable,
    "reweight_down": _reweight_down,
}
_PLAYBOOK: dict[str, tuple[str, ...]] = {
    "unchecked_requirement": ("requirement",),
    "non_discriminative_high": ("induced", "induced_next", "stricter", "stricter_more"),
    "spurious_length": ("length_pitfall", "length_revise", "padding_pitfall"),
    "spurious_feature": ("feature_pitfall", "feature_heavier", "padding_pitfall"),
    "reference_below_policy": ("reference_first", "reference_second", "length_revise"),
    "criterion_saturated": ("tightened_or_reworded", "induced", "replace_harder", "drop"),
    "criterion_dead": ("partial",),
    "judge_disagreement": ("reword_checkable", "reweight_down"),
}
"""The rubric's remedies for each failure kind, best first (any other kind: a stricter criterion)."""
