"""The rubric audit: before step 1, the requirements the training prompts state that their rubrics do not check.

A lax rubric is exploited early: on the gold suite fixed GRPO's gold score on the lax-rubric family fell from 0.50
to 0.25 by step 20, before any detector-driven repair could land (docs/design.md §8). So the trainer does not wait
for a failure to be detected: before the first step it reads every training task's prompt, rubric and reference
answer, and lists each *stated requirement* (:func:`~harnessrl.interfaces.induction.stated_requirements`: "without
any commas", "in at most 20 words", "begin with ...") that the task's rubric does not check and its reference
answer meets. Tasks whose prompts state requirements of one kind
(a check's ``requirement_key()``, :mod:`harnessrl.data.checks`) form one **finding**, whatever their family or domain:
the data need no family tags.

A finding is not a repair. It is offered to the evolver as a failure of kind ``unchecked_requirement`` as soon as
one of its tasks has a group graded (the first groups of training), on that task; the evolver proposes the
requirement as an exact criterion (any evolver: the rule-based one's remedy ``requirement``, or an LLM reading
the failure), the trainer widens it to every task of the finding, and the critic decides on the pooled groups of
all of them (:mod:`harnessrl.critic.power`). A finding the data cannot decide yet is offered again when more of
its tasks' groups have been graded; one committed or given up is closed. Every step of this is an event
(``rubric_audit``, then the usual failure, proposal, trial, verdict and commit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harnessrl.data.schema import Criterion, Task, prompt_text
from harnessrl.interfaces.induction import stated_requirements
from harnessrl.records.event_payloads import AuditFindingView
from harnessrl.records.evidence import UncheckedRequirementEvidence
from harnessrl.records.failures import Failure

__all__ = ["Finding", "RubricAudit", "checked_keys"]

KIND = "unchecked_requirement"


def checked_keys(criteria: Sequence[Criterion]) -> set[str]:
    """The requirements a rubric checks exactly (the ``requirement_key()`` of each programmatic check)."""
    return {c.check.requirement_key() for c in criteria if c.check}


@dataclass
class Finding:
    """One kind of requirement that some tasks' prompts state and their rubrics do not check: its key, an example
    criterion text, the tasks (each with its own instance of the check), and where it stands."""

    key: str
    text: str
    checks: dict[str, dict[str, Any]]  # task id -> that task's own check
    status: Literal["open", "committed", "closed"] = "open"
    offered_groups: int = 0  # the tasks' graded groups when it was last offered and deferred
    failures: dict[tuple[int, int], Failure] = field(default_factory=dict)  # (step, groups) -> the failure offered

    @property
    def tasks(self) -> list[str]:
        return sorted(self.checks)

    def view(self) -> AuditFindingView:
        """The finding as the ``rubric_audit`` event lists it."""
        return AuditFindingView(key=self.key, text=self.text, tasks=self.tasks, checks=self.checks, status=self.status)


class RubricAudit:
    """The audit of a run's training tasks and the findings it keeps open (see the module docstring).

    Args:
        tasks: the training tasks by id.
        rubric: the current rubric of a task (the rubric interface's ``current(task).criteria``).
        enabled: false: no audit (no finding, nothing offered).
    """

    def __init__(self, tasks: Mapping[str, Task], rubric: Callable[[str], Sequence[Criterion]], enabled: bool = True):
        self.tasks = tasks
        self.rubric = rubric
        self.enabled = enabled
        self.findings: dict[str, Finding] = {}
        self._by_failure: dict[str, str] = {}  # failure id -> finding key

    def run(self) -> list[Finding]:
        """Read every task and build the findings (idempotent: a second call keeps what the first found)."""
        if not self.enabled or self.findings:
            return list(self.findings.values())
        for task in sorted(self.tasks.values(), key=lambda t: t.id):
            checked = checked_keys(self.rubric(task.id))
            seen: set[str] = set()
            for check, text in stated_requirements(prompt_text(task.prompt)):
                key = check.requirement_key()
                if key in checked or key in seen:
                    continue
                seen.add(key)
                try:
                    if task.reference_answer is not None and not check.passes(task.reference_answer):
                        continue  # the reference answer does not do it: not something a good answer does here
                except ValueError:
                    continue
                finding = self.findings.setdefault(key, Finding(key=key, text=text, checks={}))
                finding.checks[task.id] = check.written()
        return list(self.findings.values())

    def open_tasks(self, finding: Finding) -> list[str]:
        """The finding's tasks whose rubric does not check it yet."""
        return [t for t in finding.tasks if finding.key not in checked_keys(self.rubric(t))]

    def ready(self, groups: Callable[[str], int], step: int, kept: Callable[[str], int]) -> list[Failure]:
        """A failure for each open finding whose tasks have more graded groups than when it was last deferred, on
        the task with the most groups kept now (its rollouts are what the proposer reads), then the most graded;
        ``groups``: a task's groups graded so far (a count that only grows); ``kept``: its groups whose rollouts are
        still kept. The same finding at the same step and evidence gives the same failure (the
        same id)."""
        out = []
        for finding in self.findings.values():
            if finding.status != "open":
                continue
            tasks = self.open_tasks(finding)
            if not tasks:
                finding.status = "closed"  # a repair reached them by another path
                continue
            counts = {t: groups(t) for t in tasks}
            total = sum(counts.values())
            if total <= finding.offered_groups:
                continue
            cached = finding.failures.get((step, total))
            if cached is None:
                held = {t: kept(t) for t in tasks}
                cached = self._failure(finding, max(tasks, key=lambda t: (held[t], counts[t], t)), tasks, step, total)
                finding.failures[(step, total)] = cached
                self._by_failure[cached.id] = finding.key
            out.append(cached)
        return out

    def _failure(self, finding: Finding, task_id: str, tasks: list[str], step: int, total: int) -> Failure:
        task = self.tasks[task_id]
        n = len(tasks)
        return Failure(
            kind=KIND,
            step=step,
            task_id=task_id,
            domain=task.domain,
            evidence=UncheckedRequirementEvidence(
                requirement_key=finding.key,
                requirement=finding.checks[task_id],
                requirement_text=finding.text,
                covers=tasks,
                graded_groups=total,
                audit=True,
            ),
            summary=(
                f"the rubric audit found that the prompts of {n} task(s) ({', '.join(tasks[:4])}"
                f"{', ...' if n > 4 else ''}) state '{finding.text}' and their rubrics do not check it; "
                f"{total} group(s) of them graded so far"
            ),
            interface_hint="rubric_criteria",
        )

    def owns(self, failure_id: str) -> bool:
        """Whether ``failure_id`` is one of the audit's failures."""
        return failure_id in self._by_failure

    def handled(self, failure_id: str, outcome: str) -> None:
        """An evolution point ended the audit failure ``failure_id``: ``committed`` or ``gave_up`` close its finding;
        ``deferred`` (the critic could not decide yet) keeps it open until more of its tasks' groups are graded."""
        finding = self.findings.get(self._by_failure.get(failure_id, ""))
        if finding is None:
            return
        if outcome == "committed":
            finding.status = "committed"
        elif outcome == "deferred":
            finding.offered_groups = max(k[1] for k in finding.failures) if finding.failures else 0
        else:
            finding.status = "closed"
