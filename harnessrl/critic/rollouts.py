"""The frozen policy's sampler: fresh rollouts for the critic's trials, without moving the weights or the run's RNG.

A guidance or sampling trial needs new completions of the *current* policy; anything with the
``sample`` method of :class:`~harnessrl.critic.protocols.PolicySampler` works (tests pass a scripted one).
A training run uses :class:`TransformersSampler` (transformers ``generate`` on the policy; it alone
imports torch, when it samples), or :class:`VLLMSampler` when it generates through vLLM
(``generation.backend: vllm``): the same engine as the training rollouts, whose weights it brings up to
date first. ``harnessrl.trainer.policy_sampling`` picks one for a trainer.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any

from harnessrl.data.schema import prompt_text
from harnessrl.models import generation_precision

__all__ = ["TransformersSampler", "VLLMSampler", "chat_prompts"]


def chat_prompts(tokenizer: Any, prompts: list[list[dict[str, str]]]) -> tuple[list[str], bool]:
    """The texts a policy continues for chat ``prompts``, and whether tokenizing them adds special tokens:
    the tokenizer's chat template with the generation prompt (its special tokens already in the text), or,
    for a tokenizer without one, the plain prompt text (special tokens added when tokenized). The critic's
    trials and the evaluation prompt the policy this way, as TRL prompts it for the training rollouts."""
    if getattr(tokenizer, "chat_template", None):
        return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts], False
    return [prompt_text(p) for p in prompts], True


class TransformersSampler:
    """A :class:`~harnessrl.critic.protocols.PolicySampler` over a transformers causal LM and its tokenizer.

    Prompts go through the tokenizer's chat template (:func:`chat_prompts`), are batched by length (less
    padding; the texts come back in the prompts' order), padded on the left and sampled
    (``do_sample=True``; temperature 0: greedy) under ``torch.inference_mode`` (or ``no_grad``) with the model in eval
    mode; the model's training mode is restored afterwards and its weights never change. The global
    torch RNG is forked, so a trial does not shift the training run's random stream, and each batch is
    seeded (``seed``, a call counter and the batch's number: :meth:`batch_seed`) so a trial is reproducible
    and draws alike however many processes share its batches out.

    Args:
        model: the policy (unwrapped: not a DDP/accelerate wrapper).
        tokenizer: its tokenizer (a pad token is taken from eos when it has none).
        batch_size: prompts generated together.
        seed: base seed of the sampling RNG; None leaves the (forked) RNG unseeded.
        generation_kwargs: extra ``generate`` arguments when sampling; the default matches TRL's GRPO
            sampling (``top_k=0``, ``top_p=1.0``: plain temperature sampling).
        autocast: how a mixed-precision run's policy samples (``generation.autocast``, as the trainer's
            rollouts; see :func:`harnessrl.models.generation_precision`).
        inference_mode: sample under ``torch.inference_mode`` (default) or, when False, ``torch.no_grad``, as
            TRL generates: parameters sharded by FSDP2 are gathered into buffers that training writes to
            later, and a buffer first made under inference mode cannot be written outside it.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 16,
        seed: int | None = 0,
        generation_kwargs: dict[str, Any] | None = None,
        autocast: str = "generate",
        inference_mode: bool = True,
    ):
        self.model = model
        self.autocast = autocast
        self.inference_mode = inference_mode
        self.tokenizer = tokenizer
        self.batch_size = max(1, batch_size)
        self.seed = seed
        self.generation_kwargs = {"top_k": 0, "top_p": 1.0} if generation_kwargs is None else dict(generation_kwargs)
        self.calls = 0

    def sample(
        self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, **settings: float
    ) -> list[str]:
        """``settings``: further ``generate`` arguments for this call (``top_p``, ``top_k``, ...)."""
        if not prompts:
            return []
        texts, special, batches = self.plan(prompts)
        call = self.calls
        self.calls += 1
        done = self.run_batches(texts, special, list(enumerate(batches)), call, temperature, max_new_tokens, settings)
        return [done[i] for i in range(len(texts))]

    def plan(self, prompts: list[list[dict[str, str]]]) -> tuple[list[str], bool, list[list[int]]]:
        """The prompts' texts (:func:`chat_prompts`), whether tokenizing them adds special tokens, and the
        batches they are generated in: indices of similar length, ``batch_size`` at a time, copies of a
        prompt together. The plan depends on the prompts and ``batch_size`` alone, so processes that share
        the batches out (:class:`harnessrl.trainer.step_boundary.CollectiveSampler`) each get the same."""
        texts, special = chat_prompts(self.tokenizer, prompts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # stable: copies of a prompt stay together
        return texts, special, [order[s : s + self.batch_size] for s in range(0, len(order), self.batch_size)]

    def batch_seed(self, call: int, batch: int) -> int | None:
        """The seed of batch ``batch`` of call ``call``: each batch is seeded on its own, so its draws do not
        depend on which batches were generated before it, nor on which process generates it (batch 0 takes
        ``seed + call``, as a call of one batch always did)."""
        return None if self.seed is None else self.seed + call + _BATCH_SEED_STRIDE * batch

    def run_batches(
        self,
        texts: list[str],
        special: bool,
        batches: list[tuple[int, list[int]]],
        call: int,
        temperature: float,
        max_new_tokens: int,
        settings: dict[str, Any] | None = None,
        *,
        model: Any = None,
    ) -> dict[int, str]:
        """Generate ``batches`` (``(batch number, text indices)``) of :meth:`plan`'s texts for call number
        ``call`` on ``model`` (default: this sampler's): each batch seeded by :meth:`batch_seed`, in a forked
        RNG, the model in eval mode (restored after). Returns each generated index's text."""
        import torch

        if temperature <= 0:
            decoding: dict[str, Any] = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        else:
            decoding = {"do_sample": True, "temperature": float(temperature), **self.generation_kwargs}
        decoding.update(settings or {})
        model = self.model if model is None else model
        device = next(model.parameters()).device
        was_training = model.training
        fork = [device.index or 0] if device.type == "cuda" else []
        out: dict[int, str] = {}
        with torch.random.fork_rng(devices=fork):
            model.eval()
            try:
                grad_off = torch.inference_mode() if self.inference_mode else torch.no_grad()
                with grad_off, generation_precision(model, self.autocast):
                    for number, idx in batches:
                        seed = self.batch_seed(call, number)
                        if seed is not None:
                            torch.manual_seed(seed)
                        batch = self._generate(model, [texts[i] for i in idx], special, max_new_tokens, decoding)
                        out.update(zip(idx, batch, strict=True))
            finally:
                model.train(was_training)
        return out

    def _generate(
        self, model: Any, texts: list[str], special: bool, max_new_tokens: int, decoding: dict[str, Any]
    ) -> list[str]:
        tok = self.tokenizer
        if tok.pad_token_id is None and tok.eos_token is not None:
            tok.pad_token = tok.eos_token
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=special)
        finally:
            tok.padding_side = side
        device = next(model.parameters()).device
        enc = {k: v.to(device) for k, v in enc.items()}
        ids = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id, **decoding)
        return tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


