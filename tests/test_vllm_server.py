"""vLLM server mode against a real local HTTP server that speaks enough of ``trl vllm-serve`` for these calls.

TRL 1.16's ``VLLMClient`` talks to vLLM's OpenAI-compatible server: ``GET /health``, ``GET /v1/models``,
``POST /v1/completions`` (token ids in and out, ``n`` completions per prompt, prompt-major) and, for the weight
sync, ``/reset_prefix_cache`` over HTTP after an NCCL transfer. The stand-in below answers those over HTTP on
127.0.0.1 with deterministic token ids; TRL's own client (built past its vLLM import check, the only part that
needs vLLM installed) sends the requests, so the request bodies are TRL's and the sampler's.

What the stand-in does not cover: the weight transfer itself (TRL sends the tensors over NCCL from a
communicator that needs vLLM and a GPU; here the sync step is the prefix-cache reset alone), real sampling
(its completions are a function of the prompt, ``n`` and the seed), the chat endpoint, images, logprobs, and
TRL's retrying session (the client here has none, so a dead server fails the first request instead of after
TRL's back-off of about a minute).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harnessrl.critic.rollouts import VLLMSampler
from harnessrl.errors import ConfigError
from harnessrl.trainer.vllm_server import check_vllm_server, server_url


class VLLMStandIn:
    """``trl vllm-serve``'s HTTP surface as TRL's client uses it (tests only): records every request."""

    def __init__(self, model: str = "tiny-policy"):
        self.model = model
        self.requests: list[tuple[str, dict]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                stand_in.requests.append((self.path, {}))
                if self.path.rstrip("/") == "/health":
                    self._answer({})
                elif self.path.rstrip("/") == "/v1/models" and stand_in.model:
                    self._answer({"object": "list", "data": [{"id": stand_in.model, "object": "model"}]})
                else:
                    self._answer({"detail": "Not Found"}, 404)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stand_in.requests.append((self.path, body))
                if self.path.rstrip("/") == "/reset_prefix_cache":
                    self._answer({})
                elif self.path.rstrip("/") == "/v1/completions":
                    self._answer({"choices": stand_in.choices(body)})
                else:
                    self._answer({"detail": "Not Found"}, 404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def completion(prompt: list[int], seed: int, i: int, max_tokens: int) -> list[int]:
        """A prompt's i-th completion's ids: a function of the prompt, the seed and i (no model)."""
        return [1000 + (sum(prompt) + seed + i * 7 + k) % 500 for k in range(min(3, max_tokens))]

    def choices(self, body: dict) -> list[dict]:
        n, seed = body["n"], body.get("seed", 0)
        return [
            {"index": j, "prompt_token_ids": p, "token_ids": self.completion(p, seed, i, body["max_tokens"]),
             "logprobs": None, "text": ""}
            for j, (p, i) in enumerate((p, i) for p in body["prompt"] for i in range(n))
        ]  # fmt: skip

    def __enter__(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __exit__(self, *exc):
        if self.thread.is_alive():
            self.stop()


def trl_client(url: str):
    """TRL's ``VLLMClient`` for ``url``, built as its constructor builds it after the vLLM import check."""
    import requests
    from trl.generation.vllm_client import VLLMClient

    client = VLLMClient.__new__(VLLMClient)
    client.session = requests.Session()
    client.base_url = url
    client.check_server(0.0)
    client.model = client._get(f"{url}/v1/models")["data"][0]["id"]
    return client


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def server_generation(client):
    """TRL's ``VLLMGeneration`` in server mode as the sampler reads it (its sampling settings, its client)."""
    from types import SimpleNamespace

    return SimpleNamespace(mode="server", vllm_client=client, top_p=1.0, top_k=0, min_p=0.0, repetition_penalty=1.0,
                           generation_kwargs={}, server_base_url=client.base_url)  # fmt: skip


def test_trials_and_evaluation_sample_from_the_server_after_the_sync(real_tokenizer):
    tok = real_tokenizer
    with VLLMStandIn() as server:
        assert check_vllm_server(server.url, timeout_s=5) == "tiny-policy"
        client = trl_client(server.url)
        order: list[str] = []

        def sync():  # the weight sync's HTTP part (TRL resets the prefix cache after the NCCL transfer)
            order.append("sync")
            client.reset_prefix_cache()

        sampler = VLLMSampler(server_generation(client), tok, seed=3, prepare=sync)
        texts = sampler.sample([chat("Q1")] * 3 + [chat("Q2")], 0.7, 4)
        posts = [(path, body) for path, body in server.requests if path.startswith(("/v1/completions", "/reset"))]
        assert [p for p, _ in posts] == ["/reset_prefix_cache", "/v1/completions", "/v1/completions"]  # sync first
        first, second = (body for _, body in posts[1:])
        (q1,), (q2,) = first["prompt"], second["prompt"]
        assert (first["n"], second["n"]) == (3, 1)  # copies of a prompt: one request with n
        assert first["temperature"] == 0.7 and first["max_tokens"] == 4 and first["model"] == "tiny-policy"
        assert isinstance(first["seed"], int) and first["seed"] != second["seed"]
        assert first["logprobs"] is None and first["return_token_ids"] is True
        text = tok.apply_chat_template(chat("Q1"), tokenize=False, add_generation_prompt=True)
        assert q1 == tok(text, add_special_tokens=False)["input_ids"]  # token ids of the chat template
        expected = [server.completion(q1, first["seed"], i, 4) for i in range(3)]
        expected.append(server.completion(q2, second["seed"], 0, 4))
        assert texts == tok.batch_decode(expected, skip_special_tokens=True)
        assert len(set(texts[:3])) == 3  # the n completions of one request differ

        server.stop()  # the server dies mid-run: the sync or the request that needed it fails, with the address
        with pytest.raises(RuntimeError, match=rf"weight sync .*server at {server.url}.*failed.*--resume"):
            sampler.sample([chat("Q1")], 1.0, 4)
        sampler.prepare = None  # the weights are fresh: the generation request itself fails
        with pytest.raises(RuntimeError, match=rf"server at {server.url}\) failed a request of 1 prompt.*--resume"):
            sampler.sample([chat("Q1")], 1.0, 4)


def test_a_server_that_is_down_stops_the_run_before_step_1():
    with VLLMStandIn() as server:
        url = server.url
    # a bounded wait, not a hang (a hang meets the test's timeout): the error says how long it waited
    with pytest.raises(ConfigError, match=rf"vLLM server at {url} did not answer within 1 s.*trl vllm-serve"):
        check_vllm_server(url, timeout_s=1.0, retry_s=0.2)
    assert server_url(None, {}) == "http://0.0.0.0:8000"  # TRL's defaults
    assert server_url("http://gpu:9000/", {"vllm_server_port": 1}) == "http://gpu:9000"
    assert server_url(None, {"vllm_server_host": "10.0.0.2", "vllm_server_port": 8001}) == "http://10.0.0.2:8001"


def test_a_server_that_answers_health_but_serves_no_model_is_refused():
    # another HTTP server on the port: /health answers, /v1/models 404s
    with VLLMStandIn(model="") as server, pytest.raises(ConfigError, match=r"is up but its /v1/models"):
        check_vllm_server(server.url, timeout_s=2)
