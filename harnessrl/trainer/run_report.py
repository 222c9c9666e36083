"""What a person reads after a run: the terminal summary, plots, and ``report.html``.

Everything is rebuilt from the run directory's files (``harnessrl report --run-dir DIR``), so a
report can be made for a run that was killed, or while one is still going.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harnessrl.errors import HarnessRLError
from harnessrl.records.evaluations import EvalResult
from harnessrl.records.event_payloads import (
    AttributionPayload,
    AuditProbePayload,
    CommitPayload,
    DeferredPayload,
    EventPayload,
    FailureEndPayload,
    FailurePayload,
    GiveUpPayload,
    ProposalPayload,
    RubricAuditPayload,
    TrialPayload,
    VerdictPayload,
)
from harnessrl.records.events import Event
from harnessrl.records.run_record import (
    BestCheckpoint,
    MetricRow,
    Missing,
    RunRecord,
    RunSummaryRecord,
    SplitSummary,
)
from harnessrl.records.steps import GroupRecord

__all__ = ["print_summary", "update_stories", "write_report", "write_run_plots"]

logger = logging.getLogger(__name__)


def print_summary(summary: RunSummaryRecord, console: Console) -> None:
    """The end-of-run table: method, steps, time and its breakdown, rewards, test scores, best checkpoint."""
    t = Table(title=f"Run summary — {summary.run_dir}", title_justify="left", show_header=False)
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("method", f"{summary.method} (evolver {'on' if summary.evolver_enabled else 'off'})")
    t.add_row("steps", str(summary.steps))
    t.add_row("wall time", f"{summary.wall_seconds / 60:.1f} min")
    total = summary.timings.get("step_total", 0.0)
    for k in ("generation", "judging", "scoring_other", "recording", "update"):
        v = summary.timings.get(k, 0.0)
        share = f" ({v / total:.0%} of step time)" if total else ""
        t.add_row(f"  {k}", f"{v:.0f} s{share}")
    if summary.steps:
        t.add_row("  per step", f"{total / summary.steps:.1f} s")
    devices = summary.extra.devices
    if devices:
        t.add_row("devices", ", ".join(f"{k} {v}" for k, v in devices.items() if v))
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    t.add_row("train reward first → last step", f"{fmt(summary.reward_first)} → {fmt(summary.reward_last)}")
    test_eval = summary.eval.get("test") or summary.eval.get("validation") or SplitSummary()
    graded = test_eval.graded_with or "rubric"
    proxy = f" (proxy, rubric v0: {fmt(test_eval.final_proxy)} at the end)" if graded == "gold" else ""
    t.add_row(f"test score ({graded}) before → after", f"{fmt(summary.eval_before)} → {fmt(summary.eval_after)}{proxy}")
    if summary.best:
        test = summary.best.test.overall if summary.best.test is not None else None
        t.add_row(
            "best validation score",
            f"{summary.best.overall:.3f} at step {summary.best.step} (test there: {fmt(test)})",
        )
    acc = summary.accounting
    if acc.model_dump():
        t.add_row(
            "rollouts generated / discarded / trial",
            f"{acc.rollouts_generated or 0:.0f} / {acc.rollouts_discarded or 0:.0f} / {acc.rollouts_trial or 0:.0f}",
        )
        t.add_row("judge calls (incl. trials)", f"{acc.judge_calls or 0:.0f}")
    failures = summary.extra.failures
    t.add_row("reward failures detected", ", ".join(f"{k} {v}" for k, v in sorted(failures.items())) or "none")
    secs = summary.extra.monitor_seconds
    if secs and total:
        t.add_row("  detectors + memory", f"{sum(secs.values()):.1f} s ({sum(secs.values()) / total:.1%} of step time)")
    console.print(t)


def _series(metrics: list[MetricRow], key: str) -> tuple[list[int], list[float]]:
    pts = [(m.step, v) for m in metrics if (v := m.value(key)) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def write_run_plots(record: RunRecord) -> list[Path]:
    """Reward, zero-std fraction (all-low / all-high), completion length, held-out score: PNGs in plots/."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in record.metrics if "reward" in (m.model_extra or {})]
    evals = list(record.evaluations)
    out = []
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    ax = axes[0][0]
    x, y = _series(metrics, "reward")
    ax.plot(x, y, label="reward (step mean)", alpha=0.4)
    if len(y) >= 5:
        k = 5
        ax.plot(x[k - 1 :], [sum(y[i - k + 1 : i + 1]) / k for i in range(k - 1, len(y))], label=f"{k}-step average")
    xs, ys = _series(metrics, "reward_std")
    ax.plot(xs, ys, label="reward std", alpha=0.6)
    ax.set_title("Training reward")
    ax.set_xlabel("step")
    ax.legend()
    ax = axes[0][1]
    x1, lo = _series(metrics, "frac_reward_zero_std/all_low")
    x2, hi = _series(metrics, "frac_reward_zero_std/all_high")
    if x1 and len(x1) == len(x2):
        ax.bar(x1, lo, width=0.9, label="flat, all low")
        ax.bar(x2, hi, width=0.9, bottom=lo, label="flat, all high")
    ax.set_ylim(0, 1)
    ax.set_title("Groups with no learning signal (reward std < eps)")
    ax.set_xlabel("step")
    ax.legend(loc="upper right")
    ax = axes[1][0]
    x, y = _series(metrics, "completions/mean_length")
    ax.plot(x, y, color="tab:purple")
    ax.set_title("Completion length (tokens, mean)")
    ax.set_xlabel("step")
    ax = axes[1][1]
    if evals:
        splits = sorted({e.split for e in evals}, key=lambda s: (s is None, s or ""))
        for split in splits:
            rows = [e for e in evals if e.split == split]
            ax.plot(
                [e.step for e in rows],
                [float("nan") if e.overall is None else e.overall for e in rows],  # None: no score
                marker="o",
                label=f"{split or 'held-out'} overall",
                linewidth=2,
            )
        reported = [e for e in evals if e.split == splits[-1]]  # per domain: test (or the only split)
        for d in sorted({d for e in reported for d in e.per_domain}):
            ax.plot(
                [e.step for e in reported],
                [e.per_domain.get(d) for e in reported],
                marker=".",
                alpha=0.6,
                label=f"{splits[-1] or 'held-out'}: {d}",
            )
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no held-out evaluation in this run", ha="center", va="center", color="gray")
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_title("Evaluation score (rubric v0, greedy)")
    ax.set_xlabel("step")
    fig.tight_layout()
    (record.path / "plots").mkdir(exist_ok=True)
    path = record.path / "plots" / "training.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    out.append(path)
    return out


