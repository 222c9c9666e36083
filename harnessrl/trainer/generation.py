"""The rollouts' generation inside TRL's: each row's sampling settings, and guided completions under plain prompts.

Two of the trainer's hook points (:class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`) hand their work to
the :class:`RolloutGeneration` it owns:

- ``_generate_single_turn``: :meth:`RolloutGeneration.single_turn` applies each row's sampling settings
  (temperature, top_p, max_new_tokens, ...) by generating the rows of each setting apart, at the rollouts'
  precision (``generation.autocast``), and times it. The loss still scores tokens at the run's temperature
  (TRL's ``args.temperature``), the usual approximation for exploration boosts.
- ``_generate``: with ``guidance_train_on="plain"`` (the default), :meth:`RolloutGeneration.train_plain` puts the
  plain prompt's ids in place of a guided member's hinted ones before TRL computes anything from them, so a
  successful guided completion teaches the plain prompt (as RuscaRL strips its scaffold before the update). The
  off-policy gap this opens is measured every step as ``guidance/plain_minus_hinted_logp``, the mean per-token
  log importance weight log pi(y|x) - log pi(y|x, hint) of the guided completions. ``"hinted"``: the guided
  prompt is trained on.

:meth:`RolloutGeneration.of_rows` sets both up for one call of TRL's generation and scoring.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal, Protocol

from harnessrl.errors import ConfigError
from harnessrl.interfaces.harness import Harness
from harnessrl.models import generation_precision
from harnessrl.trainer.rows import HarnessRow

__all__ = ["Generating", "GenerationOverride", "RolloutGeneration", "completion_logp"]

logger = logging.getLogger(__name__)

Setting = tuple[tuple[str, float], ...]
"""A row's sampling settings, sorted by name (hashable: the rows of one setting generate together)."""


class Generating(Protocol):
    """What the generation reads of the trainer (TRL's GRPOTrainer's attributes, and the trainer's metrics)."""

    accelerator: Any
    model_wrapped: Any
    temperature: float

    def _tokenize_prompts(self, prompts: list) -> tuple: ...

    def record_metrics(self, values: dict[str, float]) -> None: ...


