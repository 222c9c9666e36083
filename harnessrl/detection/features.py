"""Surface features of a completion's text that a reward may track spuriously: list items, exclamation
marks, the most repeated content word, words. :data:`SURFACE_FEATURES` names them for
:class:`~harnessrl.detection.config.DetectorConfig`'s ``features``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from harnessrl.data.checks import count_words

__all__ = ["SURFACE_FEATURES", "bullet_lines", "exclamations", "repeated_word", "word_count"]


# ---------------------------------------------------------------------------------------------- features
_NUMBERED = re.compile(r"\d{1,3}[.)][ \t]+\S")
_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_STOP_WORDS = (
    "that this with from have will your they them their there then than what when which while were been "
    "into also more most some such only other about would could should these those each very just over "
    "because being does doing make made like"
)
_STOP = frozenset(_STOP_WORDS.split())


def bullet_lines(text: str) -> float:
    """Lines that start a list item: ``-``, ``*``, ``•`` or ``+`` (or ``1.``, ``2)``) then a blank, then text."""
    n = 0
    for line in text.split("\n"):
        s = line.lstrip(" \t")
        if not s:
            continue
        c = s[0]
        if c in "-*•+":
            if s[1:2] in (" ", "\t") and s[2:].strip():
                n += 1
        elif c.isdigit() and _NUMBERED.match(s):
            n += 1
    return float(n)


def exclamations(text: str) -> float:
    return float(text.count("!"))


def repeated_word(text: str) -> float:
    """Occurrences of the most frequent content word (≥ 4 letters, not a stop word): keyword stuffing."""
    best = 0
    for w, c in Counter(_WORD.findall(text.lower())).items():
        if c > best and w not in _STOP:
            best = c
    return float(best)


def word_count(text: str) -> float:
    return float(count_words(text))


SURFACE_FEATURES: dict[str, Callable[[str], float]] = {
    "bullets": bullet_lines,
    "exclamations": exclamations,
    "repeated_word": repeated_word,
    "words": word_count,
}