def _story_task(failure_id: str, events: Sequence[EventPayload]) -> str | None:
    for p in events:
        if isinstance(p, AttributionPayload | FailureEndPayload) and p.task_id:
            return p.task_id
        update = (p.update if isinstance(p, ProposalPayload | CommitPayload) else None) or {}
        if update.get("task_id") or (update.get("scope") == "task" and update.get("target")):
            return update.get("task_id") or update.get("target")
    parts = failure_id.split(":")
    return parts[1] if len(parts) > 2 else None


def _effect(groups: Sequence[GroupRecord], task_ids: list[str], from_step: int) -> str:
    """The learning signal of the tasks an update changed, before vs after it (their groups' std and flat share)."""
    mine = [g for g in groups if g.task_id in task_ids and g.std is not None]
    before = [g for g in mine if g.step < from_step]
    after = [g for g in mine if g.step >= from_step]

    def desc(gs: list[GroupRecord]) -> str:
        if not gs:
            return "no groups"
        std = sum(g.std or 0.0 for g in gs) / len(gs)
        return f"{len(gs)} group(s), mean std {std:.3f}, {sum(bool(g.flat) for g in gs)} flat"

    return f"before: {desc(before)}; after: {desc(after)}"


class _Html(str):
    """A table cell that is already HTML (``_table`` escapes every other cell)."""


def _number(v) -> str:
    """A figure as a reader takes it in: floats to three decimals, a missing one as n/a."""
    if v is None:
        return "n/a"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def _rounded(v):
    """JSON for reading: floats to four significant digits (events keep every digit in events.jsonl)."""
    if isinstance(v, float):
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def _fold(text: str, head: int = 160, label: str | None = None) -> _Html:
    """Short text as it is; long text folded: a one-line ``<summary>`` (``label`` or the text's start) and
    the whole text in a wrapping ``<pre>`` a click away, so no cell or line becomes a wall of text."""
    if label is None and len(text) <= head:
        return _Html(html.escape(text))
    if label is None:
        label = text[:head].rsplit(" ", 1)[0] + " …"
    return _Html(f"<details><summary>{html.escape(label)}</summary><pre>{html.escape(text)}</pre></details>")


