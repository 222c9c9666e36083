"""The transformers generation engine's settings (``generation.autocast``, ``cache``, ``compile``): what each
changes in the trainer, and the configurations refused with a reason."""

from __future__ import annotations

import typing
from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from harnessrl.errors import ConfigError
from harnessrl.models import GENERATION_AUTOCAST, generation_precision
from harnessrl.trainer.generation import RolloutGeneration
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.run import build_grpo_config, train
from harnessrl.trainer.train_config import GenerationConfig, TrainConfig, load_train_config


@pytest.fixture
def mixed_precision():
    """``prepare(model=None)``: ``model`` (default: one Linear) prepared by accelerate for bf16 mixed
    precision on the CPU, so that its forward autocasts, and the dtypes its first Linear's outputs come
    out in. Accelerate's state is a process-wide singleton an earlier trainer may have set (without mixed
    precision): it is reset before the test, and after, so later trainers start from a clean one."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator(mixed_precision="bf16", cpu=True)

    def prepare(model=None):
        model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(4, 4)) if model is None else model)
        seen: list[torch.dtype] = []
        first = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        first.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
        return model, seen

    yield prepare
    AcceleratorState._reset_state(reset_partial_state=True)


def _casts(model, x, calls: int) -> int:
    """The dtype casts (aten::_to_copy) of ``calls`` forward passes."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            model(x)
    return sum(e.name == "aten::_to_copy" for e in prof.events())


def test_the_three_generation_precisions(mixed_precision):
    model, seen = mixed_precision()
    wrapped = vars(model)["forward"]
    x = torch.randn(2, 4)
    for mode, want in (("forward", torch.bfloat16), ("generate", torch.bfloat16), ("never", torch.float32)):
        seen.clear()
        with generation_precision(model, mode):
            model(x)
            assert (vars(model)["forward"] is wrapped) == (mode == "forward")
        assert seen == [want], mode
        assert vars(model)["forward"] is wrapped  # the update's forward autocasts again
    # in one region, the weight and bias are cast once (autocast's cast cache), the inputs at every call
    with torch.no_grad():
        with generation_precision(model, "forward"):
            per_forward = _casts(model, x, 3)
        with generation_precision(model, "generate"):
            per_generate = _casts(model, x, 3)
    # per forward: weight, bias, input, and accelerate's cast of the output back to fp32, at every call
    assert per_forward == 3 * 4 and per_generate == 2 + 3
    with pytest.raises(ValueError, match="autocast is one of"), generation_precision(model, "bf16"):
        pass


def test_one_region_generates_the_same_tokens_as_a_region_per_forward(mixed_precision, make_tiny_llama):
    model, _ = mixed_precision(make_tiny_llama())
    ids = torch.tensor([[1, 5, 9, 2, 7, 3], [0, 0, 4, 8, 6, 1]])
    mask = (ids != 0).long()
    out = {}
    for mode in ("forward", "generate"):
        torch.manual_seed(0)
        with torch.no_grad(), generation_precision(model, mode):
            out[mode] = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=12,
                do_sample=True,
                top_k=0,
                pad_token_id=0,
                output_logits=True,
                return_dict_in_generate=True,
            )
    assert torch.equal(out["forward"].sequences, out["generate"].sequences)
    assert all(torch.equal(a, b) for a, b in zip(out["forward"].logits, out["generate"].logits, strict=True))


def test_generation_precision_leaves_an_unwrapped_model_alone():
    model = torch.nn.Linear(4, 4)
    forward = model.forward
    for mode in GENERATION_AUTOCAST:
        with generation_precision(model, mode):
            assert model.forward == forward and not torch.is_autocast_enabled("cpu")
    assert "forward" not in vars(model)


def test_a_peft_model_generates_as_it_is_in_every_mode(mixed_precision, make_tiny_llama):
    """PEFT's generate runs the base model's forward, never accelerate's wrapper: no mode changes it."""
    peft = pytest.importorskip("peft")
    lora = peft.LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM")
    model, _ = mixed_precision(peft.get_peft_model(make_tiny_llama(), lora))
    wrapped = vars(model)["forward"]
    for mode in GENERATION_AUTOCAST:
        with generation_precision(model, mode):
            assert vars(model)["forward"] is wrapped and not torch.is_autocast_enabled("cpu")


def test_the_config_offers_the_modes_generation_precision_knows():
    assert typing.get_args(GenerationConfig.model_fields["autocast"].annotation) == GENERATION_AUTOCAST
    assert GenerationConfig().autocast == "generate"
    # YAML reads off / no / false as False: that means never (and true the default)
    assert load_train_config(None, ["generation.autocast=off"]).generation.autocast == "never"
    assert load_train_config(None, ["generation.autocast=true"]).generation.autocast == "generate"
    assert load_train_config(None, ["generation.autocast=forward"]).generation.autocast == "forward"
    with pytest.raises(ConfigError, match=r"generation\.autocast"):
        load_train_config(None, ["generation.autocast=fp32"])


