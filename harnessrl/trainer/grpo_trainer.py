"""TRL's GRPOTrainer with the harness interfaces wired in through its hook points.

No GRPO loss or optimiser loop is written here: everything below extends ``trl.GRPOTrainer``.

Hook points, and what each does:

- ``_generate_and_score_completions`` (generation and scoring): chooses this step's tasks from the
  **task-sampling** interface (so a sampling update takes effect at the very next step; the rows TRL's
  dataloader drew only fix the batch shape), shapes each row through **every interface**
  (``Harness.row``: rollout guidance gives the first ``k`` members of each group the hint and sets
  the group's temperature; a plug-in may set other sampling settings), and adds ``task_id`` /
  ``member`` / ``guided`` / ``rubric_version`` / ``temperature`` / ``generation`` columns, which TRL
  hands to the reward function as keyword arguments. After scoring it builds the step's records.
- ``_generate`` (generation): with ``guidance_train_on="plain"`` (the default), a guided member's
  completion is generated with the hint and enters the loss under the *unguided* prompt: its prompt ids
  are replaced by the plain prompt's before TRL computes anything from them (the loss, and the old
  log-probabilities where TRL computes them), as RuscaRL strips its scaffold before the update; so a
  successful guided completion teaches the plain prompt. The off-policy gap this opens (the completion
  was sampled under the hint) is measured every step as ``guidance/plain_minus_hinted_logp``, the mean
  per-token log importance weight log pi(y|x) - log pi(y|x, hint) of the guided completions; vLLM's
  importance-sampling correction, when on, caps that weight. ``"hinted"``: the guided prompt is trained on.
- ``_generate_single_turn`` (generation): applies each row's sampling settings (temperature, top_p,
  max_new_tokens, ...) by generating the rows of each setting apart. The loss still scores tokens at
  the run's temperature (TRL's ``args.temperature``), the usual approximation for exploration boosts.
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

Judge faults: a rollout whose reward is missing (the judge gave too few verdicts, after its retries) is
never trained on as if it had scored 0. TRL leaves it out of its group's baseline and gives it advantage
0 (see :mod:`harnessrl.trainer.rewards`); here its completion mask is zeroed too, so it adds no token to
the loss or its normaliser (the KL term included). When more than ``max_missing_share`` of a step's
rollouts have no reward (``judge.max_missing_share``), ``on_too_many_missing`` decides: ``skip`` trains
on nothing (every row masked, and the optimiser step it feeds runs at learning rate 0, so neither
momentum nor weight decay moves a weight), ``stop`` ends the run with a :class:`~harnessrl.errors.JudgeError`.
Each step logs ``judge/missing_share`` and ``steps/skipped_missing``; its step record keeps the missing
rewards as ``None``.

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

from transformers import TrainerCallback
from trl import GRPOTrainer

from harnessrl.data.checks import count_words
from harnessrl.detection.config import FLAT_HIGH, FLAT_LOW
from harnessrl.errors import ConfigError, JudgeError
from harnessrl.interfaces.harness import Harness
from harnessrl.models import generation_precision
from harnessrl.records.run_dir import open_append
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord
from harnessrl.trainer.dynamic_sampling import DynamicSampling
from harnessrl.trainer.harness_sync import sync_harness
from harnessrl.trainer.methods import METHOD_TABLE
from harnessrl.trainer.policy_sampling import push_weights_if_stale
from harnessrl.trainer.rewards import RubricReward
from harnessrl.trainer.step_boundary import StepBoundary, meet_at_step_boundaries

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

    # defaults of the judge-fault settings and state, for trainers built without __init__ (tests)
    max_missing_share: float = 0.5
    on_too_many_missing: Literal["skip", "stop"] = "skip"
    _generation_skipped: bool = False
    generation_autocast: str = "generate"  # as __init__ (and generation.autocast): one default
    guidance_train_on: Literal["plain", "hinted"] = "plain"  # as __init__ (and harness.guidance.train_on)
    _plain_prompts: list[list[dict[str, str]] | None] | None = None
    boundary: StepBoundary | None = None  # as __init__: one process, none
    _update_has_signal: bool = False

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
        if on_too_many_missing not in ("skip", "stop"):
            raise ConfigError(f"judge.on_too_many_missing is 'skip' or 'stop', not {on_too_many_missing!r}")
        self.max_missing_share = max_missing_share
        self.on_too_many_missing = on_too_many_missing
        gold = [t.id for t in harness.tasks.values() if t.gold_rubric is not None]
        if gold:  # evaluation's alone (docs/design.md §8): a harness that held one could train toward it
            raise ConfigError(
                f"{len(gold)} training task(s) carry a gold rubric (e.g. {gold[:3]}), which only evaluation may "
                "read: build the harness over [t.without_gold() for t in tasks] (or t.trained_on_gold() to train on "
                "the gold rubric, as the oracle does)"
            )
        self.harness = harness
        reward_funcs = list(kwargs.pop("reward_funcs", None) or [])
        if rubric_reward is not None and not any(f is rubric_reward for f in reward_funcs):
            reward_funcs.insert(0, rubric_reward)
        self.rubric_reward = _the_rubric_reward(reward_funcs, harness)
        self.recorder = recorder if recorder is not None else Recorder(None)  # attach_harness gives it a run dir
        if kwargs.get("train_dataset") is None:  # the rows only fix the batch's shape: the harness picks the tasks
            kwargs["train_dataset"] = harness_dataset(harness)
        self.zero_std_eps = zero_std_eps
        self.flat_low, self.flat_high = flat_low, flat_high
        self.dapo_eps = dapo_eps
        self.dapo_max_extra_groups = dapo_max_extra_groups
        self.accounting: dict[str, float] = dict.fromkeys(self.ACCOUNTING, 0)
        self.step_listeners: list[Callable[[StepRecord], None]] = []
        self._row_generation: list[tuple[tuple[str, float], ...]] | None = None
        self._gen_seconds = 0.0
        self._reference_rewards: dict[tuple[str, int], float | None] = {}
        self._harness_sync: dict[str, Any] = {}
        self.timings: dict[str, float] = defaultdict(float)
        # held while the weights change: frozen-policy trials from another thread wait for it
        self.policy_lock = threading.Lock()
        self.generation_autocast = generation_autocast
        if guidance_train_on not in ("plain", "hinted"):
            raise ConfigError(f"harness.guidance.train_on is 'plain' or 'hinted', not {guidance_train_on!r}")
        self.guidance_train_on = guidance_train_on
        super().__init__(*args, reward_funcs=reward_funcs, **kwargs)
        if compile_generation and not self.use_vllm:
            if self.args.cache_implementation != "static":
                raise ConfigError("compiling the decode step needs a static cache (generation.cache: static)")
            self.generation_config.disable_compile = False  # TRL turns transformers' auto-compile off
        self.add_callback(_HoldSkippedUpdates(self))
        self._update_lock = _LockPolicyThroughUpdate(self)
        self.add_callback(self._update_lock)  # before any evolution point's callback
        # several processes: trials, evaluation, vLLM syncs and saves at a step boundary take every process
        self.boundary: StepBoundary | None = None
        if self.accelerator.num_processes > 1:
            self.boundary = StepBoundary(self)
            if self.use_vllm:
                self.boundary.handle("sync_vllm", lambda _: push_weights_if_stale(self))
            meet_at_step_boundaries(self.callback_handler, self.boundary)
        if dapo_eps is not None and self.accelerator.num_processes > 1:
            refill = " and ".join(repr(n) for n, spec in METHOD_TABLE.items() if spec.dynamic_sampling)
            plain = " or ".join(
                f"{n!r} ({spec.summary})" for n, spec in METHOD_TABLE.items() if not spec.dynamic_sampling
            )
            raise ConfigError(
                f"DAPO's dynamic sampling (the methods {refill}) runs on one process only, and this run has "
                f"{self.accelerator.num_processes} (its refill regroups rows across rounds): train without "
                f"`accelerate launch` / torchrun, or choose a method without it: {plain}"
            )

    # ------------------------------------------------------------------ task sampling + guidance
    def harness_rows(
        self, n_local: int, step: int, draw: int = 0, exclude: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """This process's rows for ``step``: tasks from sampling, prompts from guidance.

        ``draw`` and ``exclude`` ask task sampling for a further draw within the step (DAPO's refill)."""
        g_size = self.num_generations
        n_proc = self.accelerator.num_processes
        total = n_local * n_proc
        if total % g_size:
            raise ValueError(f"generation batch {total} is not a multiple of num_generations {g_size}")
        task_ids = self.harness.sampling.sample(total // g_size, step, draw=draw, exclude=exclude)
        rows = []
        for i in range(n_local):
            g = self.accelerator.process_index * n_local + i
            task = self.harness.tasks[task_ids[g // g_size]]
            member = g % g_size
            row = self.harness.row(task, member, g_size)
            rows.append(
                {
                    "prompt": row.messages,
                    "task_id": task.id,
                    "member": member,
                    "guided": row.guided,
                    "rubric_version": self.harness.rubrics.current(task.id).version,
                    "temperature": row.temperature,
                    "generation": dict(row.generation),
                }
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
                f.write(json.dumps({**row, "digest": self._harness_sync.get("digest")}) + "\n")

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
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
        judge0, gen0 = self.rubric_reward.seconds, self._gen_seconds
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
        seconds = {
            "generation": self._gen_seconds - gen0,
            "judging": self.rubric_reward.seconds - judge0,
        }
        seconds["scoring_other"] = max(0.0, total - seconds["generation"] - seconds["judging"])
        for k, v in seconds.items():
            self.timings[k] += v
        t_rec = time.perf_counter()
        skipped = self._record_step(step, rows, seconds, rollouts=rollouts, discarded=discarded)
        # step records, reference grading and the step listeners (detectors, memory): not the update
        recording = time.perf_counter() - t_rec
        self.timings["recording"] += recording
        self.record_metrics({"time/recording": recording})
        self._generation_skipped = skipped
        return self._without_rows(out, [True] * len(missing) if skipped else missing)

    def _score_rows(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """TRL's generation and scoring of ``rows`` (this process's), with each row's sampling settings; a
        guided row trains under its task's plain prompt unless ``guidance_train_on`` is ``"hinted"``."""
        self._row_generation = [tuple(sorted(r["generation"].items())) for r in rows]
        plain = self.guidance_train_on == "plain"
        self._plain_prompts = [
            self.harness.tasks[r["task_id"]].messages() if plain and r["guided"] else None for r in rows
        ]
        try:
            out = super()._generate_and_score_completions(rows)
        finally:
            self._row_generation = self._plain_prompts = None
        self.accounting["rollouts/generated"] += len(rows) * self.accelerator.num_processes
        return out

    # ------------------------------------------------------------------ guided completions, plain prompts
    def _generate(self, prompts: list):
        out = super()._generate(prompts)
        plain = self._plain_prompts
        if not plain or len(plain) != len(out[0]) or all(p is None for p in plain):
            return out
        idx = [i for i, p in enumerate(plain) if p is not None]
        plain_ids = self._tokenize_prompts([plain[i] for i in idx])[0]
        prompt_ids = list(out[0])
        gap = self._plain_minus_hinted_logp([prompt_ids[i] for i in idx], plain_ids, [out[1][i] for i in idx])
        if gap is not None:
            self.record_metrics({"guidance/plain_minus_hinted_logp": gap, "guidance/trained_plain": float(len(idx))})
        for j, i in enumerate(idx):
            prompt_ids[i] = list(plain_ids[j])
        return (prompt_ids, *out[1:])

    def _plain_minus_hinted_logp(self, hinted: list, plain: list, completions: list) -> float | None:
        """Mean per-token log pi(y | plain prompt) - log pi(y | hinted prompt) of the guided completions ``y``
        (the log importance weight of training them under the plain prompt), from the policy as it generated
        them; None when it cannot be computed here (logged once)."""
        import torch

        try:
            model = self.accelerator.unwrap_model(self.model_wrapped)
            device = next(model.parameters()).device
            gaps = []
            with torch.no_grad():
                for h, p, c in zip(hinted, plain, completions, strict=True):
                    c = list(c)
                    if not c:
                        continue
                    lp = [self._completion_logp(model, list(x), c, device) for x in (p, h)]
                    gaps.append((lp[0] - lp[1]) / len(c))
            return float(sum(gaps) / len(gaps)) if gaps else None
        except Exception as e:  # a measurement, never a reason to lose the step
            if not getattr(self, "_logp_gap_warned", False):
                logger.warning("guidance/plain_minus_hinted_logp is not measured on this setup: %s", e)
                self._logp_gap_warned = True
            return None

    def _completion_logp(self, model, prompt: list[int], completion: list[int], device) -> float:
        import torch

        ids = torch.tensor([prompt + completion], device=device)
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / max(float(self.temperature), 1e-6)
        target = torch.tensor(completion, device=device)
        return float(torch.log_softmax(logits, dim=-1).gather(1, target[:, None]).sum())

    # ------------------------------------------------------------------ per-row sampling settings
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        t0 = time.perf_counter()
        try:
            model = None if self.generation_autocast == "forward" else self.accelerator.unwrap_model(self.model_wrapped)
            with generation_precision(model, self.generation_autocast):
                return self._generate_by_setting(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                )
        finally:
            self._gen_seconds += time.perf_counter() - t0

    def _generate_by_setting(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images):
        settings = self._row_generation
        if not settings or len(set(settings)) == 1 or images is not None or multimodal_fields:
            with self._GenerationOverride(self, dict(settings[0]) if settings else {}):
                return super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                )
        completion_ids: list = [None] * len(prompt_ids)
        logprobs: list | None = [None] * len(prompt_ids)
        for setting in sorted(set(settings)):
            idx = [i for i, s in enumerate(settings) if s == setting]
            with self._GenerationOverride(self, dict(setting)):
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

    class _GenerationOverride:
        """Sets sampling settings (``temperature``, ``top_p``, ``max_new_tokens`` -> ``max_tokens`` for
        vLLM, ...) on the trainer's generation config and vLLM generator for one generate call."""

        _VLLM_NAMES: ClassVar[dict[str, str]] = {"max_new_tokens": "max_completion_length"}

        def __init__(self, trainer: HarnessGRPOTrainer, settings: dict[str, float]):
            self.trainer, self.settings = trainer, settings
            self.saved: list[tuple[Any, str, Any]] = []

        def _set(self, obj: Any, name: str, value: Any) -> None:
            if obj is None or not hasattr(obj, name) or getattr(obj, name) == value:
                return
            self.saved.append((obj, name, getattr(obj, name)))
            setattr(obj, name, value)

        def __enter__(self):
            tr = self.trainer
            for name, value in self.settings.items():
                if name == "temperature" and value == tr.temperature:
                    continue
                value = int(value) if name == "max_new_tokens" else value
                self._set(getattr(tr, "generation_config", None), name, value)
                self._set(getattr(tr, "vllm_generation", None), self._VLLM_NAMES.get(name, name), value)
            return self

        def __exit__(self, *exc):
            for obj, name, value in reversed(self.saved):
                setattr(obj, name, value)
            self.saved.clear()

    # ------------------------------------------------------------------ judge faults
    def _judge_faults(self, record: StepRecord) -> bool:
        """Count the step's missing rewards and apply ``on_too_many_missing`` when their share passes
        ``max_missing_share``: returns whether the step is skipped; raises :class:`JudgeError` to stop.

        The record holds every process's rollouts, so every process takes the same decision."""
        rewards = [r for g in record.groups for r in g.rewards]
        missing = sum(r is None for r in rewards)
        share = missing / len(rewards) if rewards else 0.0
        over = share > self.max_missing_share
        self.record_metrics({"judge/missing_share": share, "steps/skipped_missing": float(over)})
        if not over:
            if missing:
                logger.info(
                    "step %d: %d of %d rollouts have no reward; they are left out of the loss",
                    record.step,
                    missing,
                    len(rewards),
                )
            return False
        what = (
            f"step {record.step}: the judge gave no reward for {missing} of {len(rewards)} rollouts ({share:.0%}), "
            f"more than judge.max_missing_share ({self.max_missing_share:.0%})"
        )
        if self.on_too_many_missing == "stop":
            raise JudgeError(
                f"{what}; training stopped (judge.on_too_many_missing: stop). Is the judge up and answering? "
                "The judge's warnings above say what failed (connection refused, timeouts, HTTP errors, unusable "
                "answers): check judge.backend, judge.base_url and judge.model, raise judge.timeout_s or "
                "judge.max_retries for a slow server, then continue with --resume. To skip such steps instead "
                "of stopping, set judge.on_too_many_missing: skip."
            )
        logger.warning(
            "%s; the step is SKIPPED: it trains on nothing and changes no weight (judge.on_too_many_missing: skip; "
            "counted in steps/skipped_missing). Check the judge's warnings above.",
            what,
        )
        return True

    def _without_rows(self, out: dict[str, Any], drop: list[bool]) -> dict[str, Any]:
        """TRL's output with the ``drop`` rows (this process's) out of the loss: advantage 0 and no loss token,
        and the batch's token count (the ``dapo`` loss's normaliser) recounted over every process."""
        import torch

        device = out["completion_mask"].device
        keep = ~torch.tensor(drop, dtype=torch.bool, device=device)
        adv = out["advantages"]
        out["advantages"] = adv * (keep if adv.dim() == 1 else keep.unsqueeze(1)).to(adv.dtype)
        out["completion_mask"] = out["completion_mask"] * keep.unsqueeze(1).to(out["completion_mask"].dtype)
        loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
        # a collective: every process calls it at every step
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        return out

    def _prepare_inputs(self, generation_batch: Any) -> dict[str, Any]:
        inputs = super()._prepare_inputs(generation_batch)
        if self.model.training:  # each micro-batch comes from the latest generation: note if it teaches anything
            self._update_has_signal = self._update_has_signal or not self._generation_skipped
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
        parts = ("generation", "judging", "scoring_other", "recording")
        gs0 = sum(self.timings[k] for k in parts)
        with self.policy_lock:
            loss = super().training_step(model, inputs, num_items_in_batch)
        elapsed = time.perf_counter() - t0
        gs = sum(self.timings[k] for k in parts) - gs0
        self.timings["update"] += max(0.0, elapsed - gs)
        self.timings["step_total"] += elapsed
        return loss

    # ------------------------------------------------------------------ step records
    def _rollout_records(self, step: int, rows: list[dict[str, Any]]) -> list[RolloutRecord]:
        """This process's rollouts of ``rows``, as the reward function just graded them."""
        batch = self.rubric_reward.last
        return [
            RolloutRecord(
                step=step,
                task_id=r["task_id"],
                member=r["member"],
                guided=r["guided"],
                rubric_version=r["rubric_version"],
                temperature=r["temperature"],
                completion=text,
                length_tokens=n_tok,
                length_words=count_words(text),
                reward=res.reward,
                verdicts={v.criterion_id: v.value for v in res.verdicts},
            )
            for r, res, text, n_tok in zip(rows, batch.results, batch.texts, batch.lengths, strict=True)
        ]

    def _record_step(
        self,
        step: int,
        rows: list[dict[str, Any]] | None,
        seconds: dict[str, float],
        rollouts: list[RolloutRecord] | None = None,
        discarded: list[RolloutRecord] | None = None,
    ) -> bool:
        """Build, keep and announce the step's record: the trained groups (``rollouts``, or ``rows`` as the
        reward function graded them, gathered over processes) and the groups DAPO dropped.

        Returns whether the step is skipped for missing rewards; raises :class:`JudgeError` first (after
        recording, before the step listeners) when the run is to stop for them (:meth:`_judge_faults`)."""
        from accelerate.utils import gather_object

        judge_metrics = self.rubric_reward.judge.stats.snapshot_and_reset()  # before grading references
        self.accounting["judge/calls_total"] += judge_metrics.get("judge/calls", 0.0)
        if rollouts is None:
            local = self._rollout_records(step, rows or [])
            rollouts = gather_object(local) if self.accelerator.num_processes > 1 else local
        record = StepRecord(
            step=step,
            groups=self._group_records(rollouts),
            discarded=self._group_records(discarded or []),
            seconds=seconds,
        )
        if self.accelerator.is_main_process:  # the dropped rollouts too: the harness reads them (record.observed)
            self.recorder.add(record, [*rollouts, *(discarded or [])])
        self._log_step_metrics(record, judge_metrics)
        skipped = self._judge_faults(record)
        for listener in self.step_listeners:
            listener(record)
        return skipped

    def record_probe(self, rollouts: list[RolloutRecord]) -> None:
        """Keep the rubric audit's probes (graded groups of the initial policy, ``trained`` false) as the groups
        graded at step 0, beside the groups DAPO drops: the critic re-grades them and the audit counts them; no
        detector, memory or metric reads them (they are no step of training)."""
        record = StepRecord(step=0, groups=[], discarded=self._group_records(rollouts))
        self.recorder.add(record, rollouts)

    def _group_records(self, rollouts: list[RolloutRecord]) -> list[GroupRecord]:
        # TRL's groups are consecutive runs of num_generations rows (gathered in process order). A task
        # drawn twice in one step (fewer eligible tasks than groups) makes two groups, never one merged one.
        g_size = self.num_generations
        groups = []
        for start in range(0, len(rollouts), g_size):
            rs = rollouts[start : start + g_size]
            tid = rs[0].task_id
            task = self.harness.tasks[tid]
            guidance, hinted = self.harness.hints_for(task, rs[0].rubric_version)
            groups.append(
                GroupRecord.of(
                    rs,
                    task.domain,
                    self.zero_std_eps,
                    guidance=guidance,
                    hinted=hinted,
                    reference_reward=self.reference_reward(tid, rs[0].rubric_version),
                )
            )
        return groups

    def reference_reward(self, task_id: str, rubric_version: int) -> float | None:
        """The task's reference answer graded under a rubric version (None without a reference); cached."""
        key = (task_id, rubric_version)
        if key not in self._reference_rewards:
            task = self.harness.tasks[task_id]
            reward = None
            if task.reference_answer:
                rubric = self.harness.rubrics.criteria_at(task_id, rubric_version)
                reward = self.rubric_reward.judge.grade_one(task, task.reference_answer, rubric).reward
            self._reference_rewards[key] = reward
        return self._reference_rewards[key]

    def _log_step_metrics(self, record: StepRecord, judge_metrics: dict[str, float]) -> None:
        n = max(1, len(record.groups))
        flat = [g for g in record.groups if g.flat]
        # split as the detectors split them (harness.detectors.low / high): uniformly low, high, or in between
        low = sum(g.mean is not None and g.mean < self.flat_low for g in flat)
        high = sum(g.mean is not None and g.mean > self.flat_high for g in flat)
        values: dict[str, float] = {
            # TRL's own frac_reward_zero_std counts exactly-zero std; these use harness.detectors.eps
            "frac_reward_zero_std/eps": len(flat) / n,
            "frac_reward_zero_std/all_low": low / n,
            "frac_reward_zero_std/all_high": high / n,
            "frac_reward_zero_std/mid": (len(flat) - low - high) / n,
            # the share of trained groups that give a learning signal (std >= eps; no reward: none)
            "effective_group_ratio": sum(g.std is not None and not g.flat for g in record.groups) / n,
        }
        kinds: dict[str, list[float]] = defaultdict(list)
        for g in record.groups:
            crits = {c.id: c for c in self.harness.rubrics.criteria_at(g.task_id, g.rubric_version)}
            for cid, v in g.criterion_means.items():
                c = crits.get(cid)
                if c is None or v is None:
                    continue
                kinds["pitfall" if c.weight < 0 else c.kind].append(v)
        values.update({f"criteria/pass_rate/{kind}": sum(vals) / len(vals) for kind, vals in kinds.items()})
        rollouts = max(1, sum(len(g.rewards) for g in record.groups))
        values["guided_fraction"] = sum(g.guided for g in record.groups) / rollouts
        values.update(judge_metrics)
        values.update({f"time/{k}": v for k, v in record.seconds.items()})
        values.update({f"harness/version/{name}": version for name, version in self.harness.versions.items()})
        values.update(self.harness.sampling.metrics(record.step))
        self.record_metrics(values)


class _HoldSkippedUpdates(TrainerCallback):
    """Holds every weight still through an optimiser step whose micro-batches all came from skipped steps.

    Their gradient is 0, but an optimiser with momentum (AdamW) or weight decay would still move the
    weights; at learning rate 0 for that one step neither does. The rates are restored right after it,
    before the scheduler's next step."""

    def __init__(self, trainer: HarnessGRPOTrainer):
        self.trainer = trainer
        self._saved: list[Any] | None = None

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if optimizer is not None and not self.trainer._update_has_signal:
            self._saved = [group["lr"] for group in optimizer.param_groups]
            for group in optimizer.param_groups:
                group["lr"] = 0.0

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if optimizer is not None and self._saved is not None:
            for group, lr in zip(optimizer.param_groups, self._saved, strict=True):
                group["lr"] = lr
        self._saved = None
        self.trainer._update_has_signal = False


class _LockPolicyThroughUpdate(TrainerCallback):
    """Holds ``policy_lock`` from the optimiser step to the end of the step (the training thread's side).

    The lock already covers each ``training_step`` (forward, backward); the weights change after it, in
    the optimiser step, and the step counter moves after that. A trial on another thread (an external
    evolver's, over the tool server) waits for the lock, so it never samples weights half-updated, nor
    updated weights under the old step number (a vLLM engine's sync goes by that number). Released at
    ``on_step_end`` before the evolution point's callback (added later) runs trials itself."""

    def __init__(self, trainer: HarnessGRPOTrainer):
        self.trainer = trainer
        self.held = False

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if not self.held:
            self.trainer.policy_lock.acquire()
            self.held = True

    def on_step_end(self, args, state, control, **kwargs):
        self.release()

    def on_train_end(self, args, state, control, **kwargs):
        self.release()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.trainer.policy_lock.release()
