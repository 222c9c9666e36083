"""The ``openai`` judge backend against a real local HTTP server that fakes the chat-completions API."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest
from helpers import Action, FakeChatServer, threaded_http_server
from pytest_httpserver import HTTPServer
from werkzeug import Response

from harnessrl.data.schema import Criterion
from harnessrl.errors import JudgeError
from harnessrl.judges import BackendVerdict, GradeRequest, JudgeConfig, RubricJudge, RubricRequest, build_judge
from harnessrl.judges.openai_compat import OpenAICompatibleJudge, parse_answer

KEY_ENV = "HARNESSRL_TEST_JUDGE_KEY"
MODEL = "fake-judge-1"

# --------------------------------------------------------------------------------------------------
# A fake OpenAI-compatible server
# --------------------------------------------------------------------------------------------------


def _criteria_of(body: dict) -> list[dict]:
    user = body["messages"][-1]["content"]
    block = re.search(r"<criteria>\n(.*?)\n</criteria>", user, re.DOTALL)
    assert block, "the user message lists the criteria in a <criteria> block"
    return [json.loads(line) for line in block.group(1).splitlines()]


def _response_of(body: dict) -> str:
    return re.search(r"<response>\n(.*?)\n</response>", body["messages"][-1]["content"], re.DOTALL).group(1)


def _decide(text: str, response: str) -> bool:
    """The fake judge's rule: a criterion is satisfied when its last word appears in the response."""
    word = re.findall(r"\w+", text.lower())[-1]
    return word in response.lower()


def completion(content: str | None, *, refusal: str | None = None, finish_reason: str = "stop") -> Response:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }
    return Response(json.dumps(body), status=200, content_type="application/json")


def good_answer(body: dict, *, drop: tuple[str, ...] = ()) -> str:
    response = _response_of(body)
    verdicts = [
        {
            "criterion_id": c["criterion_id"],
            "reason": f"checked {c['criterion_id']}",
            "satisfied": _decide(c["text"], response),
            "confidence": 0.8,
        }
        for c in _criteria_of(body)
        if c["criterion_id"] not in drop
    ]
    return json.dumps({"verdicts": verdicts})


def answer(body: dict) -> Response:
    return completion(good_answer(body))


def status(code: int) -> Action:
    return lambda body: Response(
        json.dumps({"error": {"message": f"fake {code}"}}), status=code, content_type="application/json"
    )


def text(content: str) -> Action:
    return lambda body: completion(content)


def sleep_then(seconds: float, then: Action = answer) -> Action:
    def act(body: dict) -> Response:
        time.sleep(seconds)
        return then(body)

    return act


@pytest.fixture(scope="module")
def _server():
    with threaded_http_server() as server:
        yield server


@pytest.fixture
def fake(_server: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> FakeChatServer:
    monkeypatch.delenv(KEY_ENV, raising=False)
    return FakeChatServer(_server, default=answer)


def make_backend(fake: FakeChatServer, **overrides) -> OpenAICompatibleJudge:
    settings = {
        "backend": "openai",
        "model": MODEL,
        "base_url": fake.url,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 2,
        **overrides,
    }
    return OpenAICompatibleJudge(JudgeConfig(**settings), backoff_base_s=0.001, backoff_max_s=0.01)


# --------------------------------------------------------------------------------------------------
# Rubrics and requests
# --------------------------------------------------------------------------------------------------

PROMPT = "Explain how plants make food."
REFERENCE = "Plants use photosynthesis: light, water and carbon dioxide become sugar and oxygen."
GOOD = "Plants make sugar by photosynthesis, using light energy captured by chlorophyll."
BAD = "Plants eat soil through their roots, which is a common myth."

C_PHOTO = Criterion(id="photo", text="Names photosynthesis", weight=2.0)
C_CHLORO = Criterion(id="chloro", text="Mentions chlorophyll", weight=1.0)
P_MYTH = Criterion(id="myth", text="Repeats the soil-eating myth", weight=-1.0)
C_SHORT = Criterion(id="short", text="At most 40 words", weight=1.0, check={"type": "word_count", "max": 40})
RUBRIC = [C_PHOTO, C_CHLORO, P_MYTH, C_SHORT]


def requests_for(response: str, criteria=(C_PHOTO, C_CHLORO, P_MYTH)) -> list[GradeRequest]:
    return [GradeRequest(PROMPT, response, c, REFERENCE) for c in criteria]


# --------------------------------------------------------------------------------------------------
# Parsing and grouping
# --------------------------------------------------------------------------------------------------


def test_parses_verdicts_one_call_per_response(fake: FakeChatServer):
    backend = make_backend(fake)
    reqs = requests_for(GOOD) + requests_for(BAD)
    out = backend.grade(reqs)

    assert len(fake.bodies) == 2, "one chat call per (prompt, response, reference) group"
    assert backend.calls == 2 and backend.failed_calls == 0 and backend.bad_answers == 0
    assert all(isinstance(v, BackendVerdict) for v in out)
    assert [v.value for v in out] == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]  # the pitfall is "satisfied" for BAD
    assert all(v.confidence == pytest.approx(0.8) for v in out)
    assert out[0].reason == "checked photo"
    assert {len(_criteria_of(b)) for b in fake.bodies} == {3}


