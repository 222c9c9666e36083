"""Test set-up: everything offline (pytest-socket allows loopback only), no tracing, no hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")


import pytest


@pytest.fixture(scope="session")
def real_tokenizer():
    """The real SmolLM2 tokenizer (from the packaged GGUF, or the cache): tiny models use its vocabulary."""
    from harnessrl import models
    from harnessrl.errors import ResourceMissingError

    try:
        return models.embedded_tokenizer()
    except ResourceMissingError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def make_tiny_llama(real_tokenizer):
    """``make_tiny_llama(**config_overrides)``: a tiny random LlamaForCausalLM over the real vocabulary."""

    def make(**overrides):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        settings = dict(
            vocab_size=len(real_tokenizer),
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=32,
            max_position_embeddings=1024,
            pad_token_id=real_tokenizer.pad_token_id,
            bos_token_id=real_tokenizer.bos_token_id,
            eos_token_id=real_tokenizer.eos_token_id,
        )
        settings.update(overrides)
        return LlamaForCausalLM(LlamaConfig(**settings))

    return make


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, make_tiny_llama, real_tokenizer):
    """A tiny random model and the real tokenizer saved as a checkpoint directory (config.model may name it)."""
    path = tmp_path_factory.mktemp("tiny-llama")
    make_tiny_llama().save_pretrained(path)
    real_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models gain nothing from threads, and spin-waiting threads crawl on a busy machine."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
