"""RubricJudge with a scripted backend: programmatic criteria, the verdict cache, missing verdicts, stats,
and build_judge's backend resolution. No model is loaded."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import pytest

from harnessrl.data import Criterion, Task
from harnessrl.errors import ConfigError
from harnessrl.judges import (
    BACKENDS,
    BackendVerdict,
    GradeRequest,
    JudgeBackend,
    JudgeConfig,
    RubricJudge,
    RubricRequest,
    build_judge,
)

Answer = BackendVerdict | None | float


class ScriptedBackend:
    """A judge backend that answers from a script and records every call.

    ``values`` maps a criterion id to its verdict value (default 1.0); ``missing`` maps a criterion id
    to how many calls it comes back ``None`` for (``math.inf``: always); ``raise_on`` / ``short_on``
    hold the call numbers (0-based) that raise or return one verdict too few; ``answer`` overrides all.
    """

    name = "scripted"

    def __init__(
        self,
        values: dict[str, float] | None = None,
        missing: dict[str, float] | None = None,
        raise_on: Sequence[int] = (),
        short_on: Sequence[int] = (),
        answer: Callable[[GradeRequest], Answer] | None = None,
    ):
        self.values = values or {}
        self.missing = dict(missing or {})
        self.raise_on = set(raise_on)
        self.short_on = set(short_on)
        self.answer = answer
        self.calls: list[list[GradeRequest]] = []

    @property
    def asked(self) -> list[list[str]]:
        """Criterion ids of each call."""
        return [[r.criterion.id for r in call] for call in self.calls]

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        n = len(self.calls)
        self.calls.append(list(requests))
        if n in self.raise_on:
            raise RuntimeError("backend fell over")
        out: list[BackendVerdict | None] = []
        for r in requests:
            cid = r.criterion.id
            if self.answer is not None:
                a = self.answer(r)
                out.append(BackendVerdict(a, 0.9, "scripted") if isinstance(a, float) else a)
            elif self.missing.get(cid, 0) > 0:
                self.missing[cid] -= 1
                out.append(None)
            else:
                out.append(BackendVerdict(self.values.get(cid, 1.0), 0.8, f"scripted {cid}"))
        if n in self.short_on:
            out = out[:-1]
        return out


class FakeFactory:
    """A backend factory for build_judge's 'module:Factory' paths."""

    last_config: JudgeConfig | None = None

    @classmethod
    def from_config(cls, config: JudgeConfig) -> ScriptedBackend:
        cls.last_config = config
        return ScriptedBackend()


def plain_factory(config: JudgeConfig) -> ScriptedBackend:
    """A factory without from_config: build_judge calls it with the config."""
    return ScriptedBackend(values={"a": 0.25})


def not_a_backend(config: JudgeConfig) -> object:
    return object()


PROMPT = "Why are there tides?"
RESPONSE = "The Moon's gravity pulls the oceans. The Sun helps a little."


def judged(cid: str, weight: float = 1.0, text: str | None = None) -> Criterion:
    return Criterion(id=cid, text=text or f"Criterion {cid}.", weight=weight)


def short_check(cid: str = "short", weight: float = 1.0) -> Criterion:
    return Criterion(id=cid, text="At most 20 words.", weight=weight, check={"type": "word_count", "max": 20})


def request(rubric: Sequence[Criterion], response: str = RESPONSE, **kw) -> RubricRequest:
    return RubricRequest(kw.pop("prompt", PROMPT), response, list(rubric), kw.pop("reference", None))


def test_scripted_backend_is_a_judge_backend():
    assert isinstance(ScriptedBackend(), JudgeBackend)
    assert RubricJudge(ScriptedBackend()).name == "scripted"


