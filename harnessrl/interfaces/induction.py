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
:mod:`harnessrl.interfaces.reference_criteria` (:func:`reference_terms`, :func:`tightened_bound`), and what kind of
requirement a check states by :mod:`harnessrl.interfaces.requirement_keys` (:func:`requirement_key`, the same for a
native check and the IFEval check that state one requirement). Every name is importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessrl.interfaces.reference_criteria import _reference_bounds, reference_terms, term_stem, tightened_bound
from harnessrl.interfaces.requirement_keys import InducedCheck, parsed_check, requirement_key
from harnessrl.interfaces.requirement_reading import stated_keys, stated_requirements

__all__ = [
    "InducedCheck",
    "induce_checks",
    "reference_terms",
    "requirement_key",
    "stated_keys",
    "stated_requirements",
    "term_stem",
    "tightened_bound",
]


def induce_checks(
    prompt: str,
    reference: str | None,
    rollouts: Sequence[str],
    existing: Sequence[dict[str, Any]] = (),
    *,
    reference_bounds: bool = False,
) -> list[InducedCheck]:
    """Candidate exact criteria for a task, best first: each met by ``reference`` (when there is one), splitting
    ``rollouts`` (at least one passes and one fails), and not one of the ``existing`` checks. The candidates are
    the prompt's stated requirements, and with ``reference_bounds`` also length bounds the reference meets (a
    bound the prompt never asked for: for a reward that pays for length)."""
    if not rollouts:
        return []
    seen = [dict(c) for c in existing]
    found: list[InducedCheck] = []
    candidates = [(c, t, "prompt") for c, t in stated_requirements(prompt)]
    if reference and reference_bounds:
        candidates += [(c, t, "reference") for c, t in _reference_bounds(reference)]
    for check, text, source in candidates:
        if check in seen:
            continue
        parsed = parsed_check(check)
        if parsed is None or (reference is not None and parsed.evaluate(reference) < 1):
            continue
        passes = sum(parsed.evaluate(r) >= 1 for r in rollouts)
        if 0 < passes < len(rollouts):
            seen.append(check)
            found.append(InducedCheck(check, text, source, passes, len(rollouts)))
    return sorted(found, key=lambda c: (c.source != "prompt", -c.balance))
