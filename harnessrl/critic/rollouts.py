"""The frozen policy's sampler: fresh rollouts for the critic's trials, without moving the weights or the run's RNG.

A guidance or sampling trial needs new completions of the *current* policy; anything with the
``sample`` method of :class:`~harnessrl.critic.trials.PolicySampler` works (tests pass a scripted one).
:class:`TransformersSampler` is the one a training run uses; it alone imports torch (when it samples).
"""

from __future__ import annotations

from typing import Any

from harnessrl.data.schema import prompt_text

__all__ = ["TransformersSampler"]


class TransformersSampler:
    """A :class:`~harnessrl.critic.trials.PolicySampler` over a transformers causal LM and its tokenizer.

    Prompts go through the tokenizer's chat template (``add_generation_prompt=True``), are padded on
    the left and sampled (``do_sample=True``) under ``torch.inference_mode`` with the model in eval
    mode; the model's training mode is restored afterwards and its weights never change. The global
    torch RNG is forked, so a trial does not shift the training run's random stream, and seeded
    (``seed`` plus a call counter) so a trial is reproducible.

    Args:
        model: the policy (unwrapped: not a DDP/accelerate wrapper).
        tokenizer: its tokenizer (a pad token is taken from eos when it has none).
        batch_size: prompts generated together.
        seed: base seed of the sampling RNG; None leaves the (forked) RNG unseeded.
        generation_kwargs: extra ``generate`` arguments; the default matches TRL's GRPO sampling
            (``top_k=0``, ``top_p=1.0``: plain temperature sampling).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 16,
        seed: int | None = 0,
        generation_kwargs: dict[str, Any] | None = None,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = max(1, batch_size)
        self.seed = seed
        self.generation_kwargs = {"top_k": 0, "top_p": 1.0} if generation_kwargs is None else dict(generation_kwargs)
        self.calls = 0

    def sample(
        self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, **settings: float
    ) -> list[str]:
        """``settings``: further ``generate`` arguments for this call (``top_p``, ``top_k``, ...)."""
        import torch

        if not prompts:
            return []
        model = self.model
        device = next(model.parameters()).device
        was_training = model.training
        fork = [device.index or 0] if device.type == "cuda" else []
        out: list[str] = []
        with torch.random.fork_rng(devices=fork):
            if self.seed is not None:
                torch.manual_seed(self.seed + self.calls)
            self.calls += 1
            model.eval()
            try:
                with torch.inference_mode():
                    for i in range(0, len(prompts), self.batch_size):
                        out.extend(
                            self._generate(prompts[i : i + self.batch_size], temperature, max_new_tokens, settings)
                        )
            finally:
                model.train(was_training)
        return out

    def _generate(
        self, batch: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, settings: dict[str, float]
    ) -> list[str]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in batch]
            special = False  # the template already has the special tokens it wants
        else:
            texts = [prompt_text(p) for p in batch]
            special = True
        if tok.pad_token_id is None and tok.eos_token is not None:
            tok.pad_token = tok.eos_token
        side = tok.padding_side
        tok.padding_side = "left"
        try:
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=special)
        finally:
            tok.padding_side = side
        device = next(self.model.parameters()).device
        enc = {k: v.to(device) for k, v in enc.items()}
        ids = self.model.generate(
            **enc,
            do_sample=True,
            temperature=float(temperature),
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
            **{**self.generation_kwargs, **settings},
        )
        return tok.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
