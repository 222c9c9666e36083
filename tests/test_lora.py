"""LoRA training (the optional ``lora`` section): TRL wraps the policy with peft, only the adapter trains,
and a saved checkpoint loads back as the trained policy (``harnessrl eval`` and ``load_causal_lm``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harnessrl.models import load_causal_lm
from harnessrl.trainer.run import evaluate_run, train
from harnessrl.trainer.train_config import LoraSettings, TrainConfig, load_train_config
from harnessrl.trainer.trl_config import peft_config

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _task(tid: str, domain: str, prompt: str) -> dict:
    return {
        "id": tid,
        "domain": domain,
        "prompt": prompt,
        "rubric": [
            {"id": "c1", "text": "Uses at most three words", "weight": 1, "check": {"type": "word_count", "max": 3}},
            {"id": "c2", "text": "Starts with 'Yes'", "weight": 1, "check": {"type": "starts_with", "text": "Yes"}},
        ],
    }


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory, tiny_model_dir):
    d = tmp_path_factory.mktemp("lora")
    train_file = _write(d / "train.jsonl", [_task(f"t{i}", "d", f"Question {i}?") for i in range(4)])
    held_file = _write(d / "held.jsonl", [_task(f"h{i}", "d", f"Held {i}?") for i in range(2)])
    config = TrainConfig.model_validate(
        {
            "run_dir": str(d / "run"),
            "model": str(tiny_model_dir),
            "device": "cpu",
            "method": "fixed",
            "data": {"train": train_file, "validation": held_file, "test": None},
            "grpo": {
                "num_generations": 2,
                "tasks_per_step": 2,
                "max_completion_length": 6,
                "learning_rate": 5e-2,
                "max_steps": 2,
                "save_steps": 2,
            },
            "eval": {"every_steps": None, "max_new_tokens": 6, "batch_size": 4},
            "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        }
    )
    trainers = []
    train(config, trainer_hook=lambda tr, run: trainers.append(tr))
    return config, trainers[0], Path(config.run_dir)


def test_no_lora_section_means_full_fine_tuning(tmp_path):
    assert peft_config(TrainConfig()) is None
    assert TrainConfig().lora is None


def test_lora_settings_reach_peft():
    cfg = TrainConfig.model_validate({"lora": {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": ["q_proj"]}})
    peft_cfg = peft_config(cfg)
    assert (peft_cfg.r, peft_cfg.lora_alpha, peft_cfg.lora_dropout) == (8, 16, 0.05)
    assert set(peft_cfg.target_modules) == {"q_proj"}
    assert LoraSettings().target_modules == "all-linear"


def test_lora_overrides_on_the_command_line():
    cfg = load_train_config(None, ["lora.r=8", "lora.alpha=16"])
    assert cfg.lora is not None and (cfg.lora.r, cfg.lora.alpha) == (8, 16)


def test_only_the_adapter_trains(lora_run):
    _, trainer, _ = lora_run
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    moved = [p for n, p in trainer.model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in moved), "the adapter's B matrices start at zero and must have moved"


def test_checkpoint_loads_back_as_the_trained_policy(lora_run, tiny_model_dir):
    _, trainer, run_dir = lora_run
    final = run_dir / "checkpoints" / "final"
    assert (final / "adapter_config.json").exists()
    model, tokenizer = load_causal_lm(str(final))
    ids = tokenizer("Question 1?", return_tensors="pt")["input_ids"]
    trainer.model.eval()
    with torch.no_grad():
        want = trainer.model(input_ids=ids).logits
        got = model(input_ids=ids).logits
        base = load_causal_lm(str(tiny_model_dir))[0](input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-5)
    assert not torch.allclose(base, got, atol=1e-4), "the loaded checkpoint is the base model: the adapter was lost"


def test_evaluate_run_reads_a_lora_checkpoint(lora_run):
    _, _, run_dir = lora_run
    out = evaluate_run(run_dir, "final")
    assert out["checkpoint"].endswith("final")
