"""Critic trials and in-training evaluation through the run's vLLM engine (``generation.backend: vllm``).

vLLM is not installed here (and needs a GPU): a fake ``vllm`` module provides a ``SamplingParams`` that
records its arguments and refuses unknown ones, and fake engines (TRL's colocated ``LLM``, its server
client) answer in vLLM's shapes with texts derived from the prompt and the sample's seed. The tokenizer
is the real SmolLM2 one (chat template, ids in and texts out); nothing is downloaded.
"""

from __future__ import annotations

import itertools
import sys
import types
from types import SimpleNamespace

import pytest
from helpers import FRUIT, FruitJudge

from harnessrl.critic.rollouts import TransformersSampler, VLLMSampler
from harnessrl.critic.trials import SIGNAL_SHARE, FrozenPolicyTrials, PolicySampler, TrialConfig
from harnessrl.data import Criterion, Task
from harnessrl.errors import ConfigError
from harnessrl.interfaces import Harness, SetGuidance
from harnessrl.judges import RubricJudge
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import Recorder
from harnessrl.trainer.callbacks import EvalCallback
from harnessrl.trainer.evaluation import evaluate_policy
from harnessrl.trainer.policy_sampling import (
    check_main_process_sampling,
    engine_sampler,
    evaluation_sampler,
    policy_sampler,
    push_weights_if_stale,
    sampling_place,
)

HINT = "Name the banana explicitly."


