"""Rubric criteria: a versioned rubric per task; version 0 is the dataset's and never changes.

Edits add a criterion (a stricter one, or a pitfall with a negative weight against a hack), remove,
reword or reweight one. Each applied edit makes a new version of that task's rubric; the reward
always uses the current version, evaluation always uses version 0. ``preview`` builds a candidate
rubric without applying it, which is what a critic re-grades cached rollouts with.

This module holds the interface's state (:class:`RubricCriteria`: the versions, apply, preview, trial); its typed
update is :mod:`harnessrl.interfaces.rubric_edit`, the cover of a repair (the other tasks an edit reaches)
:mod:`harnessrl.interfaces.rubric_cover`, its remedies :mod:`harnessrl.interfaces.rubric_remedies`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from harnessrl.critic.signal import CHECK_SPLIT_SHARE, HINT_MET_RATE, REFERENCE_RANK, SIGNAL_SHARE, SUSPECT_EFFECT
from harnessrl.data.schema import Criterion, Task, prompt_text
from harnessrl.interfaces.base import (
    AppliedUpdate,
    HarnessContext,
    Interface,
    InterfaceUpdate,
    Row,
    Suggestion,
    failure_metric,
)
from harnessrl.interfaces.evidence import ProposalEvidence, as_sentence
from harnessrl.interfaces.guidance import guided_count, with_hint
from harnessrl.interfaces.induction import stated_keys
from harnessrl.interfaces.rubric_cover import widen_edit
from harnessrl.interfaces.rubric_edit import (
    MAX_GUIDE_FRACTION,
    MAX_RUBRIC_CRITERIA,
    EditRubric,
    criterion_requirement,
)
from harnessrl.interfaces.rubric_remedies import suggest_edits
from harnessrl.records.evidence import CriterionStreakEvidence
from harnessrl.records.failures import Failure
from harnessrl.records.measurements import RubricFade

if TYPE_CHECKING:
    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = ["RubricCriteria", "RubricVersion", "criteria_view"]


class RubricVersion(BaseModel):
    """One version of a task's rubric: its criteria, from which step, and the criteria it states as a hint to the
    first ``guide_fraction`` of each group (``guided``: an edit with ``guide_fraction`` added them; ids no longer
    among the criteria are not stated)."""

    version: int
    step: int
    criteria: list[Criterion]
    candidate_id: str | None = None
    guided: list[str] = Field(default_factory=list)
    guide_fraction: float = Field(default=0.0, ge=0.0, le=MAX_GUIDE_FRACTION)

    def stated(self) -> list[Criterion]:
        """The criteria its hint states to the guided members: the guided ones still in the rubric (positive), while
        any share of the group is guided."""
        if self.guide_fraction <= 0:
            return []
        return [c for c in self.criteria if c.id in self.guided and c.weight > 0]

    def hint(self) -> str | None:
        """The hint its guided members see: the criteria it states, as one sentence."""
        texts = [as_sentence(c.text) for c in self.stated()]
        return f"Make sure your answer meets this: {'; '.join(texts)}." if texts else None


class RubricCriteria(Interface):
    """The rubric-criteria interface. With no update applied every task uses version 0 (plain GRPO).

    It owns the rubric each rollout is graded with (:meth:`current`, :attr:`versions`)."""

    name = "rubric_criteria"
    update_type = EditRubric
    builder_tool = "edit_rubric"
    answers = ("criterion_dead", "scaffold_outgrown", "non_discriminative_low")
    hint_for = (
        "unchecked_requirement",
        "reference_fails_criterion",
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
        return self.criteria_at(task_id, 0)

    def criteria_at(self, task_id: str, version: int) -> list[Criterion]:
        """The criteria of ``task_id``'s rubric at ``version`` (what a group recorded at that version was graded
        with); the one accessor the trainer, the reward, the detectors and the monitor read a rubric by."""
        return self.versions[task_id][version].criteria

    def rubric_for(self, update: EditRubric, task_id: str) -> list[Criterion]:
        """The rubric ``update`` would make for ``task_id`` (its own task, or one it covers), without applying it;
        raises ValueError when it is invalid."""
        if task_id != update.task_id and not any(c.task_id == task_id for c in update.cover):
            raise ValueError(f"the edit does not cover task {task_id!r}")
        if update.fades():
            return self._faded(update, task_id)
        if task_id == update.task_id:
            return self.rubric_with(update)
        covered = next(c for c in update.cover if c.task_id == task_id)
        return self.rubric_with(EditRubric(task_id=task_id, add=covered.add, remove=covered.remove))

    def _faded(self, update: EditRubric, task_id: str) -> list[Criterion]:
        """``task_id``'s rubric under a fade of its hint (the same criteria); raises ValueError when it states no hint
        or the fade would not lower its share."""
        now = self.current(task_id)
        if not now.stated():
            raise ValueError(f"task {task_id!r}'s rubric states no hint to fade")
        if (update.fade_to or 0.0) >= now.guide_fraction:
            raise ValueError(
                f"fade_to {update.fade_to:g} does not lower the share of task {task_id!r}'s group that sees the "
                f"rubric's hint ({now.guide_fraction:g} now)"
            )
        return list(now.criteria)

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
        made = [self._next_version(update, tid, step, candidate_id) for tid in update.task_ids()]
        for tid, new in zip(update.task_ids(), made, strict=True):
            self.versions[tid].append(new)
        self._version += 1
        self._history.append(
            AppliedUpdate(version=self._version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return self.current(update.task_id).version

    def _added(self, task_id: str, criteria: Sequence[Criterion]) -> list[Criterion]:
        """The criteria of ``criteria`` (a rubric an edit would make for ``task_id``) its current rubric lacks."""
        old = {c.id for c in self.current(task_id).criteria}
        return [c for c in criteria if c.id not in old]

    def _next_version(
        self, update: EditRubric, task_id: str, step: int = 0, candidate_id: str | None = None
    ) -> RubricVersion:
        """The version ``update`` makes for ``task_id``: its criteria, and the criteria it states as a hint, and to
        what share of a group (those the current version states, still in the rubric; with the update's
        ``guide_fraction``, the positive criteria it adds there, at that share)."""
        now = self.current(task_id)
        criteria = self.rubric_for(update, task_id)
        ids = {c.id for c in criteria}
        guided = [cid for cid in now.guided if cid in ids]
        fraction = now.guide_fraction if guided else 0.0
        if update.fade_to is not None:  # the same criteria, stated to fewer members or none
            fraction = update.fade_to
            guided = guided if fraction > 0 else []
        elif update.guide_fraction > 0:
            guided += [c.id for c in self._added(task_id, criteria) if c.weight > 0 and c.id not in guided]
            fraction = update.guide_fraction
        return RubricVersion(
            version=now.version + 1,
            step=step,
            criteria=criteria,
            candidate_id=candidate_id,
            guided=guided,
            guide_fraction=fraction,
        )

    def _version_with(self, task_id: str, update: EditRubric | None) -> RubricVersion:
        """``task_id``'s current version, or the one ``update`` would make (a preview)."""
        if update is None or task_id not in update.task_ids():
            return self.current(task_id)
        return self._next_version(update, task_id)

    def hint(self, task_id: str, update: EditRubric | None = None) -> str | None:
        """The hint the guided members of ``task_id``'s groups see now (None: none), or with ``update`` applied."""
        return self._version_with(task_id, update).hint()

    def shape(self, task: Task, member: int, group_size: int, row: Row, overlay: EditRubric | None = None) -> Row:
        """The first members of the group see the criteria the rubric states as a hint (an edit with
        ``guide_fraction``: a requirement no rollout met when it was added); the rest the plain prompt."""
        version = self._version_with(task.id, overlay)
        if member >= guided_count(group_size, version.guide_fraction) or (hint := version.hint()) is None:
            return row
        return Row(with_hint(row.messages, hint), True, row.generation)

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
        after = self.rubric_for(update, update.task_id)
        old = {c.id: c for c in current.criteria}
        new = {c.id: c for c in after}
        out: dict[str, Any] = {
            "rubric_version_now": current.version,
            "added": [i for i in new if i not in old],
            "removed": [i for i in old if i not in new],
            "changed": [i for i in new if i in old and new[i] != old[i]],
            "rubric_after": criteria_view(after),
        }
        if update.guide_fraction > 0:
            out["hint"] = {"text": self.hint(update.task_id, update), "fraction": update.guide_fraction}
        if update.fades():
            out["hint"] = {"text": current.hint(), "fraction": current.guide_fraction, "fades_to": update.fade_to}
        if update.cover:
            for c in update.cover:
                self.rubric_for(update, c.task_id)  # ValueError: an instance that does not apply
            out["covers"] = [
                {
                    "task_id": c.task_id,
                    "added": [x.text for x in c.add],
                    **({"removed": list(c.remove)} if c.remove else {}),
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
        states, every task whose prompt states requirements of the same kinds (a check's ``requirement_key()``) that
        its rubric does not check yet, each with its own instance (its own numbers and phrases), kept only
        where its reference answer passes it; else, for a remedy with a group instance (a length or padding
        pitfall), the tasks of the same group of the data (:func:`~harnessrl.data.schema.task_group`). Any
        other edit is the task's own. What an evolver wrote in ``cover`` or ``signature`` is not trusted: the cover
        is computed afresh, by :func:`~harnessrl.interfaces.rubric_cover.widen_edit`."""
        return widen_edit(self, update)

    # ------------------------------------------------------------------ how the critic measures a candidate
    def metric(self, update: EditRubric, failure: Failure | None) -> str:
        """From the failure; for reference_below_policy, the reference answer's rank among the rollouts. An edit
        that only adds exact checks, for a lax rubric, a saturated criterion or a requirement the rubric does not
        check, is measured by the share of groups the checks would split (:mod:`harnessrl.critic.power`)."""
        if update.fades():
            return HINT_MET_RATE  # the rate at which the unguided members meet the stated checks alone
        if update.guide_fraction > 0:
            return SIGNAL_SHARE  # measured on probation: the share of the guided groups that give signal
        adds_checks = bool(update.add) and all(c.check is not None for c in update.add)
        adds_only = not (update.remove or update.reword or update.reweight)
        if adds_checks and adds_only and failure is not None and failure.kind in _SPLIT_KINDS:
            return CHECK_SPLIT_SHARE
        if self._removes_suspects(update):
            return SUSPECT_EFFECT  # what is wrong is established by the reference; measured: does it change anything
        return failure_metric(failure, reference_rank=REFERENCE_RANK)

    def _removes_suspects(self, update: EditRubric) -> bool:
        """Whether ``update`` only removes exact criteria each changed task's own reference answer fails (positive) or
        commits (pitfalls), on every task it changes."""
        if update.add or update.reword or update.reweight or not update.remove or update.task_id not in self.tasks:
            return False
        parts = [(update.task_id, update.remove), *((c.task_id, c.remove) for c in update.cover)]
        for tid, removed in parts:
            task = self.tasks.get(tid)
            crits = {c.id: c for c in self.current(tid).criteria} if task is not None else {}
            if task is None or not task.reference_answer or not removed:
                return False
            for cid in removed:
                c = crits.get(cid)
                if c is None or c.check is None or (c.check.evaluate(task.reference_answer) < 1) != (c.weight > 0):
                    return False
        return True

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
        if update.fades():
            return self._fade_trial(update, tasks, trial)
        if update.guide_fraction > 0:
            return self._guided_trial(update, tasks, candidates, trial)
        cid = trial.failure.evidence.narrow(CriterionStreakEvidence).criterion_id if trial.failure is not None else None
        touched = ({str(cid)} if cid else set()) | set(update.reword) | set(update.reweight)
        parts = []
        for task, candidate in zip(tasks, candidates, strict=True):
            current = self.current(task.id)
            own = update if task.id == update.task_id else next(c for c in update.cover if c.task_id == task.id)
            added = {c.id for c in own.add}
            base_ids = touched | set(update.remove) if task.id == update.task_id else set(own.remove)
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
        adds_only = not (update.remove or update.reword or update.reweight)  # its revert removes what it adds
        return trial.regrade(parts, on_probation=adds_only)

    def _guided_trial(
        self, update: EditRubric, tasks: Sequence[Task], candidates: Sequence[Sequence[Criterion]], trial: Trial
    ) -> Measured:
        """An edit that states its checks as a hint (``guide_fraction``): no cached rollout meets what it adds, so
        re-grading them would show no split; it is committed on probation and its trial is the guided groups of its
        tasks that follow (:meth:`Trial.probation`), the rubric and the hint measured as one. Before that, each
        task's reference answer must pass the exact checks added to it (a hint towards what a good answer does not
        do is refused here)."""
        failing, checks = [], {}
        for task, candidate in zip(tasks, candidates, strict=True):
            added = [c for c in self._added(task.id, candidate) if c.check is not None and c.weight > 0]
            checks[task.id] = [c.id for c in added]
            ref = task.reference_answer
            if ref is not None and any(c.check.evaluate(ref) < 1 for c in added):  # type: ignore[union-attr]
                failing.append(task.id)
        trial.measurements.reference_fails_added_checks = failing
        if failing:
            trial.reject(
                f"the reference answer of task(s) {failing} fails the checks the edit would state as a hint: a hint "
                "must point towards what a good answer does",
                kind="reference_guard",
            )
        checks = {t: ids for t, ids in checks.items() if ids}
        return trial.probation(
            tasks, describe=f"{self.describe(update)} with the added criteria as a hint", checks=checks or None
        )

    def _fade_trial(self, update: EditRubric, tasks: Sequence[Task], trial: Trial) -> Measured:
        """The fade of a rubric's hint: the cached rollouts of every task it covers, their unguided members only,
        graded by the exact checks the hint states, pooled over tasks and looks (``hint_met_rate``): it fades once
        the rate they meet the checks at alone is shown at or above the metric's floor. Nothing generated."""
        parts = []
        for task in tasks:
            current = self.current(task.id)
            stated = current.stated()
            if any(c.check is None for c in stated):
                trial.reject(f"task {task.id!r}'s hint states a judged criterion: only a hint of exact checks fades")
            parts.append(trial.part(task, current, current.criteria, ([], []), added=stated))
        trial.measurements.fade = RubricFade(
            from_=self.current(update.task_id).guide_fraction,
            to=update.fade_to,
            checks={p.task.id: [c.id for c in p.added] for p in parts},
        )
        return trial.regrade(parts)

    def reverting(self, update: EditRubric) -> list[InterfaceUpdate]:
        """Per task ``update`` changes, an edit that removes the criteria it would add there (and with them their
        hint): a probation's revert. Only an edit that adds and changes nothing else can be put on probation.

        A requirement the task's prompt states keeps its check (docs/design.md §4, "A stated requirement keeps its
        check"): a policy that cannot meet it yet does not make it wrong, so its revert only takes the hint away
        (``fade_to`` 0). A check is removed only with evidence that it is wrong: the task's own reference answer fails
        it, or the prompt does not state it."""
        if update.remove or update.reword or update.reweight:
            raise ValueError("only an edit that adds criteria can be put on probation (its revert removes them)")
        out: list[InterfaceUpdate] = []
        back = f"probation ended: back to the rubric before {update.remedy or 'the edit'}"
        for tid in update.task_ids():
            added = self._added(tid, self.rubric_for(update, tid))
            kept = [c for c in added if _stated_and_met(self.tasks[tid], c)]
            removed = [c.id for c in added if c not in kept]
            if removed:
                out.append(EditRubric(task_id=tid, remove=removed, remedy="revert", rationale=back))
            if kept and update.guide_fraction > 0:
                out.append(
                    EditRubric(
                        task_id=tid,
                        fade_to=0.0,
                        remedy="revert",
                        rationale=f"{back}, except the check of what the prompt states "
                        f"({', '.join(c.id for c in kept)}): it stays, and only its hint goes",
                    )
                )
        return out

    # ------------------------------------------------------------------ the evolver and the report
    def summary(self) -> dict[str, Any]:
        edited = {tid: vs[-1].version for tid, vs in self.versions.items() if len(vs) > 1}
        return {**super().summary(), "edited_tasks": dict(sorted(edited.items()))}

    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        current = self.current(task.id)
        hint = current.hint()
        return {
            "rubric_version": current.version,
            "rubric": criteria_view(current.criteria),
            **({"rubric_hint": {"text": hint, "fraction": current.guide_fraction}} if hint else {}),
        }

    # ------------------------------------------------------------------ its remedies
    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """Its playbook for the failure's kind, best first (``rubric_remedies.PLAYBOOK``): a stricter criterion for a
        lax rubric, a length or feature pitfall against a spurious reward, the reference's key points or
        length when the reference scores below the policy, a saturated criterion reworded stricter (grounded
        in the reference answer), replaced or dropped (never reweighted: that is an affine change of a group's
        rewards GRPO's advantages do not see), a partial criterion towards a dead one, a checkable wording for
        one the judge disagrees with itself on. The remedies live in :mod:`harnessrl.interfaces.rubric_remedies`."""
        return suggest_edits(evidence)


def _stated_and_met(task: Task, criterion: Criterion) -> bool:
    """Whether ``criterion`` is an exact check of a requirement ``task``'s prompt states that its reference answer
    (when it has one) meets: a check a probation may not take away."""
    key = criterion_requirement(criterion)
    if key is None or criterion.weight <= 0:
        return False
    if key not in stated_keys(prompt_text(task.prompt)):
        return False
    return task.reference_answer is None or criterion.check.evaluate(task.reference_answer) >= 1


def criteria_view(criteria: Sequence[Criterion]) -> list[dict[str, Any]]:
    """Criteria as plain JSON objects (id, text, weight, kind, check) for the evolver's tools."""
    return [c.model_dump(mode="json", exclude_none=True) for c in criteria]


_SPLIT_KINDS = frozenset({"unchecked_requirement", "non_discriminative_high", "criterion_saturated"})
"""Failure kinds whose added exact checks are judged by the share of groups they split."""
