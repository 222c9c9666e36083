"""``bench.json``: what a bench ran, read back (the bench's runner writes it; see :mod:`harnessrl.bench.runner`).

::

    <out>/bench.json
      bench_config   the bench's config file (None: built in code)
      out            the output folder
      created, updated  ISO times
      methods        method name -> its settings, every method any invocation ran, in their order
      seeds          every seed any invocation ran
      runs           "<method>/seed<k>" -> the run's status, paths, attempts and wall time

A later invocation of the bench goes on from it (:func:`read_bench_manifest`): its methods, seeds and runs stay.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.run_dir import read_json_file
from harnessrl.records.run_record import Missing

__all__ = ["BENCH_MANIFEST", "BenchManifest", "read_bench_manifest"]

logger = logging.getLogger(__name__)

BENCH_MANIFEST = "bench.json"
"""The bench's manifest, in its output folder."""


class BenchManifest(BaseModel):
    """``bench.json`` as a later invocation reads it back (fields it does not name are kept as they are)."""

    model_config = ConfigDict(extra="allow")

    bench_config: str | None = Field(None, description="The bench's config file (None: built in code).")
    out: str | None = Field(None, description="The output folder.")
    created: str | None = Field(None, description="When the first invocation wrote it (ISO time).")
    updated: str | None = Field(None, description="When it was last written (ISO time).")
    methods: dict[str, Any] | None = Field(None, description="Method name -> its settings, in the order they ran.")
    seeds: list[int] | None = Field(None, description="Every seed any invocation ran.")
    runs: dict[str, dict[str, Any]] | None = Field(
        None, description='"<method>/seed<k>" -> the run\'s status, paths, attempts and wall time.'
    )


def read_bench_manifest(out: str | Path) -> BenchManifest | Missing:
    """The ``bench.json`` of the bench output folder ``out``, or why there is none to go on from (none yet, or one
    that cannot be read: damaged, or not a manifest; then with a warning naming it)."""
    path = Path(out) / BENCH_MANIFEST
    if not path.is_file():
        return Missing(f"no {BENCH_MANIFEST}: the bench has not run in {out}")
    try:
        return BenchManifest.model_validate(read_json_file(path))
    except (HarnessRLError, ValidationError) as e:
        logger.warning("%s is unreadable; starting a new one (%s)", path, e)
        return Missing(f"{path} is unreadable: {e}")
