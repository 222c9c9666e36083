"""Judge faults, end to end: a fake OpenAI-compatible server on loopback, the real ``openai`` backend.

Every fault (server down, timeouts, HTTP 500, 429 with ``Retry-After``, a malformed or truncated
response body or answer, verdicts for criteria that were not asked) is retried with backoff, then its
verdicts are *missing* and counted, and the reward is ``None``, never 0. In training a missing reward
stays out of its group's baseline and out of the loss; a step with too many of them is skipped (no
weight moves) or stops the run (``judge.on_too_many_missing``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import Action, FakeChatServer, task_row, threaded_http_server
from pytest_httpserver import HTTPServer
from werkzeug import Response

from harnessrl.data.schema import Criterion
from harnessrl.errors import HarnessRLError, JudgeError
from harnessrl.interfaces import Harness
from harnessrl.judges import BackendVerdict, JudgeConfig, RubricJudge, RubricRequest
from harnessrl.judges.openai_compat import OpenAICompatibleJudge
from harnessrl.records.steps import Recorder
from harnessrl.trainer.generation import RolloutGeneration
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.judge_faults import HoldSkippedUpdates, JudgeFaults
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.step_records import StepRecords

KEY_ENV = "HARNESSRL_TEST_FAULTS_KEY"
MODEL = "fake-judge-faults"

# retries of the backend (transport faults), re-asks of the judge (anything still missing), their pauses
RETRIES, RE_ASKS = 2, 1
BACKOFF_S, RE_ASK_BACKOFF_S, RETRY_AFTER_S = 0.02, 0.05, 0.1
ASKS = RE_ASKS + 1
TRANSPORT_ATTEMPTS = (RETRIES + 1) * ASKS

# --------------------------------------------------------------------------------------------------
# The fake server
# --------------------------------------------------------------------------------------------------


def _criteria_of(body: dict) -> list[dict]:
    block = re.search(r"<criteria>\n(.*?)\n</criteria>", body["messages"][-1]["content"], re.DOTALL)
    return [json.loads(line) for line in block.group(1).splitlines()]


def _prompt_of(body: dict) -> str:
    return re.search(r"<task_prompt>\n(.*?)\n</task_prompt>", body["messages"][-1]["content"], re.DOTALL).group(1)


def _response_of(body: dict) -> str:
    return re.search(r"<response>\n(.*?)\n</response>", body["messages"][-1]["content"], re.DOTALL).group(1)


def completion(content: str | None, finish_reason: str = "stop") -> Response:
    message = {"role": "assistant", "content": content}
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    return Response(json.dumps(body), status=200, content_type="application/json")


def verdicts(body: dict, satisfied: Callable[[dict], bool] = lambda c: True) -> str:
    return json.dumps(
        {
            "verdicts": [
                {"criterion_id": c["criterion_id"], "reason": "checked", "satisfied": satisfied(c), "confidence": 0.9}
                for c in _criteria_of(body)
            ]
        }
    )


def good(body: dict) -> Response:
    return completion(verdicts(body))


def status(code: int, headers: dict | None = None) -> Action:
    return lambda body: Response(
        json.dumps({"error": {"message": f"fake {code}"}}),
        status=code,
        headers=headers,
        content_type="application/json",
    )


def raw_body(text: str) -> Action:
    return lambda body: Response(text, status=200, content_type="application/json")


def sleep_then(seconds: float, then: Action = good) -> Action:
    def act(body: dict) -> Response:
        time.sleep(seconds)
        return then(body)

    return act


def unknown_criteria(body: dict) -> Response:
    renamed = [
        {"criterion_id": f"criterion_{i}", "reason": "r", "satisfied": True} for i, _ in enumerate(_criteria_of(body))
    ]
    return completion(json.dumps({"verdicts": renamed}))


@pytest.fixture(scope="module")
def _http():
    with threaded_http_server() as server:
        yield server


@pytest.fixture
def fake(_http: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> FakeChatServer:
    monkeypatch.delenv(KEY_ENV, raising=False)
    return FakeChatServer(_http, default=good)


class CutServer:
    """A raw HTTP server that promises a longer body than it sends, then hangs up (a connection cut short)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.arrivals: list[float] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
                while len(body) < length:
                    body += conn.recv(65536)
                self.arrivals.append(time.monotonic())
                part = b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assis'
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n" + part
                )

    def close(self) -> None:
        self.sock.close()


