"""The one exception tree of HarnessRL: every message says what was wrong and how to fix it."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DataValidationError",
    "HarnessRLError",
    "JudgeError",
    "ResourceMissingError",
    "RowError",
]

from dataclasses import dataclass


class HarnessRLError(Exception):
    """Root of every error HarnessRL raises on purpose."""


class ConfigError(HarnessRLError):
    """A configuration value is missing, of the wrong type, or names something that does not exist."""


class ResourceMissingError(HarnessRLError):
    """A file, package or model that HarnessRL needs is not on this machine."""


class JudgeError(HarnessRLError):
    """A judge backend could not be built or used (not a single failed verdict: those are *missing*)."""


@dataclass(frozen=True)
class RowError:
    """One bad row of a data file: where it is and what is wrong with it."""

    line: int
    message: str
    task_id: str | None = None

    def __str__(self) -> str:
        if self.line == 0:  # about the whole file (e.g. empty), not one row
            return self.message
        where = f"line {self.line}"
        if self.task_id:
            where += f" (task {self.task_id!r})"
        return f"{where}: {self.message}"


class DataValidationError(HarnessRLError):
    """A data file (tasks, judge labels) has bad rows; ``errors`` lists each one with its line number, and
    ``check_command`` is the command that checks the file again (default: ``harnessrl data validate``); ``note``
    says how the file was read (the layout ``--format auto`` took it for), printed before the rows."""

    def __init__(self, source: str, errors: list[RowError], check_command: str | None = None, note: str | None = None):
        self.source = source
        self.errors = errors
        self.note = note
        shown = "\n".join(f"  {e}" for e in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        check = check_command or f"harnessrl data validate {source}"
        said = f"\n  ({note})" if note else ""
        super().__init__(
            f"{source}: {len(errors)} invalid row(s); fix them and run `{check}` again:{said}\n{shown}{more}"
        )
