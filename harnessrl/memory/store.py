"""The training-time memory: per-step task statistics, failures and harness updates, in Chroma.

Three collections, named ``{namespace}-steps``, ``{namespace}-failures`` and ``{namespace}-updates``
(the namespace is the run's, so several runs can share one Chroma server):

- ``steps``: one document per task group per step (the :class:`GroupRecord` summary, plus the
  failures detected on it); metadata holds the group statistics, so a task's history is a metadata
  filter and similar situations on other tasks are a semantic search;
- ``failures``: one document per detected failure (its text description); the evidence is kept as
  JSON in the metadata;
- ``updates``: one document per harness update candidate (the failure it answers), with its payload,
  the critic's trial measurements, its verdict and, once known, its *outcome* (did the task's learning
  signal recover in the steps after it was applied).

Storage is Chroma's embedded ``PersistentClient`` under ``run_dir/memory`` by default, or a Chroma
server through ``HttpClient`` when a URL is configured. Every write is an ``upsert`` with a
deterministic id (``"{step}:{task_id}"`` for a step record), so a write retried after a crash replaces
the record instead of duplicating it; Chroma has persisted a write when the call returns, so a killed
process loses at most the step in flight.

Embeddings always come from the packaged all-MiniLM-L6-v2 (:class:`MiniLMEmbeddingFunction`), passed
explicitly whenever a collection is created or opened: Chroma's default embedding function downloads a
model at first use (impossible offline) and is what a collection silently falls back to when opened
without one. The function is also registered with Chroma under its name, so even a collection opened
elsewhere without it rebuilds this one from the persisted configuration.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function
from pydantic import BaseModel, Field

from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.memory.filters import MetaFilter, at_least, equals, is_in, not_equal
from harnessrl.records.failures import failure_id as _failure_id
from harnessrl.records.steps import GroupRecord, StepRecord
from harnessrl.records.trials import CandidateStatus

__all__ = [
    "CandidateEntry",
    "FailureEntry",
    "MiniLMEmbeddingFunction",
    "StepEntry",
    "TrainingMemory",
]

logger = logging.getLogger(__name__)

COLLECTIONS = ("steps", "failures", "updates")
_WORKED = ["accepted", "committed"]
_HNSW = {"hnsw": {"space": "cosine"}}


# --------------------------------------------------------------------------------------------------
# the embedding function


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function over the packaged all-MiniLM-L6-v2 (unit-norm, 384-d, offline).

    The model is loaded on first use (one shared instance per device per process), so opening a
    memory only to read its records costs nothing."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._embedder = None

    @property
    def embedder(self):
        if self._embedder is None:
            from harnessrl.memory.embedding import get_embedder

            self._embedder = get_embedder(self.device)
        return self._embedder

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.embedder.encode([str(t) for t in input]))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings as one (n, 384) float32 array (for bulk writes that pass ``embeddings=``)."""
        return self.embedder.encode(list(texts))

    @staticmethod
    def name() -> str:
        return "harnessrl-minilm-l6-v2"

    def get_config(self) -> dict[str, Any]:
        return {"device": self.device}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbeddingFunction:
        return MiniLMEmbeddingFunction(device=str(config.get("device", "cpu")))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]

    def max_tokens(self) -> int:
        return 256


# --------------------------------------------------------------------------------------------------
# what retrieval returns (served to the evolver's LLM: keep the docstrings plain)


class StepEntry(BaseModel):
    """One task's rollout group at one training step: its reward statistics and the failures detected.

    ``flat`` means the group's rewards had (almost) no spread, so that step taught nothing on the task.
    ``similarity`` (0..1, higher is closer) is set only on search results."""

    id: str
    step: int
    task_id: str
    domain: str
    rubric_version: int
    mean: float | None = Field(default=None, description="Mean reward of the group (null: no reward).")
    std: float | None = Field(default=None, description="Reward standard deviation of the group.")
    flat: bool = False
    guided: int = Field(default=0, description="How many rollouts of the group saw guidance.")
    temperature: float | None = None
    guidance: str | None = None
    mean_length: float | None = Field(default=None, description="Mean completion length in tokens.")
    missing: int = Field(default=0, description="Verdicts the judge failed to produce.")
    reference_reward: float | None = Field(default=None, description="Reward of the reference answer.")
    criterion_means: dict[str, float | None] = Field(default_factory=dict)
    rewards: list[float | None] = Field(default_factory=list, description="Each rollout's reward (null: dropped).")
    failures: list[str] = Field(default_factory=list, description="Kinds of failure detected on this group.")
    trained: bool = Field(default=True, description="False: graded and dropped before the update (DAPO).")
    summary: str = ""
    similarity: float | None = None


