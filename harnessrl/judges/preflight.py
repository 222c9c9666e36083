"""A judge's check before training: does it answer at all?

A judge that cannot be reached (a wrong ``base_url``, a server that is down, a model name it does not
serve, a backend that raises) gives no verdicts; grading goes on without them (a missing verdict is never
a 0), so a run would train on its programmatic criteria alone, skip its steps, and end "successfully"
having learned nothing. :func:`preflight_judge` grades a few tasks' reference answers (a short probe for a
task without one) with the real judge before the first step; when not one judged criterion gets a verdict
it raises :class:`~harnessrl.errors.JudgeError` with what the judge said went wrong, before any weight moves.
The verdicts go into the judge's cache, so grading the same reference answers during training costs nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TypedDict

from harnessrl.data.schema import Task
from harnessrl.errors import JudgeError
from harnessrl.judges.rubric_judge import RubricJudge, RubricRequest

__all__ = ["PreflightCheck", "preflight_judge"]


class PreflightCheck(TypedDict):
    """What a preflight checked, for the run's records: the tasks graded, the judged verdicts asked of the judge and
    those missing, the seconds it took."""

    tasks: int
    judged: int
    missing: int
    seconds: float


logger = logging.getLogger(__name__)

PROBE_ANSWER = "Here is a short, direct answer to the request."
"""Graded for a task that has no reference answer."""


class _Said(logging.Handler):
    """Collects what the judge's code logs at WARNING and above (why a verdict went missing)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        if text not in self.messages:
            self.messages.append(text)


def preflight_judge(
    judge: RubricJudge, tasks: Sequence[Task], *, n: int = 3, setting: str = "judge", where: str = ""
) -> PreflightCheck:
    """Grade the reference answers of the first ``n`` tasks that have a judged criterion; raise
    :class:`~harnessrl.errors.JudgeError` when the judge gave a verdict on none of their judged criteria.

    ``setting`` names the judge's config section and ``where`` where it runs, for the message. Returns what
    was checked (tasks, judged verdicts asked and missing, seconds) for the run's records; ``n`` 0, or no task
    with a judged criterion, checks nothing."""
    chosen = [t for t in tasks if any(c.check is None for c in t.rubric)][:n]
    if not chosen:
        return {"tasks": 0, "judged": 0, "missing": 0, "seconds": 0.0}
    said = _Said()
    judges_log = logging.getLogger("harnessrl.judges")
    judges_log.addHandler(said)
    t0 = time.perf_counter()
    try:
        results = judge.grade([RubricRequest.for_task(t, t.reference_answer or PROBE_ANSWER) for t in chosen])
    finally:
        judges_log.removeHandler(said)
    verdicts = [v for r in results for v in r.verdicts if v.source != "programmatic"]
    missing = sum(v.value is None for v in verdicts)
    checked: PreflightCheck = {
        "tasks": len(chosen),
        "judged": len(verdicts),
        "missing": missing,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if verdicts and missing == len(verdicts):
        ids = ", ".join(t.id for t in chosen)
        why = "; ".join(said.messages[-3:]) or "it returned no verdict, and said nothing about why"
        at = f" ({where})" if where else ""
        raise JudgeError(
            f"the {setting} {judge.name!r}{at} gave no verdict on any of the {len(verdicts)} judged criteria of "
            f"{len(chosen)} reference answer(s) graded before training (tasks {ids}): {why}. Nothing was "
            f"trained. Check that the judge answers (for a server: that it runs, and that {setting}.base_url and "
            f"{setting}.model name it), e.g. with `harnessrl judge --task {chosen[0].id} --reference` and the same "
            f"judge settings, then run again ({setting}.preflight: 0 skips this check)"
        )
    if missing:
        logger.warning(
            "the %s %r gave no verdict on %d of %d judged criteria of the reference answers graded before "
            "training (%s); training goes on, and such verdicts count as missing",
            setting,
            judge.name,
            missing,
            len(verdicts),
            "; ".join(said.messages[-3:]) or "no reason given",
        )
    return checked
