"""The harness attached to a trainer: the detectors, the training memory and the evolver with its tool server.

:func:`attach_harness` is what ``harnessrl train`` calls on the trainer it builds, and what a TRL script calls
on its own :class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer` (one path, not two; see docs/training.md,
"From your own TRL script"). What it attaches listens to every step's records:

- the **detectors** (:class:`~harnessrl.detection.monitor.StepMonitor`): the reward failures of
  docs/design.md §1 and §4, written to the run's events and the memory;
- the **training memory** (Chroma, in ``<run_dir>/memory``): failures, candidates, trials and outcomes;
- the **evolver** (``evolver`` settings; None: a fixed harness, detectors only): the frozen-policy critic, the
  evolution service and its MCP tool server on localhost, and either the in-process evolution point (every
  ``evolver.every_steps`` steps) or, with ``evolver.mode: external``, a server an external ``harnessrl evolver
  --run-dir`` holds training through.

The harness never sees a gold rubric (docs/design.md §8): pass it tasks without one (``harnessrl train`` strips
them; :func:`harnessrl.trainer.run_tasks.load_run_tasks`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from harnessrl.errors import ConfigError
from harnessrl.records.run_dir import RunDir
from harnessrl.records.trials import TrialResult

__all__ = ["HarnessAttachment", "attach_harness", "check_boundary_wait"]


@dataclass
class HarnessAttachment:
    """What :func:`attach_harness` attached, and its end: :meth:`close` (also at the end of training) stops the
    tool server and closes the memory, keeping its record counts in :attr:`memory_counts`."""

    run: RunDir
    monitor: Any  # harnessrl.detection.monitor.StepMonitor: the detectors
    memory: Any = None  # harnessrl.memory.store.TrainingMemory, or None (memory off)
    server: Any = None  # harnessrl.evolution.mcp_server.ToolServer, or None (no evolver)
    evolution: Any = None  # harnessrl.evolution.point.EvolutionCallback, or None (no evolver)
    memory_counts: dict[str, int] = field(default_factory=dict)
    closed: bool = False

    @property
    def failures(self) -> list:
        """The reward failures the detectors found so far."""
        return self.monitor.failures

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.run.file("tool_server.json").unlink(missing_ok=True)
            self.server = None

    def close(self) -> None:
        """Stop the tool server and close the memory (idempotent)."""
        self.stop_server()
        if self.memory is not None and not self.closed:
            self.memory_counts = self.memory.counts()
            self.memory.close()
        self.closed = True


class _CloseAtTrainEnd(TrainerCallback):
    """A TRL script's attachment ends with its training (``harnessrl train`` closes it itself, after the
    summary has read the memory's counts)."""

    def __init__(self, attachment: HarnessAttachment):
        self.attachment = attachment

    def on_train_end(self, args, state, control, **kwargs):
        self.attachment.close()


