"""The stages of one training run, in order: the settings checked, the models and judges loaded and asked, the run
directory opened, the harness built (or resumed), TRL's trainer built, the harness attached, ``run_start`` written,
training run, and the run finished (:mod:`harnessrl.trainer.run_summary`).

Everything that can be refused is checked, and the model and the judges are built and asked, before anything on
disk changes (--overwrite deletes the previous run only then). Each stage fills in its part of the run's
:class:`~harnessrl.trainer.run_state.RunState`; resuming is :mod:`harnessrl.trainer.resume`'s, asked at each stage
what to restore. ``method`` selects what each run turns on (the evolver, dynamic sampling, the difficulty filter, the
gold rubrics) through its entry in :data:`~harnessrl.trainer.methods.METHOD_TABLE`. A full disk at any stage after
the checks ends the run with one paragraph (:mod:`harnessrl.trainer.disk_full`), not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from harnessrl.errors import HarnessRLError
from harnessrl.interfaces.harness import Harness
from harnessrl.records.checkpoints import checkpoint_step, last_checkpoint
from harnessrl.records.run_dir import LOCK_NAME, LockOwner, RunDir, clear_run_dir, is_disk_full
from harnessrl.trainer.disk_full import disk_full_error
from harnessrl.trainer.methods import MethodSettings, method_spec
from harnessrl.trainer.resume import (
    restore_accounting,
    restore_harness,
    restore_listeners,
    restore_records,
)
from harnessrl.trainer.run_state import RunState, TrainerHook
from harnessrl.trainer.run_summary import RunSummary, finish_run, saved_summary
from harnessrl.trainer.run_tasks import load_run_tasks
from harnessrl.trainer.trl_config import (
    build_grpo_config,
    check_pool_fills_a_step,
    is_main_process,
    judge_on_device,
    num_processes,
    peft_config,
    resolve_device,
)

if TYPE_CHECKING:
    from harnessrl.trainer.train_config import TrainConfig

__all__ = ["rollout_steps_kept", "run_stages"]


def run_stages(
    config: TrainConfig,
    *,
    resume: bool,
    overwrite: bool,
    console: Console | None,
    trainer_hook: TrainerHook | None,
    stale_lock: LockOwner | None = None,
) -> RunSummary:
    """The stages of a run: everything that can be refused is checked, and the model and the judges are built
    and asked, before anything on disk changes (--overwrite deletes the previous run only then). A full disk
    at any stage after that ends the run with one paragraph
    (:func:`~harnessrl.trainer.disk_full.disk_full_error`), not a traceback."""
    r = RunState(config, resume, overwrite, console or Console(), trainer_hook, main=is_main_process())
    r.stale_lock = stale_lock
    finished = _check_settings(r)
    if finished is not None:
        return finished
    _load_models_and_judges(r)
    try:
        _open_run_dir(r)
        _build_harness(r)
        _build_trainer(r)
        _attach_listeners(r)
        if r.main:
            _write_start_event(r)
        _run_training(r)
        r.stage = "ending"
        return finish_run(r)
    except Exception as e:
        if r.run is None or not r.main or not is_disk_full(e, r.run_path):
            raise
        raise disk_full_error(r, e) from e


def _check_settings(r: RunState) -> RunSummary | None:
    """Data, splits, grading, device and the GRPO config, validated; a finished run's summary on --resume (and
    ``end_only`` set for a run stopped while it ended)."""
    from harnessrl.trainer.evaluation import resolve_grade_with

    config = r.config
    r.tasks = load_run_tasks(config)
    r.grade_with = resolve_grade_with(config.eval.grade_with, r.tasks.eval_splits)
    r.device = resolve_device(config)
    r.run_path = Path(config.run_dir)
    if r.run_path.exists() and any(p.name != LOCK_NAME for p in r.run_path.iterdir()) and not (r.resume or r.overwrite):
        raise HarnessRLError(
            f"{r.run_path} already holds a run: pass --resume to continue it or --overwrite to start again "
            "(or choose another run_dir)"
        )
    if r.resume and r.overwrite:
        raise HarnessRLError("--resume and --overwrite contradict each other: choose one")
    args = build_grpo_config(config, r.run_path / "checkpoints", r.device, num_processes())
    check_pool_fills_a_step(config, args, len(r.tasks.train))
    if not r.resume:
        return None
    run = RunDir(r.run_path, create=False)
    step = checkpoint_step(last_checkpoint(run))
    if step < config.grpo.max_steps:
        return None  # training left to do
    finished = saved_summary(run)
    if finished is not None:
        r.console.log(
            f"{r.run_path} is already finished: trained to step {finished.steps} (grpo.max_steps "
            f"{config.grpo.max_steps}); nothing to train. Raise grpo.max_steps to train on, or use --overwrite "
            "to start again"
        )
        return finished
    r.end_only = True  # trained to its last step, no summary: the end is all that is left
    r.console.log(
        f"{r.run_path} trained to its last step ({step}) but was stopped while it ended (no summary.json): "
        "ending it now (the final evaluation and the summary), with no step trained"
    )
    return None


def _load_models_and_judges(r: RunState) -> None:
    """The policy, the judges on their devices, and the judges' check before training."""
    from harnessrl.judges import build_judge
    from harnessrl.judges.preflight import preflight_judge
    from harnessrl.models import load_causal_lm

    config, console, device = r.config, r.console, r.device
    eval_splits = r.tasks.eval_splits  # type: ignore[union-attr]
    gen = config.generation
    if gen.backend == "vllm" and gen.vllm_mode == "server":  # a server that is down stops the run here
        from harnessrl.trainer.vllm_server import check_vllm_server, server_url

        url = server_url(gen.vllm_server_base_url, config.grpo.extra)
        with console.status(f"waiting for the vLLM server at {url} (up to {gen.vllm_server_timeout_s:.0f} s)..."):
            served = check_vllm_server(url, timeout_s=gen.vllm_server_timeout_s)
        console.log(f"vLLM server at {url} serves {served}")
    with console.status(f"loading {config.model} on {device}..."):
        r.model, r.tokenizer = load_causal_lm(config.model, device=device)
        r.model.train()
    # every model-bearing part follows the run's device unless its own setting says otherwise
    judge_config, eval_judge_config = judge_on_device(config.judge, device), judge_on_device(config.eval_judge, device)
    r.devices = {
        "policy": device,
        "critic_trials": device,  # fresh rollouts of the policy itself (vLLM's engine: set once the trainer exists)
        "evaluation": device,
        "judge": judge_config.where(),  # the reward, and the reference answers' grading
        "eval_judge": eval_judge_config.where() if eval_splits else None,
    }
    with console.status(f"loading the {config.judge.backend} judge on {r.devices['judge']}..."):
        r.judge = build_judge(judge_config)
        r.eval_judge = build_judge(eval_judge_config) if eval_splits else None
    with console.status("checking that the judge answers..."):  # a dead judge stops the run before any step
        train_tasks = r.tasks.train  # type: ignore[union-attr]
        n = config.judge.preflight
        r.preflight = {"judge": preflight_judge(r.judge, train_tasks, n=n, where=r.devices["judge"])}
        if r.eval_judge is not None and config.eval.judge is not None:  # a judge of its own for evaluation
            r.preflight["eval_judge"] = preflight_judge(
                r.eval_judge,
                [t for split in eval_splits.values() for t in split],
                n=config.eval.judge.preflight,
                setting="eval.judge",
                where=r.devices["eval_judge"] or "",
            )


