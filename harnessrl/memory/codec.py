"""How values become Chroma metadata and come back: the small conversions every collection of the
training memory shares (finite floats, JSON text for nested values, the cosine distance as a similarity)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import BaseModel

__all__ = [
    "Metadata",
    "MetadataValue",
    "as_dict",
    "chroma_metadata",
    "dumps",
    "finite",
    "jsonable",
    "loads",
    "scalar",
    "similarity_of",
]

MetadataValue = str | int | float | bool | list[str] | None
"""A Chroma metadata value: a scalar or a non-empty list of strings (nested values are JSON text); None in an upsert
removes the key."""
Metadata = dict[str, MetadataValue]
"""One record's Chroma metadata."""


def finite(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def dumps(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def scalar(v: object) -> MetadataValue:
    """A Chroma metadata value (str/int/float/bool or a non-empty list of one of them), or None (= absent)."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool | int):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, list | tuple) and v and all(isinstance(i, str) for i in v):
        return list(v)
    return dumps(v)


def chroma_metadata(d: Mapping[str, object]) -> Metadata:
    """Metadata for Chroma. ``None`` values are kept on purpose: in an upsert they *remove* a key an
    earlier version of the record had, so a re-written record never keeps stale values."""
    return {k: scalar(v) for k, v in d.items()}


def loads(s: Any, default: Any = None) -> Any:
    if not isinstance(s, str):
        return default
    try:
        return json.loads(s)
    except ValueError:
        return default


def as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    raise TypeError(f"expected a pydantic model or a dict, got {type(obj).__name__}")


def similarity_of(distance: float) -> float:
    return round(1.0 - float(distance), 6)  # cosine space: distance = 1 - cos


def jsonable(x: Any) -> Any:
    if isinstance(x, BaseModel):
        return x.model_dump(mode="json")
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x
