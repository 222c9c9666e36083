"""Held-out evaluation of a policy: greedy decoding (or the mean of k sampled completions per task),
rubric version 0, the eval judge's own settings.

Greedy decoding scores one completion per task, so a task's score only moves when its greedy answer
changes: on a small split the score moves in jumps of one task and can stay flat while the policy's
sampled answers (what GRPO trains) get better. ``completions: k`` (k > 1) scores each task by the mean
reward of k completions sampled at ``temperature``, under a fixed ``seed`` in a forked RNG: every
checkpoint is scored on the same random draws, and training's own random stream is left untouched.

A run that generates through vLLM evaluates through the same engine during training (a ``sampler``, see
:func:`generate_completions`: greedy is temperature 0 there, and the draws are seeded per request, the
same at every checkpoint); ``harnessrl eval`` after training generates with transformers.

Evaluation never sees the harness: held-out tasks are split off before training, the evolver never
reads them, and they are graded by a judge built from the eval configuration, so a harness edit can
never move the yardstick. What they are graded with (``eval.grade_with``): a task's **gold rubric**,
what the prompt truly asks, which no part of training ever sees, and beside it the **proxy**, the task's
rubric version 0, the kind of rubric training optimises. An evaluation graded with the rubric the
harness may repair cannot see a repair (a lax rubric made strict, a length-paying criterion countered):
it shares the failure it should detect. The distance between the proxy and the gold score over
training is reward hacking, made visible. Scores are given overall, per domain and per
``metadata.family``, with the share of completions cut at the token budget (a check on how an answer
ends, or on its length, means little on a cut answer).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from harnessrl.data.schema import Task
from harnessrl.judges.rubric_judge import RubricJudge, RubricRequest
from harnessrl.records.evaluations import EvalResult, EvalSplit, GradeWith, ScoreSet

if TYPE_CHECKING:
    from harnessrl.critic.trials import PolicySampler

__all__ = [
    "EvalDecoding",
    "EvalResult",
    "EvalSplit",
    "GradeWith",
    "ScoreSet",
    "eval_decoding",
    "evaluate_policy",
    "generate_completions",
    "generate_greedy",
    "resolve_grade_with",
]

logger = logging.getLogger(__name__)


def resolve_grade_with(setting: str, splits: Mapping[str, Sequence[Task]]) -> GradeWith:
    """``eval.grade_with`` for these evaluation tasks: ``auto`` is gold when every one has a gold rubric.

    Raises:
        ConfigError: ``gold`` asked for while some evaluated task has no gold rubric (naming a few).
    """
    from harnessrl.errors import ConfigError

    tasks = [t for ts in splits.values() for t in ts]
    without = [t.id for t in tasks if t.gold_rubric is None]
    if setting == "gold" and without:
        raise ConfigError(
            f"eval.grade_with is 'gold', but {len(without)} evaluated task(s) have no gold_rubric "
            f"(e.g. {without[:3]}): add one to each, or set eval.grade_with to 'rubric' (or 'auto')"
        )
    if setting == "auto":
        return "gold" if tasks and not without else "rubric"
    return setting  # type: ignore[return-value]


class EvalDecoding(TypedDict):
    """How a run's evaluations decode (``TrainConfig.eval``), as keyword arguments of :func:`evaluate_policy`."""

    max_new_tokens: int
    batch_size: int
    completions: int
    """1: the greedy answer; k > 1: the mean reward of k sampled ones."""
    temperature: float
    seed: int
    autocast: str
    """The precision training generates in (``generation.autocast``)."""


def eval_decoding(config) -> EvalDecoding:
    """The decoding settings of a run's evaluations (``TrainConfig``), as keyword arguments of
    :func:`evaluate_policy`: the training callback and ``harnessrl eval`` score alike."""
    ev = config.eval
    return EvalDecoding(
        max_new_tokens=ev.max_new_tokens or config.grpo.max_completion_length,
        batch_size=ev.batch_size,
        completions=ev.completions,
        temperature=ev.temperature,
        seed=ev.seed,
        autocast=config.generation.autocast,
    )


def _family(task: Task) -> str | None:
    family = task.metadata.get("family")
    return str(family) if family is not None else None


