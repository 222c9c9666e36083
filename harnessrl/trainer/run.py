"""One training run from a :class:`TrainConfig`: data, model, judge, harness, TRL, evaluation, report.

``train`` validates everything (data, config, model) before the first step, writes the resolved
config into the run directory, and resumes from the directory's last checkpoint and saved harness
when asked to.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from harnessrl.data import Task, bundled_path, load_tasks
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces.harness import Harness
from harnessrl.trainer.run_dir import RunDir
from harnessrl.trainer.train_config import TrainConfig

__all__ = ["RunSummary", "build_grpo_config", "evaluate_run", "load_run_tasks", "train"]

logger = logging.getLogger(__name__)


@dataclass
class RunSummary:
    run_dir: Path
    steps: int
    wall_seconds: float
    timings: dict[str, float]
    eval_before: float | None
    eval_after: float | None
    best: dict | None
    reward_first: float | None
    reward_last: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def _first_per_domain(tasks: list[Task], n: int | None) -> list[Task]:
    if n is None:
        return tasks
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        if seen.get(t.domain, 0) < n:
            out.append(t)
            seen[t.domain] = seen.get(t.domain, 0) + 1
    return out


def load_run_tasks(config: TrainConfig) -> tuple[list[Task], list[Task]]:
    """Train and held-out tasks, validated; the two sets must not share a task id."""
    d = config.data
    train_path = bundled_path("train") if d.train == "bundled" else Path(d.train)
    train = load_tasks(train_path, d.format, default_domain=d.domain)
    heldout: list[Task] = []
    if d.heldout:
        held_path = bundled_path("heldout") if d.heldout == "bundled" else Path(d.heldout)
        heldout = load_tasks(held_path, d.format, default_domain=d.domain)
    shared = {t.id for t in train} & {t.id for t in heldout}
    if shared:
        raise HarnessRLError(
            f"{len(shared)} task id(s) are both in the training and the held-out data (e.g. {sorted(shared)[:3]}): "
            "held-out tasks must be split off before training"
        )
    return _first_per_domain(train, d.tasks_per_domain), _first_per_domain(heldout, d.heldout_per_domain)


def _device(config: TrainConfig) -> str:
    import torch

    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' asked for, but torch sees no GPU: set device to 'cpu' or 'auto'")
    return config.device


def build_grpo_config(config: TrainConfig, output_dir: Path, device: str, num_processes: int = 1):
    """The ``trl.GRPOConfig`` for a run (one generation batch per optimisation step)."""
    from trl import GRPOConfig

    g = config.grpo
    rows = g.tasks_per_step * g.num_generations
    if rows % num_processes:
        raise ConfigError(f"tasks_per_step x num_generations = {rows} must divide over {num_processes} processes")
    bf16 = config.bf16 if config.bf16 is not None else device == "cuda"
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=rows // num_processes,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        learning_rate=g.learning_rate,
        max_steps=g.max_steps,
        beta=g.beta,
        temperature=g.temperature,
        top_p=g.top_p,
        loss_type=g.loss_type,
        gradient_checkpointing=g.gradient_checkpointing,
        logging_steps=g.logging_steps,
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        seed=config.seed,
        report_to=config.report_to or "none",
        use_cpu=device == "cpu",
        bf16=bf16,
        disable_tqdm=True,
        remove_unused_columns=False,
        log_completions=False,
    )
    if config.generation.backend == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("generation.backend is 'vllm' but vLLM is not installed: pip install 'harnessrl[vllm]'")
        kwargs.update(use_vllm=True, vllm_mode=config.generation.vllm_mode)
        if config.generation.vllm_mode == "server":
            kwargs["vllm_server_base_url"] = config.generation.vllm_server_base_url
        else:
            kwargs["vllm_gpu_memory_utilization"] = config.generation.vllm_gpu_memory_utilization
    clash = set(g.extra) & set(kwargs)
    if clash:
        raise ConfigError(f"grpo.extra sets {sorted(clash)}, which HarnessRL sets itself: use the grpo.* settings")
    kwargs.update(g.extra)
    try:
        return GRPOConfig(**kwargs)
    except TypeError as e:
        raise ConfigError(f"grpo.extra: {e} (see trl.GRPOConfig for valid fields)") from e


class _LockedTrials:
    """Frozen-policy trials that wait for the trainer's policy lock (no weight update mid-trial)."""

    def __init__(self, trials, lock):
        self.trials, self.lock = trials, lock

    def run(self, *args, **kwargs):
        with self.lock:
            return self.trials.run(*args, **kwargs)


