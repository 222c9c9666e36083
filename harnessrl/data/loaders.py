"""Load tasks from our JSONL, the public rubric sets' own layouts (JSONL or parquet), or any `datasets` dataset.

Every loader goes through :func:`validate_rows`, which checks each row on its own and reports
*each* bad row with its line (or row) number and a reason, then checks ids across rows. Nothing
trains on a file with a bad row: :func:`load_tasks` raises :class:`DataValidationError` listing them.

Formats:

- ``harnessrl``: one :class:`~harnessrl.data.schema.Task` per line, as JSON.
- ``hf``: any table with a column mapping (``{"prompt": "question", "rubric": "criteria", ...}``).
- a preset (:data:`PRESETS`): a public set's layout, as a column mapping plus the per-row conversion
  of its rubric items, reference and tags: ``rar`` (RaR-Medicine, RaR-Science), ``rubrichub``
  (RubricHub), ``openrubrics`` (OpenRubrics, OpenRubric-v2), ``healthbench`` (HealthBench-style
  criteria with points and tags), ``rlvr-ifeval`` (prompts with IFEval instruction ids as ground truth,
  graded by the ``ifeval`` check). Each preset's docstring says where its layout was taken from.
- ``auto``: the layout the first row's columns point to (:func:`detect_format`): ``harnessrl`` when they are
  all our task fields, else the preset whose own columns and criterion shape it has, else ``harnessrl``. A file
  read so whose rows fail says which layout it was taken for and why (``ValidationReport.format_note``).

A row that lacks a column its layout reads is refused naming the field, the column it is read from and the
columns the row has, so a file in another layout (or with a renamed column) is told apart from a broken row.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import JsonValue, ValidationError

from harnessrl.data import ifeval
from harnessrl.data.checks import CHECK_TYPES
from harnessrl.data.schema import Task
from harnessrl.errors import ConfigError, DataValidationError, HarnessRLError, RowError

__all__ = [
    "FILE_FORMATS",
    "FORMATS",
    "PRESETS",
    "DataSummary",
    "DetectedFormat",
    "Preset",
    "Row",
    "TaskFields",
    "ValidationReport",
    "detect_format",
    "load_hf_dataset",
    "load_tasks",
    "read_rows",
    "row_to_task",
    "validate_file",
    "validate_rows",
]

Row = dict[str, JsonValue]
"""A dataset row as read, before it is validated into a :class:`~harnessrl.data.schema.Task`: a JSON line, or a parquet
or ``datasets`` row (its columns as Python reads them from Arrow)."""

TaskFields = dict[str, JsonValue]
"""A row's task fields (``id``, ``domain``, ``prompt``, ``rubric``, ...) as its layout maps them, for
:class:`~harnessrl.data.schema.Task` to validate."""


class CriteriaPerTask(TypedDict):
    min: int
    mean: float
    max: int


class DataSummary(TypedDict):
    """What :meth:`ValidationReport.summary` counts."""

    tasks: int
    domains: dict[str, int]
    criteria: int
    criteria_per_task: CriteriaPerTask
    pitfall_share: float
    programmatic_share: float
    with_reference: int
    with_gold_rubric: int


_TASK_FIELDS = ("id", "domain", "prompt", "reference_answer", "rubric", "gold_rubric", "metadata")
_RUBRIC_FIELDS = ("rubric", "gold_rubric")


@dataclass
class ValidationReport:
    """What validating a file found: the good tasks, and one error per bad row."""

    source: str
    tasks: list[Task] = field(default_factory=list)
    errors: list[RowError] = field(default_factory=list)
    format: str = "harnessrl"
    format_note: str | None = None  # how --format auto chose the layout, said beside bad rows

    @property
    def ok(self) -> bool:
        return not self.errors

    def raise_if_invalid(self, check_command: str | None = None) -> list[Task]:
        """The tasks, or :class:`DataValidationError` listing every bad row; ``check_command``: what checks the
        rows again (default: ``harnessrl data validate <source>``, for a file)."""
        if self.errors:
            raise DataValidationError(self.source, self.errors, check_command, note=self.format_note)
        return self.tasks

    def summary(self) -> DataSummary:
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


def read_rows(path: str | Path) -> tuple[list[tuple[int, Row]], list[RowError]]:
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
    rows: list[tuple[int, Row]] = []
    errors: list[RowError] = []
    try:  # utf-8-sig: a leading byte-order mark (Windows editors write one) is read as nothing
        text = path.read_text(encoding="utf-8-sig")
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


def _drop_arrow_nulls(row: JsonValue) -> JsonValue:
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


def _rar_criteria(rubric_in: JsonValue, name: str = "rubric") -> list[JsonValue]:
    """RaR's ``[{title, description, weight}]`` as our criteria (an item with an ``id`` or a ``check`` is
    already in our schema and passes through)."""
    if rubric_in is None:
        if name == "rubric":
            raise _MissingColumn("rubric", ("rubric",))
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


def _from_mapping(row: Mapping[str, JsonValue], index: int, mapping: Mapping[str, str], default_domain: str | None):
    out: TaskFields = {}
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


class _MissingColumn(_RowProblem):
    """A row without the column(s) its layout reads ``field`` from: :func:`row_to_task` says which, and lists the
    columns the row has (a file in another layout, or a renamed column, is then plain to see)."""

    def __init__(self, field: str, columns: tuple[str, ...], what: str = ""):
        super().__init__(f"missing {field}")
        self.field, self.columns, self.what = field, columns, what


def _columns_of(row: Mapping[str, JsonValue], limit: int = 20) -> str:
    """The columns a row has, as a message lists them (the first ``limit``)."""
    names = [repr(str(k)) for k in row]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return (", ".join(names[:limit]) + more) if names else "none"


def _missing_column_text(
    reader: str, columns: tuple[str, ...], row: Mapping[str, JsonValue], known: Iterable[str] = ()
) -> str:
    """Why a field is missing: the column(s) ``reader`` (``the rar format``) reads it from, the row's columns, and
    the closest of them to what was asked, when one is close (``rubrics`` for ``rubric``) and is not a column the
    layout reads for something else (``known``)."""
    import difflib

    read_from = " or ".join(repr(c) for c in columns)
    text = f"{reader} reads it from the column {read_from}, which this row lacks; the row's columns: {_columns_of(row)}"
    others = [str(k) for k in row if str(k) not in set(known)]
    close = [m for c in columns for m in difflib.get_close_matches(c, others, n=1, cutoff=0.75)]
    return text + (f"; did you mean {close[0]!r}?" if close else "")


# ------------------------------------------------------------------------------------------ presets
@dataclass(frozen=True)
class Preset:
    """A public rubric set's layout, read the way the ``hf`` format reads a table: ``columns`` maps our fields to
    the set's columns, then ``convert`` turns the row's own shapes (rubric items, reference, tags) into ours.

    ``domain``: the domain of a row that names none when no default domain is given. ``markers``: columns only
    this layout has, and ``item_keys``: the keys of its criteria, by which ``--format auto`` recognises it.
    """

    name: str
    columns: Mapping[str, str]
    convert: Callable[[TaskFields, Mapping[str, JsonValue]], TaskFields]
    domain: str = "general"
    markers: frozenset[str] = frozenset()
    item_keys: frozenset[str] = frozenset()


def _known_columns(preset: Preset) -> set[str]:
    """The columns a preset reads or recognises."""
    return {*preset.columns.values(), *preset.markers}


def _from_preset(preset: Preset, row: Mapping[str, JsonValue], index: int, default_domain: str | None) -> TaskFields:
    out = {ours: row[theirs] for ours, theirs in preset.columns.items() if row.get(theirs) is not None}
    out["domain"] = out.get("domain") or default_domain
    out = preset.convert(out, row)
    out["id"] = str(out.get("id") or f"{preset.name}-{index:06d}")
    out["domain"] = str(out.get("domain") or preset.domain)
    return out


def _from_rar(out: TaskFields, row: Mapping[str, JsonValue]) -> TaskFields:
    """RaR (RaR-Medicine, RaR-Science, arXiv 2507.17746; their dataset cards): ``question``, ``reference_answer``,
    ``question_source`` (the domain of a row that names none), ``rubric`` (``[{title, description, weight}]``:
    the text is the description, the title when it is empty; the titles kept in ``metadata.criterion_titles``),
    ``rubric_list``, ``rubric_count``. A ``gold_rubric`` in either shape is read too."""
    rubric_in = out.get("rubric")
    out["rubric"] = _rar_criteria(rubric_in)
    source = row.get("question_source") or None
    out["domain"] = out.get("domain") or source
    meta: dict[str, JsonValue] = {"question_source": source} if source else {}
    titles = [it.get("title") for it in rubric_in or [] if isinstance(it, dict)]
    if any(titles):
        meta["criterion_titles"] = titles
    out["metadata"] = meta
    if out.get("gold_rubric") is not None:
        out["gold_rubric"] = _rar_criteria(out["gold_rubric"], "gold_rubric")
    return out


def _criteria_list(value: JsonValue, name: str, shape: str, columns: tuple[str, ...] = ()) -> list[JsonValue]:
    """A rubric column as a list (JSON text of one is read); ``columns``: where the layout reads it from."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise _RowProblem(f"{name} is text but not JSON: {e.msg}") from None
    if value is None:
        raise _MissingColumn("rubric", columns or (name,), f"a list of {shape}")
    if not isinstance(value, list):
        raise _RowProblem(f"{name} must be a list of {shape}, got {type(value).__name__}")
    return value


