"""The harness: every registered interface together, applied by one entry point and saved as one file.

``harness.json`` in the run directory holds each interface's state under its name, and is rewritten
atomically (temp file + rename) after every applied update, so a killed run resumes with every
committed update and never reads a torn file.

Three interfaces have a fixed role in a training step and are reached by name: task sampling draws
the batch (:attr:`Harness.sampling`), the rubric grades it (:attr:`Harness.rubrics`). Every interface,
built in or plugged in, shapes each group member's :class:`~harnessrl.interfaces.base.Row` (prompt and
sampling settings) in registration order (:meth:`Harness.row`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harnessrl.data.schema import Task
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.interfaces.base import HarnessContext, Interface, InterfaceUpdate, Row
from harnessrl.interfaces.guidance import RolloutGuidance
from harnessrl.interfaces.registry import BUILTIN, failure_hints, interface_classes
from harnessrl.interfaces.rubric import RubricCriteria
from harnessrl.interfaces.sampling import TaskSampling
from harnessrl.records.run_dir import json_safe, write_atomic
from harnessrl.records.run_record import Missing, read_harness_file

__all__ = ["Harness", "parse_update"]


def parse_update(data: Mapping[str, Any], extra: Iterable[str] = ()) -> InterfaceUpdate:
    """Validate a dict as the update of the interface its ``interface`` field names (raises pydantic's
    ValidationError for a bad update, ValueError for an unknown interface)."""
    classes = interface_classes(extra)
    name = data.get("interface") if isinstance(data, Mapping) else None
    if name not in classes:
        raise ValueError(f"unknown interface {name!r} in an update; registered: {sorted(classes)}")
    return classes[name].update_type.model_validate(data)


class Harness:
    """Every registered interface over one set of training tasks.

    Args:
        tasks: the training tasks.
        sampling_floor, seed, temperature: the built-in interfaces' settings (a floor on each active
            task's sampling share, the draw's seed, the run's sampling temperature).
        interfaces: dotted paths of interfaces to add to the registered ones (``harness.interfaces``).
        settings: per-interface settings by name (``harness.interface_settings``).
    """

    def __init__(
        self,
        tasks: list[Task],
        *,
        sampling_floor: float = 0.1,
        seed: int = 0,
        temperature: float = 1.0,
        interfaces: Iterable[str] = (),
        settings: Mapping[str, Mapping[str, Any]] | None = None,
        _state: Mapping[str, Any] | None = None,
        _where: str = "",
    ):
        self.tasks = {t.id: t for t in tasks}
        self.extra = tuple(interfaces)
        self.context = HarnessContext(
            tasks=self.tasks, seed=seed, sampling_floor=sampling_floor, temperature=temperature, settings=settings or {}
        )
        self.interfaces: dict[str, Interface] = {}
        for name, cls in interface_classes(self.extra).items():
            if _state is not None and name in _state:
                try:
                    self.interfaces[name] = cls.restore(_state[name], self.context)
                except (KeyError, TypeError, ValueError, ValidationError) as e:
                    raise HarnessRLError(
                        f"{_where}: the saved state of interface {name!r} does not match this run's tasks or "
                        f"format ({e}); was the data changed?"
                    ) from e
            else:  # new, or an interface installed since the run was saved: it starts at version 0
                try:
                    self.interfaces[name] = cls.create(self.context)
                except (KeyError, TypeError, ValueError) as e:
                    raise ConfigError(f"interface {name!r} cannot be set up: {e}") from e

    # ------------------------------------------------------------------ the interfaces with a fixed role
    @property
    def sampling(self) -> TaskSampling:
        return self._builtin(TaskSampling)

    @property
    def guidance(self) -> RolloutGuidance:
        return self._builtin(RolloutGuidance)

    @property
    def rubrics(self) -> RubricCriteria:
        return self._builtin(RubricCriteria)

    def _builtin(self, cls: type) -> Any:
        iface = self.interfaces[cls.name]
        if not isinstance(iface, cls):
            raise HarnessRLError(f"interface {cls.name!r} is {type(iface).__name__}, not the built-in {cls.__name__}")
        return iface

    def restore_state(self, data: Mapping[str, Any]) -> None:
        """Replace every interface's state with ``data`` (what :meth:`to_dict` wrote, e.g. another process's
        harness), over the same tasks and settings."""
        other = Harness(
            list(self.tasks.values()),
            sampling_floor=self.context.sampling_floor,
            seed=self.context.seed,
            temperature=self.context.temperature,
            interfaces=self.extra,
            settings=self.context.settings,
            _state=data,
            _where="the harness state sent by the main process",
        )
        self.interfaces = other.interfaces

    def interface(self, update: InterfaceUpdate | str) -> Interface:
        """The interface an update (or a name) belongs to; ValueError for an unknown one."""
        if not isinstance(update, (str, InterfaceUpdate)):
            raise TypeError(f"not a harness update: {type(update).__name__} (parse it with parse_update first)")
        name = update if isinstance(update, str) else update.interface
        try:
            return self.interfaces[name]
        except KeyError:
            raise ValueError(f"unknown interface {name!r}; this harness has {sorted(self.interfaces)}") from None

    def failure_hints(self) -> dict[str, str]:
        """Failure kind -> the interface that is its first choice (the detectors' ``interface_hint``)."""
        return failure_hints(self.extra)

    @property
    def versions(self) -> dict[str, int]:
        return {name: iface.version for name, iface in self.interfaces.items()}

    # ------------------------------------------------------------------ a training step
    def row(self, task: Task, member: int, group_size: int, overlay: InterfaceUpdate | None = None) -> Row:
        """Member ``member`` of a group of ``group_size`` for ``task`` as every interface shapes it, in
        registration order; ``overlay`` previews a candidate update on its own interface."""
        row = Row(task.messages(), False, {"temperature": self.context.temperature})
        for name, iface in self.interfaces.items():
            row = iface.shape(task, member, group_size, row, overlay if overlay and overlay.interface == name else None)
        return row

    def hints_for(self, task: Task, rubric_version: int) -> tuple[str | None, list[str]]:
        """What the guided members of ``task``'s group graded at ``rubric_version`` saw: the hints (guidance's rule,
        the rubric's), joined, and the criteria the rubric's hint states (a group record's ``guidance`` and
        ``hinted``)."""
        rule = self.guidance.rule_for(task)
        version = self.rubrics.versions[task.id][rubric_version]
        hints = [h for h in (rule.text if rule else None, version.hint()) if h]
        return (" / ".join(hints) if hints else None), [c.id for c in version.stated()]

    def apply(
        self, update: InterfaceUpdate, step: int, candidate_id: str | None = None, *, save_to: str | Path | None = None
    ) -> int:
        """Apply any update to its interface from ``step`` on; returns that interface's new version.

        All or nothing: the update is applied first to a copy of its interface (restored from its
        ``to_dict``), so an update that fails half-way (ValueError) leaves the harness as it was. With
        ``save_to``, ``harness.json`` is written with that copy in place *before* the live harness
        changes, so a write that fails (OSError, e.g. a full disk) leaves the harness and the file as
        they were, and a killed run never resumes without an update training already used."""
        iface = self.interface(update)
        name = next(n for n, i in self.interfaces.items() if i is iface)
        try:
            probe = type(iface).restore(iface.to_dict(), self.context)
        except (KeyError, TypeError, ValueError) as e:
            raise HarnessRLError(f"interface {name!r} cannot read back its own state ({e}): fix its restore") from e
        probe.apply(update, step, candidate_id)
        if save_to is not None:
            staged = object.__new__(Harness)
            staged.__dict__.update(self.__dict__, interfaces={**self.interfaces, name: probe})
            staged.save(save_to)
        try:
            return iface.apply(update, step, candidate_id)
        except Exception as e:  # it applied to an identical copy: the interface's apply is not deterministic
            if save_to is not None:
                self.save(save_to)
            raise HarnessRLError(f"interface {name!r} applied the update to a copy but not to itself: {e}") from e

    # ------------------------------------------------------------------ harness.json
    def to_dict(self) -> dict:
        return {
            "versions": self.versions,
            # what the report shows of each interface (read back by nothing else)
            "summary": {name: iface.summary() for name, iface in self.interfaces.items()},
            **{name: iface.to_dict() for name, iface in self.interfaces.items()},
        }

    def save(self, path: str | Path) -> None:
        """Write ``harness.json`` whole or not at all (temp file, fsync, rename): when the write fails, a
        full disk included, the previous file is kept and a :class:`~harnessrl.records.run_dir.RunFileError`
        (an ``OSError`` too) says so."""
        data = json_safe(self.to_dict())
        write_atomic(path, lambda f: json.dump(data, f, indent=1, allow_nan=False))

    @classmethod
    def load(cls, path: str | Path, tasks: list[Task], **settings: Any) -> Harness:
        """Read a saved harness back over the same training tasks. ``settings``: the keyword settings of
        :class:`Harness` (they reach the interfaces the file does not hold, e.g. a plug-in installed since)."""
        path = Path(path)
        data = read_harness_file(path)  # a file that is not JSON raises, naming it
        if isinstance(data, Missing):
            raise HarnessRLError(f"{path}: cannot read the saved harness ({data.reason}); the run directory is damaged")
        missing = [c.name for c in BUILTIN if c.name not in data]
        if missing:
            raise HarnessRLError(
                f"{path}: the saved harness lacks the interface(s) {missing}; the run directory is damaged"
            )
        harness = cls(tasks, **settings, _state=data, _where=str(path))
        unknown = sorted(set(data) - set(harness.interfaces) - {"versions", "summary"})
        if unknown:
            raise HarnessRLError(
                f"{path}: the saved harness has interface(s) {unknown} that are not registered here: install the "
                "package that provides them, or name them in harness.interfaces"
            )
        return harness
