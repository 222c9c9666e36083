"""Criteria induced from a task's reference answer: the content it states and the bounds it meets.

A lax rubric (every rollout passes it) teaches nothing; the reference answer shows what a good answer does that the
rubric never asks for. :func:`reference_terms` gives the reference's key terms as ``contains`` checks (of their
stems, :func:`term_stem`), those that split the rollouts most evenly first; :func:`_reference_bounds` the length
bounds it meets (for a reward that pays for length); :func:`tightened_bound` gives a saturated bound check the
bound the reference meets and part of the rollouts miss.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from harnessrl.data.checks import (
    CharCount,
    Check,
    Contains,
    SentenceCount,
    WordCount,
    count_words,
    split_sentences,
    words,
)
from harnessrl.interfaces.induced import Found, InducedCheck

__all__ = ["UpperBound", "reference_terms", "term_stem", "tightened_bound"]


def _reference_bounds(reference: str) -> list[Found]:
    """Length bounds the reference answer meets: its words (with a margin) and its sentences."""
    words = count_words(reference)
    sentences = len(split_sentences(reference))
    out: list[Found] = []
    if words:
        limit = math.ceil(1.5 * words)
        out.append((WordCount(max=limit), f"Uses at most {limit} words, as concise as the reference"))
    if sentences:
        out.append((SentenceCount(max=sentences), f"Uses at most {sentences} sentence(s), as the reference"))
    return out


_FUNCTION_TEXT = """a an the and or but nor of to in on at for with by as from into onto over under about around through
than then so such that this these those there here it its they them their we our you your he she his her him is are
was were be been being am has have had do does did can could may might must shall should will would not no yes very
more most much many some any each every all both one two also only just even still well like what which who whom
whose when where why how because while if once make makes made making give gives gave giving help helps helped lets
let use uses used using take takes took keep keeps kept get gets got put puts carry carries things thing something
way ways part parts kind kinds lot lots called often usually other"""
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
"""Function words and generic verbs: never a key term of a reference answer."""
_SUFFIXES = ("ing", "es", "ed", "ly", "s", "e")


def term_stem(word: str) -> str:
    """A word's stem as a ``contains`` check matches it: lower case, one common suffix off when at least four letters
    remain ("pollinates" -> "pollinat", which also finds "pollinated" and "pollination")."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    return w


def reference_terms(
    prompt: str, reference: str, rollouts: Sequence[str] = (), existing: Sequence[Check] = (), n: int = 3
) -> list[InducedCheck]:
    """The content the reference answer states that a lax rubric never asks for, as exact checks (docs/design.md §4,
    "A lax rubric is tightened before a task is retired"): each content word of the reference (four letters or more,
    not a function or a generic word, not in the prompt: the prompt names its subject, a rollout repeats it) as a
    ``contains`` check of its stem, at most ``n``, none a phrase an ``existing`` check already asks for. With
    ``rollouts``, a term every rollout states already is left out, and those that split the rollouts most evenly come
    first (a term no rollout states splits nothing: last); without (another task of the repair's group, never sampled
    yet), the longest words first."""
    asked = {p.lower() for c in existing if isinstance(c, Contains) for p in c.phrases}
    in_prompt = {term_stem(w) for w in words(prompt)}
    stems: dict[str, str] = {}
    for w in words(reference):
        stem = term_stem(w)
        if len(w) < 4 or w.lower() in _FUNCTION_WORDS or not w.isalpha() or stem in in_prompt:
            continue
        if stem in asked or any(stem in a or a in stem for a in asked):
            continue
        stems.setdefault(stem, w.lower())
    found: list[tuple[InducedCheck, str]] = []  # each with its stem
    for stem, word in stems.items():
        passes = sum(stem in r.lower() for r in rollouts)
        if rollouts and passes == len(rollouts):
            continue
        text = f"Mentions '{word}' (a key term of the reference answer)"
        found.append((InducedCheck(Contains(phrases=[stem]), text, "reference", passes, len(rollouts)), stem))
    found.sort(key=lambda f: (-f[0].balance, -len(f[1])))
    return [c for c, _ in found[:n]]


UpperBound = WordCount | SentenceCount | CharCount
"""A check whose ``max`` :func:`tightened_bound` may tighten: a count of words, sentences or characters."""

_COUNTED: dict[type[UpperBound], Callable[[str], int]] = {
    WordCount: count_words,
    SentenceCount: lambda t: len(split_sentences(t)),
    CharCount: len,
}


def tightened_bound(check: Check, reference: str | None, rollouts: Sequence[str]) -> UpperBound | None:
    """A saturated upper-bound check (word, sentence or character count) tightened to the bound the reference
    meets and part of the rollouts miss: the larger of the reference's own count and the rollouts' median,
    when that is below the current bound and some rollout exceeds it; None when no such bound exists."""
    if not isinstance(check, UpperBound) or check.max is None or not rollouts:
        return None
    count = _COUNTED[type(check)]
    counts = [count(r) for r in rollouts]
    floor = count(reference) if reference else 0
    bound = max(floor, math.floor(statistics.median(counts)))
    if bound >= check.max or not any(c > bound for c in counts):
        return None
    return check.model_validate({**check.model_dump(mode="json", exclude_none=True), "max": bound})