def _points_criteria(
    rubric_in: JsonValue, name: str, columns: tuple[str, ...] = ()
) -> tuple[list[TaskFields], list[JsonValue]]:
    """``[{criterion, points, tags}]`` (HealthBench, RubricHub) as our criteria: the points are the weight as they
    are (negative points: a criterion the response must not meet, the schema's pitfall), the criterion is the
    text; the tags come back apart, one entry per criterion, for the task's metadata."""
    criteria, tags = [], []
    for i, item in enumerate(_criteria_list(rubric_in, name, "{criterion, points}", columns), start=1):
        if not isinstance(item, dict):
            raise _RowProblem(f"{name} item {i} must be an object with criterion and points")
        if item.get("points") is None:
            raise _RowProblem(f"{name} item {i} has no points")
        criteria.append({"id": f"c{i}", "text": item.get("criterion") or "", "weight": item["points"]})
        tags.append(item.get("tags"))
    return criteria, tags


def _from_rubrichub(out: TaskFields, row: Mapping[str, JsonValue]) -> TaskFields:
    """RubricHub (sojuL/RubricHub_v1, arXiv 2601.08430; its ``RuRL/rurbichub_v1_*.parquet`` files, in verl's
    layout): ``prompt`` (chat messages), ``Rubrics`` (``[{criterion, points}]``), mirrored with each criterion's
    ``tags`` (``{verifier, function, parameters}``) under ``reward_model.rubrics``, read first; ``ability`` and
    ``data_source`` (the domain: chat, Instruction_Following, Medical, Science, Writing), ``reward_model.
    ground_truth`` (empty in the release: no reference answer), ``extra_info``. A criterion tagged
    ``verifier: rule`` names one of RubricHub's own rule functions, which are not released: it is judged on its
    text here, its tags kept in ``metadata.criterion_tags``."""
    reward = row.get("reward_model") if isinstance(row.get("reward_model"), Mapping) else {}
    rubric = reward.get("rubrics") if reward.get("rubrics") is not None else out.get("rubric")
    out["rubric"], tags = _points_criteria(rubric, "Rubrics", ("reward_model.rubrics", "Rubrics"))
    if isinstance(reward.get("ground_truth"), str) and reward["ground_truth"].strip():
        out["reference_answer"] = reward["ground_truth"]
    meta: dict[str, JsonValue] = {"data_source": row["data_source"]} if row.get("data_source") else {}
    if any(tags):
        meta["criterion_tags"] = tags
    out["metadata"] = meta
    return out


