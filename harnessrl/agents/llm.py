"""The LLM backend of the evolver: any OpenAI-compatible chat server through LangChain's ``ChatOpenAI``.

``base_url`` points it at OpenAI, a vLLM server (``vllm serve ... --enable-auto-tool-choice``), or any
server that speaks the chat-completions API with tool calls. The key is read from the environment
variable named by ``api_key_env`` (never from the config file); a loopback server needs none.
LangSmith tracing follows LangChain's standard environment variables. Its settings
(:class:`~harnessrl.graph.state.LLMConfig`) are with the graph's other settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessrl.config import api_key_from_env
from harnessrl.graph.state import LLMConfig

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

__all__ = ["make_chat_model"]


def make_chat_model(config: LLMConfig) -> ChatOpenAI:
    """A ``ChatOpenAI`` for ``config``.

    Raises :class:`~harnessrl.errors.ConfigError` when a remote server is configured and its key is not set.
    """
    from langchain_openai import ChatOpenAI  # ~1 s to import: only when an LLM evolver is really built

    key = api_key_from_env(config.api_key_env, config.base_url, "evolver.llm.api_key_env")
    return ChatOpenAI(
        model=config.model,
        base_url=config.base_url,
        api_key=key,
        temperature=config.temperature,
        timeout=config.timeout_s,
        max_retries=config.max_retries,
        max_tokens=config.max_tokens,
    )