# ------------------------------------------------------------------------------------ programmatic
def test_programmatic_criteria_never_reach_the_backend():
    backend = ScriptedBackend(values={"a": 1.0, "b": 0.0})
    judge = RubricJudge(backend)
    rubric = [
        judged("a", 2),
        short_check(),
        Criterion(id="moon", text="Says Moon.", weight=1, check={"type": "contains", "phrases": ["moon"]}),
        judged("b", 1),
        Criterion(id="caps", text="Shouts.", weight=-1, check={"type": "letter_case", "case": "upper"}),
    ]
    (res,) = judge.grade([request(rubric)])
    assert backend.asked == [["a", "b"]]
    v = res.by_id()
    assert [x.criterion_id for x in res.verdicts] == ["a", "short", "moon", "b", "caps"]  # rubric order
    assert (v["short"].value, v["short"].source) == (1.0, "programmatic")
    assert (v["moon"].value, v["caps"].value) == (1.0, 0.0)
    assert (v["a"].source, v["a"].reason, v["a"].confidence) == ("judge", "scripted a", 0.8)
    # (2·1 + 1 + 1 + 1·0 − 0) / 5
    assert res.reward == pytest.approx(4 / 5) and res.missing == 0
    assert judge.stats.programmatic == 3 and judge.stats.requested == 5


def test_all_programmatic_rubric_needs_no_backend():
    backend = ScriptedBackend()
    judge = RubricJudge(backend)
    (res,) = judge.grade([request([short_check()])])
    assert backend.calls == []
    assert res.reward == 1.0
    long = judge.grade([request([short_check()], response="word " * 30)])[0]
    assert long.reward == 0.0 and backend.calls == []
    assert judge.stats.backend_calls == 0


def test_one_backend_pass_for_all_requests():
    backend = ScriptedBackend()
    judge = RubricJudge(backend)
    results = judge.grade([request([judged("a"), judged("b")]), request([judged("c")], response="Other.")])
    assert backend.asked == [["a", "b", "c"]]
    assert [r.reward for r in results] == [1.0, 1.0]
    sent = backend.calls[0][2]
    assert (sent.prompt, sent.response, sent.reference_answer) == (PROMPT, "Other.", None)


def test_grade_one_uses_the_task_or_a_given_rubric():
    task = Task(
        id="t",
        domain="science",
        prompt=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}],
        reference_answer="The Moon.",
        rubric=[judged("a"), judged("b")],
    )
    backend = ScriptedBackend(values={"a": 1.0, "b": 0.0, "x": 0.5})
    judge = RubricJudge(backend)
    res = judge.grade_one(task, RESPONSE)
    assert res.reward == pytest.approx(0.5)
    req = backend.calls[0][0]
    assert req.prompt == f"system: Be brief.\nuser: {PROMPT}" and req.reference_answer == "The Moon."
    res = judge.grade_one(task, RESPONSE, rubric=[judged("x")])
    assert res.reward == pytest.approx(0.5) and backend.asked[-1] == ["x"]


# ------------------------------------------------------------------------------------------ cache
def test_regrading_hits_the_cache():
    backend = ScriptedBackend(values={"a": 1.0, "b": 0.5})
    judge = RubricJudge(backend)
    rubric = [judged("a", 1), judged("b", 1), short_check()]
    first = judge.grade([request(rubric)])[0]
    again = judge.grade([request(rubric)])[0]
    assert len(backend.calls) == 1
    assert again.reward == first.reward == pytest.approx((1 + 0.5 + 1) / 3)
    v = again.by_id()
    assert v["a"].source == v["b"].source == "cache"
    assert (v["b"].value, v["b"].confidence, v["b"].reason) == (0.5, 0.8, "scripted b")
    assert v["short"].source == "programmatic"  # never cached: it is free
    assert judge.stats.cache_hits == 2


def test_changed_weight_still_hits_and_reweights():
    backend = ScriptedBackend(values={"a": 1.0, "b": 0.0})
    judge = RubricJudge(backend)
    r1 = judge.grade([request([judged("a", 1), judged("b", 1)])])[0]
    r2 = judge.grade([request([judged("a", 1), judged("b", 3)])])[0]
    assert len(backend.calls) == 1
    assert r1.reward == pytest.approx(1 / 2)
    assert r2.reward == pytest.approx(1 / 4)
    # a criterion flipped into a pitfall with the same text also needs no call
    r3 = judge.grade([request([judged("a", 1), judged("b", -1)])])[0]
    assert len(backend.calls) == 1 and r3.reward == pytest.approx(1.0)


def test_cache_is_keyed_by_text_not_id():
    backend = ScriptedBackend()
    judge = RubricJudge(backend)
    judge.grade([request([judged("a", text="Names the Moon."), judged("b", text="Mentions the Sun.")])])
    # a renamed criterion with the same text hits
    judge.grade([request([judged("renamed", text="Names the Moon.")])])
    assert len(backend.calls) == 1
    # an edited text misses: only that criterion is asked
    judge.grade([request([judged("a", text="Names the Moon."), judged("b", text="Mentions the Sun's role.")])])
    assert backend.asked == [["a", "b"], ["b"]]
    assert backend.calls[1][0].criterion.text == "Mentions the Sun's role."


