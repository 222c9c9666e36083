"""The judge bench: how well and how fast a judge grades, as ``harnessrl bench judge`` prints it.

:func:`measure_judge` grades labelled rows (agreement, calibration, the largest disagreements), and on the
bundled sample the reference answer against the deliberately poor one and the criteria graded per second;
it returns the figures as a dict (the command's ``--json``) and prints rich tables when given a console.
The measures themselves are :mod:`harnessrl.judges.quality`'s; this module runs and shows them.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harnessrl.judges.quality import agreement, measure_throughput, reference_vs_poor

if TYPE_CHECKING:
    from harnessrl.data import JudgeLabel, Task
    from harnessrl.errors import RowError
    from harnessrl.judges.quality import AgreementReport
    from harnessrl.judges.rubric_judge import RubricJudge

__all__ = ["measure_judge", "print_agreement", "print_disagreements"]


def measure_judge(
    judge: RubricJudge,
    rows: Sequence[JudgeLabel],
    row_errors: Sequence[RowError],
    source: str,
    *,
    bins: int,
    task_list: Sequence[Task] | None,
    max_tasks: int | None,
    requests: int,
    batch_sizes: Sequence[int],
    console: Console | None,
    status: Console,
) -> dict:
    """The judge bench's figures on ``rows`` (labelled rows read from ``source``; ``row_errors`` the bad ones).

    Args:
        task_list: the tasks to compare reference and poor answers on and to time grading with; None: the
            labels alone (a user's own labels file).
        console: where the tables go; None: print nothing (the caller prints the returned dict as JSON).
        status: where the progress spinners go.
    """
    if console is not None:
        console.print(
            f"[bold]Judge bench[/] — backend [cyan]{escape(judge.name)}[/], {len(rows)} labelled rows from "
            f"{escape(source)}"
            + (f" ({len(row_errors)} invalid row(s) left out: listed at the end)" if row_errors else "")
        )
    with status.status(f"grading {len(rows)} labelled rows..."):
        ag = agreement(judge.backend, rows, bins)
    out: dict = {
        "judge": judge.name,
        "labels": source,
        "rows": len(rows) + len(row_errors),
        "invalid_rows": len(row_errors),
        **ag.to_dict(),
        "verdicts": [
            {
                "line": x.line,
                "domain": x.domain,
                "task_id": x.task_id,
                "criterion_id": x.criterion.id,
                "label": x.label,
                "verdict": v,
            }
            for x, v in zip(rows, ag.verdicts, strict=True)
        ],
        "errors": [{"line": e.line, "task_id": e.task_id, "message": e.message} for e in row_errors],
    }
    if console is not None:
        print_agreement(ag, console)
        print_disagreements(rows, ag.verdicts, console)

    if task_list is not None:
        out["reference_vs_poor"] = _reference_vs_poor(judge, task_list, max_tasks, console, status)
        out["throughput"] = _throughput(judge, task_list, requests, batch_sizes, console, status)
    return out


def _reference_vs_poor(
    judge: RubricJudge, task_list: Sequence[Task], max_tasks: int | None, console: Console | None, status: Console
) -> dict:
    """The reference answer against the deliberately poor one, per domain (printed when there is a console)."""
    with status.status("grading reference and poor answers..."):
        rvp_tasks = task_list
        if max_tasks is not None:
            per_domain: dict[str, list] = {}
            for task in task_list:
                per_domain.setdefault(task.domain, []).append(task)
            rvp_tasks = [task for group in per_domain.values() for task in group[:max_tasks]]
        rvp = reference_vs_poor(judge, rvp_tasks)
    if console is not None:
        t = Table(title="Reference answer vs a deliberately poor answer (rubric version 0)", title_justify="left")
        for col in ("domain", "reference wins", "tasks"):
            t.add_column(col, justify="right" if col != "domain" else "left")
        for d, (w, n) in rvp.per_domain.items():
            t.add_row(d, str(w), str(n))
        t.add_row("[bold]all[/]", f"[bold]{rvp.reference_wins}[/]", str(rvp.tasks))
        t.caption = f"mean reward: reference {rvp.mean_reference:.3f}, poor {rvp.mean_poor:.3f}"
        console.print(t)
        if rvp.losers:
            console.print(f"reference not above poor on: {', '.join(rvp.losers)}")
    return {
        "tasks": rvp.tasks,
        "reference_wins": rvp.reference_wins,
        "mean_reference": None if rvp.mean_reference != rvp.mean_reference else rvp.mean_reference,
        "mean_poor": None if rvp.mean_poor != rvp.mean_poor else rvp.mean_poor,
        "per_domain": {d: {"reference_wins": w, "tasks": n} for d, (w, n) in rvp.per_domain.items()},
        "losers": rvp.losers,
    }


def _throughput(
    judge: RubricJudge,
    task_list: Sequence[Task],
    requests: int,
    batch_sizes: Sequence[int],
    console: Console | None,
    status: Console,
) -> list[dict]:
    """Criteria graded per second at each batch size, on responses no cache has seen."""
    from harnessrl.data import prompt_text
    from harnessrl.data.checks import split_sentences
    from harnessrl.judges import GradeRequest

    rng = random.Random(0)
    texts = [x for task in task_list for x in (task.reference_answer, task.metadata.get("poor_answer")) if x]

    def fresh_requests(tag: str) -> list[GradeRequest]:
        # as in training: each new response is graded on every judged criterion of its task, and every
        # sentence is new, so no cache flatters the figure (anchors - prompts, references - recur every
        # step in training and stay cached here too)
        reqs: list[GradeRequest] = []
        while len(reqs) < requests:
            task = rng.choice(task_list)
            sents = split_sentences(rng.choice(texts))
            response = " ".join(f"{s[:-1]} ({tag}.{len(reqs)}.{k}){s[-1]}" for k, s in enumerate(sents))
            reqs += [
                GradeRequest(prompt_text(task.prompt), response, c, task.reference_answer)
                for c in task.rubric
                if c.check is None
            ]
        return reqs[:requests]

    t = Table(
        title=f"Throughput: {requests} (response, criterion) pairs, whole rubrics per response, "
        f"{os.cpu_count()} CPU cores",
        title_justify="left",
    )
    for col in ("batch size", "seconds", "criteria / s"):
        t.add_column(col, justify="right")
    out = []
    for bs in batch_sizes:
        with status.status(f"timing batch size {bs}..."):
            tp = measure_throughput(judge.backend, fresh_requests(str(bs)), bs)
        t.add_row(str(bs), f"{tp.seconds:.2f}", f"{tp.per_second:.1f}")
        out.append({"batch_size": bs, "seconds": tp.seconds, "per_second": tp.per_second})
    if console is not None:
        console.print(t)
    return out


def _fig(x: float | None, fmt: str = ".3f") -> str:
    return "n/a" if x is None or x != x else format(x, fmt)


def print_agreement(ag: AgreementReport, console: Console) -> None:
    """The agreement table (per domain and overall) and the reliability table of an AgreementReport."""
    t = Table(title=f"Agreement with {ag.n} labels ({ag.positives} positive)", title_justify="left")
    for col in ("domain", "n", "positive", "AUC", "accuracy@0.5", "Brier"):
        t.add_column(col, justify="right" if col != "domain" else "left")
    for d, row in ag.per_domain.items():
        t.add_row(
            escape(d),
            str(int(row["n"])),
            str(int(row["positives"])),
            _fig(row["auc"]),
            _fig(row["accuracy"]),
            _fig(row["brier"]),
        )
    t.add_row(
        "[bold]all[/]",
        str(ag.n),
        str(ag.positives),
        f"[bold]{_fig(ag.auc)}[/]",
        f"[bold]{_fig(ag.accuracy)}[/]",
        _fig(ag.brier),
    )
    notes = ["AUC n/a: the rows hold one label only"] if ag.auc != ag.auc else []
    if ag.missing:
        notes.append(f"{ag.missing} row(s) got no verdict from the judge and are left out")
    t.caption = "; ".join(notes) or None
    console.print(t)
    t = Table(title=f"Calibration: label rate per verdict bin (ECE {_fig(ag.ece)})", title_justify="left")
    for col in ("verdict", "n", "mean verdict", "label rate", "gap"):
        t.add_column(col, justify="right" if col != "verdict" else "left")
    for i, b in enumerate(ag.calibration):
        bracket = "]" if i == len(ag.calibration) - 1 else ")"
        gap = b.label_rate - b.mean_verdict if b.n else None
        t.add_row(
            f"[{b.lo:.2f}, {b.hi:.2f}{bracket}",  # a bracket before a digit is no rich markup
            str(b.n),
            _fig(b.mean_verdict if b.n else None),
            _fig(b.label_rate if b.n else None),
            _fig(gap, "+.3f"),
        )
    t.caption = "gap > 0: the judge is too strict there; < 0: too lenient"
    console.print(t)


def print_disagreements(
    rows: Sequence[JudgeLabel], verdicts: Sequence[float | None], console: Console, top: int = 5
) -> None:
    """The rows where the judge's verdict is furthest from the label, on the wrong side of 0.5."""
    wrong = sorted(
        (
            (abs(v - x.label), x, v)
            for x, v in zip(rows, verdicts, strict=True)
            if v is not None and (v >= 0.5) != x.label
        ),
        key=lambda t: -t[0],
    )[:top]
    if not wrong:
        return
    t = Table(title=f"Largest disagreements ({top} at most)", title_justify="left")
    for col, kw in (("line", {"justify": "right"}), ("label", {"justify": "right"}), ("verdict", {"justify": "right"})):
        t.add_column(col, **kw)
    t.add_column("criterion", overflow="fold")
    for _, x, v in wrong:
        text = x.criterion.text if len(x.criterion.text) <= 60 else x.criterion.text[:57] + "..."
        pitfall = " (pitfall)" if x.criterion.is_pitfall else ""
        t.add_row(str(x.line), str(x.label), f"{v:.2f}", escape(text) + pitfall)
    console.print(t)
