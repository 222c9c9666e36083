"""Events: the run's decision trace, one JSON line per event in ``events.jsonl``.

The trainer appends its own (``failure``, ``evaluation``, ``evolution_point``, ``run_start``,
``run_end``) through :meth:`~harnessrl.records.run_dir.RunDir.event`; the evolver reports each step
of an evolution point (:data:`EVENT_KINDS`) through an :data:`EventCallback`, which the trainer's
tool service writes to the same file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["EVENT_KINDS", "EventCallback"]

EVENT_KINDS: tuple[str, ...] = ("attribution", "proposal", "trial", "verdict", "commit", "give_up")

EventCallback = Callable[[str, dict[str, Any]], Awaitable[None] | None]
"""``on_event(kind, payload)``: kind is one of :data:`EVENT_KINDS`; payload is JSON-serialisable."""
