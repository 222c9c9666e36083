"""The Chroma embedding function of the training memory: the packaged all-MiniLM-L6-v2, never Chroma's default.

It is passed explicitly whenever a collection is created or opened: Chroma's default embedding function
downloads a model at first use (impossible offline) and is what a collection silently falls back to when
opened without one. The function is also registered with Chroma under its name, so even a collection opened
elsewhere without it rebuilds this one from the persisted configuration. (The model itself is
:mod:`harnessrl.memory.embedding`, which imports no chromadb.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function
from pydantic import JsonValue

__all__ = ["MiniLMEmbeddingFunction"]


@register_embedding_function
class MiniLMEmbeddingFunction(EmbeddingFunction[Documents]):
    """Chroma embedding function over the packaged all-MiniLM-L6-v2 (unit-norm, 384-d, offline).

    The model is loaded on first use (one shared instance per device per process), so opening a
    memory only to read its records costs nothing."""

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._embedder = None

    @property
    def embedder(self):
        if self._embedder is None:
            from harnessrl.memory.embedding import get_embedder

            self._embedder = get_embedder(self.device)
        return self._embedder

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.embedder.encode([str(t) for t in input]))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings as one (n, 384) float32 array (for bulk writes that pass ``embeddings=``)."""
        return self.embedder.encode(list(texts))

    @staticmethod
    def name() -> str:
        return "harnessrl-minilm-l6-v2"

    def get_config(self) -> dict[str, JsonValue]:
        return {"device": self.device}

    @staticmethod
    def build_from_config(config: dict[str, JsonValue]) -> MiniLMEmbeddingFunction:
        return MiniLMEmbeddingFunction(device=str(config.get("device", "cpu")))

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine", "l2", "ip"]

    def max_tokens(self) -> int:
        return 256
