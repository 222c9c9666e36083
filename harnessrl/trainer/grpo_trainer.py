"""TRL's GRPOTrainer with the harness interfaces wired in through its hook points.

No GRPO loss or optimiser loop is written here: everything below extends ``trl.GRPOTrainer``.

Hook points, and what each does:

- ``_generate_and_score_completions`` (generation and scoring): chooses this step's tasks from the
  **task-sampling** interface (so a sampling update takes effect at the very next step; the rows TRL's
  dataloader drew only fix the batch shape), shapes each row through **every interface**
  (``Harness.row``: rollout guidance gives the first ``k`` members of each group the hint and sets
  the group's temperature; a plug-in may set other sampling settings), and adds ``task_id`` /
  ``member`` / ``guided`` / ``rubric_version`` / ``temperature`` / ``generation`` columns, which TRL
  hands to the reward function as keyword arguments. After scoring it builds the step's records
  (:mod:`harnessrl.trainer.step_records`).
- ``_generate`` (generation): with ``guidance_train_on="plain"`` (the default), a guided member's
  completion is generated with the hint and enters the loss under the *unguided* prompt; the off-policy gap this
  opens is measured every step as ``guidance/plain_minus_hinted_logp``; vLLM's importance-sampling correction, when
  on, caps that weight. ``"hinted"``: the guided prompt is trained on (:mod:`harnessrl.trainer.generation`).
- ``_generate_single_turn`` (generation): applies each row's sampling settings (temperature, top_p,
  max_new_tokens, ...) by generating the rows of each setting apart (:mod:`harnessrl.trainer.generation`).
- ``reward_funcs``: :class:`~harnessrl.trainer.rewards.RubricReward`, which grades each completion
  against the **rubric-criteria** interface's version the rollout was made with.
- ``training_step``: timed, for the generation / judging / update breakdown.
- ``_prepare_inputs`` and a callback around the optimiser step: a step skipped for judge faults (below)
  changes no weight.
- ``log``: adds the run's cumulative accounting (``rollouts/*``, ``judge/calls_total``) to every log.
- callbacks (``harnessrl.trainer.callbacks``): metrics.jsonl, progress display, evaluation. With several
  processes every process meets at ``on_train_begin``, ``on_step_end`` and ``on_train_end``
  (:mod:`harnessrl.trainer.step_boundary`), so that trials and evaluation generate on all of them.

With no harness update applied this is an ordinary GRPO run: uniform task sampling, unguided
prompts, version-0 rubrics. That is the fixed-harness baseline.

Judge faults (:mod:`harnessrl.trainer.judge_faults`): a rollout whose reward is missing (the judge gave too few
verdicts, after its retries) is never trained on as if it had scored 0: it leaves the loss. When more than
``max_missing_share`` of a step's rollouts have no reward (``judge.max_missing_share``), ``on_too_many_missing``
decides: ``skip`` trains on nothing and changes no weight, ``stop`` ends the run with a
:class:`~harnessrl.errors.JudgeError`. Each step logs ``judge/missing_share`` and ``steps/skipped_missing``; its
step record keeps the missing rewards as ``None``.

DAPO's dynamic sampling (``dapo_eps`` set) runs in the same hook, from
:mod:`harnessrl.trainer.dynamic_sampling`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

from trl import GRPOTrainer

from harnessrl.detection.config import FLAT_HIGH, FLAT_LOW
from harnessrl.errors import ConfigError
from harnessrl.interfaces.harness import Harness
from harnessrl.records.run_dir import open_append
from harnessrl.records.steps import Recorder, RolloutRecord, StepRecord
from harnessrl.trainer.dynamic_sampling import DynamicSampling
from harnessrl.trainer.generation import RolloutGeneration
from harnessrl.trainer.harness_sync import SyncMark, sync_harness
from harnessrl.trainer.judge_faults import HoldSkippedUpdates, JudgeFaults, without_rows
from harnessrl.trainer.methods import METHOD_TABLE
from harnessrl.trainer.policy_sampling import push_weights_if_stale
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.rows import HarnessRow, TRLBatch, TRLRows
from harnessrl.trainer.step_boundary import StepBoundary, meet_at_step_boundaries
from harnessrl.trainer.step_records import StepRecords
from harnessrl.trainer.update_lock import LockPolicyThroughUpdate

__all__ = ["HarnessGRPOTrainer", "harness_dataset"]

logger = logging.getLogger(__name__)


def harness_dataset(harness: Harness):
    """The ``datasets.Dataset`` a trainer over ``harness`` iterates: one row per training task (its plain
    prompt and id). Its rows fix the shape of each step's batch; which tasks a step trains on, and with what
    prompt, the harness decides (task sampling and guidance)."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": t.messages(), "task_id": t.id} for t in harness.tasks.values()])


