"""Settings of a training run: one YAML file, validated before any work starts.

Every section is a pydantic model with ``extra="forbid"``: a misspelt key is an error that names it
and lists the valid ones, not a silently ignored setting. ``grpo.extra`` passes any other
``trl.GRPOConfig`` field through unchanged.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator, model_validator

from harnessrl.config import ConfigMapping, ResolvedSetting, apply_overrides, load_yaml, resolved_settings
from harnessrl.critic.trials import TrialConfig
from harnessrl.data.loaders import FILE_FORMATS, PRESETS
from harnessrl.detection.config import DetectorConfig
from harnessrl.errors import ConfigError
from harnessrl.graph.state import GraphConfig, LLMConfig
from harnessrl.interfaces.registry import interface_classes
from harnessrl.interfaces.sampling import DifficultyFilterSettings
from harnessrl.judges.config import JudgeConfig
from harnessrl.trainer.methods import METHOD_TABLE, method_spec, methods_described, plain_method

__all__ = [
    "DapoConfig",
    "DataConfig",
    "EvalConfig",
    "EvolverSettings",
    "GRPOSettings",
    "GenerationConfig",
    "GuidanceTraining",
    "HarnessConfig",
    "LoraSettings",
    "TrainConfig",
    "explain_train_config",
    "load_run_config",
    "load_train_config",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(_Section):
    """Where the tasks come from. ``bundled`` is the bundled Rubric-Mix sample, ``bench`` the CPU benchmark suite,
    ``bench-gold`` the gold-graded suite of stated failures, ``bench-unstated`` the gold-graded suite of failures no
    prompt states.

    Two evaluation splits, both invisible to the harness and graded as ``eval.grade_with`` says: *validation*
    chooses the best checkpoint (and so "steps to best"), *test* is only reported. When both name the
    same file (as ``bundled`` does: the bundled ``heldout.jsonl``) its tasks are split deterministically,
    alternating within each domain in file order: the 1st, 3rd, 5th, ... go to test, the 2nd, 4th, ...
    to validation (bundled: 20 test, 15 validation tasks). ``heldout`` (and ``heldout_per_domain``) is
    the older single setting, still accepted: it names one file for both splits.

    A task's ``gold_rubric`` (what the prompt truly asks) is for evaluation only: every training task
    loses it before the harness sees the task. ``train_rubric: gold`` trains on it instead of the
    task's rubric (the oracles, and a suite's clean variant); the harness still never sees a gold rubric
    as such, only the rubric it trains on.
    """

    train: str = Field(
        default="bundled",
        description="The training tasks: bundled (the Rubric-Mix sample), bench (the CPU suite), bench-gold (the "
        "gold-graded suite of stated failures), bench-unstated (the gold-graded suite of failures no prompt states), "
        "or a path to a JSONL or parquet file (check it first with `harnessrl data validate`).",
    )
    validation: str | None = Field(
        default="bundled",
        description="Tasks that choose the best checkpoint (the same values as train; when it names the same file "
        "as test, the file is split between them); never seen by the harness. null: no best checkpoint.",
    )
    test: str | None = Field(
        default="bundled",
        description="Tasks that are only reported, never used to choose anything (the same values as train). "
        "null: no test evaluation.",
    )
    format: Literal[FILE_FORMATS] = Field(  # type: ignore[valid-type]
        default="auto",
        description=f"How the files are laid out: auto, harnessrl, or a public set's preset ({', '.join(PRESETS)}).",
    )
    train_rubric: Literal["rubric", "gold"] = Field(
        default="rubric",
        description="What training grades with: each task's rubric (the proxy), or its gold rubric (the oracle, "
        "a clean variant; every training task needs one).",
    )
    domain: str | None = Field(
        default=None,
        description="The domain of rows that name none (a preset's own default otherwise, e.g. health for "
        "healthbench). Set it for a public set whose rows carry no domain.",
    )
    tasks_per_domain: int | None = Field(
        default=None,
        ge=1,
        description="Train on the first N tasks of each domain only (file order); null: every task. For a quick "
        "run on a large file.",
    )
    validation_per_domain: int | None = Field(
        default=None, ge=1, description="Validate on the first N tasks of each domain only; null: every task."
    )
    test_per_domain: int | None = Field(
        default=None, ge=1, description="Test on the first N tasks of each domain only; null: every task."
    )

    @model_validator(mode="before")
    @classmethod
    def _heldout_alias(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (
            ("heldout", ("validation", "test")),
            ("heldout_per_domain", tuple(f"{n}_per_domain" for n in ("validation", "test"))),
        ):
            if old not in data:
                continue
            both = [n for n in new if n in data]
            if both:
                raise ValueError(
                    f"data.{old} is the older name for one file split into {' and '.join(f'data.{n}' for n in new)}: "
                    f"set either data.{old} or those, not both (data.{both[0]} is set too)"
                )
            value = data.pop(old)
            for n in new:
                data[n] = value
            warnings.warn(
                f"data.{old} is deprecated: it names one file for both evaluation splits; write "
                + " and ".join(f"data.{n}: {value!r}" for n in new)
                + " instead (the same run)",
                FutureWarning,
                stacklevel=2,
            )
        return data


class GRPOSettings(_Section):
    """The GRPO settings HarnessRL uses most; anything else of ``trl.GRPOConfig`` goes in ``extra``."""

    num_generations: int = Field(
        default=4,
        ge=2,
        description="Rollouts per task (the group size G, TRL's num_generations): GRPO's advantage compares them. "
        "More give a group more chances to split (fewer flat groups) at that many more rollouts a step.",
    )
    tasks_per_step: int = Field(
        default=2,
        ge=1,
        description="Task groups per optimisation step, over all processes (TRL's per-device batch is this x "
        "num_generations / processes). The pool of training tasks must hold at least this many.",
    )
    max_completion_length: int = Field(
        default=48,
        ge=1,
        description="Most tokens a rollout may generate (TRL's max_completion_length); a longer answer is cut "
        "(clipped_share in the evaluation). Raise it for tasks whose good answers are long.",
    )
    learning_rate: float = Field(
        default=5e-6,
        gt=0,
        description="The optimizer's learning rate (TRL's AdamW and schedule; grpo.extra takes lr_scheduler_type "
        "and the like). The benches train the 135M policy at full parameters with 2e-5 to 3e-5; lower it for "
        "larger models, raise it for LoRA.",
    )
    max_steps: int = Field(
        default=40,
        ge=1,
        description="Optimisation steps of the run (TRL's max_steps); --resume of a run trained this far trains "
        "nothing.",
    )
    beta: float = Field(
        default=0.0,
        ge=0,
        description="KL coefficient against the reference (initial) model; 0: no reference model is loaded, as in "
        "recent GRPO and DAPO. Raise it (e.g. 0.04) to keep the policy near where it started.",
    )
    temperature: float = Field(
        default=1.0,
        gt=0,
        description="Sampling temperature of the rollouts (rollout guidance may set another per task or domain). "
        "Lower it when a group's answers are too random to compare, raise it when they are all alike.",
    )
    top_p: float = Field(
        default=1.0, gt=0, le=1, description="Nucleus sampling of the rollouts: 1.0 samples the whole distribution."
    )
    gradient_accumulation_steps: int = Field(
        default=1,
        ge=1,
        description="Micro-batches of tasks_per_step groups accumulated into one optimizer update (TRL's); a "
        "step then draws tasks_per_step x this many distinct tasks. Raise it to train on more groups an update "
        "than fit in memory at once.",
    )
    save_steps: int = Field(
        default=20,
        ge=1,
        description="A checkpoint every N steps (what --resume goes on from); lower it when runs may be killed.",
    )
    save_total_limit: int | None = Field(
        default=2,
        ge=1,
        description="Resumable checkpoints kept (older ones are deleted; checkpoints/best and final stay). "
        "null: keep every one (about 1.6 GB each for the 135M policy at full parameters).",
    )
    logging_steps: int = Field(
        default=1, ge=1, description="Write TRL's metrics to metrics.jsonl (and report_to) every N steps."
    )
    loss_type: str = Field(
        default="dapo",
        description="TRL's GRPO loss normalisation (grpo, bnpo, dr_grpo, dapo, ...; TRL's GRPOConfig.loss_type): "
        "dapo averages over every token of the batch, so long answers do not weigh less a token. Change it to "
        "reproduce a paper's loss.",
    )
    gradient_checkpointing: bool = Field(
        default=False,
        description="Recompute activations in the backward pass: saves memory on big models, slows small ones.",
    )
    extra: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Any other trl.GRPOConfig field, passed through unchanged (e.g. {ddp_timeout: 3600, "
        "warmup_ratio: 0.1}); a field HarnessRL sets itself from these settings is refused.",
    )


class GenerationConfig(_Section):
    """Rollout engine: transformers (CPU or GPU) or vLLM (GPU, ``pip install harnessrl[vllm]``).

    ``autocast``, ``cache`` and ``compile`` tune the transformers engine; ``benchmarks/gpu_check.py run
    --generation-paths`` measures each choice against the others on the same batch."""

    backend: Literal["transformers", "vllm"] = Field(
        default="transformers",
        description="The engine that generates rollouts, the critic's fresh rollouts and the evaluation: "
        "transformers (CPU or GPU), or vllm (GPU, pip install 'harnessrl[vllm]'; far faster for long answers).",
    )
    vllm_mode: Literal["colocate", "server"] = Field(
        default="colocate",
        description="vllm only. colocate: vLLM inside the training process, sharing its GPU "
        "(vllm_gpu_memory_utilization); server: a `trl vllm-serve` server on its own GPU(s), at vllm_server_base_url.",
    )
    vllm_server_base_url: str | None = Field(
        default=None,
        description="vllm server mode: the server's address, e.g. http://127.0.0.1:8000 (it must serve the run's "
        "model; TRL pushes the policy's weights to it after every update).",
    )
    vllm_server_timeout_s: float = Field(
        default=240.0,
        gt=0,
        description="Server mode: how long the run waits before step 1 for the vLLM server to answer /health (TRL's "
        "vllm_server_timeout); past it the run stops with the address and the fix.",
    )
    vllm_gpu_memory_utilization: float = Field(
        default=0.3,
        gt=0,
        le=1,
        description="vllm colocate mode: the share of the GPU's memory vLLM takes (weights and KV cache); the rest "
        "is training's. Lower it when training runs out of memory, raise it for longer or more rollouts.",
    )
    autocast: Literal["generate", "forward", "never"] = Field(
        default="generate",
        description="How a mixed-precision (bf16) run generates. generate: one autocast region around each "
        "generate call, each weight cast once (the numbers of 'forward', far fewer kernels); forward: an "
        "autocast region per forward pass, every weight recast at every token (TRL's); never: the weights' own "
        "dtype (false reads as never). The update keeps its autocast. No effect on an fp32 run (a CPU run by "
        "default).",
    )

    @field_validator("autocast", mode="before")
    @classmethod
    def _autocast_flag(cls, value: Any) -> Any:
        # YAML reads off / no / false as False (and on / yes / true as True)
        return {False: "never", True: "generate"}.get(value, value) if isinstance(value, bool) else value

    cache: Literal["dynamic", "static"] = Field(
        default="dynamic", description="The KV cache of transformers' generate; static: preallocated (see compile)."
    )
    compile: bool = Field(
        default=False,
        description="torch.compile the decode step (needs cache: static and a GPU; prompts are then padded to a "
        "multiple of 64 tokens so few shapes compile). The first steps pay the compilation.",
    )


class MemoryConfig(_Section):
    """The training memory: embedded Chroma in the run directory, or a Chroma server."""

    enabled: bool = Field(
        default=True,
        description="Keep the training memory (per-step task records, failures, candidates, trials, outcomes), "
        "which the evolver queries (query_memory). false: no memory (the evolver then decides without history).",
    )
    url: str | None = Field(
        default=None,
        description="A Chroma server, e.g. http://127.0.0.1:8000; null: embedded Chroma in <run_dir>/memory.",
    )


class GuidanceTraining(_Section):
    """How a guided rollout (generated with a hint for part of its group) enters the loss."""

    train_on: Literal["plain", "hinted"] = Field(
        default="plain",
        description="plain: a guided completion is trained under the task's unguided prompt (the hint is seen "
        "while generating only, as RuscaRL strips its scaffold before the update), so it teaches the plain prompt; "
        "the off-policy gap is logged as guidance/plain_minus_hinted_logp. hinted: under the guided prompt.",
    )


class HarnessConfig(_Section):
    """How the harness reads the rewards (thresholds the metrics and the detectors share)."""

    sampling_floor: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="Task sampling's floor: every active task keeps at least sampling_floor / n of the draw (n "
        "training tasks), so no reweighting starves a task. 0: a task can be weighted out entirely.",
    )
    detectors: DetectorConfig = Field(
        default_factory=DetectorConfig, description="Reward-failure detectors; detectors.eps also defines a flat group."
    )
    memory: MemoryConfig = Field(
        default_factory=lambda: MemoryConfig(), description="The training memory (Chroma) the evolver queries."
    )
    guidance: GuidanceTraining = Field(
        default_factory=lambda: GuidanceTraining(), description="How guided rollouts enter the loss."
    )
    keep_rollout_steps: int = Field(
        default=4,
        ge=1,
        description="Steps whose rollouts are kept for re-grading (with the evolver: at least evolver.every_steps).",
    )
    interfaces: list[str] = Field(
        default_factory=list,
        description="Dotted paths ('my_pkg.module:MyInterface') of interfaces to add to the registered ones "
        "(built in, and installed through the 'harnessrl.interfaces' entry-point group).",
    )
    interface_settings: dict[str, dict[str, JsonValue]] = Field(
        default_factory=dict, description="Settings of an interface, by its name (a plug-in reads its own)."
    )

    @model_validator(mode="after")
    def _interfaces_load(self):
        known = interface_classes(self.interfaces)  # ConfigError with the reason when one cannot be loaded
        unknown = sorted(set(self.interface_settings) - set(known))
        if unknown:
            raise ValueError(f"interface_settings name interface(s) {unknown} that are not registered: {sorted(known)}")
        return self


class EvalConfig(_Section):
    """Held-out evaluation: greedy decoding or the mean of k sampled completions per task, graded with each
    task's gold rubric (what the prompt truly asks) and with its rubric version 0 (the proxy training
    optimises), by the eval judge's own settings."""

    grade_with: Literal["auto", "gold", "rubric"] = Field(
        default="auto",
        description="The score that chooses the best checkpoint and is reported first: gold (every evaluated task "
        "needs a gold_rubric), rubric (version 0, the proxy), auto: gold when every evaluated task has one. The "
        "proxy is reported beside a gold score.",
    )

    every_steps: int | None = Field(
        default=20,
        ge=1,
        description="Evaluate the validation and test splits every N training steps (each evaluation generates "
        "eval.completions answers for every held-out task). null: only before and after training.",
    )
    before_training: bool = Field(
        default=True,
        description="Evaluate the untrained policy at step 0 (the baseline every curve starts from; see base_cache "
        "to share it between runs). false: skip it.",
    )
    max_new_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Most tokens an evaluated answer may generate; null: grpo.max_completion_length, as training.",
    )
    batch_size: int = Field(default=16, ge=1, description="Prompts per generate call (each with its completions).")
    completions: int = Field(
        default=1,
        ge=1,
        description="Completions per task: 1 scores the greedy answer; k > 1 the mean reward of k sampled ones "
        "(mean@k: a score that moves with the policy's sampled answers, not in jumps of one task).",
    )
    temperature: float = Field(default=1.0, gt=0, description="Sampling temperature when completions > 1.")
    seed: int = Field(default=0, description="Seed of the evaluation's sampling (the same draws at every checkpoint).")
    judge: JudgeConfig | None = Field(default=None, description="Default: the training judge's settings.")
    base_cache: str | None = Field(
        default=None,
        description="A folder where the evaluation before training (step 0: the untrained policy) is kept and reused "
        "by every run with the same model, tasks, decoding, grading, judge and torch thread count (a bench sets it, "
        "so its runs evaluate the base policy once); null: every run evaluates it.",
    )


