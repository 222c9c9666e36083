"""The critic's false-accept rate for the exact checks a rubric candidate adds, measured two ways.

The decision rule for added checks (``harnessrl/critic/power.py``; docs/design.md §4) estimates the rate ``p`` at
which the frozen policy breaks the checks, turns it into the share of groups of ``G`` the checks would split,
``s(p) = 1 - p**G - (1 - p)**G``, and accepts when the lower end of the Clopper-Pearson interval of ``s`` reaches
the threshold (``signal.min_effect["check_split_share"]``, 0.2), futile when the upper end is below it, else
pending, for at most ``max_looks`` looks (the error spent over them as ``alpha_spending`` says).

1. **The rule itself, simulated** (no model): for true break rates ``p`` on a grid, candidates whose groups of
   ``G`` Bernoulli(``p``) rollouts arrive look by look (``--groups-per-look``: one to three groups a look, drawn
   uniformly; also one group a look, and three, a family pooled), fed through
   :func:`~harnessrl.critic.power.decide_split` as the critic feeds them (cumulative counts, the look's index)
   until a look decides. A false accept is the acceptance of a check whose true ``s(p)`` is below the threshold;
   the rule's false-accept rate is the largest ``P(accept)`` over such ``p``. The probabilities are also computed
   exactly (the same looks, summed over every outcome), which bounds the Monte Carlo error.
2. **Placebos on real rollouts**: a run directory's harness as the run left it (``harness.json``), the kept
   rollouts of its last steps (``rollouts/step_*.jsonl``) and the run's own training judge; for every task with
   kept rollouts, candidates that add one exact check the prompt does not ask for, each measured by
   :meth:`~harnessrl.critic.trials.FrozenPolicyTrials.run` against an ``unchecked_requirement`` failure (the metric
   the audit's candidates get) with the default :class:`~harnessrl.critic.config.TrialConfig`, unwidened:

   - ``a_random_word``: ``contains`` a common English word neither the prompt nor the reference answer holds;
   - ``b_reference_word``: ``contains`` a content word of the reference answer the prompt does not hold (the
     reference passes it: the hardest placebo);
   - ``c_not_reference_word``: ``not_contains`` a content word the reference answer uses;
   - ``d_stated``: for contrast, a requirement the prompt states and the task's rubric does not check (what the
     rubric audit finds), per task; ``d_stated_widened``: the same widened to every task that states it, as the
     trainer widens it, one candidate per requirement.

   Each candidate starts a new sequential test (its pooled evidence is its own), and its trial is one look at every
   kept rollout of its task(s): a candidate that stays pending would be looked at again in a run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/false_accepts.py --run-dir /work/runs/smoke
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
import sys
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, get_args
from unittest import mock

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom

from harnessrl.critic import power
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.power import Spending
from harnessrl.critic.signal import CHECK_SPLIT_SHARE, AdvantageSpec
from harnessrl.critic.trials import FrozenPolicyTrials
from harnessrl.data.checks import check_passes, words
from harnessrl.data.schema import Criterion, Task, prompt_text
from harnessrl.evolution.audit import checked_keys
from harnessrl.interfaces import EditRubric, Harness
from harnessrl.interfaces.induction import stated_requirements
from harnessrl.records.failures import Failure
from harnessrl.records.steps import Recorder, RolloutRecord

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "false-accepts"

GROUP_SIZE = 4
POWER_AT = (0.1, 0.25, 0.5)
SCHEDULES: dict[str, tuple[int, ...]] = {
    "1-3 groups per look": (1, 2, 3),
    "1 group per look": (1,),
    "3 groups per look (a family pooled)": (3,),
}
"""How many new groups each look brings (drawn uniformly from the tuple): the first is ``--groups-per-look``'s."""


def schedules_for(groups_per_look: Sequence[int]) -> dict[str, tuple[int, ...]]:
    """:data:`SCHEDULES` with ``groups_per_look`` (drawn uniformly at each look) in place of the first."""
    mine = tuple(sorted(set(groups_per_look)))
    if not mine or min(mine) < 1:
        raise ValueError(f"groups per look must be 1 or more, not {groups_per_look}")
    name = next((k for k, v in SCHEDULES.items() if v == mine), None)
    if name is None:
        name = f"{', '.join(map(str, mine))} groups per look"
    return {name: mine, **{k: v for k, v in SCHEDULES.items() if v != mine and k != "1-3 groups per look"}}


KINDS = ("accepted", "futile", "not_reliable")

PLACEBOS = ("a_random_word", "b_reference_word", "c_not_reference_word", "d_stated", "d_stated_widened")
COMMON_WORDS = (
    "anchor", "balloon", "basket", "blanket", "bottle", "bridge", "button", "cactus", "candle", "carpet",
    "castle", "cookie", "dolphin", "dragon", "engine", "feather", "garden", "guitar", "hammer", "helmet",
    "island", "jacket", "jungle", "kettle", "kitchen", "ladder", "lemon", "magnet", "mirror", "monkey",
    "napkin", "notebook", "onion", "orange", "parrot", "pencil", "pillow", "pocket", "puzzle", "rabbit",
    "rocket", "saddle", "spoon", "tennis", "tiger", "tunnel", "umbrella", "violin", "wallet", "whistle",
    "window", "yellow", "zipper",
)  # fmt: skip
"""Placebo (a)'s words: common English nouns, none shorter than five letters (a check matches a substring)."""
_STOP_WORDS = (
    "about", "above", "after", "again", "against", "along", "also", "among", "another", "answer", "because",
    "been", "before", "being", "below", "between", "both", "cannot", "could", "does", "doing", "down", "during",
    "each", "every", "from", "further", "have", "having", "here", "into", "itself", "just", "more", "most",
    "much", "must", "only", "other", "over", "same", "should", "some", "such", "than", "that", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "under", "until", "very", "were", "what",
    "when", "where", "which", "while", "with", "within", "without", "would", "your", "yours",
)  # fmt: skip
STOP = frozenset(_STOP_WORDS)


