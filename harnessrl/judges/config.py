"""Settings of the judge: which backend, which model or server, and its limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["JudgeConfig"]


class JudgeConfig(BaseModel):
    """How rewards are graded. The embedded default (``semantic``) is an offline stand-in;
    point ``backend: openai`` with ``base_url`` at a real judge (OpenAI, vLLM, any compatible server)
    for real runs."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(
        default="semantic",
        description="semantic | local-lm | openai, or a dotted path 'package.module:Factory'",
    )
    model: str | None = Field(
        default=None,
        description="local-lm: a Hugging Face id, a local path or 'embedded'; openai: the model name",
    )
    base_url: str | None = Field(default=None, description="openai: server URL, e.g. http://localhost:8000/v1")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="openai: environment variable holding the key")
    structured_output: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema",
        description="openai: how the server is asked for JSON verdicts. json_schema: the verdicts' schema, strict "
        "(OpenAI, vLLM, SGLang); json_object: any JSON object, for a server without schema support; none: no "
        "response_format, for a server that refuses both (malformed answers are then retried, then missing).",
    )
    max_concurrency: int = Field(
        default=8,
        ge=1,
        description="openai: requests in flight at once (one per response, all its criteria together). Raise it "
        "for a server with spare capacity, lower it on 429s.",
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="openai: seconds a request may take before it is retried (then counted as missing).",
    )
    max_retries: int = Field(default=3, ge=0, description="openai: retries of a failed request, with backoff")
    temperature: float = Field(
        default=0.0, ge=0, description="openai: the judge's sampling temperature (0: its most likely verdicts)."
    )
    max_tokens: int = Field(
        default=600,
        ge=16,
        description="openai: most tokens of one answer (the verdicts of one response's criteria); raise it for "
        "rubrics of many criteria or a model that reasons first, since an answer cut short is missing verdicts.",
    )
    batch_size: int = Field(default=32, ge=1, description="semantic / local-lm: pairs scored per forward pass")
    device: str | None = Field(
        default=None,
        description="semantic / local-lm: torch device (cpu, cuda, cuda:1, auto); null: the training run's device "
        "(alone, e.g. `harnessrl judge`: the GPU where there is one)",
    )

    def where(self) -> str:
        """Where this judge runs, in words: its device, or the server for the openai backend."""
        if self.backend == "openai":
            return f"server {self.base_url or 'api.openai.com'}"
        if self.backend in ("semantic", "local-lm"):
            return self.device or "auto"
        return "in the backend's own process"

    max_length: int | None = Field(
        default=None, ge=64, description="local-lm: grading prompt tokens (default: the model's limit, at most 2048)"
    )
    missing_retries: int = Field(default=1, ge=0, description="times a missing verdict is asked for again")
    missing_backoff_s: float = Field(
        default=0.5, ge=0, description="wait before asking for missing verdicts again; doubles on each further try"
    )
    min_coverage: float = Field(default=0.5, gt=0, le=1, description="share of positive weight needing a verdict")
    cache_size: int = Field(
        default=200_000,
        ge=0,
        description="Verdicts kept in the judge's cache, keyed by (criterion text, response, prompt, reference): "
        "a re-grade after a rubric edit only grades what changed. Least recently used go first; 0: no cache.",
    )
    max_missing_share: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="training: the share of a step's rollouts that may have no reward (judge faults) before "
        "on_too_many_missing applies",
    )
    preflight: int = Field(
        default=3,
        ge=0,
        description="training: reference answers graded before the first step to check that the judge answers; "
        "a judge that gives no verdict on any of them stops the run before anything is trained (0: no check)",
    )
    on_too_many_missing: Literal["skip", "stop"] = Field(
        default="skip",
        description="training, when a step's missing share is above max_missing_share: skip (the step trains on "
        "nothing, counted in steps/skipped_missing) or stop (the run ends with an error)",
    )