def _start_evolver(config, trainer, harness, recorder, judge, tokenizer, memory, run, monitor):
    """Trials, the evolution service, its MCP tool server and the evolution-point callback."""
    from harnessrl.trainer.evolution import EvolutionService
    from harnessrl.trainer.evolver import EvolutionCallback, write_server_file
    from harnessrl.trainer.tool_server import ToolServer
    from harnessrl.trainer.trials import FrozenPolicyTrials, TransformersSampler

    settings = config.evolver
    sampler = TransformersSampler(trainer.model, tokenizer, seed=config.seed)
    trials = FrozenPolicyTrials(harness, recorder, judge, sampler, settings.trials)
    service = EvolutionService(
        harness,
        recorder,
        memory,
        _LockedTrials(trials, trainer.policy_lock),
        run,
        failures=lambda: monitor.failures,
        step=lambda: trainer.state.global_step,
    )
    server = ToolServer(service)
    url, token = server.start()
    write_server_file(run, url, token)
    callback = EvolutionCallback(service, url, token, settings, failures=lambda: monitor.failures, run_dir=run)
    callback.trainer = trainer
    trainer.add_callback(callback)
    return server, callback


def _is_main_process() -> bool:
    """Rank 0 writes the run directory (under ``accelerate launch`` every process runs this code)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def _last_checkpoint(run: RunDir) -> str | None:
    cks = sorted(run.checkpoints.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return str(cks[-1]) if cks else None


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    trainer_hook=None,
) -> RunSummary:
    """Run training end to end. ``trainer_hook(trainer, run_dir)`` may attach more (the evolver does)."""
    from datasets import Dataset
    from transformers import PrinterCallback

    from harnessrl.trainer.callbacks import EvalCallback, MetricsCallback, ProgressCallback
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
    from harnessrl.trainer.judges import build_judge
    from harnessrl.trainer.models import load_causal_lm
    from harnessrl.trainer.monitor import StepMonitor
    from harnessrl.trainer.records import Recorder
    from harnessrl.trainer.rewards import RubricReward

    console = console or Console()
    t_start = time.perf_counter()
    # everything that can be refused is checked before anything on disk changes
    train_tasks, heldout = load_run_tasks(config)
    device = _device(config)
    run_path = Path(config.run_dir)
    if run_path.exists() and any(run_path.iterdir()) and not (resume or overwrite):
        raise HarnessRLError(
            f"{run_path} already holds a run: pass --resume to continue it or --overwrite to start again "
            "(or choose another run_dir)"
        )
    if resume and overwrite:
        raise HarnessRLError("--resume and --overwrite contradict each other: choose one")
    build_grpo_config(config, run_path / "checkpoints", device)
    main = _is_main_process()
    if overwrite and run_path.exists() and main:
        shutil.rmtree(run_path)
    run = RunDir(run_path)
    if main:
        run.write_config(config)

    with console.status(f"loading {config.model} on {device}..."):
        model, tokenizer = load_causal_lm(config.model, device=device)
        model.train()
    with console.status(f"loading the {config.judge.backend} judge..."):
        judge = build_judge(config.judge)
        eval_judge = build_judge(config.eval_judge) if heldout else None

    if resume and run.harness.exists():
        harness = Harness.load(run.harness, train_tasks)
        console.log(f"resumed harness versions {harness.versions}")
    else:
        harness = Harness(
            train_tasks,
            sampling_floor=config.harness.sampling_floor,
            seed=config.seed,
            temperature=config.grpo.temperature,
        )
        if main:
            harness.save(run.harness)
    recorder = Recorder(run.path, keep_steps=config.harness.keep_rollout_steps)
    if resume:
        recorder.load_rollouts()
    reward = RubricReward(judge, harness)

    dataset = Dataset.from_list([{"prompt": t.messages(), "task_id": t.id} for t in train_tasks])
    callbacks: list = [MetricsCallback(run), ProgressCallback(console)]
    eval_cb = None
    if heldout:
        eval_cb = EvalCallback(
            run,
            heldout,
            eval_judge,
            every_steps=config.eval.every_steps,
            before_training=config.eval.before_training,
            max_new_tokens=config.eval.max_new_tokens or config.grpo.max_completion_length,
            batch_size=config.eval.batch_size,
            console=console,
        )
        callbacks.append(eval_cb)
    trainer = HarnessGRPOTrainer(
        model=model,
        args=build_grpo_config(config, run.checkpoints, device),
        train_dataset=dataset,
        processing_class=tokenizer,
        harness=harness,
        rubric_reward=reward,
        recorder=recorder,
        zero_std_eps=config.harness.detectors.eps,
        callbacks=callbacks,
    )
    trainer.remove_callback(PrinterCallback)
    if eval_cb is not None:
        eval_cb.trainer = trainer
    memory = None
    if main and config.harness.memory.enabled:
        from harnessrl.memory.store import TrainingMemory

        with console.status("opening the training memory..."):
            memory = TrainingMemory(run.path, url=config.harness.memory.url)
    monitor = StepMonitor(trainer, config.harness.detectors, memory, run if main else None)
    trainer.step_listeners.append(monitor)
    server = evolution_cb = None
    if main and config.evolver.enabled:
        server, evolution_cb = _start_evolver(
            config, trainer, harness, recorder, judge, tokenizer, memory, run, monitor
        )
        evolution_cb.console = console
        console.log(f"harness tools served at {server.url} (evolver: {config.evolver.backend}, {config.evolver.mode})")
    if trainer_hook is not None:
        trainer_hook(trainer, run)

    if main:
        run.event(
            "run_start",
            step=0,
            model=config.model,
            device=device,
            train_tasks=len(train_tasks),
            heldout_tasks=len(heldout),
            judge=judge.name,
            resume=resume,
        )
    checkpoint = _last_checkpoint(run) if resume else None
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        if server is not None:
            server.stop()
            run.file("tool_server.json").unlink(missing_ok=True)
    trainer.save_model(str(run.checkpoints / "final"))
    memory_counts = memory.counts() if memory is not None else {}
    if memory is not None:
        memory.close()
    if not main:
        return RunSummary(
            run.path, trainer.state.global_step, time.perf_counter() - t_start, {}, None, None, None, None, None
        )
    harness.save(run.harness)

    wall = time.perf_counter() - t_start
    metrics = run.read("metrics.jsonl")
    rewards = [m["reward"] for m in metrics if m.get("reward") is not None]
    evals = eval_cb.results if eval_cb else []
    summary = RunSummary(
        run_dir=run.path,
        steps=trainer.state.global_step,
        wall_seconds=wall,
        timings=dict(trainer.timings),
        eval_before=next((e.overall for e in evals if e.step == 0), None),
        eval_after=evals[-1].overall if evals else None,
        best=eval_cb.best if eval_cb else None,
        reward_first=rewards[0] if rewards else None,
        reward_last=rewards[-1] if rewards else None,
        extra={
            "failures": dict(Counter(f.kind for f in monitor.failures)),
            "monitor_seconds": monitor.seconds,
            "memory_records": memory_counts,
            "evolver": {
                "points": evolution_cb.points if evolution_cb else 0,
                "seconds": evolution_cb.seconds if evolution_cb else 0.0,
                **(evolution_cb.service.metrics() if evolution_cb else {}),
            },
        },
    )
    run.write_json(
        "summary.json",
        {k: (str(v) if isinstance(v, Path) else v) for k, v in summary.__dict__.items()},
    )
    run.event("run_end", step=summary.steps, wall_seconds=wall)
    return summary


def evaluate_run(run_dir: str | Path, checkpoint: str | None = None) -> dict[str, Any]:
    """Evaluate a run's checkpoint on its held-out split with its eval judge; appends to eval.jsonl."""
    from harnessrl.trainer.evaluation import evaluate_policy
    from harnessrl.trainer.judges import build_judge
    from harnessrl.trainer.models import load_causal_lm
    from harnessrl.trainer.train_config import load_train_config

    run = RunDir(run_dir, create=False)
    if not run.config.exists():
        raise HarnessRLError(f"{run.path} has no config.yaml: is it a run directory made by `harnessrl train`?")
    config = load_train_config(run.config)
    _, heldout = load_run_tasks(config)
    if not heldout:
        raise HarnessRLError(f"{run.path}: the run has no held-out data (data.heldout is null)")
    if checkpoint is None:
        checkpoint = "best" if (run.checkpoints / "best").exists() else "final"
    # a name under the run's checkpoints/ first: a stray ./best or ./final must not be picked up instead
    path = run.checkpoints / checkpoint
    if not path.exists():
        path = Path(checkpoint)
    if not path.exists():
        found = sorted(p.name for p in run.checkpoints.iterdir()) if run.checkpoints.exists() else []
        raise HarnessRLError(f"no checkpoint {checkpoint!r} in {run.checkpoints}; found: {found or 'none'}")
    device = _device(config)
    model, tokenizer = load_causal_lm(str(path), device=device)
    step = int(path.name.split("-")[1]) if path.name.startswith("checkpoint-") else -1
    result = evaluate_policy(
        model,
        tokenizer,
        heldout,
        build_judge(config.eval_judge),
        step=step,
        max_new_tokens=config.eval.max_new_tokens or config.grpo.max_completion_length,
        batch_size=config.eval.batch_size,
    )
    run.append("eval.jsonl", {**result.model_dump(), "checkpoint": str(path), "source": "harnessrl eval"})
    return {"checkpoint": str(path), "result": result}