# ---------------------------------------------------------------------------------------------- 1. the rule
def threshold_rate(group_size: int, threshold: float) -> float:
    """The break rate ``p`` in (0, 1/2) at which ``s(p)`` equals ``threshold``: rates below it (and above ``1 - p``)
    give checks that split fewer groups than worth a change."""
    return float(brentq(lambda p: power.split_share(p, group_size) - threshold, 1e-9, 0.5))


def rate_grid(group_size: int, threshold: float) -> list[float]:
    """The break rates simulated: those whose checks split too few groups (down to none), the last rate on the
    grid below the boundary, and rates above it up to 1."""
    edge = np.floor(threshold_rate(group_size, threshold) * 1000) / 1000
    grid = {0.0, 0.01, 0.02, 0.03, 0.04, 0.05, float(edge), 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99}
    grid |= {1.0, round(1 - float(edge), 3)}
    return sorted(grid)


class Rule:
    """:func:`~harnessrl.critic.power.decide_split` at one setting, each (broken, rollouts, look) decided once.

    The smallest detectable share a verdict records depends on the sample size and the look's error alone and is no
    part of the decision; it is computed once per pair (memoised) instead of once per call."""

    def __init__(self, group_size: int, threshold: float, confidence: float, max_looks: int, spending: Spending):
        self.group_size, self.threshold, self.confidence = group_size, threshold, confidence
        self.max_looks, self.spending = max_looks, spending
        self._mde = functools.lru_cache(maxsize=None)(power.min_detectable_share)
        self._kinds: dict[tuple[int, int, int], str] = {}

    def kind(self, broken: int, rollouts: int, look: int) -> str:
        key = (broken, rollouts, look)
        if key not in self._kinds:
            with mock.patch.object(power, "min_detectable_share", self._mde):
                v = power.decide_split(
                    broken,
                    rollouts,
                    self.group_size,
                    self.threshold,
                    self.confidence,
                    look,
                    self.max_looks,
                    self.spending,
                )
            self._kinds[key] = v.kind
        return self._kinds[key]


def futile_needs(rule: Rule, limit: int = 400) -> int | None:
    """The fewest pooled rollouts (whole groups) at which a check none of them breaks is futile: the upper end of the
    interval of its split share (the interval ``decide_split`` uses) below the threshold, at the first look's error
    (the largest a look spends)."""
    alpha = power.look_alpha(rule.confidence, 1, rule.max_looks, rule.spending)
    for n in range(rule.group_size, limit + 1, rule.group_size):
        if power.split_share_interval(0, n, rule.group_size, alpha)[1] < rule.threshold:
            return n
    return None


def simulate(rule: Rule, p: float, schedule: Sequence[int], n: int, rng: np.random.Generator) -> dict[str, float]:
    """``n`` candidates whose checks the policy breaks at rate ``p``: each look brings a number of new groups drawn
    from ``schedule`` (uniformly), each group ``G`` Bernoulli(``p``) rollouts; the rule decides on the cumulative
    counts at each look, a pending candidate is looked at again. The share of candidates ending in each kind."""
    g = rule.group_size
    broken = np.zeros(n, dtype=int)
    rollouts = np.zeros(n, dtype=int)
    kinds = np.full(n, "pending", dtype=object)
    active = np.arange(n)
    width = max(schedule) * g
    for look in range(1, rule.max_looks + 1):
        if active.size == 0:
            break
        groups = rng.choice(np.asarray(schedule), size=active.size)
        breaks = rng.random((active.size, width)) < p  # G Bernoulli(p) rollouts per group
        new = (breaks & (np.arange(width)[None, :] < (groups * g)[:, None])).sum(axis=1)
        broken[active] += new
        rollouts[active] += groups * g
        decided = np.array([rule.kind(int(broken[i]), int(rollouts[i]), look) for i in active], dtype=object)
        kinds[active] = decided
        active = active[decided == "pending"]
    counts = Counter(kinds.tolist())
    return {k: counts.get(k, 0) / n for k in (*KINDS, "pending")}


def exact(rule: Rule, p: float, schedule: Sequence[int]) -> dict[str, float]:
    """The probabilities :func:`simulate` estimates, summed over every outcome of every look."""
    g = rule.group_size
    states: dict[tuple[int, int], float] = {(0, 0): 1.0}
    out: Counter[str] = Counter()
    for look in range(1, rule.max_looks + 1):
        nxt: defaultdict[tuple[int, int], float] = defaultdict(float)
        for (k, m), w in states.items():
            for groups in schedule:
                size = groups * g
                pmf = binom.pmf(np.arange(size + 1), size, p)
                for j in range(size + 1):
                    if pmf[j] > 0:
                        nxt[(k + j, m + size)] += w * pmf[j] / len(schedule)
        states = {}
        for (k, m), w in nxt.items():
            kind = rule.kind(k, m, look)
            if kind == "pending":
                states[(k, m)] = w
            else:
                out[kind] += w
    out["pending"] += sum(states.values())
    return {k: float(out.get(k, 0.0)) for k in (*KINDS, "pending")}


