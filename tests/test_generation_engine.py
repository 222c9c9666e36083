"""The transformers generation engine's settings (``generation.autocast``, ``cache``, ``compile``): what each
changes in the trainer, and the configurations refused with a reason."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from harnessrl.errors import ConfigError
from harnessrl.models import generation_precision
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.run import build_grpo_config, train
from harnessrl.trainer.train_config import TrainConfig


def _mixed_precision_model(model=None):
    """``model`` (default: one Linear) prepared by accelerate for bf16 mixed precision on the CPU, so its
    forward autocasts, and the dtypes its first Linear's outputs come out in.

    Accelerate's state is a process-wide singleton an earlier trainer may have set (without mixed
    precision): it is reset before, and again after, so later trainers start from a clean one."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        model = Accelerator(mixed_precision="bf16", cpu=True).prepare(
            torch.nn.Sequential(torch.nn.Linear(4, 4)) if model is None else model
        )
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    seen: list[torch.dtype] = []
    first = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
    first.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))
    return model, seen


def test_generation_precision_runs_the_weights_dtype_and_puts_autocast_back():
    model, seen = _mixed_precision_model()
    x = torch.randn(2, 4)
    model(x)
    with generation_precision(model, autocast=True):
        model(x)
    with generation_precision(model, autocast=False):
        model(x)
    model(x)  # the update's forward: autocast again
    assert seen == [torch.bfloat16, torch.bfloat16, torch.float32, torch.bfloat16]


def test_generation_precision_leaves_an_unwrapped_model_alone():
    model = torch.nn.Linear(4, 4)
    forward = model.forward
    with generation_precision(model, autocast=False):
        assert model.forward == forward
    assert "forward" not in vars(model)


def test_the_trainer_generates_without_autocast_when_told(monkeypatch):
    from trl import GRPOTrainer

    model, _ = _mixed_precision_model()
    wrapped = vars(model)["forward"]
    during = []

    def fake(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        during.append(vars(model)["forward"])
        return [[1] for _ in prompt_ids], None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", fake)
    tr = object.__new__(HarnessGRPOTrainer)
    tr._row_generation, tr._gen_seconds = None, 0.0
    tr.accelerator, tr.model_wrapped = SimpleNamespace(unwrap_model=lambda m: m), model
    for autocast in (True, False):
        tr.generation_autocast = autocast
        tr._generate_single_turn([[5]], None, {}, 1)
    assert during[0] is wrapped and during[1] == model._original_forward
    assert vars(model)["forward"] is wrapped  # the update autocasts as before


@pytest.mark.parametrize("autocast", [True, False])
def test_trials_and_evaluation_sample_in_the_rollouts_precision(make_tiny_llama, real_tokenizer, autocast):
    """The critic's sampler and the greedy evaluation follow ``generation.autocast`` as the rollouts do."""
    from harnessrl.critic.rollouts import TransformersSampler
    from harnessrl.data import load_bundled
    from harnessrl.trainer.evaluation import generate_greedy

    model, seen = _mixed_precision_model(make_tiny_llama())
    want = {torch.bfloat16 if autocast else torch.float32}
    sampler = TransformersSampler(model, real_tokenizer, autocast=autocast)
    texts = sampler.sample([[{"role": "user", "content": "Name a colour."}]] * 2, 1.0, 3)
    assert len(texts) == 2 and set(seen) == want
    seen.clear()
    tasks = load_bundled()[:2]
    assert len(generate_greedy(model, real_tokenizer, tasks, 3, autocast=autocast)) == 2
    assert set(seen) == want


def _config(**generation) -> TrainConfig:
    return TrainConfig.model_validate({"device": "cpu", "bf16": False, "generation": generation})


@pytest.mark.parametrize(
    ("generation", "message"),
    [
        ({"backend": "vllm", "autocast": False}, "generation.autocast tune the transformers engine"),
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


def test_a_bf16_run_generates_in_fp32_with_a_static_cache(tmp_path, tiny_model_dir, one_torch_thread):
    """One real step on the CPU under bf16 mixed precision, ``generation: {autocast: false, cache: static}``:
    the rollouts are generated in fp32 through a static cache, the loss's forward still autocasts."""
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "bf16": True,
            "data": {"train": "bundled", "validation": None, "test": None},
            "judge": {"backend": "local-lm", "model": str(tiny_model_dir)},
            "grpo": {"num_generations": 2, "tasks_per_step": 1, "max_completion_length": 4, "max_steps": 1},
            "generation": {"autocast": False, "cache": "static"},
            "harness": {"memory": {"enabled": False}},
            "evolver": {"enabled": False},
            "eval": {"before_training": False, "every_steps": None},
        }
    )
    seen: dict[str, set] = {"generate": set(), "train": set()}

    def hook(trainer, run):
        model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
        generate = model.generate
        phase = {"now": "train"}

        def recording_generate(*a, **k):
            phase["now"] = "generate"
            caches.append(k["generation_config"].cache_implementation)
            try:
                return generate(*a, **k)
            finally:
                phase["now"] = "train"

        model.generate = recording_generate
        mlp = model.model.layers[0].mlp.down_proj
        mlp.register_forward_hook(lambda mod, args, out: seen[phase["now"]].add(out.dtype))

    caches: list = []
    train(config, trainer_hook=hook)
    assert caches == ["static"]
    assert seen["generate"] == {torch.float32}
    assert torch.bfloat16 in seen["train"]
