"""The reference answer as evidence: each training task's own reference, graded by its own rubric.

A dataset's reference answer is what a good answer to its prompt looks like, so it is the cheapest witness of a
rubric that pays for the wrong thing (docs/design.md §4, "The reference as witness"): a positive criterion the
reference *fails*, or a pitfall it *commits*, asks for something a good answer does not do (a bulleted list
where the reference is one prose sentence; more words than a one-sentence answer has). Such a criterion is
**suspect**, unless the prompt itself states its requirement (`stated_keys`): then the reference
is what is wrong (a model's answer that ignored the instruction), the prompt outranks it, and the criterion is
kept and stays a target (``breaks_prompt``, in the event and the tools). Grading the reference costs judge calls,
never rollouts.

:class:`ReferenceWitness` grades every training task's reference under the task's current rubric before step 1
and again after every rubric edit (each rubric version once), and keeps, per task, the reference's verdict on
each criterion and the suspects among them. Each check is a ``reference_check`` event. What reads it:

- the evolver's tools: ``inspect_rollouts`` gives the reference's verdicts beside the rollouts, and
  ``get_harness_state`` the task's suspects, so an attributor and a proposer (rule-based or an LLM) see them;
- rollout guidance never builds a hint toward a suspect criterion (:mod:`harnessrl.interfaces.guidance`);
- :class:`SuspectFindings`: a suspect that is an *exact* check (no judge noise in the verdict) is offered as a
  failure of kind ``reference_fails_criterion`` from the first graded groups of its tasks on, one finding per
  kind of requirement (``requirement_key()`` of its check) covering every task whose
  reference fails its own criterion of that kind, as the rubric audit offers what prompts state
  (:mod:`harnessrl.evolution.audit`). A judged suspect stays evidence only: the judge's verdict on one text is
  noisy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from harnessrl.data.schema import Criterion, Task, prompt_text
from harnessrl.interfaces.induction import stated_keys
from harnessrl.records.event_payloads import ReferenceCheckPayload
from harnessrl.records.evidence import ReferenceFailsEvidence
from harnessrl.records.failures import Failure

__all__ = ["ReferenceGrade", "ReferenceWitness", "Suspect", "SuspectFindings", "is_suspect"]

logger = logging.getLogger(__name__)

KIND = "reference_fails_criterion"
FAILS_BELOW = 0.5
"""A positive criterion whose verdict on the reference is below this, the reference fails; a pitfall at or above
it, the reference commits."""

Grader = Callable[[Task, Sequence[Criterion]], Any]
"""``grade(task, criteria) -> GradeResult``: the run's judge on the task's reference answer under ``criteria``."""


def is_suspect(criterion: Criterion, verdict: float | None) -> bool:
    """Whether the reference's ``verdict`` on ``criterion`` makes it suspect: a positive criterion it fails, or a
    pitfall it commits (a missing verdict says nothing)."""
    if verdict is None:
        return False
    return verdict < FAILS_BELOW if criterion.weight > 0 else verdict >= FAILS_BELOW


class Suspect(BaseModel):
    """A criterion of a task's rubric that the task's own reference answer fails (or, a pitfall, commits)."""

    criterion_id: str
    text: str
    weight: float
    verdict: float
    exact: bool = Field(description="An exact (programmatic) check: its verdict on the reference is not the judge's.")
    requirement_key: str | None = None

    @property
    def pitfall(self) -> bool:
        return self.weight < 0


class ReferenceGrade(BaseModel):
    """One task's reference graded under one version of its rubric."""

    task_id: str
    rubric_version: int
    reward: float | None
    verdicts: dict[str, float | None]
    suspects: list[Suspect] = Field(default_factory=list)
    breaks_prompt: list[Suspect] = Field(
        default_factory=list,
        description="Exact criteria the reference fails (or commits) whose requirement the prompt itself states: the "
        "reference is wrong there, not the criterion, so they are never suspect (docs/design.md section 4).",
    )


