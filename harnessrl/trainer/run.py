"""One training run from a :class:`TrainConfig`: data, model, judge, harness, TRL, evaluation, report.

``train`` validates everything (data, config, model) before the first step, writes the resolved
config into the run directory, and resumes from the directory's last checkpoint and saved harness
when asked to.

``method`` selects what varies between the compared methods, all through the same trainer, data,
judge, evaluation and accounting: what each one turns on (the evolver, dynamic sampling, the difficulty
filter, the gold rubrics) is its entry in :data:`~harnessrl.trainer.methods.METHOD_TABLE`, which the run
asks. Resuming is :mod:`harnessrl.trainer.resume`'s: the run asks it what to restore at each stage.

Gold rubrics are for evaluation only: :func:`load_run_tasks` strips them from every training task
(after putting them in the rubric's place when training is on gold), so the harness, its tool server,
the memory, the detectors, the critic and the evolver never hold one.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from harnessrl.data import Task, data_path, load_tasks
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces.harness import Harness
from harnessrl.judges.config import JudgeConfig
from harnessrl.records.run_dir import (
    LOCK_NAME,
    RunDir,
    RunDirLock,
    RunFileError,
    clear_run_dir,
    free_bytes,
    is_disk_full,
    lock_run_dir,
)
from harnessrl.records.run_record import RunRecord
from harnessrl.trainer.methods import METHOD_TABLE, method_spec
from harnessrl.trainer.resume import (
    CHECKPOINT_NAME,
    Resumed,
    checkpoint_step,
    complete_checkpoint,
    last_checkpoint,
    restore_accounting,
    restore_harness,
    restore_listeners,
    restore_records,
    restored_totals,
)
from harnessrl.trainer.train_config import TrainConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from harnessrl.judges.rubric_judge import RubricJudge
    from harnessrl.records.steps import Recorder
    from harnessrl.trainer.attach import HarnessAttachment
    from harnessrl.trainer.callbacks import EvalCallback
    from harnessrl.trainer.grpo_trainer import HarnessGRPOTrainer

TrainerHook = Callable[["HarnessGRPOTrainer", RunDir], None]
"""What :func:`train` may call once the trainer is built (``trainer_hook(trainer, run_dir)``)."""

__all__ = [
    "RunSummary",
    "RunTasks",
    "build_grpo_config",
    "evaluate_run",
    "load_run_tasks",
    "split_alternating",
    "train",
]

logger = logging.getLogger(__name__)


@dataclass
class RunSummary:
    run_dir: Path
    steps: int
    wall_seconds: float
    timings: dict[str, float]
    eval_before: float | None
    eval_after: float | None
    best: dict | None
    reward_first: float | None
    reward_last: float | None
    extra: dict[str, Any] = field(default_factory=dict)
    method: str = "harnessrl"
    evolver_enabled: bool = True
    steps_to_best: int | None = None
    eval: dict[str, Any] = field(default_factory=dict)
    accounting: dict[str, Any] = field(default_factory=dict)


def _first_per_domain(tasks: list[Task], n: int | None) -> list[Task]:
    if n is None:
        return tasks
    seen: dict[str, int] = {}
    out = []
    for t in tasks:
        if seen.get(t.domain, 0) < n:
            out.append(t)
            seen[t.domain] = seen.get(t.domain, 0) + 1
    return out


def split_alternating(tasks: Sequence[Task]) -> tuple[list[Task], list[Task]]:
    """(test, validation): within each domain in file order, the 1st, 3rd, ... task to test, the 2nd,
    4th, ... to validation. Deterministic, balanced across domains, and test keeps the odd one out."""
    seen: Counter[str] = Counter()
    test, validation = [], []
    for t in tasks:
        (test if seen[t.domain] % 2 == 0 else validation).append(t)
        seen[t.domain] += 1
    return test, validation


@dataclass
class RunTasks:
    """A run's tasks: training (as training sees them: no gold rubric), validation (chooses the best
    checkpoint) and test (only reported), both with their gold rubrics for evaluation."""

    train: list[Task]
    validation: list[Task]
    test: list[Task]

    @property
    def eval_splits(self) -> dict[str, list[Task]]:
        """The evaluation splits that have tasks, validation first."""
        return {name: ts for name, ts in (("validation", self.validation), ("test", self.test)) if ts}


def load_run_tasks(config: TrainConfig) -> RunTasks:
    """Train, validation and test tasks, validated; no two of them may share a task id."""
    d = config.data
    train = load_tasks(data_path(d.train, "train"), d.format, default_domain=d.domain)
    evals = (("validation", d.validation), ("test", d.test))
    paths = {name: data_path(value, name) if value else None for name, value in evals}
    same_file = paths["validation"] is not None and paths["test"] is not None
    same_file = same_file and paths["validation"].resolve() == paths["test"].resolve()  # type: ignore[union-attr]
    splits: dict[str, list[Task]] = {}
    for name, path in paths.items():
        if path is None:
            splits[name] = []
            continue
        tasks = load_tasks(path, d.format, default_domain=d.domain)
        if same_file or getattr(d, name) == "bundled":
            test, validation = split_alternating(tasks)
            tasks = validation if name == "validation" else test
            if not tasks:
                raise ConfigError(
                    f"splitting {path} into validation and test left no {name} tasks (a domain needs at least "
                    f"two tasks to give one to each): name a separate data.{name} file, or set data.{name}=null"
                )
        splits[name] = tasks
    named = {"training": train, **splits}
    names = list(named)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = {t.id for t in named[a]} & {t.id for t in named[b]}
            if shared:
                hint = (
                    "evaluation tasks must be split off before training"
                    if a == "training"
                    else "validation and test must not overlap"
                )
                raise HarnessRLError(
                    f"{len(shared)} task id(s) are both in the {a} and the {b} data (e.g. {sorted(shared)[:3]}): {hint}"
                )
    return RunTasks(
        train=training_view(_first_per_domain(train, d.tasks_per_domain), d.train_rubric),
        validation=_first_per_domain(splits["validation"], d.validation_per_domain),
        test=_first_per_domain(splits["test"], d.test_per_domain),
    )


def training_view(tasks: Sequence[Task], train_rubric: str = "rubric") -> list[Task]:
    """The tasks as training sees them: graded with their rubric (``train_rubric: rubric``) or their gold
    rubric (``gold``: the oracle, a clean variant), and never holding a gold rubric."""
    if train_rubric != "gold":
        return [t.without_gold() for t in tasks]
    without = [t.id for t in tasks if t.gold_rubric is None]
    if without:
        by = " or ".join(repr(n) for n, s in METHOD_TABLE.items() if s.train_rubric == "gold") or "no method"
        raise ConfigError(
            f"data.train_rubric is 'gold' (method {by} sets it), but {len(without)} training task(s) have no "
            f"gold_rubric (e.g. {without[:3]}): add one to each, or train on their rubric"
        )
    return [t.trained_on_gold() for t in tasks]


def _method_settings(config: TrainConfig) -> dict[str, Any]:
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


def _eval_summary(eval_cb, best: dict | None) -> dict[str, Any]:
    """Per split: the score before training, at the end, and (test) at the best-validation step."""
    out: dict[str, Any] = {}
    for split in eval_cb.splits:
        rows = eval_cb.split_results(split)
        if not rows:
            continue
        final = rows[-1]
        entry: dict[str, Any] = {
            "graded_with": final.graded_with,
            "before": next((r.overall for r in rows if r.step == 0), None),
            "final": final.overall,
            "final_step": final.step,
            "final_per_domain": final.per_domain,
            "final_per_family": final.per_family,
            "final_proxy": final.proxy.overall if final.proxy is not None else None,
        }
        if final.overall is None:
            entry["final_no_score_reason"] = final.no_score_reason
        if split == "validation":
            entry["best"] = best["overall"] if best else None
            entry["best_step"] = best["step"] if best else None
        elif best is not None:
            at = next((r for r in rows if r.step == best["step"]), None)
            entry["at_best"] = at.overall if at else None
            entry["at_best_per_domain"] = at.per_domain if at else None
            entry["at_best_per_family"] = at.per_family if at else None
            entry["at_best_proxy"] = at.proxy.overall if at and at.proxy is not None else None
        out[split] = entry
    return out


def _on_device(judge: JudgeConfig, device: str) -> JudgeConfig:
    """``judge`` on the run's device, unless it names its own."""
    return judge if judge.device is not None else judge.model_copy(update={"device": device})


