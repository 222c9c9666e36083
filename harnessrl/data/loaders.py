"""Load tasks from our JSONL, the RaR layout (JSONL or parquet), or any `datasets` dataset.

Every loader goes through :func:`validate_rows`, which checks each row on its own and reports
*each* bad row with its line (or row) number and a reason, then checks ids across rows. Nothing
trains on a file with a bad row: :func:`load_tasks` raises :class:`DataValidationError` listing them.

Formats:

- ``harnessrl``: one :class:`~harnessrl.data.schema.Task` per line, as JSON.
- ``rar``: the layout of public rubric datasets (RaR-Medicine, RaR-Science): ``question``,
  ``reference_answer``, ``question_source``, ``rubric`` (a list of ``{title, description, weight}``),
  ``rubric_list``, ``rubric_count``. Criterion text is the description (the title when it is empty).
- ``hf``: any table with a column mapping (``{"prompt": "question", "rubric": "criteria", ...}``).
- ``auto``: ``rar`` when the first good row has ``question`` and a ``rubric`` of titled items,
  else ``harnessrl``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from harnessrl.data.checks import CHECK_TYPES
from harnessrl.data.schema import Task
from harnessrl.errors import DataValidationError, HarnessRLError, RowError

__all__ = [
    "FORMATS",
    "ValidationReport",
    "load_hf_dataset",
    "load_tasks",
    "read_rows",
    "row_to_task",
    "validate_file",
    "validate_rows",
]

Format = Literal["auto", "harnessrl", "rar", "hf"]
FORMATS: tuple[str, ...] = ("auto", "harnessrl", "rar", "hf")
_TASK_FIELDS = ("id", "domain", "prompt", "reference_answer", "rubric", "gold_rubric", "metadata")
_RUBRIC_FIELDS = ("rubric", "gold_rubric")


@dataclass
class ValidationReport:
    """What validating a file found: the good tasks, and one error per bad row."""

    source: str
    tasks: list[Task] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    format: str = "harnessrl"

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_if_invalid(self) -> list[Task]:
        if self.errors:
            raise DataValidationError(self.source, self.errors)
        return self.tasks

    def summary(self) -> dict[str, Any]:
        """Tasks per domain, criteria per task, share of pitfalls and of programmatic criteria."""
        crits = [c for t in self.tasks for c in t.rubric]
        per_task = [len(t.rubric) for t in self.tasks]
        return {
            "tasks": len(self.tasks),
            "domains": dict(sorted(Counter(t.domain for t in self.tasks).items())),
            "criteria": len(crits),
            "criteria_per_task": {
                "min": min(per_task, default=0),
                "mean": round(sum(per_task) / len(per_task), 2) if per_task else 0.0,
                "max": max(per_task, default=0),
            },
            "pitfall_share": round(sum(c.is_pitfall for c in crits) / len(crits), 3) if crits else 0.0,
            "programmatic_share": round(sum(c.kind == "programmatic" for c in crits) / len(crits), 3) if crits else 0.0,
            "with_reference": sum(t.reference_answer is not None for t in self.tasks),
            "with_gold_rubric": sum(t.gold_rubric is not None for t in self.tasks),
        }


def read_rows(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], list[RowError]]:
    """Read raw rows with their 1-based line numbers (row numbers for parquet)."""
    path = Path(path)
    if not path.exists():
        raise HarnessRLError(f"{path}: no such file; check the path (bundled sample: `harnessrl data path`)")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises several types for a broken file
            raise HarnessRLError(f"{path}: not a readable parquet file ({e})") from e
        rows = [_drop_arrow_nulls(r) for r in table.to_pylist()]
        if not rows:
            return [], [RowError(0, "file is empty: it holds no tasks")]
        return list(enumerate(rows, start=1)), []
    rows: list[tuple[int, dict[str, Any]]] = []
    errors: list[RowError] = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise HarnessRLError(f"{path}: not UTF-8 text ({e}); save it as UTF-8 JSON lines") from e
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            # a line cut short ends inside a value, or inside a string (reported where the string starts)
            cut = e.pos >= len(line.rstrip()) - 1 or e.msg.startswith("Unterminated string")
            hint = " (truncated line?)" if cut else ""
            errors.append(RowError(lineno, f"not valid JSON{hint}: {e.msg} (column {e.colno})"))
            continue
        if not isinstance(row, dict):
            errors.append(RowError(lineno, f"a row must be a JSON object, got {type(row).__name__}"))
            continue
        rows.append((lineno, row))
    if not rows and not errors:
        errors.append(RowError(0, "file is empty: it holds no tasks"))
    return rows, errors


def _drop_arrow_nulls(row: Any) -> Any:
    """Undo Arrow's struct unification: a key one criterion (or check, or metadata) lacks comes back as None.

    Parquet and ``datasets`` store a list of dicts as one struct type, so ``{"id", "text", "weight"}``
    next to a criterion with a ``check`` reads back with ``"check": None, "kind": None``, and two
    check types each get the other's fields as None: all of which the schema would reject.
    """
    if not isinstance(row, dict):
        return row
    row = dict(row)
    if isinstance(row.get("metadata"), dict):
        row["metadata"] = {k: v for k, v in row["metadata"].items() if v is not None}
    if "gold_rubric" in row and row["gold_rubric"] is None:  # a column most rows of a table leave empty
        del row["gold_rubric"]
    for name in _RUBRIC_FIELDS:
        rubric = row.get(name)
        if isinstance(rubric, list):
            items = []
            for item in rubric:
                if isinstance(item, dict):
                    item = {k: v for k, v in item.items() if v is not None}
                    if isinstance(item.get("check"), dict):
                        item["check"] = {k: v for k, v in item["check"].items() if v is not None}
                items.append(item)
            row[name] = items
    return row


def _looks_like_rar(row: Mapping[str, Any]) -> bool:
    rubric = row.get("rubric")
    return (
        "question" in row
        and isinstance(rubric, list)
        and any(isinstance(r, dict) and ("description" in r or "title" in r) for r in rubric)
    )


def _rar_criteria(rubric_in: Any, name: str = "rubric") -> list[Any]:
    """RaR's ``[{title, description, weight}]`` as our criteria (an item with an ``id`` or a ``check`` is
    already in our schema and passes through)."""
    if rubric_in is None:
        rubric_in = []
    if not isinstance(rubric_in, list):
        raise _RowProblem(f"{name} must be a list of {{title, description, weight}}, got {type(rubric_in).__name__}")
    rubric = []
    for i, item in enumerate(rubric_in, start=1):
        if not isinstance(item, dict):
            raise _RowProblem(f"{name} item {i} must be an object with title, description, weight")
        if "id" in item or "check" in item:
            rubric.append(item)
            continue
        text = item.get("description") or item.get("title") or ""
        crit = {"id": f"c{i}", "text": text, "weight": item.get("weight")}
        if "weight" not in item:
            raise _RowProblem(f"{name} item {i} has no weight")
        rubric.append(crit)
    return rubric


def _from_rar(row: Mapping[str, Any], index: int, default_domain: str | None) -> dict[str, Any]:
    rubric_in = row.get("rubric") or []
    rubric = _rar_criteria(rubric_in)
    source = row.get("question_source") or None
    domain = row.get("domain") or default_domain or source or "general"
    meta = {k: row[k] for k in ("question_source",) if row.get(k)}
    titles = [it.get("title") for it in rubric_in if isinstance(it, dict)]
    if any(titles):
        meta["criterion_titles"] = titles
    out = {
        "id": str(row.get("id") or f"rar-{index:06d}"),
        "domain": str(domain),
        "prompt": row.get("question"),
        "reference_answer": row.get("reference_answer"),
        "rubric": rubric,
        "metadata": meta,
    }
    if row.get("gold_rubric") is not None:
        out["gold_rubric"] = _rar_criteria(row["gold_rubric"], "gold_rubric")
    return out


def _from_mapping(row: Mapping[str, Any], index: int, mapping: Mapping[str, str], default_domain: str | None):
    out: dict[str, Any] = {}
    for ours in _TASK_FIELDS:
        theirs = mapping.get(ours, ours)
        if theirs in row:
            out[ours] = row[theirs]
    out = _drop_arrow_nulls(out)  # a mapped rubric column of a `datasets` table has Arrow's None-filled keys
    out.setdefault("id", f"task-{index:06d}")
    out["id"] = str(out["id"])
    if default_domain and not out.get("domain"):
        out["domain"] = default_domain
    for name in _RUBRIC_FIELDS:
        if isinstance(out.get(name), str):
            try:
                out[name] = json.loads(out[name])
            except json.JSONDecodeError as e:
                raise _RowProblem(f"{name} column is a string but not JSON: {e.msg}") from None
    return out


class _RowProblem(ValueError):
    """A row that cannot even be mapped to the task fields."""


def _loc_name(loc: tuple[Any, ...], raw: Mapping[str, Any]) -> str:
    parts: list[str] = []
    i = 0
    while i < len(loc):
        part = loc[i]
        if part in _RUBRIC_FIELDS and i + 1 < len(loc) and isinstance(loc[i + 1], int):
            rubric = raw.get(part) if isinstance(raw, Mapping) else None
            idx = loc[i + 1]
            cid = None
            if isinstance(rubric, list) and idx < len(rubric) and isinstance(rubric[idx], dict):
                cid = rubric[idx].get("id")
            gold = "gold " if part == "gold_rubric" else ""
            parts.append(f"{gold}criterion {idx + 1}" + (f" ({cid!r})" if cid else ""))
            i += 2
            continue
        if isinstance(part, str) and part in CHECK_TYPES:  # pydantic's union branch name: not useful
            i += 1
            continue
        parts.append(str(part))
        i += 1
    return " ".join(parts) if parts else "row"


def _explain(err: ValidationError, raw: Mapping[str, Any]) -> str:
    """One readable sentence per pydantic error, joined: what is wrong and where."""
    msgs: list[str] = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        where = _loc_name(loc, raw)
        typ = e["type"]
        if loc and loc[0] == "prompt" and len(loc) > 1 and not isinstance(loc[1], int):
            msgs.append("prompt must be text or a list of {role, content} chat messages")
        elif typ == "missing":
            msgs.append(f"missing {where}")
        elif typ == "extra_forbidden":
            field_name = loc[-1]
            hint = " (put free data under 'metadata')" if len(loc) == 1 else ""
            msgs.append(f"unknown field {field_name!r} in {_loc_name(loc[:-1], raw)}{hint}")
        elif typ in ("union_tag_invalid", "union_tag_not_found"):
            tag = (e.get("ctx") or {}).get("tag")
            valid = ", ".join(sorted(CHECK_TYPES))
            got = f"unknown programmatic check {tag!r}" if tag else "check has no 'type'"
            msgs.append(f"{where}: {got} (valid types: {valid})")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if where.endswith(" prompt") or where == "prompt":
                msg = msg if "prompt" in msg else f"prompt: {msg}"
                msgs.append(msg)
            elif where in _RUBRIC_FIELDS:
                msgs.append(msg)
            else:
                msgs.append(f"{where}: {msg}")
    # a chat-list prompt that is a plain string fails both union branches: keep one message
    return "; ".join(dict.fromkeys(msgs))


def row_to_task(
    row: Mapping[str, Any],
    index: int,
    fmt: str = "harnessrl",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
) -> Task:
    """Build one task from one raw row; raises ``ValueError`` with a readable reason."""
    if fmt == "rar":
        data = _from_rar(row, index, default_domain)
    elif fmt == "hf":
        data = _from_mapping(row, index, mapping or {}, default_domain)
    elif fmt == "harnessrl":
        data = dict(row)
        if default_domain and not data.get("domain"):
            data["domain"] = default_domain
    else:
        raise HarnessRLError(f"unknown data format {fmt!r}; use one of: {', '.join(FORMATS)}")
    try:
        return Task.model_validate(data)
    except ValidationError as e:
        raise _RowProblem(_explain(e, data)) from None


def validate_rows(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    source: str,
    fmt: Format = "auto",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
    read_errors: list[RowError] | None = None,
) -> ValidationReport:
    """Check every row; collect the good tasks and one error per bad row (plus duplicate ids)."""
    rows = list(rows)
    if fmt == "auto":
        fmt = "rar" if rows and _looks_like_rar(rows[0][1]) else "harnessrl"
    report = ValidationReport(source=source, format=fmt, errors=list(read_errors or []))
    first_line: dict[str, int] = {}
    for index, (line, row) in enumerate(rows):
        raw_id = row.get("id") if isinstance(row, Mapping) else None
        try:
            task = row_to_task(row, index, fmt, mapping, default_domain)
        except _RowProblem as e:
            report.errors.append(RowError(line, str(e), str(raw_id) if raw_id is not None else None))
            continue
        if task.id in first_line:
            report.errors.append(
                RowError(line, f"duplicate task id (first seen on line {first_line[task.id]})", task.id)
            )
            continue
        first_line[task.id] = line
        report.tasks.append(task)
    report.errors.sort(key=lambda e: e.line)
    return report


def validate_file(
    path: str | Path,
    fmt: Format = "auto",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
) -> ValidationReport:
    """Validate a JSONL or parquet file; see the module docstring for the formats."""
    rows, read_errors = read_rows(path)
    return validate_rows(rows, str(path), fmt, mapping, default_domain, read_errors)


def load_tasks(
    path: str | Path,
    fmt: Format = "auto",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
) -> list[Task]:
    """Load every task of a file, or raise :class:`DataValidationError` listing each bad row."""
    return validate_file(path, fmt, mapping, default_domain).raise_if_invalid()


def load_hf_dataset(
    dataset: Any,
    mapping: Mapping[str, str] | None = None,
    fmt: Literal["hf", "rar"] = "hf",
    default_domain: str | None = None,
    source: str = "dataset",
) -> list[Task]:
    """Load tasks from a ``datasets.Dataset`` (or any iterable of dicts) with a column mapping.

    ``mapping`` maps our field names (id, domain, prompt, reference_answer, rubric, metadata) to the
    dataset's columns; unmapped fields are looked up under their own name. Pass ``fmt="rar"`` for a
    dataset in the RaR layout (e.g. a downloaded RaR-Medicine split).
    """
    rows = [(i, _drop_arrow_nulls(dict(r))) for i, r in enumerate(dataset, start=1)]
    errors = [] if rows else [RowError(0, "dataset is empty: it holds no tasks")]
    return validate_rows(rows, source, fmt, mapping, default_domain, errors).raise_if_invalid()
