"""The evolver's read tools, trainer side: ``get_failures``, ``query_memory``, ``inspect_rollouts`` and
``get_harness_state``.

They read, never change: the failures to handle (the findings before any detector fires first, then the detected
failures, each persisting failure once, those handled or waiting left out), the training memory, a task's kept
rollouts, and the harness as it is now. Each takes its tool's argument model and returns its result model
(:mod:`harnessrl.interfaces.tools`); an unknown task id is a :class:`~harnessrl.evolution.candidates.CandidateError`
that names some known ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harnessrl.data.schema import prompt_text
from harnessrl.evolution.candidates import CandidateError
from harnessrl.interfaces.rubric import criteria_view
from harnessrl.interfaces.tools import (
    FailureList,
    FailureView,
    GetFailures,
    GetHarnessState,
    HarnessView,
    InspectRollouts,
    MemoryResult,
    QueryMemory,
    RolloutList,
    RolloutView,
    TaskView,
)

if TYPE_CHECKING:
    from harnessrl.evolution.context import ServiceContext
    from harnessrl.evolution.findings import EarlyFindings
    from harnessrl.records.failures import Failure
    from harnessrl.records.steps import RolloutRecord

__all__ = ["ReadTools"]


class ReadTools:
    """The read tools over the service's shared state and its early findings."""

    def __init__(self, ctx: ServiceContext, findings: EarlyFindings):
        self.ctx, self.findings = ctx, findings

    def get_failures(self, args: GetFailures) -> FailureList:
        """The failures to handle, one entry per persisting failure (see :class:`GetFailures`): first the rubric
        audit's findings whose tasks have newly graded groups (a requirement the prompts state that no rubric checks
        is exploited early, so it is repaired first), then the detected failures, newest first. Left out: those an
        evolution point handled, and those deferred with no new group of their candidate's tasks graded since
        (:mod:`harnessrl.evolution.handled`)."""
        ctx = self.ctx
        if args.task_id is not None:
            ctx.task(args.task_id)  # an id that is no training task is an error, not an empty list
        with ctx.lock:
            groups: dict[tuple, list[Failure]] = {}
            handled: set[tuple] = set()
            waiting: set[tuple] = set()
            audit = {f.id for f in self.findings.ready()}
            for f in self.findings.all_failures():
                if args.since_step is not None and f.step < args.since_step and f.id not in audit:
                    continue
                if args.kinds and f.kind not in args.kinds:
                    continue
                if args.task_id is not None and f.task_id != args.task_id:
                    continue
                if ctx.handled.is_handled(f):
                    handled.add(f.key)
                    continue
                if ctx.handled.waiting(f, ctx.graded_groups):
                    waiting.add(f.key)
                    continue
                groups.setdefault(f.key, []).append(f)
            views = [self._failure_view(fs) for fs in groups.values()]
        views.sort(key=lambda v: (v.failure_id not in audit, -v.step, v.kind, v.task_id))
        return FailureList(
            failures=views[: args.limit],
            total=len(views),
            handled=len(handled - set(groups)),
            deferred=len(waiting - set(groups)),
        )

    @staticmethod
    def _failure_view(reports: Sequence[Failure]) -> FailureView:
        """One persisting failure as ``get_failures`` lists it: its latest report, with how often it came."""
        latest = max(reports, key=lambda f: f.step)
        return FailureView(
            failure_id=latest.id,
            kind=latest.kind,
            step=latest.step,
            task_id=latest.task_id,
            domain=latest.domain,
            summary=latest.summary,
            evidence=latest.evidence,
            interface_hint=latest.interface_hint,
            rubric_version=latest.rubric_version,
            occurrences=len({f.step for f in reports}),
            first_step=min(f.step for f in reports),
        )

    def query_memory(self, args: QueryMemory) -> MemoryResult:
        """Within-task history or cross-task evidence from the training memory (see :class:`QueryMemory`)."""
        if args.task_id is not None:
            self.ctx.task(args.task_id)
        if self.ctx.memory is None:
            return MemoryResult(mode=args.mode, note="this run keeps no training memory: decide from the failures")
        mem = self.ctx.memory
        if args.mode == "task_history":
            steps = mem.task_history(args.task_id, last_n=args.n)
            updates = mem.candidates(task_id=args.task_id)[-args.n :]
            items = [{"record": "step", **s.model_dump(mode="json", exclude_none=True)} for s in steps]
            items += [{"record": "update", **c.model_dump(mode="json", exclude_none=True)} for c in updates]
            return MemoryResult(mode=args.mode, items=items)
        text = args.text or self._latest_failure_text(args.task_id)
        if not text:
            raise CandidateError(f"no failure detected on task {args.task_id!r} yet: give the text to search for")
        if args.mode == "similar_failures":
            rows = mem.similar_failures(
                text, kind=args.kind, interface=args.interface, exclude_task=args.task_id, n=args.n
            )
        elif args.mode == "what_worked":
            rows = mem.what_worked(text, kind=args.kind, interface=args.interface, n=args.n, exclude_task=args.task_id)
        else:
            rows = mem.similar_tasks(text, n=args.n, exclude_task=args.task_id, failure=args.kind)
        items = [r.model_dump(mode="json", exclude_none=True) for r in rows]
        note = "" if items else "nothing similar in the memory yet"
        return MemoryResult(mode=args.mode, items=items, note=note)

    def _latest_failure_text(self, task_id: str | None) -> str | None:
        if task_id is None:
            return None
        for f in reversed(list(self.ctx.failures())):
            if f.task_id == task_id:
                return f"{f.kind.replace('_', ' ')}: {f.summary}"  # how the memory words a failure
        return None

    def inspect_rollouts(self, args: InspectRollouts) -> RolloutList:
        """A task's rubric, reference answer and recent rollouts, lowest to highest reward."""
        ctx = self.ctx
        with ctx.lock:
            task = ctx.task(args.task_id)
            current = ctx.harness.rubrics.current(args.task_id)
            kept = ctx.recorder.latest_rollouts(args.task_id)
        steps = sorted({r.step for r in kept})[-args.steps :]
        pool = sorted(
            (r for r in kept if r.step in steps),
            key=lambda r: (r.reward is None, -1.0 if r.reward is None else r.reward, r.step, r.member),
        )
        chosen = pool
        if len(pool) > args.limit:  # evenly spread over the reward order: both extremes and the middle
            n, k = len(pool), args.limit
            chosen = [pool[(n - 1) // 2]] if k == 1 else [pool[round(i * (n - 1) / (k - 1))] for i in range(k)]
        return RolloutList(
            task_id=task.id,
            domain=task.domain,
            prompt=prompt_text(task.prompt),
            rubric_version=current.version,
            rubric=criteria_view(current.criteria),
            reference_answer=task.reference_answer,
            reference_verdicts=(ctx.witness.view(task.id) or {}).get("verdicts") or {},
            rollouts=[self._rollout_view(r) for r in chosen],
            total=len(pool),
        )

    def _rollout_view(self, r: RolloutRecord) -> RolloutView:
        limit = self.ctx.completion_chars
        text, cut = r.completion, len(r.completion) > limit
        if cut:
            text = text[:limit] + f" …[{len(r.completion) - limit} more characters]"
        return RolloutView(
            step=r.step,
            member=r.member,
            guided=r.guided,
            reward=r.reward,
            length_tokens=r.length_tokens,
            length_words=r.length_words,
            rubric_version=r.rubric_version,
            completion=text,
            truncated=cut,
            verdicts=dict(r.verdicts),
        )

    def get_harness_state(self, args: GetHarnessState) -> HarnessView:
        """Interface versions, and one task's sampling, guidance and rubric as they are now."""
        ctx = self.ctx
        with ctx.lock:
            step = ctx.current_step()
            h = ctx.harness
            view = None
            if args.task_id is not None:
                task = ctx.task(args.task_id)
                fields: dict[str, Any] = {}
                for iface in h.interfaces.values():
                    fields.update(iface.task_view(task, step))
                reference = ctx.witness.view(task.id)
                if reference is not None:
                    fields["reference"] = reference
                view = TaskView(task_id=task.id, domain=task.domain, **fields)
            return HarnessView(step=step, versions=h.versions, task=view)