def _device(config: TrainConfig) -> str:
    import torch

    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device 'cuda' asked for, but torch sees no GPU: set device to 'cpu' or 'auto'")
    return config.device


def build_grpo_config(config: TrainConfig, output_dir: Path, device: str, num_processes: int = 1):
    """The ``trl.GRPOConfig`` for a run (one generation batch per optimisation step)."""
    from trl import GRPOConfig

    g = config.grpo
    rows = g.tasks_per_step * g.num_generations
    if rows % num_processes:
        raise ConfigError(f"tasks_per_step x num_generations = {rows} must divide over {num_processes} processes")
    bf16 = config.bf16 if config.bf16 is not None else device == "cuda"
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir),
        per_device_train_batch_size=rows // num_processes,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        learning_rate=g.learning_rate,
        max_steps=g.max_steps,
        beta=g.beta,
        temperature=g.temperature,
        top_p=g.top_p,
        loss_type=g.loss_type,
        gradient_checkpointing=g.gradient_checkpointing,
        logging_steps=g.logging_steps,
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        seed=config.seed,
        report_to=config.report_to or "none",
        use_cpu=device == "cpu",
        bf16=bf16,
        disable_tqdm=True,
        remove_unused_columns=False,
        log_completions=False,
    )
    if config.generation.backend == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise ConfigError("generation.backend is 'vllm' but vLLM is not installed: pip install 'harnessrl[vllm]'")
        kwargs.update(use_vllm=True, vllm_mode=config.generation.vllm_mode)
        if config.generation.vllm_mode == "server":
            kwargs["vllm_server_base_url"] = config.generation.vllm_server_base_url
            kwargs["vllm_server_timeout"] = config.generation.vllm_server_timeout_s
        else:
            kwargs["vllm_gpu_memory_utilization"] = config.generation.vllm_gpu_memory_utilization
    gen = config.generation
    if gen.cache == "static":
        kwargs["cache_implementation"] = "static"
    if gen.compile:
        if device != "cuda":
            raise ConfigError(
                f"generation.compile is for GPUs (transformers compiles the decode step on CUDA only), and this run "
                f"is on {device}: drop it, or train on a GPU"
            )
        kwargs["pad_to_multiple_of"] = 64  # bounds the shapes the compiled decode step sees
    clash = set(g.extra) & set(kwargs)
    if clash:
        raise ConfigError(f"grpo.extra sets {sorted(clash)}, which HarnessRL sets itself: use the grpo.* settings")
    kwargs.update(g.extra)
    try:
        return GRPOConfig(**kwargs)
    except TypeError as e:
        raise ConfigError(f"grpo.extra: {e} (see trl.GRPOConfig for valid fields)") from e


