"""The training memory's metadata filter: one small typed form that both Chroma and the memory read.

A :class:`MetaFilter` is the conjunction of :class:`Condition` s (a key equal to a value, different from it,
in a list, or at least a value). :meth:`MetaFilter.where` writes it in Chroma's own ``where`` syntax, for
Chroma to filter with; :meth:`MetaFilter.matches` tests one record's metadata with Chroma's semantics, so
the memory can check the nearest neighbours it has already ranked without asking Chroma to filter the
whole collection (:meth:`harnessrl.memory.chroma.ChromaCollections._search` says why); :meth:`MetaFilter.positive`
keeps the conditions Chroma can narrow a search with (all but the exclusions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from harnessrl.memory.codec import MetadataValue

__all__ = ["Condition", "MetaFilter", "Where", "at_least", "equals", "is_in", "not_equal"]

Operator = Literal["$eq", "$ne", "$in", "$gte"]

Where = dict[str, JsonValue]
"""A filter in Chroma's ``where`` syntax: ``{key: value}``, ``{key: {op: value}}`` or ``{"$and": [...]}``."""


@dataclass(frozen=True)
class Condition:
    """One metadata condition: ``key`` compared with ``value`` by ``op`` (Chroma's operator names)."""

    key: str
    op: Operator
    value: JsonValue

    @property
    def excludes(self) -> bool:
        """An exclusion (``$ne``): it matches a record that lacks the key, and cannot narrow a search."""
        return self.op == "$ne"

    def where(self) -> Where:
        """This condition in Chroma's ``where`` syntax."""
        return {self.key: self.value} if self.op == "$eq" else {self.key: {self.op: self.value}}

    def matches(self, md: Mapping[str, MetadataValue]) -> bool:
        """Whether one record's metadata satisfies it, as Chroma decides (``$ne`` matches an absent key; the
        other operators do not)."""
        if self.op == "$ne":
            return self.key not in md or md[self.key] != self.value
        have = md.get(self.key)
        if have is None:
            return False
        if self.op == "$eq":
            return have == self.value
        if self.op == "$in":
            return have in self.value
        return have >= self.value


def equals(key: str, value: JsonValue) -> Condition:
    return Condition(key, "$eq", value)


def not_equal(key: str, value: JsonValue) -> Condition:
    return Condition(key, "$ne", value)


def is_in(key: str, values: Sequence[JsonValue]) -> Condition:
    return Condition(key, "$in", list(values))


def at_least(key: str, value: JsonValue) -> Condition:
    return Condition(key, "$gte", value)


@dataclass(frozen=True)
class MetaFilter:
    """Every condition must hold (Chroma's ``$and``); no condition: every record matches."""

    conditions: tuple[Condition, ...] = ()

    @classmethod
    def of(cls, *conditions: Condition | None) -> MetaFilter:
        """The conditions given, leaving out the ``None`` s (an option the caller did not set)."""
        return cls(tuple(c for c in conditions if c is not None))

    def __bool__(self) -> bool:
        return bool(self.conditions)

    def where(self) -> Where | None:
        """The filter in Chroma's ``where`` syntax (None: no filter)."""
        parts = [c.where() for c in self.conditions]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {"$and": parts}

    def matches(self, md: Mapping[str, MetadataValue]) -> bool:
        return all(c.matches(md) for c in self.conditions)

    def positive(self) -> MetaFilter:
        """The conditions that narrow a search (the exclusions left out)."""
        return MetaFilter(tuple(c for c in self.conditions if not c.excludes))