@pytest.mark.parametrize(
    "change", [{"response": "Something else."}, {"prompt": "Why is the sky blue?"}, {"reference": "The Moon."}]
)
def test_cache_misses_on_other_response_prompt_or_reference(change):
    backend = ScriptedBackend()
    judge = RubricJudge(backend)
    judge.grade([request([judged("a")])])
    judge.grade([request([judged("a")], **change)])
    assert len(backend.calls) == 2


def test_cache_size_bounds_and_evicts_oldest():
    backend = ScriptedBackend()
    judge = RubricJudge(backend, cache_size=2)
    for cid in ("a", "b", "c"):
        judge.grade([request([judged(cid)])])
    judge.grade([request([judged("c")]), request([judged("b")])])  # both still cached
    assert len(backend.calls) == 3
    judge.grade([request([judged("a")])])  # evicted
    assert len(backend.calls) == 4
    no_cache = RubricJudge(backend := ScriptedBackend(), cache_size=0)
    no_cache.grade([request([judged("a")])])
    no_cache.grade([request([judged("a")])])
    assert len(backend.calls) == 2


# ------------------------------------------------------------------------------- missing verdicts
def test_missing_is_retried_then_counted():
    backend = ScriptedBackend(values={"a": 1.0, "c": 0.0}, missing={"b": math.inf})
    judge = RubricJudge(backend, missing_retries=2)
    (res,) = judge.grade([request([judged("a", 2), judged("b", 1), judged("c", 1)])])
    assert backend.asked == [["a", "b", "c"], ["b"], ["b"]]
    v = res.by_id()["b"]
    assert v.value is None and v.missing and v.reason == "judge gave no verdict"
    assert res.missing == 1
    # from a and c only: (2·1 + 1·0) / 3, not / 4
    assert res.reward == pytest.approx(2 / 3)
    s = judge.stats
    assert (s.missing_first_try, s.missing_final, s.backend_calls, s.backend_requests) == (1, 1, 3, 5)
    m = s.metrics()
    assert m["judge/parse_fail_rate"] == pytest.approx(1 / 3)  # 1 of the 3 first asks
    assert m["judge/missing_rate"] == pytest.approx(1 / 3)
    assert m["judge/calls"] == 5.0


def test_missing_logged(caplog):
    judge = RubricJudge(ScriptedBackend(missing={"b": math.inf}), missing_retries=1)
    with caplog.at_level(logging.WARNING, logger="harnessrl.judges.rubric_judge"):
        judge.grade([request([judged("a"), judged("b")])])
    assert "1 verdict(s) missing after 1 retries" in caplog.text


def test_always_failing_backend_reads_full_parse_fail_rate():
    judge = RubricJudge(ScriptedBackend(missing={"a": math.inf, "b": math.inf}), missing_retries=3)
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert res.reward is None and res.missing == 2
    m = judge.stats.metrics()
    assert m["judge/parse_fail_rate"] == 1.0
    assert m["judge/missing_rate"] == 1.0


def test_missing_recovered_on_retry():
    backend = ScriptedBackend(values={"b": 0.5}, missing={"b": 1})
    judge = RubricJudge(backend, missing_retries=1)
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert backend.asked == [["a", "b"], ["b"]]
    assert res.by_id()["b"].value == 0.5 and res.missing == 0
    assert res.reward == pytest.approx(0.75)
    assert judge.stats.missing_first_try == 1 and judge.stats.missing_final == 0


def test_no_retries():
    backend = ScriptedBackend(missing={"b": 1})
    judge = RubricJudge(backend, missing_retries=0)
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert len(backend.calls) == 1
    assert res.missing == 1 and res.reward == 1.0


def test_missing_verdict_is_not_cached():
    backend = ScriptedBackend(missing={"b": 1}, values={"b": 0.0})
    judge = RubricJudge(backend, missing_retries=0)
    judge.grade([request([judged("a"), judged("b")])])
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert backend.asked == [["a", "b"], ["b"]]
    assert res.by_id()["b"].value == 0.0 and res.reward == pytest.approx(0.5)