def rollout_steps_kept(config: TrainConfig) -> int:
    """How many steps' rollouts the recorder keeps: ``harness.keep_rollout_steps``, and with the evolver at
    least ``evolver.every_steps``, since an evolution point handles the failures of every step since the
    last one and the critic re-grades their rollouts."""
    keep = config.harness.keep_rollout_steps
    return max(keep, config.evolver.every_steps) if config.evolver.enabled else keep


def _peft_config(config: TrainConfig):
    """The ``peft.LoraConfig`` of ``config.lora`` (None: full fine-tuning); TRL wraps the model with it."""
    if config.lora is None:
        return None
    try:
        from peft import LoraConfig
    except ImportError as e:
        raise ConfigError("lora is set but peft is not installed: pip install peft (or drop the lora section)") from e
    lo = config.lora
    return LoraConfig(
        r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules, task_type="CAUSAL_LM"
    )


def _num_processes() -> int:
    """Processes in this run (``accelerate launch`` / ``torchrun`` set WORLD_SIZE): the step's rows are split
    over them."""
    import os

    return max(1, int(os.environ.get("WORLD_SIZE", "1")))


def _is_main_process() -> bool:
    """Rank 0 writes the run directory (under ``accelerate launch`` every process runs this code)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _cause(error: BaseException) -> str:
    """The innermost message of ``error``'s chain, short (what the OS or the library said)."""
    e, seen = error, {id(error)}
    while (nxt := e.__cause__ or e.__context__) is not None and id(nxt) not in seen:
        e = nxt
        seen.add(id(e))
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _checkpoint_bytes(r: _Run, last: str | None) -> int | None:
    """About what one checkpoint of this run takes: the ``last`` complete one's files, else the weights and
    (for the trained parameters) AdamW's two moments in float32."""
    if last is not None:
        return sum(p.stat().st_size for p in Path(last).rglob("*") if p.is_file())
    if r.model is None:
        return None
    params = list(r.model.parameters())
    return sum(p.numel() * p.element_size() for p in params) + sum(8 * p.numel() for p in params if p.requires_grad)