class LoraSettings(_Section):
    """LoRA adapters (peft) in place of full fine-tuning: far fewer trainable weights, a cheaper update.
    Checkpoints then hold the adapter; ``harnessrl eval`` loads it onto its base model (peft installed)."""

    r: int = Field(default=16, ge=1, description="Rank of the adapter matrices.")
    alpha: int = Field(default=32, ge=1, description="Scaling numerator (the update is scaled by alpha / r).")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="Dropout on the adapter's input (peft's lora_dropout).")
    target_modules: list[str] | str = Field(
        default="all-linear", description="Module names to adapt, or 'all-linear' (every linear layer but the head)."
    )


class DapoConfig(_Section):
    """DAPO's dynamic sampling (``method: dapo``): drop groups whose reward std is below ``eps`` and refill
    the batch with groups of further tasks, up to ``max_extra_groups`` extra groups a step; a batch
    still short at the cap is filled with the dropped groups of largest std. Every generated rollout
    counts as spent (``rollouts/generated``), the dropped ones too (``rollouts/discarded``)."""

    eps: float | None = Field(
        default=None,
        ge=0,
        description="A group whose reward std is below this is dropped and refilled (reward units, 0 to 1). "
        "null: harness.detectors.eps, the detectors' flat group.",
    )
    max_extra_groups: int | None = Field(
        default=None,
        ge=0,
        description="Extra groups a step may generate to refill dropped ones (each costs num_generations "
        "rollouts). null: 2 x grpo.tasks_per_step. Lower it to bound a step's cost on data with many flat groups.",
    )