def _score_set(tasks: Sequence[Task], flat: list[tuple[Task, str]], graded: list) -> ScoreSet:
    rewards: dict[str, list[float]] = defaultdict(list)
    for (t, _), res in zip(flat, graded, strict=True):
        if res.reward is not None:
            rewards[t.id].append(res.reward)
    per_task = {t.id: (float(np.mean(rewards[t.id])) if rewards.get(t.id) else None) for t in tasks}
    by_domain: dict[str, list[float]] = defaultdict(list)
    by_family: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        if per_task[t.id] is not None:
            by_domain[t.domain].append(per_task[t.id])  # type: ignore[arg-type]
            if _family(t) is not None:
                by_family[_family(t)].append(per_task[t.id])  # type: ignore[index,arg-type]
    scored = [v for v in per_task.values() if v is not None]
    reason = None
    if not scored:
        reason = (
            f"no task of {len(tasks)} could be scored: every completion's reward is missing (the judge gave no "
            "verdict; see judge/parse_fail_rate and the log's judge warnings)"
            if tasks
            else "no tasks"
        )
    return ScoreSet(
        overall=float(np.mean(scored)) if scored else None,
        sampling_se=_sampling_se(list(rewards.values())),
        per_domain={d: float(np.mean(v)) for d, v in sorted(by_domain.items())},
        per_family={f: float(np.mean(v)) for f, v in sorted(by_family.items())},
        per_task=per_task,
        no_score_reason=reason,
    )


def _sampling_se(rewards: list[list[float]]) -> float | None:
    """The standard error of the mean over tasks of each task's mean answer reward, from the answers' spread
    within each task: what another draw of the same number of answers from the same checkpoint would move the
    score by. None when some scored task has fewer than 2 answers (a greedy evaluation has no such spread)."""
    if not rewards or any(len(r) < 2 for r in rewards):
        return None
    return float(np.sqrt(sum(np.var(r, ddof=1) / len(r) for r in rewards)) / len(rewards))


def _clipped(tokenizer, tasks: Sequence[Task], outs: list[list[str]], max_new_tokens: int):
    """Share of completions (overall, per family) whose re-tokenized length reaches ``max_new_tokens``."""
    if tokenizer is None or not outs:
        return None, {}
    texts = [r for rs in outs for r in rs]
    try:
        lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    except Exception:  # a tokenizer that cannot batch plain texts: the share is unknown, not wrong
        return None, {}
    cut = [n >= max_new_tokens for n in lengths]
    per_family: dict[str, list[bool]] = defaultdict(list)
    i = 0
    for t, rs in zip(tasks, outs, strict=True):
        for _ in rs:
            if _family(t) is not None:
                per_family[_family(t)].append(cut[i])  # type: ignore[index]
            i += 1
    return float(np.mean(cut)), {f: float(np.mean(v)) for f, v in sorted(per_family.items())}


def generate_greedy(
    model,
    tokenizer,
    tasks: Sequence[Task],
    max_new_tokens: int,
    batch_size: int = 16,
    *,
    autocast: str = "generate",
) -> list[str]:
    """Greedy completions of each task's prompt, stripped: the critic's sampler at temperature 0
    (:class:`~harnessrl.critic.rollouts.TransformersSampler`: chat template, batches of similar length,
    left padding); ``autocast``: as :func:`harnessrl.models.generation_precision`."""
    from harnessrl.critic.rollouts import TransformersSampler

    sampler = TransformersSampler(model, tokenizer, batch_size=batch_size, seed=None, autocast=autocast)
    return [text.strip() for text in sampler.sample([t.messages() for t in tasks], 0.0, max_new_tokens)]


