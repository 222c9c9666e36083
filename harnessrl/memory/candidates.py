"""The ``updates`` collection: one record per harness update candidate (:class:`CandidateMemory`).

The document is the failure the candidate answers, so :meth:`CandidateMemory.what_worked` finds updates by
failure; the metadata holds its payload, the critic's trial measurements, its verdict and, once known, its
*outcome* (did the task's learning signal recover in the steps after it was applied).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from harnessrl.errors import HarnessRLError
from harnessrl.memory.chroma import ChromaCollections
from harnessrl.memory.codec import Metadata, as_dict, chroma_metadata, dumps, jsonable, loads, similarity_of
from harnessrl.memory.entries import CandidateEntry
from harnessrl.memory.filters import MetaFilter, equals, is_in, not_equal
from harnessrl.records.failures import failure_id
from harnessrl.records.trials import CandidateStatus

__all__ = ["CandidateMemory"]

_WORKED = ["accepted", "committed"]


class CandidateMemory(ChromaCollections):
    """Writes and reads the ``updates`` collection: candidates, their verdicts and outcomes, what worked."""

    def add_candidate(
        self,
        candidate_id: str,
        *,
        step: int,
        payload: BaseModel | Mapping[str, Any],
        interface: str | None = None,
        failure: Any = None,
        failure_text: str | None = None,
        failure_kind: str | None = None,
        failure_ids: Sequence[str] | None = None,
        task_id: str | None = None,
        domain: str | None = None,
        attribution: str = "",
        rationale: str | None = None,
        trials: Any = None,
        verdict: CandidateStatus = "proposed",
        revision: int = 0,
        parent_id: str | None = None,
        applied_step: int | None = None,
    ) -> CandidateEntry:
        """Store a harness update candidate (upsert by ``candidate_id``).

        ``payload`` is the update (a ``ReweightTasks``/``SetGuidance``/``EditRubric`` or its dict; its
        ``interface`` and ``rationale`` fields fill those arguments when not given). ``failure`` (the
        detected failure it answers) fills ``failure_text``, ``failure_kind``, ``failure_ids``,
        ``task_id`` and ``domain`` when they are not given; without one, the caller says which task the
        update changes (``task_id``: its interface knows, the memory does not read update payloads). The
        embedded text is the failure's description, so :meth:`what_worked` finds candidates by the failure
        they answered."""
        pay = as_dict(payload)
        interface = interface or pay.get("interface")
        if not interface:
            raise ValueError("a candidate needs its interface (task_sampling, rollout_guidance, rubric_criteria)")
        if rationale is None:
            rationale = str(pay.get("rationale") or "")
        if failure is not None:
            fd = as_dict(failure)
            failure_text = failure_text or str(fd.get("summary") or "")
            failure_kind = failure_kind or fd.get("kind")
            failure_ids = list(failure_ids or [failure_id(failure)])
            task_id = task_id or fd.get("task_id")
            domain = domain or fd.get("domain")
        failure_text = failure_text or ""
        doc = failure_text or rationale or f"{interface} update"
        if failure_kind and failure_text:
            doc = f"{failure_kind.replace('_', ' ')}: {failure_text}"
        md = {
            "step": int(step),
            "interface": interface,
            "verdict": verdict,
            "task_id": task_id,
            "domain": domain,
            "failure_kind": failure_kind,
            "failure_ids": dumps(list(failure_ids or [])),
            "failure_text": failure_text,
            "attribution": attribution,
            "rationale": rationale,
            "payload": dumps(pay),
            "trials": None if trials is None else dumps(jsonable(trials)),
            "revision": int(revision),
            "parent_id": parent_id,
            "applied_step": applied_step,
            "outcome": None,
            "has_outcome": False,
            # the order candidates were stored in: their ids (random within a step) do not say it
            "stored_ns": time.time_ns(),
        }
        self._upsert("updates", [candidate_id], [doc], [md])
        return self._to_candidate(candidate_id, chroma_metadata(md))

    def update_candidate(
        self,
        candidate_id: str,
        *,
        verdict: CandidateStatus | None = None,
        trials: Any = None,
        outcome: Mapping[str, Any] | None = None,
        applied_step: int | None = None,
    ) -> CandidateEntry:
        """Change a stored candidate's verdict, trial measurements, outcome or applied step (the other
        fields stay). Raises :class:`HarnessRLError` for an unknown id."""
        col = self.collection("updates")
        got = col.get(ids=[candidate_id], include=["metadatas"])
        if not got["ids"]:
            raise HarnessRLError(f"no update candidate {candidate_id!r} in the training memory")
        md: Metadata = {}
        if verdict is not None:
            md["verdict"] = verdict
        if trials is not None:
            md["trials"] = dumps(jsonable(trials))
        if outcome is not None:
            md["outcome"] = dumps(jsonable(outcome))
            md["has_outcome"] = True
            if isinstance(outcome.get("recovered"), bool):
                md["recovered"] = outcome["recovered"]
        if applied_step is not None:
            md["applied_step"] = int(applied_step)
        if md:
            col.update(ids=[candidate_id], metadatas=[chroma_metadata(md)])
        return self._to_candidate(candidate_id, {**(got["metadatas"][0] or {}), **chroma_metadata(md)})

    def record_outcome(self, candidate_id: str, outcome: Mapping[str, Any]) -> CandidateEntry:
        """Record what an applied update did afterwards, e.g. ``{"recovered": True, "std_before": 0.0,
        "std_after": 0.21, "steps": 3}`` (a boolean ``recovered`` is also kept as a filterable flag)."""
        return self.update_candidate(candidate_id, outcome=outcome)

    @staticmethod
    def _to_candidate(id_: str, md: Mapping[str, Any], distance: float | None = None) -> CandidateEntry:
        return CandidateEntry(
            id=id_,
            step=md.get("step", -1),
            interface=md.get("interface", ""),
            verdict=md.get("verdict", "proposed"),
            task_id=md.get("task_id"),
            domain=md.get("domain"),
            failure_kind=md.get("failure_kind"),
            failure_ids=loads(md.get("failure_ids"), []) or [],
            failure_text=md.get("failure_text") or "",
            attribution=md.get("attribution") or "",
            rationale=md.get("rationale") or "",
            payload=loads(md.get("payload"), {}) or {},
            trials=loads(md.get("trials")),
            outcome=loads(md.get("outcome")),
            revision=md.get("revision", 0),
            parent_id=md.get("parent_id"),
            applied_step=md.get("applied_step"),
            similarity=None if distance is None else similarity_of(distance),
        )

    def candidate(self, candidate_id: str) -> CandidateEntry | None:
        """One stored candidate, or None."""
        got = self.collection("updates").get(ids=[candidate_id], include=["metadatas"])
        return self._to_candidate(got["ids"][0], got["metadatas"][0]) if got["ids"] else None

    def candidates(
        self,
        task_id: str | None = None,
        interface: str | None = None,
        verdict: CandidateStatus | Sequence[CandidateStatus] | None = None,
    ) -> list[CandidateEntry]:
        """Stored candidates matching every given filter, oldest first."""
        verdicts = [verdict] if isinstance(verdict, str) else list(verdict or [])
        where = MetaFilter.of(
            equals("task_id", task_id) if task_id else None,
            equals("interface", interface) if interface else None,
            is_in("verdict", verdicts) if verdicts else None,
        )
        got = self.collection("updates").get(where=where.where(), include=["metadatas"])
        rows = sorted(
            zip(got["ids"], got["metadatas"], strict=True),
            key=lambda r: (r[1].get("step", -1), r[1].get("stored_ns") or 0, r[0]),
        )
        return [self._to_candidate(i, m) for i, m in rows]

    def what_worked(
        self,
        failure_text: str,
        kind: str | None = None,
        interface: str | None = None,
        n: int = 5,
        exclude_task: str | None = None,
        with_outcome: bool = False,
    ) -> list[CandidateEntry]:
        """Accepted or committed updates that answered failures most like ``failure_text``, best first:
        those whose measured outcome recovered the task's learning signal, then those not measured yet,
        then those measured not to help, each by similarity. Each comes with the critic's measurements
        (``trials``) and what happened afterwards (``outcome``, null while unmeasured). Filters: failure
        ``kind``, ``interface``, ``exclude_task``; ``with_outcome`` keeps only updates whose outcome has
        been measured."""
        where = MetaFilter.of(
            is_in("verdict", _WORKED),
            equals("failure_kind", kind) if kind else None,
            equals("interface", interface) if interface else None,
            not_equal("task_id", exclude_task) if exclude_task else None,
            equals("has_outcome", True) if with_outcome else None,
        )
        hits = [self._to_candidate(i, m, dist) for i, _, m, dist in self._search("updates", failure_text, 4 * n, where)]
        rank = {True: 0, None: 1, False: 2}
        hits.sort(key=lambda e: rank.get((e.outcome or {}).get("recovered"), 1))  # stable: by similarity
        return hits[:n]
