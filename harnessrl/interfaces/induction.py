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
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from harnessrl.data.checks import Check, count_words, split_sentences

__all__ = ["InducedCheck", "induce_checks", "requirement_key", "stated_requirements", "tightened_bound"]

_CHECK = TypeAdapter(Check)
_NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_N = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_Q = r"['\"‘“]([^'\"’”]{1,80})['\"’”]"  # a quoted phrase


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


_IFEVAL_NATIVE = {
    "punctuation:no_comma": "not_contains:[',']",
    "change_case:english_lowercase": "letter_case:lower",
    "change_case:english_capital": "letter_case:upper",
    "detectable_format:json_format": "json",
    "startend:end_checker": "ends_with",
    "detectable_format:number_bullet_lists": "bullet_count:min,max",
}


def requirement_key(check: Mapping[str, Any]) -> str:
    """What a check requires, without the task's own values: two checks with one key ask the same *kind* of
    thing (no commas; at most N words; begins with a phrase), each with its own numbers or phrases. It is the
    signature a stated-requirement repair covers (every task whose prompt states a requirement of the key) and
    how a requirement is found already checked by a rubric. Punctuation a check forbids or requires is part of
    the key (no commas is not no semicolons); words are not (each task forbids its own). An IFEval check
    with a native equivalent has the native key."""
    kind = str(check.get("type"))
    if kind == "ifeval":
        iid = str(check.get("instruction_id"))
        if iid == "length_constraints:number_words":
            less = str((check.get("kwargs") or {}).get("relation", "")).startswith("less")
            return "word_count:max" if less else "word_count:min"
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


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def stated_requirements(prompt: str) -> list[tuple[dict[str, Any], str]]:
    """The formal requests a prompt states, as (check, criterion text)."""
    p = " ".join(prompt.split())
    out: list[tuple[dict[str, Any], str]] = []

    def find(pattern: str):
        return re.search(pattern, p, flags=re.IGNORECASE)

    if find(r"\bwithout (?:using )?(?:any )?commas?\b|\bno commas?\b"):
        out.append(({"type": "not_contains", "phrases": [","]}, "Uses no commas at all"))
    if m := find(rf"\b(?:at most|no more than|not more than|fewer than|under|up to|maximum of) {_N} words\b"):
        n = _number(m[1])
        out.append(({"type": "word_count", "max": n}, f"Uses at most {n} words"))
    if m := find(rf"\b(?:in|with|using) exactly {_N} sentences?\b|\bexactly {_N} sentences?\b"):
        n = _number(m[1] or m[2])
        out.append(({"type": "sentence_count", "min": n, "max": n}, f"Writes exactly {n} sentence(s)"))
    elif find(r"\bin (?:one|a single) sentence\b"):
        out.append(({"type": "sentence_count", "max": 1}, "Answers in one sentence"))
    if find(r"\blower ?case\b"):
        out.append(({"type": "letter_case", "case": "lower"}, "Writes every letter in lowercase"))
    if find(r"\b(?:capital letters only|in (?:all )?capitals|all caps|upper ?case)\b"):
        out.append(({"type": "letter_case", "case": "upper"}, "Writes every letter in capitals"))
    if m := find(rf"\bbegin (?:your (?:answer|reply|response) )?with {_Q}"):
        out.append(({"type": "starts_with", "text": m[1]}, f"Begins with '{m[1]}'"))
    if m := find(rf"\bend (?:your (?:answer|reply|response) )?with (?:the (?:exact )?(?:words?|phrase) )?{_Q}"):
        out.append(({"type": "ends_with", "text": m[1]}, f"Ends with '{m[1]}'"))
    if m := find(r"\bin the form ['\"‘“]([^'\"’”<]{1,40})<"):
        prefix = m[1].strip()
        if prefix:
            out.append(({"type": "starts_with", "text": prefix}, f"Begins with '{prefix}' in the form the prompt asks"))
    if m := find(rf"\b(?:exactly )?{_N} bullet points?\b"):
        n = _number(m[1])
        out.append(({"type": "bullet_count", "min": n, "max": n}, f"Lists exactly {n} bullet points"))
    if m := find(rf"\b(?:include|mention|use) the (?:word|phrase) {_Q}"):
        out.append(({"type": "contains", "phrases": [m[1]]}, f"Uses '{m[1]}'"))
    if m := find(rf"\b(?:do not|don't|never) (?:use|say|mention|write) (?:the (?:word|phrase) )?{_Q}"):
        out.append(({"type": "not_contains", "phrases": [m[1]]}, f"Does not use '{m[1]}'"))
    if find(r"\bjson\b"):
        out.append(({"type": "json"}, "Answers with valid JSON"))
    return out


def _reference_bounds(reference: str) -> list[tuple[dict[str, Any], str]]:
    """Length bounds the reference answer meets: its words (with a margin) and its sentences."""
    words = count_words(reference)
    sentences = len(split_sentences(reference))
    out: list[tuple[dict[str, Any], str]] = []
    if words:
        limit = math.ceil(1.5 * words)
        out.append(({"type": "word_count", "max": limit}, f"Uses at most {limit} words, as concise as the reference"))
    if sentences:
        out.append(
            ({"type": "sentence_count", "max": sentences}, f"Uses at most {sentences} sentence(s), as the reference")
        )
    return out


def _parse(check: dict[str, Any]):
    try:
        return _CHECK.validate_python(check)
    except ValidationError:
        return None


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
        parsed = _parse(check)
        if parsed is None or (reference is not None and parsed.evaluate(reference) < 1):
            continue
        passes = sum(parsed.evaluate(r) >= 1 for r in rollouts)
        if 0 < passes < len(rollouts):
            seen.append(check)
            found.append(InducedCheck(check, text, source, passes, len(rollouts)))
    return sorted(found, key=lambda c: (c.source != "prompt", -c.balance))


_COUNTED = {
    "word_count": count_words,
    "sentence_count": lambda t: len(split_sentences(t)),
    "char_count": len,
}


def tightened_bound(check: dict[str, Any], reference: str | None, rollouts: Sequence[str]) -> dict[str, Any] | None:
    """A saturated upper-bound check (word, sentence or character count) tightened to the bound the reference
    meets and part of the rollouts miss: the larger of the reference's own count and the rollouts' median,
    when that is below the current bound and some rollout exceeds it; None when no such bound exists."""
    count = _COUNTED.get(str(check.get("type")))
    current = check.get("max")
    if count is None or current is None or not rollouts:
        return None
    counts = [count(r) for r in rollouts]
    floor = count(reference) if reference else 0
    bound = max(floor, math.floor(statistics.median(counts)))
    if bound >= current or not any(c > bound for c in counts):
        return None
    return {**check, "max": bound}
