"""The judge interface: one :class:`RubricJudge` in front of interchangeable backends.

A backend grades *judged* criteria only: it receives a batch of :class:`GradeRequest` (prompt,
response, criterion, reference answer) and returns one :class:`BackendVerdict` per request, or
``None`` where it could not produce one. :class:`RubricJudge` does the rest, the same way for every
backend:

- programmatic criteria are evaluated in code (exact, free, never missing);
- a verdict cache keyed by (criterion text, response, prompt, reference answer) makes re-grading
  cheap: a rubric edit re-grades only the criteria that changed, a weight change nothing at all;
- a missing verdict is asked for again (``missing_retries``, after ``missing_backoff_s``, doubling),
  then stays *missing*, is counted in ``judge/parse_fail_rate`` and ``judge/missing_rate``, and the
  reward is computed from the criteria that have one (:func:`aggregate_reward`). Transport faults
  (server down, timeouts, HTTP 5xx and 429) are the backend's to retry first; what this layer retries
  is whatever still came back without a verdict (an unusable answer, a verdict for the wrong criterion).

The reward, exactly as docs/design.md §4 defines it::

    reward = (Σ_{w>0} w·v − Σ_{w<0} |w|·v) / Σ_{w>0} w,   clipped to [0, 1]

A *missing* verdict (``None``: the judge could not produce one) is never read as 0. The sums run over
the criteria that have a verdict; when the positive weight left is below ``min_coverage`` of the
rubric's positive weight, the reward itself is ``None`` and the rollout drops out of its group.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from harnessrl.data.schema import Criterion, Task, prompt_text

__all__ = [
    "BackendVerdict",
    "GradeRequest",
    "GradeResult",
    "JudgeBackend",
    "JudgeStats",
    "RubricJudge",
    "RubricRequest",
    "Verdict",
    "aggregate_reward",
]

logger = logging.getLogger(__name__)


def aggregate_reward(
    rubric: Sequence[Criterion],
    verdicts: Mapping[str, float | None],
    min_coverage: float = 0.5,
) -> float | None:
    """Combine verdicts (criterion id -> value in [0, 1], or None when missing) into a reward.

    Args:
        rubric: the criteria the verdicts answer (pitfalls have negative weights).
        verdicts: one value per criterion id; an absent id counts as missing.
        min_coverage: share of the rubric's positive weight that must have verdicts.

    Returns:
        The reward in [0, 1], or None when too few positive criteria have a verdict.
    """
    total_pos = sum(c.weight for c in rubric if c.weight > 0)
    if total_pos <= 0:
        raise ValueError("rubric has no positive weight: the reward is undefined")
    gained = lost = covered = 0.0
    for c in rubric:
        v = verdicts.get(c.id)
        if v is None or v != v:  # missing (None, or a NaN that slipped through) is never read as 0
            continue
        v = min(1.0, max(0.0, float(v)))
        if c.weight > 0:
            gained += c.weight * v
            covered += c.weight
        else:
            lost += -c.weight * v
    if covered <= 0 or covered / total_pos < min_coverage:
        return None
    return min(1.0, max(0.0, (gained - lost) / covered))


@dataclass(frozen=True)
class GradeRequest:
    """One (response, judged criterion) pair for a backend to grade."""

    prompt: str
    response: str
    criterion: Criterion
    reference_answer: str | None = None


@dataclass(frozen=True)
class BackendVerdict:
    """What a backend says of one request: value in [0, 1], its confidence, and why."""

    value: float
    confidence: float | None = None
    reason: str = ""


@runtime_checkable
class JudgeBackend(Protocol):
    """Grades judged criteria. Return ``None`` for a request it could not grade; never raise for one."""

    name: str

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]: ...


class Verdict(BaseModel):
    """The verdict on one criterion of one response; ``value`` None means missing."""

    criterion_id: str
    value: float | None
    confidence: float | None = None
    reason: str = ""
    source: Literal["programmatic", "judge", "cache"] = "judge"

    @property
    def missing(self) -> bool:
        return self.value is None


class GradeResult(BaseModel):
    """All verdicts on one response and the reward they add up to (None: too many missing)."""

    verdicts: list[Verdict]
    reward: float | None
    missing: int = 0

    def by_id(self) -> dict[str, Verdict]:
        return {v.criterion_id: v for v in self.verdicts}


@dataclass(frozen=True)
class RubricRequest:
    """A response to grade against a rubric (the task's version 0 unless another is given)."""

    prompt: str
    response: str
    rubric: Sequence[Criterion]
    reference_answer: str | None = None

    @classmethod
    def for_task(cls, task: Task, response: str, rubric: Sequence[Criterion] | None = None) -> RubricRequest:
        return cls(prompt_text(task.prompt), response, list(rubric or task.rubric), task.reference_answer)


@dataclass
class JudgeStats:
    """Running counts behind the ``judge/*`` metrics; ``snapshot_and_reset`` gives one step's worth."""

    requested: int = 0
    cache_hits: int = 0
    backend_calls: int = 0
    backend_requests: int = 0
    first_asks: int = 0
    missing_first_try: int = 0
    missing_final: int = 0
    programmatic: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def metrics(self) -> dict[str, float]:
        judged = max(1, self.requested - self.programmatic)
        return {
            "judge/latency": self.seconds / self.backend_calls if self.backend_calls else 0.0,
            "judge/seconds": self.seconds,
            "judge/calls": float(self.backend_requests),
            "judge/cache_hit_rate": self.cache_hits / judged,
            # first asks only: retries would otherwise dilute it (an always-failing backend reads 1.0)
            "judge/parse_fail_rate": self.missing_first_try / max(1, self.first_asks),
            "judge/missing_rate": self.missing_final / judged,
        }

    def snapshot_and_reset(self) -> dict[str, float]:
        with self._lock:
            out = self.metrics()
            for name in (
                "requested",
                "cache_hits",
                "backend_calls",
                "backend_requests",
                "first_asks",
                "missing_first_try",
                "missing_final",
                "programmatic",
            ):
                setattr(self, name, 0)
            self.seconds = 0.0
        return out


def _cache_key(req: GradeRequest) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (req.criterion.text, req.response, req.prompt, req.reference_answer or ""):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


class RubricJudge:
    """Grades responses against rubrics with one backend, a verdict cache, and honest missing values.

    Args:
        backend: grades the judged criteria (see :class:`JudgeBackend`).
        missing_retries: how many more times a missing verdict is asked for.
        missing_backoff_s: wait before the first of those re-asks; it doubles before each further one.
        min_coverage: share of positive rubric weight that needs a verdict for a reward.
        cache_size: verdicts kept (least recently used are dropped first).
    """

    def __init__(
        self,
        backend: JudgeBackend,
        *,
        missing_retries: int = 1,
        missing_backoff_s: float = 0.0,
        min_coverage: float = 0.5,
        cache_size: int = 200_000,
    ):
        self.backend = backend
        self.missing_retries = missing_retries
        self.missing_backoff_s = missing_backoff_s
        self.min_coverage = min_coverage
        self.cache_size = cache_size
        self.stats = JudgeStats()
        self._cache: OrderedDict[str, BackendVerdict] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.backend.name

    def grade(self, requests: Sequence[RubricRequest], fresh: bool = False) -> list[GradeResult]:
        """Grade each response against its rubric; one backend pass for everything not cached.

        ``fresh``: ask the backend again even for cached verdicts, and keep the answers out of the cache
        (a second opinion, e.g. the judge-disagreement check's re-grade)."""
        slots: list[list[Verdict | None]] = []
        todo: list[tuple[int, int, GradeRequest, str]] = []
        for i, r in enumerate(requests):
            row: list[Verdict | None] = []
            for j, c in enumerate(r.rubric):
                self.stats.requested += 1
                if c.check is not None:
                    self.stats.programmatic += 1
                    row.append(Verdict(criterion_id=c.id, value=c.check.evaluate(r.response), source="programmatic"))
                    continue
                req = GradeRequest(r.prompt, r.response, c, r.reference_answer)
                key = _cache_key(req)
                with self._lock:
                    hit = None if fresh else self._cache.get(key)
                    if hit is not None:
                        self._cache.move_to_end(key)
                if hit is not None:
                    self.stats.cache_hits += 1
                    row.append(
                        Verdict(
                            criterion_id=c.id,
                            value=hit.value,
                            confidence=hit.confidence,
                            reason=hit.reason,
                            source="cache",
                        )
                    )
                else:
                    row.append(None)
                    todo.append((i, j, req, key))
            slots.append(row)

        pending = todo
        self.stats.first_asks += len(todo)
        for attempt in range(self.missing_retries + 1):
            if not pending:
                break
            if attempt and self.missing_backoff_s > 0:  # a struggling server gets a moment before the re-ask
                time.sleep(self.missing_backoff_s * 2 ** (attempt - 1))
            got = self._call_backend([t[2] for t in pending])
            still: list[tuple[int, int, GradeRequest, str]] = []
            for (i, j, req, key), bv in zip(pending, got, strict=True):
                if bv is None:
                    if attempt == 0:
                        self.stats.missing_first_try += 1
                    still.append((i, j, req, key))
                    continue
                if not fresh:
                    self._remember(key, bv)
                slots[i][j] = Verdict(
                    criterion_id=req.criterion.id, value=bv.value, confidence=bv.confidence, reason=bv.reason
                )
            pending = still
        for i, j, req, _ in pending:
            self.stats.missing_final += 1
            slots[i][j] = Verdict(criterion_id=req.criterion.id, value=None, reason="judge gave no verdict")
        if pending:
            logger.warning(
                "%d verdict(s) missing after %d retries (backend %s)", len(pending), self.missing_retries, self.name
            )

        results = []
        for r, row in zip(requests, slots, strict=True):
            verdicts = [v for v in row if v is not None]
            values = {v.criterion_id: v.value for v in verdicts}
            reward = aggregate_reward(r.rubric, values, self.min_coverage)
            results.append(GradeResult(verdicts=verdicts, reward=reward, missing=sum(v.missing for v in verdicts)))
        return results

    def uncached(self, requests: Sequence[RubricRequest]) -> set[str]:
        """Cache keys of the judged verdicts ``grade(requests)`` would ask the backend for (programmatic
        criteria and cached verdicts are free): what a budgeted caller checks before grading."""
        keys: set[str] = set()
        with self._lock:
            for r in requests:
                for c in r.rubric:
                    if c.check is None:
                        key = _cache_key(GradeRequest(r.prompt, r.response, c, r.reference_answer))
                        if key not in self._cache:
                            keys.add(key)
        return keys

    def grade_one(self, task: Task, response: str, rubric: Sequence[Criterion] | None = None) -> GradeResult:
        """Grade one response against a task's rubric (version 0 unless ``rubric`` is given)."""
        return self.grade([RubricRequest.for_task(task, response, rubric)])[0]

    def _call_backend(self, reqs: list[GradeRequest]) -> list[BackendVerdict | None]:
        t0 = time.perf_counter()
        try:
            out = list(self.backend.grade(reqs))
        except Exception:  # a broken backend call loses these verdicts, never the run
            logger.exception(
                "judge backend %s failed on a batch of %d; verdicts count as missing", self.name, len(reqs)
            )
            out = [None] * len(reqs)
        if len(out) != len(reqs):
            logger.error(
                "judge backend %s returned %d verdicts for %d requests; treating all as missing",
                self.name,
                len(out),
                len(reqs),
            )
            out = [None] * len(reqs)
        self.stats.seconds += time.perf_counter() - t0
        self.stats.backend_calls += 1
        self.stats.backend_requests += len(reqs)
        return [_clean(v) for v in out]

    def _remember(self, key: str, v: BackendVerdict) -> None:
        with self._lock:
            self._cache[key] = v
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)


def _clean(v: BackendVerdict | None) -> BackendVerdict | None:
    """Reject a verdict outside [0, 1] or NaN: a backend bug is a missing verdict, not a reward."""
    if v is None:
        return None
    try:
        value = float(v.value)
    except (TypeError, ValueError):
        return None
    if not 0.0 <= value <= 1.0:
        return None
    return v if value == v.value else BackendVerdict(value, v.confidence, v.reason)
