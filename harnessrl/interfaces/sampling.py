"""Task sampling: which tasks make up the next batch, from per-task weights and status.

A task is *active* (sampled in proportion to its weight), *parked* until a step (not sampled until
then: out of reach for now) or *retired* (never again: solved, or useless). A floor keeps every
active task's share at least ``floor / n_active`` so nothing starves. The draw for a step is a pure
function of (seed, step, state), so every process of a multi-process run draws the same tasks and
takes its own slice, and TRL's grouping (each task repeated ``num_generations`` times) is built on
top by the trainer.

*Online difficulty filtering* (ODF, the ``odf`` training method) is a fixed policy of this interface,
not a separate sampler: a :class:`DifficultyFilter` in the sampling state keeps each task's recent
group mean rewards (fed from the trainer's step records through :meth:`TaskSampling.observe`) and
makes a task ineligible while that mean lies outside a band; a skipped task is re-probed once after
``reprobe_after`` steps. The draw stays a pure function of (seed, step, state).

*Evidence draws* (``evolver.evidence_draws``): a test the critic cannot decide yet on the groups graded so far
asks for its next group at once instead of waiting for the draw to come round (:meth:`TaskSampling.request_evidence`;
docs/design.md §4, "Evidence draws"). The request names a step and a task the test covers; that step's batch holds
the task in one of its places (at most half the batch), and the rest is drawn as always from what is left. It is
state, not an update: no version, no history entry, no change to any probability; the step and the task are in
the state (``evidence_draws``), so the draw stays a pure function of (seed, step, state).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from harnessrl.critic.moved_draws import REPLAY_GROUPS
from harnessrl.critic.power import decide_split, expected_groups_split
from harnessrl.critic.signal import CHECK_SPLIT_SHARE, MOVED_SIGNAL_SHARE
from harnessrl.data.schema import Task, task_group
from harnessrl.detection.config import FLAT_LOW
from harnessrl.errors import ConfigError
from harnessrl.interfaces.base import AppliedUpdate, HarnessContext, Interface, InterfaceUpdate, Suggestion, suggestions
from harnessrl.interfaces.evidence import ProposalEvidence
from harnessrl.interfaces.induction import reference_terms
from harnessrl.records.evidence import FlatGroupEvidence
from harnessrl.records.failures import Failure
from harnessrl.records.measurements import GroupReach

if TYPE_CHECKING:
    from harnessrl.critic.acceptance import Measured
    from harnessrl.critic.trials import Trial

__all__ = [
    "DifficultyFilter",
    "DifficultyFilterSettings",
    "ReweightTasks",
    "TaskSampling",
    "TaskSamplingState",
    "TaskStatus",
]

TaskStatus = Literal["active", "parked", "retired"]


class ReweightTasks(InterfaceUpdate):
    """Change how often tasks are sampled. Use ``action="reweight"`` with a weight (1.0 is the default;
    2.0 samples twice as often) to promote tasks in the learnable band or demote ones that teach little;
    ``"park"`` to stop sampling tasks that are out of reach for now (for ``park_steps`` steps);
    ``"retire"`` to stop sampling solved or broken tasks for good; ``"activate"`` to bring tasks back."""

    interface: Literal["task_sampling"] = "task_sampling"
    task_ids: list[str] = Field(min_length=1, description="Tasks this update applies to.")
    action: Literal["reweight", "park", "retire", "activate"] = "reweight"
    weight: float | None = Field(default=None, gt=0, le=100, description="New weight (reweight only).")
    park_steps: int | None = Field(default=None, ge=1, le=100_000, description="How long to park (park only).")

    @model_validator(mode="after")
    def _fields_match_action(self):
        if self.action == "reweight" and self.weight is None:
            raise ValueError("action 'reweight' needs a weight > 0")
        if self.action == "park" and self.park_steps is None:
            raise ValueError("action 'park' needs park_steps >= 1")
        return self


class DifficultyFilterSettings(BaseModel):
    """Online difficulty filtering: train only on tasks whose recent mean reward lies in [low, high].

    The default band [0.2, 0.8]: a group of rewards in [0, 1] with mean m has a variance of at most
    m(1 - m), which falls below 0.16 (std 0.4) outside the band and to 0 at its ends, so a task whose
    groups average outside it can give little advantage signal whatever the policy samples; for
    pass/fail rubrics the band is a pass-rate band. Tasks never seen are eligible (their first draw is
    the probe)."""

    model_config = ConfigDict(extra="forbid")

    window: int = Field(default=4, ge=1, description="A task's last N groups define its recent mean reward.")
    low: float = Field(default=0.2, ge=0, le=1, description="Skip a task whose recent mean reward is below this.")
    high: float = Field(default=0.8, ge=0, le=1, description="Skip a task whose recent mean reward is above this.")
    reprobe_after: int = Field(default=10, ge=1, description="Steps a skipped task waits before one re-probe.")

    @model_validator(mode="after")
    def _band(self):
        if self.low > self.high:
            raise ValueError(f"odf.low ({self.low}) must not exceed odf.high ({self.high})")
        return self


class DifficultyFilter(BaseModel):
    """ODF state: each task's recent group means, and the step each skipped task left the band."""

    settings: DifficultyFilterSettings = Field(default_factory=DifficultyFilterSettings)
    recent: dict[str, list[float]] = Field(default_factory=dict, description="Last `window` group means.")
    skipped_at: dict[str, int] = Field(default_factory=dict, description="Task -> step it was found out of band.")
    reprobes: int = 0

    def eligible(self, task_id: str, step: int) -> bool:
        """In the band, never seen, or skipped long enough ago to be re-probed."""
        at = self.skipped_at.get(task_id)
        return at is None or step >= at + self.settings.reprobe_after

    def recent_mean(self, task_id: str) -> float | None:
        vals = self.recent.get(task_id)
        return float(np.mean(vals)) if vals else None

    def observe(self, step: int, groups: Iterable[tuple[str, float | None]]) -> None:
        """Take a step's (task id, group mean reward) pairs; a group with no reward (None) says nothing."""
        by_task: dict[str, list[float]] = defaultdict(list)
        for task_id, mean in groups:
            if mean is not None and mean == mean:
                by_task[task_id].append(float(mean))
        cfg = self.settings
        for task_id, means in by_task.items():
            if task_id in self.skipped_at:  # drawn again after being skipped: judged on the new groups alone
                del self.skipped_at[task_id]
                self.recent[task_id] = []
                self.reprobes += 1
            self.recent[task_id] = (self.recent.get(task_id, []) + means)[-cfg.window :]
            m = self.recent_mean(task_id)
            if m is not None and not cfg.low <= m <= cfg.high:
                self.skipped_at[task_id] = step