_RUBRIC_LINE = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(?P<text>\S.*?)\s*$")
_RUBRIC_KIND = re.compile(r"\s*\[(?P<kind>[^\[\]]+)\]\s*$")


def _from_openrubrics(out: TaskFields, row: Mapping[str, JsonValue]) -> TaskFields:
    """OpenRubrics (OpenRubrics/OpenRubrics and OpenRubric-v2, arXiv 2510.07743; the dataset cards and the
    repository's scripts): ``instruction`` (the prompt), ``rubric`` (text: one numbered criterion a line, each
    ending in its kind, ``[Hard Rule]`` or ``[Principle]``; lines that continue an item are joined to it),
    ``source`` (the corpus of the prompt, the domain of a row that names none), and v2's ``response_a``,
    ``response_b``, ``winner`` (a preference pair, not a reference answer: not read). The layout gives no
    weights: each criterion weighs 1, its kind kept in ``metadata.criterion_tags`` (OpenRubrics' judge reads a
    hard rule as a must-pass gate, which a weight cannot say)."""
    text = out.get("rubric")
    if isinstance(text, list) and all(isinstance(t, str) for t in text):
        lines = [t if _RUBRIC_LINE.match(t) else f"- {t}" for t in text]
    elif isinstance(text, str):
        lines = text.splitlines()
    elif text is None:
        raise _MissingColumn("rubric", ("rubric",), "the rubric text, one numbered criterion a line")
    else:
        raise _RowProblem(f"rubric must be the rubric text (one numbered criterion a line), got {type(text).__name__}")
    items: list[str] = []
    for line in lines:
        m = _RUBRIC_LINE.match(line)
        if m:
            items.append(m.group("text"))
        elif items and line.strip():
            items[-1] = f"{items[-1]} {line.strip()}"
    if not items:
        raise _RowProblem("rubric text has no numbered criteria (e.g. '1. The response lists five items. [Hard Rule]')")
    criteria, kinds = [], []
    for i, item in enumerate(items, start=1):
        kind = _RUBRIC_KIND.search(item)
        kinds.append(kind.group("kind").strip().lower().replace(" ", "_") if kind else None)
        criteria.append({"id": f"c{i}", "text": item[: kind.start()] if kind else item, "weight": 1})
    out["rubric"] = criteria
    out["domain"] = out.get("domain") or row.get("source")
    meta: dict[str, JsonValue] = {"source": row["source"]} if row.get("source") else {}
    if any(kinds):
        meta["criterion_tags"] = kinds
    out["metadata"] = meta
    return out


