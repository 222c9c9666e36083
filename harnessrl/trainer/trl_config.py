"""What TRL is given for a run: the ``trl.GRPOConfig`` (one generation batch per optimisation step), the
``peft.LoraConfig``, the device, and the processes the step's rows are split over.

Everything here is checked before anything is loaded or written: a device the machine lacks, a ``grpo.extra`` that
sets what HarnessRL sets itself, and a training pool too small to fill one step are refused with how to fix them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from harnessrl.errors import ConfigError

if TYPE_CHECKING:
    from harnessrl.judges.config import JudgeConfig
    from harnessrl.trainer.train_config import TrainConfig

__all__ = [
    "build_grpo_config",
    "check_pool_fills_a_step",
    "is_main_process",
    "judge_on_device",
    "num_processes",
    "peft_config",
    "resolve_device",
]


def judge_on_device(judge: JudgeConfig, device: str) -> JudgeConfig:
    """``judge`` on the run's device, unless it names its own."""
    return judge if judge.device is not None else judge.model_copy(update={"device": device})


def resolve_device(config: TrainConfig) -> str:
    """The run's device: ``auto`` is cuda when torch sees a GPU, else cpu; cuda asked for without one is refused."""
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
    kwargs: dict[str, JsonValue] = dict(  # trl.GRPOConfig's fields, each a JSON value (as grpo.extra adds them)
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
            kwargs["vllm_server_timeout"] = config.generation.vllm_server_timeout_s
        else:
            kwargs["vllm_gpu_memory_utilization"] = config.generation.vllm_gpu_memory_utilization
    gen = config.generation
    if gen.cache == "static":
        kwargs["cache_implementation"] = "static"
    if gen.compile:
        if device != "cuda":
            raise ConfigError(
                f"generation.compile is for GPUs (transformers compiles the decode step on CUDA only), and this run "
                f"is on {device}: drop it, or train on a GPU"
            )
        kwargs["pad_to_multiple_of"] = 64  # bounds the shapes the compiled decode step sees
    clash = set(g.extra) & set(kwargs)
    if clash:
        raise ConfigError(f"grpo.extra sets {sorted(clash)}, which HarnessRL sets itself: use the grpo.* settings")
    kwargs.update(g.extra)
    try:
        return GRPOConfig(**kwargs)
    except TypeError as e:
        raise ConfigError(f"grpo.extra: {e} (see trl.GRPOConfig for valid fields)") from e


def peft_config(config: TrainConfig):
    """The ``peft.LoraConfig`` of ``config.lora`` (None: full fine-tuning); TRL wraps the model with it."""
    if config.lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError as e:
        raise ConfigError("lora is set but peft is not installed: pip install peft (or drop the lora section)") from e
    lo = config.lora
    return LoraConfig(
        r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules, task_type="CAUSAL_LM"
    )


def num_processes() -> int:
    """Processes in this run (``accelerate launch`` / ``torchrun`` set WORLD_SIZE): the step's rows are split
    over them."""
    import os

    return max(1, int(os.environ.get("WORLD_SIZE", "1")))


def is_main_process() -> bool:
    """Rank 0 writes the run directory (under ``accelerate launch`` every process runs this code)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def check_pool_fills_a_step(config: TrainConfig, args, pool: int) -> None:
    """A step draws its tasks from the training pool without repeating one (TRL's sampler: a generation batch of
    ``generation_batch_size / num_generations`` distinct prompts, dropping a batch it cannot fill), so a pool
    smaller than that trains no step at all: refused before anything is written, naming the pool's size."""
    distinct = args.generation_batch_size // args.num_generations
    if pool >= distinct:
        return
    g, d = config.grpo, config.data
    need = f"grpo.tasks_per_step {g.tasks_per_step}"
    if distinct != g.tasks_per_step:
        need += f" x grpo.gradient_accumulation_steps {g.gradient_accumulation_steps}"
    per_task = distinct / g.tasks_per_step  # distinct tasks a step needs per task of tasks_per_step
    fix = f"set grpo.tasks_per_step to at most {int(pool // per_task)}, or " if pool >= per_task else ""
    limit = f" (data.tasks_per_domain {d.tasks_per_domain} keeps that many a domain)" if d.tasks_per_domain else ""
    more = "raise data.tasks_per_domain or add training tasks" if d.tasks_per_domain else "add training tasks"
    raise ConfigError(
        f"the training pool holds {pool} task(s){limit}, and a step needs {distinct} distinct ones ({need}): "
        f"no step could be trained. Fix: {fix}{more}"
    )