def generate_completions(
    model,
    tokenizer,
    tasks: Sequence[Task],
    max_new_tokens: int,
    batch_size: int = 16,
    *,
    completions: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    sampler: PolicySampler | None = None,
    autocast: str = "generate",
) -> list[list[str]]:
    """``completions`` completions of each task's prompt, stripped: the greedy one when 1 (temperature 0),
    else sampled at ``temperature``, by ``sampler`` (the training run's vLLM engine,
    :class:`~harnessrl.critic.rollouts.VLLMSampler`, seeded by its own seed) or, when None, by the critic's
    frozen-policy sampler on ``model`` (:class:`~harnessrl.critic.rollouts.TransformersSampler`: training's
    sampling settings, in the precision the rollouts are generated in (``autocast``), ``seed`` in a forked
    RNG, so the caller's random state is as it was; ``batch_size`` prompts, each with its completions, per
    generate call)."""
    if completions < 1:
        raise ValueError(f"completions must be at least 1, got {completions}")
    if sampler is None:
        from harnessrl.critic.rollouts import TransformersSampler

        sampler = TransformersSampler(
            model, tokenizer, batch_size=batch_size * completions, seed=seed, autocast=autocast
        )
    prompts = [t.messages() for t in tasks for _ in range(completions)]
    texts = sampler.sample(prompts, 0.0 if completions == 1 else temperature, max_new_tokens)
    if len(texts) != len(prompts):
        raise RuntimeError(f"the policy sampler returned {len(texts)} completions for {len(prompts)} prompts")
    return [[x.strip() for x in texts[i : i + completions]] for i in range(0, len(texts), completions)]


def evaluate_policy(
    model,
    tokenizer,
    tasks: Sequence[Task],
    judge: RubricJudge,
    *,
    step: int,
    max_new_tokens: int,
    batch_size: int = 16,
    keep_samples: int = 5,
    split: EvalSplit | None = None,
    completions: int = 1,
    temperature: float = 1.0,
    seed: int = 0,
    sampler: PolicySampler | None = None,
    autocast: str = "generate",
    grade_with: GradeWith = "rubric",
) -> EvalResult:
    """Score every held-out task: its greedy completion, or the mean reward of ``completions`` sampled ones
    (a task none of whose completions could be graded scores None), graded with ``grade_with`` (``gold``:
    each task's gold rubric, with rubric version 0 beside it as ``proxy``; ``rubric``: version 0 alone).
    ``sampler``: generate through it instead of transformers (:func:`generate_completions`)."""
    t0 = time.perf_counter()
    outs = generate_completions(
        model,
        tokenizer,
        tasks,
        max_new_tokens,
        batch_size,
        completions=completions,
        temperature=temperature,
        seed=seed,
        sampler=sampler,
        autocast=autocast,
    )
    flat = [(t, r) for t, rs in zip(tasks, outs, strict=True) for r in rs]
    if grade_with == "gold":
        without = [t.id for t in tasks if t.gold_rubric is None]
        if without:
            raise ValueError(f"grading with gold, but task(s) {without[:3]} have no gold_rubric")
        # one judge call for both gradings: the gold rubric's and rubric version 0's verdicts
        both = judge.grade(
            [RubricRequest.for_task(t, r, t.gold_rubric) for t, r in flat]
            + [RubricRequest.for_task(t, r) for t, r in flat]
        )
        graded, proxy_graded = both[: len(flat)], both[len(flat) :]
        proxy = _score_set(tasks, flat, proxy_graded)
    else:
        graded, proxy = judge.grade([RubricRequest.for_task(t, r) for t, r in flat]), None
    main = _score_set(tasks, flat, graded)
    if main.overall is None:
        logger.warning("%s evaluation at step %d has no score: %s", split or "held-out", step, main.no_score_reason)
    clipped, clipped_per_family = _clipped(tokenizer, tasks, outs, max_new_tokens)
    # each task's first completion (every task has exactly `completions`, one after another)
    firsts = list(zip(tasks, outs, graded[::completions], strict=True))[:keep_samples]
    samples = [{"task_id": t.id, "response": rs[0], "reward": res.reward} for t, rs, res in firsts]
    return EvalResult(
        step=step,
        split=split,
        overall=main.overall,
        per_domain=main.per_domain,
        per_family=main.per_family,
        per_task=main.per_task,
        no_score_reason=main.no_score_reason,
        sampling_se=main.sampling_se,
        tasks=len(tasks),
        seconds=time.perf_counter() - t0,
        samples=samples,
        completions_per_task=completions,
        graded_with=grade_with,
        proxy=proxy,
        clipped_share=clipped,
        clipped_per_family=clipped_per_family,
    )