def chat(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


# ------------------------------------------------------------------------------------------- the fake vLLM
class FakeSamplingParams:
    """vLLM's ``SamplingParams`` as far as the sampler uses it: unknown names are a TypeError, a top_p out of
    (0, 1] a ValueError; every argument is kept."""

    FIELDS = frozenset(
        {
            "n",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "repetition_penalty",
            "presence_penalty",
            "frequency_penalty",
            "max_tokens",
            "seed",
            "stop",
            "logprobs",
        }
    )

    def __init__(self, **kwargs):
        unknown = sorted(set(kwargs) - self.FIELDS)
        if unknown:
            raise TypeError(f"Unexpected keyword argument {unknown[0]!r}")
        if not 0 < kwargs.get("top_p", 1.0) <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {kwargs['top_p']}")
        self.kwargs = kwargs
        self.n = kwargs.get("n", 1)
        self.temperature = kwargs.get("temperature", 1.0)
        self.seed = kwargs.get("seed")


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    return module


def question_of(tokenizer, ids: list[int]) -> str:
    """The last user message, read back from the chat-templated prompt ids."""
    return tokenizer.decode(ids).rsplit("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def echo(question: str, temperature: float, draw: str) -> str:
    """Default answer: the question, then "greedy" or the sample's draw (its seed)."""
    return f"{question} | {'greedy' if temperature == 0 else draw}"


class FakeEngine:
    """Both of TRL's engines in one: ``generate`` of a colocated ``LLM``, ``_server`` the server's client's.

    Sample i of a request seeded s draws ``s + i`` (as vLLM seeds a request's n samples); an unseeded one
    draws from a counter. Every call is recorded."""

    def __init__(self, tokenizer, answer=echo):
        self.tokenizer, self.answer = tokenizer, answer
        self.calls: list[dict] = []
        self._unseeded = itertools.count()

    def _completions(self, ids: list[int], n: int, temperature: float, seed: int | None) -> list[list[int]]:
        question = question_of(self.tokenizer, ids)
        out = []
        for i in range(n):
            draw = f"s{seed + i}" if seed is not None else f"u{next(self._unseeded)}"
            text = self.answer(question, temperature, draw)
            out.append(self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id])
        return out

    # the colocated LLM
    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append({"prompts": prompts, "params": sampling_params, "use_tqdm": use_tqdm})
        return [
            SimpleNamespace(
                prompt_token_ids=p["prompt_token_ids"],
                outputs=[
                    SimpleNamespace(token_ids=tuple(c))
                    for c in self._completions(p["prompt_token_ids"], sp.n, sp.temperature, sp.seed)
                ],
            )
            for p, sp in zip(prompts, sampling_params, strict=True)
        ]

    # the server's client: VLLMClient.generate's own arguments, nothing else
    def _server(
        self,
        prompts,
        features=None,
        n=1,
        repetition_penalty=1.0,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        min_p=0.0,
        max_tokens=16,
        logprobs=0,
        structured_outputs_regex=None,
        generation_kwargs=None,
    ):
        call = dict(prompts=prompts, n=n, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p)
        call.update(repetition_penalty=repetition_penalty, max_tokens=max_tokens, logprobs=logprobs)
        call["generation_kwargs"] = generation_kwargs
        self.calls.append(call)
        seed = (generation_kwargs or {}).get("seed")
        completions = [c for p in prompts for c in self._completions(p, n, temperature, seed)]  # prompt-major
        return {"prompt_ids": prompts, "completion_ids": completions, "logprobs": None}


class FakeServerClient:
    def __init__(self, engine: FakeEngine):
        self.engine = engine

    def generate(self, prompts, **kwargs):
        return self.engine._server(prompts, **kwargs)


class FakeGeneration:
    """TRL's ``VLLMGeneration`` as the sampler reads it: the mode, the training's sampling settings, the
    engine, and ``sync_weights`` (counted)."""

    def __init__(self, mode: str, tokenizer, answer=echo, **attrs):
        self.mode = mode
        self.engine = FakeEngine(tokenizer, answer)
        if mode == "colocate":
            self.llm = self.engine
        elif mode == "server":
            self.vllm_client = FakeServerClient(self.engine)
        self.top_p, self.top_k, self.min_p, self.repetition_penalty = 0.9, 0, 0.0, 1.0
        self.generation_kwargs: dict = {}
        self.tensor_parallel_size = 1
        self.server_base_url, self.server_host, self.server_port = None, "10.0.0.5", 8001
        self.syncs = 0
        vars(self).update(attrs)

    def sync_weights(self):
        self.syncs += 1


@pytest.fixture(scope="module")
def tok(real_tokenizer):
    return real_tokenizer


# ------------------------------------------------------------------------------------------- colocate mode
def test_colocate_collapses_repeats_keeps_order_and_seeds_each_request(fake_vllm, tok):
    gen = FakeGeneration("colocate", tok)
    prepared = []
    sampler = VLLMSampler(gen, tok, seed=5, prepare=lambda: prepared.append(1))
    assert isinstance(sampler, PolicySampler)
    prompts = [chat("Q1")] * 3 + [chat("Q2")] + [chat("Q3")] * 2
    texts = sampler.sample(prompts, temperature=0.7, max_new_tokens=12)

    (call,) = gen.engine.calls
    assert call["use_tqdm"] is False
    ids = [p["prompt_token_ids"] for p in call["prompts"]]
    expected = [
        tok.apply_chat_template(chat(q), add_generation_prompt=True, tokenize=True)["input_ids"]
        for q in ("Q1", "Q2", "Q3")
    ]
    assert ids == [list(x) for x in expected]  # the chat template, as token ids, one request per run
    params = [p.kwargs for p in call["params"]]
    assert [p["n"] for p in params] == [3, 1, 2]
    assert all(p["temperature"] == 0.7 and p["max_tokens"] == 12 for p in params)
    # the training's sampling settings, from the generation object
    assert all((p["top_p"], p["top_k"], p["min_p"], p["repetition_penalty"]) == (0.9, 0, 0.0, 1.0) for p in params)
    seeds = [p["seed"] for p in params]
    assert len(set(seeds)) == 3 and all(isinstance(s, int) for s in seeds)

    # one text per prompt, in order; the k samples of a prompt differ
    assert [t.split(" | ")[0] for t in texts] == ["Q1", "Q1", "Q1", "Q2", "Q3", "Q3"]
    assert len(set(texts[:3])) == 3 and texts[4] != texts[5]
    assert not any("<|im_end|>" in t for t in texts)  # special tokens skipped
    assert prepared == [1]

    # reproducible: the same seed draws the same texts; the next call draws new ones
    again = VLLMSampler(FakeGeneration("colocate", tok), tok, seed=5)
    assert again.sample(prompts, 0.7, 12) == texts
    assert sampler.sample(prompts, 0.7, 12) != texts
    assert prepared == [1, 1]
    assert VLLMSampler(FakeGeneration("colocate", tok), tok, seed=6).sample(prompts, 0.7, 12) != texts


def test_unseeded_and_same_draws_each_call(fake_vllm, tok):
    gen = FakeGeneration("colocate", tok)
    VLLMSampler(gen, tok, seed=None).sample([chat("Q1")] * 2, 1.0, 8)
    assert gen.engine.calls[0]["params"][0].kwargs["seed"] is None

    fixed = VLLMSampler(FakeGeneration("colocate", tok), tok, seed=3, same_draws_each_call=True)
    prompts = [chat("Q1")] * 2 + [chat("Q2")] * 2
    first = fixed.sample(prompts, 1.0, 8)
    assert fixed.sample(prompts, 1.0, 8) == first  # every call on the same draws (evaluation's checkpoints)
    assert VLLMSampler(FakeGeneration("colocate", tok), tok, seed=3).sample(prompts, 1.0, 8) == first


def test_greedy_is_temperature_zero(fake_vllm, tok):
    gen = FakeGeneration("colocate", tok)
    texts = VLLMSampler(gen, tok).sample([chat("Q1"), chat("Q2")], temperature=0, max_new_tokens=4)
    assert texts == ["Q1 | greedy", "Q2 | greedy"]
    assert [p.kwargs["temperature"] for p in gen.engine.calls[0]["params"]] == [0.0, 0.0]


def test_settings_are_forwarded_and_unknown_ones_refused(fake_vllm, tok):
    gen = FakeGeneration("colocate", tok, generation_kwargs={"presence_penalty": 0.2, "seed": 99})
    prepared = []
    sampler = VLLMSampler(gen, tok, prepare=lambda: prepared.append(1))
    sampler.sample([chat("Q1")], 1.0, 4, top_p=0.5, frequency_penalty=0.3)
    params = gen.engine.calls[0]["params"][0].kwargs
    assert params["top_p"] == 0.5 and params["frequency_penalty"] == 0.3  # the call's settings win
    assert params["presence_penalty"] == 0.2  # the training's generation_kwargs
    assert params["seed"] != 99  # the sampler seeds its requests itself

    with pytest.raises(ValueError, match=r"vLLM engine cannot honour the sampling setting\(s\) typical_p=0\.9"):
        sampler.sample([chat("Q1")], 1.0, 4, typical_p=0.9)
    with pytest.raises(ValueError, match=r"cannot honour .*top_p=1\.5.*top_p must be in"):
        sampler.sample([chat("Q1")], 1.0, 4, top_p=1.5)
    with pytest.raises(ValueError, match=r"\['seed'\]: the sampler sets these itself"):
        sampler.sample([chat("Q1")], 1.0, 4, seed=1)
    assert len(gen.engine.calls) == 1 and prepared == [1]  # refused before any sync or generation
    assert sampler.sample([], 1.0, 4) == [] and prepared == [1]


def test_colocate_sleep_mode_wakes_and_sleeps_the_engine(fake_vllm, tok):
    events = []
    gen = FakeGeneration("colocate", tok, enable_sleep_mode=True, _llm_weights_sleeping=True)
    gen.engine.wake_up = lambda tags: events.append(("wake", tuple(tags)))
    gen.engine.sleep = lambda level: events.append(("sleep", level))
    VLLMSampler(gen, tok).sample([chat("Q1")], 1.0, 4)
    assert gen.syncs == 1  # level-2 sleep dropped the weights: pushed again, as TRL does
    assert events == [("wake", ("kv_cache",)), ("sleep", 2)] and gen._llm_weights_sleeping


# ------------------------------------------------------------------------------------------- server mode
def test_server_groups_requests_by_n_and_restores_order(fake_vllm, tok):
    gen = FakeGeneration("server", tok)
    sampler = VLLMSampler(gen, tok, seed=1)
    prompts = [chat("Q1")] * 2 + [chat("Q2")] + [chat("Q3")] * 2 + [chat("Q4")]
    texts = sampler.sample(prompts, 0.8, 6, presence_penalty=0.1, top_p=0.7)
    assert [t.split(" | ")[0] for t in texts] == ["Q1", "Q1", "Q2", "Q3", "Q3", "Q4"]
    assert texts[0] != texts[1] and texts[3] != texts[4]

    calls = gen.engine.calls
    assert [c["n"] for c in calls] == [2, 1]  # one call per distinct n
    assert [[question_of(tok, p) for p in c["prompts"]] for c in calls] == [["Q1", "Q3"], ["Q2", "Q4"]]
    for c in calls:
        assert (c["temperature"], c["max_tokens"], c["top_p"], c["top_k"], c["logprobs"]) == (0.8, 6, 0.7, 0, None)
        assert c["generation_kwargs"]["presence_penalty"] == 0.1
    assert calls[0]["generation_kwargs"]["seed"] != calls[1]["generation_kwargs"]["seed"]
    assert (
        VLLMSampler(FakeGeneration("server", tok), tok, seed=1).sample(prompts, 0.8, 6, presence_penalty=0.1, top_p=0.7)
        == texts
    )


def test_server_repeated_prompt_goes_to_another_call(fake_vllm, tok):
    gen = FakeGeneration("server", tok)
    texts = VLLMSampler(gen, tok).sample([chat("Q1"), chat("Q2"), chat("Q1")], 1.0, 4)
    assert [len(c["prompts"]) for c in gen.engine.calls] == [2, 1]
    assert texts[0] != texts[2]  # not the same draw twice


def test_server_refuses_settings_it_does_not_know_and_needs_the_client(fake_vllm, tok):
    gen = FakeGeneration("server", tok)
    with pytest.raises(ValueError, match=r"cannot honour the sampling setting\(s\) typical_p=0\.5"):
        VLLMSampler(gen, tok).sample([chat("Q1")], 1.0, 4, typical_p=0.5)
    assert gen.engine.calls == []
    del gen.vllm_client  # another process than the main one
    with pytest.raises(RuntimeError, match="main process"):
        VLLMSampler(gen, tok).sample([chat("Q1")], 1.0, 4)


def test_mode_must_be_colocate_or_server(tok):
    with pytest.raises(ValueError, match=r"'colocate' or 'server'.*'external'"):
        VLLMSampler(FakeGeneration("external", tok), tok)


def test_without_a_chat_template_the_plain_prompt_text(fake_vllm, tok):
    class Bare:
        chat_template = None

        def __call__(self, text, add_special_tokens):
            self.text, self.special = text, add_special_tokens
            return {"input_ids": [7, 8]}

        def batch_decode(self, ids, skip_special_tokens):
            assert skip_special_tokens
            return [str(x) for x in ids]

    gen = FakeGeneration("colocate", tok)
    gen.llm = SimpleNamespace(
        generate=lambda prompts, sampling_params, use_tqdm: [
            SimpleNamespace(outputs=[SimpleNamespace(token_ids=(1, 2))]) for _ in prompts
        ]
    )
    plain = Bare()
    assert VLLMSampler(gen, plain).sample([chat("Q9")], 1.0, 4) == ["[1, 2]"]
    assert "Q9" in plain.text and plain.special  # no template: the tokenizer adds its special tokens


# ------------------------------------------------------------------------------------------- the trainer side
def fake_trainer(generation=None, *, step: int = 4, loaded: int = 3, **attrs):
    trainer = SimpleNamespace(
        use_vllm=generation is not None,
        vllm_generation=generation,
        state=SimpleNamespace(global_step=step),
        _last_loaded_step=loaded,
        model=SimpleNamespace(),
        accelerator=SimpleNamespace(num_processes=1, state=SimpleNamespace(deepspeed_plugin=None)),
        is_fsdp_enabled=False,
        is_deepspeed_enabled=False,
    )
    vars(trainer).update(attrs)
    return trainer


def test_weights_are_pushed_once_when_stale(tok):
    gen = FakeGeneration("colocate", tok)
    trainer = fake_trainer(gen, step=4, loaded=3)  # a step's end: updated after vLLM last loaded
    push_weights_if_stale(trainer)
    assert gen.syncs == 1 and trainer._last_loaded_step == 4
    push_weights_if_stale(trainer)  # fresh: neither again nor at the next generation of this step
    assert gen.syncs == 1


def test_routing_picks_the_engine_training_generates_with(fake_vllm, tok):
    plain = fake_trainer()
    sampler = policy_sampler(plain, tok, seed=2)
    assert isinstance(sampler, TransformersSampler) and sampler.model is plain.model and sampler.seed == 2
    assert engine_sampler(plain, tok, seed=2) is None
    assert sampling_place(plain, "cuda") == "cuda"

    gen = FakeGeneration("colocate", tok)
    trainer = fake_trainer(gen, step=4, loaded=3)
    sampler = policy_sampler(trainer, tok, seed=2)
    assert isinstance(sampler, VLLMSampler) and sampler.generation is gen and sampler.seed == 2
    sampler.sample([chat("Q1")], 1.0, 4)
    sampler.sample([chat("Q1")], 1.0, 4)
    assert gen.syncs == 1 and trainer._last_loaded_step == 4  # synced before the first sample only
    assert len(gen.engine.calls) == 2
    assert sampling_place(trainer, "cuda") == "cuda (vllm colocate)"
    server = fake_trainer(FakeGeneration("server", tok))
    assert sampling_place(server, "cuda") == "vllm server http://10.0.0.5:8001"
    server.vllm_generation.server_base_url = "http://gpu-box:8000"
    assert sampling_place(server, "cuda") == "vllm server http://gpu-box:8000"


def test_only_tensor_parallel_colocate_is_refused_at_start_up(tok):
    """DDP, FSDP and ZeRO-3 sample at the step boundary on every process (harnessrl.trainer.step_boundary); a
    colocated engine with tensor parallelism, whose processes must all generate each request, is refused."""

    def two(**attrs):
        return fake_trainer(FakeGeneration("server", tok), **attrs)

    for trainer in (two(), fake_trainer(), two(is_fsdp_enabled=True), fake_trainer(is_fsdp_enabled=True)):
        trainer.accelerator.num_processes = 2
        check_main_process_sampling(trainer)
    zero3 = two(is_deepspeed_enabled=True)
    zero3.accelerator = SimpleNamespace(
        num_processes=2, state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=3))
    )
    check_main_process_sampling(zero3)
    tp = fake_trainer(FakeGeneration("colocate", tok, tensor_parallel_size=2))
    tp.accelerator.num_processes = 2
    with pytest.raises(ConfigError, match=r"tensor parallelism spans 2 processes.*vllm_mode: server"):
        policy_sampler(tp, tok, seed=0)
    tp.accelerator.num_processes = 1  # one process: its engine generates alone
    check_main_process_sampling(tp)