def _open_run_dir(r: RunState) -> None:
    """The run directory: the previous run cleared (--overwrite), the resolved config written."""
    if r.overwrite and r.run_path.exists() and r.main:
        clear_run_dir(r.run_path)  # all but the lock this process holds
    r.run = RunDir(r.run_path)
    if r.main:
        r.run.write_config(r.config)


def _build_harness(r: RunState) -> None:
    """The harness (resumed from harness.json), the step recorder, and a resumed run's records rolled back."""
    from harnessrl.records.steps import Recorder

    config, run, console = r.config, r.run, r.console
    assert run is not None
    harness_settings = {
        "sampling_floor": config.harness.sampling_floor,
        "seed": config.seed,
        "temperature": config.grpo.temperature,
        "interfaces": config.harness.interfaces,
        "settings": config.harness.interface_settings,
    }
    train_tasks = r.tasks.train  # type: ignore[union-attr]
    r.harness = restore_harness(run, train_tasks, **harness_settings) if r.resume else None
    if r.harness is not None:
        console.log(f"resumed harness versions {r.harness.versions}")
    else:
        r.harness = Harness(train_tasks, **harness_settings)
    # online difficulty filtering is a fixed policy of the task-sampling interface (its history persists
    # in harness.json); every other method samples without it
    r.harness.sampling.set_difficulty_filter(config.odf if method_spec(config.method).difficulty_filter else None)
    if r.main:
        r.harness.save(run.harness)
    keep_steps = rollout_steps_kept(config)
    if keep_steps != config.harness.keep_rollout_steps:
        console.log(
            f"keeping the rollouts of {keep_steps} steps (harness.keep_rollout_steps "
            f"{config.harness.keep_rollout_steps} < evolver.every_steps), so that every failure an evolution "
            "point handles still has its rollouts for the critic to re-grade"
        )
    r.recorder = Recorder(run.path, keep_steps=keep_steps)
    # a resumed run goes on from its last complete checkpoint: the records of the steps after it move aside
    # (they are trained again, and recorded once), and a commit whose event a kill cut off is written
    if r.resume:
        r.resumed = restore_records(run, r.harness, r.recorder, main=r.main)