class RolloutGeneration:
    """The trainer's generation settings and the state of the call in progress.

    Args:
        autocast: ``generation.autocast``: ``forward`` (TRL's own path), ``generate`` or ``never``.
        train_on: ``harness.guidance.train_on``: ``plain`` (a guided completion trains under the plain prompt) or
            ``hinted``.
    """

    def __init__(self, autocast: str = "generate", train_on: Literal["plain", "hinted"] = "plain"):
        if train_on not in ("plain", "hinted"):
            raise ConfigError(f"harness.guidance.train_on is 'plain' or 'hinted', not {train_on!r}")
        self.autocast = autocast
        self.train_on = train_on
        self.seconds = 0.0
        """Seconds spent generating, all calls together."""
        self.settings: list[Setting] | None = None
        """Each row's sampling settings, while a call of TRL's generation and scoring is in progress."""
        self.plain_prompts: list[list[dict[str, str]] | None] | None = None
        """Each row's plain prompt where it trains under it (a guided row), while such a call is in progress."""
        self._logp_gap_warned = False

    @contextmanager
    def of_rows(self, rows: list[HarnessRow], harness: Harness) -> Iterator[None]:
        """Within it, TRL's generation of ``rows`` (this process's) follows each row's sampling settings, and a
        guided row trains under its task's plain prompt unless ``train_on`` is ``"hinted"``."""
        self.settings = [tuple(sorted(r["generation"].items())) for r in rows]
        plain = self.train_on == "plain"
        self.plain_prompts = [harness.tasks[r["task_id"]].messages() if plain and r["guided"] else None for r in rows]
        try:
            yield
        finally:
            self.settings = self.plain_prompts = None

    # ------------------------------------------------------------------ per-row sampling settings
    def single_turn(self, trainer: Any, generate: Callable[..., tuple], *args: Any) -> tuple:
        """TRL's ``_generate_single_turn`` (``generate``, called with ``args``: prompt ids, images, multimodal
        fields, generations, tool images) at the rollouts' precision, by sampling setting; timed."""
        t0 = time.perf_counter()
        try:
            model = None if self.autocast == "forward" else trainer.accelerator.unwrap_model(trainer.model_wrapped)
            with generation_precision(model, self.autocast):
                return self._by_setting(trainer, generate, *args)
        finally:
            self.seconds += time.perf_counter() - t0

    def _by_setting(self, trainer, generate, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        settings = self.settings
        if not settings or len(set(settings)) == 1 or images is not None or multimodal_fields:
            with GenerationOverride(trainer, dict(settings[0]) if settings else {}):
                return generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        completion_ids: list = [None] * len(prompt_ids)
        logprobs: list | None = [None] * len(prompt_ids)
        for setting in sorted(set(settings)):
            idx = [i for i, s in enumerate(settings) if s == setting]
            with GenerationOverride(trainer, dict(setting)):
                ids, lps = generate(
                    [prompt_ids[i] for i in idx], None, multimodal_fields, num_generations, has_tool_images
                )
            for j, i in enumerate(idx):
                completion_ids[i] = ids[j]
                if lps is None:
                    logprobs = None
                elif logprobs is not None:
                    logprobs[i] = lps[j]
        return completion_ids, logprobs

    # ------------------------------------------------------------------ guided completions, plain prompts
    def train_plain(self, trainer: Generating, out: tuple) -> tuple:
        """TRL's ``_generate`` output ``out`` with each guided row's prompt ids replaced by its plain prompt's
        (``guidance/plain_minus_hinted_logp`` and ``guidance/trained_plain`` recorded); as it is otherwise."""
        plain = self.plain_prompts
        if not plain or len(plain) != len(out[0]) or all(p is None for p in plain):
            return out
        idx = [i for i, p in enumerate(plain) if p is not None]
        plain_ids = trainer._tokenize_prompts([plain[i] for i in idx])[0]
        prompt_ids = list(out[0])
        gap = self.plain_minus_hinted_logp(trainer, [prompt_ids[i] for i in idx], plain_ids, [out[1][i] for i in idx])
        if gap is not None:
            trainer.record_metrics({"guidance/plain_minus_hinted_logp": gap, "guidance/trained_plain": float(len(idx))})
        for j, i in enumerate(idx):
            prompt_ids[i] = list(plain_ids[j])
        return (prompt_ids, *out[1:])

    def plain_minus_hinted_logp(
        self, trainer: Generating, hinted: list, plain: list, completions: list
    ) -> float | None:
        """Mean per-token log pi(y | plain prompt) - log pi(y | hinted prompt) of the guided completions ``y``
        (the log importance weight of training them under the plain prompt), from the policy as it generated
        them; None when it cannot be computed here (logged once)."""
        import torch

        try:
            model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
            device = next(model.parameters()).device
            gaps = []
            with torch.no_grad():
                for h, p, c in zip(hinted, plain, completions, strict=True):
                    c = list(c)
                    if not c:
                        continue
                    lp = [completion_logp(model, list(x), c, device, trainer.temperature) for x in (p, h)]
                    gaps.append((lp[0] - lp[1]) / len(c))
            return float(sum(gaps) / len(gaps)) if gaps else None
        except Exception as e:  # a measurement, never a reason to lose the step
            if not self._logp_gap_warned:
                logger.warning("guidance/plain_minus_hinted_logp is not measured on this setup: %s", e)
                self._logp_gap_warned = True
            return None


def completion_logp(model, prompt: list[int], completion: list[int], device, temperature: float) -> float:
    """log pi(completion | prompt) under ``model`` at ``temperature`` (as TRL scores tokens)."""
    import torch

    ids = torch.tensor([prompt + completion], device=device)
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / max(float(temperature), 1e-6)
    target = torch.tensor(completion, device=device)
    return float(torch.log_softmax(logits, dim=-1).gather(1, target[:, None]).sum())


class GenerationOverride:
    """Sets sampling settings (``temperature``, ``top_p``, ``max_new_tokens`` -> ``max_tokens`` for vLLM, ...) on
    the trainer's generation config and vLLM generator for one generate call."""

    _VLLM_NAMES: ClassVar[dict[str, str]] = {"max_new_tokens": "max_completion_length"}

    def __init__(self, trainer: Any, settings: dict[str, float]):
        self.trainer, self.settings = trainer, settings
        self.saved: list[tuple[Any, str, Any]] = []

    def _set(self, obj: Any, name: str, value: Any) -> None:
        if obj is None or not hasattr(obj, name) or getattr(obj, name) == value:
            return
        self.saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def __enter__(self):
        tr = self.trainer
        for name, value in self.settings.items():
            if name == "temperature" and value == tr.temperature:
                continue
            value = int(value) if name == "max_new_tokens" else value
            self._set(getattr(tr, "generation_config", None), name, value)
            self._set(getattr(tr, "vllm_generation", None), self._VLLM_NAMES.get(name, name), value)
        return self

    def __exit__(self, *exc):
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)
        self.saved.clear()
