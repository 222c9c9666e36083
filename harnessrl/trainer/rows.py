"""The rows a step trains on as the trainer hands them to TRL, and TRL's own batch dicts where they cross ours.

:class:`HarnessRow` is ours: :meth:`~harnessrl.trainer.grpo_trainer.HarnessGRPOTrainer.harness_rows` builds one per
group member (the task sampling's task, the interfaces' prompt and sampling settings), TRL generates from its
``prompt`` and passes the other keys to the reward function as columns, and the step's records read them back. It
is a ``TypedDict`` because TRL takes plain dicts.

:data:`TRLRows` and :data:`TRLBatch` are TRL's: their keys are whatever ``trl.GRPOTrainer`` puts there, so they are
named here, with what they hold, rather than typed key by key.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["HarnessRow", "TRLBatch", "TRLRows"]


class HarnessRow(TypedDict):
    """One group member of a step, as TRL generates and scores it."""

    prompt: list[dict[str, str]]
    """The chat messages it is generated from (guidance included when it is guided)."""
    task_id: str
    member: int
    """Its index in its task's group."""
    guided: bool
    """Whether its prompt carries the task's guidance."""
    rubric_version: int
    """The version of its task's rubric that grades it."""
    temperature: float
    generation: dict[str, float]
    """Its sampling settings (``temperature`` always; ``top_p``, ``max_new_tokens`` where an interface sets them)."""


TRLRows = list[dict[str, Any]]
"""A generation batch as TRL's data loader hands it to ``_generate_and_score_completions``: rows of the training
dataset, shaped by TRL (the trainer draws its own :class:`HarnessRow` in their place and counts them only)."""

TRLBatch = dict[str, Any]
"""What TRL's ``_generate_and_score_completions`` returns and its loss reads: tensors by name (``prompt_ids``,
``prompt_mask``, ``completion_ids``, ``completion_mask``, ``advantages``, ``num_items_in_batch``,
``old_per_token_logps``, ...), the keys and shapes TRL's."""
