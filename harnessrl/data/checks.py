"""Programmatic criteria: typed checks evaluated in code, whatever the judge backend.

Everything formal about a response (length, required or forbidden phrases, a pattern, a format)
is checked here rather than asked of a judge: the answer is exact, free and never missing. Each
check is a pydantic model tagged by ``type``; a criterion carries one in its ``check`` field, e.g.
``{"type": "word_count", "max": 80}``. ``evaluate`` returns 1.0 when the response passes and
0.0 when it does not; ``requirement_key`` names the kind of requirement the check states (the same for a
native check and the IFEval check that state one requirement). A check travels through the harness as its
model; :func:`parse_check` is the one place a check written as JSON (a task file, an event) is validated.

The ``ifeval`` check is the exception to "checked here": it names an IFEval or IFBench instruction and
grades with that benchmark's own verifier (:mod:`harnessrl.data.ifeval`), so a task from those benchmarks
is graded as the benchmark grades it.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from harnessrl.data import ifeval

__all__ = [
    "CHECK_TYPES",
    "BulletCount",
    "CharCount",
    "Check",
    "Contains",
    "EndsWith",
    "InstructionFollowing",
    "JsonFormat",
    "LetterCase",
    "MarkdownFormat",
    "NotContains",
    "ParagraphCount",
    "Regex",
    "SentenceCount",
    "StartsWith",
    "WordCount",
    "check_passes",
    "count_bullets",
    "count_words",
    "parse_check",
    "read_check",
    "split_sentences",
    "words",
]

_WORD = re.compile(r"\b[\w'’-]+\b", re.UNICODE)
# the space after . ! ? (and any closing quotes or brackets, which stay with their sentence)
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]])|(?<=[.!?][\"')\]]{2}))\s+(?=[\"'(\[]?[A-Z0-9])")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+\S", re.MULTILINE)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.MULTILINE)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n```\s*$", re.DOTALL)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (and lines: a bullet or a heading is its own sentence)."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def words(text: str) -> list[str]:
    """The words of ``text`` as every part of HarnessRL counts them (the ``word_count`` check, the
    rollouts' ``length_words``, the detectors' ``words`` feature, the rule-based evolver's limits):
    runs of letters, digits, apostrophes and hyphens."""
    return _WORD.findall(text)


def count_bullets(text: str) -> int:
    """Bullet or numbered-list lines (what a ``bullet_count`` check counts)."""
    return len(_BULLET.findall(text))


def count_words(text: str) -> int:
    """How many :func:`words` ``text`` has."""
    return len(words(text))


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]


class _CheckBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    if TYPE_CHECKING:  # each check declares its own tag (a field here would come first in every dump)
        type: str

    def model_post_init(self, context: Any, /) -> None:
        # the tag is written with every check, also one built in code (``WordCount(max=80)``): a rubric edit's
        # criteria are dumped with the fields set, and a check without its ``type`` would not load back
        self.__pydantic_fields_set__.add("type")

    def evaluate(self, response: str) -> float:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def passes(self, response: str) -> bool:
        """Whether ``response`` passes the check."""
        return self.evaluate(response) >= 1

    def requirement_key(self) -> str:
        """What the check requires, without the task's own values: two checks with one key ask the same *kind* of
        thing (no commas; at most N words; begins with a phrase), each with its own numbers or phrases. It is the
        signature a stated-requirement repair covers (every task whose prompt states a requirement of the key) and
        how a requirement is found already checked by a rubric. This one: the check's type (a check of one kind of
        requirement whatever its values)."""
        return self.type

    def written(self) -> dict[str, Any]:
        """The check as a rubric's ``check`` object writes it: its ``type`` first, then the fields it was given."""
        fields = self.model_dump(mode="json", exclude_unset=True)
        return {"type": fields.pop("type"), **fields}