def _disk_full(r: _Run, error: BaseException) -> HarnessRLError:
    """One paragraph for a full disk: what ran out, where, what is intact, how to go on; ``run_end`` recorded
    (``reason: disk_full``) when the disk still takes a line."""
    run = r.run
    assert run is not None
    step = r.trainer.state.global_step if r.trainer is not None else 0
    cut = run.checkpoints / f"checkpoint-{step}"
    if r.stage == "training" and cut.is_dir() and not complete_checkpoint(cut):
        what = f"while saving {cut.name}"
    elif isinstance(error, RunFileError) and error.filename:
        what = f"while writing {Path(error.filename).name}"
    else:
        what = {"training": "while training", "final": "while saving the final model"}.get(r.stage, "while ending")
    last = last_checkpoint(run, warn=False)  # the paragraph names a checkpoint cut short
    free = free_bytes(run.path)
    intact = [
        f"{Path(last).name} (the last complete checkpoint)" if last else "no complete checkpoint yet",
        "harness.json (the harness as last committed"
        + (f": versions {r.harness.versions})" if r.harness is not None else ")"),
        f"the records of steps 1-{step} (events, metrics, steps)" if step else "the config and the events",
    ]
    if cut.is_dir() and not complete_checkpoint(cut):
        intact.append(f"{cut.name} was cut short: --resume skips it (delete it to free its space)")
    need = _checkpoint_bytes(r, last)
    try:
        run.event("run_end", step=step, reason="disk_full", error=_cause(error), resume_from=last and Path(last).name)
        recorded = "run_end is recorded in events.jsonl (reason: disk_full)"
    except OSError:
        recorded = "no run_end could be recorded (events.jsonl could not take a line either)"
    room = f" (a checkpoint of this run takes about {_size(need)}; grpo.save_total_limit bounds how many stay)"
    return HarnessRLError(
        f"the disk filled up {what}, at step {step}: the file system of {run.path} has no space left "
        f"({_cause(error)}; {_size(free) if free >= 0 else 'unknown'} free there now). Intact: {'; '.join(intact)}. "
        f"To go on: free space on that file system{room if need else ''}, or move the run directory to a larger "
        "disk and point run_dir there; then run the same command with --resume: it goes on from "
        f"{last or 'the start (no complete checkpoint)'} with the harness as last saved. "
        f"{recorded}."
    )


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    console: Console | None = None,
    trainer_hook: TrainerHook | None = None,
) -> RunSummary:
    """Run training end to end. ``trainer_hook(trainer, run_dir)`` may attach more (the evolver does).

    The main process holds the run directory's lock from start to end (:func:`lock_run_dir`): a second
    live process training into the same directory, or resuming it, is refused before anything is written."""
    run_path = Path(config.run_dir)
    existed = run_path.exists()
    lock = lock_run_dir(run_path) if _is_main_process() else contextlib.nullcontext()
    with lock:  # a directory the lock made for a refused resume goes with it
        if resume and not (run_path / "config.yaml").is_file():
            what = "no such directory" if not existed else "no config.yaml in it: no run was started there"
            raise HarnessRLError(
                f"--resume: {run_path} holds no run to resume ({what}). Check run_dir for a typo, or drop --resume "
                "to start a new run there"
            )
        stale = lock.stale if isinstance(lock, RunDirLock) else None
        return _train(
            config, resume=resume, overwrite=overwrite, console=console, trainer_hook=trainer_hook, stale_lock=stale
        )


