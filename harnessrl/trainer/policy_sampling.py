"""Which engine samples the policy for the critic's trials and the in-training evaluation.

The training rollouts come from TRL: transformers ``generate``, or the vLLM engine of
``generation.backend: vllm`` (``trainer.vllm_generation``). Trials and evaluation sample the same policy
through the same engine, so what they measure is what training draws: :func:`policy_sampler` is the one
place that chooses. The vLLM engine holds the weights of its last sync, and TRL syncs at the start of a
step's generation; an evolution point or an evaluation runs at a step's end, after the update, so the
sampler first does TRL's own check-and-sync (:func:`push_weights_if_stale`).

Trials and evaluation are decided on the main process. With several processes
(``accelerate launch``: DDP, FSDP, DeepSpeed ZeRO-3) every process takes part in their generation at the
step boundary (:mod:`harnessrl.trainer.step_boundary`): with transformers each generates a share
(:class:`~harnessrl.trainer.step_boundary.CollectiveSampler`, under TRL's gathered parameters); with vLLM every
process takes part in the weight sync (under sharding it gathers the parameters: a collective) and the
main process's engine (colocate) or the server's client generates. What truly cannot work is refused at
start-up by :func:`check_main_process_sampling`: a colocated vLLM engine with tensor parallelism spans
several processes that must all generate each request, and the trials send theirs from the main process.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from harnessrl.critic.rollouts import TransformersSampler, VLLMSampler
from harnessrl.critic.trials import PolicySampler
from harnessrl.errors import ConfigError
from harnessrl.trainer.step_boundary import CollectiveSampler

if TYPE_CHECKING:
    from harnessrl.trainer.evaluation import EvalDecoding

__all__ = [
    "check_main_process_sampling",
    "engine_sampler",
    "evaluation_sampler",
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
    """Raise :class:`ConfigError` for the combinations whose trials and evaluation cannot sample with several
    processes: a colocated vLLM engine with tensor parallelism, which spans several processes that must all
    generate each request (TRL gathers the prompts of its group), while a trial's requests come from the main
    process alone; and DeepSpeed ZeRO-3 with TRL's reference-model sync, a collective at the step boundary
    (:mod:`harnessrl.trainer.step_boundary`). DDP, FSDP and ZeRO-3 otherwise generate there on every process."""
    accelerator = getattr(trainer, "accelerator", None)
    if getattr(accelerator, "num_processes", 1) <= 1:
        return
    plugin = getattr(getattr(accelerator, "state", None), "deepspeed_plugin", None)
    if getattr(plugin, "zero_stage", None) == 3 and getattr(getattr(trainer, "args", None), "sync_ref_model", False):
        raise ConfigError(
            "under DeepSpeed ZeRO-3 TRL's reference-model sync (sync_ref_model) gathers the parameters on every "
            "process at the end of a step, where the other processes also serve the main process's trials and "
            "evaluation (harnessrl.trainer.step_boundary): the two would meet each other's collectives. Set "
            "grpo.extra.sync_ref_model: false, train with FSDP, or turn the evolver and evaluation off"
        )
    generation = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    tp = getattr(generation, "tensor_parallel_size", 1)
    if generation is not None and generation.mode == "colocate" and tp > 1:
        raise ConfigError(
            f"critic trials and evaluation send their requests from the main process, and a colocated vLLM engine "
            f"with tensor parallelism spans {tp} processes that must all generate each request together. Set "
            "vllm_tensor_parallel_size to 1 (grpo.extra), use generation.vllm_mode: server (the server's own "
            "tensor parallelism is fine), or turn the evolver and evaluation off"
        )


def _sync_every_process(boundary: Any) -> None:
    boundary.request("sync_vllm")


def engine_sampler(
    trainer: Any, tokenizer: Any, *, seed: int | None, same_draws_each_call: bool = False
) -> VLLMSampler | None:
    """A sampler over the trainer's vLLM engine (its weights pushed first when stale, by every process when
    there are several), or None when the trainer generates with transformers. Raises :class:`ConfigError`
    where it cannot sample (:func:`check_main_process_sampling`)."""
    check_main_process_sampling(trainer)
    if not getattr(trainer, "use_vllm", False):
        return None
    boundary = getattr(trainer, "boundary", None)
    prepare = (
        functools.partial(push_weights_if_stale, trainer)
        if boundary is None
        else functools.partial(_sync_every_process, boundary)
    )
    return VLLMSampler(
        trainer.vllm_generation, tokenizer, seed=seed, prepare=prepare, same_draws_each_call=same_draws_each_call
    )


def evaluation_sampler(trainer: Any, tokenizer: Any, decoding: EvalDecoding) -> PolicySampler | None:
    """The in-training evaluation's sampler: the vLLM engine's (:func:`engine_sampler`, the same draws at every
    checkpoint), every process's share with several (:class:`CollectiveSampler`, the draws one process
    makes), or None: transformers ``generate`` on the policy, in :func:`~harnessrl.trainer.evaluation.evaluate_policy`.
    ``decoding``: the run's :func:`~harnessrl.trainer.evaluation.eval_decoding`."""
    sampler = engine_sampler(trainer, tokenizer, seed=decoding["seed"], same_draws_each_call=True)
    boundary = getattr(trainer, "boundary", None)
    if sampler is not None or boundary is None:
        return sampler
    return CollectiveSampler(
        boundary,
        seed=decoding["seed"],
        batch_size=decoding["batch_size"] * decoding["completions"],  # as evaluate_policy batches one process
        autocast=decoding["autocast"],
        same_draws_each_call=True,
    )


def policy_sampler(trainer: Any, tokenizer: Any, *, seed: int | None, batch_size: int = 16) -> PolicySampler:
    """The critic's sampler for a trainer: its vLLM engine's (:func:`engine_sampler`), else transformers
    ``generate`` on the policy, ``batch_size`` prompts at a time: on this process (:class:`TransformersSampler`)
    or, with several, shared out over all of them (:class:`CollectiveSampler`)."""
    sampler = engine_sampler(trainer, tokenizer, seed=seed)
    if sampler is not None:
        return sampler
    autocast = getattr(trainer, "generation_autocast", "generate")  # the precision the rollouts are generated in
    boundary = getattr(trainer, "boundary", None)
    if boundary is not None:
        return CollectiveSampler(boundary, seed=seed, batch_size=batch_size, autocast=autocast)
    return TransformersSampler(trainer.model, tokenizer, batch_size=batch_size, seed=seed, autocast=autocast)


def sampling_place(trainer: Any, device: str) -> str:
    """Where the critic's trials and the evaluation generate, for the run's ``devices``: ``device`` (``"cpu x2
    processes"`` with several), or the trainer's vLLM engine (``"cuda (vllm colocate)"``, ``"vllm server
    http://..."``)."""
    if not getattr(trainer, "use_vllm", False):
        processes = getattr(getattr(trainer, "accelerator", None), "num_processes", 1)
        return device if processes <= 1 else f"{device} x{processes} processes"
    generation = trainer.vllm_generation
    if generation.mode == "server":
        url = generation.server_base_url or f"http://{generation.server_host}:{generation.server_port}"
        return f"vllm server {url}"
    return f"{device} (vllm {generation.mode})"