_FIRST_IN_A_LINE = ("verdict", "accepted", "interface", "candidate_id", "task_id", "metric", "reason", "rationale")


def _event_line(details: dict, width: int = 170) -> tuple[str, bool]:
    """An event as one line a reader can tell apart from its neighbours, and whether the line says it all.

    Scalar fields by name, one level of nesting included (``result.accepted`` reads as ``accepted``; a name
    already shown is not repeated), the telling ones first, long strings shortened, as many as fit."""
    flat: dict[str, object] = {}
    whole = True
    for k, v in details.items():
        for name, value in v.items() if isinstance(v, dict) else [(k, v)]:
            if isinstance(value, dict | list) and value:
                whole = False
            elif name not in flat:
                flat[name] = value
            elif flat[name] != value:
                whole = False
    order = sorted(flat, key=lambda k: _FIRST_IN_A_LINE.index(k) if k in _FIRST_IN_A_LINE else 99)
    shown = []
    for k in order:
        value = flat[k] if isinstance(flat[k], str) else json.dumps(flat[k], default=str)
        if len(value) > 80:
            value, whole = value[:80].rsplit(" ", 1)[0] + " …", False
        shown.append(f"{k}: {value}")
    line = ""
    for part in shown:  # whole fields only, as many as fit
        if line and len(line) + len(part) + 3 > width:
            return line if line.endswith("…") else line + " …", False
        line = f"{line} · {part}" if line else part
    return line, whole


def _without_verdict(reason: str) -> str:
    """A trial's reason without its leading "accepted: " / "rejected: " (the story prints the verdict)."""
    for verdict in ("accepted: ", "rejected: "):
        if reason.startswith(verdict):
            return reason[len(verdict) :]
    return reason


def update_stories(events: Sequence[Event], groups: Sequence[GroupRecord]) -> str:
    """One readable story per handled failure: the failure and its evidence, the attribution, each
    candidate with its trial numbers and verdict, the commit, and the task's signal afterwards."""
    by_failure: dict[str, list[Event]] = {}
    for e in events:
        if e.kind in _STORY_KINDS and isinstance(p := e.payload(), _STORY_PAYLOADS) and p.failure_id:
            by_failure.setdefault(p.failure_id, []).append(e)
    if not by_failure:
        return ""
    out = ["<h2>Harness updates: one story per handled failure</h2>"]
    for fid, evs in by_failure.items():
        task = _story_task(fid, [e.payload() for e in evs])
        attribution = next((e.payload_as(AttributionPayload) for e in evs if e.kind == "attribution"), None)
        committed = next((e for e in evs if e.kind == "commit"), None)
        ended = next((_ENDED[e.kind] for e in reversed(evs) if e.kind in _ENDED), "open")
        status = "committed" if committed else ended
        out.append(f"<h3>{html.escape(fid)} — {status}</h3><ul>")
        if attribution is not None:
            out.append(f"<li><b>Failure</b>: {html.escape(attribution.summary or '')}</li>")
            out.append(
                f"<li><b>Attribution</b> → {html.escape(str(attribution.interface))}: "
                f"{html.escape(attribution.rationale or '')}</li>"
            )
        out += [line for e in evs if (line := _story_line(e))]
        if committed:
            out.append(_committed_line(committed, task, groups))
        out.append("</ul>")
    return "\n".join(out)


def _story_line(e: Event) -> str:
    """A proposal, trial, give-up or deferral of a story as its line (empty for the other kinds)."""
    p = e.payload()
    if isinstance(p, ProposalPayload):
        upd = {k: v for k, v in (p.update or {}).items() if v not in ([], {}, None, "")}
        why = upd.pop("rationale", "")
        return (
            f"<li><b>Candidate</b> {html.escape(str(p.candidate_id))} ({html.escape(str(p.interface))}): "
            f"{html.escape(why)}{_fold(json.dumps(upd, indent=1), label='the update, as proposed')}</li>"
        )
    if isinstance(p, TrialPayload):
        return _trial_line(p.result)
    if isinstance(p, GiveUpPayload):
        return f"<li><b>Gave up</b>: {html.escape(p.reason or '')}</li>"
    if isinstance(p, DeferredPayload):
        asked = p.evidence_draw
        draw = f"; {html.escape(str(asked.task_id))} is drawn at step {asked.step} for it" if asked else ""
        return f"<li><b>Deferred</b> until more groups are graded (step {e.step}){draw}</li>"
    return ""