def _saved_summary(run: RunDir) -> RunSummary | None:
    """A run's summary as it saved it (summary.json), or None when it has none (not ended yet, or stopped while
    it ended)."""
    saved = run.read_json("summary.json")
    if not isinstance(saved, dict):
        return None
    known = {f.name for f in fields(RunSummary)}
    summary = RunSummary(**{k: v for k, v in saved.items() if k in known})
    summary.run_dir = run.path
    return summary


@dataclass
class _Run:
    """One training run as its stages build it (each stage fills in its part)."""

    config: TrainConfig
    resume: bool
    overwrite: bool
    console: Console
    trainer_hook: TrainerHook | None
    t_start: float = field(default_factory=time.perf_counter)
    main: bool = True
    stale_lock: dict[str, Any] | None = None  # the owner of a lock file a killed process left (run_start says so)
    stage: str = "starting"  # training | final (saving the final model) | ending: what a full disk interrupted
    # checked before anything is loaded or written
    tasks: RunTasks | None = None
    grade_with: str = "rubric"
    device: str = "cpu"
    run_path: Path = Path()
    # models and judges
    model: PreTrainedModel | None = None
    tokenizer: PreTrainedTokenizerBase | None = None
    judge: RubricJudge | None = None
    eval_judge: RubricJudge | None = None  # a judge of the evaluation's own, when it grades apart from training
    devices: dict[str, str | None] = field(default_factory=dict)  # where each part runs (run_start says so)
    preflight: dict[str, Any] = field(default_factory=dict)
    # the run directory and the harness
    run: RunDir | None = None
    harness: Harness | None = None
    recorder: Recorder | None = None
    resumed: Resumed = field(default_factory=Resumed)  # where a resumed run goes on from (trainer/resume.py)
    end_only: bool = False  # trained to its last step, stopped while it ended: the end is all that is left
    # the trainer and what listens to it
    trainer: HarnessGRPOTrainer | None = None
    eval_cb: EvalCallback | None = None
    attachment: HarnessAttachment | None = None  # detectors, memory, evolver, tool server


def _train(
    config: TrainConfig,
    *,
    resume: bool,
    overwrite: bool,
    console: Console | None,
    trainer_hook: TrainerHook | None,
    stale_lock: dict[str, Any] | None = None,
) -> RunSummary:
    """The stages of a run: everything that can be refused is checked, and the model and the judges are built
    and asked, before anything on disk changes (--overwrite deletes the previous run only then). A full disk
    at any stage after that ends the run with one paragraph (:func:`_disk_full`), not a traceback."""
    r = _Run(config, resume, overwrite, console or Console(), trainer_hook, main=_is_main_process())
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
        return _finish(r)
    except Exception as e:
        if r.run is None or not r.main or not is_disk_full(e, r.run_path):
            raise
        raise _disk_full(r, e) from e


def _check_settings(r: _Run) -> RunSummary | None:
    """Data, splits, grading, device and the GRPO config, validated; a finished run's summary on --resume (and
    ``end_only`` set for a run stopped while it ended)."""
    from harnessrl.trainer.evaluation import resolve_grade_with

    config = r.config
    r.tasks = load_run_tasks(config)
    r.grade_with = resolve_grade_with(config.eval.grade_with, r.tasks.eval_splits)
    r.device = _device(config)
    r.run_path = Path(config.run_dir)
    if r.run_path.exists() and any(p.name != LOCK_NAME for p in r.run_path.iterdir()) and not (r.resume or r.overwrite):
        raise HarnessRLError(
            f"{r.run_path} already holds a run: pass --resume to continue it or --overwrite to start again "
            "(or choose another run_dir)"
        )
    if r.resume and r.overwrite:
        raise HarnessRLError("--resume and --overwrite contradict each other: choose one")
    args = build_grpo_config(config, r.run_path / "checkpoints", r.device, _num_processes())
    _check_pool_fills_a_step(config, args, len(r.tasks.train))
    if not r.resume:
        return None
    run = RunDir(r.run_path, create=False)
    step = checkpoint_step(last_checkpoint(run))
    if step < config.grpo.max_steps:
        return None  # training left to do
    finished = _saved_summary(run)
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


