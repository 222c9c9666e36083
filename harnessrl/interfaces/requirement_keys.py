"""What kind of requirement a check states, and a candidate criterion as induction describes it.

The vocabulary the prompt reading (:mod:`harnessrl.interfaces.requirement_reading`), the reference's criteria
(:mod:`harnessrl.interfaces.reference_criteria`) and the induction (:mod:`harnessrl.interfaces.induction`) share:

- :func:`requirement_key` names the kind of requirement a check states, the same for a native check and the IFEval
  check that state one requirement: the signature a stated-requirement repair covers, and how a requirement is
  found already checked by a rubric;
- :class:`InducedCheck` is a candidate criterion: its check, its text, where it came from, how many rollouts pass it;
- :data:`Found` is a stated requirement as (check, criterion text), and :func:`parsed_check` builds a check from the
  check library (:mod:`harnessrl.data.checks`), or None when it does not build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from harnessrl.data.checks import Check

__all__ = ["Found", "InducedCheck", "parsed_check", "requirement_key"]

_CHECK = TypeAdapter(Check)
Found = tuple[dict[str, Any], str]  # a stated requirement: (check, criterion text)


@dataclass(frozen=True)
class InducedCheck:
    """A candidate criterion: its check (as the rubric schema writes it), its text, where it came from, and
    how many of the rollouts pass it."""

    check: dict[str, Any]
    text: str
    source: str  # "prompt": a requirement the prompt states; "reference": a bound the reference answer meets
    passes: int
    total: int

    @property
    def balance(self) -> float:
        """How evenly it splits the rollouts: 1 at half passing, 0 when all pass or all fail."""
        return 2 * min(self.passes, self.total - self.passes) / self.total if self.total else 0.0


def parsed_check(check: dict[str, Any]):
    """``check`` built as a :class:`~harnessrl.data.checks.Check`, or None when it does not validate."""
    try:
        return _CHECK.validate_python(check)
    except ValidationError:
        return None


# ------------------------------------------------------------------------------------------ requirement keys

_IFEVAL_NATIVE = {
    # an IFEval id and the key of the native check that states the same requirement
    "punctuation:no_comma": "not_contains:[',']",
    "change_case:english_lowercase": "letter_case:lower",
    "change_case:english_capital": "letter_case:upper",
    "detectable_format:json_format": "json",
    "startend:end_checker": "ends_with",
    "detectable_format:number_bullet_lists": "bullet_count:min,max",
    "keywords:existence": "contains:words",
    "keywords:forbidden_words": "not_contains:words",
}
_IFEVAL_BOUND = {
    # an IFEval id whose relation is a bound: "less than" an upper bound, "at least" a lower one
    "length_constraints:number_words": ("word_count", "relation"),
    "length_constraints:number_sentences": ("sentence_count", "relation"),
}


def requirement_key(check: Mapping[str, Any]) -> str:
    """What a check requires, without the task's own values: two checks with one key ask the same *kind* of
    thing (no commas; at most N words; begins with a phrase), each with its own numbers or phrases. It is the
    signature a stated-requirement repair covers (every task whose prompt states a requirement of the key) and
    how a requirement is found already checked by a rubric. Punctuation a check forbids or requires is part of
    the key (no commas is not no semicolons); words are not (each task forbids its own). An IFEval check
    with a native equivalent has the native key (a keyword required at least once is ``contains:words``, one
    required less than once ``not_contains:words``)."""
    kind = str(check.get("type"))
    if kind == "ifeval":
        iid = str(check.get("instruction_id"))
        kwargs = check.get("kwargs") or {}
        if iid in _IFEVAL_BOUND:
            native, relation = _IFEVAL_BOUND[iid]
            less = str(kwargs.get(relation, "")).startswith("less")
            return f"{native}:max" if less else f"{native}:min"
        if iid == "keywords:frequency" and str(kwargs.get("frequency")) in ("1", "1.0"):
            return "not_contains:words" if str(kwargs.get("relation", "")).startswith("less") else "contains:words"
        return _IFEVAL_NATIVE.get(iid, f"ifeval:{iid}")
    if kind in ("contains", "not_contains"):
        phrases = [str(p) for p in check.get("phrases") or []]
        if phrases and not any(ch.isalnum() for p in phrases for ch in p):
            return f"{kind}:{sorted(phrases)}"
        return f"{kind}:words"
    if kind == "letter_case":
        return f"letter_case:{check.get('case')}"
    bounds = [b for b in ("min", "max") if check.get(b) is not None]
    return f"{kind}:{','.join(bounds)}" if bounds else kind