def _trial_line(r: dict) -> str:
    """A trial's line: its metric before and after, interval and verdict (``r``: the trial result as written, a
    :class:`~harnessrl.records.trials.TrialResult`'s dump, of whatever version of it the run wrote)."""
    cost = r.get("cost") or {}
    adv = r.get("advantage_effect")
    adv_txt = f", largest change to a rollout's advantage {adv}" if adv is not None else ""
    thr = f", smallest effect worth a change {r.get('threshold')}" if r.get("threshold") is not None else ""
    verdict = r.get("verdict_kind") or ("accepted" if r.get("accepted") else "rejected")
    mde = r.get("min_detectable_effect")
    mde_txt = f", smallest detectable effect {mde}" if mde is not None else ""
    covers = r.get("covers") or []
    pooled = f" over {len(covers)} tasks" if len(covers) > 1 else ""
    return (
        f"<li><b>Trial</b> on the frozen policy{pooled}: {html.escape(str(r.get('metric')))} "
        f"{r.get('baseline')} → {r.get('candidate')}, interval [{r.get('ci_low')}, {r.get('ci_high')}]"
        f"{thr}{adv_txt}{mde_txt} "
        f"— <b>{html.escape(str(verdict))}</b>: "
        f"{html.escape(_without_verdict(str(r.get('reason'))))} "
        f"(cost: {cost.get('rollouts')} rollouts, {cost.get('judge_calls')} judge calls, "
        f"{cost.get('seconds')} s)</li>"
    )


def _committed_line(e: Event, task: str | None, groups: Sequence[GroupRecord]) -> str:
    """A story's commit, with the signal of the tasks it covers before and after it."""
    committed = e.payload_as(CommitPayload)
    start = committed.applies_from_step if committed.applies_from_step is not None else (e.step or 0) + 1
    covers = committed.covers or [task]
    reach = f" covering {len(covers)} tasks ({', '.join(map(str, covers[:6]))}{', ...' if len(covers) > 6 else ''})"
    return (
        f"<li><b>Committed</b> as {html.escape(str(committed.interface))} version {committed.version}, "
        f"from step {start}{html.escape(reach) if len(covers) > 1 else ''}. <b>Effect</b>: "
        f"{html.escape(_effect(groups, [str(t) for t in covers], start))}</li>"
    )


_STORY_KINDS = ("attribution", "proposal", "trial", "verdict", "commit", "give_up", "deferred")
_STORY_PAYLOADS = (AttributionPayload, ProposalPayload, TrialPayload, VerdictPayload, CommitPayload, FailureEndPayload)
_ENDED = {"give_up": "gave up", "deferred": "deferred"}


def audit_section(events: Sequence[Event]) -> str:
    """The rubric audit before step 1: each requirement the prompts state and the rubrics did not check, its tasks,
    the task drawn for its first group (``evolver.evidence_draws``), the tasks probed before step 1
    (``evolver.audit_probe_tasks``, the ``audit_probe`` event) and whether a commit covered it."""
    audit = next((e.payload_as(RubricAuditPayload) for e in events if e.kind == "rubric_audit"), None)
    if audit is None:
        return ""
    if not audit.findings:
        return "<h2>Rubric audit</h2><p>every requirement the training prompts state is checked by their rubrics</p>"
    covered: dict[tuple[str, str], int] = {}  # (requirement, task) -> the step its repair applies from
    for c in (e.payload_as(CommitPayload) for e in events if e.kind == "commit"):
        signature = (c.update or {}).get("signature") or {}
        for key in str(signature.get("key") or "").split("+") if signature.get("kind") == "requirement" else []:
            for t in c.covers:
                covered.setdefault((key, str(t)), c.applies_from_step or 0)
    drawn = {str(d.key): d.evidence_draw for d in audit.evidence_draws}
    probe = next((e.payload_as(AuditProbePayload) for e in events if e.kind == "audit_probe"), None)
    probed = probe.findings if probe is not None else {}
    rewards = probe.rewards if probe is not None else {}
    rows = []
    for f in audit.findings:
        key = str(f.key)
        steps = [covered[(key, t)] for t in f.tasks if (key, t) in covered]
        reached = f"{len(steps)} of {len(f.tasks)} tasks, from step {min(steps)}" if steps else "not repaired"
        row = [f.key, f.text, len(f.tasks), _fold(", ".join(f.tasks)), reached]
        if drawn:
            first = drawn.get(key)
            row.append(f"{first.task_id} at step {first.step}" if first else "—")
        if probe is not None:
            mine = [t for t in probed.get(key) or [] if t in rewards]
            row.append(f"{', '.join(mine)} ({sum(len(rewards[t]) for t in mine)} rollouts)" if mine else "—")
        rows.append(row)
    header = ["requirement", "criterion", "tasks", "which", "repaired"] + (["first drawn"] if drawn else [])
    header += ["probed before step 1"] if probe is not None else []
    note = ""
    if probe is not None and probe.error:
        note = f"<p>the probes were not made: {html.escape(probe.error)}</p>"
    return "<h2>Rubric audit (before step 1)</h2>" + _table(rows, header) + note