class _Range(_CheckBase):
    """A count that must lie in [min, max]; either bound may be omitted, not both."""

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self):
        if self.min is None and self.max is None:
            raise ValueError(f"check {self.type!r} needs 'min', 'max' or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"check {self.type!r} has min {self.min} > max {self.max}")
        return self

    def _count(self, response: str) -> int:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def evaluate(self, response: str) -> float:
        n = self._count(response)
        ok = (self.min is None or n >= self.min) and (self.max is None or n <= self.max)
        return float(ok)

    def requirement_key(self) -> str:
        """The type and the bounds it sets, without their values: ``word_count:max``, ``sentence_count:min,max``."""
        bounds = [name for name, bound in (("min", self.min), ("max", self.max)) if bound is not None]
        return f"{self.type}:{','.join(bounds)}"


class WordCount(_Range):
    """Number of words in [min, max]."""

    type: Literal["word_count"] = "word_count"

    def _count(self, response: str) -> int:
        return count_words(response)


class SentenceCount(_Range):
    """Number of sentences in [min, max]."""

    type: Literal["sentence_count"] = "sentence_count"

    def _count(self, response: str) -> int:
        return len(split_sentences(response))


class ParagraphCount(_Range):
    """Number of blank-line separated paragraphs in [min, max]."""

    type: Literal["paragraph_count"] = "paragraph_count"

    def _count(self, response: str) -> int:
        return len(_paragraphs(response))


class CharCount(_Range):
    """Number of characters (stripped) in [min, max]."""

    type: Literal["char_count"] = "char_count"

    def _count(self, response: str) -> int:
        return len(response.strip())


class BulletCount(_Range):
    """Number of bullet or numbered-list lines in [min, max]."""

    type: Literal["bullet_count"] = "bullet_count"

    def _count(self, response: str) -> int:
        return count_bullets(response)


class _Phrases(_CheckBase):
    phrases: list[str] = Field(min_length=1)
    case_sensitive: bool = False

    @field_validator("phrases")
    @classmethod
    def _no_blank(cls, v: list[str]) -> list[str]:
        if any(not p.strip() for p in v):
            raise ValueError("phrases must not be blank")
        return v

    def _found(self, response: str) -> list[bool]:
        if self.case_sensitive:
            return [p in response for p in self.phrases]
        low = response.casefold()
        return [p.casefold() in low for p in self.phrases]

    def requirement_key(self) -> str:
        """Punctuation the check requires or forbids is part of the key (no commas is not no semicolons:
        ``not_contains:[',']``); words are not (each task forbids its own: ``not_contains:words``)."""
        if not any(ch.isalnum() for p in self.phrases for ch in p):
            return f"{self.type}:{sorted(self.phrases)}"
        return f"{self.type}:words"


class Contains(_Phrases):
    """The response contains all (``mode="all"``) or at least one (``mode="any"``) of the phrases."""

    type: Literal["contains"] = "contains"
    mode: Literal["all", "any"] = "all"

    def evaluate(self, response: str) -> float:
        found = self._found(response)
        return float(all(found) if self.mode == "all" else any(found))


class NotContains(_Phrases):
    """The response contains none of the phrases."""

    type: Literal["not_contains"] = "not_contains"

    def evaluate(self, response: str) -> float:
        return float(not any(self._found(response)))


class Regex(_CheckBase):
    """The pattern is found in the response (``must_match=True``) or is not (``False``)."""

    type: Literal["regex"] = "regex"
    pattern: str
    must_match: bool = True
    ignore_case: bool = False
    multiline: bool = True

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"pattern {v!r} is not a valid regular expression: {e}") from None
        return v

    def evaluate(self, response: str) -> float:
        flags = (re.IGNORECASE if self.ignore_case else 0) | (re.MULTILINE if self.multiline else 0)
        found = re.search(self.pattern, response, flags) is not None
        return float(found == self.must_match)


class JsonFormat(_CheckBase):
    """The response is one JSON value (a fenced ```json block is accepted) with the given keys."""

    type: Literal["json"] = "json"
    required_keys: list[str] = Field(default_factory=list)

    def evaluate(self, response: str) -> float:
        text = response.strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        try:
            value = json.loads(text)
        except ValueError:
            return 0.0
        if self.required_keys:
            return float(isinstance(value, dict) and all(k in value for k in self.required_keys))
        return 1.0


class MarkdownFormat(_CheckBase):
    """Markdown structure: at least so many headings and bullets, optionally a table or bold text."""

    type: Literal["markdown"] = "markdown"
    min_headings: int = Field(default=0, ge=0)
    min_bullets: int = Field(default=0, ge=0)
    table: bool = False
    bold: bool = False

    @model_validator(mode="after")
    def _asks_something(self):
        if not (self.min_headings or self.min_bullets or self.table or self.bold):
            raise ValueError("check 'markdown' asks for nothing: set min_headings, min_bullets, table or bold")
        return self

    def evaluate(self, response: str) -> float:
        ok = (
            len(_HEADING.findall(response)) >= self.min_headings
            and count_bullets(response) >= self.min_bullets
            and (not self.table or len(_TABLE_ROW.findall(response)) >= 2)
            and (not self.bold or _BOLD.search(response) is not None)
        )
        return float(ok)


class StartsWith(_CheckBase):
    """The response (stripped) starts with the text."""

    type: Literal["starts_with"] = "starts_with"
    text: str = Field(min_length=1)
    case_sensitive: bool = False

    def evaluate(self, response: str) -> float:
        r, t = response.strip(), self.text
        if not self.case_sensitive:
            r, t = r.casefold(), t.casefold()
        return float(r.startswith(t))


