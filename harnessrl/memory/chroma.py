"""The training memory's storage: the Chroma client, its three collections, the batched upsert and the
filtered nearest-neighbour search the record kinds share (:class:`ChromaCollections`).

Storage is Chroma's embedded ``PersistentClient`` under ``run_dir/memory`` by default, or a Chroma
server through ``HttpClient`` when a URL is configured. Every write is an ``upsert`` with a
deterministic id, so a write retried after a crash replaces the record instead of duplicating it; Chroma
has persisted a write when the call returns, so a killed process loses at most the step in flight. Every
collection is opened with :class:`~harnessrl.memory.embedding_function.MiniLMEmbeddingFunction`, never
Chroma's default.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlparse

import numpy as np

from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.memory.codec import Metadata, chroma_metadata
from harnessrl.memory.embedding_function import MiniLMEmbeddingFunction
from harnessrl.memory.filters import MetaFilter

__all__ = ["COLLECTIONS", "ChromaCollections"]

logger = logging.getLogger(__name__)

COLLECTIONS = ("steps", "failures", "updates")
_HNSW = {"hnsw": {"space": "cosine"}}


def _namespace(name: str) -> str:
    ns = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("_-")[:400]
    return ns or "harnessrl"


class ChromaCollections:
    """The Chroma client and the run's collections ``{namespace}-steps``, ``-failures`` and ``-updates``:
    opening them, counting, closing, the batched upsert and the filtered search.
    :class:`~harnessrl.memory.store.TrainingMemory` adds what each collection's records are on top."""

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

    def __enter__(self) -> Self:
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
    ) -> list[tuple[str, str | None, Metadata, float]]:
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
        picked: list[tuple[str, str | None, Metadata, float]] = []
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

    # ------------------------------------------------------------------ writing

    def _upsert(self, kind: str, ids, docs, mds, embeddings=None) -> None:
        col = self.collection(kind)
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate ids in one write to {kind}: {ids}")
        if self._max_batch is None:
            self._max_batch = int(self.client.get_max_batch_size())
        step = self._max_batch
        for i in range(0, len(ids), step):
            sl = slice(i, i + step)
            col.upsert(
                ids=ids[sl],
                documents=docs[sl],
                metadatas=[chroma_metadata(m) for m in mds[sl]],
                embeddings=None if embeddings is None else np.asarray(embeddings[sl], dtype=np.float32),
            )
