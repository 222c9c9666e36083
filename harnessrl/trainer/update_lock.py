"""The training thread's side of the policy lock: held through the optimiser step, to the end of the step.

The trainer's ``policy_lock`` (:class:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer`) covers each
``training_step`` (forward, backward); :class:`LockPolicyThroughUpdate` extends it over the optimiser step, where the
weights change, and the step counter's move after it. Frozen-policy trials on another thread wait for it.
"""

from __future__ import annotations

import threading
from typing import Protocol

from transformers import TrainerCallback

__all__ = ["LockPolicyThroughUpdate"]


class _HoldsPolicyLock(Protocol):
    policy_lock: threading.Lock


class LockPolicyThroughUpdate(TrainerCallback):
    """Holds ``policy_lock`` from the optimiser step to the end of the step (the training thread's side).

    The lock already covers each ``training_step`` (forward, backward); the weights change after it, in
    the optimiser step, and the step counter moves after that. A trial on another thread (an external
    evolver's, over the tool server) waits for the lock, so it never samples weights half-updated, nor
    updated weights under the old step number (a vLLM engine's sync goes by that number). Released at
    ``on_step_end`` before the evolution point's callback (added later) runs trials itself."""

    def __init__(self, trainer: _HoldsPolicyLock):
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