def simulate_rule(
    n: int = 20_000,
    seed: int = 0,
    rates: Sequence[float] | None = None,
    schedules: dict[str, tuple[int, ...]] | None = None,
    config: TrialConfig | None = None,
    group_size: int = GROUP_SIZE,
    with_exact: bool = True,
) -> dict[str, Any]:
    """Part 1: for each schedule of groups per look and each break rate, the share of ``n`` simulated candidates
    accepted, futile and not reliable (and the exact probabilities); the false-accept rate (the largest
    acceptance over rates whose split share is below the threshold) and the power at :data:`POWER_AT`."""
    config = config or TrialConfig()
    threshold = config.signal.threshold(CHECK_SPLIT_SHARE)
    rule = Rule(group_size, threshold, config.confidence, config.max_looks, config.alpha_spending)
    rates = list(rates) if rates is not None else rate_grid(group_size, threshold)
    rates = sorted(set(rates) | set(POWER_AT))
    schedules = schedules or SCHEDULES
    out: dict[str, Any] = {
        "group_size": group_size,
        "threshold": threshold,
        "confidence": config.confidence,
        "max_looks": config.max_looks,
        "alpha_spending": config.alpha_spending,
        "alpha_by_look": [
            round(power.look_alpha(config.confidence, k, config.max_looks, config.alpha_spending), 5)
            for k in range(1, config.max_looks + 1)
        ],
        "boundary_rate": round(threshold_rate(group_size, threshold), 5),
        "candidates_per_rate": n,
        "seed": seed,
        "futile_needs_rollouts": futile_needs(rule),
        "schedules": {},
    }
    for si, (name, schedule) in enumerate(schedules.items()):
        rows = []
        for pi, p in enumerate(rates):
            rng = np.random.default_rng(np.random.SeedSequence([seed, si, pi]))
            sim = simulate(rule, p, schedule, n, rng)
            row: dict[str, Any] = {
                "p": p,
                "split_share": round(power.split_share(p, group_size), 4),
                "below_threshold": power.split_share(p, group_size) < threshold,
                **{f"P_{k}": round(v, 5) for k, v in sim.items()},
            }
            if with_exact:
                row.update({f"exact_P_{k}": round(v, 5) for k, v in exact(rule, p, schedule).items()})
            rows.append(row)
        below = [r for r in rows if r["below_threshold"]]
        worst = max(below, key=lambda r: r["P_accepted"])
        entry: dict[str, Any] = {
            "groups_per_look": list(schedule),
            "rows": rows,
            "false_accept_rate": worst["P_accepted"],
            "false_accept_at_p": worst["p"],
            "power": {str(p): next(r["P_accepted"] for r in rows if r["p"] == p) for p in POWER_AT},
        }
        if with_exact:
            ex = max(below, key=lambda r: r["exact_P_accepted"])
            entry.update(exact_false_accept_rate=ex["exact_P_accepted"], exact_false_accept_at_p=ex["p"])
            entry["exact_power"] = {str(p): next(r["exact_P_accepted"] for r in rows if r["p"] == p) for p in POWER_AT}
        out["schedules"][name] = entry
    return out


# ---------------------------------------------------------------------------------------------- 2. placebos
def content_words(text: str) -> list[str]:
    """The distinct words of ``text`` worth checking for, in order: letters only, four or more, not a stop word."""
    seen: dict[str, None] = {}
    for w in words(text):
        low = w.casefold()
        if low.isalpha() and len(low) >= 4 and low not in STOP:
            seen.setdefault(low, None)
    return list(seen)


def _phrases(criteria: Iterable[Criterion]) -> set[str]:
    """The phrases the rubric's ``contains``/``not_contains`` checks already name (casefolded)."""
    out: set[str] = set()
    for c in criteria:
        if c.check is not None and c.check.type in ("contains", "not_contains"):
            out |= {p.casefold() for p in c.check.phrases}  # type: ignore[union-attr]
    return out


def _criterion(cid: str, text: str, weight: float, check: dict[str, Any]) -> Criterion:
    return Criterion.model_validate({"id": cid, "text": text, "weight": weight, "check": check})


