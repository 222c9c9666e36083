"""The LLM backend of the evolver: any LangChain chat model, named in the config.

Three ways, from :class:`~harnessrl.graph.state.LLMConfig`:

- **a provider string**, as LangChain's ``init_chat_model`` reads it: ``openai:gpt-4.1-mini``,
  ``anthropic:claude-sonnet-4-5``, ``ollama:qwen3:8b``, ... (the provider's integration package must be
  installed: ``langchain-anthropic``, ``langchain-ollama``); a bare model name is an OpenAI-compatible
  server's (``provider: openai``), e.g. a local vLLM or SGLang server at ``base_url``;
- **a factory** by dotted path (``factory: my_pkg.models:make_evolver``): called with the
  ``LLMConfig``, it returns any chat model with ``bind_tools``;
- the rule-based model (``evolver.backend: rule-based``, not here).

The key is read from the environment variable named by ``api_key_env`` (never from the config file);
a loopback server needs none. Every model is bound to the evolver's tools by the graph's nodes.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import JsonValue

from harnessrl.config import api_key_from_env
from harnessrl.errors import ConfigError
from harnessrl.graph.state import LLMConfig

__all__ = ["make_chat_model"]

# what each provider's chat model class calls the settings LLMConfig has (None: it has no such setting)
_KWARGS: dict[str, dict[str, str | None]] = {
    "ollama": {"base_url": "base_url", "max_tokens": "num_predict", "timeout_s": None, "max_retries": None},
}
_NO_KEY = {"ollama"}  # providers that take no API key


def make_chat_model(config: LLMConfig) -> Any:
    """The chat model ``config`` names (see the module docstring).

    Raises :class:`~harnessrl.errors.ConfigError` when the provider's package is missing, a remote server's
    key is not set, or the factory cannot be loaded or returns something that cannot call tools.
    """
    if config.factory:
        return _from_factory(config)
    provider, model = config.provider_and_model()
    names = _KWARGS.get(provider, {})
    settings = {
        "base_url": config.base_url,
        "temperature": config.temperature,
        "timeout_s": config.timeout_s,
        "max_retries": config.max_retries,
        "max_tokens": config.max_tokens,
    }
    kwargs: dict[str, JsonValue] = {}
    for name, value in settings.items():
        key = names.get(name, "timeout" if name == "timeout_s" else name)
        if key is not None and value is not None:
            kwargs[key] = value
    if provider not in _NO_KEY:
        key = api_key_from_env(config.api_key_env, config.base_url, "evolver.llm.api_key_env")
        if key is not None:
            kwargs["api_key"] = key
    kwargs.update(config.extra)
    from langchain.chat_models import init_chat_model  # imported when an LLM evolver is really built

    try:
        return init_chat_model(model, model_provider=provider, **kwargs)
    except ImportError as e:
        raise ConfigError(f"evolver.llm: provider {provider!r} needs its LangChain package: {e}") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"evolver.llm: cannot make a {provider!r} chat model for {model!r}: {e}") from None


def _from_factory(config: LLMConfig) -> Any:
    path = str(config.factory)
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigError(
            f"evolver.llm.factory {path!r} cannot be imported ({type(e).__name__}: {e}); give 'package.module:function'"
        ) from None
    model = factory(config)
    if not callable(getattr(model, "bind_tools", None)):
        raise ConfigError(
            f"evolver.llm.factory {path!r} returned {type(model).__name__}, which has no bind_tools: it must return "
            "a LangChain chat model that can call tools"
        )
    return model