_BATCH_SEED_STRIDE = 1_000_003
"""Batch b of a call is seeded ``seed + call + b * stride``: distinct over any run's calls and batches."""

_SAMPLER_SETS = frozenset({"n", "temperature", "max_tokens", "seed", "logprobs"})
"""Sampling parameters :class:`VLLMSampler` sets itself (a setting may not override them)."""

_CLIENT_ARGUMENTS = ("top_p", "top_k", "min_p", "repetition_penalty")
"""The sampling settings TRL's ``VLLMClient.generate`` takes as arguments (their defaults: the training's)."""

_SERVER_SETTINGS = frozenset(
    {
        *_CLIENT_ARGUMENTS,
        "presence_penalty",
        "frequency_penalty",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "min_tokens",
        "bad_words",
        "logit_bias",
        "allowed_token_ids",
        "include_stop_str_in_output",
    }
)
"""Settings :class:`VLLMSampler` sends a vLLM server (TRL's client takes the first four as arguments, the
others in the request body). The server may ignore a name it does not know, so any other is refused."""

_ENGINE_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_ENGINE_LOCKS_GUARD = threading.Lock()


def _engine_lock(generation: Any) -> threading.Lock:
    """One lock per engine, shared by every sampler over it: a trial (the tool server's thread) and an
    evaluation (the training thread) must not drive one vLLM engine at once."""
    with _ENGINE_LOCKS_GUARD:
        try:
            return _ENGINE_LOCKS.setdefault(generation, threading.Lock())
        except TypeError:  # an engine that cannot be weakly referenced: this sampler's own lock
            return threading.Lock()


