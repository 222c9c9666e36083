"""One run of a bench and its figures: :class:`RunData` (the run's record, its row of the bench manifest and its
training tasks) and :func:`run_figures`, the :class:`~harnessrl.analysis.figures.RunFigures` computed from it.

Every figure is computed from the run's record (:class:`~harnessrl.records.run_record.RunRecord`), each from one
source, so a report can be made while a bench is still running (see :mod:`harnessrl.analysis.results`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from harnessrl.analysis.decisions import Trial, Update, UpdateEvent, Verdict, changed_tasks, refusal_kind
from harnessrl.analysis.figures import CurvePoint, FamilyDecisions, RunFigures, TrainFamily, TrialCost
from harnessrl.analysis.misfires import misfire_counts
from harnessrl.detection.config import FLAT_HIGH, FLAT_LOW
from harnessrl.errors import HarnessRLError
from harnessrl.records.bench_files import ManifestRun
from harnessrl.records.evaluations import EvalResult, ScoreSet
from harnessrl.records.run_record import Missing, RunConfigView, RunRecord, finite_number

__all__ = [
    "DETECTOR_DEFAULTS",
    "TOTALS",
    "TRIAL_COST_FIELDS",
    "RunData",
    "harness_decisions",
    "run_figures",
    "trial_costs",
    "with_equal_cost",
]

logger = logging.getLogger(__name__)

TOTALS = ("rollouts_generated", "rollouts_discarded", "rollouts_trial", "judge_calls")
"""Run totals: the figures of the run's summary ``accounting`` (over every process that trained it)."""

DETECTOR_DEFAULTS = {"low": FLAT_LOW, "high": FLAT_HIGH}
"""``harness.detectors.low`` / ``high`` when a run's config.yaml has none: a flat group's mean below
``low`` is uniformly low, above ``high`` uniformly high (as the trainer splits them)."""


TaskMetadata = dict[str, object]
"""A training task's ``metadata`` (``family``, ``failure``, ...: whatever its data file gives)."""


@functools.lru_cache(maxsize=32)
def _tasks_of_file(path: str, mtime: float, fmt: str, domain: str | None) -> dict[str, tuple[str, TaskMetadata]]:
    from harnessrl.data import load_tasks

    return {t.id: (t.domain, dict(t.metadata)) for t in load_tasks(path, fmt, default_domain=domain)}  # type: ignore[arg-type]


def _training_tasks(config: RunConfigView) -> dict[str, tuple[str, TaskMetadata]]:
    """Task id -> (domain, ``metadata``) of a run's training tasks (its config's ``data.train``), ``{}``
    when the file is not there or not readable (the run's per-family training figures are then n/a)."""
    from harnessrl.data import data_path

    if not config.data.train:
        return {}
    try:
        path = data_path(config.data.train, "train")
        return _tasks_of_file(str(path), path.stat().st_mtime, config.data.format, config.data.domain)
    except (HarnessRLError, OSError, ValueError) as e:
        logger.warning(
            "the training tasks of %s (%s) are unreadable, no per-family training figures: %s",
            config.run_dir,
            config.data.train,
            str(e).splitlines()[0] if str(e) else type(e).__name__,
        )
        return {}