class RecordingBoundary:
    """A step boundary that records the requests it is asked (the real one is tested over gloo)."""

    def __init__(self):
        self.requests: list[tuple[str, object]] = []

    def request(self, kind, payload=None):
        self.requests.append((kind, payload))
        return [None, None]


def test_several_processes_sample_through_the_step_boundary(fake_vllm, tok):
    from harnessrl.trainer.step_boundary import CollectiveSampler

    boundary = RecordingBoundary()
    plain = fake_trainer(boundary=boundary, generation_autocast="generate")
    plain.accelerator.num_processes = 2
    sampler = policy_sampler(plain, tok, seed=3, batch_size=4)
    assert isinstance(sampler, CollectiveSampler) and (sampler.seed, sampler.batch_size) == (3, 4)
    assert sampling_place(plain, "cpu") == "cpu x2 processes"
    decoding = {"seed": 5, "batch_size": 2, "completions": 3, "autocast": "generate"}
    ev = evaluation_sampler(plain, tok, decoding)
    assert isinstance(ev, CollectiveSampler) and ev.batch_size == 6 and ev.same_draws_each_call  # as one process
    # vLLM: every process takes part in the weight sync, then the main process's engine generates
    gen = FakeGeneration("colocate", tok)
    trainer = fake_trainer(gen, step=4, loaded=3, boundary=boundary)
    trainer.accelerator.num_processes = 2
    sampler = policy_sampler(trainer, tok, seed=2)
    assert isinstance(sampler, VLLMSampler)
    sampler.sample([chat("Q1")], 1.0, 4)
    assert boundary.requests == [("sync_vllm", None)] and len(gen.engine.calls) == 1
    assert gen.syncs == 0  # the boundary's handler syncs, on every process (the fake one records only)


