"""Records serialised as they were written: a model that dumps only the fields that were set and the extra keys an
older run wrote, so a file read and written back (an event, a failure's evidence) stays byte for byte what it was.

This module is a data type at the bottom of the layers: it imports nothing of the package.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

__all__ = ["AsWritten", "Number"]

Number = int | float
"""A number as it was written (an int stays an int in the JSON, so a digest or a line does not move)."""


class AsWritten(BaseModel):
    """The base of a record read from and written to a run's files: unknown keys are kept (an older or newer run's),
    and a dump holds what was set, in the order the fields are declared, then the extra keys. A field left unset stays
    absent, never written back as its default."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        kept = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in data.items() if k in kept}
