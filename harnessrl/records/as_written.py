"""Records serialised as they were written: a model that dumps only the fields that were set, in the order they were
set, and the extra keys an older or newer run wrote, so a file read and written back (an event, a failure's
evidence, a trial's measurements) stays byte for byte what it was.

This module is a data type at the bottom of the layers: it imports nothing of the package.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = ["AsWritten", "Number"]

Number = int | float
"""A number as it was written (an int stays an int in the JSON, so a digest or a line does not move)."""


class AsWritten(BaseModel):
    """The base of a record read from and written to a run's files: the fields set (explicitly None included), in
    the order they were set, and the keys it does not know kept (``extra="allow"``). Built from a dict (a run file,
    a tool's JSON) or from keyword arguments, their keys give the order; a field assigned later goes after them, as
    a key added to a dict does. A field left unset stays absent, never written back as its default."""

    model_config = ConfigDict(
        extra="allow", use_attribute_docstrings=True, validate_by_name=True, serialize_by_alias=True
    )

    _written: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _order_of_input(cls, data: Any, handler: ModelWrapValidatorHandler[AsWritten]) -> AsWritten:
        out = handler(data)
        if isinstance(data, dict):
            by_alias = {f.alias: name for name, f in cls.model_fields.items() if f.alias}
            out._written = tuple(by_alias.get(k, k) for k in data)
        return out

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if not name.startswith("_") and name not in self._written:
            self._written = (*self._written, name)  # a new tuple: a model_copy shares the old one

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data = handler(self)
        fields = type(self).model_fields
        keys = (fields[n].alias or n if n in fields else n for n in self._written)
        return {k: data[k] for k in keys if k in data}
