"""Evaluation after a run (``harnessrl eval``): a checkpoint of a finished run scored on its held-out splits with
its eval judge, appended to ``eval.jsonl``.

The tasks are the run's own (:func:`~harnessrl.trainer.run_tasks.load_run_tasks` on its saved config), the grading
the one its evaluations used; a subset (splits, families, domains) and a number of sampled answers a task may be
asked for, and each row written says what it scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from harnessrl.data import Task
from harnessrl.errors import HarnessRLError
from harnessrl.records.checkpoints import step_of_checkpoint
from harnessrl.records.run_dir import RunDir
from harnessrl.records.run_record import BestCheckpoint, read_best
from harnessrl.trainer.run_tasks import load_run_tasks
from harnessrl.trainer.trl_config import judge_on_device, resolve_device

if TYPE_CHECKING:
    from harnessrl.trainer.evaluation import EvalResult

__all__ = ["BASE_CHECKPOINT", "CheckpointEvaluation", "best_checkpoint", "default_checkpoint", "evaluate_run"]

BASE_CHECKPOINT = "base"
"""The checkpoint name of the policy before training: the run's ``model`` (with no adapter), step 0. A run whose best
validation score was the untrained policy's (``best.json`` at step 0) saved no checkpoint of it; this is its best."""


class CheckpointEvaluation(TypedDict):
    """What :func:`evaluate_run` scored: the checkpoint, each split's result, and the headline one."""

    checkpoint: str
    """The checkpoint's folder, or ``base`` (the policy before training)."""
    results: dict[str, EvalResult]
    """By split (validation, test)."""
    result: EvalResult | None
    """The test split's, or validation's when the run has no test split."""


def evaluate_run(
    run_dir: str | Path,
    checkpoint: str | None = None,
    *,
    completions: int | None = None,
    splits: Sequence[str] | None = None,
    families: Sequence[str] = (),
    domains: Sequence[str] = (),
) -> CheckpointEvaluation:
    """Evaluate a run's checkpoint on its validation and test splits with its eval judge; appends to eval.jsonl.

    Returns ``checkpoint``, ``results`` (split -> EvalResult) and ``result`` (the test split's, or
    validation's when the run has no test split). It generates with transformers even for a run that
    trained through vLLM (``generation.backend: vllm``): no engine is alive after training, and starting
    one for an evaluation is not built, so scores can differ slightly from the in-training ones.

    ``completions`` overrides the run's ``eval.completions`` (more sampled answers a task give a family's or a
    run's score with less noise, at the same decoding otherwise); ``splits`` keeps some of the splits;
    ``families`` and ``domains`` keep the tasks of those families (``metadata.family``) or domains. Each row
    written says what it scored (``completions_per_task``, ``selection``), so a row of a subset is never read as
    the whole split's."""
    from harnessrl.judges import build_judge
    from harnessrl.models import load_causal_lm
    from harnessrl.trainer.evaluation import eval_decoding, evaluate_policy, resolve_grade_with
    from harnessrl.trainer.train_config import load_run_config

    run = RunDir(run_dir, create=False)
    if not run.config.exists():
        raise HarnessRLError(f"{run.path} has no config.yaml: is it a run directory made by `harnessrl train`?")
    if completions is not None and completions < 1:
        raise HarnessRLError(f"completions must be at least 1 (1 is the greedy answer), got {completions}")
    config = load_run_config(run.config)
    splits_all = load_run_tasks(config).eval_splits
    if not splits_all:
        raise HarnessRLError(
            f"{run.path}: the run has no held-out data (data.validation and data.test are null): nothing to evaluate on"
        )
    eval_splits = _select_eval_tasks(run.path, splits_all, splits, families, domains)
    source, label, step = _checkpoint_source(run, checkpoint or default_checkpoint(run.path), config.model)
    device = resolve_device(config)
    model, tokenizer = load_causal_lm(source, device=device)
    judge = build_judge(judge_on_device(config.eval_judge, device))
    # the grading the run's evaluations use, decided on all its held-out tasks (not on the subset kept)
    grade_with = resolve_grade_with(config.eval.grade_with, splits_all)
    decoding = eval_decoding(config)
    if completions is not None:
        decoding["completions"] = completions
    selection = {k: sorted(v) for k, v in (("families", families), ("domains", domains)) if v} or None
    results: dict[str, EvalResult] = {}
    for split, tasks in eval_splits.items():
        result = evaluate_policy(
            model,
            tokenizer,
            tasks,
            judge,
            step=step,
            split=split,  # type: ignore[arg-type]
            grade_with=grade_with,
            **decoding,
        )
        row = {**result.model_dump(), "checkpoint": label, "source": "harnessrl eval", "selection": selection}
        run.append("eval.jsonl", row)
        results[split] = result
    return CheckpointEvaluation(
        checkpoint=label, results=results, result=results.get("test") or results.get("validation")
    )