def _from_healthbench(out: TaskFields, row: Mapping[str, JsonValue]) -> TaskFields:
    """HealthBench (openai/simple-evals ``healthbench_eval.py`` and its JSONL files): ``prompt_id``, ``prompt``
    (chat messages ending with the user's turn), ``rubrics`` (``[{criterion, points, tags}]``; points may be
    negative), ``example_tags`` (``theme:…``, ``physician_agreed_category:…``), ``ideal_completions_data``
    (null, or a physician's ``ideal_completion``: the reference answer), ``canary``. HealthBench scores a
    response as the points of the criteria it meets over the sum of the positive points, clipped to [0, 1]:
    the reward of docs/design.md §4 with the points as weights. The tags go to ``metadata.example_tags`` and
    ``metadata.criterion_tags``."""
    out["rubric"], tags = _points_criteria(out.get("rubric"), "rubrics")
    ideal = row.get("ideal_completions_data")
    meta: dict[str, JsonValue] = {}
    if isinstance(ideal, Mapping):
        out["reference_answer"] = ideal.get("ideal_completion")
        if ideal.get("ideal_completions_group"):
            meta["ideal_completions_group"] = ideal["ideal_completions_group"]
    if row.get("example_tags"):
        meta["example_tags"] = list(row["example_tags"])
    if any(tags):
        meta["criterion_tags"] = tags
    out["metadata"] = meta
    return out