def test_request_body_carries_model_criteria_and_schema(fake: FakeChatServer):
    backend = make_backend(fake, temperature=0.3, max_tokens=321)
    backend.grade(requests_for(GOOD))

    (body,) = fake.bodies
    assert body["model"] == MODEL
    assert body["temperature"] == pytest.approx(0.3)
    assert body["max_tokens"] == 321
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["verdicts"] and schema["additionalProperties"] is False
    item = schema["$defs"]["CriterionVerdict"]
    assert item["required"] == ["criterion_id", "reason", "satisfied", "confidence"]  # reason before verdict
    assert item["additionalProperties"] is False

    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert PROMPT in user["content"] and GOOD in user["content"] and REFERENCE in user["content"]
    crits = {c["criterion_id"]: c for c in _criteria_of(body)}
    assert crits["photo"] == {"criterion_id": "photo", "text": "Names photosynthesis", "pitfall": False}
    assert crits["myth"]["pitfall"] is True
    assert "COMMITS" in user["content"]  # the pitfall convention is explained
    # no key in the environment and a localhost server: the dummy key, as vLLM expects
    assert fake.headers[0]["Authorization"] == "Bearer EMPTY"


def test_key_from_environment_is_sent(fake: FakeChatServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    make_backend(fake).grade(requests_for(GOOD)[:1])
    assert fake.headers[0]["Authorization"] == "Bearer sk-test-123"


def test_no_reference_answer_leaves_it_out(fake: FakeChatServer):
    make_backend(fake).grade([GradeRequest(PROMPT, GOOD, C_PHOTO, None)])
    assert "<reference_answer>" not in fake.bodies[0]["messages"][-1]["content"]


@pytest.mark.parametrize("mode", ["json_object", "none"])
def test_other_structured_output_modes(fake: FakeChatServer, mode: str):
    if mode == "none":  # a model without JSON mode: fenced JSON after some chatter still parses
        fake.default = lambda body: completion("Here you go:\n```json\n" + good_answer(body) + "\n```")
    out = make_backend(fake, structured_output=mode).grade(requests_for(GOOD))
    body = fake.bodies[0]
    if mode == "json_object":
        assert body["response_format"] == {"type": "json_object"}
    else:
        assert "response_format" not in body
    assert [v.value for v in out] == [1.0, 1.0, 0.0]


def test_same_id_different_text_gets_its_own_verdict(fake: FakeChatServer):
    edited = Criterion(id="photo", text="Mentions chlorophyll", weight=2.0)  # a candidate rubric's edit
    out = make_backend(fake).grade(
        [GradeRequest(PROMPT, BAD, C_PHOTO), GradeRequest(PROMPT, BAD, edited), GradeRequest(PROMPT, BAD, C_PHOTO)]
    )
    assert len(fake.bodies) == 1
    assert sorted(c["criterion_id"] for c in _criteria_of(fake.bodies[0])) == ["photo", "photo#2"]
    assert [v.value for v in out] == [0.0, 0.0, 0.0]
    fake.bodies.clear()
    out = make_backend(fake).grade([GradeRequest(PROMPT, GOOD, C_PHOTO), GradeRequest(PROMPT, GOOD, edited)])
    assert [v.value for v in out] == [1.0, 1.0]


def test_confidence_is_clamped_and_optional():
    parsed = parse_answer(
        json.dumps(
            {
                "verdicts": [
                    {"criterion_id": "a", "reason": "r", "satisfied": True, "confidence": 7},
                    {"criterion_id": "b", "reason": "r", "satisfied": False, "confidence": -1},
                    {"criterion_id": "c", "reason": "r", "satisfied": True},
                    {"criterion_id": "d", "reason": "r", "satisfied": "perhaps", "confidence": 0.5},
                ]
            }
        )
    )
    assert parsed["a"].confidence == 1.0 and parsed["b"].confidence == 0.0 and parsed["c"].confidence is None
    assert "d" not in parsed  # a malformed entry is dropped, the others kept


# --------------------------------------------------------------------------------------------------
# Through RubricJudge
# --------------------------------------------------------------------------------------------------


def test_rubric_judge_mixes_judged_and_programmatic(fake: FakeChatServer):
    judge = RubricJudge(make_backend(fake))
    good, bad = judge.grade(
        [RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE), RubricRequest(PROMPT, BAD, RUBRIC, REFERENCE)]
    )

    assert len(fake.bodies) == 2
    assert all(len(_criteria_of(b)) == 3 for b in fake.bodies)  # the word-count check is never sent
    assert good.by_id()["short"].source == "programmatic"
    # GOOD: photo 2 + chloro 1 + short 1 of 4, no pitfall -> 1.0
    assert good.reward == pytest.approx(1.0) and good.missing == 0
    # BAD: short 1, pitfall -1 -> (1 - 1) / 4 = 0
    assert bad.reward == pytest.approx(0.0)
    assert bad.by_id()["myth"].value == 1.0

    again = judge.grade([RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE)])[0]
    assert len(fake.bodies) == 2, "cached verdicts need no new call"
    assert again.reward == good.reward