@dataclass
class RunData:
    """One run of a bench: its method and seed in the bench, its record, and its row of the bench manifest."""

    method: str
    seed: int
    record: RunRecord
    manifest: ManifestRun = field(default_factory=ManifestRun)
    train_tasks: dict[str, TaskMetadata] = field(default_factory=dict)
    """Task id -> metadata of the run's training tasks (``{}``: the file is not readable here)."""
    train_domains: dict[str, str] = field(default_factory=dict)
    """Task id -> domain of the run's training tasks (what a guidance of scope ``domain`` changes)."""

    @classmethod
    def read(cls, path: Path, method: str, seed: int, manifest: ManifestRun | None = None) -> RunData:
        record = RunRecord.load(path)
        tasks = _training_tasks(record.config)
        return cls(
            method=method,
            seed=seed,
            record=record,
            manifest=manifest or ManifestRun(),
            train_tasks={tid: meta for tid, (_, meta) in tasks.items()},
            train_domains={tid: str(dom) for tid, (dom, _) in tasks.items()},
        )

    @property
    def path(self) -> Path:
        return self.record.path

    @property
    def scored(self) -> list[EvalResult]:
        """The run's evaluations that have a score."""
        return [e for e in self.record.evaluations if e.overall is not None]

    @property
    def has_split(self) -> bool:
        """Whether the run evaluates a validation and a test split (newer runs) or one held-out set."""
        return any(e.split is not None for e in self.scored)

    def eval_rows(self, split: str) -> list[EvalResult]:
        """Scored evaluation rows of ``validation`` or ``test``, one per step (the last), in step order; a run
        without splits answers its held-out rows for both."""
        has_split = self.has_split
        rows = [e for e in self.scored if e.split == split or not has_split]
        by_step = {e.step: e for e in rows}
        return [by_step[s] for s in sorted(by_step)]

    def rollouts_spent(self) -> list[tuple[int, float]]:
        """Cumulative rollouts spent by each step (generated incl. discarded, plus critic trials), from the
        logged ``rollouts/generated`` and ``rollouts/trial``."""
        trial = dict(self.record.series("rollouts/trial"))
        out, last_trial = [], 0.0
        for step, g in self.record.series("rollouts/generated"):
            last_trial = trial.get(step, last_trial)
            out.append((step, g + last_trial))
        return out

    def graded_with(self) -> str | None:
        """What the run's evaluations are graded with: ``gold``, ``rubric``, ``mixed``, or None without any."""
        kinds = {e.graded_with for e in self.eval_rows("test") + self.eval_rows("validation")}
        return kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else None)

    def family_of(self, task_id: object) -> str | None:
        """A training task's ``metadata.family`` (None: unknown task, or no family)."""
        family = self.train_tasks.get(str(task_id), {}).get("family")
        return str(family) if family is not None else None

    def proposals(self) -> dict[str | None, UpdateEvent]:
        """The proposal events, parsed, by candidate id (the last one of an id)."""
        parsed = (UpdateEvent.parse(e) for e in self.record.events_of("proposal"))
        return {p.candidate_id: p for p in parsed}

    def commits(self) -> list[UpdateEvent]:
        """The commit events, parsed, in the order they were written."""
        return [UpdateEvent.parse(e) for e in self.record.events_of("commit")]


def _mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None


def _per(scores: ScoreSet | EvalResult | None, key: str = "per_family") -> dict[str, float]:
    """The numbers of a score set's ``per_family`` (or ``per_task``...): unscored entries dropped."""
    d: dict[str, float | None] = getattr(scores, key) if scores is not None else {}
    return {str(k): v for k, v in ((k, finite_number(v)) for k, v in d.items()) if v is not None}


def _proxy(row: EvalResult | None) -> ScoreSet | None:
    """The proxy (rubric version 0) score set beside a gold score, None when there is none."""
    return row.proxy if row is not None else None


def _overall(scores: ScoreSet | None) -> float | None:
    return scores.overall if scores is not None else None


def _spent_at(spent: Sequence[tuple[int, float]], step: int) -> float:
    """Cumulative rollouts spent by the end of ``step`` (0 before the first logged step)."""
    before = [v for s, v in spent if s <= step]
    return before[-1] if before else 0.0


class _GoldFigures(TypedDict):
    """The figures of :class:`~harnessrl.analysis.figures.RunFigures` :func:`_gold_figures` gives."""

    graded_with: str | None
    test_at_best_per_family: dict[str, float]
    test_end_per_family: dict[str, float]
    test_start_per_family: dict[str, float]
    proxy_test_at_best: float | None
    proxy_test_at_best_per_family: dict[str, float]
    proxy_test_end: float | None
    proxy_test_end_per_family: dict[str, float]
    proxy_test_start: float | None
    proxy_test_start_per_family: dict[str, float]
    clipped_share_end: float | None
    clipped_per_family_end: dict[str, float]
    test_curve: list[CurvePoint]
    test_per_task: dict[int, dict[str, float]]