class VLLMSampler:
    """A :class:`~harnessrl.critic.protocols.PolicySampler` over the training run's own vLLM engine.

    With ``generation.backend: vllm`` TRL generates the training rollouts through
    ``trainer.vllm_generation`` (``trl.generation.vllm_generation.VLLMGeneration``); this sampler sends
    the critic's trials and the in-training evaluation to the same engine, so they sample the policy as
    training does (its ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty`` and ``generation_kwargs``,
    overridden by a call's ``settings``; TRL's structured-outputs regex is not applied). The engine
    holds the weights of its last sync: ``prepare`` (called before each sample, under the engine lock)
    pushes the current ones when they are stale.

    Prompts go through the tokenizer's chat template (``add_generation_prompt=True``) as token ids, the
    way TRL tokenizes training prompts. Consecutive identical prompts (a trial or an evaluation sends k
    copies of one) become one request with ``n=k``; the texts come back one per prompt, in order.
    Temperature 0 is greedy decoding (vLLM's convention). Seeds: each call's requests are seeded from
    ``seed``, a call counter and the request's position (vLLM gives the ``n`` samples of a seeded request
    the seeds ``seed + i``, so they differ), so a sampler built with the same seed draws with the same
    random numbers (vLLM's numerics may still vary with what else is batched); ``same_draws_each_call``
    leaves the counter out, so every call draws alike (evaluation scores each checkpoint on the same draws).

    Colocate mode (``generation.mode == "colocate"``): ``generation.llm.generate`` with one
    ``SamplingParams`` per request (sleep mode, when on, is woken and put back as TRL does). Server mode:
    ``generation.vllm_client.generate``, which takes one ``n`` and one seed per call: requests are sent
    in one call per distinct ``n`` (a prompt repeated in the batch goes to a further call, so that no two
    requests of a call draw alike); the prompts of one call share its seed, so different prompts there
    share random numbers, and only the main process has a client.

    Args:
        generation: the trainer's ``vllm_generation``.
        tokenizer: the policy's tokenizer (ids in, texts out).
        seed: base seed of the requests' seeds; None leaves the requests unseeded.
        prepare: called before each sample (the trainer's weight sync when stale; None: nothing).
        same_draws_each_call: seed every call alike instead of from a call counter.
    """

    def __init__(
        self,
        generation: Any,
        tokenizer: Any,
        *,
        seed: int | None = 0,
        prepare: Callable[[], None] | None = None,
        same_draws_each_call: bool = False,
    ):
        mode = getattr(generation, "mode", None)
        if mode not in ("colocate", "server"):
            raise ValueError(
                f"VLLMSampler needs TRL's vLLM generation in 'colocate' or 'server' mode, got mode {mode!r}: "
                "pass the trainer's vllm_generation (a run with generation.backend: vllm)"
            )
        self.generation = generation
        self.tokenizer = tokenizer
        self.seed = seed
        self.prepare = prepare
        self.same_draws_each_call = same_draws_each_call
        self.calls = 0
        self._lock = _engine_lock(generation)

    def sample(
        self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, **settings: float
    ) -> list[str]:
        """``settings``: further vLLM sampling parameters for this call (``top_p``, ``top_k``, ...); one vLLM
        cannot take raises a ``ValueError`` naming it."""
        if not prompts:
            return []
        reserved = sorted(set(settings) & _SAMPLER_SETS)
        if reserved:
            raise ValueError(
                f"sampling setting(s) {reserved}: the sampler sets these itself (temperature and max_new_tokens "
                "are its arguments), so a setting may not override them"
            )
        runs = _runs(prompts)
        ids = [self._prompt_ids(prompts[start]) for start, _ in runs]
        ns = [n for _, n in runs]
        call = 0 if self.same_draws_each_call else self.calls
        self.calls += 1
        sampling = {**self._defaults(), **settings, "temperature": float(temperature), "max_tokens": max_new_tokens}
        if self.generation.mode == "colocate":
            generate = self._colocate(ids, ns, call, sampling, settings)
        else:
            generate = self._server(ids, ns, call, sampling, settings)
        with self._lock:
            if self.prepare is not None:
                try:
                    self.prepare()
                except Exception as e:
                    raise RuntimeError(
                        f"the weight sync into the vLLM engine ({self._engine()}) before sampling failed "
                        f"({type(e).__name__}: {e}). Nothing falls back to another engine: bring the engine back "
                        "(a server: restart `trl vllm-serve`), then continue the run with --resume"
                    ) from e
            completions = generate()
        for n, got in zip(ns, completions, strict=True):
            if len(got) != n:
                raise RuntimeError(f"the vLLM engine returned {len(got)} completions for a request of n={n}")
        return self.tokenizer.batch_decode([c for got in completions for c in got], skip_special_tokens=True)

    # ------------------------------------------------------------------------------------------ helpers
    def _engine(self) -> str:
        """Which engine, in words: the server's address, or the colocated engine."""
        if self.generation.mode == "server":
            client = getattr(self.generation, "vllm_client", None)
            return f"the server at {getattr(client, 'base_url', None) or 'its address'}"
        return "colocated"

    def _prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        (text,), special = chat_prompts(self.tokenizer, [messages])
        return list(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    def _defaults(self) -> dict[str, Any]:
        """The training's sampling parameters (TRL's ``VLLMGeneration`` attributes and generation_kwargs)."""
        g = self.generation
        out: dict[str, Any] = {k: getattr(g, k) for k in _CLIENT_ARGUMENTS if getattr(g, k, None) is not None}
        extra = getattr(g, "generation_kwargs", None) or {}
        out.update({k: v for k, v in extra.items() if k not in _SAMPLER_SETS and k != "structured_outputs"})
        return out

    def _seed(self, call: int, index: int) -> int | None:
        """A request's seed: spread over 48 bits, since vLLM seeds a request's n samples ``seed + i`` (seeds a
        few apart would share draws), and reproducible from (seed, call, index)."""
        if self.seed is None:
            return None
        digest = hashlib.blake2b(f"{self.seed}:{call}:{index}".encode(), digest_size=6).digest()
        return int.from_bytes(digest, "little")

    def _colocate(
        self, ids: list[list[int]], ns: list[int], call: int, sampling: dict[str, Any], settings: dict[str, Any]
    ) -> Callable[[], list[list[list[int]]]]:
        """The colocated engine's generation of the requests (their n completions' ids each), to run under
        the engine lock; its sampling parameters are checked now, before any weight sync."""
        from vllm import SamplingParams

        try:
            params = [SamplingParams(**sampling, n=n, seed=self._seed(call, r)) for r, n in enumerate(ns)]
        except (TypeError, ValueError) as e:
            if not settings or not _accepts(SamplingParams, {k: v for k, v in sampling.items() if k not in settings}):
                raise
            raise _cannot_honour(settings, e) from e
        g = self.generation

        def generate() -> list[list[list[int]]]:
            sleeping = getattr(g, "enable_sleep_mode", False)
            if sleeping:
                if getattr(g, "_llm_weights_sleeping", False):  # sleep level 2 dropped them: TRL re-pushes too
                    g.sync_weights()
                g.llm.wake_up(tags=["kv_cache"])
            try:
                outputs = g.llm.generate([{"prompt_token_ids": p} for p in ids], sampling_params=params, use_tqdm=False)
            finally:
                if sleeping:
                    g.llm.sleep(level=2)
                    g._llm_weights_sleeping = True
            return [[list(o.token_ids) for o in out.outputs] for out in outputs]

        return generate

    def _server(
        self, ids: list[list[int]], ns: list[int], call: int, sampling: dict[str, Any], settings: dict[str, Any]
    ) -> Callable[[], list[list[list[int]]]]:
        """The server's generation of the requests, as :meth:`_colocate`'s."""
        unknown = sorted(set(settings) - _SERVER_SETTINGS)
        if unknown:
            raise _cannot_honour(
                {k: settings[k] for k in unknown},
                f"a vLLM server samples with {sorted(_SERVER_SETTINGS)} (and temperature, max_new_tokens)",
            )
        client = getattr(self.generation, "vllm_client", None)
        if client is None:
            raise RuntimeError("the vLLM server's client lives on the main process only: sample there")
        # one call per distinct n; a prompt already in a call of its n goes to a further one
        calls: dict[tuple[int, int], list[int]] = {}
        seen: Counter[tuple[int, tuple[int, ...]]] = Counter()
        for r, (p, n) in enumerate(zip(ids, ns, strict=True)):
            key = (n, tuple(p))
            calls.setdefault((n, seen[key]), []).append(r)
            seen[key] += 1
        args = {k: sampling.pop(k) for k in _CLIENT_ARGUMENTS if k in sampling}
        temperature, max_tokens = sampling.pop("temperature"), sampling.pop("max_tokens")

        def generate() -> list[list[list[int]]]:
            out: list[list[list[int]]] = [[] for _ in ids]
            for c, ((n, _), requests) in enumerate(calls.items()):
                seed = self._seed(call, c)
                try:
                    got = client.generate(
                        prompts=[ids[r] for r in requests],
                        n=n,
                        temperature=temperature,
                        max_tokens=max_tokens,
                        logprobs=None,
                        generation_kwargs={**sampling, **({} if seed is None else {"seed": seed})},
                        **args,
                    )["completion_ids"]
                except Exception as e:  # requests' errors, TRL's "Request failed: <status>": say where and what
                    raise RuntimeError(
                        f"the vLLM engine ({self._engine()}) failed a request of {len(requests)} prompt(s) x n={n} "
                        f"({type(e).__name__}: {e}). Is `trl vllm-serve` still running there? Nothing falls back "
                        "to another engine: restart the server, then continue the run with --resume"
                    ) from e
                if len(got) != n * len(requests):
                    raise RuntimeError(f"the vLLM server returned {len(got)} completions for {len(requests)} x n={n}")
                for j, r in enumerate(requests):  # prompt-major: the n completions of a prompt, then the next's
                    out[r] = [list(x) for x in got[j * n : (j + 1) * n]]
            return out

        return generate


def _runs(prompts: list[list[dict[str, str]]]) -> list[tuple[int, int]]:
    """(first index, length) of each run of consecutive identical prompts."""
    runs: list[tuple[int, int]] = []
    for i, p in enumerate(prompts):
        if runs and prompts[runs[-1][0]] == p:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def _accepts(sampling_params: Any, kwargs: dict[str, Any]) -> bool:
    try:
        sampling_params(**kwargs)
    except (TypeError, ValueError):
        return False
    return True


def _cannot_honour(settings: dict[str, Any], why: object) -> ValueError:
    named = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    return ValueError(f"the vLLM engine cannot honour the sampling setting(s) {named}: {why}")
