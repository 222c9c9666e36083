"""Labelled judge verdicts: (response, criterion, label) rows that measure a judge on someone's own data.

A row takes one of two shapes, chosen per row (one file may mix them):

- **standalone**: ``prompt``, ``response``, ``criterion`` (its text), ``label``; optional
  ``reference_answer``, ``domain`` (default ``general``), ``weight`` (the criterion's weight, default 1;
  negative for a pitfall) and ``criterion_id``;
- **task**: ``task_id``, ``criterion_id``, ``response``, ``label``: the prompt, criterion, reference answer
  and domain come from that task of a tasks file (the bundled labels are written this way).

Both may carry ``id``, ``note`` and ``metadata``, which are kept out of grading. ``label`` is 1 when the
response does what the criterion says; for a pitfall (negative weight) 1 means the response commits it,
which is what a judge's verdict on a pitfall means too. Only *judged* criteria can be labelled:
programmatic ones are checked in code, never by the judge.

Rows are read and reported like task files (:func:`harnessrl.data.loaders.read_rows`): every bad row
gives one :class:`~harnessrl.errors.RowError` naming its line and field and saying how to fix it, and
every good row is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from harnessrl.data.loaders import _explain, read_rows
from harnessrl.data.schema import ChatMessage, Criterion, Task, prompt_text
from harnessrl.errors import DataValidationError, RowError

__all__ = ["JudgeLabel", "LabelReport", "validate_label_rows", "validate_labels_file"]

STANDALONE_FIELDS = ("prompt", "response", "criterion", "label")
TASK_FIELDS = ("task_id", "criterion_id", "response", "label")


@dataclass(frozen=True)
class JudgeLabel:
    """One labelled (prompt, response, criterion) triple, ready to grade; ``line`` is where it was read."""

    line: int
    prompt: str
    response: str
    criterion: Criterion
    label: int
    domain: str
    reference_answer: str | None = None
    task_id: str | None = None


def _label_value(v: Any) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float) and v in (0, 1):
        return int(v)
    raise ValueError(
        f"must be 0 or 1 (1: the response does what the criterion says, or commits it when it is a pitfall), got {v!r}"
    )


class _RowBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    response: str
    label: int
    domain: str | None = None
    id: str | int | None = None
    note: str | None = None
    metadata: dict[str, Any] = {}

    @field_validator("label", mode="before")
    @classmethod
    def _label_0_or_1(cls, v: Any) -> int:
        return _label_value(v)


class StandaloneLabelRow(_RowBase):
    """A labelled row that carries its prompt and criterion text itself."""

    prompt: str | list[ChatMessage]
    criterion: str
    criterion_id: str | None = None
    weight: Any = 1.0
    reference_answer: str | None = None

    @field_validator("prompt")
    @classmethod
    def _prompt_not_empty(cls, v: str | list[ChatMessage]) -> str | list[ChatMessage]:
        if not prompt_text(v).strip():
            raise ValueError("prompt is empty")
        return v


class TaskLabelRow(_RowBase):
    """A labelled row that names a task and one of its criteria."""

    task_id: str
    criterion_id: str


@dataclass
class LabelReport:
    """What reading a labels file found: the good labels, and one error per bad row."""

    source: str
    labels: list[JudgeLabel] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)

    def raise_if_invalid(self) -> list[JudgeLabel]:
        if self.errors:
            raise DataValidationError(self.source, self.errors, f"harnessrl bench judge --labels {self.source}")
        return self.labels


class _RowProblem(ValueError):
    """A row that cannot become a label; the message says why and how to fix it."""


def _need(fields: Sequence[str]) -> str:
    return ", ".join(fields)


_SHAPES = (
    f"a row needs either {_need(STANDALONE_FIELDS)} (standalone), or {_need(TASK_FIELDS)} "
    "naming a criterion of the tasks file given with --tasks"
)


def _criterion(text: str, weight: Any, cid: str) -> Criterion:
    try:
        return Criterion(id=cid, text=text, weight=weight)
    except ValidationError as e:
        msgs = []
        for err in e.errors(include_url=False):
            name = {"text": "criterion"}.get(str(err["loc"][0]), str(err["loc"][0])) if err["loc"] else "criterion"
            msg = err["msg"].removeprefix("Value error, ")
            msgs.append(msg if msg.startswith(name) else f"{name}: {msg}")
        raise _RowProblem("; ".join(msgs)) from None


def _standalone(line: int, row: Mapping[str, Any]) -> JudgeLabel:
    try:
        r = StandaloneLabelRow.model_validate(row)
    except ValidationError as e:
        raise _RowProblem(_with_shapes(_explain(e, row))) from None
    crit = _criterion(r.criterion, r.weight, r.criterion_id or f"line-{line}")
    return JudgeLabel(
        line=line,
        prompt=prompt_text(r.prompt),
        response=r.response,
        criterion=crit,
        label=r.label,
        domain=r.domain or "general",
        reference_answer=r.reference_answer if r.reference_answer and r.reference_answer.strip() else None,
    )


def _from_task(line: int, row: Mapping[str, Any], tasks: Mapping[str, Task] | None, tasks_source: str) -> JudgeLabel:
    both = [k for k in ("prompt", "criterion", "reference_answer", "weight") if k in row]
    if both:
        raise _RowProblem(
            f"the row names a task (task_id, criterion_id) and also gives {', '.join(both)}: "
            "keep task_id and criterion_id, or drop them and give prompt and criterion text"
        )
    try:
        r = TaskLabelRow.model_validate(row)
    except ValidationError as e:
        raise _RowProblem(_with_shapes(_explain(e, row))) from None
    if tasks is None:
        raise _RowProblem(
            f"names task {r.task_id!r} but no tasks file was given: pass it with --tasks FILE, "
            "or give prompt and criterion text in the row"
        )
    task = tasks.get(r.task_id)
    if task is None:
        raise _RowProblem(
            f"task_id: task {r.task_id!r} is not in {tasks_source}; check the id, or pass the tasks file "
            "that holds it with --tasks FILE"
        )
    crit = {c.id: c for c in task.rubric}.get(r.criterion_id)
    if crit is None:
        raise _RowProblem(
            f"criterion_id: task {task.id!r} has no criterion {r.criterion_id!r} "
            f"(its criteria: {', '.join(c.id for c in task.rubric)})"
        )
    if crit.check is not None:
        raise _RowProblem(
            f"criterion_id: criterion {crit.id!r} of task {task.id!r} is programmatic (checked in code, never "
            "by the judge): label judged criteria only"
        )
    return JudgeLabel(
        line=line,
        prompt=prompt_text(task.prompt),
        response=r.response,
        criterion=crit,
        label=r.label,
        domain=r.domain or task.domain,
        reference_answer=task.reference_answer,
        task_id=task.id,
    )


def _with_shapes(msg: str) -> str:
    """A row that lacks a field of its shape is told both shapes."""
    return f"{msg} ({_SHAPES})" if "missing " in msg else msg


def validate_label_rows(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    source: str,
    tasks: Sequence[Task] | None = None,
    tasks_source: str = "the tasks file",
    read_errors: Sequence[RowError] = (),
) -> LabelReport:
    """Check every labelled row; keep the good ones and give one error per bad row.

    Args:
        rows: (line number, raw row) pairs, as :func:`~harnessrl.data.loaders.read_rows` reads them.
        source: the file's name, for messages.
        tasks: what rows with ``task_id`` and ``criterion_id`` refer to (None: such rows are errors).
        tasks_source: how messages name those tasks (e.g. the tasks file's path).
        read_errors: errors already found while reading (lines that are not JSON objects).
    """
    by_id = {t.id: t for t in tasks} if tasks is not None else None
    report = LabelReport(source=source, errors=[e for e in read_errors if e.line > 0])
    for line, row in rows:
        row = {k: v for k, v in row.items() if v is not None}  # parquet fills absent optional columns with None
        names_task = "task_id" in row or ("criterion_id" in row and "criterion" not in row)
        try:
            label = _from_task(line, row, by_id, tasks_source) if names_task else _standalone(line, row)
        except _RowProblem as e:
            tid = row.get("task_id") if names_task else None
            report.errors.append(RowError(line, str(e), str(tid) if tid is not None else None))
            continue
        report.labels.append(label)
    if not report.labels and not report.errors:
        report.errors.append(RowError(0, f"{source} is empty: it holds no labelled rows ({_SHAPES})"))
    report.errors.sort(key=lambda e: e.line)
    return report


def validate_labels_file(
    path: str | Path, tasks: Sequence[Task] | None = None, tasks_source: str = "the tasks file"
) -> LabelReport:
    """Read and check a labels file (JSONL or parquet); see the module docstring for its rows."""
    rows, read_errors = read_rows(path)
    return validate_label_rows(rows, str(path), tasks, tasks_source, read_errors)
