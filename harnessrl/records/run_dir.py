"""The run directory: everything a run leaves behind, in files a person can read.

::

    runs/NAME/
      config.yaml       the resolved configuration (every default written out)
      harness.json      the three interfaces' state and history (rewritten atomically per update)
      events.jsonl      failures, attributions, proposals, trial results, verdicts, evaluations
      metrics.jsonl     one line per logged step: TRL's metrics and HarnessRL's
      steps.jsonl       one line per task group per step (GroupRecord)
      rollouts/         the last steps' completions, for re-grading
      eval.jsonl        held-out evaluations (EvalResult)
      checkpoints/      TRL checkpoints, best/ (best held-out score) and final/
      plots/, report.html, summary.json

JSONL files are appended line by line and flushed, so a killed process loses at most the line in
flight; readers skip a torn last line instead of failing.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.events import ALL_EVENT_KINDS, Event

__all__ = ["RunDir", "open_append", "read_jsonl"]

logger = logging.getLogger(__name__)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Every whole JSON line of a file (a torn or corrupt line is skipped with a warning)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("%s line %d is not whole JSON (killed mid-write?); skipped", path, lineno)
    return rows


def open_append(path: str | Path):
    """Open a JSONL file for appending whole lines: after a torn last line (a killed write) the next row
    starts on a line of its own instead of being glued to the fragment and lost with it."""
    path = Path(path)
    torn = False
    try:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
    except OSError:  # missing or empty
        pass
    f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - returned to the caller's with-block
    if torn:
        f.write("\n")
    return f


class RunDir:
    """Paths and append-only logs of one run."""

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
            for sub in ("checkpoints", "plots", "rollouts"):
                (self.path / sub).mkdir(exist_ok=True)
        elif not self.path.is_dir():
            raise HarnessRLError(f"{self.path}: no such run directory (train one with `harnessrl train`)")

    # paths
    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def harness(self) -> Path:
        return self.path / "harness.json"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def plots(self) -> Path:
        return self.path / "plots"

    @property
    def report(self) -> Path:
        return self.path / "report.html"

    def file(self, name: str) -> Path:
        return self.path / name

    # writing
    def write_config(self, config) -> None:
        self.config.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")

    def append(self, name: str, row: dict[str, Any], sync: bool = False) -> None:
        with open_append(self.path / name) as f:
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            if sync:
                os.fsync(f.fileno())

    def event(self, kind: str, step: int | None = None, **payload: Any) -> dict[str, Any]:
        """Append one event, checked against :class:`~harnessrl.records.events.Event` (fsynced: events
        are the run's decision trace). The one writer of ``events.jsonl``."""
        row = {"time": time.time(), "kind": kind, "step": step, **payload}
        try:
            Event.model_validate(row)
        except ValidationError as e:
            raise ValueError(f"not an event of events.jsonl ({kind!r}; kinds: {list(ALL_EVENT_KINDS)}): {e}") from None
        self.append("events.jsonl", row, sync=True)
        return row

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.path / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
        os.replace(tmp, self.path / name)

    # reading
    def read(self, name: str) -> list[dict[str, Any]]:
        return read_jsonl(self.path / name)

    def read_json(self, name: str) -> Any:
        path = self.path / name
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
