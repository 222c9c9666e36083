"""Guidance trained under the plain prompt (``harness.guidance.train_on``): a guided member is generated with
the hint and enters the loss with the unguided prompt's ids, so a rewarded guided completion teaches the plain
prompt; ``hinted`` keeps training on the guided prompt. On a tiny random Llama with the real SmolLM2 tokenizer.
"""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM

from harnessrl.data import Task
from harnessrl.interfaces import Harness, SetGuidance
from harnessrl.judges import BackendVerdict, RubricJudge
from harnessrl.records.steps import Recorder
from harnessrl.trainer.generation import completion_logp
from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.run import build_grpo_config
from harnessrl.trainer.train_config import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HINT = "Start your answer with the word ZEBRA."
TASK = Task.model_validate(
    {"id": "t", "domain": "d", "prompt": "Say something.", "rubric": [{"id": "c", "text": "Says it", "weight": 1}]}
)


class Anything:
    name = "anything"

    def grade(self, requests):
        return [BackendVerdict(0.5, 0.9) for _ in requests]


class GuidedWins(RubricReward):
    """The rubric reward, except that a guided member scores 1 and an unguided one 0 (a hint that helps)."""

    def __call__(self, prompts, completions, task_id, rubric_version, completion_ids=None, guided=None, **kw):
        batch = super().__call__(prompts, completions, task_id, rubric_version, completion_ids=completion_ids, **kw)
        for i, g in enumerate(guided):
            batch.results[i] = batch.results[i].model_copy(update={"reward": 1.0 if g else 0.0})
            batch[i] = 1.0 if g else 0.0
        return batch


def _trainer(tmp_path, model_dir, tokenizer, train_on: str) -> HarnessGRPOTrainer:
    harness = Harness([TASK], seed=0)
    harness.apply(SetGuidance(scope="task", target="t", text=HINT, fraction=0.5), step=1)
    config = TrainConfig.model_validate(
        {
            "run_dir": str(tmp_path / "run"),
            "grpo": {
                "num_generations": 4,
                "tasks_per_step": 1,
                "max_completion_length": 6,
                "learning_rate": 5e-2,
                "max_steps": 1,
                "temperature": 1.0,
            },
            "harness": {"guidance": {"train_on": train_on}},
        }
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    return HarnessGRPOTrainer(
        model=model,
        args=build_grpo_config(config, tmp_path / "checkpoints", "cpu"),
        train_dataset=Dataset.from_list([{"prompt": TASK.messages(), "task_id": "t"}] * 4),
        processing_class=tokenizer,
        harness=harness,
        rubric_reward=GuidedWins(RubricJudge(Anything()), harness),
        recorder=Recorder(None),
        guidance_train_on=config.harness.guidance.train_on,
    )


def _scored(trainer):
    """One step's rows generated and scored, as the trainer does it before the update."""
    trainer.model.train()
    rows = trainer.harness_rows(4, 1)
    return rows, trainer._score_rows(rows)


def _ids(tokenizer, messages) -> list[int]:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)


def _prompt(out, i: int) -> list[int]:
    mask = out["prompt_mask"][i].bool()
    return out["prompt_ids"][i][mask].tolist()


@pytest.mark.parametrize("train_on", ["plain", "hinted"])
def test_a_guided_row_enters_the_loss_with_the_prompt_it_trains_on(tmp_path, tiny_model_dir, real_tokenizer, train_on):
    trainer = _trainer(tmp_path, tiny_model_dir, real_tokenizer, train_on)
    rows, out = _scored(trainer)
    assert [r["guided"] for r in rows] == [True, True, False, False]
    hinted = _ids(real_tokenizer, rows[0]["prompt"])
    plain = _ids(real_tokenizer, TASK.messages())
    assert hinted != plain and HINT in rows[0]["prompt"][-1]["content"]
    for i in (2, 3):  # unguided members: their own (plain) prompt either way
        assert _prompt(out, i) == plain
    for i in (0, 1):
        assert _prompt(out, i) == (plain if train_on == "plain" else hinted)
    metrics = trainer._metrics["train"]
    if train_on == "plain":  # the off-policy gap of training the guided completions under the plain prompt
        assert len(metrics["guidance/plain_minus_hinted_logp"]) == 1
        assert metrics["guidance/trained_plain"] == [2.0]
    else:
        assert "guidance/plain_minus_hinted_logp" not in metrics


def _plain_logp(trainer, completion: list[int], tokenizer) -> float:
    model = trainer.accelerator.unwrap_model(trainer.model_wrapped)
    model.eval()
    with torch.no_grad():
        return completion_logp(model, _ids(tokenizer, TASK.messages()), completion, "cpu", trainer.temperature)


def _plain_gain(tmp_path, model_dir, tokenizer, train_on: str) -> float:
    """How much one step on the scored rollouts raises log pi(y | plain prompt) of the first guided completion."""
    trainer = _trainer(tmp_path, model_dir, tokenizer, train_on)
    _, out = _scored(trainer)
    completion = out["completion_ids"][0][out["completion_mask"][0].bool()].tolist()
    before = _plain_logp(trainer, completion, tokenizer)
    trainer._score_rows = lambda rows: {**out}  # train on exactly those rollouts
    trainer.train()
    return _plain_logp(trainer, completion, tokenizer) - before


def test_one_step_raises_the_plain_prompts_probability_of_a_rewarded_guided_completion(
    tmp_path, tiny_model_dir, real_tokenizer
):
    plain = _plain_gain(tmp_path / "plain", tiny_model_dir, real_tokenizer, "plain")
    hinted = _plain_gain(tmp_path / "hinted", tiny_model_dir, real_tokenizer, "hinted")
    # the same rollouts and rewards: trained under the plain prompt, the plain prompt learns the completion more
    # than when it is trained under the hinted one (which teaches the plain prompt only through shared weights)
    assert plain > 1e-3 and plain > hinted, (plain, hinted)
