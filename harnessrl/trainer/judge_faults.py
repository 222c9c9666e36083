"""Judge faults in training: a rollout without a reward never trains as if it had scored 0.

A rollout whose reward is missing (the judge gave too few verdicts, after its retries) is left out of its group's
baseline with advantage 0 by TRL (see :mod:`harnessrl.trainer.rewards`); :func:`without_rows` zeroes its completion
mask too, so it adds no token to the loss or its normaliser (the KL term included). When more than
``max_missing_share`` of a step's rollouts have no reward, ``on_too_many_missing`` decides
(:meth:`JudgeFaults.decide`): ``skip`` trains on nothing (every row masked, and the optimiser step it feeds runs at
learning rate 0 through :class:`HoldSkippedUpdates`, so neither momentum nor weight decay moves a weight), ``stop``
ends the run with a :class:`~harnessrl.errors.JudgeError`.

:class:`JudgeFaults` is the trainer's part that holds these settings and what the latest steps decided; the trainer
(:class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`) owns one and asks it from its hooks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

from transformers import TrainerCallback

from harnessrl.errors import ConfigError, JudgeError
from harnessrl.records.steps import StepRecord
from harnessrl.trainer.rows import TRLBatch

__all__ = ["HoldSkippedUpdates", "JudgeFaults", "without_rows"]

logger = logging.getLogger(__name__)

_STOPPED = (
    "training stopped (judge.on_too_many_missing: stop). Is the judge up and answering? The judge's warnings above "
    "say what failed (connection refused, timeouts, HTTP errors, unusable answers): check judge.backend, "
    "judge.base_url and judge.model, raise judge.timeout_s or judge.max_retries for a slow server, then continue "
    "with --resume. To skip such steps instead of stopping, set judge.on_too_many_missing: skip."
)


class JudgeFaults:
    """What a step does about its missing rewards, and whether the optimiser step it feeds teaches anything.

    Args:
        max_missing_share: the share of a step's rollouts that may have no reward before ``on_too_many_missing``
            applies (``judge.max_missing_share``).
        on_too_many_missing: ``skip`` (the step trains on nothing) or ``stop`` (raise
            :class:`~harnessrl.errors.JudgeError`) when a step passes ``max_missing_share``.
    """

    def __init__(self, max_missing_share: float = 0.5, on_too_many_missing: Literal["skip", "stop"] = "skip"):
        if on_too_many_missing not in ("skip", "stop"):
            raise ConfigError(f"judge.on_too_many_missing is 'skip' or 'stop', not {on_too_many_missing!r}")
        self.max_missing_share = max_missing_share
        self.on_too_many_missing = on_too_many_missing
        self.skipped = False
        """Whether the latest generation (the step being trained) was skipped (the trainer sets it)."""
        self.update_has_signal = False
        """Whether a micro-batch of the coming optimiser step came from a step that was not skipped."""

    def decide(self, record: StepRecord, record_metrics: Callable[[dict[str, float]], None]) -> bool:
        """Count the step's missing rewards (``judge/missing_share`` and ``steps/skipped_missing``, to
        ``record_metrics``) and apply ``on_too_many_missing`` when their share passes ``max_missing_share``: returns
        whether the step is skipped; raises :class:`JudgeError` to stop.

        The record holds every process's rollouts, so every process takes the same decision."""
        rewards = [r for g in record.groups for r in g.rewards]
        missing = sum(r is None for r in rewards)
        share = missing / len(rewards) if rewards else 0.0
        over = share > self.max_missing_share
        record_metrics({"judge/missing_share": share, "steps/skipped_missing": float(over)})
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
            raise JudgeError(f"{what}; {_STOPPED}")
        logger.warning(
            "%s; the step is SKIPPED: it trains on nothing and changes no weight (judge.on_too_many_missing: skip; "
            "counted in steps/skipped_missing). Check the judge's warnings above.",
            what,
        )
        return True

    def note_micro_batch(self) -> None:
        """A micro-batch of the latest generation goes into the coming optimiser step."""
        self.update_has_signal = self.update_has_signal or not self.skipped


def without_rows(out: TRLBatch, drop: list[bool], gather: Callable[[Any], Any]) -> TRLBatch:
    """TRL's output with the ``drop`` rows (this process's) out of the loss: advantage 0 and no loss token, and the
    batch's token count (the ``dapo`` loss's normaliser) recounted over every process (``gather``: the
    accelerator's, a collective every process calls at every step)."""
    import torch

    device = out["completion_mask"].device
    keep = ~torch.tensor(drop, dtype=torch.bool, device=device)
    adv = out["advantages"]
    out["advantages"] = adv * (keep if adv.dim() == 1 else keep.unsqueeze(1)).to(adv.dtype)
    out["completion_mask"] = out["completion_mask"] * keep.unsqueeze(1).to(out["completion_mask"].dtype)
    loss_mask = out["completion_mask"] if "tool_mask" not in out else out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = gather(loss_mask.sum()).sum()
    return out


class HoldSkippedUpdates(TrainerCallback):
    """Holds every weight still through an optimiser step whose micro-batches all came from skipped steps.

    Their gradient is 0, but an optimiser with momentum (AdamW) or weight decay would still move the
    weights; at learning rate 0 for that one step neither does. The rates are restored right after it,
    before the scheduler's next step."""

    def __init__(self, faults: JudgeFaults):
        self.faults = faults
        self._saved: list[Any] | None = None

    def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if optimizer is not None and not self.faults.update_has_signal:
            self._saved = [group["lr"] for group in optimizer.param_groups]
            for group in optimizer.param_groups:
                group["lr"] = 0.0

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        if optimizer is not None and self._saved is not None:
            for group, lr in zip(optimizer.param_groups, self._saved, strict=True):
                group["lr"] = lr
        self._saved = None
        self.faults.update_has_signal = False