def best_checkpoint(run_dir: str | Path) -> str | None:
    """The name of a run's best checkpoint: ``best`` where it was saved; ``base`` where the best validation score was
    the untrained policy's (``best.json`` at step 0, no checkpoint saved); None where neither says."""
    run = RunDir(run_dir, create=False)
    if (run.checkpoints / "best").exists():
        return "best"
    best = read_best(run.path)
    if isinstance(best, BestCheckpoint) and best.step == 0 and not best.checkpoint:
        return BASE_CHECKPOINT
    return None


def default_checkpoint(run_dir: str | Path) -> str:
    """The checkpoint ``harnessrl eval`` scores when none is named: the best (:func:`best_checkpoint`), else
    ``final``."""
    return best_checkpoint(run_dir) or "final"


def _checkpoint_source(run: RunDir, checkpoint: str, base_model: str) -> tuple[str, str, int]:
    """What to load for ``checkpoint`` (a model name or folder), the label its rows carry, and its step of training
    (-1 for best, final or a path). A name under the run's checkpoints/ comes first: a stray ./best or ./final must
    not be picked up instead."""
    if checkpoint == BASE_CHECKPOINT:
        return base_model, BASE_CHECKPOINT, 0
    path = run.checkpoints / checkpoint
    if not path.exists():
        path = Path(checkpoint)
    if not path.exists():
        found = sorted(p.name for p in run.checkpoints.iterdir()) if run.checkpoints.exists() else []
        raise HarnessRLError(
            f"no checkpoint {checkpoint!r} in {run.checkpoints}; found: {found or 'none'} (or "
            f"{BASE_CHECKPOINT!r}: the policy before training)"
        )
    step = step_of_checkpoint(path)
    return str(path), str(path), -1 if step is None else step


def _select_eval_tasks(
    run_path: Path,
    splits: dict[str, list[Task]],
    keep_splits: Sequence[str] | None,
    families: Sequence[str],
    domains: Sequence[str],
) -> dict[str, list[Task]]:
    """The held-out tasks ``harnessrl eval`` scores: the splits named, the tasks of the families and domains named
    (a task is kept when it matches a family or a domain named). An empty selection is an error that lists what
    the run has."""
    if keep_splits:
        unknown = [s for s in keep_splits if s not in splits]
        if unknown:
            raise HarnessRLError(f"{run_path}: no {' or '.join(unknown)} split; the run has: {', '.join(splits)}")
        splits = {s: t for s, t in splits.items() if s in keep_splits}
    if not families and not domains:
        return splits
    have_families = sorted({str(t.metadata["family"]) for ts in splits.values() for t in ts if "family" in t.metadata})
    have_domains = sorted({t.domain for ts in splits.values() for t in ts if t.domain})
    for named, have, what, whats in (
        (families, have_families, "family", "families"),
        (domains, have_domains, "domain", "domains"),
    ):
        missing = sorted(set(named) - set(have))
        if missing:
            raise HarnessRLError(
                f"{run_path}: no held-out task of {what} {', '.join(map(repr, missing))}; "
                f"its held-out tasks' {whats}: {', '.join(have) or 'none (no task names one)'}"
            )

    def kept(task: Task) -> bool:
        family = task.metadata.get("family")
        return (family is not None and str(family) in families) or task.domain in domains

    return {s: [t for t in ts if kept(t)] for s, ts in splits.items() if any(kept(t) for t in ts)}
