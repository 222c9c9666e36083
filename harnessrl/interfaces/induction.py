"""Exact criteria induced from a task's prompt and reference answer, kept when they split the current rollouts.

A lax rubric (every rollout passes it) or a saturated check teaches nothing; a judged "stricter" sentence is
noisy, and a judge that pays for length may punish the reference answer for it. What a prompt asks formally
("without using any commas", "in at most 20 words", "begin with 'A volcano'") can be checked exactly, and the
reference answer shows which of those requests a good answer meets. :func:`induce_checks` reads the prompt's
explicit requirements (and, for bounds, the reference answer), builds each as a programmatic check from the
check library (:mod:`harnessrl.data.checks`), and keeps a candidate only when

- the reference answer passes it (when the task has one): it is something a good answer does, and
- it splits the current rollouts (some pass, some fail): it gives the group a spread, hence an advantage.

Candidates from the prompt come first (a stated requirement), then by how evenly they split the rollouts.
:func:`tightened_bound` gives a saturated bound check the bound the reference meets and part of the rollouts
miss. OpenRubrics builds criteria contrastively from a preferred and a rejected answer; here the preferred
answer is the reference and the rejected ones are the rollouts the check fails.

The prompt's stated requirements are read by :mod:`harnessrl.interfaces.requirement_reading`
(:func:`stated_requirements`, a table of small rules, one per kind of requirement), the reference's criteria by
:mod:`harnessrl.interfaces.reference_criteria` (:func:`reference_terms`, :func:`tightened_bound`). Checks travel as
the check library's models (:data:`~harnessrl.data.checks.Check`), in and out; what kind of requirement one states is
its own ``requirement_key()`` (the same for a native check and the IFEval check that state one requirement). Every
name is importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from harnessrl.data.checks import Check
from harnessrl.interfaces.induced import Found, InducedCheck
from harnessrl.interfaces.reference_criteria import (
    UpperBound,
    _reference_bounds,
    reference_terms,
    term_stem,
    tightened_bound,
)
from harnessrl.interfaces.requirement_reading import stated_keys, stated_requirements

__all__ = [
    "Found",
    "InducedCheck",
    "UpperBound",
    "induce_checks",
    "reference_terms",
    "stated_keys",
    "stated_requirements",
    "term_stem",
    "tightened_bound",
]


def induce_checks(
    prompt: str,
    reference: str | None,
    rollouts: Sequence[str],
    existing: Sequence[Check] = (),
    *,
    reference_bounds: bool = False,
) -> list[InducedCheck]:
    """Candidate exact criteria for a task, best first: each met by ``reference`` (when there is one), splitting
    ``rollouts`` (at least one passes and one fails), and not one of the ``existing`` checks. The candidates are
    the prompt's stated requirements, and with ``reference_bounds`` also length bounds the reference meets (a
    bound the prompt never asked for: for a reward that pays for length)."""
    if not rollouts:
        return []
    seen = list(existing)
    found: list[InducedCheck] = []
    candidates = [(c, t, "prompt") for c, t in stated_requirements(prompt)]
    if reference and reference_bounds:
        candidates += [(c, t, "reference") for c, t in _reference_bounds(reference)]
    for check, text, source in candidates:
        if check in seen or (reference is not None and not check.passes(reference)):
            continue
        passes = sum(check.passes(r) for r in rollouts)
        if 0 < passes < len(rollouts):
            seen.append(check)
            found.append(InducedCheck(check, text, source, passes, len(rollouts)))
    return sorted(found, key=lambda c: (c.source != "prompt", -c.balance))