# ------------------------------------------------------------------------------------------- evaluation
EVAL_TASKS = [
    Task(
        id=f"e{k}",
        domain="d",
        prompt=f"Q{k}",
        rubric=[Criterion(id="g", text="Is greedy", weight=1, check={"type": "contains", "phrases": ["greedy"]})],
    )
    for k in range(3)
]


class RecordingSampler:
    def __init__(self):
        self.calls = []

    def sample(self, prompts, temperature, max_new_tokens, **settings):
        self.calls.append((prompts, temperature, max_new_tokens, settings))
        return [" greedy answer " if temperature == 0 else "sampled" for _ in prompts]


def test_evaluation_goes_through_the_sampler():
    judge = RubricJudge(FruitJudge())
    sampler = RecordingSampler()
    res = evaluate_policy(None, None, EVAL_TASKS, judge, step=2, max_new_tokens=9, sampler=sampler)
    ((prompts, temperature, max_new, settings),) = sampler.calls
    assert temperature == 0 and max_new == 9 and settings == {}  # greedy: temperature 0
    assert prompts == [t.messages() for t in EVAL_TASKS]
    assert res.overall == 1.0 and res.samples[0]["response"] == "greedy answer"

    res = evaluate_policy(
        None, None, EVAL_TASKS, judge, step=2, max_new_tokens=9, completions=3, temperature=0.6, sampler=sampler
    )
    prompts, temperature, _, _ = sampler.calls[1]
    assert temperature == 0.6 and prompts == [t.messages() for t in EVAL_TASKS for _ in range(3)]
    assert res.overall == 0.0 and res.completions_per_task == 3