class EndsWith(_CheckBase):
    """The response (stripped) ends with the text."""

    type: Literal["ends_with"] = "ends_with"
    text: str = Field(min_length=1)
    case_sensitive: bool = False

    def evaluate(self, response: str) -> float:
        r, t = response.strip(), self.text
        if not self.case_sensitive:
            r, t = r.casefold(), t.casefold()
        return float(r.endswith(t))


class LetterCase(_CheckBase):
    """Every letter of the response is lower case (``case="lower"``) or upper case (``"upper"``)."""

    type: Literal["letter_case"] = "letter_case"
    case: Literal["lower", "upper"]

    def evaluate(self, response: str) -> float:
        letters = [c for c in response if c.isalpha()]
        if not letters:
            return 0.0
        return float(all(c.islower() for c in letters) if self.case == "lower" else all(c.isupper() for c in letters))

    def requirement_key(self) -> str:
        return f"letter_case:{self.case}"


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


class InstructionFollowing(_CheckBase):
    """An IFEval or IFBench instruction, graded by that benchmark's own verifier (package ``if-verifiable``):
    ``{"type": "ifeval", "instruction_id": "length_constraints:number_words", "kwargs": {"num_words": 100,
    "relation": "less than"}}``. ``kwargs`` are the verifier's arguments, as in the benchmark's data (null
    values are dropped, as the benchmarks do); ``loose`` grades with IFEval's loose test instead of its
    strict one. The id, every argument, and any NLTK data the verifier needs are checked when the task loads.
    """

    type: Literal["ifeval"] = "ifeval"
    instruction_id: str = Field(min_length=1)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    loose: bool = False

    @model_validator(mode="after")
    def _verifier_builds(self):
        typed = ifeval.check_instruction(self.instruction_id, self.kwargs)
        if typed != self.kwargs:
            object.__setattr__(self, "kwargs", typed)  # numbers given as text, null arguments dropped
        return self

    def evaluate(self, response: str) -> float:
        return float(ifeval.follows(ifeval.verifier(self.instruction_id, self.kwargs), response, self.loose))

    def requirement_key(self) -> str:
        """The key of the native check that states the same requirement, where one does (a word bound "less than"
        is ``word_count:max``; a keyword required at least once ``contains:words``, less than once
        ``not_contains:words``), else ``ifeval:<instruction id>``."""
        iid, kwargs = self.instruction_id, self.kwargs
        if iid in _IFEVAL_BOUND:
            native, relation = _IFEVAL_BOUND[iid]
            less = str(kwargs.get(relation, "")).startswith("less")
            return f"{native}:max" if less else f"{native}:min"
        if iid == "keywords:frequency" and str(kwargs.get("frequency")) in ("1", "1.0"):
            return "not_contains:words" if str(kwargs.get("relation", "")).startswith("less") else "contains:words"
        return _IFEVAL_NATIVE.get(iid, f"ifeval:{iid}")


Check = Annotated[
    WordCount
    | SentenceCount
    | ParagraphCount
    | CharCount
    | BulletCount
    | Contains
    | NotContains
    | Regex
    | JsonFormat
    | MarkdownFormat
    | StartsWith
    | EndsWith
    | LetterCase
    | InstructionFollowing,
    Field(discriminator="type"),
]
"""Any programmatic check, told apart by its ``type`` field."""

CHECK_TYPES: dict[str, type[_CheckBase]] = {
    cls.model_fields["type"].default: cls for cls in typing.get_args(typing.get_args(Check)[0])
}
"""The valid ``type`` names, each with its model, read from :data:`Check` (a check kind is named once, there)."""


_CHECK_ADAPTER: TypeAdapter[Check] = TypeAdapter(Check)
"""The one validator of a check written as JSON: every check read from a file or an event goes through it."""


def parse_check(check: Mapping[str, Any]) -> Check:
    """The check written as a rubric's ``check`` object (a task file, an event), validated (raises ValueError,
    pydantic's ValidationError, when the object is no valid check)."""
    return _CHECK_ADAPTER.validate_python(dict(check))


def read_check(check: object) -> Check | None:
    """The check an event or a payload wrote, or None when ``check`` is none (absent, not an object, no valid check):
    for readers of records that skip what is not a check rather than stop."""
    if not isinstance(check, Mapping):
        return None
    try:
        return parse_check(check)
    except ValueError:
        return None


def check_passes(check: Mapping[str, Any], text: str) -> bool:
    """Whether ``text`` passes the check written as a rubric's ``check`` object (raises ValueError when the object
    is no valid check); a check already built is asked directly (:meth:`passes`)."""
    return parse_check(check).passes(text)
