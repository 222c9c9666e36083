"""The ``local-lm`` judge backend: P(yes) vs P(no) from a local causal LM's next-token logits.

Each (response, criterion) pair becomes a grading prompt that ends with "Answer yes or no." and the
start of the assistant's turn; one forward pass gives the next-token logits at the last position, and
the verdict is the probability mass of the "yes" tokens against the "no" tokens::

    value = P(yes) / (P(yes) + P(no)),   confidence = |2·value − 1|

where P(yes) sums the softmax over the first tokens of "yes", " yes", "Yes", " Yes" (and P(no) the same
for "no"). No text is generated and nothing is parsed, so a verdict is never malformed; a row whose
logits are not finite is *missing*.

Any Hugging Face causal LM works (``config.model``: a local path or an id). The default is the embedded
SmolLM2-135M-Instruct, which runs offline but grades near chance (AUC ≈0.55 on our labelled set): use
it to try the plumbing, and a bigger local model — or the ``openai`` backend — to train for real.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Sequence
from typing import Any

from harnessrl.errors import JudgeError
from harnessrl.judges.config import JudgeConfig
from harnessrl.judges.rubric_judge import BackendVerdict, GradeRequest
from harnessrl.models import resolve_device

__all__ = ["DEFAULT_MAX_LENGTH", "LocalLMJudge", "answer_token_ids"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_LENGTH = 2048
"""Longest grading prompt (tokens) unless given: the model's own limit if lower. Longer ones are cut."""

SYSTEM_PROMPT = (
    "You are a strict, fair grader. You judge a response against one criterion and answer with a "
    "single word: yes or no."
)
YES_WORDS = ("yes", " yes", "Yes", " Yes")
NO_WORDS = ("no", " no", "No", " No")
_CUT = "[...]"
_RESPONSE_SHARE = 2.0  # when a prompt must be cut, the response gets twice the room of the task and reference