def placebo_updates(
    task: Task, criteria: Sequence[Criterion], rng: np.random.Generator, words_list: Sequence[str] = COMMON_WORDS
) -> list[tuple[str, str, EditRubric]]:
    """The placebo candidates (a), (b), (c) for ``task`` as its rubric is now, and (d) a requirement its prompt
    states and its rubric does not check: (kind, what it checks, the edit). Each added criterion weighs as much as
    the rubric's heaviest (as the rule-based evolver's requirement remedy weighs it); a kind with no word to use
    is left out."""
    prompt = prompt_text(task.prompt)
    ref = task.reference_answer or ""
    low_prompt, low_ref = prompt.casefold(), ref.casefold()
    weight = max((c.weight for c in criteria if c.weight > 0), default=1.0)
    named = _phrases(criteria)
    out: list[tuple[str, str, EditRubric]] = []

    def add(kind: str, what: str, cid: str, text: str, check: dict[str, Any]) -> None:
        crit = _criterion(cid, text, weight, check)
        out.append((kind, what, EditRubric(task_id=task.id, add=[crit], rationale=f"placebo {kind}: {what}")))

    unrelated = [w for w in words_list if w not in low_prompt and w not in low_ref]
    if unrelated:
        w = str(rng.choice(unrelated))
        add("a_random_word", w, "placebo_word", f"Mentions '{w}'", {"type": "contains", "phrases": [w]})
    ref_words = [w for w in content_words(ref) if not any(w in p or p in w for p in named)]
    unstated = [w for w in ref_words if w not in low_prompt]
    if unstated:
        w = str(rng.choice(unstated))
        add("b_reference_word", w, "placebo_ref_word", f"Mentions '{w}'", {"type": "contains", "phrases": [w]})
    if ref_words:
        w = str(rng.choice(ref_words))
        add(
            "c_not_reference_word",
            w,
            "placebo_no_word",
            f"Does not use the word '{w}'",
            {"type": "not_contains", "phrases": [w]},
        )
    checked = checked_keys(criteria)
    seen: set[str] = set()
    for check, text in stated_requirements(prompt):
        key = check.requirement_key()
        if key in checked or key in seen:
            continue
        seen.add(key)
        try:
            if task.reference_answer is not None and not check.passes(task.reference_answer):
                continue  # the audit keeps only what the reference answer does
        except ValueError:
            continue
        add("d_stated", key, f"req_{check.type}", text, check.written())
    return out


def kept_groups(rollouts: Sequence[RolloutRecord]) -> list[list[RolloutRecord]]:
    """The kept rollouts as the trainer's groups (a step's rollouts of one task; a member number that does not
    rise starts a new group), as the critic groups them."""
    groups: list[list[RolloutRecord]] = []
    prev: RolloutRecord | None = None
    for r in rollouts:
        if prev is None or r.step != prev.step or r.member <= prev.member:
            groups.append([])
        groups[-1].append(r)
        prev = r
    return groups


def _split_counts(check: dict[str, Any], groups: Sequence[Sequence[RolloutRecord]]) -> tuple[int, int]:
    """How many kept groups the check splits (some rollouts pass, some fail), of how many."""
    split = 0
    for g in groups:
        passed = {check_passes(check, r.completion) for r in g}
        split += len(passed) == 2
    return split, len(groups)


def load_run(run_dir: Path, original_rubrics: bool = False) -> tuple[Any, Harness, Recorder, Any]:
    """The run's config, its harness as it left it (or version 0 of every rubric with ``original_rubrics``), a
    recorder with its kept rollouts, and its training judge built as the trainer builds it (on the CPU unless the
    run's judge names a device)."""
    from harnessrl.judges import build_judge
    from harnessrl.trainer.run import load_run_tasks, rollout_steps_kept
    from harnessrl.trainer.train_config import load_run_config

    config = load_run_config(run_dir / "config.yaml")
    tasks = load_run_tasks(config).train
    settings = {
        "sampling_floor": config.harness.sampling_floor,
        "seed": config.seed,
        "temperature": config.grpo.temperature,
        "interfaces": config.harness.interfaces,
        "settings": config.harness.interface_settings,
    }
    path = run_dir / "harness.json"
    harness = (
        Harness(tasks, **settings) if original_rubrics or not path.exists() else Harness.load(path, tasks, **settings)
    )
    recorder = Recorder(run_dir, keep_steps=rollout_steps_kept(config))
    recorder.load_rollouts()
    judge_config = (
        config.judge if config.judge.device is not None else config.judge.model_copy(update={"device": "cpu"})
    )
    return config, harness, recorder, build_judge(judge_config)


