"""What a trial reads from the layers it does not own: the frozen policy and the harness, as small Protocols.

The critic sits below the interfaces (``pyproject.toml``'s import contracts): it never imports them, not
even for a type annotation. :class:`HarnessView` is the part of
:class:`~harnessrl.interfaces.harness.Harness` the trial recipes read (the training tasks, the rubric each
is graded with, the task-sampling status, and the rows the interfaces shape, now and with a candidate
overlaid); :class:`~harnessrl.critic.trials.TrialHarness` adds the one thing the entry point needs, the
interface of an update. :class:`PolicySampler` is what generates fresh rollouts of the frozen policy
(:mod:`harnessrl.critic.rollouts` has the real ones; tests pass scripted ones).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from harnessrl.data.schema import Criterion, Task

__all__ = ["HarnessView", "PolicySampler", "RowView", "RubricVersionView", "RubricsView", "SamplingView"]


@runtime_checkable
class PolicySampler(Protocol):
    """Generates completions with the frozen policy: one text per chat prompt, sampled at ``temperature``.

    Further sampling settings an interface sets on a row (e.g. ``top_p``) arrive as keyword arguments;
    a sampler that cannot honour one should raise (the trial is then rejected with the reason)."""

    def sample(
        self, prompts: list[list[dict[str, str]]], temperature: float, max_new_tokens: int, **settings: float
    ) -> list[str]: ...


class RowView(Protocol):
    """One group member as the harness shapes it (:class:`~harnessrl.interfaces.base.Row`): its chat
    messages, whether it saw guidance, and its sampling settings. Rows compare equal when nothing differs."""

    @property
    def messages(self) -> list[dict[str, str]]: ...

    @property
    def guided(self) -> bool: ...

    @property
    def generation(self) -> Mapping[str, float]: ...

    @property
    def temperature(self) -> float: ...


class RubricVersionView(Protocol):
    """One version of a task's rubric: its number and its criteria."""

    @property
    def version(self) -> int: ...

    @property
    def criteria(self) -> list[Criterion]: ...


class RubricsView(Protocol):
    """The rubric-criteria interface as a trial reads it: the rubric each task is graded with now, and
    every version of each task's rubric (version 0 first), to read recorded groups back."""

    @property
    def versions(self) -> Mapping[str, Sequence[RubricVersionView]]: ...

    def current(self, task_id: str) -> RubricVersionView: ...


class SamplingView(Protocol):
    """The task-sampling interface as a trial reads it: a task's status at a step (``"active"``, ...)."""

    def status_at(self, task_id: str, step: int) -> str: ...


@runtime_checkable
class HarnessView(Protocol):
    """The harness as the trial recipes read it; read only (a candidate is overlaid, never applied)."""

    @property
    def tasks(self) -> Mapping[str, Task]: ...

    @property
    def rubrics(self) -> RubricsView: ...

    @property
    def sampling(self) -> SamplingView: ...

    def row(self, task: Task, member: int, group_size: int, overlay: Any | None = None) -> RowView:
        """Member ``member`` of a group of ``group_size`` for ``task`` as every interface shapes it;
        ``overlay``: a candidate update previewed on its own interface."""
        ...