BAD_ANSWERS = {
    "not_json": text("I think the response is quite good overall."),
    "truncated_json": text('{"verdicts": [{"criterion_id": "photo", "reason": "names it", "satis'),
    "wrong_shape": text('{"grades": {"photo": true}}'),
    "refusal": lambda body: completion(None, refusal="I can't help with that."),
}


@pytest.mark.parametrize("kind", sorted(BAD_ANSWERS))
def test_unusable_answer_is_missing_never_zero(fake: FakeChatServer, kind: str):
    fake.default = BAD_ANSWERS[kind]
    backend = make_backend(fake)
    judge = RubricJudge(backend, missing_retries=1, min_coverage=0.1)
    (res,) = judge.grade([RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE)])

    judged = [v for v in res.verdicts if v.criterion_id != "short"]
    assert all(v.value is None and v.missing for v in judged)
    assert res.missing == 3
    assert judge.stats.missing_final == 3
    assert judge.stats.metrics()["judge/parse_fail_rate"] > 0
    assert len(fake.bodies) == 2  # asked once, then once more for the missing ones
    assert backend.bad_answers == 2
    # only the programmatic criterion is left: 1 of 1 covered
    assert res.reward == pytest.approx(1.0)


def test_absent_criterion_is_missing_and_reward_uses_the_rest(fake: FakeChatServer):
    fake.default = lambda body: completion(good_answer(body, drop=("chloro",)))
    judge = RubricJudge(make_backend(fake), missing_retries=1)
    (res,) = judge.grade([RubricRequest(PROMPT, BAD, RUBRIC, REFERENCE)])

    v = res.by_id()
    assert v["chloro"].value is None
    assert v["photo"].value == 0.0 and v["myth"].value == 1.0
    assert judge.stats.missing_final == 1 and judge.stats.missing_first_try == 1
    assert judge.stats.metrics()["judge/parse_fail_rate"] > 0
    # photo 0 (w 2) + short 1 (w 1) - myth 1 (w 1), over the covered positive weight 3
    assert res.reward == pytest.approx(0.0)
    fake.default = lambda body: completion(good_answer(body, drop=("chloro",)))
    (good,) = judge.grade([RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE)])
    assert good.reward == pytest.approx(1.0)  # (2 + 1) / 3, chloro left out rather than read as 0


def test_missing_verdict_filled_on_retry(fake: FakeChatServer):
    fake.script = [text("not json at all")]
    judge = RubricJudge(make_backend(fake), missing_retries=1)
    (res,) = judge.grade([RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE)])
    assert res.missing == 0 and res.reward == pytest.approx(1.0)
    assert judge.stats.missing_first_try == 3 and judge.stats.missing_final == 0


# --------------------------------------------------------------------------------------------------
# Failures, retries, timeouts, concurrency
# --------------------------------------------------------------------------------------------------


def test_retries_on_500_and_429_then_succeeds(fake: FakeChatServer):
    fake.script = [status(500), status(429)]
    backend = make_backend(fake, max_retries=2)
    out = backend.grade(requests_for(GOOD))
    assert [v.value for v in out] == [1.0, 1.0, 0.0]
    assert len(fake.bodies) == 3 and backend.attempts == 3 and backend.retries == 2
    assert backend.calls == 1 and backend.failed_calls == 0


def test_gives_up_after_retries(fake: FakeChatServer):
    fake.default = status(503)
    backend = make_backend(fake, max_retries=1)
    assert backend.grade(requests_for(GOOD)) == [None, None, None]
    assert len(fake.bodies) == 2 and backend.failed_calls == 1 and backend.missing_verdicts == 3