class ReferenceWitness:
    """Grades each training task's reference answer under its current rubric, once per rubric version.

    Args:
        tasks: the training tasks by id.
        rubric: the task's current rubric version (``.version``, ``.criteria``).
        grade: the run's judge on a task's reference under some criteria (None: no witness; nothing is graded).
    """

    def __init__(self, tasks: Mapping[str, Task], rubric: Callable[[str], Any], grade: Grader | None):
        self.tasks = tasks
        self.rubric = rubric
        self._grade = grade
        self.grades: dict[tuple[str, int], ReferenceGrade] = {}
        self.judge_calls = 0

    @property
    def enabled(self) -> bool:
        return self._grade is not None

    def check(self, task_ids: Sequence[str] | None = None) -> list[ReferenceGrade]:
        """Grade the reference of each of ``task_ids`` (None: every training task with one) under its current rubric
        version, where that version was not graded yet; the grades made now (a judge failure grades nothing, said in
        the log: the evidence is missing, never invented)."""
        if self._grade is None:
            return []
        made = []
        for tid in sorted(self.tasks) if task_ids is None else task_ids:
            task = self.tasks.get(tid)
            if task is None or not task.reference_answer:
                continue
            current = self.rubric(tid)
            key = (tid, int(current.version))
            if key in self.grades:
                continue
            try:
                result = self._grade(task, current.criteria)
            except Exception:  # the witness is evidence: a judge failure leaves it missing, never the run broken
                logger.exception("grading the reference answer of task %s failed; its suspects stay unknown", tid)
                continue
            self.judge_calls += sum(1 for c in current.criteria if c.check is None)
            verdicts = {v.criterion_id: v.value for v in result.verdicts}
            failed = [_suspect(c, verdicts.get(c.id)) for c in current.criteria if is_suspect(c, verdicts.get(c.id))]
            stated = stated_keys(prompt_text(task.prompt))  # the prompt outranks a reference that breaks it
            grade = ReferenceGrade(
                task_id=tid,
                rubric_version=key[1],
                reward=result.reward,
                verdicts=verdicts,
                suspects=[s for s in failed if s.requirement_key not in stated],
                breaks_prompt=[s for s in failed if s.requirement_key in stated],
            )
            self.grades[key] = grade
            made.append(grade)
        return made

    def current(self, task_id: str) -> ReferenceGrade | None:
        """The reference's grade under the task's current rubric version (None: not graded, or no reference)."""
        return self.grades.get((task_id, int(self.rubric(task_id).version)))

    def suspects(self, task_id: str) -> list[Suspect]:
        grade = self.current(task_id)
        return list(grade.suspects) if grade is not None else []

    def view(self, task_id: str) -> dict[str, Any] | None:
        """What the evolver's tools show of a task's reference: its reward and verdicts under the current rubric, and
        the suspect criteria (None: not graded)."""
        grade = self.current(task_id)
        if grade is None:
            return None
        return {
            "rubric_version": grade.rubric_version,
            "reward": grade.reward,
            "verdicts": grade.verdicts,
            "suspect_criteria": [s.model_dump(mode="json") for s in grade.suspects],
            "reference_breaks_prompt": [s.model_dump(mode="json") for s in grade.breaks_prompt],
        }


def _suspect(criterion: Criterion, verdict: float | None) -> Suspect:
    check = criterion.check
    return Suspect(
        criterion_id=criterion.id,
        text=criterion.text,
        weight=criterion.weight,
        verdict=float(verdict or 0.0),
        exact=check is not None,
        requirement_key=check.requirement_key() if check is not None else None,
    )


def event_payload(grades: Sequence[ReferenceGrade], tasks: int, judge_calls: int) -> ReferenceCheckPayload:
    """The ``reference_check`` event: the judge's calls so far, the references graded, and each suspect by task."""
    return ReferenceCheckPayload(
        judge_calls=judge_calls,
        graded=[{"task_id": g.task_id, "rubric_version": g.rubric_version, "reward": g.reward} for g in grades],
        tasks=tasks,
        suspects={g.task_id: [s.model_dump(mode="json") for s in g.suspects] for g in grades if g.suspects},
        reference_breaks_prompt={
            g.task_id: [s.model_dump(mode="json") for s in g.breaks_prompt] for g in grades if g.breaks_prompt
        },
    )


# ---------------------------------------------------------------------------------------------- the findings


@dataclass
class _Finding:
    key: str
    text: str
    pitfall: bool
    criteria: dict[str, str]  # task id -> its suspect criterion id
    status: Literal["open", "committed", "closed"] = "open"
    offered_groups: int = 0
    failures: dict[tuple[int, int], Failure] = field(default_factory=dict)

    @property
    def tasks(self) -> list[str]:
        return sorted(self.criteria)


