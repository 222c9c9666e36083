"""Reading what a prompt states: its formal requirements as exact checks (:func:`stated_requirements`).

It serves both the induction of criteria (:mod:`harnessrl.interfaces.induction`) and the rubric audit
before training (a requirement the prompt states that the rubric does not check becomes a candidate criterion),
so a missed requirement and a wrong one both cost. It is a table of small rules (:data:`_RULES`), one per kind
of requirement, each a few patterns over the prompt; a requirement becomes a native check where one states it
exactly (what the project's rubrics use: no commas, a word limit, a letter case, required words, an opening or
a closing phrase, bullets, JSON) and an IFEval check (the benchmark's own verifier) where none does (double
quotation marks around the answer, repeat the request first, a title in <<>>, sections, placeholders, a language,
a word or letter used so often, ...); findings that contradict each other are dropped. It is measured on IFEval's
labelled prompts by ``benchmarks/requirement_reading.py`` (results in ``benchmarks/results/requirement-reading``).
Each finding is a check of the check library (:mod:`harnessrl.data.checks`), built where its rule reads it; what kind
of requirement it states is its ``requirement_key()``.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from harnessrl.data.checks import (
    BulletCount,
    Check,
    Contains,
    EndsWith,
    InstructionFollowing,
    JsonFormat,
    LetterCase,
    NotContains,
    SentenceCount,
    StartsWith,
    WordCount,
)
from harnessrl.interfaces.induced import Found

__all__ = ["stated_keys", "stated_requirements"]


# ------------------------------------------------------------------------------------ reading a prompt: pieces

_NUMBERS = {
    **{w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])},
    **{w: i + 10 for i, w in enumerate(["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen"])},
    **{w: i + 17 for i, w in enumerate(["seventeen", "eighteen", "nineteen"])},
    **{w: 10 * (i + 2) for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty"])},
    "ninety": 90,
    "hundred": 100,
    "single": 1,
    "once": 1,
    "twice": 2,
    "thrice": 3,
}
_N = (
    r"(\d{1,3}(?:,\d{3})+|\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
)  # a count: 1,000; 12; twelve
_ORDINALS = {
    w: i + 1
    for i, w in enumerate(["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"])
}
_NTH = r"(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|last|final|\d+-?(?:st|nd|rd|th))"
_Q = r"['\"‘“”]([^'\"‘’“”\n]{1,80})['\"’”]"  # a quoted phrase
_NEGATION = re.compile(r"\b(?:no|not|never|without|avoid\w*|refrain\w*|nor|cannot)\b|n't\b", re.IGNORECASE)
# "words in all capital letters" counts such words: it is not the case of every letter, nor a word count
_CAPS_WORDS = (
    r"(?!\s+(?:\w+\s+){0,2}?(?:in |with |be |are |written |that are |which are )*(?:all )?(?:capital|caps|upper))"
)


def _number(text: str) -> int:
    text = text.lower().replace(",", "")
    return int(text) if text.isdigit() else _NUMBERS[text]


def _nth(text: str, last: int) -> int:
    text = text.lower()
    if text in ("last", "final"):
        return last
    return _ORDINALS.get(text) or int(re.sub(r"\D", "", text) or 0) or _number(text)


def _stated(said: str, kind: Callable[..., Check], /, **fields: Any) -> list[Found]:
    """The finding ``(kind(**fields), said)``, or none when those fields build no valid check (a bound below zero, an
    argument IFEval's verifier refuses): a rule reads words, not a check's constraints."""
    try:
        return [(kind(**fields), said)]
    except ValidationError:
        return []


def _ifeval(said: str, instruction_id: str, /, **kwargs: Any) -> list[Found]:
    """The finding of IFEval's instruction ``instruction_id`` with its arguments (none when they do not build)."""
    return _stated(said, InstructionFollowing, instruction_id=instruction_id, kwargs=kwargs)


def _quoted(words: Sequence[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


@dataclass(frozen=True)
class _Prompt:
    """A prompt as the rules read it: its raw text, and (``text``) the text with every run of white space one
    space; the searches ignore case."""

    raw: str

    @property
    def text(self) -> str:
        return " ".join(self.raw.split())

    def find(self, pattern: str) -> re.Match[str] | None:
        return re.search(pattern, self.text, flags=re.IGNORECASE)

    def finditer(self, pattern: str) -> list[re.Match[str]]:
        return list(re.finditer(pattern, self.text, flags=re.IGNORECASE))

    def clause_before(self, pos: int, width: int = 60) -> str:
        """The text before ``pos`` back to the start of its clause (after a sentence end, a comma, a semicolon
        or a "but"), at most ``width`` characters."""
        return re.split(r"[.!?;,]\s|\bbut\b", self.text[max(0, pos - width) : pos])[-1]

    def sentence_after(self, pos: int, width: int = 70) -> str:
        """The text after ``pos`` up to the end of its sentence, at most ``width`` characters."""
        return re.split(r"(?<=[.!?])\s|;", self.text[pos : pos + width])[0]


# a list of words: quoted ('a', "b" and "c"; ['a', 'b']) or bare (trust, brand, and law)
_ITEM = r"(?:(?<!\w)['‘]([^'’\n]{1,40})['’](?!\w)|[\"“”]([^\"“”\n]{1,40})[\"”“])"
_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|nor)\s+|\s*&\s*)"
_QUOTED_LIST = re.compile(rf"\[?\s*{_ITEM}(?:{_SEP}{_ITEM})*\s*\]?")
_BARE_SEP = r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+"
_BARE_LIST = re.compile(rf"[A-Za-z][\w'-]*(?:(?:{_BARE_SEP})[A-Za-z][\w'-]*)*")
_NOT_A_WORD = re.compile(  # a word that ends a bare list ("the word die in your response")
    r"(?:a|an|the|any|all|and|or|in|on|at|to|of|for|from|with|by|be|is|are|was|should|must|can|could|will|would"
    r"|that|this|these|those|which|who|each|every|more|less|than|as|it|its|your|you|their)",
    re.IGNORECASE,
)


def _words_at(text: str, pos: int, bare: bool) -> tuple[list[str], int]:
    """The list of words that starts at ``pos`` in ``text``, and where it ends; bare (unquoted) words only when
    ``bare``, up to the first that is not a content word ("the word die in your response": ``die``)."""
    if m := _QUOTED_LIST.match(text, pos):
        found = [(a or b).strip() for a, b in re.findall(_ITEM, m[0])]
        return [w for w in found if w], m.end()
    if not bare or not (m := _BARE_LIST.match(text, pos)):
        return [], pos
    spans, start = [], m.start()
    for sep in re.finditer(_BARE_SEP, m[0]):
        spans.append((start, m.start() + sep.start()))
        start = m.start() + sep.end()
    spans.append((start, m.end()))
    kept = list(itertools.takewhile(lambda span: not _NOT_A_WORD.fullmatch(text[slice(*span)]), spans))
    return [text[slice(*span)] for span in kept], kept[-1][1] if kept else pos


# how often, in IFEval's terms ("at least" n, "less than" n): "at least 3 times", "at least twice", "10 or more
# times", "less than twice", "at most once" (less than 2), "once or less"
_TIMES = rf"(?:{_N} times?|(once|twice|thrice))"
_HOW_OFTEN = [
    (rf"\b(?:at least|no less than|no fewer than|not less than|not fewer than|a minimum of) {_TIMES}", "at least", 0),
    (rf"\b{_TIMES} or more\b", "at least", 0),
    (rf"\b{_N} or more times\b", "at least", 0),
    (rf"(?<!no )(?<!not )\bmore than {_TIMES}", "at least", 1),
    (rf"(?<!no )(?<!not )\b(?:less|fewer) than {_TIMES}", "less than", 0),
    (rf"\b(?:at most|no more than|not more than) {_TIMES}", "less than", 1),
    (rf"\b{_TIMES} or (?:less|fewer)\b", "less than", 1),
]


def _times(relation: str, n: int) -> str:
    return f"at least {n} times" if relation == "at least" else f"fewer than {n} times"


def _how_often(window: str) -> tuple[str, int] | None:
    """The first count of times ``window`` states, as (relation, n)."""
    found = []
    for pattern, relation, shift in _HOW_OFTEN:
        if m := re.search(pattern, window, flags=re.IGNORECASE):
            found.append((m.start(), relation, _number(next(g for g in m.groups() if g)) + shift))
    return min(found)[1:] if found else None


# ------------------------------------------------------------------------------------ reading a prompt: rules
# Each rule reads one kind of requirement and returns what it found, as (check, criterion text): a native check
# where one states the requirement exactly (the checks the project's rubrics use), an IFEval check (graded by the
# benchmark's own verifier) where none does.


def _no_commas(p: _Prompt) -> list[Found]:
    if p.find(
        r"(?:\b(?:no|not|without|never|avoid\w*|refrain from|cannot|nor)\b|n't\b)[^.!?;:]{0,40}?\bcommas?\b"
        r"|\bcommas?\b[^.!?;:]{0,20}?\b(?:not (?:allowed|permitted)|forbidden|prohibited|banned)\b"
    ):
        return _stated("Uses no commas at all", NotContains, phrases=[","])
    return []


_AT_MOST_WORDS = [  # (pattern, what to add to the number for an upper bound)
    (rf"\b(?:at most|no more than|not more than|no longer than|up to|within|(?:a )?maximum of|max) {_N} words\b", 0),
    (rf"\blimit\w*\b[^.!?]{{0,30}}?\bto {_N} words\b|\bword limit of {_N}\b|\b{_N}[ -]word limit\b", 0),
    (rf"\b(?:less than|fewer than|shorter than|under|below) (?:a total of )?{_N} words\b", -1),
    (rf"\b{_N} (?:words or (?:less|fewer)|or (?:less|fewer) words|words at most|words maximum)\b", 0),
    (rf"\bnot exceed {_N} words\b", 0),
]
_AT_LEAST_WORDS = [  # (pattern, what to add to the number for a lower bound)
    (rf"\b{_N}\+ ?words?\b", 0),
    (rf"\b(?:at least|no less than|no fewer than|a minimum of|minimum of) {_N} words\b", 0),
    (rf"(?<!no )(?<!not )\b(?:more|longer) than {_N} words\b", 1),
    (rf"\b{_N} (?:or more words|words or more)\b", 0),
    (rf"\bnumber of words\b[^.!?]{{0,60}}?\b{_N} or more\b(?! times)", 0),
]


def _word_counts(p: _Prompt) -> list[Found]:
    """An upper bound (native ``word_count`` max) and a lower one (IFEval ``number_words`` "at least"; a
    ``word_count`` with only a min would break readers of the stated limit that expect a max)."""
    out: list[Found] = []
    if m := p.find(rf"\bbetween {_N} and {_N} words\b"):
        low, high = sorted((_number(m[1]), _number(m[2])))
        out += _stated(f"Uses at most {high} words", WordCount, max=high)
        return [
            *out,
            *_ifeval(
                f"Uses at least {low} words", "length_constraints:number_words", num_words=low, relation="at least"
            ),
        ]
    for pattern, shift in _AT_MOST_WORDS:
        if m := p.find(pattern + _CAPS_WORDS):
            limit = _number(m[1]) + shift
            out += _stated(f"Uses at most {limit} words", WordCount, max=limit)
            break
    for pattern, shift in _AT_LEAST_WORDS:
        if m := p.find(pattern + _CAPS_WORDS):
            least = _number(m[1]) + shift
            out += _ifeval(
                f"Uses at least {least} words", "length_constraints:number_words", num_words=least, relation="at least"
            )
            break
    return out


def _sentence_counts(p: _Prompt) -> list[Found]:
    """Native ``sentence_count`` (IFEval's own sentence count needs NLTK data)."""
    if m := p.find(rf"\bexactly {_N} sentences?\b"):
        n = _number(m[1])
        return _stated(f"Writes exactly {n} sentence(s)", SentenceCount, min=n, max=n)
    if m := p.find(rf"\b(?:between )?{_N} (?:to|or|and) {_N} sentences\b"):
        low, high = sorted((_number(m[1]), _number(m[2])))
        return _stated(f"Writes {low} to {high} sentences", SentenceCount, min=low, max=high)
    if p.find(r"\bin (?:one|a single) sentence\b"):
        return _stated("Answers in one sentence", SentenceCount, max=1)
    out: list[Found] = []
    for pattern, shift in (
        (rf"\b(?:less than|fewer than|under) (?:a total of )?{_N} sentences\b", -1),
        (rf"\b(?:at most|no more than|not more than) {_N} sentences\b", 0),
    ):
        if m := p.find(pattern):
            n = _number(m[1]) + shift
            out += _stated(f"Writes at most {n} sentence(s)", SentenceCount, max=n)
            break
    if m := p.find(rf"\b(?:at least|no less than|no fewer than) {_N} sentences\b|\b{_N} or more sentences\b"):
        n = _number(m[1] or m[2])
        out += _stated(f"Writes at least {n} sentences", SentenceCount, min=n)
    return out


_CAPITALS = r"(?:capital|capitalized|uppercase|upper case|upper-case|block)"


def _letter_case(p: _Prompt) -> list[Found]:
    """Every letter lower case, or every letter upper case; neither when both read as stated."""

    def stated(pattern: str, negated: bool = False) -> bool:
        for m in p.finditer(pattern):
            before = p.clause_before(m.start(), 80)
            counts_words = re.search(r"\bwords?\b", before[-25:], flags=re.IGNORECASE) or re.match(
                r"\s*(?:words?|letters? words)\b", p.text[m.end() :], flags=re.IGNORECASE
            )  # "words in all capital letters": how many such words, not the case of every letter
            if not counts_words and bool(_NEGATION.search(before)) == negated:
                return True
        return False

    lower = stated(r"\blower[ -]?case(?:s|d)?\b|\bsmall letters\b") or stated(
        rf"\b{_CAPITALS} letters\b|\bcapitals\b|\bcapitali[sz]ation\b|\bcapitali[sz]e\b", negated=True
    )
    upper = stated(
        rf"\b(?:all|only)(?: \w+){{0,2}} {_CAPITALS} letters\b|\bin {_CAPITALS} letters\b|\ball caps\b"
        r"|\bin (?:all )?capitals\b|\bin caps\b|\bcapital letters only\b|\bupper ?case\b"
        r"|\b(?:all|every|entire|whole)\b[^.!?,;]{0,40}\bcapitali[sz]ed\b"
    ) or stated(r"\blower[ -]?case(?:s|d)? letters\b", negated=True)
    if lower == upper:
        return []
    if lower:
        return _stated("Writes every letter in lowercase", LetterCase, case="lower")
    return _stated("Writes every letter in capitals", LetterCase, case="upper")


def _opening(p: _Prompt) -> list[Found]:
    """Native ``starts_with``: "begin your answer with 'A volcano'", "reply in the form 'ANSWER: <city>'"."""
    if m := p.find(
        rf"\b(?:begin|start) (?:your (?:answer|reply|response) )?with {_Q}"
        rf"|\b(?:answer|reply|response) (?:should|must) (?:start|begin) with {_Q}"
    ):
        text = m[1] or m[2]
        return _stated(f"Begins with '{text}'", StartsWith, text=text)
    if (m := p.find(r"\bin the form ['\"‘“]([^'\"’”<]{1,40})<")) and m[1].strip():
        prefix = m[1].strip()
        return _stated(f"Begins with '{prefix}' in the form the prompt asks", StartsWith, text=prefix)
    return []


_ENDING = (
    r"(?:\b(?:end|finish|conclude)(?:s|ing)?\b[^.!?\"“”:]{0,50}?\bwith\b"
    r"|\b(?:very end|(?:very )?(?:last|final) (?:sentence|line|words?|phrase))\b[^.!?\"“”:]{0,60}?\b(?:be|read|like)\b)"
    r"((?:\s+(?:the|this)\b)?(?:\s+(?:exact|following)\b)?(?:\s+(?:phrase|question|sentence|words?)\b)?"
    r"(?:\s+of\b)?(?:\s+exactly\b)?(?:\s+like\b)?\s*(:)?)\s*"
)


def _ending(p: _Prompt) -> list[Found]:
    """Native ``ends_with``: "end your response with the exact phrase 'X'", "Finish with: X!"."""
    for m in p.finditer(_ENDING):
        rest = p.text[m.end() :]
        if q := re.match(_Q, rest):
            phrase = q[1].strip()
        elif (m[2] or re.search(r"exact", m[1], flags=re.IGNORECASE)) and (
            bare := re.match(r"([^\"“”]{1,80}?[.!?])(?=\.?(?:\s|$))", rest)
        ):
            phrase = bare[1].strip()  # unquoted, after a colon or "the exact phrase": up to its own stop
        else:
            continue
        if any(ch.isalnum() for ch in phrase):  # not "starting and ending with '*'"
            return _stated(f"Ends with '{phrase}'", EndsWith, text=phrase)
    return []


def _json(p: _Prompt) -> list[Found]:
    return _stated("Answers with valid JSON", JsonFormat) if p.find(r"\bjson\b") else []


def _bullets(p: _Prompt) -> list[Found]:
    """Native ``bullet_count``: "exactly 3 bullet points", "exactly 6 markdown bullet points"."""
    adjectives = r"(?:(?:markdown|very|short|distinct|separate|different)\s+)*"
    if m := p.find(rf"\b(?:exactly )?{_N} {adjectives}bullet(?:[ -]?points?|s)?\b"):
        n = _number(m[1])
        return _stated(f"Lists exactly {n} bullet points", BulletCount, min=n, max=n)
    return []


_NOUN = r"(?:key ?words?|words?|terms?|items?)"


def _word_frequencies(p: _Prompt) -> list[Found]:
    """A word used so often: "the word X should appear at least 3 times", "use the word war at least 8 times"
    (IFEval ``keywords:frequency``; at least once is native ``contains``, fewer than once ``not_contains``)."""
    out: list[Found] = []
    named = r"(?P<named>\b(?:the )?(?:key ?words?|words?|terms?|phrases?) )(?=[\"“'‘\w])"  # bare or quoted
    verb = r"\b(?:use|uses|using|mention|mentions|mentioning|include|includes|including|say|repeat)\s+(?=[\"“'‘])"
    subject = (
        r"(?<!letter )(?=[\"“'‘][^\"“”'’]{1,40}[\"”'’]\s+(?:should |must |needs? to |has to )?(?:appears?|occurs?))"
    )
    for m in p.finditer(f"{named}|{verb}|{subject}"):
        words, end = _words_at(p.text, m.end(), bare=m["named"] is not None)
        after = p.sentence_after(end, 50)
        how = _how_often(after)
        if len(words) != 1 or how is None or re.search(r"\bwords?\b", after[:12]):
            continue
        (word,), (relation, n) = words, how
        if (relation, n) == ("at least", 1):
            out += _stated(f"Uses '{word}'", Contains, phrases=[word])
        elif (relation, n) == ("less than", 1):
            out += _stated(f"Does not use '{word}'", NotContains, phrases=[word])
        else:
            out += _ifeval(
                f"Uses '{word}' {_times(relation, n)}",
                "keywords:frequency",
                keyword=word,
                frequency=n,
                relation=relation,
            )
    return out


_FORBIDDING = (
    r"(?:\b(?:do not|don't|dont|does not|doesn't|not|never|must not|should not|cannot|can't)\s+(?:\w+\s+){0,2}?"
    r"(?:include|including|use|using|say|saying|mention|mentioning|contain|containing|add|adding|write|writing|have)"
    r"|\b(?:avoid(?:ing)?|without|refrain from|exclud(?:e|ing)|omit(?:ting)?)"
    r"(?:\s+(?:using|mentioning|saying|including|the use of))?)\s+"
    rf"(?:any of\s+)?(?:(the|these|following)\s+)*(?:({_NOUN})\b\s*:?\s*)?"
)
_FORBIDDEN_AFTER = (
    r"\s*(?:should|must|can|does|do|is|are|may)?\s*(?:not|never)\b"
    r"|\s*(?:cannot|can't|doesn't|don't|shouldn't|mustn't)\b"
)


def _forbidden_words(p: _Prompt) -> list[Found]:
    """Words the response must not use: "do not include the keywords 'a' and 'b'", "the word X should not appear"
    (IFEval ``keywords:forbidden_words``, which matches whole words; native ``not_contains`` matches parts of words
    too)."""
    forbidden: list[str] = []
    for m in p.finditer(_FORBIDDING):
        if m[2] is None and re.match(rf"{_NOUN}\b", p.text[m.end() :], flags=re.IGNORECASE):
            continue  # "do not say any words before ...": no word named
        bare = bool(m[2]) and (bool(m[1]) or m[2].lower().startswith("key"))
        words, _ = _words_at(p.text, m.end(), bare=bare)
        forbidden += [w for w in words if w not in forbidden]
    for m in p.finditer(r"\b(?:(the)\s+)?((?:key ?)?words?|terms?)\s+"):
        words, end = _words_at(p.text, m.end(), bare=bool(m[1]))
        if words and re.match(_FORBIDDEN_AFTER, p.text[end:], flags=re.IGNORECASE):
            forbidden += [w for w in words if w not in forbidden]
    if not forbidden:
        return []
    return _ifeval(
        f"Does not use the word(s) {_quoted(forbidden)}", "keywords:forbidden_words", forbidden_words=forbidden
    )


_REQUIRING = (
    r"\b(?:include|includes|including|contain|contains|containing|use|uses|using|mention|mentions|mentioning)"
    rf"\s+(?:(the|these|following|some|all|of|both)\s+)*(?:({_NOUN})\b\s*:?\s*)?"
)
_REQUIRED_AFTER = r"\s*(?:should|must|need to|have to|has to)\s+(?:appear|be (?:included|used|present|mentioned))\b"


def _required_words(p: _Prompt) -> list[Found]:
    """Words the response must use: "include the keywords 'a' and 'b'", "use the words trust, brand and law"
    (native ``contains``: IFEval's ``keywords:existence`` searches each one as ``contains`` does)."""
    required: list[str] = []
    for m in p.finditer(_REQUIRING):
        if _NEGATION.search(p.clause_before(m.start(), 40)):
            continue
        if m[2] is None and re.match(rf"{_NOUN}\b", p.text[m.end() :], flags=re.IGNORECASE):
            continue  # "use words in all capital letters": no word named
        bare = bool(m[2]) and (bool(m[1]) or m[2].lower().startswith(("key", "item")))
        words, end = _words_at(p.text, m.end(), bare=bare)
        if not words or _how_often(p.sentence_after(end, 40)):
            continue  # a count: a frequency (_word_frequencies)
        if m[2] is None and not re.match(r"\s*(?:and|or|,|in\b|into\b|[.!?]|$)", p.text[end:]):
            continue  # "use 'X' to ...": a quoted phrase put to some use, not a word to include
        required += [w for w in words if w not in required and any(c.isalnum() for c in w)]
    for m in p.finditer(r"\b(?:(the)\s+)?(?:key ?words?|words?|terms?)\s+"):  # "the words X and Y must appear"
        words, end = _words_at(p.text, m.end(), bare=bool(m[1]))
        stated = words and re.match(_REQUIRED_AFTER, p.text[end:], flags=re.IGNORECASE)
        if stated and not _how_often(p.sentence_after(end, 50)):
            required += [w for w in words if w not in required]
    return _stated(f"Uses {_quoted(required)}", Contains, phrases=required) if required else []


_LETTER = r"\bletter\s+['\"‘“]?([A-Za-z])['\"’”]?(?!\w)"


def _letters(p: _Prompt) -> list[Found]:
    """A letter used so often: "the letter q at least 5 times", "do not include the letter 'c'" (IFEval
    ``keywords:letter_frequency``)."""
    out: list[Found] = []
    counts: dict[str, tuple[str, int]] = {}
    for m in p.finditer(_LETTER):
        if (how := _how_often(p.sentence_after(m.end(), 60))) is not None:
            counts.setdefault(m[1].lower(), how)
    for m in p.finditer(
        r"\b(?:do not|don't|not|never|without|avoid\w*|refrain from)\s+(?:\w+\s+){0,2}?(?:the\s+)?" + _LETTER
    ):
        counts.setdefault(m[1].lower(), ("less than", 1))
    for letter, (relation, n) in counts.items():
        never = (relation, n) == ("less than", 1)
        said = f"Never uses the letter '{letter}'" if never else f"Uses the letter '{letter}' {_times(relation, n)}"
        out += _ifeval(said, "keywords:letter_frequency", letter=letter, let_frequency=n, let_relation=relation)
    return out


def _quotation(p: _Prompt) -> list[Found]:
    """The whole response in double quotation marks (IFEval ``startend:quotation``)."""
    for m in p.finditer(r"\b(double )?(?:quotation marks?|quotes)\b"):
        sentence = p.clause_before(m.start(), 120) + p.sentence_after(m.start(), 80)
        wrapped = re.search(r"\b(?:wrap\w*|put|enclos\w*|surround\w*|around)\b", sentence, flags=re.IGNORECASE)
        if wrapped and (m[1] or re.search(r"\b(?:entire|whole|full)\b", sentence, flags=re.IGNORECASE)):
            return _ifeval("Wraps the whole response in double quotation marks", "startend:quotation")
    return []


def _title(p: _Prompt) -> list[Found]:
    if p.find(r"double angular brackets|<<[^<>]{1,80}>>"):
        return _ifeval("Gives a title in double angular brackets, <<like this>>", "detectable_format:title")
    return []


def _two_responses(p: _Prompt) -> list[Found]:
    if p.find(r"(?<!\*)\*{6,7}(?!\*)|\b(?:6|six) asterisks?\b|\btwo different responses\b"):
        return _ifeval("Gives two different responses separated by ******", "combination:two_responses")
    return []


_HIGHLIGHT = r"\b(?:highlight\w*|italic\w*|bold\w*|emphasi[sz]\w*)\b"
_SECTION_MARK = (
    r"\b(?:mark\w*|start\w*|begin\w*|begun|label\w*|not\w* as|nam\w*|call\w*|titled|denot\w*|indicat\w*|with)\b"
    r"[^.!?]{0,60}?['\"“]?\b((?-i:[A-Z][A-Za-z]*)) (?-i:X|1)\b(?![\w-])"  # Section X, SECTION 1
)
_NTH_FIRST_WORD = (
    rf"\b(?:the )?(?:{_NTH} paragraph|paragraph {_N})\s+(?:must |should |has to |needs to |will |is to )?"
    rf"(?:start|begin)s?\s+with\s+(?:the\s+)?(?:word\s+)?(?:{_Q}|([\w'-]+))"
    rf"|\b(?:start|begin) (?:the )?(?:{_NTH} paragraph|paragraph {_N}) with (?:the\s+)?(?:word\s+)?(?:{_Q}|([\w'-]+))"
)


def _counts(p: _Prompt, nouns: str) -> list[re.Match[str]]:
    """Where the prompt counts the nouns ("exactly 4 sections", "a 2 paragraph critique"), not highlighted ones."""
    return [
        m
        for m in p.finditer(rf"\b(?:exactly |at least )?{_N}[ -](?:\w+[ -])?(?:{nouns})\b")
        if not re.search(_HIGHLIGHT, p.clause_before(m.start(), 40), flags=re.IGNORECASE)
    ]


def _sections(p: _Prompt) -> list[Found]:
    """Sections marked "Section X" (IFEval ``multiple_sections``), the first word of the n-th of N paragraphs
    (IFEval ``nth_paragraph_first_word``), paragraphs separated by *** (IFEval ``number_paragraphs``)."""
    if m := p.find(_SECTION_MARK):
        spliter = m[1]
        if not (counted := _counts(p, rf"{re.escape(spliter)}s?|sections?|parts?")):
            return []
        n = _number(counted[0][1])
        return _ifeval(
            f"Has {n} sections, each marked '{spliter} X'",
            "detectable_format:multiple_sections",
            section_spliter=spliter,
            num_sections=n,
        )
    paragraphs = _counts(p, "paragraphs?")
    if (nth := p.find(_NTH_FIRST_WORD)) and paragraphs:
        n = _number(paragraphs[0][1])
        index = _nth(nth[1] or nth[2] or nth[5] or nth[6], last=n)
        word = (nth[3] or nth[4] or nth[7] or nth[8]).strip()
        return _ifeval(
            f"Writes {n} paragraphs, paragraph {index} beginning with '{word}'",
            "length_constraints:nth_paragraph_first_word",
            num_paragraphs=n,
            nth_paragraph=index,
            first_word=word,
        )
    blocks = _counts(p, "paragraphs?|sections?")
    if blocks and p.find(r"(?<!\*)\*{3}(?!\*)|\* \* \*|markdown divider|\b(?:3|three) asterisks?\b"):
        n = _number(blocks[0][1])
        return _ifeval(
            f"Writes {n} paragraphs separated by ***", "length_constraints:number_paragraphs", num_paragraphs=n
        )
    return []


def _placeholders(p: _Prompt) -> list[Found]:
    if m := p.find(rf"\b{_N} (?:\w+ )?placeholders?\b"):
        n = _number(m[1])
        return _ifeval(
            f"Has at least {n} placeholder(s) in square brackets, like [name]",
            "detectable_content:number_placeholders",
            num_placeholders=n,
        )
    return []


def _highlights(p: _Prompt) -> list[Found]:
    m = p.find(rf"{_HIGHLIGHT}[^.!?]{{0,40}}?\b(?:at least )?{_N}\b(?!\s*(?:letters?|paragraphs?)\b)")
    m = m or p.find(rf"\b(?:at least )?{_N} (?:\w+ ){{0,2}}?(?:italic|highlighted|italicized|bold)")
    if m:
        n = _number(m[1])
        return _ifeval(
            f"Highlights at least {n} section(s) with markdown, *like this*",
            "detectable_format:number_highlighted_sections",
            num_highlights=n,
        )
    return []


_LANGUAGES = {
    "Arabic": "ar",
    "Bengali": "bn",
    "Bulgarian": "bg",
    "English": "en",
    "Farsi": "fa",
    "Finnish": "fi",
    "French": "fr",
    "German": "de",
    "Gujarati": "gu",
    "Hebrew": "he",
    "Hindi": "hi",
    "Italian": "it",
    "Japanese": "ja",
    "Kannada": "kn",
    "Korean": "ko",
    "Malayalam": "ml",
    "Marathi": "mr",
    "Nepali": "ne",
    "Persian": "fa",
    "Polish": "pl",
    "Portuguese": "pt",
    "Punjabi": "pa",
    "Russian": "ru",
    "Spanish": "es",
    "Swahili": "sw",
    "Tamil": "ta",
    "Telugu": "te",
    "Thai": "th",
    "Ukrainian": "uk",
    "Urdu": "ur",
    "Vietnamese": "vi",
}
"""Languages by name, with the code IFEval's ``language:response_language`` (langdetect) knows each by."""


def _language(p: _Prompt) -> list[Found]:
    """The only language of the response (IFEval ``response_language``): "entirely in Russian", "in Hindi, no
    other language is allowed"; English only with "no other language" (else it goes with a letter case)."""
    for m in re.finditer(rf"\b({'|'.join(_LANGUAGES)})\b", p.text):
        name = m[1]
        sentence = p.clause_before(m.start(), 150) + p.sentence_after(m.start(), 150)
        only = re.search(r"no other language|other languages? (?:is|are) not allowed", sentence, flags=re.IGNORECASE)
        if name != "English" and not only:
            only = re.search(
                rf"\b(?:only|entirely|solely|exclusively|completely|fully)\b[^.!?]{{0,30}}\b{name}\b"
                rf"|\b(?:respon\w*|answer\w*|repl\w*|write|written|output)\b[^.!?]{{0,40}}\bin (?:the )?{name}\b",
                sentence,
                flags=re.IGNORECASE,
            )
        if only:
            return _ifeval(f"Answers only in {name}", "language:response_language", language=_LANGUAGES[name])
    return []


def _constrained(p: _Prompt) -> list[Found]:
    if len({m[1].lower() for m in p.finditer(r"\bmy answer is (yes|no|maybe)\b")}) >= 2:
        return _ifeval(
            "Answers with one of the given options ('My answer is yes.', ...)", "detectable_format:constrained_response"
        )
    return []


def _postscript(p: _Prompt) -> list[Found]:
    """A postscript starting with P.S. or P.P.S (IFEval ``detectable_content:postscript``)."""
    for m in p.finditer(r"\bP\.\s?(P\.\s?)?S\b"):
        if re.search(
            r"\b(?:post[ -]?script|add\w*|include\w*|append\w*|start\w*|begin\w*|end\w*|finish\w*|note)\b",
            p.clause_before(m.start(), 60),
            flags=re.IGNORECASE,
        ):
            marker = "P.P.S" if m[1] else "P.S."  # the two markers IFEval's verifier knows by name
            return _ifeval(
                f"Ends with a postscript starting with {marker}",
                "detectable_content:postscript",
                postscript_marker=marker,
            )
    return []


_REPEAT = re.compile(
    r"\brep(?:e|l)e?at(?:ing)?\b(?=[^.!?]*\b(?:request|prompt|sentence|text|line|question|instruction|it|itself)\b)",
    re.IGNORECASE,
)
_ABOUT_REPEATING = re.compile(
    r"\brep(?:e|l)e?at|\brequest\b|\bsay (?:any|anything)|\bword (?:for|by) word|\bwithout (?:any )?change"
    r"|\b(?:do not|don't) change|\bas it is\b|\bin this task\b",
    re.IGNORECASE,
)


def _sentence_spans(raw: str) -> list[tuple[int, int]]:
    """Where each sentence of ``raw`` starts and ends: it ends after . ! or ? (and a closing quote) before white
    space, or at a line break."""
    spans, start = [], 0
    for m in re.finditer(r"(?<=[.!?])[\"”']?(?=\s)|\n", raw):
        if raw[start : m.end()].strip():
            spans.append((start, m.end()))
        start = m.end()
    if raw[start:].strip():
        spans.append((start, len(raw)))
    return spans


def _repeat(p: _Prompt) -> list[Found]:
    """ "First repeat the request word for word, then answer" (IFEval ``repeat_prompt``): the request is the text
    before that instruction or, when the prompt opens with it, the text after the sentences about repeating."""
    raw, spans = p.raw, _sentence_spans(p.raw)
    at = next((i for i, (s, e) in enumerate(spans) if _REPEAT.search(raw[s:e])), None)
    if at is None:
        return []
    start, end = spans[at]
    colon = re.compile(r":\s").search(raw, _REPEAT.search(raw, start, end).end(), end)
    if at > 0:
        request = raw[:start]  # "<request> First repeat the request word for word ..."
    elif colon:
        request = raw[colon.end() :]  # "Repeat this request, then answer it: <request>"
    else:  # "First repeat the request below ... Do not say anything before. <request>"
        rest = next((i for i, span in enumerate(spans) if not _ABOUT_REPEATING.search(raw[slice(*span)])), None)
        request = raw[spans[rest][0] :] if rest is not None else ""
    request = request.strip()
    if not request:
        return []
    return _ifeval(
        "First repeats the request word for word, then answers", "combination:repeat_prompt", prompt_to_repeat=request
    )


_RULES: tuple[Callable[[_Prompt], list[Found]], ...] = (
    _no_commas,
    _word_counts,
    _sentence_counts,
    _letter_case,
    _opening,
    _ending,
    _bullets,
    _word_frequencies,
    _forbidden_words,
    _required_words,
    _letters,
    _json,
    _quotation,
    _title,
    _two_responses,
    _sections,
    _placeholders,
    _highlights,
    _language,
    _constrained,
    _postscript,
    _repeat,
)
"""The rules, in the order their findings are listed."""


def _forbids(check: Check) -> set[str]:
    if isinstance(check, NotContains):
        return {w.casefold() for w in check.phrases}
    if isinstance(check, InstructionFollowing) and check.instruction_id == "keywords:forbidden_words":
        return {str(w).casefold() for w in check.kwargs["forbidden_words"]}
    return set()


def _consistent(found: list[Found]) -> list[Found]:
    """The findings without repeats and without contradictions: a word both required and forbidden is dropped from
    the required ones; a lower and an upper word bound no answer meets are both dropped."""
    banned = set().union(*(_forbids(c) for c, _ in found))
    out: list[Found] = []
    for check, text in found:
        if isinstance(check, Contains) and any(w.casefold() in banned for w in check.phrases):
            kept = [w for w in check.phrases if w.casefold() not in banned]
            if not kept:
                continue
            check, text = check.model_copy(update={"phrases": kept}), f"Uses {_quoted(kept)}"
        if all(check != c for c, _ in out):
            out.append((check, text))
    most = next((c.max for c, _ in out if isinstance(c, WordCount) and c.requirement_key() == "word_count:max"), None)
    least = next(
        (
            c.kwargs["num_words"]
            for c, _ in out
            if isinstance(c, InstructionFollowing) and c.requirement_key() == "word_count:min"
        ),
        None,
    )
    if most is not None and least is not None and least > most:
        out = [(c, t) for c, t in out if not c.requirement_key().startswith("word_count:")]
    return out


def stated_requirements(prompt: str) -> list[Found]:
    """The formal requirements a prompt states, as (check, criterion text): each rule of :data:`_RULES` reads one
    kind ("without using any commas", "in at most 20 words", "include the keywords 'a' and 'b'", "wrap your
    entire response with double quotation marks", "first repeat the request word for word", ...). A check is
    native where one states the requirement exactly, an IFEval check otherwise; no two contradict each other,
    and every one builds."""
    reading = _Prompt(prompt)
    return _consistent([item for rule in _RULES for item in rule(reading)])


@functools.lru_cache(maxsize=4096)
def stated_keys(prompt: str) -> frozenset[str]:
    """The kinds of requirement a prompt states (each :func:`stated_requirements` check's
    ``requirement_key()``): what a check must match to be one the prompt asks for. Cached: the audit, the rubric, the
    reference witness and the analysis ask it of the same prompts."""
    return frozenset(check.requirement_key() for check, _ in stated_requirements(prompt))