def test_the_trainer_generates_in_the_configured_precision(monkeypatch, mixed_precision):
    from trl import GRPOTrainer

    model, _ = mixed_precision()
    wrapped = vars(model)["forward"]
    during = []

    def fake(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        during.append((vars(model)["forward"], torch.is_autocast_enabled("cpu")))
        return [[1] for _ in prompt_ids], None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", fake)
    tr = object.__new__(HarnessGRPOTrainer)
    tr.accelerator, tr.model_wrapped = SimpleNamespace(unwrap_model=lambda m: m), model
    for mode in ("forward", "generate", "never"):
        tr.generation = RolloutGeneration(autocast=mode)
        tr._generate_single_turn([[5]], None, {}, 1)
    original = model._original_forward
    assert during == [(wrapped, False), (original, True), (original, False)]
    assert vars(model)["forward"] is wrapped  # the update autocasts as before


@pytest.mark.parametrize(
    ("mode", "want"), [("forward", torch.bfloat16), ("generate", torch.bfloat16), ("never", torch.float32)]
)
def test_trials_and_evaluation_sample_in_the_rollouts_precision(
    mixed_precision, make_tiny_llama, real_tokenizer, mode, want
):
    """The critic's sampler and the greedy evaluation follow ``generation.autocast`` as the rollouts do."""
    from harnessrl.critic.rollouts import TransformersSampler
    from harnessrl.data import load_bundled
    from harnessrl.trainer.evaluation import generate_greedy

    model, seen = mixed_precision(make_tiny_llama())
    sampler = TransformersSampler(model, real_tokenizer, autocast=mode)
    texts = sampler.sample([[{"role": "user", "content": "Name a colour."}]] * 2, 1.0, 3)
    assert len(texts) == 2 and set(seen) == {want}
    seen.clear()
    tasks = load_bundled()[:2]
    assert len(generate_greedy(model, real_tokenizer, tasks, 3, autocast=mode)) == 2
    assert set(seen) == {want}


def _config(**generation) -> TrainConfig:
    return TrainConfig.model_validate({"device": "cpu", "bf16": False, "generation": generation})


@pytest.mark.parametrize(
    ("generation", "message"),
    [
        ({"backend": "vllm", "autocast": "never"}, "generation.autocast tune the transformers engine"),
        ({"backend": "vllm", "cache": "static", "compile": True}, "generation.cache, generation.compile tune"),
        ({"compile": True}, "generation.compile needs generation.cache: static"),
    ],
)
def test_contradictory_generation_settings_are_refused(generation, message):
    with pytest.raises(ValidationError, match=message):
        TrainConfig.model_validate({"device": "cuda", "generation": generation})


def test_static_cache_and_compile_reach_trl(tmp_path):
    args = build_grpo_config(_config(cache="static"), tmp_path, "cpu")
    assert args.cache_implementation == "static" and args.pad_to_multiple_of is None
    assert build_grpo_config(_config(), tmp_path, "cpu").cache_implementation is None
    compiled = _config(cache="static", compile=True)
    with pytest.raises(ConfigError, match=r"generation\.compile is for GPUs"):
        build_grpo_config(compiled, tmp_path, "cpu")


@pytest.mark.parametrize(
    ("generation", "dtype", "region"),
    [({"autocast": "never", "cache": "static"}, torch.float32, False), ({}, torch.bfloat16, True)],
)
def test_a_bf16_run_generates_as_configured(tmp_path, tiny_model_dir, one_torch_thread, generation, dtype, region):
    """One real step on the CPU under bf16 mixed precision: with ``autocast: off`` (and a static cache) the
    rollouts are generated in fp32; by default (``generate``) in bf16 inside one autocast region around
    the generate call. The loss's forward autocasts either way."""
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "bf16": True,
            "data": {"train": "bundled", "validation": None, "test": None},
            "judge": {"backend": "local-lm", "model": str(tiny_model_dir)},
            "grpo": {"num_generations": 2, "tasks_per_step": 1, "max_completion_length": 4, "max_steps": 1},
            "generation": generation,
            "harness": {"memory": {"enabled": False}},
            "evolver": {"enabled": False},
            "eval": {"before_training": False, "every_steps": None},
        }
    )
    seen: dict[str, set] = {"generate": set(), "train": set()}
    calls: list = []

    def hook(trainer, run):
        model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        generate = model.generate
        phase = {"now": "train"}

        def recording_generate(*a, **k):
            phase["now"] = "generate"
            calls.append((k["generation_config"].cache_implementation, torch.is_autocast_enabled("cpu")))
            try:
                return generate(*a, **k)
            finally:
                phase["now"] = "train"

        model.generate = recording_generate
        mlp = model.model.layers[0].mlp.down_proj
        mlp.register_forward_hook(lambda mod, args, out: seen[phase["now"]].add(out.dtype))

    train(config, trainer_hook=hook)
    assert calls == [(generation.get("cache"), region)]
    assert seen["generate"] == {dtype}
    assert torch.bfloat16 in seen["train"]


def test_the_sampler_batches_by_length_and_answers_in_order(make_tiny_llama, real_tokenizer):
    """Prompts of different lengths are batched by length (less padding) and come back in their order;
    temperature 0 is greedy, so each answer is the one its prompt gets alone."""
    from harnessrl.critic.rollouts import TransformersSampler

    model = make_tiny_llama()
    prompts = [
        [{"role": "user", "content": "A long question about the colour of the sky at dusk, please?"}],
        [{"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "A medium question about soup?"}],
    ]
    sampler = TransformersSampler(model, real_tokenizer, batch_size=2, seed=None)
    together = sampler.sample(prompts, 0.0, 6)
    alone = [sampler.sample([p], 0.0, 6)[0] for p in prompts]
    assert together == alone and len(set(together)) > 1
