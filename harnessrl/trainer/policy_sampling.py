"""Which engine samples the policy for the critic's trials and the in-training evaluation.

The training rollouts come from TRL: transformers ``generate``, or the vLLM engine of
``generation.backend: vllm`` (``trainer.vllm_generation``). Trials and evaluation sample the same policy
through the same engine, so what they measure is what training draws: :func:`policy_sampler` is the one
place that chooses. The vLLM engine holds the weights of its last sync, and TRL syncs at the start of a
step's generation; an evolution point or an evaluation runs at a step's end, after the update, so the
sampler first does TRL's own check-and-sync (:func:`push_weights_if_stale`).

Trials and evaluation run on the main process alone. That is sound with DDP (each process holds the whole
model, and a colocated engine of its own or the server's client on the main process), and impossible
when the parameters are sharded over processes (FSDP, DeepSpeed ZeRO-3) or a colocated engine spans
several (vLLM tensor parallelism): a one-process sync or generate would wait forever for the others, so
:func:`check_main_process_sampling` refuses such a run at start-up.
"""

from __future__ import annotations

import functools
from typing import Any

from harnessrl.critic.rollouts import TransformersSampler, VLLMSampler
from harnessrl.critic.trials import PolicySampler
from harnessrl.errors import ConfigError

__all__ = [
    "check_main_process_sampling",
    "engine_sampler",
    "policy_sampler",
    "push_weights_if_stale",
    "sampling_place",
]


def push_weights_if_stale(trainer: Any) -> None:
    """TRL's check-and-sync (``GRPOTrainer`` before each generation): push the policy's weights into vLLM
    when it last loaded them at another step, and note the step, so the next step does not sync again."""
    if trainer.state.global_step != trainer._last_loaded_step:
        trainer.vllm_generation.sync_weights()
        trainer._last_loaded_step = trainer.state.global_step


def check_main_process_sampling(trainer: Any) -> None:
    """Raise :class:`ConfigError` when sampling on the main process alone would hang: training sharded over
    several processes (FSDP, DeepSpeed ZeRO-3), or a colocated vLLM engine that spans several."""
    accelerator = getattr(trainer, "accelerator", None)
    processes = getattr(accelerator, "num_processes", 1)
    if processes <= 1:
        return
    sharded = None
    if getattr(trainer, "is_fsdp_enabled", False):
        sharded = "FSDP"
    elif getattr(trainer, "is_deepspeed_enabled", False):
        plugin = getattr(accelerator.state, "deepspeed_plugin", None)
        if getattr(plugin, "zero_stage", None) == 3:
            sharded = "DeepSpeed ZeRO-3"
    if sharded:
        raise ConfigError(
            f"critic trials and evaluation sample on the main process only, and {sharded} shards the policy over "
            f"{processes} processes: a one-process weight sync or generate would wait forever for the others. "
            "Sharded training with the evolver or evaluation is not supported: train with DDP (accelerate launch "
            "without FSDP or ZeRO-3), or turn them off (evolver.enabled: false; data.validation and data.test: null)"
        )
    generation = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    tp = getattr(generation, "tensor_parallel_size", 1)
    if generation is not None and generation.mode == "colocate" and tp > 1:
        raise ConfigError(
            f"critic trials and evaluation sample on the main process only, and a colocated vLLM engine with "
            f"tensor parallelism spans {tp} processes that must generate together. Set vllm_tensor_parallel_size "
            "to 1, use generation.vllm_mode: server, or turn the evolver and evaluation off"
        )


def engine_sampler(
    trainer: Any, tokenizer: Any, *, seed: int | None, same_draws_each_call: bool = False
) -> VLLMSampler | None:
    """A sampler over the trainer's vLLM engine (its weights pushed first when stale), or None when the
    trainer generates with transformers. Raises :class:`ConfigError` where main-process sampling would hang
    (:func:`check_main_process_sampling`)."""
    check_main_process_sampling(trainer)
    if not getattr(trainer, "use_vllm", False):
        return None
    return VLLMSampler(
        trainer.vllm_generation,
        tokenizer,
        seed=seed,
        prepare=functools.partial(push_weights_if_stale, trainer),
        same_draws_each_call=same_draws_each_call,
    )


def policy_sampler(trainer: Any, tokenizer: Any, *, seed: int | None, batch_size: int = 16) -> PolicySampler:
    """The critic's sampler for a trainer: its vLLM engine's (:func:`engine_sampler`), else transformers
    ``generate`` on the policy (:class:`TransformersSampler`, ``batch_size`` prompts at a time)."""
    sampler = engine_sampler(trainer, tokenizer, seed=seed)
    if sampler is not None:
        return sampler
    autocast = getattr(trainer, "generation_autocast", "generate")  # the precision the rollouts are generated in
    return TransformersSampler(trainer.model, tokenizer, batch_size=batch_size, seed=seed, autocast=autocast)


def sampling_place(trainer: Any, device: str) -> str:
    """Where the critic's trials and the evaluation generate, for the run's ``devices``: ``device``, or the
    trainer's vLLM engine (``"cuda (vllm colocate)"``, ``"vllm server http://..."``)."""
    if not getattr(trainer, "use_vllm", False):
        return device
    generation = trainer.vllm_generation
    if generation.mode == "server":
        url = generation.server_base_url or f"http://{generation.server_host}:{generation.server_port}"
        return f"vllm server {url}"
    return f"{device} (vllm {generation.mode})"
