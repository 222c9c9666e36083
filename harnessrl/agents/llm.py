"""The LLM backend of the evolver: any OpenAI-compatible chat server through LangChain's ``ChatOpenAI``.

``base_url`` points it at OpenAI, a vLLM server (``vllm serve ... --enable-auto-tool-choice``), or any
server that speaks the chat-completions API with tool calls. The key is read from the environment
variable named by ``api_key_env`` (never from the config file); a loopback server needs none.
LangSmith tracing follows LangChain's standard environment variables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from harnessrl.config import api_key_from_env

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

__all__ = ["LLMConfig", "make_chat_model"]


class LLMConfig(BaseModel):
    """The evolver's chat model on an OpenAI-compatible server."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="The model name the server knows, e.g. gpt-4.1-mini or Qwen/Qwen3-8B.")
    base_url: str | None = Field(default=None, description="Server URL, e.g. http://localhost:8000/v1; null: OpenAI.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float = Field(default=0.0, ge=0, le=2)
    timeout_s: float = Field(default=120.0, gt=0, description="Seconds per request.")
    max_retries: int = Field(default=2, ge=0, description="Retries of a failed request, with backoff.")
    max_tokens: int | None = Field(default=2048, ge=16, description="Completion tokens per turn; null: the server's.")


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