def _build_trainer(r: RunState) -> None:
    """TRL's trainer with the harness, the rubric reward and the callbacks (evaluation among them)."""
    from transformers import PrinterCallback

    from harnessrl.trainer.callbacks import EvalCallback, MetricsCallback, ProgressCallback
    from harnessrl.trainer.evaluation import eval_decoding
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer
    from harnessrl.trainer.policy_sampling import check_main_process_sampling, evaluation_sampler, sampling_place
    from harnessrl.trainer.rewards import RubricReward

    config, run = r.config, r.run
    assert run is not None and r.tasks is not None
    callbacks: list = [MetricsCallback(run), ProgressCallback(r.console)]
    if r.tasks.eval_splits:
        r.eval_cb = EvalCallback(
            run,
            r.tasks.eval_splits,
            r.eval_judge,
            every_steps=config.eval.every_steps,
            before_training=config.eval.before_training,
            console=r.console,
            grade_with=r.grade_with,  # type: ignore[arg-type]
            base_cache=config.eval.base_cache,
            # what the untrained policy is: the model (and its LoRA adapter, whose start leaves it unchanged)
            policy_identity={"model": config.model, "lora": config.lora is not None, "bf16": config.bf16},
            **eval_decoding(config),
        )
        callbacks.append(r.eval_cb)
    r.trainer = trainer = HarnessGRPOTrainer(
        model=r.model,
        args=build_grpo_config(config, run.checkpoints, r.device, num_processes()),
        processing_class=r.tokenizer,
        harness=r.harness,
        rubric_reward=RubricReward(r.judge, r.harness),
        recorder=r.recorder,
        zero_std_eps=config.harness.detectors.eps,
        flat_low=config.harness.detectors.low,
        flat_high=config.harness.detectors.high,
        dapo_eps=config.dapo_eps if method_spec(config.method).dynamic_sampling else None,
        dapo_max_extra_groups=config.dapo_max_extra_groups,
        max_missing_share=config.judge.max_missing_share,
        on_too_many_missing=config.judge.on_too_many_missing,
        generation_autocast=config.generation.autocast,
        compile_generation=config.generation.compile,
        guidance_train_on=config.harness.guidance.train_on,
        callbacks=callbacks,
        peft_config=peft_config(config),
    )
    if r.resume:  # the cumulative counters go on from where the run stopped
        restore_accounting(run, trainer.accounting)
    trainer.remove_callback(PrinterCallback)
    if config.runs_evolver or r.eval_cb is not None:
        check_main_process_sampling(trainer)  # on every process, so that all of them stop
    if r.eval_cb is not None:
        r.eval_cb.trainer = trainer
        # through the run's vLLM engine when it has one, every process's share with several (None: transformers
        # here), every checkpoint on the same draws
        r.eval_cb.sampler = evaluation_sampler(trainer, r.tokenizer, eval_decoding(config))
    r.devices["critic_trials"] = r.devices["evaluation"] = sampling_place(trainer, r.device)