def test_evaluation_through_the_fake_engine(fake_vllm, tok):
    gen = FakeGeneration("colocate", tok)
    trainer = fake_trainer(gen, step=0, loaded=-1)  # before training: vLLM holds the checkpoint's weights
    sampler = engine_sampler(trainer, tok, seed=11, same_draws_each_call=True)
    judge = RubricJudge(FruitJudge())
    greedy = evaluate_policy(None, tok, EVAL_TASKS, judge, step=0, max_new_tokens=5, sampler=sampler)
    assert greedy.overall == 1.0 and gen.syncs == 1 and trainer._last_loaded_step == 0
    (call,) = gen.engine.calls
    assert [(p.kwargs["n"], p.kwargs["temperature"]) for p in call["params"]] == [(1, 0.0)] * 3
    k3 = evaluate_policy(None, tok, EVAL_TASKS, judge, step=0, max_new_tokens=5, completions=3, sampler=sampler)
    assert [p.kwargs["n"] for p in gen.engine.calls[1]["params"]] == [3, 3, 3]
    assert k3.overall == 0.0 and gen.syncs == 1


def test_eval_callback_evaluates_through_its_sampler(tmp_path):
    run = RunDir(tmp_path / "run")
    cb = EvalCallback(
        run, {"validation": EVAL_TASKS}, RubricJudge(FruitJudge()), every_steps=None, before_training=True,
        max_new_tokens=4, batch_size=2,
    )  # fmt: skip
    cb.sampler = RecordingSampler()
    cb.on_train_begin(None, SimpleNamespace(global_step=0, is_world_process_zero=True), None)
    assert len(cb.sampler.calls) == 1 and cb.sampler.calls[0][1] == 0
    assert run.read("eval.jsonl")[0]["overall"] == 1.0