class SuspectFindings:
    """The exact suspects of a run's training tasks, one finding per kind of requirement, offered as failures of
    kind ``reference_fails_criterion`` as the rubric audit offers its findings (see the module docstring).

    Args:
        witness: the run's :class:`ReferenceWitness`.
        rubric: the current rubric of a task (criteria).
    """

    def __init__(self, witness: ReferenceWitness, rubric: Callable[[str], Sequence[Criterion]]):
        self.witness = witness
        self.rubric = rubric
        self.findings: dict[str, _Finding] = {}
        self._by_failure: dict[str, str] = {}

    def run(self) -> list[_Finding]:
        """Build the findings from the witness's grades (idempotent)."""
        if self.findings:
            return list(self.findings.values())
        for tid in sorted(self.witness.tasks):
            for s in self.witness.suspects(tid):
                if not s.exact or s.requirement_key is None:
                    continue
                key = f"{'commits' if s.pitfall else 'fails'}:{s.requirement_key}"
                f = self.findings.setdefault(key, _Finding(key=key, text=s.text, pitfall=s.pitfall, criteria={}))
                f.criteria.setdefault(tid, s.criterion_id)
        return list(self.findings.values())

    def open_tasks(self, finding: _Finding) -> list[str]:
        """The finding's tasks whose rubric still has their suspect criterion."""
        return [t for t in finding.tasks if any(c.id == finding.criteria[t] for c in self.rubric(t))]

    def ready(self, groups: Callable[[str], int], step: int, kept: Callable[[str], int]) -> list[Failure]:
        """A failure for each open finding whose tasks have more graded groups than when it was last deferred (as
        :meth:`~harnessrl.evolution.audit.RubricAudit.ready`)."""
        out = []
        for finding in self.findings.values():
            if finding.status != "open":
                continue
            tasks = self.open_tasks(finding)
            if not tasks:
                finding.status = "closed"
                continue
            counts = {t: groups(t) for t in tasks}
            total = sum(counts.values())
            if total <= finding.offered_groups:
                continue
            cached = finding.failures.get((step, total))
            if cached is None:
                held = {t: kept(t) for t in tasks}
                own = max(tasks, key=lambda t: (held[t], counts[t], t))
                cached = self._failure(finding, own, tasks, step, total)
                finding.failures[(step, total)] = cached
                self._by_failure[cached.id] = finding.key
            out.append(cached)
        return out

    def _failure(self, finding: _Finding, task_id: str, tasks: list[str], step: int, total: int) -> Failure:
        task = self.witness.tasks[task_id]
        cid = finding.criteria[task_id]
        crit = next((c for c in self.rubric(task_id) if c.id == cid), None)
        grade = self.witness.current(task_id)
        verdict = grade.verdicts.get(cid) if grade is not None else None
        what = "commits the pitfall" if finding.pitfall else "fails the criterion"
        n = len(tasks)
        return Failure(
            kind=KIND,
            step=step,
            task_id=task_id,
            domain=task.domain,
            evidence=ReferenceFailsEvidence(
                criterion_id=cid,
                criterion_text=crit.text if crit is not None else finding.text,
                weight=crit.weight if crit is not None else None,
                pitfall=finding.pitfall,
                verdict=verdict,
                requirement_key=finding.key.split(":", 1)[1],
                covers=tasks,
                criteria={t: finding.criteria[t] for t in tasks},
                graded_groups=total,
            ),
            summary=(
                f"the reference answers of {n} task(s) ({', '.join(tasks[:4])}{', ...' if n > 4 else ''}) each "
                f"{what} '{finding.text}' of their own rubric: it pays for what a good answer does not do; "
                f"{total} group(s) of them graded so far"
            ),
            interface_hint="rubric_criteria",
        )

    def owns(self, failure_id: str) -> bool:
        return failure_id in self._by_failure

    def handled(self, failure_id: str, outcome: str) -> None:
        """As :meth:`~harnessrl.evolution.audit.RubricAudit.handled`."""
        finding = self.findings.get(self._by_failure.get(failure_id, ""))
        if finding is None:
            return
        if outcome == "committed":
            finding.status = "committed"
        elif outcome == "deferred":
            finding.offered_groups = max(k[1] for k in finding.failures) if finding.failures else 0
        else:
            finding.status = "closed"
