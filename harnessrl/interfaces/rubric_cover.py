"""The cover of a rubric repair: the other training tasks an edit reaches, each with its own instance.

:meth:`RubricCriteria.widen <harnessrl.interfaces.rubric.RubricCriteria.widen>` computes it here, afresh
(:func:`widen_edit`; docs/design.md §4): an edit that adds exact checks of requirements its task's prompt states
reaches every task whose prompt states requirements of the same kinds (a check's ``requirement_key()``) that its
rubric does not check yet, each with its own numbers and phrases, where its own reference answer passes it (signature
``requirement``); a remedy with a group instance (a length or padding pitfall, a reference term) reaches the tasks
of the same group of the data (``group``, :data:`_GROUP_INSTANCES`); a removal of criteria the reference fails
reaches every task whose rubric has an exact criterion of the same requirement its own reference fails too
(``reference``); a fade of a rubric's hint reaches every task whose hint states the same requirements (``hint``).
It reads the rubric through :class:`CoverSource` (the tasks, and each one's current version).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol

from harnessrl.data.checks import WordCount
from harnessrl.data.schema import Criterion, Task, prompt_text, task_group
from harnessrl.interfaces.base import Signature
from harnessrl.interfaces.induction import reference_terms, stated_keys, stated_requirements
from harnessrl.interfaces.rubric_edit import CoveredEdit, EditRubric, criterion_requirement, new_criterion

__all__ = ["CoverSource", "widen_edit"]


class VersionView(Protocol):
    """What the cover reads of a rubric version (:class:`~harnessrl.interfaces.rubric.RubricVersion`)."""

    criteria: list[Criterion]
    guide_fraction: float

    def stated(self) -> list[Criterion]: ...


class CoverSource(Protocol):
    """What the cover reads of the rubric interface (:class:`~harnessrl.interfaces.rubric.RubricCriteria`): the
    training tasks by id, and each one's current rubric version."""

    @property
    def tasks(self) -> Mapping[str, Task]: ...

    def current(self, task_id: str) -> VersionView: ...


def widen_edit(rubric: CoverSource, update: EditRubric) -> EditRubric:
    """``update`` with its cover and signature computed afresh (what an evolver wrote there is not trusted): see
    :meth:`RubricCriteria.widen <harnessrl.interfaces.rubric.RubricCriteria.widen>`."""
    update = update.model_copy(update={"cover": [], "signature": None})
    if update.fades():
        return _hint_cover(rubric, update) or update
    if update.remedy == "drop_suspect" and update.task_id in rubric.tasks:
        return _suspect_cover(rubric, update) or update
    if not update.add or update.remove or update.reword or update.reweight or update.task_id not in rubric.tasks:
        return update
    widened = _requirement_cover(rubric, update) or _group_cover(rubric, update)
    return widened or update


def _hint_cover(rubric: CoverSource, update: EditRubric) -> EditRubric | None:
    """A fade of the rubric's hint, extended to every task whose rubric states a hint of the same requirements
    (the widened edit that added it) to a larger share of its group than the fade leaves."""
    if update.task_id not in rubric.tasks:
        return None
    keys = _stated_keys(rubric.current(update.task_id))
    if not keys:
        return None
    cover = [
        CoveredEdit(task_id=tid)
        for tid in sorted(rubric.tasks)
        if tid != update.task_id
        and _stated_keys(now := rubric.current(tid)) == keys
        and now.guide_fraction > (update.fade_to or 0.0)
    ]
    if not cover:
        return None
    sig = Signature(kind="hint", key="+".join(keys), tasks=[update.task_id, *(c.task_id for c in cover)])
    return update.model_copy(update={"cover": cover, "signature": sig})


def _suspect_cover(rubric: CoverSource, update: EditRubric) -> EditRubric | None:
    """A removal of criteria the task's own reference fails (``drop_suspect``), extended to every training task
    whose current rubric has an exact criterion of the same requirement (a check's ``requirement_key()``) that its own
    reference answer fails too (pitfalls: commits), each removing its own. Only exact criteria reach other tasks:
    a judged verdict on one text is the judge's, and another task's reference was not graded by this edit."""
    if update.add or update.reword or update.reweight or not update.remove:
        return None
    crits = {c.id: c for c in rubric.current(update.task_id).criteria}
    keys = {
        (k, crits[cid].weight > 0) for cid in update.remove if cid in crits and (k := criterion_requirement(crits[cid]))
    }
    if not keys:
        return None
    cover: list[CoveredEdit] = []
    for task in sorted(rubric.tasks.values(), key=lambda t: t.id):
        if task.id == update.task_id or not task.reference_answer:
            continue
        own = rubric.current(task.id).criteria
        remove = [
            c.id
            for c in own
            if (criterion_requirement(c), c.weight > 0) in keys
            and c.check is not None
            and (c.check.evaluate(task.reference_answer) < 1) == (c.weight > 0)
        ]
        if remove and any(c.weight > 0 and c.id not in remove for c in own):
            cover.append(CoveredEdit(task_id=task.id, remove=remove))
    if not cover:
        return None
    key = "+".join(sorted(f"{'fails' if pos else 'commits'}:{k}" for k, pos in keys))
    sig = Signature(kind="reference", key=key, tasks=[update.task_id, *(c.task_id for c in cover)])
    return update.model_copy(update={"cover": cover, "signature": sig})