class FailureEntry(BaseModel):
    """A reward failure detected on a task at a step (e.g. uniformly low or high rewards, reward rising
    with length), with the evidence the detector measured. ``interface`` is the harness interface it
    was attributed to, when known. ``similarity`` (0..1) is set only on search results."""

    id: str
    kind: str
    step: int
    task_id: str | None = None
    domain: str | None = None
    interface: str | None = None
    summary: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict, description="Other fields the detector recorded.")
    similarity: float | None = None


class CandidateEntry(BaseModel):
    """A harness update candidate: the failure it answered, the update itself (``payload``), what the
    critic measured on the frozen policy (``trials``), its verdict, and its ``outcome`` once measured
    (whether the task's learning signal recovered in the steps after it was applied; null until then).
    ``similarity`` (0..1, of its failure to the query) is set only on search results."""

    id: str
    step: int
    interface: str
    verdict: CandidateStatus
    task_id: str | None = None
    domain: str | None = None
    failure_kind: str | None = None
    failure_ids: list[str] = Field(default_factory=list)
    failure_text: str = ""
    attribution: str = Field(default="", description="Why the failure was blamed on this interface.")
    rationale: str = Field(default="", description="Why this update should fix it.")
    payload: dict[str, Any] = Field(default_factory=dict)
    trials: Any = None
    outcome: dict[str, Any] | None = None
    revision: int = 0
    parent_id: str | None = None
    applied_step: int | None = None
    similarity: float | None = None