def attach_harness(
    trainer,
    run_dir: str | Path | None = None,
    *,
    detectors=None,
    memory: Any = True,
    evolver=None,
    seed: int | None = None,
    console=None,
    close_at_train_end: bool = True,
) -> HarnessAttachment:
    """Attach the detectors, the memory and the evolver to ``trainer`` (a :class:`HarnessGRPOTrainer`).

    Args:
        trainer: the trainer, built with the harness and the rubric reward.
        run_dir: where the run's records go (events.jsonl, steps.jsonl, rollouts/, memory/, tool_server.json);
            default: the trainer's ``args.output_dir``.
        detectors: a :class:`~harnessrl.detection.config.DetectorConfig` (default: its defaults).
        memory: True (the training memory in ``<run_dir>/memory``), False, or a ``MemoryConfig`` (its ``url``
            names a Chroma server).
        evolver: an :class:`~harnessrl.trainer.train_config.EvolverSettings` (``EvolverSettings()``: the
            rule-based evolver, in-process, every 5 steps), or None for a fixed harness (detectors only).
        seed: the critic's sampling seed (default: ``args.seed``).
        console: a ``rich.console.Console`` for the evolution points' lines (default: none).
        close_at_train_end: stop the server and close the memory when training ends.
    """
    from harnessrl.detection.config import DetectorConfig
    from harnessrl.detection.monitor import StepMonitor
    from harnessrl.trainer.train_config import MemoryConfig

    if not hasattr(trainer, "step_listeners") or not hasattr(trainer, "harness"):
        raise ConfigError(
            f"attach_harness needs a harnessrl.HarnessGRPOTrainer (a trl.GRPOTrainer with the harness wired in), "
            f"not a {type(trainer).__name__}: build the trainer with harnessrl.HarnessGRPOTrainer(..., harness=...)"
        )
    if evolver is not None and evolver.enabled is False:  # the deprecated alias (warned when it was set) of None
        evolver = None
    if evolver is not None:
        check_boundary_wait(trainer, evolver)
        # null: the default's probes on one process, none on several; a number above 0 on several is refused
        probes = evolver.probe_tasks(trainer.accelerator.num_processes)
        evolver = evolver.model_copy(update={"audit_probe_tasks": probes})
    main = trainer.accelerator.is_main_process
    run = RunDir(Path(run_dir) if run_dir is not None else Path(trainer.args.output_dir))
    detectors = detectors if detectors is not None else DetectorConfig()
    memory = MemoryConfig() if memory is True else memory or None  # False / None: no memory
    store = None
    if main and memory is not None and memory.enabled:
        from harnessrl.memory.store import TrainingMemory

        store = TrainingMemory(run.path, url=memory.url)
    if trainer.recorder.run_dir is None:  # a trainer built without a run directory keeps its rollouts in it
        trainer.recorder.attach(run.path)
    if evolver is not None:
        # an evolution point handles the failures of every step since the last one: their rollouts stay kept
        trainer.recorder.keep_steps = max(trainer.recorder.keep_steps, evolver.every_steps)
    monitor = StepMonitor(trainer, detectors, store, run if main else None, regrade=_second_opinion(trainer))
    trainer.step_listeners.append(monitor)
    attachment = HarnessAttachment(run=run, monitor=monitor, memory=store)
    if main and evolver is not None:
        seed = trainer.args.seed if seed is None else seed
        attachment.server, attachment.evolution = _start_evolver(
            evolver, trainer, store, run, monitor, seed=seed, eps=detectors.eps
        )
        attachment.evolution.console = console
    if close_at_train_end:
        trainer.add_callback(_CloseAtTrainEnd(attachment))
    return attachment


def check_boundary_wait(trainer, evolver) -> None:
    """Raise :class:`ConfigError` when the other processes of a run would wait at an evolution point longer
    than their process group allows: they wait inside a collective (``harnessrl.trainer.step_boundary``), which
    times out after transformers' ``ddp_timeout`` and ends the run. An in-process point lasts up to
    ``evolver.graph.time_budget_s`` (and the trial in flight), an external evolver's hold up to
    ``evolver.hold_s``."""
    if trainer.accelerator.num_processes <= 1:
        return
    external = evolver.mode == "external"
    wait, name = (
        (evolver.hold_s, "evolver.hold_s") if external else (evolver.graph.time_budget_s, "evolver.graph.time_budget_s")
    )
    timeout = getattr(trainer.args, "ddp_timeout", 1800)
    if wait >= timeout:
        raise ConfigError(
            f"{name} is {wait:.0f} s, and with {trainer.accelerator.num_processes} processes the others wait that long "
            f"at the step boundary inside a collective that times out after {timeout} s (ddp_timeout), which would "
            f"end the run: set grpo.extra.ddp_timeout above it (e.g. {int(wait * 2)}), or lower {name}"
        )


def _second_opinion(trainer):
    """The judge-disagreement check's re-grade: the training judge asked again, its cache bypassed, under
    the rubric version each rollout was graded with."""
    from harnessrl.judges.rubric_judge import RubricRequest

    judge, harness = trainer.rubric_reward.judge, trainer.harness

    def regrade(rollouts: list) -> list:
        requests = [
            RubricRequest.for_task(
                harness.tasks[r.task_id], r.completion, harness.rubrics.criteria_at(r.task_id, r.rubric_version)
            )
            for r in rollouts
        ]
        return judge.grade(requests, fresh=True)

    return regrade