def _ifeval_ground_truth(value: JsonValue) -> list[tuple[str, JsonValue]]:
    """open-instruct's ground truth as (instruction id, kwargs) pairs."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            try:
                value = ast.literal_eval(value)  # open-instruct writes some labels as Python literals
            except (ValueError, SyntaxError):
                raise _RowProblem("ground_truth is text but neither JSON nor a Python literal") from None
    pairs: list[tuple[str, JsonValue]] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except json.JSONDecodeError:
                raise _RowProblem("ground_truth holds a text item that is not JSON") from None
        if not isinstance(item, Mapping):
            raise _RowProblem('ground_truth must be {"instruction_id": [...], "kwargs": [...]} or a list of them')
        if "func_name" in item:
            raise _RowProblem(
                f"ground_truth names open-instruct's own check {item['func_name']!r} (the Tulu 3 layout of "
                "allenai/RLVR-IFeval), not an IFEval instruction id: its grading is open-instruct's rewrite, which "
                'HarnessRL does not reproduce; give {"instruction_id": [...], "kwargs": [...]} '
                "(the layout of allenai/IF_multi_constraints_upto5)"
            )
        ids, kwargs = item.get("instruction_id"), item.get("kwargs")
        if isinstance(ids, str):
            ids, kwargs = [ids], [kwargs]
        if not isinstance(ids, list) or not isinstance(kwargs, list) or len(ids) != len(kwargs):
            raise _RowProblem("ground_truth needs 'instruction_id' and 'kwargs': two lists of the same length")
        pairs.extend(zip(ids, kwargs, strict=True))
    if not pairs:
        raise _RowProblem("ground_truth names no instruction")
    return pairs


def _from_rlvr_ifeval(out: TaskFields, row: Mapping[str, JsonValue]) -> TaskFields:
    """Prompts whose ground truth is IFEval or IFBench instructions, in open-instruct's layout (allenai/open-instruct
    ``ground_truth_utils.IFEvalVerifier``; e.g. allenai/IF_multi_constraints_upto5): ``messages`` (chat messages;
    or ``prompt``, text), ``ground_truth`` (JSON or Python-literal text of ``[{"instruction_id": [...], "kwargs":
    [...]}]``, or one such object), ``key``, ``dataset``, ``constraint_type``, ``constraint``. The benchmarks' own
    rows (google/IFEval, allenai/IFBench_test: ``key``, ``prompt``, ``instruction_id_list``, ``kwargs``) read the
    same. Each instruction is a criterion of weight 1, in the benchmark's words, with an ``ifeval`` check:
    open-instruct's reward is the share of instructions followed, the reward of docs/design.md §4 with equal
    weights. The layout has no reference answer and the schema's is optional: these tasks have none
    (``reference_answer: null``), which rubrics of checks alone never read. The Tulu 3 release of
    allenai/RLVR-IFeval holds ``{"func_name": ...}`` instead, open-instruct's own rewritten checks: refused."""
    if out.get("prompt") is None:
        out["prompt"] = row.get("prompt")
    truth = row.get("ground_truth")
    if truth is None and row.get("instruction_id_list") is not None:
        truth = {"instruction_id": row["instruction_id_list"], "kwargs": row.get("kwargs")}
    if truth is None:
        raise _MissingColumn("rubric", ("ground_truth", "instruction_id_list"), "the instruction ids and their kwargs")
    criteria = []
    for i, (iid, kwargs) in enumerate(_ifeval_ground_truth(truth), start=1):
        kwargs = {} if kwargs is None else kwargs  # not an object: the check says what is wrong
        text = ifeval.describe(str(iid), dict(kwargs)) if isinstance(kwargs, Mapping) else None
        check = {"type": "ifeval", "instruction_id": iid, "kwargs": kwargs}
        criteria.append({"id": f"c{i}", "text": text or str(iid), "weight": 1, "check": check})
    out["rubric"] = criteria
    out["metadata"] = {k: row[k] for k in ("dataset", "constraint_type", "constraint") if row.get(k)}
    return out


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "rar",
            {
                "id": "id",
                "domain": "domain",
                "prompt": "question",
                "reference_answer": "reference_answer",
                "rubric": "rubric",
                "gold_rubric": "gold_rubric",
            },
            _from_rar,
            markers=frozenset({"question", "question_source", "rubric_list", "rubric_count"}),
            item_keys=frozenset({"title", "description"}),
        ),
        Preset(
            "rubrichub",
            {"prompt": "prompt", "rubric": "Rubrics", "domain": "ability"},
            _from_rubrichub,
            markers=frozenset({"Rubrics", "reward_model", "ability", "data_source", "extra_info"}),
            item_keys=frozenset({"criterion", "points"}),
        ),
        Preset(
            "openrubrics",
            {"id": "id", "prompt": "instruction", "rubric": "rubric"},
            _from_openrubrics,
            markers=frozenset({"instruction", "response_a", "response_b", "winner"}),
        ),
        Preset(
            "healthbench",
            {"id": "prompt_id", "prompt": "prompt", "rubric": "rubrics"},
            _from_healthbench,
            "health",
            markers=frozenset({"prompt_id", "rubrics", "example_tags", "ideal_completions_data", "canary"}),
            item_keys=frozenset({"criterion", "points"}),
        ),
        Preset(
            "rlvr-ifeval",
            {"id": "key", "prompt": "messages"},
            _from_rlvr_ifeval,
            "instruction_following",
            markers=frozenset({"ground_truth", "messages", "instruction_id_list", "constraint_type", "constraint"}),
        ),
    )
}
"""The public rubric sets read in their own layout, by name (``--format``, ``data.format``)."""