# --------------------------------------------------------------------------------------------------
# helpers


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _json(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def _scalar(v: Any) -> Any:
    """A Chroma metadata value (str/int/float/bool or a non-empty list of one of them), or None (= absent)."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool | int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list | tuple) and v and all(isinstance(i, str) for i in v):
        return list(v)
    return _json(v)


def _meta(d: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata for Chroma. ``None`` values are kept on purpose: in an upsert they *remove* a key an
    earlier version of the record had, so a re-written record never keeps stale values."""
    return {k: _scalar(v) for k, v in d.items()}


def _loads(s: Any, default: Any = None) -> Any:
    if not isinstance(s, str):
        return default
    try:
        return json.loads(s)
    except ValueError:
        return default


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    raise TypeError(f"expected a pydantic model or a dict, got {type(obj).__name__}")


def _namespace(name: str) -> str:
    ns = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("_-")[:400]
    return ns or "harnessrl"


def _similarity(distance: float) -> float:
    return round(1.0 - float(distance), 6)  # cosine space: distance = 1 - cos


# --------------------------------------------------------------------------------------------------
# the memory


class TrainingMemory:
    """The run's training memory on Chroma. See the module docstring for what each collection holds.

    ``TrainingMemory(run_dir)`` opens (or creates) the embedded store ``run_dir/memory``;
    ``TrainingMemory(run_dir, url="http://127.0.0.1:8000")`` uses a Chroma server instead. Collections
    are prefixed by ``namespace``: by default ``harnessrl`` in the embedded store (it belongs to one run,
    and a renamed run directory still finds its records) and the run directory's name on a server
    (several runs share it: record the namespace with the run to find its memory again)."""

    def __init__(
        self,
        run_dir: str | Path | None = None,
        *,
        url: str | None = None,
        path: str | Path | None = None,
        namespace: str | None = None,
        headers: dict[str, str] | None = None,
        embedding_function: MiniLMEmbeddingFunction | None = None,
        device: str = "cpu",
    ):
        import chromadb
        from chromadb.config import Settings

        self.run_dir = Path(run_dir) if run_dir is not None else None
        if namespace is None:  # the embedded store is the run's own: a fixed name survives renaming the run
            namespace = self.run_dir.name if url and self.run_dir else "harnessrl"
        self.namespace = _namespace(namespace)
        self.ef = embedding_function or MiniLMEmbeddingFunction(device=device)
        settings = Settings(anonymized_telemetry=False)
        if url:
            parsed = urlparse(url if "://" in url else f"http://{url}")
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ConfigError(f"memory.url {url!r} is not an http(s) URL like http://127.0.0.1:8000")
            port = parsed.port or (443 if parsed.scheme == "https" else 8000)
            try:
                self.client = chromadb.HttpClient(
                    host=parsed.hostname, port=port, ssl=parsed.scheme == "https", headers=headers, settings=settings
                )
                self.client.heartbeat()
            except Exception as e:
                raise ConfigError(
                    f"cannot reach the Chroma server at {url} ({e}): start one with "
                    "`chroma run --path DIR --host 127.0.0.1 --port PORT`, or unset memory.url to use the "
                    "embedded store in the run directory"
                ) from e
            self.location = url
        else:
            where = Path(path) if path is not None else (self.run_dir / "memory" if self.run_dir else None)
            if where is None:
                raise ConfigError("TrainingMemory needs a run directory, a path or a Chroma server URL")
            where.mkdir(parents=True, exist_ok=True)
            self.client = chromadb.PersistentClient(path=str(where), settings=settings)
            self.location = str(where)
        self._cols = {}
        for kind in COLLECTIONS:
            name = f"{self.namespace}-{kind}"
            try:
                self._cols[kind] = self.client.get_or_create_collection(
                    name,
                    embedding_function=self.ef,
                    configuration=_HNSW,
                    metadata={"harnessrl": kind},
                )
            except ValueError as e:
                raise HarnessRLError(
                    f"Chroma collection {name!r} at {self.location} cannot be opened with the HarnessRL "
                    f"embedding function ({e}): was it made by something else? Use another namespace."
                ) from e
        self._closed = False
        self._max_batch: int | None = None
        logger.debug("training memory %s at %s", self.namespace, self.location)

    # ------------------------------------------------------------------ housekeeping

    def collection(self, kind: str):
        """The raw Chroma collection ``steps``, ``failures`` or ``updates``."""
        try:
            return self._cols[kind]
        except KeyError:
            raise ValueError(f"no collection {kind!r}; the memory has {list(COLLECTIONS)}") from None

    def count(self, kind: str) -> int:
        """How many records collection ``kind`` (steps, failures or updates) holds."""
        return self.collection(kind).count()

    def counts(self) -> dict[str, int]:
        return {k: self.count(k) for k in COLLECTIONS}

    def close(self) -> None:
        """Release the client (the embedded store's files stay; reopen with a new instance)."""
        if self._closed:
            return
        self._closed = True
        close = getattr(self.client, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> TrainingMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ semantic search

    scan_limit = 200
    """How many nearest neighbours a filtered search checks before it asks Chroma to filter."""

    def _search(
        self,
        kind: str,
        text: str,
        n: int,
        where: MetaFilter,
        distinct: str | None = None,
    ) -> list[tuple[str, str | None, dict[str, Any], float]]:
        """The ``n`` records of collection ``kind`` nearest to ``text`` that satisfy ``where`` (at most
        one per value of metadata key ``distinct``), best first, as (id, document, metadata, distance).

        Chroma's own where-filtered vector search evaluates the filter over the whole collection (60 ms
        and more at 100k records on two CPUs, ~180 ms for a ``$ne``, against ~2 ms unfiltered). So a
        filtered search first ranks the nearest neighbours unfiltered (ids and distances only) and checks
        the filter on their metadata in rank order, going deeper while only exclusions (``$ne``)
        or distinctness are asked; when the first ``scan_limit`` neighbours hold too few matches for a
        positive condition (kind, domain, interface...), Chroma filters on the positive conditions and the
        exclusions are checked here (:class:`~harnessrl.memory.filters.MetaFilter` does both)."""
        col = self.collection(kind)
        total = col.count()
        if total == 0 or n <= 0:
            return []
        (qv,) = self.ef.embed_query([text])
        picked: list[tuple[str, str | None, dict[str, Any], float]] = []
        seen: set[Any] = set()
        full = ["documents", "metadatas", "distances"]

        def take(rows) -> bool:
            for i, d, m, dist in rows:
                m = m or {}
                if not where.matches(m):
                    continue
                if distinct is not None:
                    if m.get(distinct) in seen:
                        continue
                    seen.add(m.get(distinct))
                picked.append((i, d, m, float(dist)))
                if len(picked) == n:
                    return True
            return False

        def rows_of(res):
            return zip(res["ids"][0], res["documents"][0], res["metadatas"][0], res["distances"][0], strict=True)

        if not where and distinct is None:
            take(rows_of(col.query(query_embeddings=[qv], n_results=min(total, n), include=full)))
            return picked

        positive = where.positive()
        depth, done = min(total, max(self.scan_limit, n)), set()
        while True:
            res = col.query(query_embeddings=[qv], n_results=depth, include=["distances"])
            ranked = [(i, d) for i, d in zip(res["ids"][0], res["distances"][0], strict=True) if i not in done]
            chunk = max(2 * n, 32)
            for start in range(0, len(ranked), chunk):
                part = ranked[start : start + chunk]
                done.update(i for i, _ in part)
                got = col.get(ids=[i for i, _ in part], include=["documents", "metadatas"])
                by_id = {i: (d, m) for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}
                if take((i, *by_id[i], dist) for i, dist in part if i in by_id):
                    return picked
                chunk = min(4 * chunk, 256)
            if depth >= total:
                return picked  # every record was checked: this is all there is
            if positive or depth >= 8 * self.scan_limit:
                break
            depth = min(total, 4 * depth)
        if not positive:
            return sorted(picked, key=lambda r: r[3])  # only exclusions/distinctness: the deep scan is the answer
        want = n + 32 if distinct is None else max(64, 20 * n)
        while True:
            res = col.query(query_embeddings=[qv], n_results=min(total, want), where=positive.where(), include=full)
            picked.clear()
            seen.clear()
            if take(rows_of(res)) or len(res["ids"][0]) < min(total, want) or want >= total:
                return sorted(picked, key=lambda r: r[3])
            want *= 4

    # ------------------------------------------------------------------ steps

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
    def _step_record(g: GroupRecord, failures: Sequence[str], task_text: str | None) -> tuple[str, dict[str, Any]]:
        kinds = sorted(dict.fromkeys(failures))
        doc = g.summary()
        if kinds:
            doc += "; failures: " + ", ".join(k.replace("_", " ") for k in kinds)
        if task_text:
            doc += f"; task: {task_text.strip()[:1000]}"
        md: dict[str, Any] = {
            "step": int(g.step),
            "task_id": g.task_id,
            "domain": g.domain,
            "rubric_version": int(g.rubric_version),
            "mean": _finite(g.mean),
            "std": _finite(g.std),
            "flat": bool(g.flat),
            "guided": int(g.guided),
            "temperature": _finite(g.temperature),
            "guidance": g.guidance or None,
            "mean_length": _finite(np.mean(g.lengths)) if g.lengths else None,
            "missing": int(g.missing),
            "reference_reward": _finite(g.reference_reward),
            "criterion_means": _json(g.criterion_means),
            "rewards": _json(g.rewards),
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

    def _upsert(self, kind: str, ids, docs, mds, embeddings=None) -> None:
        col = self.collection(kind)
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate ids in one write to {kind}: {ids}")
        if self._max_batch is None:
            self._max_batch = int(self.client.get_max_batch_size())
        step = self._max_batch
        for i in range(0, len(ids), step):
            sl = slice(i, i + step)
            kwargs: dict[str, Any] = {"ids": ids[sl], "documents": docs[sl], "metadatas": [_meta(m) for m in mds[sl]]}
            if embeddings is not None:
                kwargs["embeddings"] = np.asarray(embeddings[sl], dtype=np.float32)
            col.upsert(**kwargs)

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
            criterion_means=_loads(md.get("criterion_means"), {}) or {},
            rewards=_loads(md.get("rewards"), []) or [],
            failures=[f for f in fails.split(",") if f],
            trained=bool(md.get("trained", True)),
            summary=doc or "",
            similarity=None if distance is None else _similarity(distance),
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

    # ------------------------------------------------------------------ failures

    @staticmethod
    def failure_id(failure: Any) -> str:
        """The failure's id (:func:`harnessrl.records.failures.failure_id`, the one definition)."""
        return _failure_id(failure)

    @staticmethod
    def _failure_record(failure: Any, interface: str | None) -> tuple[str, dict[str, Any]]:
        d = _as_dict(failure)
        kind = str(d.get("kind") or "failure")
        summary = str(d.get("summary") or d.get("description") or "")
        evidence = d.get("evidence") or {}
        interface = interface or d.get("interface")
        doc = f"{kind.replace('_', ' ')}: {summary}" if summary else kind.replace("_", " ") + f" {_json(evidence)}"
        known = {"id", "kind", "step", "task_id", "domain", "summary", "description", "evidence", "interface"}
        extra = {k: v for k, v in d.items() if k not in known}
        md = {
            "kind": kind,
            "step": int(d.get("step") if d.get("step") is not None else -1),
            "task_id": d.get("task_id"),
            "domain": d.get("domain"),
            "interface": interface,
            "summary": summary,
            "evidence": _json(evidence),
            "extra": _json(extra) if extra else None,
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
            evidence=_loads(md.get("evidence"), {}) or {},
            extra=_loads(md.get("extra"), {}) or {},
            similarity=None if distance is None else _similarity(distance),
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

    # ------------------------------------------------------------------ update candidates

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
        pay = _as_dict(payload)
        interface = interface or pay.get("interface")
        if not interface:
            raise ValueError("a candidate needs its interface (task_sampling, rollout_guidance, rubric_criteria)")
        if rationale is None:
            rationale = str(pay.get("rationale") or "")
        if failure is not None:
            fd = _as_dict(failure)
            failure_text = failure_text or str(fd.get("summary") or "")
            failure_kind = failure_kind or fd.get("kind")
            failure_ids = list(failure_ids or [self.failure_id(failure)])
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
            "failure_ids": _json(list(failure_ids or [])),
            "failure_text": failure_text,
            "attribution": attribution,
            "rationale": rationale,
            "payload": _json(pay),
            "trials": None if trials is None else _json(_jsonable(trials)),
            "revision": int(revision),
            "parent_id": parent_id,
            "applied_step": applied_step,
            "outcome": None,
            "has_outcome": False,
            # the order candidates were stored in: their ids (random within a step) do not say it
            "stored_ns": time.time_ns(),
        }
        self._upsert("updates", [candidate_id], [doc], [md])
        return self._to_candidate(candidate_id, _meta(md))

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
        md: dict[str, Any] = {}
        if verdict is not None:
            md["verdict"] = verdict
        if trials is not None:
            md["trials"] = _json(_jsonable(trials))
        if outcome is not None:
            md["outcome"] = _json(_jsonable(outcome))
            md["has_outcome"] = True
            if isinstance(outcome.get("recovered"), bool):
                md["recovered"] = outcome["recovered"]
        if applied_step is not None:
            md["applied_step"] = int(applied_step)
        if md:
            col.update(ids=[candidate_id], metadatas=[_meta(md)])
        return self._to_candidate(candidate_id, {**(got["metadatas"][0] or {}), **_meta(md)})

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
            failure_ids=_loads(md.get("failure_ids"), []) or [],
            failure_text=md.get("failure_text") or "",
            attribution=md.get("attribution") or "",
            rationale=md.get("rationale") or "",
            payload=_loads(md.get("payload"), {}) or {},
            trials=_loads(md.get("trials")),
            outcome=_loads(md.get("outcome")),
            revision=md.get("revision", 0),
            parent_id=md.get("parent_id"),
            applied_step=md.get("applied_step"),
            similarity=None if distance is None else _similarity(distance),
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


def _jsonable(x: Any) -> Any:
    if isinstance(x, BaseModel):
        return x.model_dump(mode="json")
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