def free_port_url() -> str:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def make_judge(base_url: str, **overrides) -> tuple[RubricJudge, OpenAICompatibleJudge]:
    config = JudgeConfig(
        backend="openai",
        model=MODEL,
        base_url=base_url,
        api_key_env=KEY_ENV,
        timeout_s=overrides.pop("timeout_s", 2.0),
        max_retries=RETRIES,
        missing_retries=RE_ASKS,
        missing_backoff_s=RE_ASK_BACKOFF_S,
        **overrides,
    )
    backend = OpenAICompatibleJudge(config, backoff_base_s=BACKOFF_S, backoff_max_s=1.0)
    judge = RubricJudge(backend, missing_retries=RE_ASKS, missing_backoff_s=RE_ASK_BACKOFF_S, min_coverage=0.5)
    return judge, backend


# --------------------------------------------------------------------------------------------------
# One response, three judged criteria and a programmatic one: with the judged ones missing, only 1 of 4
# positive weight is covered (< min_coverage 0.5), so the reward is None
# --------------------------------------------------------------------------------------------------

PROMPT = "Explain how plants make food."
REFERENCE = "Plants use photosynthesis."
RESPONSE = "Plants make sugar by photosynthesis, using chlorophyll."
RUBRIC = [
    Criterion(id="photo", text="Names photosynthesis", weight=2.0),
    Criterion(id="chloro", text="Mentions chlorophyll", weight=1.0),
    Criterion(id="myth", text="Repeats the soil-eating myth", weight=-1.0),
    Criterion(id="short", text="At most 40 words", weight=1.0, check={"type": "word_count", "max": 40}),
]
JUDGED = 3


def grade(judge: RubricJudge):
    (res,) = judge.grade([RubricRequest(PROMPT, RESPONSE, RUBRIC, REFERENCE)])
    return res


def assert_missing_never_zero(res, judge: RubricJudge, backend: OpenAICompatibleJudge) -> None:
    judged = [v for v in res.verdicts if v.source != "programmatic"]
    assert [v.value for v in judged] == [None] * JUDGED and res.missing == JUDGED
    assert res.reward is None  # missing, never 0
    assert judge.stats.missing_final == JUDGED and judge.stats.missing_first_try == JUDGED
    assert judge.stats.metrics()["judge/missing_rate"] == 1.0
    assert backend.missing_verdicts == JUDGED * ASKS  # counted on every ask


def min_backoff(retries: int) -> float:
    """The shortest total pause of one ask's retries (jitter draws from 0.5x to 1.5x)."""
    return sum(0.5 * BACKOFF_S * 2**k for k in range(retries))


