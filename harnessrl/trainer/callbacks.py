"""Trainer callbacks: metrics.jsonl, the rich progress display, evaluation (validation chooses the best
checkpoint, test is only reported)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from transformers import TrainerCallback

from harnessrl.data.schema import Task
from harnessrl.judges.rubric_judge import RubricJudge
from harnessrl.records.event_payloads import EvaluationPayload
from harnessrl.records.run_dir import RunDir, write_atomic
from harnessrl.records.run_record import BestCheckpoint, Missing, ScoresAtBest, read_best, read_evaluations
from harnessrl.trainer.evaluation import EvalResult, EvalSplit, GradeWith, evaluate_policy

if TYPE_CHECKING:
    from harnessrl.critic.trials import PolicySampler

__all__ = ["EvalCallback", "MetricsCallback", "ProgressCallback"]

logger = logging.getLogger(__name__)


def _finite(v):
    return v if isinstance(v, int | float) and not (isinstance(v, float) and math.isnan(v)) else None


class MetricsCallback(TrainerCallback):
    """Appends every log (TRL's metrics and HarnessRL's) to ``metrics.jsonl``."""

    def __init__(self, run_dir: RunDir):
        self.run_dir = run_dir

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and state.is_world_process_zero:
            row = {"step": state.global_step, "time": time.time()}
            row.update({k: _finite(v) if isinstance(v, float) else v for k, v in logs.items()})
            self.run_dir.append("metrics.jsonl", row)


class ProgressCallback(TrainerCallback):
    """A rich progress bar: step, reward, zero-std fraction (all-low / all-high), ETA."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console()
        self.progress: Progress | None = None
        self.task = None
        self.last: dict = {}

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        self.progress = Progress(
            TextColumn("[bold]step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.progress.start()
        self.task = self.progress.add_task("train", total=state.max_steps, stats="", completed=state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.progress is None or not logs or "reward" not in logs:
            return
        self.last = logs
        low = logs.get("frac_reward_zero_std/all_low") or 0.0
        high = logs.get("frac_reward_zero_std/all_high") or 0.0
        reward = _finite(logs["reward"])  # None at a step the judge gave no reward for
        shown = "n/a" if reward is None else f"{reward:.3f}"
        stats = f"reward {shown} ± {_finite(logs.get('reward_std')) or 0:.3f}  flat {low:.0%} low / {high:.0%} high"
        if logs.get("judge/missing_share"):
            stats += f"  no reward {logs['judge/missing_share']:.0%}"
        self.progress.update(self.task, stats=stats)

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _scores_at_best(test: EvalResult) -> ScoresAtBest:
    proxy = test.proxy.model_dump(exclude={"per_task"}) if test.proxy is not None else None
    return ScoresAtBest(
        overall=test.overall,
        per_domain=test.per_domain,
        per_family=test.per_family,
        proxy=ScoresAtBest.model_validate(proxy) if proxy is not None else None,
    )


class EvalCallback(TrainerCallback):
    """Evaluation before training, every ``every_steps`` and at the end, on each split; keeps the best checkpoint.

    Each evaluation point evaluates the validation split, then the test split (greedy or mean@k, graded with
    ``grade_with``: the gold rubrics with rubric version 0 beside them, or version 0 alone; the eval judge),
    one ``eval.jsonl`` row each with its ``split``. The best checkpoint is chosen on validation's main score
    alone (highest overall; the earliest step on a tie; an evaluation without a score never wins): it is saved to
    ``checkpoints/best`` and described in ``best.json`` (its step, validation scores, and the test
    scores at that step, which are reported, never used to choose). Without a validation split no best
    checkpoint is chosen. Completions come from ``sampler`` when the run sets one (its vLLM engine, or every
    process's share when several train: :func:`~harnessrl.trainer.policy_sampling.evaluation_sampler`), else
    from transformers ``generate`` on the policy.
    """

    def __init__(
        self,
        run_dir: RunDir,
        splits: Mapping[EvalSplit, Sequence[Task]],
        judge: RubricJudge,
        *,
        every_steps: int | None,
        before_training: bool,
        max_new_tokens: int,
        batch_size: int,
        completions: int = 1,
        temperature: float = 1.0,
        seed: int = 0,
        autocast: str = "generate",
        grade_with: GradeWith = "rubric",
        console: Console | None = None,
        base_cache: str | Path | None = None,
        policy_identity: Mapping[str, Any] | None = None,
    ):
        self.run_dir = run_dir
        self.grade_with = grade_with
        self.base_cache = Path(base_cache) if base_cache else None
        self.policy_identity = dict(policy_identity or {})
        # validation first: best.json is written once the point's test score is known too
        self.splits = {name: list(splits[name]) for name in ("validation", "test") if splits.get(name)}
        self.judge = judge
        self.every_steps = every_steps
        self.before_training = before_training
        self.decoding = {
            "max_new_tokens": max_new_tokens,
            "batch_size": batch_size,
            "completions": completions,
            "temperature": temperature,
            "seed": seed,
            "autocast": autocast,
            "grade_with": grade_with,
        }
        self.console = console
        # rows written by `harnessrl eval` (they carry a "source") are not part of the training curve
        self.results: list[EvalResult] = list(read_evaluations(run_dir.path))
        best = read_best(run_dir.path)  # one that is not a BestCheckpoint (no score) is replaced by the next best
        self.best: BestCheckpoint | None = None if isinstance(best, Missing) else best
        self.trainer = None  # set by the run, for saving the best model
        # set by the run when it generates through vLLM: evaluation samples through that engine (None: transformers)
        self.sampler: PolicySampler | None = None

    def split_results(self, split: EvalSplit) -> list[EvalResult]:
        """This split's evaluations so far, in step order."""
        return [r for r in self.results if r.split == split]

    def _base_cache_path(self, split: EvalSplit) -> Path | None:
        """Where the untrained policy's evaluation of ``split`` is kept for reuse (None: no cache; never
        through a vLLM engine, whose sampling differs from transformers')."""
        if self.base_cache is None or self.sampler is not None:
            return None
        import torch

        key = {
            "policy": self.policy_identity,
            "judge": self.judge.name,
            "decoding": self.decoding,
            # each batch seeded on its own since issue 31: entries from the one-seed-per-call draws do not match
            "draws": "seeded per batch",
            "torch_threads": torch.get_num_threads(),
            "tasks": [t.model_dump(mode="json") for t in self.splits[split]],
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return self.base_cache / f"{split}-{digest}.json"

    def _evaluate(self, model, tokenizer, split: EvalSplit, step: int) -> EvalResult:
        cache = self._base_cache_path(split) if step == 0 else None
        res = None
        if cache is not None and cache.is_file():
            try:
                res = EvalResult.model_validate_json(cache.read_text(encoding="utf-8"))
                logger.info("%s evaluation at step 0 reused from %s", split, cache)
            except (OSError, ValueError) as e:  # a broken cache file is evaluated again and rewritten
                logger.warning("%s is unreadable (%s): evaluating the base policy again", cache, e)
        if res is None:
            res = evaluate_policy(
                model,
                tokenizer,
                self.splits[split],
                self.judge,
                step=step,
                split=split,
                sampler=self.sampler,
                **self.decoding,
            )
            if cache is not None:
                write_atomic(cache, lambda f: f.write(res.model_dump_json()))
        self.results.append(res)
        self.run_dir.append("eval.jsonl", res.model_dump(), sync=True)
        proxy = res.proxy.overall if res.proxy is not None else None
        evaluation = EvaluationPayload(
            split=split,
            graded_with=res.graded_with,
            overall=res.overall,
            per_domain=res.per_domain,
            **({"proxy": proxy} if res.proxy is not None else {}),
            **({"no_score_reason": res.no_score_reason} if res.overall is None else {}),
        )
        self.run_dir.event(evaluation.KIND, step=step, **evaluation.written())
        if self.console:
            score = "no score" if res.overall is None else f"{res.overall:.3f}"
            self.console.log(
                f"{split} eval @ step {step}: {res.graded_with} {score}"
                + (f" (proxy {proxy:.3f})" if proxy is not None else "")
                + " "
                + " ".join(f"{d}={v:.2f}" for d, v in (res.per_family or res.per_domain).items())
                + f" ({res.seconds:.0f}s)"
            )
        return res

    def _run(self, model, tokenizer, step: int) -> dict[str, EvalResult]:
        out = {}
        for split in self.splits:
            done = next((r for r in self.results if r.split == split and r.step == step), None)
            out[split] = done or self._evaluate(model, tokenizer, split, step)
        val = out.get("validation")
        if val is not None and val.overall is not None and (self.best is None or val.overall > self.best.overall):
            test = out.get("test")
            self.best = BestCheckpoint(
                step=step,
                split="validation",
                graded_with=val.graded_with,
                overall=val.overall,
                per_domain=val.per_domain,
                per_family=val.per_family,
                proxy=val.proxy.overall if val.proxy is not None else None,
                test=_scores_at_best(test) if test else None,
            )
            if self.trainer is not None and step > 0:
                self._save_best(str(self.run_dir.checkpoints / "best"))
                self.best.checkpoint = str(self.run_dir.checkpoints / "best")
            self.run_dir.write_json("best.json", self.best.model_dump())
        return out

    def _save_best(self, path: str) -> None:
        """Save the policy: with several processes, every one takes part (under FSDP or ZeRO-3 gathering the
        state dict is a collective), at the step boundary the evaluation runs at."""
        boundary = getattr(self.trainer, "boundary", None)
        if boundary is not None:
            boundary.request("save", path)
        else:
            self.trainer.save_model(path)

    def _evaluated(self, step: int) -> bool:
        return all(any(r.split == split and r.step == step for r in self.results) for split in self.splits)

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if self.before_training and state.global_step == 0 and not self._evaluated(0) and state.is_world_process_zero:
            self._run(model, processing_class, 0)

    def on_step_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        step = state.global_step
        if (
            self.every_steps
            and step % self.every_steps == 0
            and step < state.max_steps
            and state.is_world_process_zero
            and not self._evaluated(step)
        ):
            self._run(model, processing_class, step)

    def on_train_end(self, args, state, control, model=None, processing_class=None, **kwargs):
        if state.is_world_process_zero and not self._evaluated(state.global_step):
            self._run(model, processing_class, state.global_step)