def run_placebos(
    harness: Harness,
    recorder: Recorder,
    judge: Any,
    advantage: AdvantageSpec | None = None,
    config: TrialConfig | None = None,
    seed: int = 0,
    widen_stated: bool = True,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Part 2 on one world: every task with kept rollouts, its placebo candidates, each through
    :meth:`FrozenPolicyTrials.run` as a new test; one row per candidate."""
    trials = FrozenPolicyTrials(harness, recorder, judge, None, config or TrialConfig(), advantage)
    kept = recorder.latest_rollouts()
    by_task: dict[str, list[RolloutRecord]] = defaultdict(list)
    for r in kept:
        by_task[r.task_id].append(r)
    step = max((r.step for r in kept), default=0)
    rows: list[dict[str, Any]] = []
    stated: dict[str, tuple[str, EditRubric]] = {}
    for tid in sorted(by_task):
        if tid not in harness.tasks:
            continue
        task = harness.tasks[tid]
        rng = np.random.default_rng([seed, zlib.crc32(tid.encode())])
        for kind, what, update in placebo_updates(task, harness.rubrics.current(tid).criteria, rng):
            rows.append(_trial_row(trials, task, kind, what, update, step, by_task, log))
            if kind == "d_stated":
                stated.setdefault(what, (tid, update))
    if widen_stated:
        for key, (tid, update) in sorted(stated.items()):
            wide = harness.rubrics.widen(update)
            rows.append(_trial_row(trials, harness.tasks[tid], "d_stated_widened", key, wide, step, by_task, log))
    return rows


def _trial_row(
    trials: FrozenPolicyTrials,
    task: Task,
    kind: str,
    what: str,
    update: EditRubric,
    step: int,
    by_task: dict[str, list[RolloutRecord]],
    log: Callable[[str], None] | None,
) -> dict[str, Any]:
    failure = Failure(
        kind="unchecked_requirement",
        step=step,
        task_id=task.id,
        domain=task.domain,
        evidence={"placebo": kind, "checks": what},
        summary=f"placebo candidate {kind} ({what}) on task {task.id}",
        interface_hint="rubric_criteria",
    )
    trials.split_evidence.clear()  # a new test for each candidate: its evidence pools with no other's
    cid = f"{task.id}:{kind}:{what}"
    t0 = time.perf_counter()
    result = trials.run(update, cid, failure)
    m = result.measurements.model_dump()  # the JSON a run writes
    split = m.get("split") or {}
    guard = m.get("reference_guard")
    check = update.add[0].check.model_dump(mode="json", exclude_none=True)  # type: ignore[union-attr]
    covered = update.task_ids()
    groups_split = n_groups = 0
    for t in covered:  # each covered task with its own instance of the check
        own = update.add if t == update.task_id else next(c.add for c in update.cover if c.task_id == t)
        inst = own[0].check.model_dump(mode="json", exclude_none=True)  # type: ignore[union-attr]
        k, n = _split_counts(inst, kept_groups(by_task.get(t, [])))
        groups_split, n_groups = groups_split + k, n_groups + n
    row = {
        "task_id": task.id,
        "family": (task.metadata or {}).get("family"),
        "placebo": kind,
        "checks": what,
        "check": check,
        "covers": covered,
        "reference_passes": None if task.reference_answer is None else check_passes(check, task.reference_answer),
        "groups": n_groups,
        "groups_split": groups_split,
        "broken": split.get("broken"),
        "rollouts": split.get("rollouts"),
        "split_share": split.get("split_share"),
        "interval": split.get("interval"),
        "look": split.get("look"),
        "verdict_kind": result.verdict_kind,
        "accepted": result.accepted,
        "reference_guard_passed": None if not isinstance(guard, dict) else guard.get("passed"),
        "reference_rank": None
        if not isinstance(guard, dict)
        else [guard.get("reference_rank_baseline"), guard.get("reference_rank_candidate")],
        "judge_calls": result.cost.judge_calls,
        "seconds": round(time.perf_counter() - t0, 2),
        "reason": result.reason,
    }
    if log:
        log(f"  {task.id:22s} {kind:22s} {what[:28]:28s} {result.verdict_kind:16s} {row['broken']}/{row['rollouts']}")
    return row


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per placebo kind: candidates, accepted, pending, on probation (committed now, decided by the same test over
    the training groups after it: ``trials.pending_checks``), the rejections by kind, the acceptance rate; and among
    the candidates whose kept groups the check splits (some rollout passes, some fails), how many were accepted and
    how many put on probation."""
    out: dict[str, Any] = {}
    for kind in PLACEBOS:
        these = [r for r in rows if r["placebo"] == kind]
        if not these:
            continue
        kinds = Counter(r["verdict_kind"] for r in these)
        splitting = [r for r in these if (r["groups_split"] or 0) > 0]
        out[kind] = {
            "candidates": len(these),
            "accepted": kinds.get("accepted", 0),
            "pending": kinds.get("pending", 0),
            "probation": kinds.get("probation", 0),
            "rejected": {k: v for k, v in sorted(kinds.items()) if k not in ("accepted", "pending", "probation")},
            "acceptance_rate": round(kinds.get("accepted", 0) / len(these), 3),
            "reference_passes": sum(bool(r["reference_passes"]) for r in these),
            "split_a_kept_group": len(splitting),
            "accepted_of_those": sum(r["verdict_kind"] == "accepted" for r in splitting),
            "probation_of_those": sum(r["verdict_kind"] == "probation" for r in splitting),
        }
    return out


def run_label(run_dir: Path) -> str:
    """A run's short name: ``bench/method/seed0`` folders by their method and seed, others by their name."""
    return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.name.startswith("seed") else run_dir.name


# ---------------------------------------------------------------------------------------------- the report
def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def report(results: dict[str, Any]) -> str:
    sim = results["simulation"]
    lines = [
        "# False accepts of the critic's rule for added exact checks",
        "",
        "Produced by:",
        "",
        "    " + results["command"],
        "",
        f"({results['date']}, {results['seconds']:.0f} s.) The rule: `harnessrl/critic/power.py` "
        f"(G={sim['group_size']}, threshold {sim['threshold']:g} on the split share, confidence "
        f"{sim['confidence']:g}, at most {sim['max_looks']} looks, the error spent {sim['alpha_spending']}: alpha "
        f"{', '.join(f'{a:g}' for a in sim['alpha_by_look'])} by look). "
        f"A check splits fewer groups than the threshold when the policy breaks it at a rate below "
        f"{sim['boundary_rate']:.4f} (or above {1 - sim['boundary_rate']:.4f}).",
        "",
        "## 1. The rule, simulated (no model)",
        "",
        f"{sim['candidates_per_rate']} simulated candidates per break rate p (seed {sim['seed']}); each look brings "
        "new groups of G Bernoulli(p) rollouts, and `decide_split` decides on the cumulative counts at that look "
        "until a look decides. `exact` is the same probability summed over every outcome.",
        "",
        "| groups per look | false-accept rate (max P(accept) over p with s(p) < threshold) | at p | exact | "
        + " | ".join(f"power at p={p:g} (exact)" for p in POWER_AT)
        + " |",
        "|---|---|---|---|" + "---|" * len(POWER_AT),
    ]
    for name, e in sim["schedules"].items():
        cells = [f"{_pct(e['power'][str(p)])} ({_pct(e.get('exact_power', {}).get(str(p)))})" for p in POWER_AT]
        lines.append(
            f"| {name} | {_pct(e['false_accept_rate'])} | {e['false_accept_at_p']:g} | "
            f"{_pct(e.get('exact_false_accept_rate'))} | " + " | ".join(cells) + " |"
        )
    lines += ["", "P(accept) by break rate (simulated; exact in brackets):", ""]
    names = list(sim["schedules"])
    lines.append("| p | s(p) | " + " | ".join(names) + " |")
    lines.append("|---|---|" + "---|" * len(names))
    rates = [r["p"] for r in sim["schedules"][names[0]]["rows"]]
    for i, p in enumerate(rates):
        row = sim["schedules"][names[0]]["rows"][i]
        mark = " (below)" if row["below_threshold"] else ""
        cells = []
        for n in names:
            r = sim["schedules"][n]["rows"][i]
            cells.append(f"{_pct(r['P_accepted'])} ({_pct(r.get('exact_P_accepted'))})")
        lines.append(f"| {p:g} | {row['split_share']:.3f}{mark} | " + " | ".join(cells) + " |")

    placebos = results.get("placebos")
    if placebos:
        lines += ["", "## 2. Placebos on real rollouts", ""]
        for run in placebos["runs"]:
            lines.append(
                f"- `{run['run_dir']}`: method {run['method']}, rubrics {run['rubrics']}, judge {run['judge']}, "
                f"kept steps {run['kept_steps']}, {run['tasks_with_rollouts']} tasks with kept rollouts, "
                f"{run['kept_rollouts']} rollouts, {'finished' if run['finished'] else 'no summary.json'}"
            )
        lines += [
            "",
            "| placebo | candidates | accepted | on probation | pending | rejected (by kind) | acceptance | "
            "reference passes | split a kept group | accepted of those | on probation of those |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, s in placebos["summary"].items():
            rej = ", ".join(f"{k} {v}" for k, v in s["rejected"].items()) or "none"
            lines.append(
                f"| {kind} | {s['candidates']} | {s['accepted']} | {s.get('probation', 0)} | {s['pending']} | {rej} | "
                f"{_pct(s['acceptance_rate'])} | {s['reference_passes']} | {s['split_a_kept_group']} | "
                f"{s['accepted_of_those']} | {s.get('probation_of_those', 0)} |"
            )
        if len(placebos.get("summary_by_run", {})) > 1:
            lines += ["", "Accepted of candidates, by run:", ""]
            for label, summ in placebos["summary_by_run"].items():
                cells = ", ".join(f"{k} {v['accepted']}/{v['candidates']}" for k, v in summ.items())
                lines.append(f"- {label}: {cells}")
        lines += [
            "",
            "Every candidate (broken: kept rollouts that fail the added check, of those re-graded; groups split: "
            "kept groups in which some rollouts pass it and some fail):",
            "",
            "| run | task | placebo | checks | ref passes | broken | groups split | split share [interval] | verdict |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in placebos["candidates"]:
            iv = r["interval"] or [None, None]
            share = "n/a" if r["split_share"] is None else f"{r['split_share']:.3f} [{iv[0]}, {iv[1]}]"
            lines.append(
                f"| {r['run']} | {r['task_id']} | {r['placebo']} | `{r['checks']}` | {r['reference_passes']} | "
                f"{r['broken']}/{r['rollouts']} | {r['groups_split']}/{r['groups']} | {share} | {r['verdict_kind']} |"
            )
    lines += ["", "## What this means", "", *results.get("meaning", [])]
    return "\n".join(lines) + "\n"


def meaning(results: dict[str, Any]) -> list[str]:
    """The plain reading of the numbers (written from them, not tuned to them)."""
    sim = results["simulation"]
    entries = sim["schedules"]
    key = "exact_false_accept_rate" if all("exact_false_accept_rate" in e for e in entries.values()) else None
    worst = max(entries.values(), key=lambda e: e[key] if key else e["false_accept_rate"])
    bound = 1 - sim["confidence"]
    fas = [e[key] if key else e["false_accept_rate"] for e in entries.values()]
    powers = "; ".join(
        f"{name}: " + ", ".join(f"{_pct(e.get('exact_power', e['power'])[str(p)])} at p={p:g}" for p in POWER_AT)
        for name, e in entries.items()
    )
    out = [
        f"- **The rule's own false-accept rate** (a check whose true split share is below {sim['threshold']:g} "
        f"accepted) is at most {_pct(worst[key] if key else worst['false_accept_rate'])} over the schedules "
        f"simulated ({'exact' if key else 'simulated'}), reached at the last rate below the boundary "
        f"(p = {sim['boundary_rate']:.4f}, or 1 - p); it falls fast away from it. The design bound is "
        f"{bound / 2:.0%}: the {sim['max_looks']} looks' two-sided intervals spend at most {bound:g} of error in "
        f"all ({sim['alpha_spending']}), half of it on the accepting side; the rule stays under the bound because "
        "the Clopper-Pearson interval is conservative at these few rollouts.",
        f"- **Power** (P(accept) of a check the policy breaks at rate p): {powers}. More groups a look buy power; "
        f"the false-accept rate stays between {_pct(min(fas))} and {_pct(max(fas))} over these schedules. A check "
        "broken by one rollout in ten splits a third of the groups (s = 0.34) and is still accepted rarely.",
        f"- **Futile is out of reach at these sample sizes**: a check no pooled rollout breaks (or every one does) "
        f"is futile only from {sim['futile_needs_rollouts']} pooled rollouts on (the upper end of the interval of "
        f"s must fall below {sim['threshold']:g}); with at most {sim['max_looks']} looks of 1-3 groups it stays "
        "pending and ends refused as not reliable (the p = 0 and p = 1 rows). Either way it is not accepted.",
        "- **The rule measures signal, not relevance.** It counts how often the frozen policy breaks the added "
        "check; nothing in it reads the prompt, so any check that splits the rollouts often enough is accepted, "
        "whatever it asks. What stands against an irrelevant check is (i) the proposer, which proposes only what "
        "the prompt states (the rubric audit and the requirement remedy read it with `stated_requirements`), and "
        "(ii) the reference guard, which refuses a check the reference answer fails when that pushes the "
        "reference below the policy's median.",
    ]
    pl = (results.get("placebos") or {}).get("summary") or {}
    rows = (results.get("placebos") or {}).get("candidates") or []
    if not pl:
        return out
    a, b, c = pl.get("a_random_word"), pl.get("b_reference_word"), pl.get("c_not_reference_word")
    d, dw = pl.get("d_stated"), pl.get("d_stated_widened")

    def rej(s: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in s["rejected"].items()) or "none"

    if a:
        all_broken = sum(r["placebo"] == "a_random_word" and r["broken"] == r["rollouts"] for r in rows)
        out.append(
            f"- **Placebo (a)**, a common word the task never mentions: {a['accepted']} of {a['candidates']} "
            f"accepted ({_pct(a['acceptance_rate'])}), {a['pending']} pending, rejected: {rej(a)}. Every rollout "
            f"broke it in {all_broken} of {a['candidates']}: nothing to split, so it waits (pending) and would end "
            "not reliable; the reference fails it too, and keeps its rank because every rollout falls with it."
        )
    if b:
        split_b = [r for r in rows if r["placebo"] == "b_reference_word" and (r["groups_split"] or 0) > 0]
        waiting = sum(r["verdict_kind"] == "pending" for r in split_b)
        out.append(
            f"- **Placebo (b)**, a content word of the reference answer the prompt does not state: {b['accepted']} of "
            f"{b['candidates']} accepted ({_pct(b['acceptance_rate'])}), {b['pending']} pending, rejected: "
            f"{rej(b)}. It split a kept group in {b['split_a_kept_group']} candidates: accepted in "
            f"{b['accepted_of_those']} (a 2:2 split decides at once), on probation in {b.get('probation_of_those', 0)} "
            f"and pending in {waiting} (a 1:3 split of one group cannot decide yet: on probation the check is "
            "committed now and the same test decides on the groups after it, pending it waits for them). The "
            "reference passes it, so the guard cannot stop it: it is "
            "accepted as often as the policy's rollouts split on it, with part 1's probabilities. This is the false "
            "accept the rule cannot see; only a proposer that reads the prompt avoids it."
        )
    if c:
        mine = [r for r in rows if r["placebo"] == "c_not_reference_word"]
        guarded = [r for r in mine if r["verdict_kind"] == "reference_guard"]
        unbroken = sum(r["broken"] == 0 for r in guarded)
        passed = [r for r in mine if r["verdict_kind"] != "reference_guard"]
        most = [r for r in passed if 2 * (r["broken"] or 0) >= (r["rollouts"] or 0)]
        ranks = {id(r): r["reference_rank"] or [None, None] for r in passed}
        low = sum(ranks[id(r)][0] is not None and ranks[id(r)][0] < 0.5 for r in passed)
        ahead = sum(r not in most and (ranks[id(r)][1] or 0) >= 0.5 for r in passed)
        out.append(
            f"- **Placebo (c)**, forbidding a word the reference answer uses: {c['accepted']} of {c['candidates']} "
            f"accepted ({_pct(c['acceptance_rate'])}), {c['pending']} pending, rejected: {rej(c)}. The reference "
            f"fails it; the guard refused {len(guarded)}, {unbroken} of them a check no kept rollout broke (the "
            f"reference, failing alone, falls from its place to the bottom). Of the {len(passed)} it let through, "
            f"{len(most)} are broken by at least half the rollouts (the reference falls with them), {ahead} by fewer "
            "but with the reference so far ahead of the rollouts on the rest of the rubric that it stays at or above "
            f"their median while failing it, and {low} had the reference below the policy's median already (then the "
            "guard only forbids it to fall below the rank it had)."
        )
    if d or dw:
        parts = []
        if d:
            parts.append(
                f"per task {d['accepted']} of {d['candidates']} accepted ({_pct(d['acceptance_rate'])}), "
                f"{d['pending']} pending, rejected: {rej(d)}"
            )
        if dw:
            parts.append(
                f"widened to every task that states it, as the trainer widens it, {dw['accepted']} of "
                f"{dw['candidates']} ({_pct(dw['acceptance_rate'])}), {dw['pending']} pending"
            )
        out.append(
            "- **For contrast, (d)** the requirements the prompts state and the rubrics do not check: "
            + "; ".join(parts)
            + ". The rule treats them exactly as (b): accepted where the policy breaks them often enough, pending "
            "where it does not yet; their relevance comes from the proposer's reading of the prompt."
        )
    on = {k: v.get("probation", 0) for k, v in pl.items()}
    if any(on.values()):
        out.append(
            "- **On probation** (`--pending-checks probation`; the default, `wait`, puts none there): a placebo the "
            "look cannot decide but whose kept groups split, and whose rollouts meet it at least as often as they "
            "break it, is committed at once and grades its tasks' groups until the same sequential test decides on "
            "them: "
            + ", ".join(f"{k} {on[k]} of {pl[k]['candidates']}" for k in pl)
            + ". The same test then keeps it or reverts it on the groups that follow, with part 1's probabilities at "
            "the break rate of the policy that trains on it meanwhile; what probation adds is the groups it grades "
            "before a revert."
        )
    out.append(
        "- Every placebo trial is one look at the kept rollouts of the run's last steps (a task drawn once in "
        "them has a single group of four); a pending candidate would be looked at again in a run as more of its "
        f"tasks' groups are graded, up to look {sim['max_looks']}, with part 1's probabilities."
    )
    out.append(
        "- Each placebo trial starts with the critic's pooled evidence cleared: `repair_key` names an unwidened "
        "repair by its task and its checks' types only, so two pending `contains` candidates on one task would "
        "otherwise share one test (the second measured on the first's outcomes, with no new rollouts)."
    )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", action="append", default=[], help="a run directory (repeatable); none: part 1 only")
    ap.add_argument("--n", type=int, default=20_000, help="simulated candidates per break rate and schedule")
    ap.add_argument(
        "--groups-per-look",
        default="1,2,3",
        help="new groups a look brings in part 1, drawn uniformly from this list (beside 1 and 3 a look)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--original-rubrics", action="store_true", help="version 0 rubrics instead of harness.json's")
    ap.add_argument("--no-exact", action="store_true", help="skip the exact probabilities")
    ap.add_argument("--max-looks", type=int, default=None, help="the rule's looks (default: TrialConfig's)")
    ap.add_argument("--alpha-spending", choices=get_args(Spending), default=None, help="default: TrialConfig's")
    ap.add_argument(
        "--pending-checks",
        choices=("wait", "probation"),
        default=None,
        help="what a placebo the look cannot decide gets (default: TrialConfig's, wait)",
    )
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    command = "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/false_accepts.py " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    print("1. the rule, simulated", flush=True)
    schedules = schedules_for([int(x) for x in args.groups_per_look.split(",") if x.strip()])
    overrides = {
        "max_looks": args.max_looks,
        "alpha_spending": args.alpha_spending,
        "pending_checks": args.pending_checks,
    }
    rule_config = TrialConfig(**{k: v for k, v in overrides.items() if v is not None})
    sim = simulate_rule(n=args.n, seed=args.seed, schedules=schedules, config=rule_config, with_exact=not args.no_exact)
    for name, e in sim["schedules"].items():
        print(
            f"  {name}: false-accept rate {_pct(e['false_accept_rate'])} at p={e['false_accept_at_p']:g} "
            f"(exact {_pct(e.get('exact_false_accept_rate'))}); power "
            + ", ".join(f"p={p}: {_pct(v)}" for p, v in e["power"].items()),
            flush=True,
        )
    results: dict[str, Any] = {"command": command.strip(), "simulation": sim}
    if args.run_dir:
        runs, rows = [], []
        for raw in args.run_dir:
            run_dir = Path(raw)
            if not (run_dir / "config.yaml").exists():
                raise SystemExit(f"{run_dir}: no config.yaml (not a run directory)")
            print(f"2. placebos on {run_dir}", flush=True)
            config, harness, recorder, judge = load_run(run_dir, args.original_rubrics)
            advantage = AdvantageSpec(
                scale_rewards="group", group_size=config.grpo.num_generations, flat_eps=config.harness.detectors.eps
            )
            kept = recorder.latest_rollouts()
            got = run_placebos(harness, recorder, judge, advantage, rule_config, args.seed, log=print)
            for r in got:
                r["run"] = run_label(run_dir)
            rows += got
            runs.append(
                {
                    "run_dir": str(run_dir),
                    "method": config.method,
                    "data": config.data.train,
                    "train_rubric": config.data.train_rubric,
                    "rubrics": "version 0" if args.original_rubrics else "as the run left them (harness.json)",
                    "judge": config.judge.backend,
                    "finished": (run_dir / "summary.json").exists(),
                    "kept_steps": sorted(recorder.rollouts),
                    "kept_rollouts": len(kept),
                    "tasks_with_rollouts": len({r.task_id for r in kept}),
                }
            )
        by_run = {
            label: summarise([r for r in rows if r["run"] == label]) for label in dict.fromkeys(r["run"] for r in rows)
        }
        results["placebos"] = {"runs": runs, "summary": summarise(rows), "summary_by_run": by_run, "candidates": rows}
        for kind, s in results["placebos"]["summary"].items():
            print(f"  {kind}: {s}", flush=True)
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["seconds"] = round(time.perf_counter() - t0, 1)
    results["meaning"] = meaning(results)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (args.out / "results.md").write_text(report(results), encoding="utf-8")
    print(f"wrote {args.out}/results.json and results.md ({results['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