def answer_token_ids(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The token ids that start a "yes" and a "no" answer (first token of each variant, deduplicated;
    an id both sides share says nothing and is dropped)."""

    def first_ids(words: Sequence[str]) -> list[int]:
        out: list[int] = []
        for w in words:
            ids = tokenizer.encode(w, add_special_tokens=False)
            if ids and ids[0] not in out:
                out.append(int(ids[0]))
        return out

    yes, no = first_ids(YES_WORDS), first_ids(NO_WORDS)
    shared = set(yes) & set(no)
    yes = [i for i in yes if i not in shared]
    no = [i for i in no if i not in shared]
    if not yes or not no:
        raise JudgeError(
            f"local-lm judge: the tokenizer {type(tokenizer).__name__} has no distinct first token for "
            f"'yes' ({yes}) and 'no' ({no}); use another model for the judge"
        )
    return yes, no


class LocalLMJudge:
    """Grades judged criteria with a local causal LM (see the module docstring).

    Args:
        model: a loaded causal LM (``transformers`` ``*ForCausalLM``), in eval mode.
        tokenizer: its tokenizer; its chat template is used when it has one.
        batch_size: prompts per forward pass.
        max_length: longest grading prompt in tokens (default: the model's limit, at most
            :data:`DEFAULT_MAX_LENGTH`). A longer one keeps the criterion and the question whole and cuts
            the response (its beginning), the task prompt and the reference answer (their ends).
        system_prompt: the grader's instructions (a system turn, or the first paragraph of a plain prompt).
    """

    name = "local-lm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 32,
        max_length: int | None = None,
        system_prompt: str = SYSTEM_PROMPT,
    ):
        if batch_size < 1:
            raise JudgeError(f"local-lm judge: batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.system_prompt = system_prompt
        self.max_length = max_length or self._model_max_length()
        self.yes_ids, self.no_ids = answer_token_ids(tokenizer)
        self.use_chat_template = bool(getattr(tokenizer, "chat_template", None))
        self._system_turn_ok = True
        pad = tokenizer.pad_token_id
        if pad is None:
            pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        self.pad_id = int(pad)
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            params = {}
        self._logits_to_keep = "logits_to_keep" in params
        self._position_ids = "position_ids" in params

    @classmethod
    def from_config(cls, config: JudgeConfig) -> LocalLMJudge:
        """Load ``config.model`` (default: the embedded SmolLM2-135M-Instruct) on ``config.device``."""
        from harnessrl.models import EMBEDDED_POLICY, is_embedded, load_causal_lm

        name = config.model or EMBEDDED_POLICY
        if is_embedded(name):
            logger.warning(
                "local-lm judge on the embedded SmolLM2-135M grades near chance; it shows the plumbing. "
                "Set judge.model to a bigger local model, or use judge.backend: openai, to train for real"
            )
        model, tokenizer = load_causal_lm(name, device=resolve_device(config.device))
        return cls(model, tokenizer, batch_size=config.batch_size, max_length=config.max_length)

    # ------------------------------------------------------------------ prompts

    def _model_max_length(self) -> int:
        limits = [DEFAULT_MAX_LENGTH]
        n_pos = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        if isinstance(n_pos, int) and n_pos > 0:
            limits.append(n_pos)
        tok_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
            limits.append(tok_max)
        return min(limits)

    @staticmethod
    def user_message(prompt: str, response: str, criterion_text: str, reference: str | None, pitfall: bool) -> str:
        """The grading question for one pair (the user turn)."""
        parts = [f"Task given to the assistant:\n{prompt.strip()}"]
        if reference:
            parts.append(f"Reference answer (for comparison):\n{reference.strip()}")
        parts.append(f"Response to grade:\n{response.strip()}")
        if pitfall:
            parts.append(
                f"Pitfall (a mistake to avoid): {criterion_text.strip()}\nDoes the response make this mistake?"
            )
        else:
            parts.append(f"Criterion: {criterion_text.strip()}\nDoes the response satisfy this criterion?")
        return "\n\n".join(parts) + "\nAnswer yes or no."

    def render(
        self, req: GradeRequest, prompt: str | None = None, response: str | None = None, reference: str | None = None
    ) -> str:
        """The full grading prompt as text, ending where the assistant's answer begins."""
        user = self.user_message(
            req.prompt if prompt is None else prompt,
            req.response if response is None else response,
            req.criterion.text,
            req.reference_answer if reference is None else reference,
            req.criterion.is_pitfall,
        )
        if not self.use_chat_template:
            return f"{self.system_prompt}\n\n{user}\nAnswer:"
        if self._system_turn_ok:
            try:
                return self.tokenizer.apply_chat_template(
                    [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}],
                    tokenize=False,
                    add_generation_prompt=True,
                )
            except Exception:  # some templates refuse a system turn: fold it into the user's
                self._system_turn_ok = False
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": f"{self.system_prompt}\n\n{user}"}],
            tokenize=False,
            add_generation_prompt=True,
        )

    def _ids(self, texts: list[str]) -> list[list[int]]:
        # a chat template writes its own special tokens; a plain prompt gets the tokenizer's (e.g. BOS)
        enc = self.tokenizer(texts, add_special_tokens=not self.use_chat_template)
        return [list(x) for x in enc["input_ids"]]

    def _tok_len(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def encode(self, requests: Sequence[GradeRequest]) -> list[list[int]]:
        """Token ids of each grading prompt, cut to ``max_length`` (see the class docstring)."""
        out = self._ids([self.render(r) for r in requests])
        for k, ids in enumerate(out):
            if len(ids) > self.max_length:
                out[k] = self._shorten(requests[k], len(ids))
        return out

    def _shorten(self, req: GradeRequest, n_full: int) -> list[int]:
        """Cut the free-text parts of a too-long prompt so it fits, keeping the question whole.

        The room left after the fixed text is shared out by water-filling: a part that needs less than
        its share keeps all of it, the response's share is twice the others'. The response keeps its
        end (the conclusion), the task prompt and the reference answer keep their beginnings.
        """
        tok = self.tokenizer
        pieces = {
            "response": tok.encode(req.response.strip(), add_special_tokens=False),
            "prompt": tok.encode(req.prompt.strip(), add_special_tokens=False),
            "reference": tok.encode((req.reference_answer or "").strip(), add_special_tokens=False),
        }
        weights = {"response": _RESPONSE_SHARE, "prompt": 1.0, "reference": 1.0}
        fixed = n_full - sum(len(v) for v in pieces.values())
        cut_cost = self._tok_len(f" {_CUT}") + 1
        margin = 8
        ids: list[int] = []
        for _ in range(4):
            room = self.max_length - fixed - margin - 3 * cut_cost
            if room <= 0:
                break
            keep = _water_fill({k: len(v) for k, v in pieces.items()}, weights, room)
            texts: dict[str, str] = {}
            for k, v in pieces.items():
                n = keep[k]
                if n >= len(v):
                    texts[k] = tok.decode(v)
                elif k == "response":
                    texts[k] = f"{_CUT} " + tok.decode(v[len(v) - n :]).lstrip() if n else _CUT
                else:
                    texts[k] = tok.decode(v[:n]).rstrip() + f" {_CUT}" if n else _CUT
            ids = self._ids([self.render(req, texts["prompt"], texts["response"], texts["reference"] or None)])[0]
            if len(ids) <= self.max_length:
                return ids
            margin += len(ids) - self.max_length + 8  # re-tokenising at the cuts can add a few tokens
        # The fixed text alone is too long (a huge criterion, or a tiny max_length): keep the end,
        # where the criterion, the question and the assistant's turn are.
        if not ids:
            ids = self._ids([self.render(req)])[0]
        logger.warning("local-lm judge: grading prompt of %d tokens cut to its last %d", len(ids), self.max_length)
        return ids[-self.max_length :]

    # ------------------------------------------------------------------ scoring

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        """One verdict per request, in order (None where the logits were not finite)."""
        if not requests:
            return []
        t0 = time.perf_counter()
        ids = self.encode(requests)
        order = sorted(range(len(ids)), key=lambda k: len(ids[k]), reverse=True)  # longest first: fail fast
        out: list[BackendVerdict | None] = [None] * len(ids)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            try:
                values = self.p_yes([ids[k] for k in chunk])
            except RuntimeError:  # e.g. out of memory: this batch's verdicts are missing, not the call's
                logger.exception("local-lm judge: a batch of %d failed; its verdicts count as missing", len(chunk))
                continue
            for k, v in zip(chunk, values, strict=True):
                if v is not None:
                    out[k] = BackendVerdict(value=v, confidence=abs(2 * v - 1), reason=f"P(yes)={v:.2f}")
        logger.debug("local-lm judge: %d verdicts in %.2f s", len(ids), time.perf_counter() - t0)
        return out

    def p_yes(self, batch: list[list[int]]) -> list[float | None]:
        """P(yes)/(P(yes)+P(no)) after each token sequence (one forward pass, left padded)."""
        import torch

        device = getattr(self.model, "device", None) or next(self.model.parameters()).device
        width = max(len(x) for x in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for r, x in enumerate(batch):
            input_ids[r, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[r, width - len(x) :] = 1
        kwargs: dict[str, torch.Tensor | int] = {"input_ids": input_ids.to(device), "attention_mask": mask.to(device)}
        if self._position_ids:  # positions count real tokens only, so padding changes nothing
            kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(device)
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = 1
        with torch.inference_mode():
            logits = self.model(**kwargs).logits[:, -1, :].float()
        finite = torch.isfinite(logits).all(dim=-1)
        yes = torch.logsumexp(logits[:, self.yes_ids], dim=-1)
        no = torch.logsumexp(logits[:, self.no_ids], dim=-1)
        value = torch.sigmoid(yes - no)  # = P(yes) / (P(yes) + P(no))
        return [float(v) if ok else None for v, ok in zip(value.tolist(), finite.tolist(), strict=True)]


def _water_fill(need: dict[str, int], weight: dict[str, float], room: int) -> dict[str, int]:
    """Share ``room`` tokens: each part gets min(need, its weighted share), leftovers go to the rest."""
    keep = dict.fromkeys(need, 0)
    left = dict(need)
    while left and room > 0:
        total_w = sum(weight[k] for k in left)
        level = room / total_w
        satisfied = [k for k in left if left[k] <= level * weight[k]]
        if not satisfied:
            for k in left:
                keep[k] = int(level * weight[k])
            break
        for k in satisfied:
            keep[k] = left[k]
            room -= left.pop(k)
    return keep
