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
reads them, and they are always graded with the dataset's rubric (version 0) by a judge built from
the eval configuration, so a harness edit can never move the yardstick.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, Field

from harnessrl.data.schema import Task
from harnessrl.judges.rubric_judge import RubricJudge, RubricRequest

if TYPE_CHECKING:
    from harnessrl.critic.trials import PolicySampler

__all__ = ["EvalResult", "EvalSplit", "eval_decoding", "evaluate_policy", "generate_completions", "generate_greedy"]

logger = logging.getLogger(__name__)


EvalSplit = Literal["validation", "test"]
"""Validation chooses the best checkpoint; test is only reported."""


class EvalResult(BaseModel):
    """Scores on one evaluation split: overall (mean over tasks), per domain, per task."""

    step: int
    split: EvalSplit | None = Field(default=None, description="None: a row from before the splits existed.")
    overall: float | None = Field(description="The mean over the scored tasks; None when no task got a score.")
    unscored: str | None = Field(
        default=None, description="Why some tasks (or all: overall None) have no score; None: every task scored."
    )
    per_domain: dict[str, float]
    per_task: dict[str, float | None]
    tasks: int
    seconds: float
    samples: list[dict] = Field(default_factory=list, description="A few (task, response, reward) examples.")
    completions_per_task: int = Field(default=1, description="1: greedy; k > 1: mean reward of k sampled completions.")


def eval_decoding(config) -> dict:
    """The decoding settings of a run's evaluations (``TrainConfig``), as keyword arguments of
    :func:`evaluate_policy`: the training callback and ``harnessrl eval`` score alike."""
    ev = config.eval
    return {
        "max_new_tokens": ev.max_new_tokens or config.grpo.max_completion_length,
        "batch_size": ev.batch_size,
        "completions": ev.completions,
        "temperature": ev.temperature,
        "seed": ev.seed,
        "autocast": config.generation.autocast,  # the precision training generates in
    }


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
) -> EvalResult:
    """Score every held-out task with its version-0 rubric: its greedy completion, or the mean reward of
    ``completions`` sampled ones (a task none of whose completions could be graded scores None).
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
    graded = judge.grade([RubricRequest.for_task(t, r) for t, r in flat])
    rewards: dict[str, list[float]] = defaultdict(list)
    for (t, _), res in zip(flat, graded, strict=True):
        if res.reward is not None:
            rewards[t.id].append(res.reward)
    per_task = {t.id: (float(np.mean(rewards[t.id])) if rewards.get(t.id) else None) for t in tasks}
    by_domain: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        if per_task[t.id] is not None:
            by_domain[t.domain].append(per_task[t.id])
    scored = [v for v in per_task.values() if v is not None]
    unscored = None
    if len(scored) < len(tasks):  # a task none of whose completions got a reward: the judge gave too few verdicts
        unscored = (
            f"{len(tasks) - len(scored)} of {len(tasks)} tasks have no score: the eval judge ({judge.name}) gave too "
            "few verdicts on their completions"
            + ("; the overall is over the others" if scored else "; the evaluation has no score")
        )
        logger.warning("%s evaluation at step %d: %s", split or "held-out", step, unscored)
    # each task's first completion (every task has exactly `completions`, one after another)
    firsts = list(zip(tasks, outs, graded[::completions], strict=True))[:keep_samples]
    samples = [{"task_id": t.id, "response": rs[0], "reward": res.reward} for t, rs, res in firsts]
    return EvalResult(
        step=step,
        split=split,
        overall=float(np.mean(scored)) if scored else None,
        unscored=unscored,
        per_domain={d: float(np.mean(v)) for d, v in sorted(by_domain.items())},
        per_task=per_task,
        tasks=len(tasks),
        seconds=time.perf_counter() - t0,
        samples=samples,
        completions_per_task=completions,
    )