class TaskSamplingState(BaseModel):
    """Serializable state: weights, status, park deadlines, version and history (and ODF's, when on)."""

    weights: dict[str, float]
    status: dict[str, TaskStatus]
    parked_until: dict[str, int] = Field(default_factory=dict)
    floor: float = 0.1
    version: int = 0
    history: list[AppliedUpdate] = Field(default_factory=list)
    difficulty_filter: DifficultyFilter | None = None
    evidence_draws: dict[int, list[str]] = Field(default_factory=dict)
    """Step -> the tasks drawn at that step for a pending test's evidence (:meth:`TaskSampling.request_evidence`)."""


def _with_floor(w: np.ndarray, floor: float) -> np.ndarray:
    """Probabilities proportional to ``w`` where each is at least ``floor`` (``floor * len(w) <= 1``).

    Tasks below the floor are pinned to it and the rest of the mass is shared by the others in
    proportion to their weights (repeated until nothing falls below): clamping then renormalising
    would push the pinned tasks back under the floor."""
    pinned = np.zeros(len(w), dtype=bool)
    while True:
        free = ~pinned
        if not free.any():
            return np.full(len(w), 1.0 / len(w))
        p = np.where(pinned, floor, (1.0 - floor * pinned.sum()) * w / w[free].sum())
        below = free & (p < floor)
        if not below.any():
            return p
        pinned |= below