def _check_pool_fills_a_step(config: TrainConfig, args, pool: int) -> None:
    """A step draws its tasks from the training pool without repeating one (TRL's sampler: a generation batch of
    ``generation_batch_size / num_generations`` distinct prompts, dropping a batch it cannot fill), so a pool
    smaller than that trains no step at all: refused before anything is written, naming the pool's size."""
    distinct = args.generation_batch_size // args.num_generations
    if pool >= distinct:
        return
    g, d = config.grpo, config.data
    need = f"grpo.tasks_per_step {g.tasks_per_step}"
    if distinct != g.tasks_per_step:
        need += f" x grpo.gradient_accumulation_steps {g.gradient_accumulation_steps}"
    per_task = distinct / g.tasks_per_step  # distinct tasks a step needs per task of tasks_per_step
    fix = f"set grpo.tasks_per_step to at most {int(pool // per_task)}, or " if pool >= per_task else ""
    limit = f" (data.tasks_per_domain {d.tasks_per_domain} keeps that many a domain)" if d.tasks_per_domain else ""
    more = "raise data.tasks_per_domain or add training tasks" if d.tasks_per_domain else "add training tasks"
    raise ConfigError(
        f"the training pool holds {pool} task(s){limit}, and a step needs {distinct} distinct ones ({need}): "
        f"no step could be trained. Fix: {fix}{more}"
    )


def _load_models_and_judges(r: _Run) -> None:
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
    judge_config, eval_judge_config = _on_device(config.judge, device), _on_device(config.eval_judge, device)
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


def _open_run_dir(r: _Run) -> None:
    """The run directory: the previous run cleared (--overwrite), the resolved config written."""
    if r.overwrite and r.run_path.exists() and r.main:
        clear_run_dir(r.run_path)  # all but the lock this process holds
    r.run = RunDir(r.run_path)
    if r.main:
        r.run.write_config(r.config)


def _build_harness(r: _Run) -> None:
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


def _build_trainer(r: _Run) -> None:
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
        args=build_grpo_config(config, run.checkpoints, r.device, _num_processes()),
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
        peft_config=_peft_config(config),
    )
    if r.resume:  # the cumulative counters go on from where the run stopped
        restore_accounting(run, trainer.accounting)
    trainer.remove_callback(PrinterCallback)
    if config.evolver.enabled or r.eval_cb is not None:
        check_main_process_sampling(trainer)  # on every process, so that all of them stop
    if r.eval_cb is not None:
        r.eval_cb.trainer = trainer
        # through the run's vLLM engine when it has one, every process's share with several (None: transformers
        # here), every checkpoint on the same draws
        r.eval_cb.sampler = evaluation_sampler(trainer, r.tokenizer, eval_decoding(config))
    r.devices["critic_trials"] = r.devices["evaluation"] = sampling_place(trainer, r.device)


def _attach_listeners(r: _Run) -> None:
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
            evolver=config.evolver if config.evolver.enabled else None,
            seed=config.seed,
            console=r.console,
            close_at_train_end=False,  # closed by _finish, once the summary has read the memory's counts
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


