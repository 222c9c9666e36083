"""The registered harness interfaces: the three built in, plug-ins, and what is derived from them.

An interface is added in one of two ways, and nothing else in HarnessRL changes:

- **an entry point** in the ``harnessrl.interfaces`` group of an installed package, e.g. in its
  ``pyproject.toml``::

      [project.entry-points."harnessrl.interfaces"]
      decoding = "harnessrl_decoding:Decoding"

  Every run in that environment then has it (the example under ``examples/decoding``);
- **a dotted path** in the run config, ``harness.interfaces: ["my_pkg.module:MyInterface"]``, for one run.

Everything that iterates over interfaces (the harness and ``harness.json``, the tool server's
builder tools, the attributor's choices and prompt, the proposer's tools, trial dispatch, the
rule-based evolver, the detectors' hints, the report) asks this module.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from functools import lru_cache
from importlib.metadata import entry_points

from harnessrl.errors import ConfigError
from harnessrl.interfaces.base import Interface
from harnessrl.interfaces.guidance import RolloutGuidance
from harnessrl.interfaces.rubric import RubricCriteria
from harnessrl.interfaces.sampling import TaskSampling

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "allowed_interfaces",
    "builder_tools",
    "failure_hints",
    "interface_classes",
    "load_interface",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "harnessrl.interfaces"
BUILTIN: tuple[type[Interface], ...] = (TaskSampling, RolloutGuidance, RubricCriteria)
"""The built-in interfaces, in the order the harness consults them (a later one shapes a row last)."""


def load_interface(path: str) -> type[Interface]:
    """The :class:`Interface` subclass at ``path`` (``package.module:Class`` or ``package.module.Class``)."""
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ConfigError(f"interface {path!r}: give a dotted path such as 'my_pkg.module:MyInterface'")
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"interface {path!r} cannot be imported ({type(e).__name__}: {e}); is it installed?") from e
    return _checked(obj, path)


def _checked(obj: object, where: str) -> type[Interface]:
    if not (isinstance(obj, type) and issubclass(obj, Interface)):
        raise ConfigError(f"interface {where!r} is not a subclass of harnessrl.interfaces.Interface: {obj!r}")
    for attr in ("name", "update_type", "builder_tool"):
        if not getattr(obj, attr, None):
            raise ConfigError(f"interface {where!r} ({obj.__name__}) does not set {attr!r}")
    tag = obj.update_type.model_fields.get("interface")
    if tag is None or tag.default != obj.name:
        raise ConfigError(
            f"interface {where!r}: its update {obj.update_type.__name__} must have "
            f"`interface: Literal[{obj.name!r}] = {obj.name!r}`"
        )
    return obj


@lru_cache(maxsize=1)
def _entry_point_classes() -> tuple[type[Interface], ...]:
    found = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            found.append(_checked(ep.load(), f"{ep.name} = {ep.value}"))
        except Exception as e:  # a broken plug-in must say so, and never take the built-ins down with it
            raise ConfigError(
                f"the installed interface plug-in {ep.name!r} ({ep.value}, entry-point group {ENTRY_POINT_GROUP!r}) "
                f"cannot be loaded: {e}. Fix or uninstall that package."
            ) from e
    return tuple(found)


def interface_classes(extra: Iterable[str] = ()) -> dict[str, type[Interface]]:
    """Every registered interface by name: built in, then entry points, then ``extra`` dotted paths."""
    out: dict[str, type[Interface]] = {}
    for cls in (*BUILTIN, *_entry_point_classes(), *(load_interface(p) for p in extra)):
        other = out.get(cls.name)
        if other is not None and other is not cls:
            raise ConfigError(
                f"two interfaces are named {cls.name!r}: {other.__module__}.{other.__qualname__} and "
                f"{cls.__module__}.{cls.__qualname__}"
            )
        out[cls.name] = cls
    tools = [c.builder_tool for c in out.values()]
    dup = sorted({t for t in tools if tools.count(t) > 1})
    if dup:
        raise ConfigError(f"two interfaces share the builder tool name(s) {dup}")
    return out


def builder_tools(extra: Iterable[str] = ()) -> dict[str, str]:
    """Interface name -> the tool that builds its candidates."""
    return {name: cls.builder_tool for name, cls in interface_classes(extra).items()}


def failure_hints(extra: Iterable[str] = ()) -> dict[str, str]:
    """Failure kind -> the interface that is its first choice (the first registered that claims it)."""
    hints: dict[str, str] = {}
    for name, cls in interface_classes(extra).items():
        for kind in cls.hint_for:
            hints.setdefault(kind, name)
    return hints


def allowed_interfaces(extra: Iterable[str] = ()) -> dict[str, tuple[str, ...]]:
    """Failure kind -> the interfaces that can answer it, the first choice first."""
    hints = failure_hints(extra)
    allowed: dict[str, list[str]] = {}
    for name, cls in interface_classes(extra).items():
        for kind in (*cls.hint_for, *cls.answers):
            names = allowed.setdefault(kind, [])
            if name not in names:
                names.append(name)
    return {k: tuple(sorted(v, key=lambda n: n != hints.get(k))) for k, v in allowed.items()}
