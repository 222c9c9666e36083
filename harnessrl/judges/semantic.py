"""The embedded default judge: semantic matching on the packaged all-MiniLM-L6-v2 (offline stand-in).

This is **not** an LLM judge. It exists so that everything runs offline on a laptop CPU; real runs
point the judge at an OpenAI-compatible server (``judge.backend: openai``). How it grades one
(response, criterion) pair:

1. *Evidence*: the response is cut into passages (each sentence, each pair of neighbouring
   sentences, and the whole response when short); the score ``s`` is the best cosine similarity
   between the criterion and any passage ("does some part of the response say this?").
2. *Calibration per criterion*, with anchors graded the same way:
   - ``lo`` ("not met"): the mean of an off-topic text's score and the task prompt's own score (a
     response that only echoes the question is on topic but satisfies nothing);
   - ``hi`` ("met"): halfway from ``lo`` to the criterion text itself (similarity 1), lowered to the
     reference answer's score when that is smaller, since the reference satisfies every positive
     criterion (not used for pitfalls, which the reference does not commit).
3. *Verdict*: ``v = sigmoid((s - mid) / temperature)`` with ``mid`` 70% of the way from ``lo`` to
   ``hi`` (on-topic near misses are common, so the bar sits high) and the temperature a quarter of
   their gap; confidence ``|2v - 1|``, as an LLM judge's would be.
   The value is soft (like the local-lm judge's P(yes)): the reward keeps a gradient of evidence.

The anchor scheme was chosen on the medical and science hand labels only (48 triples) among a few
variants (lower anchor, upper anchor, position of the bar); the other three domains' labels were
not looked at while choosing. Raw best-passage similarity ranks almost as well; the anchors are what
make 0.5 a meaningful threshold for each criterion. ``harnessrl bench judge`` reports the agreement on every domain.

Known blind spots, on purpose visible: negation ("do not give aspirin" matches "gives aspirin"), and
best-passage scores can only grow as a response grows, which is the length-reward spurious signal
the detectors and the rubric interface exist to catch.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from harnessrl.data.checks import split_sentences
from harnessrl.judges.config import JudgeConfig
from harnessrl.judges.rubric_judge import BackendVerdict, GradeRequest
from harnessrl.models import resolve_device

__all__ = ["SemanticJudge", "criterion_query", "passages"]

logger = logging.getLogger(__name__)

OFF_TOPIC = (
    "The weather was pleasant this weekend, so we went for a walk in the park and had lunch outside.",
    "Our team won the football match on Saturday after a late goal in the second half.",
)

_LEAD = re.compile(
    r"^(?:the\s+)?(?:response|answer|reply)\s+(?:should\s+|must\s+)?"
    r"|^(?:it\s+)?(?:should|must)\s+",
    re.IGNORECASE,
)


def criterion_query(text: str) -> str:
    """The criterion as a statement to look for: drop a leading 'The response (should) ...'."""
    stripped = _LEAD.sub("", text.strip()).strip()
    return stripped[:1].upper() + stripped[1:] if stripped else text.strip()


def passages(response: str, max_whole_words: int = 80) -> list[str]:
    """Sentences, neighbouring-sentence pairs, and the whole response when it is short."""
    sents = split_sentences(response)
    if not sents:
        return [response.strip() or "(empty response)"]
    out = list(sents)
    out.extend(f"{a} {b}" for a, b in itertools.pairwise(sents))
    if len(sents) > 2 and len(response.split()) <= max_whole_words:
        out.append(" ".join(sents))
    return list(dict.fromkeys(out))


class SemanticJudge:
    """Best-passage similarity to each criterion, calibrated per criterion with anchors."""

    name = "semantic"

    def __init__(
        self,
        device: str = "cpu",
        batch_size: int = 64,
        min_gap: float = 0.08,
        mid_share: float = 0.7,
        temperature_share: float = 0.25,
        embedder=None,
        cache_size: int = 100_000,
    ):
        if embedder is None:
            from harnessrl.memory.embedding import MiniLMEmbedder

            embedder = MiniLMEmbedder(device=device, batch_size=batch_size)
        self.embedder = embedder
        self.min_gap = min_gap
        self.mid_share = mid_share
        self.temperature_share = temperature_share
        self.cache_size = cache_size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._anchors: OrderedDict[tuple[str, str, str], dict[str, float]] = OrderedDict()

    @classmethod
    def from_config(cls, config: JudgeConfig) -> SemanticJudge:
        return cls(device=resolve_device(config.device), batch_size=config.batch_size)

    # -- embeddings, with a text -> vector cache (criteria and anchors recur every step) --
    def _embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            for t, v in zip(todo, self.embedder.encode(todo), strict=True):
                self._vectors[t] = v
            while len(self._vectors) > self.cache_size:
                self._vectors.popitem(last=False)
        return {t: self._vectors[t] for t in texts}

    def _best(self, query: np.ndarray, texts: list[str], vecs: dict[str, np.ndarray]) -> float:
        mat = np.stack([vecs[t] for t in texts])
        return float((mat @ query).max())

    def scores(self, requests: Sequence[GradeRequest]) -> list[dict[str, float]]:
        """Raw best-passage score and the anchors of each request (for inspection and calibration).

        A step grades G responses on the same criteria again and again: each response's passages are
        cut once per call, and each (criterion, prompt, reference) anchor row is computed once and kept.
        """
        keys = [(criterion_query(r.criterion.text), r.prompt, r.reference_answer or "") for r in requests]
        response_passages = {r.response: passages(r.response) for r in requests}
        new_anchors = {k: None for k in keys if k not in self._anchors}
        anchor_passages = {
            k: {"off": list(OFF_TOPIC), "prompt": passages(k[1]), **({"reference": passages(k[2])} if k[2] else {})}
            for k in new_anchors
        }
        texts = [k[0] for k in keys]
        for ps in response_passages.values():
            texts.extend(ps)
        for groups in anchor_passages.values():
            for group in groups.values():
                texts.extend(group)
        vecs = self._embed(texts)
        for k, groups in anchor_passages.items():
            self._anchors[k] = {name: self._best(vecs[k[0]], group, vecs) for name, group in groups.items()}
        out = []
        for r, k in zip(requests, keys, strict=True):
            out.append({"score": self._best(vecs[k[0]], response_passages[r.response], vecs), **self._anchors[k]})
        while len(self._anchors) > self.cache_size:
            self._anchors.popitem(last=False)
        return out

    def calibrate(self, row: dict[str, float], pitfall: bool) -> tuple[float, float, float]:
        """(lo, hi, verdict value) for one request's raw scores."""
        lo = 0.5 * (row["off"] + row["prompt"])
        hi = lo + 0.5 * (1.0 - lo)
        ref = row.get("reference")
        if not pitfall and ref is not None:
            hi = min(hi, ref)
        hi = max(hi, lo + self.min_gap)
        mid = lo + self.mid_share * (hi - lo)
        temp = max(1e-3, self.temperature_share * (hi - lo))
        value = 1.0 / (1.0 + math.exp(-(row["score"] - mid) / temp))
        return lo, hi, value

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        out: list[BackendVerdict | None] = []
        for r, row in zip(requests, self.scores(requests), strict=True):
            lo, hi, value = self.calibrate(row, r.criterion.weight < 0)
            out.append(
                BackendVerdict(
                    value=value,
                    confidence=abs(2 * value - 1),
                    reason=f"best passage similarity {row['score']:.2f} (not met ≤{lo:.2f}, met ≥{hi:.2f})",
                )
            )
        return out