def _table(rows: list[list], header: list[str]) -> str:
    """Rows of cells, escaped unless a cell is ``_Html``; no header row when every header is empty."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, _Html) else html.escape(str(c))}</td>" for c in r) + "</tr>"
        for r in rows
    )
    return f"<table>{f'<tr>{head}</tr>' if any(header) else ''}{body}</table>"


def harness_section(harness: dict, events: Sequence[Event]) -> str:
    """One row per interface of the saved harness (built in or plugged in): its version, its candidates
    and commits in this run, and what its own ``summary`` says is in force."""
    summaries = harness.get("summary") or {}
    counts: dict[tuple[str, str], int] = {}
    for e in events:
        p = e.payload()
        if isinstance(p, ProposalPayload | CommitPayload) and p.interface:
            counts[(p.interface, e.kind)] = counts.get((p.interface, e.kind), 0) + 1
    rows = []
    for name, version in (harness.get("versions") or {}).items():
        info = {k: v for k, v in (summaries.get(name) or {}).items() if k not in ("version", "updates")}
        rows.append(
            [
                name,
                version,
                counts.get((name, "proposal"), 0),
                counts.get((name, "commit"), 0),
                _fold("; ".join(f"{k}: {json.dumps(_rounded(v), default=str)}" for k, v in info.items()) or "-"),
            ]
        )
    if not rows:
        return "<h2>Harness</h2><p>no harness.json in this run directory</p>"
    return "<h2>Harness</h2>" + _table(rows, ["interface", "version", "candidates", "commits", "in force"])


def write_report(run_dir: str | Path) -> Path:
    """Write plots and ``report.html`` for a run directory; returns the report's path."""
    if not Path(run_dir).is_dir():
        raise HarnessRLError(f"{run_dir}: no such run directory (train one with `harnessrl train`)")
    record = RunRecord.load(run_dir)
    plots = write_run_plots(record)
    events = record.events
    parts = [_HEAD, f"<h1>HarnessRL run: {html.escape(str(record.path))}</h1>"]
    if not isinstance(record.summary, Missing):
        parts.append("<h2>Summary</h2>" + _table(_summary_rows(record.summary), ["", ""]))
    if not isinstance(record.best, Missing):
        parts.append(_best_line(record.best))
    parts += [f"<img src='plots/{p.name}' alt='training curves ({p.name})'>" for p in plots]
    if record.evaluations:
        parts.append(_evaluation_section(list(record.evaluations)))
    parts.append(harness_section({} if isinstance(record.harness, Missing) else record.harness, events))
    parts.append(audit_section(events))
    parts.append(update_stories(events, record.groups))
    parts.append(_failures_section([e for e in events if e.kind == "failure"]))
    parts.append(_events_section([e for e in events if e.kind != "failure"]))
    parts.append("</body></html>")
    report = record.path / "report.html"
    report.write_text("\n".join(p for p in parts if p), encoding="utf-8")
    return report


_HEAD = (
    "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
    "<meta name='viewport' content='width=device-width, initial-scale=1'>"
    "<title>HarnessRL run report</title><style>"
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}"
    "h1{overflow-wrap:anywhere}img{max-width:100%;height:auto}"
    "table{border-collapse:collapse;margin:1em 0;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left;vertical-align:top;"
    "overflow-wrap:break-word}"
    "th{background:#f3f3f3}pre{background:#f7f7f7;padding:8px;font-size:12px;margin:4px 0;"
    "white-space:pre-wrap;overflow-wrap:anywhere}"
    "summary{cursor:pointer;color:#335}details[open]>summary{color:#888}"
    "</style></head><body>"
)