def _the_rubric_reward(reward_funcs: list, harness: Harness) -> RubricReward:
    """The one :class:`RubricReward` among a trainer's reward functions, grading with the trainer's harness."""
    rubric = [f for f in reward_funcs if isinstance(f, RubricReward)]
    if len(rubric) != 1:
        raise ConfigError(
            f"a HarnessGRPOTrainer trains on one rubric reward, and its reward functions hold {len(rubric)}: pass "
            "reward_funcs=[harnessrl.RubricReward(judge, harness), *your_reward_funcs] (or rubric_reward=...)"
        )
    if rubric[0].harness is not harness:
        raise ConfigError(
            "the rubric reward grades with another harness than the trainer's: build it as "
            "RubricReward(judge, harness) with the harness the trainer is given"
        )
    return rubric[0]


def _check_no_gold(harness: Harness) -> None:
    """Refuse training tasks that carry a gold rubric: evaluation's alone (docs/design.md §8), a harness that held
    one could train toward it."""
    gold = [t.id for t in harness.tasks.values() if t.gold_rubric is not None]
    if gold:
        raise ConfigError(
            f"{len(gold)} training task(s) carry a gold rubric (e.g. {gold[:3]}), which only evaluation may "
            "read: build the harness over [t.without_gold() for t in tasks] (or t.trained_on_gold() to train on "
            "the gold rubric, as the oracle does)"
        )


def _check_dapo_processes(num_processes: int) -> None:
    """Refuse DAPO's dynamic sampling on several processes (its refill regroups rows across rounds)."""
    if num_processes <= 1:
        return
    refill = " and ".join(repr(n) for n, spec in METHOD_TABLE.items() if spec.dynamic_sampling)
    plain = " or ".join(f"{n!r} ({spec.summary})" for n, spec in METHOD_TABLE.items() if not spec.dynamic_sampling)
    raise ConfigError(
        f"DAPO's dynamic sampling (the methods {refill}) runs on one process only, and this run has "
        f"{num_processes} (its refill regroups rows across rounds): train without "
        f"`accelerate launch` / torchrun, or choose a method without it: {plain}"
    )


