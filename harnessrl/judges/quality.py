"""How good and how fast is a judge: agreement with hand labels, reference vs poor answers, throughput."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from harnessrl.data.schema import Task, prompt_text
from harnessrl.judges.rubric_judge import GradeRequest, JudgeBackend, RubricJudge, RubricRequest

__all__ = [
    "AgreementReport",
    "ReferenceVsPoor",
    "Throughput",
    "agreement",
    "auc",
    "measure_throughput",
    "reference_vs_poor",
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


@dataclass
class AgreementReport:
    """Judge verdicts against hand labels: AUC of the verdict value, accuracy at 0.5, per domain."""

    n: int
    auc: float
    accuracy: float
    positives: int
    per_domain: dict[str, dict[str, float]] = field(default_factory=dict)
    values: list[float] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)


def agreement(backend: JudgeBackend, labels: Sequence[dict], tasks: Sequence[Task]) -> AgreementReport:
    """Grade every labelled (task, criterion, response) with ``backend`` and compare.

    Pitfall criteria are labelled 1 when the response commits the pitfall, which is what a judge's
    verdict on a pitfall means too, so both kinds compare the same way.
    """
    by_id = {t.id: t for t in tasks}
    reqs, ys, doms = [], [], []
    for row in labels:
        task = by_id.get(row["task_id"])
        if task is None:
            raise ValueError(f"labelled task {row['task_id']!r} is not among the tasks given")
        crit = {c.id: c for c in task.rubric}.get(row["criterion_id"])
        if crit is None:
            raise ValueError(f"task {task.id!r} has no criterion {row['criterion_id']!r}")
        reqs.append(GradeRequest(prompt_text(task.prompt), row["response"], crit, task.reference_answer))
        ys.append(int(row["label"]))
        doms.append(task.domain)
    verdicts = backend.grade(reqs)
    vals = [float("nan") if v is None else v.value for v in verdicts]
    ok = [i for i, v in enumerate(vals) if v == v]
    v_ok = [vals[i] for i in ok]
    y_ok = [ys[i] for i in ok]
    per: dict[str, dict[str, float]] = {}
    groups: dict[str, list[int]] = defaultdict(list)
    for i in ok:
        groups[doms[i]].append(i)
    for d, idx in sorted(groups.items()):
        per[d] = {
            "n": len(idx),
            "auc": auc([vals[i] for i in idx], [ys[i] for i in idx]),
            "accuracy": float(np.mean([(vals[i] >= 0.5) == bool(ys[i]) for i in idx])),
        }
    return AgreementReport(
        n=len(ok),
        auc=auc(v_ok, y_ok),
        accuracy=float(np.mean([(v >= 0.5) == bool(y) for v, y in zip(v_ok, y_ok, strict=True)])) if ok else 0.0,
        positives=sum(y_ok),
        per_domain=per,
        values=v_ok,
        labels=y_ok,
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