def _gold_figures(run: RunData, test: list[EvalResult], best_row: EvalResult | None) -> _GoldFigures:
    """Per-family main scores, the proxy beside them, the test curve, and the eval's clipped share."""
    end = test[-1] if test else None
    start = test[0] if test and test[0].step == 0 else None
    spent = run.rollouts_spent()
    return {
        "graded_with": run.graded_with(),
        "test_at_best_per_family": _per(best_row),
        "test_end_per_family": _per(end),
        "test_start_per_family": _per(start),
        "proxy_test_at_best": _overall(_proxy(best_row)),
        "proxy_test_at_best_per_family": _per(_proxy(best_row)),
        "proxy_test_end": _overall(_proxy(end)),
        "proxy_test_end_per_family": _per(_proxy(end)),
        "proxy_test_start": _overall(_proxy(start)),
        "proxy_test_start_per_family": _per(_proxy(start)),
        "clipped_share_end": end.clipped_share if end else None,
        "clipped_per_family_end": _per(end, "clipped_per_family"),
        "test_curve": [
            CurvePoint(
                step=e.step,
                score=e.overall,
                proxy=_overall(e.proxy),
                rollouts_spent=_spent_at(spent, e.step) if spent else None,
            )
            for e in test
        ],
        # per-task test scores by step, for the bootstrap over tasks (kept out of results.json)
        "test_per_task": {e.step: _per(e, "per_task") for e in test},
    }


class _TrainingFigures(TypedDict):
    train_per_family: dict[str, TrainFamily]
    train_clipped_share: float | None


def _training_family_figures(run: RunData) -> _TrainingFigures:
    """From ``steps.jsonl``, per training-task family: groups drawn, the share of them flat and uniformly
    low / high (mean below ``harness.detectors.low`` / above ``high``), and the share of completions cut
    at ``grpo.max_completion_length``; and the clipped share over all groups."""
    detectors, budget = run.record.config.harness.detectors, run.record.config.grpo.max_completion_length
    low = DETECTOR_DEFAULTS["low"] if detectors.low is None else detectors.low
    high = DETECTOR_DEFAULTS["high"] if detectors.high is None else detectors.high
    counts: dict[str, dict[str, int]] = {}
    all_lengths: list[float] = []
    for g in run.record.groups:
        all_lengths += g.lengths
        family = run.family_of(g.task_id)
        if family is None:
            continue
        c = counts.setdefault(family, {"groups": 0, "low": 0, "high": 0, "completions": 0, "clipped": 0})
        c["groups"] += 1
        c["low"] += bool(g.flat is True and g.mean is not None and g.mean < low)
        c["high"] += bool(g.flat is True and g.mean is not None and g.mean > high)
        c["completions"] += len(g.lengths)
        c["clipped"] += sum(n >= budget for n in g.lengths) if budget else 0
    per_family = {
        f: TrainFamily(
            groups=c["groups"],
            flat_low=c["low"] / c["groups"],
            flat_high=c["high"] / c["groups"],
            clipped=c["clipped"] / c["completions"] if budget and c["completions"] else None,
        )
        for f, c in sorted(counts.items())
    }
    clipped = sum(n >= budget for n in all_lengths) / len(all_lengths) if budget and all_lengths else None
    return {"train_per_family": per_family, "train_clipped_share": clipped}


TRIAL_COST_FIELDS = tuple(TrialCost.model_fields)
"""Per remedy, what :func:`trial_costs` counts."""


def trial_costs(run: RunData) -> dict[str, TrialCost]:
    """Per remedy (``interface:remedy``, named as the commits are: the trial's own ``remedy``, else its
    proposal's): the critic's trials of its candidates, how many it accepted, and what they spent (rollouts
    generated, judge calls, seconds), from the trial events."""
    proposals = run.proposals()
    out: dict[str, TrialCost] = {}
    for e in run.record.events_of("trial"):
        trial = Trial.parse(e)
        proposal = proposals.get(trial.candidate_id)
        update = proposal.update if proposal is not None else Update()
        d = out.setdefault(update.remedy_name(trial.interface, trial.remedy), TrialCost())
        d.trials += 1
        d.accepted += trial.accepted
        d.rollouts += trial.rollouts or 0
        d.judge_calls += trial.judge_calls or 0
        d.seconds += trial.seconds or 0
    return dict(sorted(out.items()))