class HarnessGRPOTrainer(DynamicSampling, GRPOTrainer):
    """GRPO whose batches, prompts, temperatures and rubrics come from a :class:`Harness`.

    Args:
        harness: the three interfaces over the training tasks.
        rubric_reward: the reward function (grades with the judge at each row's rubric version); or pass it
            among ``reward_funcs``, beside functions of your own (TRL adds them, weighted by
            ``args.reward_weights``). The harness's step records, detectors and critic read the rubric
            reward alone: your functions move GRPO's advantages, the harness does not see them.
        recorder: keeps step records and recent rollouts (default: in memory, until
            :func:`~harnessrl.trainer.attach.attach_harness` gives it the run directory).
        zero_std_eps: a group whose reward std is below this counts as flat (no learning signal).
        flat_low, flat_high: a flat group with mean below / above these is uniformly low / high (the
            detectors' own thresholds, ``harness.detectors.low`` / ``.high``: one setting for both).
        dapo_eps: turn DAPO's dynamic sampling on: drop groups whose reward std is below this and refill.
        dapo_max_extra_groups: the most extra groups one step may generate to refill (DAPO only).
        max_missing_share: the share of a step's rollouts that may have no reward before
            ``on_too_many_missing`` applies (``judge.max_missing_share``).
        on_too_many_missing: ``skip`` (the step trains on nothing) or ``stop`` (raise
            :class:`~harnessrl.errors.JudgeError`) when a step passes ``max_missing_share``.
        generation_autocast: ``generation.autocast``, the rollouts' precision.
        compile_generation: compile the decode step (needs ``generation.cache: static``).
        guidance_train_on: ``harness.guidance.train_on``: ``plain`` or ``hinted``.
        **kwargs: everything ``trl.GRPOTrainer`` takes (``model`` an id or a model, ``args`` a
            ``GRPOConfig``, ``peft_config``, ``callbacks``...); ``train_dataset`` defaults to
            :func:`harness_dataset`.
    """

    ACCOUNTING = (
        "rollouts/generated",
        "rollouts/discarded",
        "rollouts/trial",
        "judge/calls_total",
        "judge/calls_trial",
    )
    """Cumulative counters added to every log row: training rollouts generated (DAPO's discarded ones
    included), discarded, generated by critic trials; judge backend requests (training, reference
    grading and trials; not evaluation), and those of trials alone."""

    _PARTS: ClassVar[tuple[str, ...]] = ("generation", "judging", "scoring_other", "recording")
    """The timings of a step's generation and scoring hook: what of ``training_step`` is not the update."""

    boundary: StepBoundary | None = None  # as __init__: one process, none

    def __init__(
        self,
        *args: Any,
        harness: Harness,
        rubric_reward: RubricReward | None = None,
        recorder: Recorder | None = None,
        zero_std_eps: float = 0.02,
        flat_low: float = FLAT_LOW,
        flat_high: float = FLAT_HIGH,
        dapo_eps: float | None = None,
        dapo_max_extra_groups: int = 0,
        max_missing_share: float = 0.5,
        on_too_many_missing: Literal["skip", "stop"] = "skip",
        generation_autocast: str = "generate",
        compile_generation: bool = False,
        guidance_train_on: Literal["plain", "hinted"] = "plain",
        **kwargs: Any,
    ):
        self.judge_faults = JudgeFaults(max_missing_share, on_too_many_missing)
        _check_no_gold(harness)
        self.harness = harness
        reward_funcs = list(kwargs.pop("reward_funcs", None) or [])
        if rubric_reward is not None and not any(f is rubric_reward for f in reward_funcs):
            reward_funcs.insert(0, rubric_reward)
        self.rubric_reward = _the_rubric_reward(reward_funcs, harness)
        self.recorder = recorder if recorder is not None else Recorder(None)  # attach_harness gives it a run dir
        if kwargs.get("train_dataset") is None:  # the rows only fix the batch's shape: the harness picks the tasks
            kwargs["train_dataset"] = harness_dataset(harness)
        self.dapo_eps = dapo_eps
        self.dapo_max_extra_groups = dapo_max_extra_groups
        self.accounting: dict[str, float] = dict.fromkeys(self.ACCOUNTING, 0)
        self.step_listeners: list[Callable[[StepRecord], None]] = []
        self._harness_sync = SyncMark()
        self.timings: dict[str, float] = defaultdict(float)
        # held while the weights change: frozen-policy trials from another thread wait for it
        self.policy_lock = threading.Lock()
        self.generation = RolloutGeneration(generation_autocast, guidance_train_on)
        super().__init__(*args, reward_funcs=reward_funcs, **kwargs)
        self.step_records = StepRecords(
            harness, self.rubric_reward, self.num_generations, zero_std_eps, flat_low, flat_high
        )
        if compile_generation and not self.use_vllm:
            if self.args.cache_implementation != "static":
                raise ConfigError("compiling the decode step needs a static cache (generation.cache: static)")
            self.generation_config.disable_compile = False  # TRL turns transformers' auto-compile off
        self._add_callbacks()
        if dapo_eps is not None:
            _check_dapo_processes(self.accelerator.num_processes)

    def _add_callbacks(self) -> None:
        """The callbacks around the optimiser step, and with several processes the step boundary at which trials,
        evaluation, vLLM syncs and saves take every process."""
        self.add_callback(HoldSkippedUpdates(self.judge_faults))
        self._update_lock = LockPolicyThroughUpdate(self)
        self.add_callback(self._update_lock)  # before any evolution point's callback
        self.boundary = None
        if self.accelerator.num_processes > 1:
            self.boundary = StepBoundary(self)
            if self.use_vllm:
                self.boundary.handle("sync_vllm", lambda _: push_weights_if_stale(self))
            meet_at_step_boundaries(self.callback_handler, self.boundary)

    # ------------------------------------------------------------------ task sampling + guidance
    def harness_rows(self, n_local: int, step: int, draw: int = 0, exclude: tuple[str, ...] = ()) -> list[HarnessRow]:
        """This process's rows for ``step``: tasks from sampling, prompts from guidance.

        ``draw`` and ``exclude`` ask task sampling for a further draw within the step (DAPO's refill)."""
        g_size = self.num_generations
        n_proc = self.accelerator.num_processes
        total = n_local * n_proc
        if total % g_size:
            raise ValueError(f"generation batch {total} is not a multiple of num_generations {g_size}")
        task_ids = self.harness.sampling.sample(total // g_size, step, draw=draw, exclude=exclude)
        rows: list[HarnessRow] = []
        for i in range(n_local):
            g = self.accelerator.process_index * n_local + i
            task = self.harness.tasks[task_ids[g // g_size]]
            member = g % g_size
            row = self.harness.row(task, member, g_size)
            rows.append(
                HarnessRow(
                    prompt=row.messages,
                    task_id=task.id,
                    member=member,
                    guided=row.guided,
                    rubric_version=self.harness.rubrics.current(task.id).version,
                    temperature=row.temperature,
                    generation=dict(row.generation),
                )
            )
        return rows

    def _sync_harness(self, step: int) -> None:
        """Every process trains ``step`` with the main process's harness (:mod:`.harness_sync`), and records
        the versions it used in ``ranks/rank<k>.jsonl`` (several processes only)."""
        acc = self.accelerator
        if acc.num_processes == 1:
            return
        from accelerate.utils import broadcast_object_list

        sync_harness(self.harness, acc.is_main_process, broadcast_object_list, self._harness_sync)
        run_dir = self.recorder.run_dir if self.recorder is not None else None
        if run_dir is not None:
            (run_dir / "ranks").mkdir(exist_ok=True)
            row = {"step": step, "rank": acc.process_index, "versions": self.harness.versions}
            with open_append(run_dir / "ranks" / f"rank{acc.process_index}.jsonl") as f:
                f.write(json.dumps({**row, "digest": self._harness_sync.digest}) + "\n")

    # ------------------------------------------------------------------ generation and scoring
    def _generate_and_score_completions(self, inputs: TRLRows) -> TRLBatch:
        if not self.model.training:  # TRL's own evaluation path: leave it as it is
            return super()._generate_and_score_completions(inputs)
        # "step" everywhere in HarnessRL is the 1-based optimisation step being trained, as in TRL's logs
        # and metrics.jsonl (step 0 is "before training", e.g. the first evaluation)
        step = self.state.global_step + 1
        self._sync_harness(step)
        # judge work between steps (critic trials, reference grading) has its own accounting: start this
        # step's judge/* metrics from zero so they describe the training rollouts only
        between = self.rubric_reward.judge.stats.snapshot_and_reset()
        self.accounting["judge/calls_total"] += between.get("judge/calls", 0.0)
        t0 = time.perf_counter()
        judge0, gen0 = self.rubric_reward.seconds, self.generation.seconds
        discarded: list[RolloutRecord] = []
        if self.dapo_eps is None:
            rows = self.harness_rows(len(inputs), step)
            out = self._score_rows(rows)
            missing = self.rubric_reward.last.missing
            rollouts = None  # read from the reward function, gathered over processes
        else:
            out, rollouts, discarded = self._dynamic_sampling(len(inputs), step)
            missing = [r.reward is None for r in rollouts]
            rows = None
        total = time.perf_counter() - t0
        seconds = {"generation": self.generation.seconds - gen0, "judging": self.rubric_reward.seconds - judge0}
        seconds["scoring_other"] = max(0.0, total - seconds["generation"] - seconds["judging"])
        for k, v in seconds.items():
            self.timings[k] += v
        t_rec = time.perf_counter()
        skipped = self._record_step(step, rows, seconds, rollouts=rollouts, discarded=discarded)
        # step records, reference grading and the step listeners (detectors, memory): not the update
        recording = time.perf_counter() - t_rec
        self.timings["recording"] += recording
        self.record_metrics({"time/recording": recording})
        self.judge_faults.skipped = skipped
        drop = [True] * len(missing) if skipped else missing
        return without_rows(out, drop, self.accelerator.gather)  # a collective: every process calls it every step

    def _score_rows(self, rows: list[HarnessRow]) -> TRLBatch:
        """TRL's generation and scoring of ``rows`` (this process's), with each row's sampling settings; a
        guided row trains under its task's plain prompt unless ``guidance_train_on`` is ``"hinted"``."""
        with self.generation.of_rows(rows, self.harness):
            out = super()._generate_and_score_completions(rows)
        self.accounting["rollouts/generated"] += len(rows) * self.accelerator.num_processes
        return out

    def _generate(self, prompts: list):
        return self.generation.train_plain(self, super()._generate(prompts))

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        return self.generation.single_turn(
            self, super()._generate_single_turn, prompt_ids, images, multimodal_fields, num_generations, has_tool_images
        )

    def _prepare_inputs(self, generation_batch: Any) -> TRLBatch:
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training:  # each micro-batch comes from the latest generation: note if it teaches anything
            self.judge_faults.note_micro_batch()
        return inputs

    # ------------------------------------------------------------------ metrics
    def record_metrics(self, values: Mapping[str, float]) -> None:
        """Add values to this step's metrics (logged by TRL with its own, averaged over the logging
        interval, and written to metrics.jsonl). The one way anything outside TRL adds a metric: the
        trainer's step records, the step monitor, the evolution point."""
        m = self._metrics["train"]
        for k, v in values.items():
            m[k].append(float(v))

    # ------------------------------------------------------------------ timing and accounting
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training:
            logs.update(self.accounting_metrics())
        super().log(logs, start_time)

    def accounting_metrics(self) -> dict[str, float]:
        """The cumulative counters now, judge requests not yet folded into them (e.g. a trial's) included."""
        out = {k: float(v) for k, v in self.accounting.items()}
        out["judge/calls_total"] += float(self.rubric_reward.judge.stats.backend_requests)
        return out

    def train(self, *args: Any, **kwargs: Any):
        try:
            return super().train(*args, **kwargs)
        finally:  # a step that raised mid-update must not leave trials waiting for the policy forever
            self._update_lock.release()

    def training_step(self, model, inputs, num_items_in_batch=None):
        t0 = time.perf_counter()
        gs0 = sum(self.timings[k] for k in self._PARTS)
        with self.policy_lock:
            loss = super().training_step(model, inputs, num_items_in_batch)
        elapsed = time.perf_counter() - t0
        gs = sum(self.timings[k] for k in self._PARTS) - gs0
        self.timings["update"] += max(0.0, elapsed - gs)
        self.timings["step_total"] += elapsed
        return loss

    # ------------------------------------------------------------------ step records
    def _record_step(
        self,
        step: int,
        rows: list[HarnessRow] | None,
        seconds: dict[str, float],
        rollouts: list[RolloutRecord] | None = None,
        discarded: list[RolloutRecord] | None = None,
    ) -> bool:
        """Build, keep and announce the step's record: the trained groups (``rollouts``, or ``rows`` as the
        reward function graded them, gathered over processes) and the groups DAPO dropped.

        Returns whether the step is skipped for missing rewards; raises :class:`~harnessrl.errors.JudgeError`
        first (after recording, before the step listeners) when the run is to stop for them
        (:meth:`~harnessrl.trainer.judge_faults.JudgeFaults.decide`)."""
        from accelerate.utils import gather_object

        judge_metrics = self.rubric_reward.judge.stats.snapshot_and_reset()  # before grading references
        self.accounting["judge/calls_total"] += judge_metrics.get("judge/calls", 0.0)
        if rollouts is None:
            local = self.step_records.rollouts(step, rows or [])
            rollouts = gather_object(local) if self.accelerator.num_processes > 1 else local
        records = self.step_records
        record = StepRecord(
            step=step, groups=records.groups(rollouts), discarded=records.groups(discarded or []), seconds=seconds
        )
        if self.accelerator.is_main_process:  # the dropped rollouts too: the harness reads them (record.observed)
            self.recorder.add(record, [*rollouts, *(discarded or [])])
        self.record_metrics(records.metrics(record, judge_metrics))
        skipped = self.judge_faults.decide(record, self.record_metrics)
        for listener in self.step_listeners:
            listener(record)
        return skipped

    def record_probe(self, rollouts: list[RolloutRecord]) -> None:
        """Keep the rubric audit's probes (graded groups of the initial policy, ``trained`` false) as the groups
        graded at step 0, beside the groups DAPO drops: the critic re-grades them and the audit counts them; no
        detector, memory or metric reads them (they are no step of training)."""
        record = StepRecord(step=0, groups=[], discarded=self.step_records.groups(rollouts))
        self.recorder.add(record, rollouts)