FORMATS: tuple[str, ...] = ("auto", "harnessrl", "hf", *PRESETS)
FILE_FORMATS: tuple[str, ...] = ("auto", "harnessrl", *PRESETS)
"""The formats a file is read in without a column mapping (the command line's and a run config's)."""
Format = Literal[FORMATS]  # type: ignore[valid-type]


@dataclass(frozen=True)
class DetectedFormat:
    """What ``--format auto`` took a file for, and the evidence: the first row's columns (and criterion keys)
    that only that layout has; none for our own format."""

    format: str
    evidence: tuple[str, ...] = ()
    sure: bool = True  # False: no layout matched, read as ours by default

    def note(self) -> str:
        """The sentence printed beside a file's bad rows."""
        others = ", ".join(f for f in FILE_FORMATS if f not in ("auto", self.format))
        if self.format == "harnessrl":
            how = "its columns match no preset's layout" if not self.sure else "its columns are all HarnessRL's"
            return (
                f"--format auto read this file as HarnessRL's own format ({how}); if it is a public set's layout, "
                f"pass --format with its preset ({others})"
            )
        return (
            f"--format auto took this file for the {self.format} layout (its first row has "
            f"{', '.join(self.evidence)}); if it is in another layout, pass --format ({others})"
        )


def detect_format(row: Mapping[str, JsonValue]) -> DetectedFormat:
    """The layout a row's columns point to: ours when they are all our task fields; else the preset with the most
    evidence, a column only it has counting 1 and criteria with its keys 2, when that comes to 2 or more (one
    column alone is too little to read a file by); else ours, unsure."""
    keys = {str(k) for k in row} if isinstance(row, Mapping) else set()
    items = [it for v in (row.values() if isinstance(row, Mapping) else ()) if isinstance(v, list) for it in v]
    item_keys = {str(k) for it in items if isinstance(it, Mapping) for k in it}
    preset_item_keys = {k for p in PRESETS.values() for k in p.item_keys}
    if keys and keys <= set(_TASK_FIELDS) and not item_keys & preset_item_keys:
        return DetectedFormat("harnessrl")
    best: tuple[int, str, tuple[str, ...]] = (0, "harnessrl", ())
    for preset in PRESETS.values():
        columns = sorted(keys & preset.markers)
        shape = sorted(item_keys & preset.item_keys)
        evidence = tuple(f"{c!r}" for c in columns) + ((f"criteria with {'/'.join(shape)}",) if shape else ())
        score = len(columns) + 2 * bool(shape)
        if isinstance(row.get("rubric"), str) and preset.name == "openrubrics":
            score, evidence = score + 2, (*evidence, "a rubric written as text")
        if score > best[0]:
            best = (score, preset.name, evidence)
    score, name, evidence = best
    return DetectedFormat(name, evidence) if score >= 2 else DetectedFormat("harnessrl", sure=False)


def _loc_name(loc: tuple[Any, ...], raw: Mapping[str, JsonValue]) -> str:
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


def _explain(err: ValidationError, raw: Mapping[str, JsonValue], columns: Mapping[str, str] | None = None) -> str:
    """One readable sentence per pydantic error, joined: what is wrong and where. ``columns``: where each of our
    fields is read from in the user's layout (a preset's or a mapping's), named beside a missing field."""
    msgs: list[str] = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        where = _loc_name(loc, raw)
        typ = e["type"]
        if loc and loc[0] == "prompt" and len(loc) > 1 and not isinstance(loc[1], int):
            msgs.append("prompt must be text or a list of {role, content} chat messages")
        elif typ == "missing":
            column = (columns or {}).get(str(loc[0])) if len(loc) == 1 else None
            msgs.append(f"missing {where}" + (f" ({column})" if column else ""))
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
    row: Mapping[str, JsonValue],
    index: int,
    fmt: str = "harnessrl",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
) -> Task:
    """Build one task from one raw row; raises ``ValueError`` with a readable reason."""
    columns: dict[str, str] = {}  # where the user's layout reads each field: named beside a missing one
    if fmt in PRESETS:
        try:
            data = _from_preset(PRESETS[fmt], row, index, default_domain)
        except _MissingColumn as e:
            what = f", {e.what}" if e.what else ""
            why = _missing_column_text(f"the {fmt} format", e.columns, row, _known_columns(PRESETS[fmt]))
            raise _RowProblem(f"missing {e.field}{what} ({why})") from None
        for ours, theirs in PRESETS[fmt].columns.items():
            columns[ours] = _missing_column_text(f"the {fmt} format", (theirs,), row, _known_columns(PRESETS[fmt]))
    elif fmt == "hf":
        data = _from_mapping(row, index, mapping or {}, default_domain)
        for ours, theirs in (mapping or {}).items():
            columns[ours] = _missing_column_text("the mapping", (theirs,), row, (mapping or {}).values())
    elif fmt == "harnessrl":
        data = dict(row)
        if default_domain and not data.get("domain"):
            data["domain"] = default_domain
    else:
        raise HarnessRLError(f"unknown data format {fmt!r}; use one of: {', '.join(FORMATS)}")
    try:
        return Task.model_validate(data)
    except ValidationError as e:
        raise _RowProblem(_explain(e, data, columns)) from None