def ask_gaps(arrivals: list[float], per_ask: int) -> list[float]:
    """Pauses between the last attempt of one ask and the first of the next."""
    return [arrivals[k * per_ask] - arrivals[k * per_ask - 1] for k in range(1, len(arrivals) // per_ask)]


# --------------------------------------------------------------------------------------------------
# Transport faults: the backend retries each ask with backoff, the judge asks again after a pause
# --------------------------------------------------------------------------------------------------

TRANSPORT_FAULTS: dict[str, Action] = {
    "timeout": sleep_then(1.0),
    "http_500": status(500),
    "malformed_body": raw_body("<html>502 Bad Gateway</html>"),
    "truncated_body": raw_body('{"id": "chatcmpl-fake", "choices": [{"index": 0, "message": {"role": "ass'),
}


@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_transport_fault_is_retried_then_missing(fake: FakeChatServer, fault: str):
    fake.default = TRANSPORT_FAULTS[fault]
    judge, backend = make_judge(fake.url, timeout_s=0.1 if fault == "timeout" else 2.0)
    res = grade(judge)

    assert_missing_never_zero(res, judge, backend)
    assert len(fake.arrivals) == backend.attempts == TRANSPORT_ATTEMPTS
    assert backend.retries == RETRIES * ASKS and backend.failed_calls == ASKS
    for ask in range(ASKS):  # exponential backoff between the tries of one ask
        times = fake.arrivals[ask * (RETRIES + 1) : (ask + 1) * (RETRIES + 1)]
        for k, (a, b) in enumerate(pairwise(times)):
            assert b - a >= 0.5 * BACKOFF_S * 2**k
    assert all(gap >= RE_ASK_BACKOFF_S for gap in ask_gaps(fake.arrivals, RETRIES + 1))


def test_server_down_is_retried_then_missing():
    judge, backend = make_judge(free_port_url())
    t0 = time.monotonic()
    res = grade(judge)

    assert_missing_never_zero(res, judge, backend)
    assert backend.attempts == TRANSPORT_ATTEMPTS and backend.failed_calls == ASKS
    assert time.monotonic() - t0 >= ASKS * min_backoff(RETRIES) + RE_ASK_BACKOFF_S


def test_connection_cut_mid_body_is_retried_then_missing():
    server = CutServer()
    try:
        judge, backend = make_judge(server.url)
        res = grade(judge)
    finally:
        server.close()

    assert_missing_never_zero(res, judge, backend)
    assert len(server.arrivals) == backend.attempts == TRANSPORT_ATTEMPTS and backend.failed_calls == ASKS
    assert all(gap >= RE_ASK_BACKOFF_S for gap in ask_gaps(server.arrivals, RETRIES + 1))


def test_429_waits_as_retry_after_says(fake: FakeChatServer):
    fake.default = status(429, headers={"Retry-After": str(RETRY_AFTER_S)})
    judge, backend = make_judge(fake.url)
    res = grade(judge)

    assert_missing_never_zero(res, judge, backend)
    assert len(fake.arrivals) == backend.attempts == TRANSPORT_ATTEMPTS
    for ask in range(ASKS):
        times = fake.arrivals[ask * (RETRIES + 1) : (ask + 1) * (RETRIES + 1)]
        assert all(b - a >= RETRY_AFTER_S * 0.95 for a, b in pairwise(times))


@pytest.mark.parametrize("fault", [*sorted(TRANSPORT_FAULTS), "http_429"])
def test_a_passing_fault_costs_only_a_retry(fake: FakeChatServer, fault: str):
    """A fault that clears is retried away: the reward is the one a healthy server gives."""
    action = TRANSPORT_FAULTS.get(fault) or status(429, headers={"Retry-After": "0"})
    fake.script = [action]
    judge, backend = make_judge(fake.url, timeout_s=0.5 if fault == "timeout" else 2.0)
    res = grade(judge)
    assert res.missing == 0 and res.reward == pytest.approx(0.75)  # (2 + 1 - 1 + 1) / 4
    assert backend.attempts == 2 and backend.retries == 1 and judge.stats.missing_final == 0


# --------------------------------------------------------------------------------------------------
# Unusable answers: the call worked, the answer is no good; the judge asks again after a pause
# --------------------------------------------------------------------------------------------------

ANSWER_FAULTS: dict[str, tuple[Action, str]] = {
    "malformed_answer": (lambda body: completion("I think the response is quite good overall."), "bad_answers"),
    "truncated_answer": (
        lambda body: completion('{"verdicts": [{"criterion_id": "photo", "reason": "names it", "sat', "length"),
        "bad_answers",
    ),
    "unknown_criteria": (unknown_criteria, "unknown_verdicts"),
}


@pytest.mark.parametrize("fault", sorted(ANSWER_FAULTS))
def test_unusable_answer_is_asked_again_then_missing(fake: FakeChatServer, fault: str):
    fake.default, counter = ANSWER_FAULTS[fault]
    judge, backend = make_judge(fake.url)
    res = grade(judge)

    assert_missing_never_zero(res, judge, backend)
    assert len(fake.arrivals) == backend.attempts == ASKS  # the call itself worked: no transport retry
    assert backend.retries == 0 and backend.failed_calls == 0
    assert getattr(backend, counter) == (JUDGED if counter == "unknown_verdicts" else 1) * ASKS
    assert judge.stats.metrics()["judge/parse_fail_rate"] == 1.0
    assert all(gap >= RE_ASK_BACKOFF_S for gap in ask_gaps(fake.arrivals, 1))


def test_unknown_verdicts_never_stand_in_for_asked_ones(fake: FakeChatServer):
    """An answer that grades one asked criterion and one that was not asked: only the asked one counts."""

    def half(body: dict) -> Response:
        asked = {c["criterion_id"] for c in _criteria_of(body)}
        items = [{"criterion_id": "photo", "reason": "r", "satisfied": True}] if "photo" in asked else []
        items.append({"criterion_id": "invented", "reason": "r", "satisfied": False})
        return completion(json.dumps({"verdicts": items}))

    fake.default = half
    judge, backend = make_judge(fake.url)
    res = grade(judge)
    v = res.by_id()
    assert v["photo"].value == 1.0 and v["chloro"].value is None and v["myth"].value is None
    assert backend.unknown_verdicts == 1 + 1  # once in each ask (the re-ask asks for chloro and myth only)
    assert res.reward == pytest.approx(1.0)  # (2 + 1) / 3: chloro left out, not read as 0


# --------------------------------------------------------------------------------------------------
# The reward function: a missing reward reaches TRL as None, never as a number
# --------------------------------------------------------------------------------------------------


class LostBackend:
    """Satisfied when the response says 'good'; no verdict at all when it says 'lost' (a judge fault)."""

    name = "lost"

    def grade(self, requests):
        return [None if "lost" in r.response else BackendVerdict(float("good" in r.response)) for r in requests]


TASK_ROWS = [
    task_row("alpha", "d", "Say something good about alpha.", "Alpha is good.", "Says good"),
    task_row("beta", "d", "Say something good about beta.", "Beta is good.", "Says good"),
]


def _write_tasks(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in TASK_ROWS), encoding="utf-8")
    return path


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    from harnessrl.data import load_tasks

    return Harness(load_tasks(_write_tasks(tmp_path / "train.jsonl")))


def _call_reward(reward: RubricReward, rows: list[dict], texts: list[str]):
    return reward(
        [r["prompt"] for r in rows],
        [[{"role": "assistant", "content": t}] for t in texts],
        task_id=[r["task_id"] for r in rows],
        rubric_version=[r["rubric_version"] for r in rows],
        completion_ids=[[1] * 3 for _ in texts],
    )


def test_reward_function_returns_none_for_a_missing_reward(harness: Harness):
    reward = RubricReward(RubricJudge(LostBackend(), missing_retries=1), harness)
    task = harness.tasks["alpha"]
    rows = [{"prompt": task.messages(), "task_id": "alpha", "rubric_version": 0}] * 3
    batch = _call_reward(reward, rows, ["good one", "lost one", "bad one"])
    assert list(batch) == [pytest.approx(1.0), None, pytest.approx(1 / 3)]
    assert batch.missing == [False, True, False]
    assert batch.results[1].missing == 1 and reward.last is batch


# --------------------------------------------------------------------------------------------------
# The trainer, without a model: missing rows out of the loss; too many: skip or stop
# --------------------------------------------------------------------------------------------------

G = 3


@pytest.fixture
def bare(harness: Harness, monkeypatch: pytest.MonkeyPatch):
    """A HarnessGRPOTrainer without a model; TRL's generation and scoring stand-in grades each row's text
    (``tr.texts``) with the real reward function and returns TRL's output keys."""
    from trl import GRPOTrainer

    def fake_trl(self, inputs):
        texts = self.texts[: len(inputs)]
        _call_reward(self.rubric_reward, inputs, texts)
        n = len(inputs)
        mask = torch.ones(n, 4, dtype=torch.long)
        mask[0, 2:] = 0
        return {
            "prompt_ids": torch.ones(n, 2, dtype=torch.long),
            "prompt_mask": torch.ones(n, 2, dtype=torch.long),
            "completion_ids": torch.ones(n, 4, dtype=torch.long),
            "completion_mask": mask,
            "advantages": torch.arange(1.0, n + 1.0),
            "num_items_in_batch": mask.sum(),
        }

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", fake_trl)
    tr = object.__new__(HarnessGRPOTrainer)
    tr.harness = harness
    tr.num_generations = G
    tr.accelerator = SimpleNamespace(num_processes=1, process_index=0, is_main_process=True, gather=lambda t: t)
    tr.rubric_reward = RubricReward(RubricJudge(LostBackend(), missing_retries=0), harness)
    tr.recorder = Recorder(None)
    tr.step_records = StepRecords(harness, tr.rubric_reward, G, zero_std_eps=0.02, flat_low=0.3, flat_high=0.8)
    tr.judge_faults = JudgeFaults()
    tr.dapo_eps, tr.dapo_max_extra_groups = None, 0
    tr.accounting = dict.fromkeys(HarnessGRPOTrainer.ACCOUNTING, 0)
    tr._metrics = {"train": defaultdict(list)}
    tr.announced = []
    tr.step_listeners = [tr.announced.append]
    tr.generation = RolloutGeneration()
    tr.timings = defaultdict(float)
    tr.state = SimpleNamespace(global_step=0)
    tr.model = SimpleNamespace(training=True)
    return tr


def test_missing_rows_leave_the_loss(bare):
    bare.texts = ["good a", "lost b", "bad c", "good d", "bad e", "good f"]
    out = bare._generate_and_score_completions([{}] * (2 * G))

    assert out["advantages"].tolist() == [1.0, 0.0, 3.0, 4.0, 5.0, 6.0]  # the others' advantages untouched
    assert out["completion_mask"][1].sum() == 0
    assert out["completion_mask"][0].tolist() == [1, 1, 0, 0] and out["completion_mask"][2:].all()
    assert int(out["num_items_in_batch"]) == int(out["completion_mask"].sum()) == 2 + 4 * 4
    assert not bare.judge_faults.skipped
    m = bare._metrics["train"]
    assert m["judge/missing_share"] == [pytest.approx(1 / 6)] and m["steps/skipped_missing"] == [0.0]
    (group, _) = bare.recorder.steps[1].groups
    assert group.rewards[1] is None and group.missing == 1  # the record keeps the truth, not a stand-in
    assert group.mean == pytest.approx((1 + 1 / 3) / 2)  # the mean of the rewards that exist


def test_too_many_missing_skips_the_step(bare, caplog: pytest.LogCaptureFixture):
    bare.texts = ["lost a", "lost b", "good c", "lost d", "lost e", "bad f"]  # 4 of 6 > 0.5
    with caplog.at_level("WARNING", logger="harnessrl.trainer.grpo_trainer"):
        out = bare._generate_and_score_completions([{}] * (2 * G))

    assert out["completion_mask"].sum() == 0 and not out["advantages"].any()
    assert int(out["num_items_in_batch"]) == 0
    assert bare.judge_faults.skipped
    m = bare._metrics["train"]
    assert m["judge/missing_share"] == [pytest.approx(4 / 6)] and m["steps/skipped_missing"] == [1.0]
    assert "SKIPPED" in caplog.text and "judge.max_missing_share" in caplog.text
    assert len(bare.announced) == 1  # the step is recorded and announced as it was
    assert [r is None for g in bare.recorder.steps[1].groups for r in g.rewards] == [True, True, False] * 2


def test_at_the_threshold_the_step_still_trains(bare):
    bare.texts = ["lost a", "lost b", "good c", "lost d", "good e", "bad f"]  # 3 of 6 = 0.5, not above
    out = bare._generate_and_score_completions([{}] * (2 * G))
    assert not bare.judge_faults.skipped
    assert out["completion_mask"].sum(dim=1).tolist() == [0, 0, 4, 0, 4, 4]


def test_too_many_missing_stops_the_run(bare):
    bare.judge_faults.on_too_many_missing = "stop"
    bare.texts = ["lost a"] * 6
    with pytest.raises(JudgeError) as err:
        bare._generate_and_score_completions([{}] * (2 * G))
    msg = str(err.value)
    assert isinstance(err.value, HarnessRLError)
    assert "6 of 6" in msg and "judge.on_too_many_missing" in msg and "judge.base_url" in msg and "--resume" in msg
    assert 1 in bare.recorder.steps  # recorded for the post-mortem
    assert bare.announced == []  # but the detectors and the evolver never act on it


def test_unknown_setting_is_a_config_error():
    from harnessrl.errors import ConfigError

    with pytest.raises(ConfigError, match="on_too_many_missing"):
        HarnessGRPOTrainer(harness=None, rubric_reward=None, recorder=None, on_too_many_missing="ignore")


def test_settings_live_in_the_judge_section():
    from pydantic import ValidationError

    assert JudgeConfig().max_missing_share == 0.5 and JudgeConfig().on_too_many_missing == "skip"
    with pytest.raises(ValidationError):
        JudgeConfig(on_too_many_missing="zero")
    with pytest.raises(ValidationError):
        JudgeConfig(max_missing_share=1.5)


def test_a_skipped_update_moves_no_weight():
    """AdamW after one real step has momentum: a zero gradient alone would still move the weight."""
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w], lr=0.1, weight_decay=0.1)

    def step(grad: float, hold: HoldSkippedUpdates | None = None) -> torch.Tensor:
        w.grad = torch.full_like(w, grad)
        before = w.detach().clone()
        if hold:
            hold.on_pre_optimizer_step(None, None, None, optimizer=opt)
        opt.step()
        if hold:
            hold.on_optimizer_step(None, None, None, optimizer=opt)
        return w.detach() - before

    faults = JudgeFaults()
    faults.update_has_signal = True
    hold = HoldSkippedUpdates(faults)
    assert step(1.0, hold).abs().sum() > 0  # a step with signal trains as usual
    assert step(0.0).abs().sum() > 0  # zero gradient, no hold: momentum and decay still move it
    faults.update_has_signal = False
    assert step(0.0, hold).abs().sum() == 0  # held: nothing moves
    assert opt.param_groups[0]["lr"] == 0.1  # and the rate is back for the next step
    assert faults.update_has_signal is False  # reset for the next update