def harness_decisions(run: RunData) -> dict[str, FamilyDecisions]:
    """What the harness did, per task family (the task's id when it has none), read from the events: commits by
    interface and remedy ("task_sampling:park", "rubric_criteria:induced", ...; a remedy without a name is named
    by the update's action or ``update``; a commit on probation marked so, and the revert that ends one as
    ``<interface>:revert``), rejected candidates by their kind (:func:`~harnessrl.analysis.decisions.
    refusal_kind`), failures given up. A commit or a rejected candidate counts once in each family whose tasks
    it changes (:func:`~harnessrl.analysis.decisions.changed_tasks`)."""
    family_of = {tid: str(m.get("family") or tid) for tid, m in run.train_tasks.items()}
    proposals = run.proposals()
    trials: dict[str | None, Trial] = {}  # each candidate's latest trial so far (a pending one is tried again)
    out: dict[str, FamilyDecisions] = {}

    def entries(tasks: Iterable[object]) -> list[FamilyDecisions]:
        fams = dict.fromkeys(family_of.get(str(t), str(t)) for t in tasks) or {"None": None}
        return [out.setdefault(fam, FamilyDecisions()) for fam in fams]

    for e in run.record.events_of("trial", "commit", "revert", "verdict", "give_up"):
        if e.kind == "trial":
            trial = Trial.parse(e)
            trials[trial.candidate_id] = trial
        elif e.kind in ("commit", "revert"):
            commit = UpdateEvent.parse(e)
            for c in entries(changed_tasks(commit, run.train_domains)):
                c.commits[commit.name] = c.commits.get(commit.name, 0) + 1
        elif e.kind == "verdict" and (verdict := Verdict.parse(e)).rejected:
            proposal = proposals.get(verdict.candidate_id)
            tasks = changed_tasks(proposal, run.train_domains) if proposal is not None else ()
            why = refusal_kind(verdict, trials.get(verdict.candidate_id))
            for r in entries(tasks):
                r.rejected[why] = r.rejected.get(why, 0) + 1
        elif e.kind == "give_up":
            entries([Verdict.parse(e).task_id])[0].gave_up += 1
    return dict(sorted(out.items()))


def _best(run: RunData, test: list[EvalResult]) -> tuple[int | None, float | None, EvalResult | None]:
    """The best-validation step and score (``best.json``), and the test evaluation at that step."""
    best = run.record.best
    if isinstance(best, Missing):
        return None, None, None
    return best.step, best.overall, next((e for e in test if e.step == best.step), None)


class _Totals(TypedDict):
    """The figures of :class:`~harnessrl.analysis.figures.RunFigures` :func:`_totals` gives."""

    rollouts_generated: float | None
    rollouts_discarded: float | None
    rollouts_trial: float | None
    judge_calls: float | None
    rollouts_spent: float | None
    effective_group_ratio: float | None
    wall_seconds: float | None
    harness_overhead_seconds: float | None
    harness_overhead_share: float | None
    steps: int | None


def _totals(run: RunData) -> _Totals:
    """The run's totals (its summary's accounting), the bench's wall time, and the harness's share of it."""
    # the bench's own measure of the run, over all its attempts (0 while a run goes: not measured yet)
    summary, bench_wall = run.record.summary, finite_number(run.manifest.wall_seconds) or None
    if isinstance(summary, Missing):  # no totals before the run ends; the steps logged so far
        return _Totals(
            rollouts_generated=None,
            rollouts_discarded=None,
            rollouts_trial=None,
            judge_calls=None,
            rollouts_spent=None,
            effective_group_ratio=None,
            wall_seconds=bench_wall,
            harness_overhead_seconds=None,
            harness_overhead_share=None,
            steps=run.record.last_step,
        )
    acc = summary.accounting
    # wall time: what the bench measured (the trainer's own figure for a run the bench did not time); the overhead
    # share is the trainer's, within the processes that measured it
    overhead = acc.harness_overhead_seconds
    return _Totals(
        rollouts_generated=acc.rollouts_generated,
        rollouts_discarded=acc.rollouts_discarded,
        rollouts_trial=acc.rollouts_trial,
        judge_calls=acc.judge_calls,
        rollouts_spent=acc.rollouts_generated + (acc.rollouts_trial or 0.0)
        if acc.rollouts_generated is not None
        else None,
        effective_group_ratio=acc.effective_group_ratio,
        wall_seconds=bench_wall or summary.wall_seconds,
        harness_overhead_seconds=overhead,
        harness_overhead_share=overhead / summary.wall_seconds
        if overhead is not None and summary.wall_seconds
        else None,
        steps=summary.steps,
    )