def validate_rows(
    rows: Iterable[tuple[int, Mapping[str, JsonValue]]],
    source: str,
    fmt: Format = "auto",
    mapping: Mapping[str, str] | None = None,
    default_domain: str | None = None,
    read_errors: list[RowError] | None = None,
) -> ValidationReport:
    """Check every row; collect the good tasks and one error per bad row (plus duplicate ids)."""
    rows = list(rows)
    detected = detect_format(rows[0][1]) if fmt == "auto" and rows else None
    if fmt == "auto":
        fmt = detected.format if detected else "harnessrl"
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
    if detected is not None and report.errors and (detected.format != "harnessrl" or not detected.sure):
        report.format_note = detected.note()
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
    fmt: Format = "hf",
    default_domain: str | None = None,
    source: str = "dataset",
) -> list[Task]:
    """Load tasks from a ``datasets.Dataset`` (or any iterable of dicts) with a column mapping.

    ``mapping`` maps our field names (id, domain, prompt, reference_answer, rubric, metadata) to the
    dataset's columns; unmapped fields are looked up under their own name. Pass a preset's name instead
    (:data:`PRESETS`: ``fmt="rar"`` for a downloaded RaR-Medicine split, ``"healthbench"``, ...) for a dataset
    in that set's own layout.
    """
    rows = [(i, _drop_arrow_nulls(dict(r))) for i, r in enumerate(dataset, start=1)]
    errors = [] if rows else [RowError(0, "dataset is empty: it holds no tasks")]
    if fmt == "hf" and rows:
        names = getattr(dataset, "column_names", None)
        columns = list(names) if isinstance(names, list) else list(dict.fromkeys(k for _, r in rows for k in r))
        _check_columns(columns, mapping or {}, default_domain, source)
    again = f"load_hf_dataset({source}, ...)" if source != "dataset" else "load_hf_dataset(dataset, ...)"
    return validate_rows(rows, source, fmt, mapping, default_domain, errors).raise_if_invalid(again)


_REQUIRED = ("prompt", "rubric", "domain")
"""The fields a task cannot do without (the id is made up when absent)."""


def _check_columns(columns: list[str], mapping: Mapping[str, str], default_domain: str | None, source: str) -> None:
    """Refuse, before any row is read, a mapping that names a column the dataset lacks, or a required field with
    no column to read it from: naming the column, the dataset's columns, and (for the domain) ``default_domain``."""
    problems = []
    for ours in _TASK_FIELDS:
        theirs = mapping.get(ours, ours)
        if theirs in columns or (ours == "domain" and default_domain):
            continue
        if ours in mapping:
            problems.append(f"mapping[{ours!r}] names the column {theirs!r}, which {source} does not have")
        elif ours in _REQUIRED:
            problems.append(f"{source} has no {ours!r} column and the mapping names none for {ours}")
    if not problems:
        return
    fix = "Map each field to one of them (mapping={'prompt': COLUMN, 'rubric': COLUMN, ...})"
    if any("domain" in p for p in problems):
        fix += ", or leave domain out of the mapping and pass default_domain='<domain>' to give every task one"
    unknown = [k for k in mapping if k not in _TASK_FIELDS]
    if unknown:
        fix += f". Unknown fields in the mapping: {unknown} (ours: {', '.join(_TASK_FIELDS)})"
    listed = ", ".join(map(repr, columns)) or "none"
    raise ConfigError(f"{source}: {'; '.join(problems)}. Its columns: {listed}. {fix}")
