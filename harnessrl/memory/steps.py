"""The ``steps`` collection: one record per task group per training step (:class:`StepMemory`).

The document is the :class:`~harnessrl.records.steps.GroupRecord` summary plus the failures detected on
the group (and optionally the task's prompt); the metadata holds the group statistics, so a task's
history is a metadata filter and similar situations on other tasks are a semantic search. Ids are
``"{step}:{task_id}"`` (``#1``, ``#2``... for a task drawn twice in one step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl.memory.chroma import ChromaCollections
from harnessrl.memory.codec import Metadata, dumps, finite, loads, similarity_of
from harnessrl.memory.entries import StepEntry
from harnessrl.memory.filters import MetaFilter, at_least, equals, not_equal
from harnessrl.records.steps import GroupRecord, StepRecord

__all__ = ["StepMemory"]


class StepMemory(ChromaCollections):
    """Writes and reads the ``steps`` collection: a step's groups, a task's history, similar situations."""

    @staticmethod
    def _step_ids(groups: Sequence[GroupRecord]) -> list[str]:
        """``"{step}:{task_id}"``; a task drawn twice in one step gets ``#1``, ``#2``... (deterministic)."""
        seen: dict[str, int] = {}
        ids = []
        for g in groups:
            base = f"{g.step}:{g.task_id}"
            k = seen.get(base, 0)
            seen[base] = k + 1
            ids.append(base if k == 0 else f"{base}#{k}")
        return ids

    @staticmethod
    def _step_record(g: GroupRecord, failures: Sequence[str], task_text: str | None) -> tuple[str, Metadata]:
        kinds = sorted(dict.fromkeys(failures))
        doc = g.summary()
        if kinds:
            doc += "; failures: " + ", ".join(k.replace("_", " ") for k in kinds)
        if task_text:
            doc += f"; task: {task_text.strip()[:1000]}"
        md: Metadata = {
            "step": int(g.step),
            "task_id": g.task_id,
            "domain": g.domain,
            "rubric_version": int(g.rubric_version),
            "mean": finite(g.mean),
            "std": finite(g.std),
            "flat": bool(g.flat),
            "guided": int(g.guided),
            "temperature": finite(g.temperature),
            "guidance": g.guidance or None,
            "mean_length": finite(np.mean(g.lengths)) if g.lengths else None,
            "missing": int(g.missing),
            "reference_reward": finite(g.reference_reward),
            "criterion_means": dumps(g.criterion_means),
            "rewards": dumps(g.rewards),
            "failures": ",".join(kinds),
            "has_failure": bool(kinds),
            "trained": bool(g.trained),
        }
        for k in kinds:
            md[f"fail_{k}"] = True
        return doc, md

    def add_step(
        self,
        record: StepRecord,
        failures_by_task: Mapping[str, Sequence[str]] | None = None,
        task_texts: Mapping[str, str] | None = None,
        embeddings: np.ndarray | None = None,
    ) -> list[str]:
        """Store every group a step graded (:attr:`StepRecord.observed`), in one upsert: a retried write replaces,
        never duplicates.

        ``failures_by_task`` maps a task id to the kinds of failure detected on it at this step (stored
        as a comma-separated ``failures`` string and one ``fail_<kind>: True`` flag each);
        ``task_texts`` optionally adds each task's prompt to the embedded text (for cross-task search);
        ``embeddings`` (one row per group) skips the embedding model, for bulk loading. Returns the ids."""
        groups = record.observed  # DAPO's dropped groups too (``trained`` false in their metadata)
        if not groups:
            return []
        failures_by_task = failures_by_task or {}
        task_texts = task_texts or {}
        ids = self._step_ids(groups)
        docs, mds = [], []
        for g in groups:
            doc, md = self._step_record(g, failures_by_task.get(g.task_id, ()), task_texts.get(g.task_id))
            docs.append(doc)
            mds.append(md)
        # a rewrite must drop failure flags the earlier version had (an upsert merges metadata keys)
        old = self.collection("steps").get(ids=ids, include=["metadatas"])
        stale = {i: m for i, m in zip(old["ids"], old["metadatas"], strict=True) if m}
        for i, md in zip(ids, mds, strict=True):
            for k in stale.get(i, {}):
                if k.startswith("fail_") and k not in md:
                    md[k] = None
        self._upsert("steps", ids, docs, mds, embeddings)
        return ids

    @staticmethod
    def _to_step(id_: str, doc: str | None, md: Mapping[str, Any], distance: float | None = None) -> StepEntry:
        fails = md.get("failures") or ""
        return StepEntry(
            id=id_,
            step=md["step"],
            task_id=md["task_id"],
            domain=md.get("domain", ""),
            rubric_version=md.get("rubric_version", 0),
            mean=md.get("mean"),
            std=md.get("std"),
            flat=bool(md.get("flat", False)),
            guided=md.get("guided", 0),
            temperature=md.get("temperature"),
            guidance=md.get("guidance"),
            mean_length=md.get("mean_length"),
            missing=md.get("missing", 0),
            reference_reward=md.get("reference_reward"),
            criterion_means=loads(md.get("criterion_means"), {}) or {},
            rewards=loads(md.get("rewards"), []) or [],
            failures=[f for f in fails.split(",") if f],
            trained=bool(md.get("trained", True)),
            summary=doc or "",
            similarity=None if distance is None else similarity_of(distance),
        )

    def task_history(self, task_id: str, last_n: int | None = None, since_step: int | None = None) -> list[StepEntry]:
        """A task's step records, oldest first: every step it was sampled at (from ``since_step`` on,
        and only the last ``last_n`` of them when given)."""
        where = MetaFilter.of(
            equals("task_id", task_id), at_least("step", int(since_step)) if since_step is not None else None
        )
        got = self.collection("steps").get(where=where.where(), include=["documents", "metadatas"])
        rows = sorted(
            (self._to_step(i, d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)),
            key=lambda e: (e.step, e.id),
        )
        if last_n is not None:
            rows = rows[-last_n:] if last_n > 0 else []
        return rows

    def steps_at(self, step: int) -> list[StepEntry]:
        """Every task group recorded at ``step``, by task id."""
        got = self.collection("steps").get(where={"step": int(step)}, include=["documents", "metadatas"])
        rows = [self._to_step(i, d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)]
        return sorted(rows, key=lambda e: e.id)

    def similar_tasks(
        self,
        text: str,
        n: int = 5,
        exclude_task: str | None = None,
        domain: str | None = None,
        failure: str | None = None,
    ) -> list[StepEntry]:
        """Step records whose situation reads most like ``text`` (e.g. a step summary or a failure
        description), at most one per task (its best-matching step), best first (``similarity`` 0..1).
        For cross-task evidence pass the task at hand as ``exclude_task``. Filters: keep only ``domain``;
        keep only groups where failure kind ``failure`` was detected."""
        where = MetaFilter.of(
            not_equal("task_id", exclude_task) if exclude_task else None,
            equals("domain", domain) if domain else None,
            equals(f"fail_{failure}", True) if failure else None,
        )
        return [self._to_step(i, d, m, dist) for i, d, m, dist in self._search("steps", text, n, where, "task_id")]