AUDIT_PROBE_TASKS = 2
"""The audit's probes per finding when ``evolver.audit_probe_tasks`` is left null and the run trains on one process."""


class EvolverSettings(_Section):
    """The harness evolver of a training run (the ``evolver`` section of the config)."""

    enabled: bool | None = Field(
        default=None,
        exclude=True,
        description="Deprecated (a warning; never written to a run's config.yaml): whether the evolver runs is the "
        "run's `method` alone. false without a method still means method fixed; a value the method contradicts is an "
        "error. Set `method` instead.",
    )
    backend: Literal["rule-based", "llm"] = Field(
        default="rule-based", description="rule-based: the embedded decision procedure (no LLM); llm: evolver.llm."
    )
    llm: LLMConfig | None = Field(default=None, description="The chat model for backend 'llm'.")
    mode: Literal["in-process", "external"] = Field(
        default="in-process",
        description="in-process: the evolution points run inside the training process. external: the run only "
        "serves the tools (run_dir/tool_server.json) and an evolver started apart, `harnessrl evolver --run-dir`, "
        "holds training while it works (any machine that reaches the server; no torch needed).",
    )
    every_steps: int = Field(default=5, ge=1, description="Evolution point every N steps when failures are present.")
    hold_s: float = Field(
        default=300,
        gt=0,
        le=3600,
        description="External mode: the lease of an evolver's hold on training (training goes on when it runs out).",
    )
    max_trial_age_steps: int = Field(
        default=0,
        ge=0,
        description="Training steps a trial stays valid for a commit (0: the policy must not have moved since).",
    )
    audit_rubrics: bool = Field(
        default=True,
        description="Before step 1, list the requirements the training prompts state and their rubrics do not check "
        "(exact checks their reference answers pass), offered to the evolver from the first graded groups on "
        "(docs/design.md section 4); false: repairs wait for a detected failure.",
    )
    audit_probe_tasks: int | None = Field(
        default=None,
        ge=0,
        description="Before step 1, one fresh group of the initial policy on each of up to this many tasks of every "
        "rubric audit finding (a task two findings share is probed once), graded like a training group and never "
        "trained on, within trials.max_rollout_share of the run's planned training rollouts; an evolution point at "
        "step 0 decides on them, so a finding the probes decide is repaired from step 1 (docs/design.md section 4, "
        "'Audit probes'). Their rollouts count as trial rollouts. 0: none (a finding waits for its tasks' training "
        "groups). null (the default): 2 where the run trains on one process, none on several (the probes are made "
        "on the main process before step 1; a number above 0 on several processes is refused).",
    )
    first_evidence: bool = Field(
        default=True,
        description="An evolution point also at the step where a failure of a new kind is first detected on a group "
        "of the data (family, tag or domain), or where the audit's findings have new graded groups; false: only "
        "every every_steps steps.",
    )
    evidence_draws: bool = Field(
        default=False,
        description="A rubric audit finding the critic cannot decide yet on the groups graded so far asks task "
        "sampling to draw one of the tasks it covers, whose rubric no commit has changed yet, at the next step (one "
        "task a step, never more than half the batch), instead of waiting for the draw to come round (docs/design.md "
        "section 4, 'Evidence draws'). Needs grpo.tasks_per_step >= 2.",
    )
    graph: GraphConfig = Field(
        default_factory=GraphConfig,
        description="The evolver graph (attributor -> proposer -> critic): its bounds, prompts and remedies.",
    )
    trials: TrialConfig = Field(
        default_factory=TrialConfig,
        description="The critic's trials on the frozen policy: their budgets, sequential looks and acceptance rule.",
    )

    @field_validator("enabled")
    @classmethod
    def _enabled_is_deprecated(cls, v: bool | None) -> bool | None:
        if v is not None:
            evolving = " or ".join(n for n, spec in METHOD_TABLE.items() if spec.evolver)
            warnings.warn(
                f"evolver.enabled is deprecated: whether the evolver runs is the run's method alone. Drop "
                f"evolver.enabled and use method instead (method: {plain_method()} for a fixed harness, "
                f"method: {evolving} for the evolving one)",
                FutureWarning,
                stacklevel=2,
            )
        return v

    def probe_tasks(self, processes: int) -> int:
        """The audit's probes per finding on ``processes`` training processes: the setting, or when it is null
        :data:`AUDIT_PROBE_TASKS` on one process and none on several. A number above 0 on several processes is a
        :class:`~harnessrl.errors.ConfigError` saying what to do (the probes are made on the main process before
        step 1)."""
        if self.audit_probe_tasks is None:
            return AUDIT_PROBE_TASKS if processes <= 1 else 0
        if self.audit_probe_tasks and processes > 1:
            raise ConfigError(
                f"evolver.audit_probe_tasks generates the rubric audit's probes on the main process before step 1, "
                f"and this run has {processes} processes: set evolver.audit_probe_tasks: 0 (or leave it null), or "
                "train on one process"
            )
        return self.audit_probe_tasks


