"""How good and how fast is a judge: agreement with labels (AUC, accuracy, calibration), reference vs poor
answers, throughput.

The labels are :class:`~harnessrl.data.labels.JudgeLabel` rows, the bundled hand-labelled set or a user's
own file (``harnessrl bench judge --labels FILE``); each is graded by the backend alone (no cache, no
programmatic criteria), so the figures are the backend's."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harnessrl.data.labels import JudgeLabel
from harnessrl.data.schema import Task
from harnessrl.errors import JudgeError
from harnessrl.judges.rubric_judge import GradeRequest, JudgeBackend, RubricJudge, RubricRequest, _clean

__all__ = [
    "AgreementReport",
    "ReferenceVsPoor",
    "ReliabilityBin",
    "Throughput",
    "agreement",
    "auc",
    "expected_calibration_error",
    "measure_throughput",
    "reference_vs_poor",
    "reliability",
]


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count half); NaN when a class is absent."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    pos, neg = s[y == 1], s[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def _nan_to_none(x: float) -> float | None:
    return None if x != x else x


@dataclass
class ReliabilityBin:
    """One bin of a reliability table: the labelled rows whose verdict fell in [lo, hi) ([lo, hi] for the
    last bin), their mean verdict, and how many of them are labelled 1 (a calibrated judge has them equal)."""

    lo: float
    hi: float
    n: int
    mean_verdict: float
    label_rate: float


def reliability(values: Sequence[float], labels: Sequence[int], bins: int = 5) -> list[ReliabilityBin]:
    """Verdict values (read as the probability of label 1) against the labels, in ``bins`` equal-width bins.

    Empty bins are kept (n 0, NaN means) so tables from different judges line up."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    v = np.asarray(values, dtype=float)
    y = np.asarray(labels, dtype=float)
    # the epsilon keeps a value on an edge (0.6 of 5 bins) in the bin that starts there, despite rounding
    idx = np.minimum(np.floor(v * bins + 1e-9).astype(int), bins - 1)
    out = []
    for b in range(bins):
        mask = idx == b
        n = int(mask.sum())
        out.append(
            ReliabilityBin(
                lo=b / bins,
                hi=(b + 1) / bins,
                n=n,
                mean_verdict=float(v[mask].mean()) if n else float("nan"),
                label_rate=float(y[mask].mean()) if n else float("nan"),
            )
        )
    return out


def expected_calibration_error(table: Sequence[ReliabilityBin]) -> float:
    """Mean |mean verdict - label rate| over the bins, weighted by their rows; NaN when no row."""
    total = sum(b.n for b in table)
    if total == 0:
        return float("nan")
    return float(sum(b.n * abs(b.mean_verdict - b.label_rate) for b in table if b.n) / total)


