"""A trial's budget: what it may spend (fresh rollouts, judge calls, seconds), what it spent, and spending within it.

A trial that would exceed ``max_rollouts``, ``max_judge_calls`` or ``max_seconds``
(:class:`~harnessrl.critic.config.TrialConfig`) stops *before* spending and is rejected with a reason that
starts with "budget" (:class:`Rejected`; every early end of a trial is one). Every recipe spends through
the two functions here, so the bounds are checked in one way:

- :meth:`Budget.grade` grades texts under one or more rubrics: it first checks that the judge backend
  requests the *uncached* verdicts need fit what is left (the judge's verdict cache makes a re-grade under
  a rubric that adds one criterion cost one request per text), then grades each distinct text once;
- :meth:`Budget.sample_rows` generates completions of the frozen policy for harness rows, batched by
  sampling settings, after checking the rollouts fit; a failing sampler loses the trial, never the run.

What a trial spent is its :class:`~harnessrl.records.trials.TrialCost`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from harnessrl.critic.acceptance import Measured
from harnessrl.critic.config import TrialConfig
from harnessrl.critic.protocols import PolicySampler, RowView
from harnessrl.data.schema import Criterion, Task
from harnessrl.judges.rubric_judge import GradeResult, RubricJudge, RubricRequest
from harnessrl.records.trials import TrialCost

__all__ = ["Budget", "Rejected", "bounds_text", "count_judged"]

logger = logging.getLogger(__name__)


class Rejected(Exception):
    """Ends a trial early with a rejection (``reason``, in words), its ``kind`` (a
    :data:`~harnessrl.records.trials.VerdictKind`: budget, invalid, no_effect, unmeasurable) and whatever was
    measured so far."""

    def __init__(self, reason: str, measured: Measured | None = None, kind: str = "unmeasurable"):
        super().__init__(reason)
        self.reason = reason
        self.measured = measured
        self.kind = kind


def count_judged(criteria: Sequence[Criterion]) -> int:
    """Criteria a judge grades (no programmatic ``check``): the most judge calls one text can cost."""
    return sum(c.check is None for c in criteria)


def bounds_text(config: TrialConfig, allowance: int | None = None) -> str:
    """A trial's bounds as a rejection for its budget states them: ``max_rollouts``, and where the run's
    ``max_rollout_share`` lowered it (``allowance``: the trial's ``rollout_allowance``) that this is why and how to
    lift it."""
    run_bound = (
        " (what evolver.trials.max_rollout_share leaves; it grows as training generates: raise it, or null)"
        if allowance is not None and allowance <= config.max_rollouts
        else ""
    )
    return f"max_rollouts={config.max_rollouts}{run_bound}, max_judge_calls={config.max_judge_calls}"


class Budget:
    """A trial's running cost and its bounds.

    Args:
        config: the bounds (``max_rollouts``, ``max_judge_calls``, ``max_seconds``) and ``max_new_tokens``.
        judge: the training judge; its backend requests since the trial began are the trial's judge calls.
        sampler: the frozen policy (None: nothing can be generated).
    """

    def __init__(self, config: TrialConfig, judge: RubricJudge, sampler: PolicySampler | None = None):
        self.config = config
        self.judge = judge
        self.sampler = sampler
        self.t0 = time.perf_counter()
        self.rollouts = 0
        self.judge0 = judge.stats.backend_requests

    # ------------------------------------------------------------------------------ what was spent
    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def judge_calls(self) -> int:
        return max(0, self.judge.stats.backend_requests - self.judge0)

    @property
    def can_sample(self) -> bool:
        """Whether a policy sampler is there to generate fresh rollouts."""
        return self.sampler is not None

    def cost(self) -> TrialCost:
        return TrialCost(rollouts=self.rollouts, judge_calls=self.judge_calls, seconds=round(self.seconds, 3))

    # ------------------------------------------------------------------------------ the bounds
    def fits(self, rollouts: int, judge_calls: int) -> bool:
        """Whether ``rollouts`` generated and ``judge_calls`` made in all stay within the bounds."""
        return rollouts <= self.config.max_rollouts and judge_calls <= self.config.max_judge_calls

    def need_time(self, estimate: float, what: str) -> None:
        """Reject unless ``estimate`` more seconds stay within ``max_seconds``."""
        limit = self.config.max_seconds
        if self.seconds + estimate > limit:
            raise Rejected(
                f"budget: {what} would exceed max_seconds={limit:g} ({self.seconds:.1f} s spent, "
                f"about {estimate:.1f} s more needed)",
                kind="budget",
            )

    def need_judge(self, calls: int, what: str) -> None:
        """Reject unless ``calls`` more judge backend requests stay within ``max_judge_calls``."""
        left = self.config.max_judge_calls - self.judge_calls
        if calls > left:
            raise Rejected(
                f"budget: {what} needs {calls} judge calls, {left} left of max_judge_calls="
                f"{self.config.max_judge_calls}",
                kind="budget",
            )

    # ------------------------------------------------------------------------------ spending
    def grade(
        self,
        task: Task,
        texts: Sequence[str],
        rubrics: Sequence[Sequence[Criterion]],
        what: str,
        time_checks: Sequence[str | None] = (),
    ) -> list[dict[str, GradeResult]]:
        """``task``'s distinct ``texts`` graded under each rubric in turn: ``{text: result}`` per rubric.

        The judge calls every rubric's uncached verdicts need are checked against the budget first (named
        ``what``), so nothing is graded that cannot be finished; the first rubric's verdicts then fill the
        cache the next ones' unchanged criteria hit. ``time_checks[i]``, when given, checks the time before
        grading under rubric ``i`` and names what it checks."""
        unique = list(dict.fromkeys(texts))
        requests = [[RubricRequest.for_task(task, t, rubric) for t in unique] for rubric in rubrics]
        uncached: set[str] = set()
        for reqs in requests:
            uncached |= self.judge.uncached(reqs)
        self.need_judge(len(uncached), what)
        graded = []
        for i, reqs in enumerate(requests):
            check = time_checks[i] if i < len(time_checks) else None
            if check is not None:
                self.need_time(0.0, check)
            graded.append(dict(zip(unique, self.judge.grade(reqs), strict=True)))
        return graded

    def sample_rows(self, rows: Sequence[RowView]) -> list[str]:
        """Completions for harness rows (messages and sampling settings), generated together where the
        settings agree, in the rows' order."""
        out: list[str | None] = [None] * len(rows)
        by_setting: dict[tuple, list[int]] = {}
        for i, row in enumerate(rows):
            by_setting.setdefault(tuple(sorted(row.generation.items())), []).append(i)
        for setting, idx in by_setting.items():
            texts = self._sample([rows[i].messages for i in idx], dict(setting))
            for i, text in zip(idx, texts, strict=True):
                out[i] = text
        return [str(t) for t in out]

    def _sample(self, prompts: list[list[dict[str, str]]], generation: Mapping[str, Any]) -> list[str]:
        if self.sampler is None:
            raise Rejected("no policy sampler: this trial needs fresh rollouts of the frozen policy")
        if self.rollouts + len(prompts) > self.config.max_rollouts:
            raise Rejected(
                f"budget: {len(prompts)} more rollouts would exceed max_rollouts={self.config.max_rollouts} "
                f"({self.rollouts} generated)",
                kind="budget",
            )
        try:
            extra = {k: v for k, v in generation.items() if k not in ("temperature", "max_new_tokens")}
            texts = self.sampler.sample(
                prompts,
                float(generation.get("temperature", 1.0)),
                int(generation.get("max_new_tokens", self.config.max_new_tokens)),
                **extra,
            )
        except Exception as e:  # a failing generation loses this trial, never the run
            logger.exception("policy sampler failed on %d prompts", len(prompts))
            raise Rejected(f"the policy sampler failed: {type(e).__name__}: {e}") from None
        if len(texts) != len(prompts):
            raise Rejected(f"the policy sampler returned {len(texts)} completions for {len(prompts)} prompts")
        self.rollouts += len(prompts)
        return [str(t) for t in texts]