def test_missing_below_min_coverage_drops_the_reward():
    rubric = [judged("a", 3), judged("b", 1), judged("p", -1)]
    missing_a = ScriptedBackend(missing={"a": math.inf})
    (res,) = RubricJudge(missing_a, min_coverage=0.5).grade([request(rubric)])
    assert res.reward is None and res.missing == 1  # 1 of 4 positive weight left
    (res,) = RubricJudge(ScriptedBackend(missing={"a": math.inf}), min_coverage=0.25).grade([request(rubric)])
    assert res.reward == pytest.approx(0.0)  # (1 − 1) / 1
    # a missing pitfall never costs coverage
    (res,) = RubricJudge(ScriptedBackend(missing={"p": math.inf}), min_coverage=1.0).grade([request(rubric)])
    assert res.reward == pytest.approx(1.0) and res.missing == 1


def test_missing_in_one_request_does_not_touch_another():
    backend = ScriptedBackend(answer=lambda r: None if r.response == "bad" else 1.0)
    judge = RubricJudge(backend, missing_retries=1)
    good, bad = judge.grade([request([judged("a")]), request([judged("a")], response="bad")])
    assert good.reward == 1.0 and good.missing == 0
    assert bad.reward is None and bad.missing == 1


# -------------------------------------------------------------------------------- broken backends
def test_raising_backend_gives_missing_not_a_crash():
    backend = ScriptedBackend(raise_on=[0, 1])
    judge = RubricJudge(backend, missing_retries=1)
    (res,) = judge.grade([request([judged("a"), judged("b"), short_check()])])
    assert len(backend.calls) == 2
    assert [v.missing for v in res.verdicts] == [True, True, False]
    assert res.reward is None  # only the programmatic criterion is left: 1 of 3 positive weight < 0.5
    assert judge.stats.missing_final == 2
    lenient = RubricJudge(ScriptedBackend(raise_on=[0, 1]), missing_retries=1, min_coverage=0.3)
    (res,) = lenient.grade([request([judged("a"), judged("b"), short_check()])])
    assert res.reward == 1.0 and res.missing == 2


def test_raising_backend_recovers_on_retry():
    backend = ScriptedBackend(raise_on=[0], values={"a": 0.0})
    judge = RubricJudge(backend, missing_retries=1)
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert backend.asked == [["a", "b"], ["a", "b"]]
    assert res.missing == 0 and res.reward == pytest.approx(0.5)
    assert judge.stats.missing_first_try == 2 and judge.stats.missing_final == 0


def test_wrong_length_answer_is_all_missing():
    backend = ScriptedBackend(short_on=[0])
    judge = RubricJudge(backend, missing_retries=0)
    (res,) = judge.grade([request([judged("a"), judged("b")])])
    assert res.missing == 2 and res.reward is None
    backend2 = ScriptedBackend(short_on=[0])
    (res,) = RubricJudge(backend2, missing_retries=1).grade([request([judged("a"), judged("b")])])
    assert res.missing == 0 and len(backend2.calls) == 2


def test_too_long_answer_is_all_missing():
    judge = RubricJudge(ScriptedBackend(answer=lambda r: 1.0), missing_retries=0)
    judge.backend.grade = lambda reqs: [BackendVerdict(1.0)] * (len(reqs) + 1)  # type: ignore[method-assign]
    (res,) = judge.grade([request([judged("a")])])
    assert res.missing == 1 and res.reward is None


@pytest.mark.parametrize("bad", [1.7, -0.1, float("nan"), float("inf")])
def test_out_of_range_value_is_missing(bad):
    backend = ScriptedBackend(answer=lambda r: bad if r.criterion.id == "b" else 1.0)
    judge = RubricJudge(backend, missing_retries=1)
    (res,) = judge.grade([request([judged("a"), judged("b"), judged("c")])])
    v = res.by_id()
    assert v["b"].value is None and v["a"].value == 1.0 and v["c"].value == 1.0
    assert res.reward == pytest.approx(1.0) and res.missing == 1
    assert backend.asked == [["a", "b", "c"], ["b"]]
    # and nothing bad was cached
    judge.grade([request([judged("b")])])
    assert backend.asked[-1] == ["b"]


