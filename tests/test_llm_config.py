"""The evolver's LLM from configuration alone: a provider string (LangChain's init_chat_model), a bare
OpenAI-compatible model name, or a factory by dotted path; the errors say what to install or set.
(The whole graph driven by a fake OpenAI-compatible server: tests/test_graph.py.)"""

from __future__ import annotations

import asyncio

import pytest

from harnessrl.agents.llm import make_chat_model
from harnessrl.agents.testing import ScriptedChatModel, tool_call
from harnessrl.errors import ConfigError
from harnessrl.graph.state import LLMConfig
from harnessrl.graph_builder import make_evolver_model
from harnessrl.trainer.train_config import TrainConfig

MADE: list[LLMConfig] = []


def scripted_factory(config: LLMConfig) -> ScriptedChatModel:
    """A user's factory: gets the config, returns any chat model that can call tools."""
    MADE.append(config)
    return ScriptedChatModel(responses=[tool_call("get_failures", {"limit": 1})])


def not_a_chat_model(config: LLMConfig) -> object:
    return object()


def test_provider_strings_and_bare_names():
    assert LLMConfig(model="openai:gpt-4.1-mini").provider_and_model() == ("openai", "gpt-4.1-mini")
    assert LLMConfig(model="ollama:qwen3:8b").provider_and_model() == ("ollama", "qwen3:8b")
    assert LLMConfig(model="Qwen/Qwen3-8B").provider_and_model() == ("openai", "Qwen/Qwen3-8B")
    assert LLMConfig(model="qwen3:8b", provider="ollama").provider_and_model() == ("ollama", "qwen3:8b")
    with pytest.raises(ValueError, match="needs a model"):
        LLMConfig()


def test_an_openai_compatible_server_by_provider_string(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = make_chat_model(LLMConfig(model="openai:qwen-local", base_url="http://127.0.0.1:8000/v1", temperature=0.3))
    assert type(model).__name__ == "ChatOpenAI" and model.model_name == "qwen-local" and model.temperature == 0.3
    bare = make_chat_model(LLMConfig(model="Qwen/Qwen3-8B", base_url="http://127.0.0.1:8000/v1", max_tokens=64))
    assert bare.model_name == "Qwen/Qwen3-8B" and bare.max_tokens == 64
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):  # a remote server needs its key
        make_chat_model(LLMConfig(model="openai:gpt-4.1-mini"))


def test_a_provider_whose_package_is_missing_says_what_to_install(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    pytest.importorskip("langchain_core")
    try:
        import langchain_anthropic  # noqa: F401

        pytest.skip("langchain-anthropic is installed here")
    except ImportError:
        pass
    with pytest.raises(ConfigError, match="langchain-anthropic"):
        make_chat_model(LLMConfig(model="anthropic:claude-sonnet-4-5", api_key_env="ANTHROPIC_API_KEY"))


def test_a_factory_by_dotted_path_drives_the_graph():
    config = LLMConfig(factory="test_llm_config:scripted_factory", temperature=0.7)
    model = make_evolver_model("llm", config)
    assert isinstance(model, ScriptedChatModel) and MADE[-1].temperature == 0.7
    answer = asyncio.run(model.bind_tools([]).ainvoke("what failed?"))
    assert answer.tool_calls[0]["name"] == "get_failures"
    with pytest.raises(ConfigError, match="no bind_tools"):
        make_chat_model(LLMConfig(factory="test_llm_config:not_a_chat_model"))
    with pytest.raises(ConfigError, match="cannot be imported"):
        make_chat_model(LLMConfig(factory="nowhere_pkg.models:make"))


def test_the_run_config_takes_every_form():
    for llm in (
        {"model": "openai:gpt-4.1-mini"},
        {"model": "Qwen/Qwen3-8B", "base_url": "http://localhost:8000/v1"},
        {"model": "ollama:qwen3:8b", "base_url": "http://localhost:11434"},
        {"factory": "my_pkg.models:make_evolver"},
    ):
        cfg = TrainConfig.model_validate({"evolver": {"backend": "llm", "llm": llm}})
        assert cfg.evolver.llm is not None
    with pytest.raises(ValueError, match="model_name_typo"):
        TrainConfig.model_validate({"evolver": {"llm": {"model": "x", "model_name_typo": 1}}})