def _summary_rows(summary: RunSummaryRecord) -> list[list]:
    t = summary.timings
    test = summary.eval.get("test")
    graded = (test.graded_with if test is not None else None) or "rubric"
    rows = [
        ["steps", summary.steps],
        ["wall time (min)", f"{summary.wall_seconds / 60:.1f}"],
        [
            "seconds by part of the step",
            ", ".join(f"{k} {v:.0f}" for k, v in t.items() if k != "step_total")
            + (f"; whole steps {t['step_total']:.0f}" if "step_total" in t else ""),
        ],
        ["train reward first → last", f"{_number(summary.reward_first)} → {_number(summary.reward_last)}"],
        [f"test before → after ({graded})", f"{_number(summary.eval_before)} → {_number(summary.eval_after)}"],
    ]
    if summary.method:
        rows.insert(0, ["method", summary.method])
    acc = summary.accounting
    totals = (
        ("generated", acc.rollouts_generated),
        ("discarded", acc.rollouts_discarded),
        ("trial", acc.rollouts_trial),
    )
    spent = {k: v for k, v in totals if v is not None}
    if spent:
        rows.append([f"rollouts {' / '.join(spent)}", " / ".join(f"{v:.0f}" for v in spent.values())])
    if acc.judge_calls is not None:
        rows.append(["judge calls", f"{acc.judge_calls:.0f}"])
    if acc.harness_overhead_share is not None:
        rows.append(["harness overhead (share of wall time)", f"{acc.harness_overhead_share:.1%}"])
    return rows


def _best_line(best: BestCheckpoint) -> str:
    test = best.test.overall if best.test is not None else None
    return (
        f"<p>Best {html.escape(best.split)} score ({html.escape(best.graded_with)}) <b>{_number(best.overall)}</b>"
        f" at step <b>{best.step}</b>"
        + (f"; test score there <b>{test:.3f}</b>" if test is not None else "")
        + (f" (saved in {html.escape(best.checkpoint)})" if best.checkpoint else "")
        + "</p>"
    )


def _evaluation_section(evals: list[EvalResult]) -> str:
    """Each evaluation: its grading, the score and the proxy beside a gold one, per family (else per domain)."""
    by = "per_family" if any(e.per_family for e in evals) else "per_domain"

    def scores(e: EvalResult) -> dict[str, float]:
        return e.per_family if by == "per_family" else e.per_domain

    groups = sorted({d for e in evals for d in scores(e)})
    rows = [
        [
            e.step,
            e.split or "held-out",
            e.graded_with,
            _number(e.overall),
            _number(e.proxy.overall if e.proxy is not None else None),
            *[_number(scores(e).get(d)) for d in groups],
        ]
        for e in evals
    ]
    return (
        "<h2>Evaluation (validation chooses the best checkpoint; test is only reported)</h2>"
        "<p>Graded with the tasks' gold rubrics where they have them; the proxy is their rubric version 0, what "
        f"training optimises. Columns after it: {by.replace('_', ' ')}.</p>"
        + _table(rows, ["step", "split", "graded with", "score", "proxy", *groups])
    )


def _failures_section(failures: Sequence[Event]) -> str:
    if not failures:
        return ""
    by_kind: dict[str, list[tuple[Event, FailurePayload]]] = {}
    for e in failures:
        f = e.payload_as(FailurePayload)
        by_kind.setdefault(str(f.failure), []).append((e, f))
    rows = [
        [
            k,
            len(fs),
            len({f.task_id for _, f in fs}),
            f"{fs[0][0].step}–{fs[-1][0].step}" if fs[0][0].step != fs[-1][0].step else fs[0][0].step,
            fs[-1][1].summary,
        ]
        for k, fs in sorted(by_kind.items())
    ]
    return "<h2>Reward failures detected</h2>" + _table(rows, ["failure", "events", "tasks", "steps", "latest"])


def _events_section(events: Sequence[Event]) -> str:
    if not events:
        return ""
    rows = []
    for e in events:
        details = _rounded(dict(e.model_extra or {}))  # shown as written: each kind's own fields
        line, whole = _event_line(details)
        if not whole:
            line = _fold(json.dumps(details, indent=1, ensure_ascii=False, default=str), label=line)
        rows.append([e.step, e.kind, line])
    return "<h2>Events</h2>" + _table(rows, ["step", "event", "details"])