class TrainConfig(_Section):
    """A whole training run."""

    run_dir: str = Field(
        default="runs/demo",
        description="Where the run writes everything (config.yaml, events.jsonl, checkpoints/, report.html, ...); "
        "one live training process at a time (--resume goes on there, --overwrite starts it again).",
    )
    seed: int = Field(
        default=0,
        description="The run's seed: task sampling, rollouts, the critic's trials (TRL's seed). Change it for "
        "another sample of the same experiment; a bench sets it per run.",
    )
    method: str = Field(
        default="harnessrl",
        description="The training method, one of the table of harnessrl.trainer.methods: " + methods_described(),
    )
    model: str = Field(default="embedded", description="'embedded' (SmolLM2-135M-Instruct), a hub id or a path.")
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description="Where the policy, the critic's rollouts, the evaluation and the semantic / local-lm judges "
        "run (a judge's own device overrides it). auto: the GPU where there is one.",
    )
    bf16: bool | None = Field(
        default=None,
        description="Train in bf16 mixed precision. null: on for CUDA, off on a CPU (a CPU with AMX can set true: "
        "faster, a less precise update).",
    )
    data: DataConfig = Field(default_factory=DataConfig, description="Where the tasks come from, and the splits.")
    judge: JudgeConfig = Field(default_factory=JudgeConfig, description="The judge that grades rollouts for reward.")
    grpo: GRPOSettings = Field(default_factory=GRPOSettings, description="TRL's GRPO settings.")
    generation: GenerationConfig = Field(
        default_factory=GenerationConfig, description="The rollout engine (transformers or vLLM) and its tuning."
    )
    harness: HarnessConfig = Field(
        default_factory=HarnessConfig, description="The harness: detectors, memory, guidance, plug-in interfaces."
    )
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Held-out evaluation (validation and test).")
    evolver: EvolverSettings = Field(
        default_factory=EvolverSettings, description="The evolver that changes the harness, and its critic."
    )
    dapo: DapoConfig = Field(
        default_factory=DapoConfig,
        description="DAPO's dynamic sampling (methods dapo and harnessrl): which groups are dropped and refilled.",
    )
    odf: DifficultyFilterSettings = Field(
        default_factory=DifficultyFilterSettings, description="Online difficulty filtering (method odf)."
    )
    lora: LoraSettings | None = Field(default=None, description="LoRA adapters (peft); null: full fine-tuning.")
    report_to: list[str] = Field(default_factory=list, description="TRL/transformers loggers, e.g. [wandb].")

    @model_validator(mode="after")
    def _check(self):
        gen = self.generation
        if gen.backend == "vllm" and self.device == "cpu":
            raise ValueError("generation.backend 'vllm' needs a GPU: set device to 'cuda' or 'auto'")
        tuned = [
            k
            for k, v in (
                ("autocast", gen.autocast != "generate"),
                ("cache", gen.cache != "dynamic"),
                ("compile", gen.compile),
            )
            if v
        ]
        if gen.backend == "vllm" and tuned:
            raise ValueError(
                f"generation.{', generation.'.join(tuned)} tune the transformers engine, but generation.backend is "
                "'vllm' (which has its own): drop them, or use backend 'transformers'"
            )
        if gen.compile and gen.cache != "static":
            raise ValueError(
                "generation.compile needs generation.cache: static (a dynamic cache changes shape every token)"
            )
        if self.evolver.evidence_draws and self.grpo.tasks_per_step < 2:
            raise ValueError(
                "evolver.evidence_draws draws a pending repair's task in one place of a step's batch, at most half of "
                f"it, and grpo.tasks_per_step is {self.grpo.tasks_per_step}: set tasks_per_step to 2 or more, or "
                "drop evidence_draws"
            )
        return self

    @model_validator(mode="after")
    def _trials_generate_as_training_does(self):
        # the critic's fresh rollouts are samples of the policy as training draws them: the same completion
        # budget unless evolver.trials.max_new_tokens says otherwise
        trials = self.evolver.trials
        if "max_new_tokens" not in trials.model_fields_set and trials.max_new_tokens != self.grpo.max_completion_length:
            trials = trials.model_copy(update={"max_new_tokens": self.grpo.max_completion_length})
            self.evolver = self.evolver.model_copy(update={"trials": trials})
        return self

    @model_validator(mode="after")
    def _graph_knows_the_interfaces(self):
        # the evolver (in-process or external, reading this config) sees the run's added interfaces too
        if self.harness.interfaces != self.evolver.graph.interfaces:
            graph = self.evolver.graph.model_copy(update={"interfaces": list(self.harness.interfaces)})
            self.evolver = self.evolver.model_copy(update={"graph": GraphConfig.model_validate(graph.model_dump())})
        return self

    @field_validator("method")
    @classmethod
    def _known_method(cls, v: str) -> str:
        method_spec(v)  # an unknown one: a ValueError listing the methods
        return v

    @model_validator(mode="after")
    def _resolve_method(self):
        spec = method_spec(self.method)
        if spec.train_rubric is not None:  # an oracle: trained on the gold rubrics
            if "train_rubric" in self.data.model_fields_set and self.data.train_rubric != spec.train_rubric:
                raise ValueError(
                    f"method {self.method!r} trains on the {spec.train_rubric} rubrics, but data.train_rubric is "
                    f"{self.data.train_rubric!r}: drop data.train_rubric, or use method {plain_method()!r}"
                )
            self.data = self.data.model_copy(update={"train_rubric": spec.train_rubric})
        # whether the evolver runs is the method's alone: the deprecated evolver.enabled is read here, never kept
        enabled = self.evolver.enabled
        if enabled is None:
            return self
        if spec.evolver and not enabled:  # the older way to ask for a fixed harness
            if "method" in self.model_fields_set:
                raise ValueError(
                    f"method {self.method!r} is the evolving harness, but evolver.enabled is false: "
                    f"use method {plain_method(spec.train_rubric)!r} for a fixed harness (and drop evolver.enabled)"
                )
            self.method = plain_method(spec.train_rubric)
        elif not spec.evolver and enabled:
            evolving = " or ".join(repr(n) for n, s in METHOD_TABLE.items() if s.evolver)
            raise ValueError(
                f"method {self.method!r} never runs the evolver, but evolver.enabled is true: "
                f"drop evolver.enabled, or use method {evolving}"
            )
        self.evolver = self.evolver.model_copy(update={"enabled": None})
        return self

    @property
    def runs_evolver(self) -> bool:
        """Whether the evolver runs: the method's to say (:attr:`~harnessrl.trainer.methods.MethodSpec.evolver`)."""
        return method_spec(self.method).evolver

    @property
    def eval_judge(self) -> JudgeConfig:
        return self.eval.judge or self.judge

    @property
    def dapo_eps(self) -> float:
        """The std below which DAPO drops a group (default: the detectors' flat-group eps)."""
        return self.harness.detectors.eps if self.dapo.eps is None else self.dapo.eps

    @property
    def dapo_max_extra_groups(self) -> int:
        return 2 * self.grpo.tasks_per_step if self.dapo.max_extra_groups is None else self.dapo.max_extra_groups