# ------------------------------------------------------------------------------------------- a critic trial
def test_guidance_trial_through_the_fake_engine(fake_vllm, tok):
    """The critic's guidance trial on vLLM: the hint makes the engine name the banana; the trial's identical
    rows reach the engine as one request each arm, with n samples."""

    def answer(question: str, temperature: float, draw: str) -> str:
        return "A banana." if HINT in question else "An apple."

    gen = FakeGeneration("colocate", tok, answer=answer)
    trainer = fake_trainer(gen, step=4, loaded=3)
    harness = Harness([FRUIT])
    trials = FrozenPolicyTrials(
        harness,
        Recorder(None),
        RubricJudge(FruitJudge()),
        policy_sampler(trainer, tok, seed=0),
        TrialConfig(guidance_trial="arms"),
    )
    failure = Failure(
        kind="non_discriminative_low",
        step=2,
        task_id="fruit",
        domain="food",
        evidence={},
        summary="flat",
        interface_hint="rollout_guidance",
    )
    result = trials.run(SetGuidance(target="fruit", text=HINT, fraction=0.5), "v1", failure)
    assert result.accepted, result.reason
    assert result.metric == SIGNAL_SHARE and result.baseline == 0 and result.candidate == 1
    assert result.cost.rollouts == 12
    # the unguided arm (8 copies of one prompt), then the guided members (4 copies of another)
    assert [[p.kwargs["n"] for p in c["params"]] for c in gen.engine.calls] == [[8], [4]]
    assert gen.syncs == 1 and trainer._last_loaded_step == 4
