"""The step monitor: after every scored step, detect reward failures and write the training memory.

It is a step listener of :class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`: the step's
group records (and kept rollouts) go through the :class:`~harnessrl.detection.failure_detector.FailureDetector`;
the groups, with the failures each task showed, go to the training memory; each failure, with its
evidence, goes to the memory and to ``events.jsonl``; the counts and the seconds spent go to the
step's metrics (``failures/*``, ``time/detectors``, ``time/memory``). Only the main process does this.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from harnessrl.data.schema import prompt_text
from harnessrl.detection.config import DetectorConfig
from harnessrl.detection.failure_detector import FailureDetector
from harnessrl.records.failures import Failure
from harnessrl.records.steps import StepRecord

__all__ = ["StepMonitor"]

logger = logging.getLogger(__name__)


class StepMonitor:
    """Detectors, memory and failure events for every step.

    Args:
        trainer: the HarnessGRPOTrainer (its harness, recorder, judge and metrics are used).
        config: detector thresholds.
        memory: a :class:`~harnessrl.memory.store.TrainingMemory`, or None to keep no memory.
        run_dir: where failure events are written (None: nowhere).
        regrade: a second, uncached judge call on rollouts (the judge-disagreement check, every
            ``config.regrade_every`` steps); None: that check is off.
    """

    def __init__(self, trainer, config: DetectorConfig, memory=None, run_dir=None, regrade=None):
        self.trainer = trainer
        self.memory = memory
        self.run_dir = run_dir
        self.failures: list[Failure] = []
        harness = trainer.harness
        # the reference answer's reward reaches the detectors in each GroupRecord (the trainer grades it)
        self.detector = FailureDetector(
            config,
            rubric_for=lambda t, v: harness.rubrics.criteria_at(t, v),
            regrade=regrade,
            hints=harness.failure_hints(),
        )
        self._task_texts = {tid: prompt_text(t.prompt) for tid, t in harness.tasks.items()}
        self.seconds = {"detectors": 0.0, "memory": 0.0}

    def __call__(self, record: StepRecord) -> None:
        tr = self.trainer
        if not tr.accelerator.is_main_process:
            return
        t0 = time.perf_counter()
        failures = self.detector.observe(record, tr.recorder.rollouts.get(record.step))
        t1 = time.perf_counter()
        by_task: dict[str, list[str]] = defaultdict(list)
        for f in failures:
            by_task[f.task_id].append(f.kind)
        if self.memory is not None:
            try:
                self.memory.add_step(record, by_task, self._task_texts)
                self.memory.add_failures(failures)
            except Exception:  # a memory write failing must not kill a training run
                logger.exception("training memory write failed at step %d; training goes on", record.step)
        t2 = time.perf_counter()
        if self.run_dir is not None:
            for f in failures:
                row = f.model_dump()
                row["failure"] = row.pop("kind")
                self.run_dir.event("failure", **row)
        self.failures.extend(failures)
        self.seconds["detectors"] += t1 - t0
        self.seconds["memory"] += t2 - t1
        tr.record_metrics({**self.detector.metrics(), "time/memory": t2 - t1})