def _explain(err: ValidationError, path: str | Path | None, overrides: dict[str, str]) -> str:
    """The errors, one a line, each naming where the bad setting came from: an override (``-s key=value``),
    the file, or the defaults."""
    lines = []
    for e in err.errors(include_url=False):
        loc = [str(p) for p in e["loc"]]
        where = ".".join(loc) or "config"
        # the -s that set this key or a section above it (the last one wins, as it did when applied)
        given = [item for key, item in overrides.items() if loc[: len(key.split("."))] == key.split(".")]
        source = f"-s {given[-1]}" if given else str(path) if path else "the defaults"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {where} (from {source}): unknown setting (check the spelling; see configs/demo.yaml)")
        else:
            lines.append(f"  {where} (from {source}): {e['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def _read_settings(
    path: str | Path | None, overrides: list[str] | None
) -> tuple[ConfigMapping, ConfigMapping, list[tuple[str, JsonValue, str]]]:
    """The file's mapping, the settings after the overrides, and each override parsed: (key, value, as written)."""
    import yaml

    file_data: ConfigMapping = load_yaml(path) if path else {}
    data, parsed = file_data, []
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.sub=value, e.g. grpo.max_steps=10")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"-s {item}: the value is not valid YAML ({getattr(e, 'problem', e)})") from None
        data = apply_overrides(data, {key.strip(): value})
        parsed.append((key.strip(), value, item))
    return file_data, data, parsed