def _attach_listeners(r: RunState) -> None:
    """What listens to each step: the harness (detectors, memory, the evolver and its tool server, through
    :func:`~harnessrl.trainer.attach.attach_harness`, as a TRL script attaches it) and ODF's feed."""
    from harnessrl.trainer.attach import attach_harness

    config, run, trainer, main = r.config, r.run, r.trainer, r.main
    assert run is not None and r.harness is not None
    with r.console.status("attaching the harness (detectors, training memory, evolver)..."):
        r.attachment = attach = attach_harness(
            trainer,
            run.path,
            detectors=config.harness.detectors,
            memory=config.harness.memory,
            evolver=config.evolver if config.runs_evolver else None,
            seed=config.seed,
            console=r.console,
            close_at_train_end=False,  # closed by finish_run, once the summary has read the memory's counts
        )
    if r.resume:  # the detectors' windows, the critic's step records and the evolver's decisions go on where they were
        restore_listeners(
            run,
            r.resumed,
            r.recorder,
            attach.monitor.detector.observe if main else None,
            attach.evolution.service if attach.evolution is not None else None,
            window=config.harness.detectors.window * 4,
        )
    if method_spec(config.method).difficulty_filter:
        trainer.step_listeners.append(_DifficultyFeed(r.harness, run if main else None))
    if attach.evolution is not None:
        r.console.log(
            f"harness tools served at {attach.server.url} (evolver: {config.evolver.backend}, {config.evolver.mode})"
        )
    if r.trainer_hook is not None:
        r.trainer_hook(trainer, run)


def _write_start_event(r: RunState) -> None:
    config, run, tasks = r.config, r.run, r.tasks
    assert run is not None and tasks is not None and r.harness is not None
    run.event(
        "run_start",
        step=0,
        method=config.method,
        evolver=config.runs_evolver,
        method_settings=_method_settings(config),
        model=config.model,
        device=r.device,
        train_tasks=len(tasks.train),
        validation_tasks=len(tasks.validation),
        test_tasks=len(tasks.test),
        train_rubric=config.data.train_rubric,
        eval_graded_with=r.grade_with if tasks.eval_splits else None,
        judge=r.judge.name,
        devices=r.devices,
        judge_preflight=r.preflight,
        resume=r.resume,
        **({"stale_lock": r.stale_lock.model_dump()} if r.stale_lock else {}),
        **(
            {
                "resumed_from_step": r.resumed.step,
                "rolled_back_steps": r.resumed.rolled_back,
                "harness_versions": r.harness.versions,
            }
            if r.resume
            else {}
        ),
    )
    r.console.log(f"method {config.method}: {_describe_method(config)}")


def _run_training(r: RunState) -> None:
    """TRL's training loop (the tool server stops with it, whatever happens); the final model saved."""
    run, trainer = r.run, r.trainer
    assert run is not None
    r.stage = "training"
    try:
        if r.end_only:
            _end_without_training(trainer, r.resumed.checkpoint)
        else:
            trainer.train(resume_from_checkpoint=r.resumed.checkpoint)
    finally:
        if r.attachment is not None:
            r.attachment.stop_server()
    r.stage = "final"
    trainer.save_model(str(run.checkpoints / "final"))


def _end_without_training(trainer, checkpoint: str | None) -> None:
    """The end of a run stopped while it ended: the last checkpoint's weights and trainer state loaded and the
    end's callbacks fired (the final evaluation, the evolver's release), no step trained. TRL's loop resumed
    at ``max_steps`` would train one step more."""
    from transformers.trainer_callback import TrainerState

    assert checkpoint is not None  # end_only is set from the last checkpoint's step
    trainer._load_from_checkpoint(checkpoint)
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    trainer.control = trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)


def rollout_steps_kept(config: TrainConfig) -> int:
    """How many steps' rollouts the recorder keeps: ``harness.keep_rollout_steps``, and with the evolver at
    least ``evolver.every_steps``, since an evolution point handles the failures of every step since the
    last one and the critic re-grades their rollouts."""
    keep = config.harness.keep_rollout_steps
    return max(keep, config.evolver.every_steps) if config.runs_evolver else keep


def _method_settings(config: TrainConfig) -> MethodSettings:
    """The resolved settings of the run's method (for run_start)."""
    return method_spec(config.method).settings(config)


def _describe_method(config: TrainConfig) -> str:
    return method_spec(config.method).describe(_method_settings(config))


class _DifficultyFeed:
    """Step listener of ``odf`` runs: each trained step's group means go to the task-sampling interface's
    difficulty filter (on every process, so every process draws the same), which is saved with the harness."""

    def __init__(self, harness: Harness, run: RunDir | None):
        self.harness, self.run = harness, run

    def __call__(self, record) -> None:
        self.harness.sampling.observe(record.step, [(g.task_id, g.mean) for g in record.groups])
        if self.run is not None:
            self.harness.save(self.run.harness)