def _write_start_event(r: _Run) -> None:
    config, run, tasks = r.config, r.run, r.tasks
    assert run is not None and tasks is not None and r.harness is not None
    run.event(
        "run_start",
        step=0,
        method=config.method,
        evolver=config.evolver.enabled,
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
        **({"stale_lock": r.stale_lock} if r.stale_lock else {}),
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


def _run_training(r: _Run) -> None:
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


def _finish(r: _Run) -> RunSummary:
    """The memory closed, the harness saved, and the whole run's summary written (summary.json, run_end)."""
    run, trainer = r.run, r.trainer
    assert run is not None and r.harness is not None
    r.attachment.close()
    memory_counts = r.attachment.memory_counts
    if not r.main:
        return RunSummary(
            run.path, trainer.state.global_step, time.perf_counter() - r.t_start, {}, None, None, None, None, None
        )
    r.harness.save(run.harness)
    summary = _summary(r, memory_counts)
    # written once, each figure in one place: the run's totals are in its accounting (RunRecord reads them there)
    run.write_json("summary.json", {k: (str(v) if isinstance(v, Path) else v) for k, v in summary.__dict__.items()})
    run.event("run_end", step=summary.steps, wall_seconds=summary.wall_seconds)
    for split, entry in summary.eval.items():
        if entry.get("final") is None and "final" in entry:
            logger.error("the run's final %s evaluation has no score: %s", split, entry.get("final_no_score_reason"))
    return summary


def _summary(r: _Run, memory_counts: dict[str, Any]) -> RunSummary:
    """The whole run's totals, every earlier process of a resumed run included (read back from its records)."""
    config, run, trainer, eval_cb, monitor = r.config, r.run, r.trainer, r.eval_cb, r.attachment.monitor
    assert run is not None and r.tasks is not None
    record = RunRecord.load(run.path)
    totals = restored_totals(record)
    wall = time.perf_counter() - r.t_start + totals.earlier_wall_seconds
    rewards = [v for m in record.metrics if (v := m.value("reward")) is not None]
    # the reported curve is the test split's (validation's when a run has no test split)
    reported = "test" if r.tasks.test else "validation"
    evals = eval_cb.split_results(reported) if eval_cb else []
    best = eval_cb.best if eval_cb else None
    monitor_seconds = {k: v + totals.earlier_monitor_seconds.get(k, 0.0) for k, v in monitor.seconds.items()}
    overhead = totals.evolver_seconds + sum(monitor_seconds.values())
    groups = [v for m in record.metrics if (v := m.value("effective_group_ratio")) is not None]
    accounting = {
        **{k.replace("/", "_"): v for k, v in trainer.accounting_metrics().items()},
        "judge_calls": trainer.accounting_metrics()["judge/calls_total"],
        "effective_group_ratio": sum(groups) / len(groups) if groups else None,
        "wall_seconds": wall,
        "evolver_seconds": totals.evolver_seconds,
        "trial_seconds": totals.trial_seconds,
        "detector_seconds": monitor_seconds.get("detectors", 0.0),
        "memory_seconds": monitor_seconds.get("memory", 0.0),
        "harness_overhead_seconds": overhead,
        "harness_overhead_share": overhead / wall if wall else None,
        "processes": totals.processes,
    }
    return RunSummary(
        run_dir=run.path,
        steps=trainer.state.global_step,
        wall_seconds=wall,
        timings=dict(trainer.timings),
        eval_before=next((e.overall for e in evals if e.step == 0), None),
        eval_after=evals[-1].overall if evals else None,
        best=best,
        reward_first=rewards[0] if rewards else None,
        reward_last=rewards[-1] if rewards else None,
        method=config.method,
        evolver_enabled=config.evolver.enabled,
        steps_to_best=best["step"] if best else None,
        eval=_eval_summary(eval_cb, best) if eval_cb else {},
        accounting=accounting,
        extra={
            "devices": r.devices,
            "failures": totals.failures,
            "monitor_seconds": monitor_seconds,
            "memory_records": memory_counts,
            "evolver": {
                "points": totals.evolution_points,
                "points_by_mode": totals.points_by_mode,
                "seconds": totals.evolver_seconds,
                **(r.attachment.evolution.service.metrics() if r.attachment.evolution else {}),
            },
        },
    )


def evaluate_run(
    run_dir: str | Path,
    checkpoint: str | None = None,
    *,
    completions: int | None = None,
    splits: Sequence[str] | None = None,
    families: Sequence[str] = (),
    domains: Sequence[str] = (),
) -> dict[str, Any]:
    """Evaluate a run's checkpoint on its validation and test splits with its eval judge; appends to eval.jsonl.

    Returns ``checkpoint``, ``results`` (split -> EvalResult) and ``result`` (the test split's, or
    validation's when the run has no test split). It generates with transformers even for a run that
    trained through vLLM (``generation.backend: vllm``): no engine is alive after training, and starting
    one for an evaluation is not built, so scores can differ slightly from the in-training ones.

    ``completions`` overrides the run's ``eval.completions`` (more sampled answers a task give a family's or a
    run's score with less noise, at the same decoding otherwise); ``splits`` keeps some of the splits;
    ``families`` and ``domains`` keep the tasks of those families (``metadata.family``) or domains. Each row
    written says what it scored (``completions_per_task``, ``selection``), so a row of a subset is never read as
    the whole split's."""
    from harnessrl.judges import build_judge
    from harnessrl.models import load_causal_lm
    from harnessrl.trainer.evaluation import eval_decoding, evaluate_policy, resolve_grade_with
    from harnessrl.trainer.train_config import load_train_config

    run = RunDir(run_dir, create=False)
    if not run.config.exists():
        raise HarnessRLError(f"{run.path} has no config.yaml: is it a run directory made by `harnessrl train`?")
    if completions is not None and completions < 1:
        raise HarnessRLError(f"completions must be at least 1 (1 is the greedy answer), got {completions}")
    config = load_train_config(run.config)
    splits_all = load_run_tasks(config).eval_splits
    if not splits_all:
        raise HarnessRLError(
            f"{run.path}: the run has no held-out data (data.validation and data.test are null): nothing to evaluate on"
        )
    eval_splits = _select_eval_tasks(run.path, splits_all, splits, families, domains)
    if checkpoint is None:
        checkpoint = "best" if (run.checkpoints / "best").exists() else "final"
    # a name under the run's checkpoints/ first: a stray ./best or ./final must not be picked up instead
    path = run.checkpoints / checkpoint
    if not path.exists():
        path = Path(checkpoint)
    if not path.exists():
        found = sorted(p.name for p in run.checkpoints.iterdir()) if run.checkpoints.exists() else []
        raise HarnessRLError(f"no checkpoint {checkpoint!r} in {run.checkpoints}; found: {found or 'none'}")
    device = _device(config)
    model, tokenizer = load_causal_lm(str(path), device=device)
    named = CHECKPOINT_NAME.fullmatch(path.name)
    step = int(named[1]) if named else -1
    judge = build_judge(_on_device(config.eval_judge, device))
    # the grading the run's evaluations use, decided on all its held-out tasks (not on the subset kept)
    grade_with = resolve_grade_with(config.eval.grade_with, splits_all)
    decoding = eval_decoding(config)
    if completions is not None:
        decoding["completions"] = completions
    selection = {k: sorted(v) for k, v in (("families", families), ("domains", domains)) if v} or None
    results = {}
    for split, tasks in eval_splits.items():
        result = evaluate_policy(
            model,
            tokenizer,
            tasks,
            judge,
            step=step,
            split=split,  # type: ignore[arg-type]
            grade_with=grade_with,
            **decoding,
        )
        row = {**result.model_dump(), "checkpoint": str(path), "source": "harnessrl eval", "selection": selection}
        run.append("eval.jsonl", row)
        results[split] = result
    return {"checkpoint": str(path), "results": results, "result": results.get("test") or results.get("validation")}


def _select_eval_tasks(
    run_path: Path,
    splits: dict[str, list[Task]],
    keep_splits: Sequence[str] | None,
    families: Sequence[str],
    domains: Sequence[str],
) -> dict[str, list[Task]]:
    """The held-out tasks ``harnessrl eval`` scores: the splits named, the tasks of the families and domains named
    (a task is kept when it matches a family or a domain named). An empty selection is an error that lists what
    the run has."""
    if keep_splits:
        unknown = [s for s in keep_splits if s not in splits]
        if unknown:
            raise HarnessRLError(f"{run_path}: no {' or '.join(unknown)} split; the run has: {', '.join(splits)}")
        splits = {s: t for s, t in splits.items() if s in keep_splits}
    if not families and not domains:
        return splits
    have_families = sorted({str(t.metadata["family"]) for ts in splits.values() for t in ts if "family" in t.metadata})
    have_domains = sorted({t.domain for ts in splits.values() for t in ts if t.domain})
    for named, have, what, whats in (
        (families, have_families, "family", "families"),
        (domains, have_domains, "domain", "domains"),
    ):
        missing = sorted(set(named) - set(have))
        if missing:
            raise HarnessRLError(
                f"{run_path}: no held-out task of {what} {', '.join(map(repr, missing))}; "
                f"its held-out tasks' {whats}: {', '.join(have) or 'none (no task names one)'}"
            )

    def kept(task: Task) -> bool:
        family = task.metadata.get("family")
        return (family is not None and str(family) in families) or task.domain in domains

    return {s: [t for t in ts if kept(t)] for s, ts in splits.items() if any(kept(t) for t in ts)}