@dataclass
class AgreementReport:
    """Judge verdicts against labels: AUC of the verdict value, accuracy at 0.5, Brier score, a reliability
    table and its expected calibration error, over every row with a verdict and per domain.

    ``verdicts`` holds one value per labelled row given, in order (None: the judge gave none, and the row
    is out of every figure: ``missing`` counts them)."""

    n: int
    auc: float
    accuracy: float
    positives: int
    brier: float = float("nan")
    ece: float = float("nan")
    missing: int = 0
    per_domain: dict[str, dict[str, float]] = field(default_factory=dict)
    calibration: list[ReliabilityBin] = field(default_factory=list)
    verdicts: list[float | None] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Plain JSON-ready figures (NaN, e.g. the AUC of a one-class set, becomes None)."""
        return {
            "n": self.n,
            "positives": self.positives,
            "missing": self.missing,
            "auc": _nan_to_none(self.auc),
            "accuracy": _nan_to_none(self.accuracy),
            "brier": _nan_to_none(self.brier),
            "ece": _nan_to_none(self.ece),
            "per_domain": {d: {k: _nan_to_none(v) for k, v in row.items()} for d, row in self.per_domain.items()},
            "calibration": [
                {
                    "lo": b.lo,
                    "hi": b.hi,
                    "n": b.n,
                    "mean_verdict": _nan_to_none(b.mean_verdict),
                    "label_rate": _nan_to_none(b.label_rate),
                }
                for b in self.calibration
            ],
        }


def _figures(values: Sequence[float], labels: Sequence[int]) -> dict[str, float]:
    v = np.asarray(values, dtype=float)
    y = np.asarray(labels, dtype=int)
    if not len(v):
        return {"n": 0, "positives": 0, "auc": float("nan"), "accuracy": float("nan"), "brier": float("nan")}
    return {
        "n": len(v),
        "positives": int(y.sum()),
        "auc": auc(v, y),
        "accuracy": float(np.mean((v >= 0.5) == (y == 1))),
        "brier": float(np.mean((v - y) ** 2)),
    }


def agreement(backend: JudgeBackend, labels: Sequence[JudgeLabel], bins: int = 5) -> AgreementReport:
    """Grade every labelled (prompt, response, criterion) with ``backend`` in one call and compare.

    Pitfall criteria are labelled 1 when the response commits the pitfall, which is what a judge's
    verdict on a pitfall means too, so both kinds compare the same way. ``bins``: of the reliability table.
    """
    reqs = [GradeRequest(x.prompt, x.response, x.criterion, x.reference_answer) for x in labels]
    got = list(backend.grade(reqs)) if reqs else []
    if len(got) != len(reqs):
        raise JudgeError(
            f"judge backend {backend.name} returned {len(got)} verdicts for {len(reqs)} labelled rows: "
            "a backend returns one verdict (or None) per request"
        )
    # a verdict outside [0, 1] or NaN is a backend bug, counted missing as in training
    verdicts = [None if (c := _clean(v)) is None else float(c.value) for v in got]
    graded = [(x, v) for x, v in zip(labels, verdicts, strict=True) if v is not None]
    by_domain: dict[str, list[tuple[JudgeLabel, float]]] = defaultdict(list)
    for x, v in graded:
        by_domain[x.domain].append((x, v))
    per = {d: _figures([v for _, v in rows], [x.label for x, _ in rows]) for d, rows in sorted(by_domain.items())}
    values, ys = [v for _, v in graded], [x.label for x, _ in graded]
    overall = _figures(values, ys)
    table = reliability(values, ys, bins)
    return AgreementReport(
        n=len(graded),
        auc=overall["auc"],
        accuracy=overall["accuracy"],
        positives=int(overall["positives"]),
        brier=overall["brier"],
        ece=expected_calibration_error(table),
        missing=len(labels) - len(graded),
        per_domain=per,
        calibration=table,
        verdicts=verdicts,
    )


@dataclass
class ReferenceVsPoor:
    """On how many tasks the reference answer outscores a deliberately poor one."""

    tasks: int
    reference_wins: int
    mean_reference: float
    mean_poor: float
    per_domain: dict[str, tuple[int, int]] = field(default_factory=dict)
    losers: list[str] = field(default_factory=list)


def reference_vs_poor(judge: RubricJudge, tasks: Sequence[Task], poor_key: str = "poor_answer") -> ReferenceVsPoor:
    """Grade each task's reference answer and its ``metadata[poor_key]`` answer with version-0 rubrics."""
    pairs = [t for t in tasks if t.reference_answer and t.metadata.get(poor_key)]
    reqs = []
    for t in pairs:
        reqs.append(RubricRequest.for_task(t, t.reference_answer or ""))
        reqs.append(RubricRequest.for_task(t, t.metadata[poor_key]))
    results = judge.grade(reqs)
    wins = 0
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    refs, poors, losers = [], [], []
    for k, t in enumerate(pairs):
        r, p = results[2 * k].reward, results[2 * k + 1].reward
        r = float("nan") if r is None else r
        p = float("nan") if p is None else p
        refs.append(r)
        poors.append(p)
        won = r > p
        wins += won
        per[t.domain][0] += won
        per[t.domain][1] += 1
        if not won:
            losers.append(t.id)
    return ReferenceVsPoor(
        tasks=len(pairs),
        reference_wins=wins,
        mean_reference=float(np.nanmean(refs)) if refs else float("nan"),
        mean_poor=float(np.nanmean(poors)) if poors else float("nan"),
        per_domain={d: (w, n) for d, (w, n) in sorted(per.items())},
        losers=losers,
    )


@dataclass
class Throughput:
    """Criteria graded per second by a backend (no cache), at one batch size."""

    backend: str
    batch_size: int
    requests: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else float("inf")


def measure_throughput(
    backend: JudgeBackend, requests: Sequence[GradeRequest], batch_size: int, repeats: int = 1
) -> Throughput:
    """Time ``backend.grade`` over ``requests`` in batches of ``batch_size`` (best of ``repeats``)."""
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for start in range(0, len(requests), batch_size):
            backend.grade(requests[start : start + batch_size])
        best = min(best, time.perf_counter() - t0)
    return Throughput(backend.name, batch_size, len(requests), best)
