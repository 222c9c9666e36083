"""TRL's GRPOTrainer with the three harness interfaces wired in through its hook points.

No GRPO loss or optimiser loop is written here: everything below extends ``trl.GRPOTrainer``.

Hook points, and what each does:

- ``_generate_and_score_completions`` (generation and scoring): chooses this step's tasks from the
  **task-sampling** interface (so a sampling update takes effect at the very next step; the rows TRL's
  dataloader drew only fix the batch shape), builds each row's prompt through **rollout guidance**
  (the first ``k`` members of each group get the hint), and adds ``task_id`` / ``member`` / ``guided``
  / ``rubric_version`` / ``temperature`` columns, which TRL hands to the reward function as keyword
  arguments. After scoring it builds the step's records.
- ``_generate_single_turn`` (generation): applies per-task sampling temperatures from rollout
  guidance by generating each temperature's rows apart. The loss still scores tokens at the run's
  temperature (TRL's ``args.temperature``), the usual approximation for exploration boosts.
- ``reward_funcs``: :class:`~harnessrl.trainer.rewards.RubricReward`, which grades each completion
  against the **rubric-criteria** interface's version the rollout was made with.
- ``training_step``: timed, for the generation / judging / update breakdown.
- callbacks (``harnessrl.trainer.callbacks``): metrics.jsonl, progress display, held-out evaluation.

With no harness update applied this is an ordinary GRPO run: uniform task sampling, unguided
prompts, version-0 rubrics. That is the fixed-harness baseline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from trl import GRPOTrainer

from harnessrl.interfaces.harness import Harness
from harnessrl.trainer.records import GroupRecord, Recorder, RolloutRecord, StepRecord, group_stats
from harnessrl.trainer.rewards import RubricReward

__all__ = ["HarnessGRPOTrainer"]

logger = logging.getLogger(__name__)


class HarnessGRPOTrainer(GRPOTrainer):
    """GRPO whose batches, prompts, temperatures and rubrics come from a :class:`Harness`.

    Args:
        harness: the three interfaces over the training tasks.
        rubric_reward: the reward function (grades with the judge at each row's rubric version).
        recorder: keeps step records and recent rollouts.
        zero_std_eps: a group whose reward std is below this counts as flat (no learning signal).
        **kwargs: everything ``trl.GRPOTrainer`` takes, except ``reward_funcs``.
    """

    def __init__(
        self,
        *args: Any,
        harness: Harness,
        rubric_reward: RubricReward,
        recorder: Recorder,
        zero_std_eps: float = 0.02,
        **kwargs: Any,
    ):
        self.harness = harness
        self.rubric_reward = rubric_reward
        self.recorder = recorder
        self.zero_std_eps = zero_std_eps
        self.step_listeners: list[Callable[[StepRecord], None]] = []
        self._row_temperatures: list[float] | None = None
        self._gen_seconds = 0.0
        self._reference_rewards: dict[tuple[str, int], float | None] = {}
        self.timings: dict[str, float] = defaultdict(float)
        # held while the weights change: frozen-policy trials from another thread wait for it
        self.policy_lock = threading.Lock()
        super().__init__(*args, reward_funcs=[rubric_reward], **kwargs)

    # ------------------------------------------------------------------ task sampling + guidance
    def harness_rows(self, n_local: int, step: int) -> list[dict[str, Any]]:
        """This process's rows for ``step``: tasks from sampling, prompts from guidance."""
        g_size = self.num_generations
        n_proc = self.accelerator.num_processes
        total = n_local * n_proc
        if total % g_size:
            raise ValueError(f"generation batch {total} is not a multiple of num_generations {g_size}")
        task_ids = self.harness.sampling.sample(total // g_size, step)
        rows = []
        for i in range(n_local):
            g = self.accelerator.process_index * n_local + i
            task = self.harness.tasks[task_ids[g // g_size]]
            member = g % g_size
            messages, guided = self.harness.guidance.prompt_for(task, member, g_size)
            rows.append(
                {
                    "prompt": messages,
                    "task_id": task.id,
                    "member": member,
                    "guided": guided,
                    "rubric_version": self.harness.rubrics.current(task.id).version,
                    "temperature": self.harness.guidance.temperature_for(task),
                }
            )
        return rows

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # TRL's own evaluation path: leave it as it is
            return super()._generate_and_score_completions(inputs)
        # "step" everywhere in HarnessRL is the 1-based optimisation step being trained, as in TRL's logs
        # and metrics.jsonl (step 0 is "before training", e.g. the first evaluation)
        step = self.state.global_step + 1
        rows = self.harness_rows(len(inputs), step)
        # judge work between steps (critic trials, reference grading) has its own accounting: start this
        # step's judge/* metrics from zero so they describe the training rollouts only
        self.rubric_reward.judge.stats.snapshot_and_reset()
        self._row_temperatures = [r["temperature"] for r in rows]
        t0 = time.perf_counter()
        judge0, gen0 = self.rubric_reward.seconds, self._gen_seconds
        out = super()._generate_and_score_completions(rows)
        total = time.perf_counter() - t0
        seconds = {
            "generation": self._gen_seconds - gen0,
            "judging": self.rubric_reward.seconds - judge0,
        }
        seconds["scoring_other"] = max(0.0, total - seconds["generation"] - seconds["judging"])
        for k, v in seconds.items():
            self.timings[k] += v
        self._record_step(step, rows, seconds)
        self._row_temperatures = None
        return out

    # ------------------------------------------------------------------ per-task temperature
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        temps = self._row_temperatures
        t0 = time.perf_counter()
        try:
            if not temps or len(set(temps)) == 1 or images is not None or multimodal_fields:
                with self._temperature(temps[0] if temps else None):
                    return super()._generate_single_turn(
                        prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                    )
            completion_ids: list = [None] * len(prompt_ids)
            logprobs: list | None = [None] * len(prompt_ids)
            for temp in sorted(set(temps)):
                idx = [i for i, t in enumerate(temps) if t == temp]
                with self._temperature(temp):
                    ids, lps = super()._generate_single_turn(
                        [prompt_ids[i] for i in idx], None, multimodal_fields, num_generations, has_tool_images
                    )
                for j, i in enumerate(idx):
                    completion_ids[i] = ids[j]
                    if lps is None:
                        logprobs = None
                    elif logprobs is not None:
                        logprobs[i] = lps[j]
            return completion_ids, logprobs
        finally:
            self._gen_seconds += time.perf_counter() - t0

    class _TemperatureOverride:
        def __init__(self, trainer: HarnessGRPOTrainer, temp: float | None):
            self.trainer, self.temp = trainer, temp

        def __enter__(self):
            tr = self.trainer
            self.saved = (getattr(tr.generation_config, "temperature", None), None)
            if self.temp is None or self.temp == tr.temperature:
                return
            if getattr(tr, "generation_config", None) is not None:
                tr.generation_config.temperature = self.temp
            vg = getattr(tr, "vllm_generation", None)
            if vg is not None:
                self.saved = (self.saved[0], vg.temperature)
                vg.temperature = self.temp

        def __exit__(self, *exc):
            tr = self.trainer
            if getattr(tr, "generation_config", None) is not None and self.saved[0] is not None:
                tr.generation_config.temperature = self.saved[0]
            vg = getattr(tr, "vllm_generation", None)
            if vg is not None and self.saved[1] is not None:
                vg.temperature = self.saved[1]

    def _temperature(self, temp: float | None) -> _TemperatureOverride:
        return self._TemperatureOverride(self, temp)

    # ------------------------------------------------------------------ timing
    def training_step(self, model, inputs, num_items_in_batch=None):
        t0 = time.perf_counter()
        gs0 = sum(self.timings[k] for k in ("generation", "judging", "scoring_other"))
        with self.policy_lock:
            loss = super().training_step(model, inputs, num_items_in_batch)
        elapsed = time.perf_counter() - t0
        gs = sum(self.timings[k] for k in ("generation", "judging", "scoring_other")) - gs0
        self.timings["update"] += max(0.0, elapsed - gs)
        self.timings["step_total"] += elapsed
        return loss

    # ------------------------------------------------------------------ step records
    def _record_step(self, step: int, rows: list[dict[str, Any]], seconds: dict[str, float]) -> None:
        from accelerate.utils import gather_object

        judge_metrics = self.rubric_reward.judge.stats.snapshot_and_reset()  # before grading references
        results = self.rubric_reward.last
        texts = self.rubric_reward.last_texts
        lengths = self.rubric_reward.last_lengths
        local = [
            RolloutRecord(
                step=step,
                task_id=r["task_id"],
                member=r["member"],
                guided=r["guided"],
                rubric_version=r["rubric_version"],
                temperature=r["temperature"],
                completion=text,
                length_tokens=n_tok,
                length_words=len(text.split()),
                reward=res.reward,
                verdicts={v.criterion_id: v.value for v in res.verdicts},
            )
            for r, res, text, n_tok in zip(rows, results, texts, lengths, strict=True)
        ]
        rollouts = gather_object(local) if self.accelerator.num_processes > 1 else local
        # TRL's groups are consecutive runs of num_generations rows (gathered in process order). A task
        # drawn twice in one step (fewer eligible tasks than groups) makes two groups, never one merged one.
        g_size = self.num_generations
        groups = []
        for start in range(0, len(rollouts), g_size):
            rs = rollouts[start : start + g_size]
            tid = rs[0].task_id
            task = self.harness.tasks[tid]
            mean, std = group_stats([r.reward for r in rs])
            crit_ids = list(dict.fromkeys(c for r in rs for c in r.verdicts))
            crit_means = {}
            for cid in crit_ids:
                vals = [r.verdicts.get(cid) for r in rs if r.verdicts.get(cid) is not None]
                crit_means[cid] = sum(vals) / len(vals) if vals else None
            rule = self.harness.guidance.rule_for(task)
            groups.append(
                GroupRecord(
                    step=step,
                    task_id=tid,
                    domain=task.domain,
                    rubric_version=rs[0].rubric_version,
                    guidance=rule.text if rule and any(r.guided for r in rs) else None,
                    guided=sum(r.guided for r in rs),
                    temperature=rs[0].temperature,
                    rewards=[r.reward for r in rs],
                    mean=mean,
                    std=std,
                    flat=std is not None and std < self.zero_std_eps,
                    lengths=[r.length_tokens for r in rs],
                    criterion_means=crit_means,
                    missing=sum(v is None for r in rs for v in r.verdicts.values()),
                    reference_reward=self.reference_reward(tid, rs[0].rubric_version),
                )
            )
        record = StepRecord(step=step, groups=groups, seconds=seconds)
        if self.accelerator.is_main_process:
            self.recorder.add(record, rollouts)
        self._log_step_metrics(record, judge_metrics)
        for listener in self.step_listeners:
            listener(record)

    def reference_reward(self, task_id: str, rubric_version: int) -> float | None:
        """The task's reference answer graded under a rubric version (None without a reference); cached."""
        key = (task_id, rubric_version)
        if key not in self._reference_rewards:
            task = self.harness.tasks[task_id]
            reward = None
            if task.reference_answer:
                rubric = self.harness.rubrics.versions[task_id][rubric_version].criteria
                reward = self.rubric_reward.judge.grade_one(task, task.reference_answer, rubric).reward
            self._reference_rewards[key] = reward
        return self._reference_rewards[key]

    def _log_step_metrics(self, record: StepRecord, judge_metrics: dict[str, float]) -> None:
        m = self._metrics["train"]
        n = max(1, len(record.groups))
        flat = [g for g in record.groups if g.flat]
        # TRL's own frac_reward_zero_std counts exactly-zero std; these use harness.detectors.eps and split it
        m["frac_reward_zero_std/eps"].append(len(flat) / n)
        m["frac_reward_zero_std/all_low"].append(sum(g.mean is not None and g.mean <= 0.5 for g in flat) / n)
        m["frac_reward_zero_std/all_high"].append(sum(g.mean is not None and g.mean > 0.5 for g in flat) / n)
        kinds: dict[str, list[float]] = defaultdict(list)
        for g in record.groups:
            crits = {c.id: c for c in self.harness.rubrics.versions[g.task_id][g.rubric_version].criteria}
            for cid, v in g.criterion_means.items():
                c = crits.get(cid)
                if c is None or v is None:
                    continue
                kinds["pitfall" if c.weight < 0 else c.kind].append(v)
        for kind, vals in kinds.items():
            m[f"criteria/pass_rate/{kind}"].append(sum(vals) / len(vals))
        rollouts = max(1, sum(len(g.rewards) for g in record.groups))
        m["guided_fraction"].append(sum(g.guided for g in record.groups) / rollouts)
        for k, v in judge_metrics.items():
            m[k].append(v)
        for k, v in record.seconds.items():
            m[f"time/{k}"].append(v)
        for name, version in self.harness.versions.items():
            m[f"harness/version/{name}"].append(float(version))
