"""One training run as its stages build it: :class:`RunState`, filled in stage by stage
(:mod:`harnessrl.trainer.run_stages`), read by the summary (:mod:`harnessrl.trainer.run_summary`) and by the diagnosis
of a full disk (:mod:`harnessrl.trainer.disk_full`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from harnessrl.records.run_dir import LockOwner, RunDir
from harnessrl.trainer.resume import Resumed

if TYPE_CHECKING:
    from rich.console import Console
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from harnessrl.interfaces.harness import Harness
    from harnessrl.judges.rubric_judge import RubricJudge
    from harnessrl.records.steps import Recorder
    from harnessrl.trainer.attach import HarnessAttachment
    from harnessrl.trainer.callbacks import EvalCallback
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
    from harnessrl.trainer.run_tasks import RunTasks
    from harnessrl.trainer.train_config import TrainConfig

__all__ = ["RunState", "TrainerHook"]

TrainerHook = Callable[["HarnessGRPOTrainer", RunDir], None]
"""What :func:`~harnessrl.trainer.run.train` may call once the trainer is built (``trainer_hook(trainer, run_dir)``)."""


@dataclass
class RunState:
    """One training run as its stages build it (each stage fills in its part)."""

    config: TrainConfig
    resume: bool
    overwrite: bool
    console: Console
    trainer_hook: TrainerHook | None
    t_start: float = field(default_factory=time.perf_counter)
    main: bool = True
    stale_lock: LockOwner | None = None  # the owner of a lock file a killed process left (run_start says so)
    stage: str = "starting"  # training | final (saving the final model) | ending: what a full disk interrupted
    # checked before anything is loaded or written
    tasks: RunTasks | None = None
    grade_with: str = "rubric"
    device: str = "cpu"
    run_path: Path = Path()
    # models and judges
    model: PreTrainedModel | None = None
    tokenizer: PreTrainedTokenizerBase | None = None
    judge: RubricJudge | None = None
    eval_judge: RubricJudge | None = None  # a judge of the evaluation's own, when it grades apart from training
    devices: dict[str, str | None] = field(default_factory=dict)  # where each part runs (run_start says so)
    preflight: dict[str, dict[str, JsonValue]] = field(default_factory=dict)  # each judge's check, by its role
    # the run directory and the harness
    run: RunDir | None = None
    harness: Harness | None = None
    recorder: Recorder | None = None
    resumed: Resumed = field(default_factory=Resumed)  # where a resumed run goes on from (trainer/resume.py)
    end_only: bool = False  # trained to its last step, stopped while it ended: the end is all that is left
    # the trainer and what listens to it
    trainer: HarnessGRPOTrainer | None = None
    eval_cb: EvalCallback | None = None
    attachment: HarnessAttachment | None = None  # detectors, memory, evolver, tool server