class TaskSampling(Interface):
    """The task-sampling interface. With no update applied it samples uniformly (plain GRPO).

    It owns the draw: which tasks make up each step's batch (:meth:`sample`)."""

    name = "task_sampling"
    update_type = ReweightTasks
    builder_tool = "reweight_tasks"
    answers = ("non_discriminative_low", "non_discriminative_high", "criterion_saturated", "criterion_dead")
    evolver_text = (
        "how often each task is sampled; park a task that is out of reach for now, retire a solved or "
        "broken one, reweight to promote tasks in the learnable band. Blame it when the task itself, not "
        "its rollouts or rubric, is the problem."
    )

    def __init__(self, task_ids: Iterable[str], floor: float = 0.1, seed: int = 0):
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            raise ConfigError("task sampling needs at least one training task")
        if not 0 <= floor <= 1:
            raise ConfigError(f"sampling floor must be in [0, 1], got {floor}")
        self.seed = seed
        self.tasks: dict[str, Task] = {}  # the run's tasks, when built over them (create, restore)
        self.state = TaskSamplingState(
            weights=dict.fromkeys(ids, 1.0), status=dict.fromkeys(ids, "active"), floor=floor
        )

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def task_ids(self) -> list[str]:
        return list(self.state.weights)

    def status_at(self, task_id: str, step: int) -> TaskStatus:
        s = self.state.status[task_id]
        if s == "parked" and step >= self.state.parked_until.get(task_id, 0):
            return "active"
        return s

    def probabilities(self, step: int, weights: dict[str, float] | None = None) -> dict[str, float]:
        """Sampling probability of each task at ``step`` (0 for parked and retired tasks, and for tasks
        the difficulty filter skips)."""
        weights = weights or self.state.weights
        active = [t for t in weights if self.status_at(t, step) == "active"]
        if not active:  # everything parked or retired: fall back to the parked ones rather than stop
            active = [t for t in weights if self.state.status[t] != "retired"] or list(weights)
        odf = self.state.difficulty_filter
        if odf is not None:
            eligible = [t for t in active if odf.eligible(t, step)]
            if not eligible:  # every task out of band: re-probe the ones due soonest rather than stop
                due = min(odf.skipped_at[t] for t in active)
                eligible = [t for t in active if odf.skipped_at[t] == due]
            active = eligible
        w = np.array([weights[t] for t in active], dtype=float)
        p = _with_floor(w, self.state.floor / len(active))
        probs = dict.fromkeys(weights, 0.0)
        probs.update(zip(active, p.tolist(), strict=True))
        return probs

    def sample(self, n: int, step: int, draw: int = 0, exclude: Collection[str] = ()) -> list[str]:
        """``n`` tasks for ``step``: distinct while enough tasks are eligible; the same on every process.

        ``draw`` > 0 is a further draw within the same step (DAPO's refill), with its own random stream;
        ``exclude`` leaves out tasks already drawn this step while enough others are eligible. The step's
        evidence draws (:meth:`request_evidence`) come first, in at most half of the batch; the rest is drawn
        without them."""
        probs = self.probabilities(step)
        due = self._evidence_due(step, n, probs) if draw == 0 else []
        return due + self._draw(n - len(due), step, draw, (*exclude, *due), probs)

    def _evidence_due(self, step: int, n: int, probs: Mapping[str, float]) -> list[str]:
        """The evidence draws of ``step`` that a batch of ``n`` tasks takes: those still eligible at ``probs`` (a task
        parked or retired since the request is not drawn), at most ``n // 2`` of them."""
        return [t for t in self.state.evidence_draws.get(step, ()) if probs.get(t, 0.0) > 0][: n // 2]

    def request_evidence(self, task_ids: Sequence[str], step: int) -> tuple[str, int] | None:
        """Draw one of ``task_ids`` (the first of them eligible, so the caller orders them) at the first step from
        ``step`` on that has no evidence draw yet (one a step); returns the task and the step, or None: none of
        them eligible, or one of them due already (a test waits for the draw it asked for before it asks again).
        A batch of one task has no place for it (:meth:`sample`)."""
        if any(t in due for s, due in self.state.evidence_draws.items() if s >= step for t in task_ids):
            return None
        probs = self.probabilities(step)
        task = next((t for t in task_ids if probs.get(t, 0.0) > 0), None)
        if task is None:
            return None
        at = step
        while self.state.evidence_draws.get(at):
            at += 1
        self.state.evidence_draws[at] = [task]
        return task, at

    def _draw(self, n: int, step: int, draw: int, exclude: Collection[str], probs: Mapping[str, float]) -> list[str]:
        """``n`` tasks drawn at ``probs`` (the step's probabilities) with the step's random stream."""
        if n <= 0:
            return []
        ids = [t for t, p in probs.items() if p > 0]
        rest = [t for t in ids if t not in exclude]
        p = np.array([probs[t] for t in ids])
        if exclude and len(rest) >= n:
            ids, p = rest, np.array([probs[t] for t in rest])
            p = p / p.sum()
        rng = np.random.default_rng([self.seed, step] if draw == 0 else [self.seed, step, draw])
        if n <= len(ids):
            return [ids[i] for i in rng.choice(len(ids), size=n, replace=False, p=p)]
        return [ids[i] for i in rng.choice(len(ids), size=n, replace=True, p=p)]

    # ------------------------------------------------------------------ online difficulty filtering
    def set_difficulty_filter(self, settings: DifficultyFilterSettings | None) -> None:
        """Turn ODF on with ``settings`` (keeping any history it has, e.g. after a resume), or off (None)."""
        if settings is None:
            self.state.difficulty_filter = None
        elif self.state.difficulty_filter is None:
            self.state.difficulty_filter = DifficultyFilter(settings=settings)
        else:
            self.state.difficulty_filter.settings = settings

    def observe(self, step: int, groups: Iterable[tuple[str, float | None]]) -> None:
        """A trained step's (task id, group mean reward) pairs; only the difficulty filter keeps them."""
        if self.state.difficulty_filter is not None:
            self.state.difficulty_filter.observe(step, groups)

    def metrics(self, step: int) -> dict[str, float]:
        """``odf/*`` counts at ``step`` when the difficulty filter is on: tasks eligible, skipped, re-probes."""
        odf = self.state.difficulty_filter
        if odf is None:
            return {}
        active = [t for t in self.state.weights if self.status_at(t, step) == "active"]
        eligible = sum(odf.eligible(t, step) for t in active)
        return {
            "odf/eligible_tasks": float(eligible),
            "odf/skipped": float(len(active) - eligible),
            "odf/reprobes": float(odf.reprobes),
        }

    def probabilities_with(self, update: ReweightTasks, step: int) -> dict[str, float]:
        """Sampling probabilities at ``step`` if ``update`` were applied (changes nothing)."""
        clone = type(self).__new__(type(self))
        clone.seed = self.seed
        clone.state = self.state.model_copy(deep=True)
        clone._apply_state(update, step)
        return clone.probabilities(step)

    def _check_ids(self, ids: Sequence[str]) -> None:
        unknown = [t for t in ids if t not in self.state.weights]
        if unknown:
            raise ValueError(f"unknown task id(s) {unknown[:5]}: task sampling knows only training tasks")

    def _apply_state(self, update: ReweightTasks, step: int) -> None:
        self._check_ids(update.task_ids)
        s = self.state
        for t in update.task_ids:
            if update.action == "reweight":
                s.weights[t] = float(update.weight)  # type: ignore[arg-type]
                if s.status[t] != "retired":
                    s.status[t] = "active"
            elif update.action == "park":
                s.status[t] = "parked"
                s.parked_until[t] = step + int(update.park_steps)  # type: ignore[arg-type]
            elif update.action == "retire":
                s.status[t] = "retired"
            else:
                s.status[t] = "active"
                s.parked_until.pop(t, None)

    def apply(self, update: ReweightTasks, step: int, candidate_id: str | None = None) -> int:
        """Apply an update from ``step`` on; returns the new version."""
        self._apply_state(update, step)
        self.state.version += 1
        self.state.history.append(
            AppliedUpdate(version=self.state.version, step=step, update=update.model_dump(), candidate_id=candidate_id)
        )
        return self.state.version

    def to_dict(self) -> dict:
        return {"seed": self.seed, **self.state.model_dump()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSampling:
        obj = cls.__new__(cls)
        data = dict(data)
        obj.seed = data.pop("seed", 0)
        obj.tasks = {}
        obj.state = TaskSamplingState.model_validate(data)
        return obj

    # ------------------------------------------------------------------ as a harness interface
    @classmethod
    def create(cls, ctx: HarnessContext) -> TaskSampling:
        obj = cls(ctx.tasks, floor=ctx.sampling_floor, seed=ctx.seed)
        obj.tasks = dict(ctx.tasks)
        return obj

    @classmethod
    def restore(cls, data: Mapping[str, Any], ctx: HarnessContext) -> TaskSampling:
        obj = cls.from_dict(data)
        missing = set(ctx.tasks) - set(obj.task_ids)
        if missing:
            raise ValueError(f"it lacks tasks {sorted(missing)[:5]}")
        extra = set(obj.task_ids) - set(ctx.tasks)
        if extra:
            raise ValueError(f"it samples tasks {sorted(extra)[:5]} that this run's training data lacks")
        obj.tasks = dict(ctx.tasks)
        return obj

    def targets(self, update: ReweightTasks) -> list[Task]:
        """The tasks whose weight or status ``update`` changes (those of the run's tasks it names)."""
        return [self.tasks[t] for t in update.task_ids if t in self.tasks]

    @property
    def history(self) -> list[AppliedUpdate]:
        return self.state.history

    def preview(self, update: ReweightTasks, step: int) -> dict[str, Any]:
        after = self.probabilities_with(update, step)
        before = self.probabilities(step)
        return {
            "sampling_probability": {
                t: {"before": round(before[t], 6), "after": round(after[t], 6)} for t in update.task_ids
            }
        }

    def target_state(self, update: ReweightTasks) -> Any:
        s = self.state
        return {t: [s.weights.get(t), s.status.get(t), s.parked_until.get(t)] for t in update.task_ids}

    def promoted(self, update: ReweightTasks, step: int) -> list[str]:
        """The tasks ``update`` would draw more often than now (a probe of the policy on them is worth it)."""
        out = []
        for tid in update.task_ids:
            if update.action == "reweight":
                if self.state.status[tid] != "retired" and (
                    float(update.weight) > self.state.weights[tid]  # type: ignore[arg-type]
                    or self.status_at(tid, step) != "active"
                ):
                    out.append(tid)
            elif update.action == "activate" and self.status_at(tid, step) != "active":
                out.append(tid)
        return out

    def metric(self, update: ReweightTasks, failure: Failure | None) -> str:
        """A change to one task moves only its share of a batch: the signal of the draws it moves."""
        return MOVED_SIGNAL_SHARE

    def trial(self, update: ReweightTasks, trial: Trial) -> Measured:
        """The draws the candidate probabilities move, where they land vs where they were
        (:meth:`Trial.moved_draws`: replayed step records, a probe for promoted tasks)."""
        step = trial.next_step
        try:
            q = self.probabilities_with(update, step)
        except ValueError as e:
            trial.reject(f"invalid candidate: {e}")
        promoted = self.promoted(update, step)
        m = trial.measurements
        m.step, m.action, m.promoted = step, update.action, promoted
        if update.action == "park":
            self._refuse_parking_in_reach(update, trial)
        return trial.moved_draws(self.probabilities(step), q, changed=update.task_ids, promoted=promoted)

    def _refuse_parking_in_reach(self, update: ReweightTasks, trial: Trial) -> None:
        """Parking says the task is out of reach; its group of the data (:func:`~harnessrl.data.schema.
        task_group`: its family or tag; a domain is too broad to say it) can say otherwise. The recent groups of
        every task of that group (at most :data:`~harnessrl.critic.moved_draws.REPLAY_GROUPS` each, the parked
        one's flat groups included) are pooled, and a rollout above the flat-low threshold (the failure's own, else the
        detectors' default) counts as a success: when the rate of successes splits groups of the trainer's
        size with the power rule's confidence (:func:`~harnessrl.critic.power.decide_split` accepts, one
        look), the policy already does this kind of task and the park is refused; the failure's next remedy
        is tried. A gold-bench seed parked four of the six tasks of a family the policy met in 3 of 4
        rollouts a step before, for 20 steps each, and ended that family at 0.00 against fixed GRPO's 0.88."""
        groups = {task_group(self.tasks[t]) for t in update.task_ids if t in self.tasks}
        groups = {g for g in groups if not g.startswith("domain:")}  # a whole domain is too broad to say it
        if not groups:
            return
        members = {t.id for t in self.tasks.values() if task_group(t) in groups}
        flat = trial.failure.evidence.narrow(FlatGroupEvidence) if trial.failure is not None else None
        low = float(flat.threshold) if flat is not None and flat.threshold is not None else FLAT_LOW
        seen: Counter[str] = Counter()
        rewards: list[float] = []
        for record in reversed(list(trial.recorder.steps.values())):
            for g in record.observed:
                if g.task_id in members and seen[g.task_id] < REPLAY_GROUPS:
                    seen[g.task_id] += 1
                    rewards += [r for r in g.rewards if r is not None]
        met = sum(r > low for r in rewards)
        cfg, gsz = trial.config, max(2, trial.advantage.group_size)
        v = decide_split(met, len(rewards), gsz, cfg.signal.threshold(CHECK_SPLIT_SHARE), cfg.confidence, 1, 1)
        trial.measurements.group_reach = GroupReach(
            groups=sorted(groups),
            tasks=len(seen),
            rollouts=len(rewards),
            above_low=met,
            low=low,
            split_share_interval=[round(v.low, 4), round(v.high, 4)],
        )
        if v.kind == "accepted":
            trial.reject(
                f"the task is within reach: {met} of {len(rewards)} recent rollouts over {len(seen)} task(s) of "
                f"{', '.join(sorted(groups))} score above {low:g}, so its groups would split "
                f"({expected_groups_split(v.share)}, interval [{v.low:.3f}, {v.high:.3f}]); parking it would "
                "stop training a kind of task the policy is learning",
                kind="invalid",
            )

    def summary(self) -> dict[str, Any]:
        s = self.state
        changed = {t: w for t, w in s.weights.items() if w != 1.0}
        return {
            **super().summary(),
            "parked": sorted(t for t, v in s.status.items() if v == "parked"),
            "retired": sorted(t for t, v in s.status.items() if v == "retired"),
            "reweighted": dict(sorted(changed.items())),
            **({"difficulty_filter": "on"} if s.difficulty_filter is not None else {}),
        }

    def task_view(self, task: Task, step: int) -> dict[str, Any]:
        status = self.status_at(task.id, step + 1)
        return {
            "weight": self.state.weights[task.id],
            "status": status,
            "parked_until": self.state.parked_until.get(task.id) if status == "parked" else None,
            "sampling_probability": round(self.probabilities(step + 1)[task.id], 6),
        }

    # ------------------------------------------------------------------ its remedies
    @classmethod
    def suggest(cls, evidence: ProposalEvidence) -> list[Suggestion]:
        """Park a task out of reach (uniformly low, a dead criterion), retire a solved one (uniformly high),
        demote one that teaches little; in that order of preference for the failure's kind."""
        order = _ORDER.get(evidence.failure.kind, ("demote", "park"))
        return [s for s in (cls.suggestion(tag, evidence) for tag in order) if s is not None]

    @classmethod
    def suggestion(cls, tag: str, evidence: ProposalEvidence) -> Suggestion | None:
        """Any of its remedies by name, whatever the failure: ``park``, ``retire`` or ``demote`` (another
        interface's playbook ends with one of them when its own remedies are spent)."""
        remedy = _REMEDIES.get(tag)
        found = suggestions(evidence, [(tag, remedy)]) if remedy is not None else []
        return found[0] if found else None


# ---------------------------------------------------------------------------------------------- remedies


def _park(e: ProposalEvidence) -> ReweightTasks:
    return ReweightTasks(
        task_ids=[e.task_id],
        action="park",
        park_steps=e.settings.park_steps,
        rationale=f"The task is out of reach for the policy now ({_why_park(e)}): park it and spend the steps on tasks "
        "it can learn from.",
    )


def _why_park(e: ProposalEvidence) -> str:
    """What says the task is out of reach: the attribution's notes on guidance; else, after a guidance candidate the
    critic could not measure for its budget, that (not a claim that guidance failed); else that guidance failed."""
    if e.notes:
        return "; ".join(e.notes)
    if e.trial is not None and e.trial.verdict_kind == "budget":
        return f"guidance could not be measured within the trial budget: {e.trial.reason}"
    return "guidance did not make its group discriminative"


def _retire(e: ProposalEvidence) -> ReweightTasks | None:
    """Retire a solved task, only when its rubric is saturated with nothing left to tighten it by: not while the
    reference answer states key terms the rollouts omit and the rubric does not ask for (a lax rubric is not a
    solved task; its remedy is the rubric's ``reference_term``), unless a check of such a term was already measured
    for this failure and refused (the tightened rubric splits nothing either: the task is solved)."""
    if e.reference and e.settings.induced_criteria:
        existing = [c.check for c in e.rubric if c.check is not None]
        tried = any(
            a.trial is not None and a.trial.accepted is False and a.trial.verdict_kind != "pending"
            and str(a.payload.get("remedy") or "").startswith("reference_term")
            for a in e.attempts
        )  # fmt: skip
        if not tried and reference_terms(e.prompt or "", e.reference, e.completions(), existing):
            return None
    return ReweightTasks(
        task_ids=[e.task_id],
        action="retire",
        rationale=f"The task is solved ({e.summary}) and a stricter rubric did not restore a spread: retire it.",
    )


def _demote(e: ProposalEvidence) -> ReweightTasks:
    return ReweightTasks(
        task_ids=[e.task_id],
        action="reweight",
        weight=0.3,
        rationale="The task teaches little now: sample it less (weight 0.3) rather than stop it.",
    )


_REMEDIES = {"park": _park, "retire": _retire, "demote": _demote}
_ORDER: dict[str, tuple[str, ...]] = {
    "non_discriminative_low": ("park", "demote"),
    "non_discriminative_high": ("retire", "demote"),
    "criterion_saturated": ("demote", "retire"),
    "criterion_dead": ("park", "demote"),
}
"""Which remedies answer a failure kind, best first (any other kind: demote, then park)."""