def run_figures(run: RunData) -> RunFigures:
    """One run's figures (``None`` where the run does not record one)."""
    test = run.eval_rows("test")
    best_step, best_overall, test_at_best = _best(run, test)
    test_end = test[-1] if test else None
    record = run.record
    verdicts = record.events_of("verdict")
    return RunFigures(
        method=run.method,
        seed=run.seed,
        path=str(run.path),
        complete=record.ended,
        status=run.manifest.status or ("done" if record.ended else "incomplete"),
        trainer_method=record.config.method,
        max_steps=float(record.config.grpo.max_steps) if record.config.grpo.max_steps is not None else None,
        split="validation/test" if run.has_split else "held-out (one set both chooses and reports)",
        validation_best=best_overall,
        steps_to_best=best_step,
        test_at_best=test_at_best.overall if test_at_best else None,
        test_at_best_per_domain=dict(test_at_best.per_domain) if test_at_best else {},
        test_at_best_se=test_at_best.sampling_se if test_at_best else None,
        test_end=test_end.overall if test_end else None,
        test_end_se=test_end.sampling_se if test_end else None,
        test_end_step=test_end.step if test_end else None,
        test_end_per_domain=dict(test_end.per_domain) if test_end else {},
        test_start=test[0].overall if test and test[0].step == 0 else None,
        zero_std_all_low=_mean(v for _, v in record.series("frac_reward_zero_std/all_low")),
        zero_std_all_high=_mean(v for _, v in record.series("frac_reward_zero_std/all_high")),
        rollouts_spent_source="rollouts_generated + rollouts_trial",
        **_totals(run),
        harness_commits=len(record.events_of("commit")),
        harness_rejections=sum(Verdict.parse(e).rejected for e in verdicts),
        harness_decisions=harness_decisions(run),
        trial_costs=trial_costs(run),
        misfires=misfire_counts(run),
        **_gold_figures(run, test, test_at_best),
        **_training_family_figures(run),
        family_failure={
            str(m["family"]): str(m["failure"])
            for m in run.train_tasks.values()
            if m.get("family") is not None and m.get("failure") is not None
        },
    )


def with_equal_cost(runs_figures: Sequence[RunFigures]) -> list[RunFigures]:
    """The figures with each run's test score at equal rollouts spent.

    Per seed the budget is the smallest total spent by any run of that seed (generated, DAPO's
    discarded included, plus critic trials); each run's score is its test score at the last evaluation
    whose cumulative rollouts spent by that step is within the budget (``equal_rollouts_step``)."""
    budgets: dict[int, float] = {}
    for f in runs_figures:
        if f.rollouts_spent is not None:
            budgets[f.seed] = min(f.rollouts_spent, budgets.get(f.seed, f.rollouts_spent))
    out = []
    for f in runs_figures:
        budget = budgets.get(f.seed)
        points = [
            p
            for p in f.test_curve
            if budget is not None
            and p.score is not None
            and p.rollouts_spent is not None
            and p.rollouts_spent <= budget + 1e-9
        ]
        last = points[-1] if points else None
        out.append(
            f.model_copy(
                update={
                    "equal_rollouts_budget": budget,
                    "equal_rollouts_step": last.step if last else None,
                    "test_at_equal_rollouts": last.score if last else None,
                    "proxy_test_at_equal_rollouts": last.proxy if last else None,
                }
            )
        )
    return out