# --------------------------------------------------------------------------------------------------
# A real (tiny) training run against the fake server: TRL's baseline, the mask, a skipped step
# --------------------------------------------------------------------------------------------------


class ScriptedJudgeServer:
    """Before training ("preflight"): every criterion passes (the judge's check before the first step).
    Step 1 ("partial"): the first rollout it sees gets HTTP 500 every time (its reward goes missing); of
    each prompt's other responses the first one to arrive passes, the rest fail, so every group has a
    spread. Step 2 ("down"): HTTP 500 for everything."""

    def __init__(self, server: FakeChatServer):
        self.server = server
        self.phase = "preflight"
        self.doomed: str | None = None
        self.winners: dict[str, str] = {}
        self._lock = threading.Lock()
        server.default = self.act

    def act(self, body: dict) -> Response:
        response, prompt = _response_of(body), _prompt_of(body)
        with self._lock:
            if self.phase == "preflight":
                return good(body)
            if self.phase == "down":
                return status(500)(body)
            if self.doomed is None:
                self.doomed = response
            if response == self.doomed:
                return status(500)(body)
            winner = self.winners.setdefault(prompt, response)
        return completion(verdicts(body, lambda c: response == winner))


def _train_config(tmp_path: Path, model_dir: Path, base_url: str, **judge) -> object:
    from harnessrl.trainer.train_config import TrainConfig

    data = _write_tasks(tmp_path / "train.jsonl")
    return TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(model_dir),
            "device": "cpu",
            "method": "fixed",
            "data": {"train": str(data), "validation": None, "test": None},
            "judge": {
                "backend": "openai",
                "model": MODEL,
                "base_url": base_url,
                "api_key_env": KEY_ENV,
                "timeout_s": 5.0,
                "max_retries": 1,
                "missing_retries": 1,
                "missing_backoff_s": 0.0,
                **judge,
            },
            "grpo": {
                "num_generations": G,
                "tasks_per_step": 2,
                "max_completion_length": 6,
                "learning_rate": 1e-2,
                "max_steps": 2,
                "save_steps": 100,
            },
            "harness": {"memory": {"enabled": False}},
            "eval": {"every_steps": None, "before_training": False},
        }
    )


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    monkeypatch.setattr(
        OpenAICompatibleJudge,
        "from_config",
        classmethod(lambda cls, config: cls(config, backoff_base_s=0.005, backoff_max_s=0.02)),
    )


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.usefixtures("one_torch_thread", "quick_retries")
def test_training_run_drops_missing_rewards_and_skips_a_judgeless_step(
    fake: FakeChatServer, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from harnessrl.trainer.run import train

    script = ScriptedJudgeServer(fake)
    trl_outputs: list[dict] = []
    trl_scoring = GRPOTrainer._generate_and_score_completions

    def spy(self, inputs):
        out = trl_scoring(self, inputs)
        trl_outputs.append(dict(out))  # TRL's own output, before the trainer masks anything
        return out

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    trained: list[dict] = []
    weights: list[dict[str, torch.Tensor]] = []

    class Watch(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):
            weights.append(_params(model))

        def on_step_end(self, args, state, control, model=None, **kwargs):
            weights.append(_params(model))
            script.phase = "down"  # the judge goes down after step 1

    def hook(tr, run):
        script.phase = "partial"  # the judge answered before training; now the steps' faults begin
        tr.add_callback(Watch())
        scoring = tr._generate_and_score_completions

        def keep(inputs):
            out = scoring(inputs)
            trained.append(dict(out))
            return out

        tr._generate_and_score_completions = keep

    config = _train_config(tmp_path, tiny_model_dir, fake.url)
    train(config, trainer_hook=hook)

    groups = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    by_step = defaultdict(list)
    for g in groups:
        by_step[g["step"]].append(g)
    rewards1 = [r for g in by_step[1] for r in g["rewards"]]
    missing1 = [r is None for r in rewards1]
    assert 1 <= sum(missing1) <= 2  # the doomed rollout (twice if the policy wrote the same text twice)
    assert all(r is None for g in by_step[2] for r in g["rewards"])  # the record keeps the truth

    # step 1, TRL's baseline: a missing reward is left out of its group's mean and std, advantage 0
    adv = trl_outputs[0]["advantages"]
    for k in range(0, 2 * G, G):
        vals = [r for r in rewards1[k : k + G] if r is not None]
        mean = sum(vals) / len(vals)
        std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5 if len(vals) > 1 else float("nan")
        for i in range(k, k + G):
            if rewards1[i] is None or std != std:
                assert adv[i] == 0
            else:
                assert float(adv[i]) == pytest.approx((rewards1[i] - mean) / (std + 1e-4), rel=1e-4)
    # ... and the trainer takes the missing rows out of the loss
    mask = trained[0]["completion_mask"]
    for i, lost in enumerate(missing1):
        if lost:
            assert mask[i].sum() == 0 and trained[0]["advantages"][i] == 0
        else:
            assert torch.equal(mask[i], trl_outputs[0]["completion_mask"][i])
            assert trained[0]["advantages"][i] == adv[i]
    assert int(trained[0]["num_items_in_batch"]) == int(mask.sum())

    # step 2: every reward missing, the step is skipped and no weight moves, momentum or not
    assert trained[1]["completion_mask"].sum() == 0 and not trained[1]["advantages"].any()
    begin, after1, after2 = weights
    assert any(not torch.equal(begin[k], after1[k]) for k in begin), "step 1 trained"
    assert all(torch.equal(after1[k], after2[k]) for k in after1), "the skipped step moved a weight"

    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    by = {m["step"]: m for m in metrics if "judge/missing_share" in m}
    assert by[1]["judge/missing_share"] == pytest.approx(sum(missing1) / (2 * G))
    assert by[1]["steps/skipped_missing"] == 0.0
    assert by[2]["judge/missing_share"] == 1.0 and by[2]["steps/skipped_missing"] == 1.0


@pytest.mark.usefixtures("one_torch_thread", "quick_retries")
def test_training_run_stops_when_the_judge_is_down(tiny_model_dir: Path, tmp_path: Path):
    from harnessrl.trainer.run import train

    # no check before training (judge.preflight: 0): the judge down from the first step stops the run there
    config = _train_config(tmp_path, tiny_model_dir, free_port_url(), on_too_many_missing="stop", preflight=0)
    with pytest.raises(JudgeError, match=r"6 of 6 rollouts .*\(judge\.on_too_many_missing: stop\)"):
        train(config)
    groups = [json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert {g["step"] for g in groups} == {1} and all(r is None for g in groups for r in g["rewards"])


@pytest.mark.usefixtures("one_torch_thread", "quick_retries")
def test_a_judge_that_does_not_answer_stops_the_run_before_any_step(tiny_model_dir: Path, tmp_path: Path):
    """Once: a dead judge's run trained its programmatic criteria, skipped its steps and ended "successfully"
    (the default on_too_many_missing: skip). Now the judge is asked before the first step."""
    from harnessrl.trainer.run import train

    url = free_port_url()
    config = _train_config(tmp_path, tiny_model_dir, url)  # the defaults: skip, preflight 3
    with pytest.raises(JudgeError, match="before training") as e:
        train(config)
    said = str(e.value)
    assert f"server {url}" in said and "APIConnectionError" in said and "Nothing was trained" in said
    assert "judge.base_url" in said and "harnessrl judge --task alpha --reference" in said
    run = tmp_path / "run"
    assert not run.exists()  # nothing written: the lock made the directory, and took it with it


def test_the_judge_check_grades_reference_answers_once_and_passes_a_judge_that_answers(harness: Harness):
    from harnessrl.judges.preflight import preflight_judge

    calls: list[int] = []

    class Backend:
        name = "counting"

        def grade(self, requests):
            calls.append(len(requests))
            return [BackendVerdict(1.0) for _ in requests]

    judge = RubricJudge(Backend())
    tasks = list(harness.tasks.values())
    checked = preflight_judge(judge, tasks, n=3)
    assert checked["tasks"] == min(3, len(tasks)) and checked["missing"] == 0 and checked["judged"] >= 1
    judge.grade([RubricRequest.for_task(t, t.reference_answer) for t in tasks[:3] if t.reference_answer])
    assert len(calls) == 1  # the reference answers' verdicts are cached: training grades them for free
    assert preflight_judge(judge, tasks, n=0)["tasks"] == 0


class Parrot:
    """A policy sampler that answers every prompt with the same text ("lost": the judge gives no verdict)."""

    def sample(self, prompts, temperature, max_new_tokens, **settings):
        return ["lost" for _ in prompts]


def test_an_evaluation_the_judge_could_not_grade_has_no_score_and_no_nan_anywhere(harness: Harness, tmp_path):
    """Once: a dead judge's evaluation scored NaN, eval.jsonl held a literal NaN (not JSON), and a validation
    score from the programmatic criteria of a few tasks was chosen as the best checkpoint."""
    from harnessrl.records.run_dir import RunDir
    from harnessrl.trainer.callbacks import EvalCallback
    from harnessrl.trainer.evaluation import evaluate_policy

    tasks = list(harness.tasks.values())
    dead = RubricJudge(LostBackend(), missing_retries=0)
    res = evaluate_policy(None, None, tasks, dead, step=2, max_new_tokens=4, sampler=Parrot())
    assert res.overall is None and all(v is None for v in res.per_task.values())
    assert res.no_score_reason.startswith(f"no task of {len(tasks)} could be scored")

    run = RunDir(tmp_path / "run")
    cb = EvalCallback(run, {"validation": tasks}, dead, every_steps=None, before_training=False, max_new_tokens=4,
                      batch_size=4)  # fmt: skip
    cb.sampler = Parrot()
    cb._run(None, None, 2)
    assert cb.best is None and not run.file("best.json").exists()  # no score: never the best
    run.append("metrics.jsonl", {"step": 2, "loss": float("nan"), "nested": {"x": [float("inf"), 1.0]}})
    run.write_json("summary.json", {"eval": {"test": {"final": float("nan")}}})

    def strict(text: str):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a JSON file of the run"))

    for name in ("eval.jsonl", "events.jsonl", "metrics.jsonl"):
        rows = [strict(line) for line in run.file(name).read_text().splitlines()]
        assert rows
    assert strict(run.file("eval.jsonl").read_text())["overall"] is None
    assert strict(run.file("metrics.jsonl").read_text()) == {"step": 2, "loss": None, "nested": {"x": [None, 1.0]}}
    assert strict(run.file("summary.json").read_text()) == {"eval": {"test": {"final": None}}}
