"""One training run from a :class:`TrainConfig`: data, model, judge, harness, TRL, evaluation, report.

``train`` validates everything (data, config, model) before the first step, writes the resolved
config into the run directory, and resumes from the directory's last checkpoint and saved harness
when asked to.

``method`` selects what varies between the compared methods, all through the same trainer, data,
judge, evaluation and accounting: what each one turns on (the evolver, dynamic sampling, the difficulty
filter, the gold rubrics) is its entry in :data:`~harnessrl.trainer.methods.METHOD_TABLE`, which the run
asks. Resuming is :mod:`harnessrl.trainer.resume`'s: the run asks it what to restore at each stage.

Gold rubrics are for evaluation only: :func:`load_run_tasks` strips them from every training task
(after putting them in the rubric's place when training is on gold), so the harness, its tool server,
the memory, the detectors, the critic and the evolver never hold one.

This module is the run's entry point and keeps its public names; each concern has its own module:
:mod:`~harnessrl.trainer.run_tasks` (task loading and splitting), :mod:`~harnessrl.trainer.trl_config` (TRL's
config, LoRA, the device and processes), :mod:`~harnessrl.trainer.run_stages` (the stages, in order, over the run's
:mod:`~harnessrl.trainer.run_state`), :mod:`~harnessrl.trainer.disk_full` (a full disk diagnosed),
:mod:`~harnessrl.trainer.run_summary` (the run's summary) and :mod:`~harnessrl.trainer.checkpoint_eval` (evaluation
after the run, ``harnessrl eval``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rich.console import Console

from harnessrl.errors import HarnessRLError
from harnessrl.records.run_dir import RunDirLock, lock_run_dir
from harnessrl.trainer.checkpoint_eval import evaluate_run
from harnessrl.trainer.run_stages import rollout_steps_kept, run_stages
from harnessrl.trainer.run_state import TrainerHook
from harnessrl.trainer.run_summary import RunSummary
from harnessrl.trainer.run_tasks import RunTasks, load_run_tasks, split_alternating, training_view
from harnessrl.trainer.train_config import TrainConfig
from harnessrl.trainer.trl_config import build_grpo_config, is_main_process

__all__ = [
    "RunSummary",
    "RunTasks",
    "TrainerHook",
    "build_grpo_config",
    "evaluate_run",
    "load_run_tasks",
    "rollout_steps_kept",
    "split_alternating",
    "train",
    "training_view",
]


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    trainer_hook: TrainerHook | None = None,
) -> RunSummary:
    """Run training end to end. ``trainer_hook(trainer, run_dir)`` may attach more (the evolver does).

    The main process holds the run directory's lock from start to end (:func:`lock_run_dir`): a second
    live process training into the same directory, or resuming it, is refused before anything is written."""
    run_path = Path(config.run_dir)
    existed = run_path.exists()
    lock = lock_run_dir(run_path) if is_main_process() else contextlib.nullcontext()
    with lock:  # a directory the lock made for a refused resume goes with it
        if resume and not (run_path / "config.yaml").is_file():
            what = "no such directory" if not existed else "no config.yaml in it: no run was started there"
            raise HarnessRLError(
                f"--resume: {run_path} holds no run to resume ({what}). Check run_dir for a typo, or drop --resume "
                "to start a new run there"
            )
        stale = lock.stale if isinstance(lock, RunDirLock) else None
        return run_stages(
            config, resume=resume, overwrite=overwrite, console=console, trainer_hook=trainer_hook, stale_lock=stale
        )
