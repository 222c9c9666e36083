"""Held-out evaluation of a policy: greedy decoding, rubric version 0, the eval judge's own settings.

Evaluation never sees the harness: held-out tasks are split off before training, the evolver never
reads them, and they are always graded with the dataset's rubric (version 0) by a judge built from
the eval configuration, so a harness edit can never move the yardstick.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from harnessrl.data.schema import Task
from harnessrl.judges.rubric_judge import RubricJudge, RubricRequest

__all__ = ["EvalResult", "EvalSplit", "evaluate_policy", "generate_greedy"]

logger = logging.getLogger(__name__)


EvalSplit = Literal["validation", "test"]
"""Validation chooses the best checkpoint; test is only reported."""


class EvalResult(BaseModel):
    """Scores on one evaluation split: overall (mean over tasks), per domain, per task."""

    step: int
    split: EvalSplit | None = Field(default=None, description="None: a row from before the splits existed.")
    overall: float
    per_domain: dict[str, float]
    per_task: dict[str, float | None]
    tasks: int
    seconds: float
    samples: list[dict] = Field(default_factory=list, description="A few (task, response, reward) examples.")


def generate_greedy(model, tokenizer, tasks: Sequence[Task], max_new_tokens: int, batch_size: int = 16) -> list[str]:
    """Greedy completions of each task's prompt (chat template applied), batched with left padding."""
    import torch

    prompts = [tokenizer.apply_chat_template(t.messages(), tokenize=False, add_generation_prompt=True) for t in tasks]
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    was_training = model.training
    model.eval()
    out: list[str] = [""] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    try:
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                enc = tokenizer(
                    [prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False
                ).to(model.device)
                gen = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                )
                texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                for i, text in zip(idx, texts, strict=True):
                    out[i] = text.strip()
    finally:
        tokenizer.padding_side = side
        if was_training:
            model.train()
    return out


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
) -> EvalResult:
    """Generate greedily for every held-out task and grade with its version-0 rubric."""
    t0 = time.perf_counter()
    responses = generate_greedy(model, tokenizer, tasks, max_new_tokens, batch_size)
    results = judge.grade([RubricRequest.for_task(t, r) for t, r in zip(tasks, responses, strict=True)])
    per_task = {t.id: res.reward for t, res in zip(tasks, results, strict=True)}
    by_domain: dict[str, list[float]] = defaultdict(list)
    for t in tasks:
        if per_task[t.id] is not None:
            by_domain[t.domain].append(per_task[t.id])
    scored = [v for v in per_task.values() if v is not None]
    samples = [
        {"task_id": t.id, "response": r, "reward": res.reward}
        for t, r, res in list(zip(tasks, responses, results, strict=True))[:keep_samples]
    ]
    return EvalResult(
        step=step,
        split=split,
        overall=float(np.mean(scored)) if scored else float("nan"),
        per_domain={d: float(np.mean(v)) for d, v in sorted(by_domain.items())},
        per_task=per_task,
        tasks=len(tasks),
        seconds=time.perf_counter() - t0,
        samples=samples,
    )
