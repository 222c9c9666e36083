"""The harness's misfires on failures no prompt states, counted from a run's events (docs/design.md §4, "The reference
as witness"; §8): three decisions the reference evidence exists to prevent.

- ``guidance_toward_suspect``: a guidance commit whose hint quotes a criterion the task's own reference answer fails
  (the witness's ``reference_check`` suspects as they stood, and any exact criterion of the task's rubric whose check
  its reference fails: a run without the witness is counted too);
- ``retired_unmet_reference``: a task retired as solved while its rubric asked for none of the key terms its reference
  states (:func:`~harnessrl.interfaces.induction.reference_terms` finds some, and no ``reference_term_*`` criterion
  was added to it);
- ``stated_check_reverts``: a revert that removes an exact check of a requirement the task's prompt states (and its
  reference meets).

Each is counted once per task it touches. The run's training tasks are read from its config's data (the counts are
None when they cannot be read).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harnessrl.analysis.decisions import UpdateEvent, changed_tasks
from harnessrl.errors import HarnessRLError

if TYPE_CHECKING:
    from harnessrl.data.schema import Task
    from harnessrl.records.run_record import RunConfigView

__all__ = ["MISFIRES", "misfire_counts"]

logger = logging.getLogger(__name__)

MISFIRES = ("guidance_toward_suspect", "retired_unmet_reference", "stated_check_reverts")
"""The counts, in the order a report shows them."""


@functools.lru_cache(maxsize=16)
def _tasks(path: str, mtime: float, fmt: str, domain: str | None) -> dict[str, Task]:
    from harnessrl.data import load_tasks

    return {t.id: t for t in load_tasks(path, fmt, default_domain=domain)}  # type: ignore[arg-type]


def _run_tasks(config: RunConfigView) -> dict[str, Task] | None:
    from harnessrl.data import data_path

    try:
        path = data_path(config.data.train, "train")
        return _tasks(str(path), path.stat().st_mtime, config.data.format, config.data.domain)
    except (HarnessRLError, OSError, ValueError, TypeError) as e:
        logger.warning("misfires of %s not counted: its training tasks are unreadable (%s)", config.run_dir, e)
        return None


def _norm(text: str) -> str:
    return " ".join(str(text).lower().rstrip(".").split())


def _exact_suspects(task: Task) -> set[str]:
    """The texts of the task's version-0 criteria whose exact check its reference answer fails (positive) or commits."""
    ref = task.reference_answer
    if not ref:
        return set()
    out = set()
    for c in task.rubric:
        if c.check is not None and (c.check.evaluate(ref) < 1) == (c.weight > 0):
            out.add(_norm(c.text))
    return out


Criterion = Mapping[str, Any]
"""A criterion a rubric edit adds, as its event carries it (``id``, ``text``, ``check``, ...)."""


def _added(update: Mapping[str, Any], task_id: str) -> list[Criterion]:
    """The criteria a rubric edit adds to ``task_id`` (its own ``add``, or its cover's instance)."""
    if update.get("task_id") == task_id:
        return [c for c in update.get("add") or [] if isinstance(c, dict)]
    for c in update.get("cover") or []:
        if isinstance(c, dict) and c.get("task_id") == task_id:
            return [x for x in c.get("add") or [] if isinstance(x, dict)]
    return []


def misfire_counts(run: Any) -> dict[str, int] | None:
    """The three misfire counts of a run (:data:`MISFIRES`); None when its training tasks cannot be read."""
    from harnessrl.data.checks import read_check
    from harnessrl.data.schema import prompt_text
    from harnessrl.interfaces.induction import reference_terms, stated_keys

    tasks = _run_tasks(run.record.config)
    if tasks is None:
        return None
    counts = dict.fromkeys(MISFIRES, 0)
    suspects = {tid: _exact_suspects(t) for tid, t in tasks.items()}
    added: dict[str, list[Criterion]] = {tid: [] for tid in tasks}  # criteria rubric commits added so far
    commits: dict[str, Mapping[str, Any]] = {}
    for e in run.record.events_of("reference_check", "commit", "revert"):
        data = e.model_dump()
        if e.kind == "reference_check":
            for tid, found in (data.get("suspects") or {}).items():
                if tid in suspects:
                    suspects[tid] |= {_norm(s.get("text", "")) for s in found if isinstance(s, dict)}
            continue
        update = data.get("update") or {}
        cid = data.get("candidate_id")
        touched = [t for t in changed_tasks(UpdateEvent.parse(e), run.train_domains) if t in tasks]
        if e.kind == "commit":
            commits[str(cid)] = update
            interface = data.get("interface")
            if interface == "rubric_criteria":
                for tid in touched:
                    added[tid] += _added(update, tid)
            elif interface == "rollout_guidance":
                hint = _norm(update.get("text") or "")
                counts["guidance_toward_suspect"] += sum(
                    bool(hint) and any(s and s in hint for s in suspects[tid]) for tid in touched
                )
            elif interface == "task_sampling" and update.get("action") == "retire":
                for tid in touched:
                    task = tasks[tid]
                    if any(str(c.get("id", "")).startswith("reference_term_") for c in added[tid]):
                        continue
                    checks = [c.check for c in task.rubric if c.check]
                    checks += [ch for c in added[tid] if (ch := read_check(c.get("check"))) is not None]
                    if task.reference_answer and reference_terms(
                        prompt_text(task.prompt), task.reference_answer, (), checks
                    ):
                        counts["retired_unmet_reference"] += 1
        else:  # a revert: the updates that restore what a probation replaced
            original = commits.get(str(cid).removesuffix("-revert"), {})
            for u in data.get("updates") or []:
                tid = u.get("task_id")
                if tid not in tasks or not u.get("remove"):
                    continue
                task = tasks[tid]
                stated = stated_keys(prompt_text(task.prompt))
                removed = [c for c in _added(original, tid) if c.get("id") in u["remove"]]
                if any(
                    (ch := read_check(c.get("check"))) is not None and ch.requirement_key() in stated for c in removed
                ):
                    counts["stated_check_reverts"] += 1
    return counts
