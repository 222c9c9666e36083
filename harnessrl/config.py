"""Reading configuration files: YAML with errors that name the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harnessrl.errors import ConfigError

__all__ = ["load_yaml"]


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path``; raises :class:`ConfigError` for a missing, broken or non-mapping file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file (see configs/ for examples)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of settings, got {type(data).__name__}")
    return data