def _validate(data: ConfigMapping, path: str | Path | None, parsed: list[tuple[str, JsonValue, str]]) -> TrainConfig:
    given: dict[str, str] = {}
    for key, _, item in parsed:  # the last -s of a key is the one that holds
        given.pop(key, None)
        given[key] = item
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as e:
        sources = " and ".join(x for x in (str(path) if path else "", "-s" if given else "") if x) or "the config"
        raise ConfigError(f"invalid settings (in {sources}):\n{_explain(e, path, given)}") from None


def load_train_config(path: str | Path | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Read a YAML config and apply ``key.sub=value`` overrides (values parsed as YAML). An invalid setting
    is a :class:`ConfigError` that names where it came from (the file, or the ``-s key=value``)."""
    _, data, parsed = _read_settings(path, overrides)
    return _validate(data, path, parsed)


def load_run_config(path: str | Path) -> TrainConfig:
    """A run's own ``config.yaml``, as ``harnessrl train`` saved it. Runs saved before 2026-12-07 wrote the deprecated
    ``evolver.enabled`` beside ``method``, copied from it: where the two agree it is dropped here without the
    deprecation warning (that warning is for a config a user writes, and the run's meaning is its method); where they
    disagree the config is read as written, so the error says so."""
    data = load_yaml(path)
    evolver, method = data.get("evolver"), data.get("method", TrainConfig.model_fields["method"].default)
    spec = METHOD_TABLE.get(method) if isinstance(method, str) else None
    if isinstance(evolver, dict) and spec is not None and evolver.get("enabled", spec.evolver) == spec.evolver:
        data = {**data, "evolver": {k: v for k, v in evolver.items() if k != "enabled"}}
    return _validate(data, path, [])


def explain_train_config(
    path: str | Path | None = None, overrides: list[str] | None = None
) -> tuple[TrainConfig, list[ResolvedSetting]]:
    """The config :func:`load_train_config` reads, and each of its values with its source: ``default``, the
    file's path, the ``-s key=value`` that set it, or ``derived`` (a validator computed it from another setting,
    e.g. ``data.train_rubric`` from ``method``, ``evolver.trials.max_new_tokens`` from
    ``grpo.max_completion_length``)."""
    file_data, data, parsed = _read_settings(path, overrides)
    config = _validate(data, path, parsed)
    return config, resolved_settings(config, file_data, parsed, file_label=str(path) if path else "file")
