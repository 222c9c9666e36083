"""The ``failures`` collection: one record per detected failure (:class:`FailureMemory`).

The document is the failure's text description; the evidence and any other field the detector recorded
are kept as JSON in the metadata, with the interface the failure was attributed to once known. Ids are
:func:`harnessrl.records.failures.failure_id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from harnessrl.errors import HarnessRLError
from harnessrl.memory.chroma import ChromaCollections
from harnessrl.memory.codec import Metadata, as_dict, dumps, loads, similarity_of
from harnessrl.memory.entries import FailureEntry
from harnessrl.memory.filters import MetaFilter, at_least, equals, not_equal
from harnessrl.records.failures import failure_id as _failure_id

__all__ = ["FailureMemory"]


class FailureMemory(ChromaCollections):
    """Writes and reads the ``failures`` collection: detected failures, their attribution, similar ones."""

    @staticmethod
    def failure_id(failure: Any) -> str:
        """The failure's id (:func:`harnessrl.records.failures.failure_id`, the one definition)."""
        return _failure_id(failure)

    @staticmethod
    def _failure_record(failure: Any, interface: str | None) -> tuple[str, Metadata]:
        d = as_dict(failure)
        kind = str(d.get("kind") or "failure")
        summary = str(d.get("summary") or d.get("description") or "")
        evidence = d.get("evidence") or {}
        interface = interface or d.get("interface")
        doc = f"{kind.replace('_', ' ')}: {summary}" if summary else kind.replace("_", " ") + f" {dumps(evidence)}"
        known = {"id", "kind", "step", "task_id", "domain", "summary", "description", "evidence", "interface"}
        extra = {k: v for k, v in d.items() if k not in known}
        md: Metadata = {
            "kind": kind,
            "step": int(d.get("step") if d.get("step") is not None else -1),
            "task_id": d.get("task_id"),
            "domain": d.get("domain"),
            "interface": interface,
            "summary": summary,
            "evidence": dumps(evidence),
            "extra": dumps(extra) if extra else None,
        }
        return doc, md

    def add_failure(self, failure: Any, interface: str | None = None, embedding: np.ndarray | None = None) -> str:
        """Store one detected failure (a pydantic model or dict with ``kind``, ``step``, ``task_id``,
        ``domain``, ``evidence`` and ``summary``); ``interface`` records the attribution when known.
        Returns its id (deterministic: storing it again replaces it)."""
        return self.add_failures([failure], interface=interface, embeddings=None if embedding is None else [embedding])[
            0
        ]

    def add_failures(
        self, failures: Iterable[Any], interface: str | None = None, embeddings: Sequence | None = None
    ) -> list[str]:
        """Store several failures in one write; see :meth:`add_failure`."""
        failures = list(failures)
        if not failures:
            return []
        ids, docs, mds = [], [], []
        for f in failures:
            doc, md = self._failure_record(f, interface)
            fid = self.failure_id(f)
            if fid in ids:  # the same event twice in one batch: keep the last
                j = ids.index(fid)
                del ids[j], docs[j], mds[j]
            ids.append(fid)
            docs.append(doc)
            mds.append(md)
        self._upsert("failures", ids, docs, mds, None if embeddings is None else np.asarray(embeddings))
        return ids

    def set_failure_interface(self, failure_id: str, interface: str) -> None:
        """Record which interface a stored failure was attributed to."""
        col = self.collection("failures")
        if not col.get(ids=[failure_id], include=[])["ids"]:
            raise HarnessRLError(f"no failure {failure_id!r} in the training memory")
        col.update(ids=[failure_id], metadatas=[{"interface": interface}])

    @staticmethod
    def _to_failure(id_: str, md: Mapping[str, Any], distance: float | None = None) -> FailureEntry:
        return FailureEntry(
            id=id_,
            kind=md.get("kind", "failure"),
            step=md.get("step", -1),
            task_id=md.get("task_id"),
            domain=md.get("domain"),
            interface=md.get("interface"),
            summary=md.get("summary", ""),
            evidence=loads(md.get("evidence"), {}) or {},
            extra=loads(md.get("extra"), {}) or {},
            similarity=None if distance is None else similarity_of(distance),
        )

    def failures(
        self,
        task_id: str | None = None,
        kind: str | None = None,
        since_step: int | None = None,
        interface: str | None = None,
    ) -> list[FailureEntry]:
        """Stored failures matching every given filter, oldest first."""
        where = MetaFilter.of(
            equals("task_id", task_id) if task_id else None,
            equals("kind", kind) if kind else None,
            equals("interface", interface) if interface else None,
            at_least("step", int(since_step)) if since_step is not None else None,
        )
        got = self.collection("failures").get(where=where.where(), include=["metadatas"])
        rows = [self._to_failure(i, m) for i, m in zip(got["ids"], got["metadatas"], strict=True)]
        return sorted(rows, key=lambda e: (e.step, e.id))

    def similar_failures(
        self,
        text: str,
        kind: str | None = None,
        interface: str | None = None,
        exclude_task: str | None = None,
        n: int = 5,
        domain: str | None = None,
    ) -> list[FailureEntry]:
        """Past failures whose description reads most like ``text``, best first (``similarity`` 0..1).
        Filters: failure ``kind``, attributed ``interface``, ``domain``; ``exclude_task`` skips one task
        (ask for cross-task evidence by excluding the task at hand)."""
        where = MetaFilter.of(
            equals("kind", kind) if kind else None,
            equals("interface", interface) if interface else None,
            equals("domain", domain) if domain else None,
            not_equal("task_id", exclude_task) if exclude_task else None,
        )
        return [self._to_failure(i, m, dist) for i, _, m, dist in self._search("failures", text, n, where)]