@pytest.mark.parametrize("code", [400, 401, 404])
def test_no_retry_on_other_4xx(fake: FakeChatServer, code: int):
    fake.default = status(code)
    backend = make_backend(fake, max_retries=3)
    assert backend.grade(requests_for(GOOD)) == [None, None, None]
    assert len(fake.bodies) == 1 and backend.retries == 0


def test_timeout_is_missing(fake: FakeChatServer):
    fake.default = sleep_then(5.0)
    backend = make_backend(fake, timeout_s=0.2, max_retries=1)
    out = backend.grade(requests_for(GOOD))
    assert out == [None, None, None]
    # the client gave up at its timeout, without waiting for the server: every request the server got is still
    # being answered when grade returns (an order of events, not a wall-clock bound)
    assert fake.arrivals and fake.in_flight == len(fake.arrivals), "the client waited for the server's answer"
    assert backend.attempts == 2 and backend.failed_calls == 1


def test_timeout_then_success(fake: FakeChatServer):
    fake.script = [sleep_then(1.0)]
    out = make_backend(fake, timeout_s=0.3, max_retries=1).grade(requests_for(GOOD))
    assert [v.value for v in out] == [1.0, 1.0, 0.0]


def test_connection_refused_is_missing():
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = JudgeConfig(
        backend="openai",
        model=MODEL,
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key_env=KEY_ENV,
        timeout_s=1.0,
        max_retries=1,
    )
    backend = OpenAICompatibleJudge(config, backoff_base_s=0.001)
    assert backend.grade(requests_for(GOOD)) == [None, None, None]
    assert backend.attempts == 2 and backend.failed_calls == 1


def test_concurrency_is_bounded(fake: FakeChatServer):
    fake.default = sleep_then(0.1)
    backend = make_backend(fake, max_concurrency=2)
    reqs = [GradeRequest(PROMPT, f"{GOOD} ({i})", C_PHOTO) for i in range(6)]
    out = backend.grade(reqs)
    assert all(v is not None and v.value == 1.0 for v in out)
    assert len(fake.bodies) == 6
    assert 1 <= fake.max_in_flight <= 2


def test_grade_inside_a_running_event_loop(fake: FakeChatServer):
    backend = make_backend(fake)

    async def main():
        return backend.grade(requests_for(GOOD))

    out = asyncio.run(main())
    assert [v.value for v in out] == [1.0, 1.0, 0.0]


def test_empty_batch_makes_no_call(fake: FakeChatServer):
    assert make_backend(fake).grade([]) == []
    assert fake.bodies == []


# --------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------


def test_missing_model_is_a_judge_error():
    with pytest.raises(JudgeError, match=r"judge\.model"):
        OpenAICompatibleJudge.from_config(JudgeConfig(backend="openai", base_url="http://localhost:8000/v1"))


@pytest.mark.parametrize("base_url", ["https://api.example.com/v1", None])
def test_missing_key_for_remote_server_is_a_judge_error(monkeypatch: pytest.MonkeyPatch, base_url):
    monkeypatch.delenv(KEY_ENV, raising=False)
    config = JudgeConfig(backend="openai", model=MODEL, base_url=base_url, api_key_env=KEY_ENV)
    with pytest.raises(JudgeError, match=KEY_ENV):
        OpenAICompatibleJudge.from_config(config)
    monkeypatch.setenv(KEY_ENV, "sk-remote")
    assert OpenAICompatibleJudge.from_config(config).name == "openai"


def test_localhost_without_key_uses_dummy(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    for url in ("http://localhost:8000/v1", "http://127.0.0.1:9/v1"):
        config = JudgeConfig(backend="openai", model=MODEL, base_url=url, api_key_env=KEY_ENV)
        assert OpenAICompatibleJudge.from_config(config)._api_key == "EMPTY"


def test_build_judge(fake: FakeChatServer):
    judge = build_judge(
        JudgeConfig(
            backend="openai", model=MODEL, base_url=fake.url, api_key_env=KEY_ENV, missing_retries=2, min_coverage=0.6
        )
    )
    assert isinstance(judge, RubricJudge) and isinstance(judge.backend, OpenAICompatibleJudge)
    assert judge.name == "openai" and judge.missing_retries == 2 and judge.min_coverage == 0.6
    (res,) = judge.grade([RubricRequest(PROMPT, GOOD, RUBRIC, REFERENCE)])
    assert res.reward == pytest.approx(1.0)
    built = build_judge({"backend": "openai", "model": MODEL, "base_url": fake.url, "api_key_env": KEY_ENV})
    assert isinstance(built.backend, OpenAICompatibleJudge)
