"""Repairs carried across a family: a repair that worked on one task is offered to the tasks that share its failure.

A failure found on one task is often the failure of its whole family (the same lax rubric, the same length-paying
criterion on every sibling), but the detectors see a sibling's failure only when that sibling is drawn and its
group shows it, and a task is drawn a few times a run. So once an evolution point commits a rubric or guidance
update for a detected failure, each sibling of the task (the training tasks with the same ``metadata.family``;
the same domain when the tasks carry no family) is queued with a *carried* failure: the same kind, with the
repair in its evidence (``carried_from``, ``remedy``: the remedy's tag when it has one, ``repair``: the committed
update). The sibling's own candidate is built from its own prompt, reference answer and rollouts, and the critic
measures it like any other; nothing is applied unmeasured. A rubric repair is re-graded on the sibling's kept
rollouts, so a sibling without any waits (is not offered) until its next group is kept; a guidance repair is
measured on fresh rollouts and is offered at once. Task-sampling updates (park, retire) are never carried: a
family's failure is not fixed by dropping the family. Nor is a hint that faded (``scaffold_outgrown``): each
task's scaffold fades on its own task's evidence.

Carried failures reach the evolver through ``get_failures`` like detected ones (the service lists them beside the
detectors'), whatever the ``since_step`` of the point, until one is handled (committed or given up).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from harnessrl.data.schema import Task
from harnessrl.records.failures import Failure

__all__ = ["CARRIED_INTERFACES", "CarriedRepairs", "is_carried"]

CARRIED_INTERFACES = ("rubric_criteria", "rollout_guidance")
"""The interfaces whose committed repairs are carried to a failure's siblings."""
_NOT_CARRIED = frozenset({"scaffold_outgrown"})  # failure kinds whose repair is the task's own
_NEEDS_ROLLOUTS = frozenset({"rubric_criteria"})  # measured by re-grading the sibling's kept rollouts
_TAG = re.compile(r"\[rule-based: ([a-z_]+)\]")


def is_carried(evidence: Mapping[str, Any]) -> bool:
    """Whether a failure's (or its view's) evidence says it was carried from a sibling's commit."""
    return evidence.get("carried_from") is not None


def _family(task: Task) -> str:
    family = task.metadata.get("family")
    return f"family {family}" if family is not None else f"domain {task.domain}"


class CarriedRepairs:
    """The carried failures of a run: queued after a commit, offered once the sibling can be measured.

    It takes no lock of its own: the tool service calls it under its lock."""

    def __init__(self, tasks: Mapping[str, Task], enabled: bool = True):
        self.tasks = tasks
        self.enabled = enabled
        self._queued: dict[str, Failure] = {}  # by the carried failure's id

    def after_commit(self, failure: Failure | None, update: Any, step: int) -> list[str]:
        """Queue the siblings of ``failure``'s task for the repair ``update`` (committed for it from ``step``);
        returns the sibling task ids queued. A carried failure's own commit is not carried again."""
        if not self.enabled or failure is None or is_carried(failure.evidence):
            return []
        interface = getattr(update, "interface", None)
        source = self.tasks.get(failure.task_id)
        if interface not in CARRIED_INTERFACES or source is None or failure.kind in _NOT_CARRIED:
            return []
        group = _family(source)
        tags = _TAG.findall(str(getattr(update, "rationale", "") or ""))
        queued = []
        for task in self.tasks.values():
            if task.id == source.id or _family(task) != group:
                continue
            carried = Failure(
                kind=failure.kind,
                step=step,
                task_id=task.id,
                domain=task.domain,
                evidence={
                    "carried_from": source.id,
                    "source_failure": failure.id,
                    "remedy": tags[-1] if tags else None,
                    "repair": update.model_dump(mode="json", exclude={"rationale"}),
                    "interface": interface,
                },
                summary=(
                    f"carried from {source.id} ({group}): a {interface} repair was committed there for its "
                    f"{failure.kind.replace('_', ' ')} failure; the same kind of repair, built for this task, may "
                    "answer the same failure here"
                ),
                interface_hint=interface,
            )
            if carried.id not in self._queued:
                self._queued[carried.id] = carried
                queued.append(task.id)
        return queued

    def ready(self, has_rollouts: Callable[[str], bool]) -> list[Failure]:
        """The carried failures whose sibling can be measured now (a rubric repair: it has kept rollouts)."""
        return [
            f
            for f in self._queued.values()
            if f.evidence.get("interface") not in _NEEDS_ROLLOUTS or has_rollouts(f.task_id)
        ]

    def forget(self, failure_id: str) -> None:
        """A carried failure was handled (committed or given up): it is not offered again."""
        self._queued.pop(failure_id, None)

    @property
    def queued(self) -> int:
        return len(self._queued)
