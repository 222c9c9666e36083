"""Reading configuration files: YAML with errors that name the file, the line and the fix."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from harnessrl.errors import ConfigError

__all__ = ["api_key_from_env", "apply_overrides", "is_loopback_url", "load_yaml"]

LOCAL_SERVER_KEY = "EMPTY"  # what vLLM and most local OpenAI-compatible servers accept when they check no key


def is_loopback_url(url: str | None) -> bool:
    """Whether ``url`` points at this machine (localhost, 127.0.0.1, ::1)."""
    from urllib.parse import urlparse

    host = (urlparse(url).hostname or "").lower() if url else ""
    return host in ("localhost", "127.0.0.1", "::1") or host.endswith(".localhost")


def api_key_from_env(env_var: str, base_url: str | None, setting: str, error: type[Exception] = ConfigError) -> str:
    """The API key in ``env_var``; a placeholder for a server on loopback; else ``error`` saying what to set.

    ``setting`` names the config key that chooses the variable (e.g. ``judge.api_key_env``)."""
    import os

    key = os.environ.get(env_var) or None
    if key is not None:
        return key
    if is_loopback_url(base_url):
        return LOCAL_SERVER_KEY
    where = base_url or "the OpenAI API"
    raise error(
        f"{where} needs an API key: set the environment variable {env_var} "
        f"(or point {setting} at the variable that holds it)"
    )


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


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each ``key.sub -> value`` set; a mapping value is merged into an existing section."""
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        keys = dotted.split(".")
        node = out
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted!r}: {k!r} is not a section of the config")
        last = keys[-1]
        if isinstance(value, dict) and isinstance(node.get(last), dict):
            node[last] = apply_overrides(node[last], {k: v for k, v in value.items()})
        else:
            node[last] = copy.deepcopy(value)
    return out