@pytest.mark.parametrize(("given", "kept"), [(0, 0.0), (1, 1.0), ("0.5", 0.5), (True, 1.0)])
def test_in_range_values_of_other_types_are_kept_as_floats(given, kept):
    judge = RubricJudge(ScriptedBackend(answer=lambda r: BackendVerdict(given)))
    (res,) = judge.grade([request([judged("a")])])
    assert res.by_id()["a"].value == kept


def test_unparseable_value_is_missing():
    judge = RubricJudge(ScriptedBackend(answer=lambda r: BackendVerdict("yes")), missing_retries=0)  # type: ignore[arg-type]
    (res,) = judge.grade([request([judged("a")])])
    assert res.missing == 1


# ------------------------------------------------------------------------------------------ stats
def test_snapshot_and_reset():
    backend = ScriptedBackend(missing={"b": 1})
    judge = RubricJudge(backend, missing_retries=1)
    rubric = [judged("a"), judged("b"), short_check()]
    judge.grade([request(rubric)])
    judge.grade([request(rubric)])  # all cached now
    s = judge.stats
    assert (s.requested, s.programmatic, s.cache_hits, s.backend_calls, s.backend_requests) == (6, 2, 2, 2, 3)
    snap = s.snapshot_and_reset()
    assert snap["judge/calls"] == 3.0
    assert snap["judge/cache_hit_rate"] == pytest.approx(2 / 4)
    assert snap["judge/parse_fail_rate"] == pytest.approx(1 / 2)
    assert snap["judge/missing_rate"] == 0.0
    assert snap["judge/seconds"] >= 0 and snap["judge/latency"] >= 0
    assert set(snap) == {
        "judge/latency",
        "judge/seconds",
        "judge/calls",
        "judge/cache_hit_rate",
        "judge/parse_fail_rate",
        "judge/missing_rate",
    }
    zero = judge.stats.metrics()
    assert all(v == 0.0 for v in zero.values())
    assert (s.requested, s.cache_hits, s.backend_calls, s.missing_first_try, s.seconds) == (0, 0, 0, 0, 0.0)
    # the cache survives a stats reset
    judge.grade([request(rubric)])
    assert len(backend.calls) == 2 and judge.stats.cache_hits == 2


# ------------------------------------------------------------------------------------ build_judge
def test_build_judge_unknown_backend_lists_valid_names():
    with pytest.raises(ConfigError) as ei:
        build_judge({"backend": "gpt-judge"})
    msg = str(ei.value)
    assert "unknown judge backend 'gpt-judge'" in msg
    for name in BACKENDS:
        assert name in msg
    assert "package.module:Factory" in msg


def test_build_judge_dotted_path_with_from_config():
    FakeFactory.last_config = None
    judge = build_judge({"backend": f"{__name__}:FakeFactory", "missing_retries": 3, "min_coverage": 0.8})
    assert isinstance(judge, RubricJudge) and isinstance(judge.backend, ScriptedBackend)
    assert judge.name == "scripted"
    assert (judge.missing_retries, judge.min_coverage, judge.cache_size) == (3, 0.8, 200_000)
    assert FakeFactory.last_config is not None and FakeFactory.last_config.backend.endswith(":FakeFactory")
    (res,) = judge.grade([request([judged("a")])])
    assert res.reward == 1.0


def test_build_judge_plain_callable_and_config_object():
    judge = build_judge(JudgeConfig(backend=f"{__name__}:plain_factory", cache_size=5))
    assert judge.cache_size == 5
    assert judge.grade([request([judged("a")])])[0].reward == pytest.approx(0.25)


def test_build_judge_import_failures():
    with pytest.raises(ConfigError, match="cannot import"):
        build_judge({"backend": "no_such_module_xyz:Factory"})
    with pytest.raises(ConfigError, match="cannot import"):
        build_judge({"backend": f"{__name__}:NoSuchFactory"})


def test_build_judge_rejects_non_backend():
    with pytest.raises(ConfigError, match="has no name and grade"):
        build_judge({"backend": f"{__name__}:not_a_backend"})


def test_build_judge_rejects_bad_config():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        build_judge({"backend": f"{__name__}:FakeFactory", "min_coverage": 0})
    with pytest.raises(ValidationError):
        build_judge({"backend": f"{__name__}:FakeFactory", "colour": "red"})