def _requirement_cover(rubric: CoverSource, update: EditRubric) -> EditRubric | None:
    source = rubric.tasks[update.task_id]
    added = [(c, criterion_requirement(c)) for c in update.add]
    if any(k is None for _, k in added):
        return None
    stated = stated_keys(prompt_text(source.prompt))
    if not all(k in stated for _, k in added):
        return None
    cover: list[CoveredEdit] = []
    for task in sorted(rubric.tasks.values(), key=lambda t: t.id):
        if task.id == source.id:
            continue
        own = {ch.requirement_key(): (ch, text) for ch, text in reversed(stated_requirements(prompt_text(task.prompt)))}
        checked = {k for c in rubric.current(task.id).criteria if (k := criterion_requirement(c)) is not None}
        add = []
        for crit, key in added:
            if key in checked or key not in own:
                continue
            check, text = own[key]
            if task.reference_answer is not None and not check.passes(task.reference_answer):
                continue
            add.append(new_criterion(crit.id, text, crit.weight, check))
        if add:
            cover.append(CoveredEdit(task_id=task.id, add=add))
    key = "+".join(sorted({str(k) for _, k in added}))
    sig = Signature(kind="requirement", key=key, tasks=[source.id, *(c.task_id for c in cover)])
    return update.model_copy(update={"cover": cover, "signature": sig})


def _group_cover(rubric: CoverSource, update: EditRubric) -> EditRubric | None:
    build = _GROUP_INSTANCES.get(update.remedy or "")
    if build is None:
        return None
    source = rubric.tasks[update.task_id]
    group = task_group(source)
    cover: list[CoveredEdit] = []
    for task in sorted(rubric.tasks.values(), key=lambda t: t.id):
        if task.id == source.id or task_group(task) != group:
            continue
        add = [x for c in update.add if (x := build(c, source, task)) is not None]
        if len(add) == len(update.add):
            cover.append(CoveredEdit(task_id=task.id, add=add))
    if not cover:
        return None
    sig = Signature(kind="group", key=group, tasks=[source.id, *(c.task_id for c in cover)])
    return update.model_copy(update={"cover": cover, "signature": sig})


def _stated_keys(version: VersionView) -> list[str]:
    """The requirements (exact checks) a rubric version's hint states, sorted; [] when it states none or any of them is
    a judged criterion."""
    keys = [criterion_requirement(c) for c in version.stated()]
    return [] if not keys or None in keys else sorted({str(k) for k in keys})


def _length_instance(crit: Criterion, source: Task, task: Task) -> Criterion | None:
    """A length pitfall (``word_count`` with a ``min``) for ``task``: the limit its prompt states, else the source's
    limit scaled by the two reference answers' lengths."""
    check = crit.check
    if not isinstance(check, WordCount) or check.min is None:
        return None
    stated = [c.max for c, _ in stated_requirements(prompt_text(task.prompt)) if isinstance(c, WordCount)]
    if stated and stated[0] is not None:
        limit = stated[0]
    else:
        src_words, own_words = len((source.reference_answer or "").split()), len((task.reference_answer or "").split())
        if not src_words or not own_words:
            return None
        limit = math.ceil((check.min - 1) * own_words / src_words)
    text = f"The response is longer than {limit} words (padding instead of substance)."
    return new_criterion(crit.id, text, crit.weight, WordCount(min=limit + 1))


def _same_instance(crit: Criterion, source: Task, task: Task) -> Criterion | None:
    """A criterion that says nothing of its task (a padding or feature pitfall) is its own instance everywhere."""
    return crit


def _reference_term_instance(crit: Criterion, source: Task, task: Task) -> Criterion | None:
    """The ``k``-th key term of ``task``'s own reference answer (``reference_term_k``), the longest first: another
    task of the group gets its own reference's term (it has no rollouts read for this repair)."""
    if not task.reference_answer or not crit.id.startswith("reference_term_"):
        return None
    try:
        k = int(crit.id.rsplit("_", 1)[1]) - 1
    except ValueError:
        return None
    existing = [c.check for c in task.rubric if c.check is not None]
    found = reference_terms(prompt_text(task.prompt), task.reference_answer, (), existing)
    if k >= len(found):
        return None
    return new_criterion(crit.id, found[k].text, crit.weight, found[k].check)


_GROUP_INSTANCES: dict[str, Callable[[Criterion, Task, Task], Criterion | None]] = {
    "length_pitfall": _length_instance,
    "length_revise": _length_instance,
    "padding_pitfall": _same_instance,
    "feature_pitfall": _same_instance,
    "feature_heavier": _same_instance,
    "reference_term": _reference_term_instance,
    "reference_term_next": _reference_term_instance,
}
"""The remedies whose repair reaches the task's group of the data, each with how it is built for another task."""