class _LockedTrials:
    """Frozen-policy trials that wait for the trainer's policy lock (no weight update mid-trial), and
    whose cost (fresh rollouts, judge requests) goes into the trainer's accounting; with ``max_rollout_share``
    (``evolver.trials.max_rollout_share``) each trial may generate only what that share of the training
    rollouts leaves."""

    def __init__(self, trials, trainer, max_rollout_share: float | None = None):
        self.trials, self.trainer = trials, trainer
        self.max_rollout_share = max_rollout_share

    def probe(self, tasks, *, max_rollouts: int | None = None):
        """The audit's probes (:meth:`FrozenPolicyTrials.probe <harnessrl.critic.trials.FrozenPolicyTrials.probe>`)
        under the policy lock, their cost in the trainer's accounting as a trial's (a refused probe's too)."""
        t0 = time.perf_counter()
        with self.trainer.policy_lock:
            try:
                probe = self.trials.probe(tasks, max_rollouts=max_rollouts)
            finally:
                self.trainer.timings["trials"] += time.perf_counter() - t0
        self.trainer.accounting["rollouts/trial"] += probe.cost.rollouts
        self.trainer.accounting["judge/calls_trial"] += probe.cost.judge_calls
        return probe

    def pending_tests(self):
        """The wrapped trials' pending tests (a resumed run restores them); none when they keep none."""
        from harnessrl.evolution.service import PendingTests

        return self.trials.pending_tests() if isinstance(self.trials, PendingTests) else {}

    def restore_pending(self, tests) -> None:
        from harnessrl.evolution.service import PendingTests

        if isinstance(self.trials, PendingTests):
            self.trials.restore_pending(tests)

    def probe_allowance(self) -> int | None:
        """The fresh rollouts the audit's probes before step 1 may spend: ``max_rollout_share`` of the training
        rollouts the run plans (its steps times the rows a step generates), not of those generated so far (none yet),
        less what trials spent; the trials after it then wait until training's rollouts catch up (None: no bound)."""
        if self.max_rollout_share is None:
            return None
        args = self.trainer.args
        planned = args.max_steps * args.per_device_train_batch_size * self.trainer.accelerator.num_processes
        return max(0, int(self.max_rollout_share * planned) - int(self.trainer.accounting["rollouts/trial"]))

    def run(self, *args, **kwargs) -> TrialResult:
        allowance = self.allowance()
        if allowance is not None:
            kwargs["max_rollouts"] = allowance
        t0 = time.perf_counter()
        with self.trainer.policy_lock:
            try:
                result = self.trials.run(*args, **kwargs)
            finally:
                self.trainer.timings["trials"] += time.perf_counter() - t0
        self.trainer.accounting["rollouts/trial"] += result.cost.rollouts
        self.trainer.accounting["judge/calls_trial"] += result.cost.judge_calls
        boundary = getattr(self.trainer, "boundary", None)
        if boundary is not None:  # several processes: every one receives the trial's result at the boundary
            boundary.note_trial(result)
        return result

    def allowance(self) -> int | None:
        """The fresh rollouts the next trial may spend under ``max_rollout_share`` (None: no such bound): that
        share of the training rollouts generated so far, less what the run's trials already spent."""
        if self.max_rollout_share is None:
            return None
        spent = self.trainer.accounting
        return max(0, int(self.max_rollout_share * spent["rollouts/generated"]) - int(spent["rollouts/trial"]))


def _start_evolver(settings, trainer, memory, run: RunDir, monitor, *, seed: int, eps: float):
    """Trials, the evolution service, its MCP tool server and the evolution-point callback."""
    from harnessrl.critic.signal import AdvantageSpec
    from harnessrl.critic.trials import FrozenPolicyTrials
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.evolution.point import EvolutionCallback, write_server_file
    from harnessrl.evolution.probation import ProbationRule
    from harnessrl.evolution.service import EvolutionService
    from harnessrl.trainer.policy_sampling import policy_sampler

    harness, recorder, judge = trainer.harness, trainer.recorder, trainer.rubric_reward.judge
    # the trials sample through the engine training generates with (vLLM: its weights pushed first when stale)
    sampler = policy_sampler(trainer, trainer.processing_class, seed=seed)
    # the critic measures candidates on the advantages as this trainer computes them
    advantage = AdvantageSpec.from_args(trainer.args, trainer.num_generations, eps)
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, settings.trials, advantage)
    service = EvolutionService(
        harness,
        recorder,
        memory,
        _LockedTrials(trials, trainer, settings.trials.max_rollout_share),
        run,
        failures=lambda: monitor.failures,
        step=lambda: trainer.state.global_step,
        max_trial_age_steps=settings.max_trial_age_steps,
        audit_rubrics=settings.audit_rubrics,
        first_evidence=settings.first_evidence,
        evidence_draws=settings.evidence_draws,
        max_hold_s=settings.hold_s,  # the run sets how long an evolver may hold training, not the evolver
        probation=ProbationRule.of(settings.trials),
        # the reference witness grades with the run's own judge (docs/design.md §4, "The reference as witness")
        reference_grader=lambda task, criteria: judge.grade_one(task, task.reference_answer, criteria),
    )
    # training is about to run: a hold asked for from now on waits for the first step boundary
    service.training = True
    trainer.step_listeners.append(service.observe_step)  # committed updates' outcomes, into the memory
    server = ToolServer(service)
    url, token = server.start()
    write_server_file(run, url, token)
    callback = EvolutionCallback(service, url, token, settings, failures=lambda: monitor.failures, run_dir=run)
    callback.trainer = trainer
    trainer.add_callback(callback)
    return server, callback
