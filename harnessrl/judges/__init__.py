"""Rubric judges: one interface (:class:`RubricJudge`), three backends (semantic, local-lm, openai)."""

from __future__ import annotations

import importlib

from harnessrl.errors import ConfigError
from harnessrl.judges.config import JudgeConfig
from harnessrl.judges.rubric_judge import (
    BackendVerdict,
    GradeRequest,
    GradeResult,
    JudgeBackend,
    RubricJudge,
    RubricRequest,
    Verdict,
    aggregate_reward,
)

__all__ = [
    "BACKENDS",
    "BackendVerdict",
    "GradeRequest",
    "GradeResult",
    "JudgeBackend",
    "JudgeConfig",
    "RubricJudge",
    "RubricRequest",
    "Verdict",
    "aggregate_reward",
    "build_judge",
]

BACKENDS: dict[str, str] = {
    "semantic": "harnessrl.judges.semantic:SemanticJudge",
    "local-lm": "harnessrl.judges.local_lm:LocalLMJudge",
    "openai": "harnessrl.judges.openai_compat:OpenAICompatibleJudge",
}
"""Backend names and where they live; any other ``module:Factory`` path works too."""


def _resolve(name: str):
    target = BACKENDS.get(name, name)
    if ":" not in target:
        raise ConfigError(
            f"unknown judge backend {name!r}; use one of {', '.join(BACKENDS)} "
            "or a dotted path 'package.module:Factory'"
        )
    module, attr = target.split(":", 1)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"judge backend {name!r}: cannot import {target} ({e})") from e


def build_judge(config: JudgeConfig | dict | None = None) -> RubricJudge:
    """Build the configured backend (``Factory.from_config(config)``) behind a :class:`RubricJudge`."""
    if config is None:
        config = JudgeConfig()
    elif isinstance(config, dict):
        config = JudgeConfig.model_validate(config)
    factory = _resolve(config.backend)
    backend = factory.from_config(config) if hasattr(factory, "from_config") else factory(config)
    if not isinstance(backend, JudgeBackend):
        raise ConfigError(
            f"judge backend {config.backend!r} built {type(backend).__name__}, "
            "which has no name and grade(requests) method"
        )
    return RubricJudge(
        backend,
        missing_retries=config.missing_retries,
        missing_backoff_s=config.missing_backoff_s,
        min_coverage=config.min_coverage,
        cache_size=config.cache_size,
    )
