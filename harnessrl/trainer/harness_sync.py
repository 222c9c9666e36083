"""Many processes, one harness: at every step boundary each process applies the main process's state.

The harness is decided on the main process (its evolver commits there). In a run of several processes
(``accelerate launch``), :func:`sync_harness` runs on every process at the start of each step, before
any row of the step is drawn: the main process sends a digest of its ``harness.json`` state, and the
state itself when it changed since the last step; the others replace theirs with it. So every process
samples, guides and grades each step with the same harness version, whatever was committed between
steps. Each process records the versions it used for each step (``ranks/rank<k>.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SyncMark", "sync_harness"]


@dataclass
class SyncMark:
    """What one process keeps between step boundaries: the digest of the harness state it last synced to (None:
    not synced yet; ``ranks/rank<k>.jsonl`` records it beside each step's versions)."""

    digest: str | None = None


def _digest(state: Mapping[str, object]) -> str:
    return hashlib.sha1(json.dumps(state, sort_keys=True, default=str).encode()).hexdigest()


def sync_harness(harness: Any, is_main: bool, broadcast: Callable[[list], Any], last: SyncMark) -> bool:
    """One step boundary: ``broadcast(objects)`` sends the main process's list to every process in place
    (``torch.distributed.broadcast_object_list(objects, src=0)``, or accelerate's); ``last`` keeps this
    process's last digest between calls. Returns whether this process's harness was replaced."""
    payload: list[Any] = [None]
    if is_main:
        state = harness.to_dict()
        digest = _digest(state)
        payload = [(digest, state if digest != last.digest else None)]
    broadcast(payload)
    digest, state = payload[0]
    replaced = False
    if not is_main and digest != last.digest:
        if state is None:  # cannot happen while every process calls at every step; say so if it does
            raise RuntimeError("the harness changed on the main process but its state was not sent")
        harness.restore_state(state)
        replaced = True
    last.digest = digest
    return replaced
