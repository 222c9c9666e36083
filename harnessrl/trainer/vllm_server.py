"""A vLLM server (``generation.vllm_mode: server``) asked before step 1: it answers, or the run stops with why.

TRL's ``GRPOTrainer`` in server mode talks to ``trl vllm-serve`` (vLLM's OpenAI-compatible server with TRL's
weight-transfer endpoints): ``/health``, ``/v1/models``, ``/v1/completions`` and, after every update, the weight
sync. Training, the critic's trials and the evaluation all sample from it
(:class:`~harnessrl.critic.rollouts.VLLMSampler`), so a server that is down must stop the run before anything
is trained, with the address and the fix, and never let a trial or an evaluation fall back to another engine:
:func:`check_vllm_server` polls ``/health`` for up to ``generation.vllm_server_timeout_s`` (a server still
loading its model comes up within it) and reads the served model from ``/v1/models``. A server that stops
answering mid-run fails the request that needed it, with the address (``VLLMSampler``).
"""

from __future__ import annotations

import logging
import time

from pydantic import JsonValue

from harnessrl.errors import ConfigError

__all__ = ["check_vllm_server", "server_url"]

logger = logging.getLogger(__name__)


def server_url(base_url: str | None, extra: dict[str, JsonValue]) -> str:
    """The server's address as TRL reaches it: ``generation.vllm_server_base_url``, else TRL's
    ``vllm_server_host`` and ``vllm_server_port`` (``grpo.extra``; TRL's defaults 0.0.0.0 and 8000)."""
    if base_url:
        return base_url.rstrip("/")
    return f"http://{extra.get('vllm_server_host', '0.0.0.0')}:{extra.get('vllm_server_port', 8000)}"


def check_vllm_server(url: str, *, timeout_s: float, retry_s: float = 2.0) -> str:
    """Wait up to ``timeout_s`` for the vLLM server at ``url`` to answer ``/health``, then return the model it
    serves (``/v1/models``).

    Raises:
        ConfigError: the server did not answer in time, answered with an error, or serves no model: the
            message names the address, what it answered, and how to start or point to one.
    """
    import httpx

    start, last = time.monotonic(), "no answer"
    logger.info("waiting up to %.0f s for the vLLM server at %s", timeout_s, url)
    while True:
        try:
            health = httpx.get(f"{url}/health", timeout=min(10.0, max(timeout_s, 1.0)))
            if health.status_code == 200:
                break
            last = f"/health answered HTTP {health.status_code}"
        except httpx.HTTPError as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() - start >= timeout_s:
            raise ConfigError(
                f"generation.vllm_mode is 'server', and the vLLM server at {url} did not answer within "
                f"{timeout_s:.0f} s ({last}). Start it first (`trl vllm-serve --model <the run's model> --port "
                "8000` on the GPU(s) it is to use), set generation.vllm_server_base_url to where it listens, or raise "
                "generation.vllm_server_timeout_s while it loads. Training does not start without it: neither the "
                "rollouts nor the critic's trials nor the evaluation fall back to another engine"
            )
        time.sleep(min(retry_s, max(0.0, timeout_s - (time.monotonic() - start))))
    try:
        models = httpx.get(f"{url}/v1/models", timeout=10.0)
        models.raise_for_status()
        return str(models.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as e:
        raise ConfigError(
            f"the vLLM server at {url} is up but its /v1/models did not name a model ({type(e).__name__}: {e}): is "
            "it `trl vllm-serve` (or `vllm serve`) with the run's model loaded?"
        ) from e
