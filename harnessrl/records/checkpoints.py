"""A run's resumable checkpoints: ``checkpoints/checkpoint-<step>``, as TRL's Trainer names and writes them.

The one place the name is written out and read back: the run and resume (which checkpoint a run goes on from), a
full disk's diagnosis (which checkpoint was cut short), ``harnessrl eval`` (the step of a checkpoint named on its
command line) and the bench (whether a run reached one, and dropping them once it finished) all ask here.

A checkpoint is complete when its ``trainer_state.json`` reads as a JSON object: the Trainer writes it after the
weights, optimizer, scheduler and RNG states, so one without it was cut short (the process killed, or the disk
full, mid-save). ``best`` and ``final`` beside them are no resumable checkpoints (no optimizer state).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from harnessrl.errors import HarnessRLError
from harnessrl.records.run_dir import RunDir, read_json_file

__all__ = [
    "CHECKPOINT_NAME",
    "checkpoint_dir",
    "checkpoint_folders",
    "checkpoint_step",
    "complete_checkpoint",
    "last_checkpoint",
    "step_of_checkpoint",
]

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")
"""A checkpoint folder's name, ``checkpoint-<step>`` (as TRL's Trainer names it)."""


def _checkpoints(run: RunDir | str | Path) -> Path:
    """The ``checkpoints`` folder of a run directory."""
    return run.checkpoints if isinstance(run, RunDir) else Path(run) / "checkpoints"


def checkpoint_dir(run: RunDir | str | Path, step: int) -> Path:
    """Where the run's checkpoint of ``step`` is (or would be) saved."""
    return _checkpoints(run) / f"checkpoint-{step}"


def step_of_checkpoint(checkpoint: str | Path) -> int | None:
    """The step of a ``checkpoint-<step>`` folder; None for any other name (``best``, ``final``, a path)."""
    match = CHECKPOINT_NAME.fullmatch(Path(checkpoint).name)
    return int(match[1]) if match else None


def checkpoint_step(checkpoint: str | Path | None) -> int:
    """The step a ``checkpoint-<step>`` folder was saved at (0: no checkpoint, training starts over)."""
    if checkpoint is None:
        return 0
    step = step_of_checkpoint(checkpoint)
    if step is None:
        raise ValueError(f"{checkpoint} is not a checkpoint-<step> folder")
    return step


def checkpoint_folders(run: RunDir | str | Path) -> list[tuple[int, Path]]:
    """Every ``checkpoint-<step>`` folder of the run, complete or not, by step (not by name: 10 after 2)."""
    root = _checkpoints(run)
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.glob("checkpoint-*") if (step := step_of_checkpoint(p)) is not None]
    return sorted((step, p) for step, p in found if p.is_dir())


def complete_checkpoint(path: Path) -> bool:
    """Whether a checkpoint was written to the end: its ``trainer_state.json`` (TRL's ``TrainerState``, which TRL
    reads back itself on resume) reads as a JSON object."""
    try:
        return isinstance(read_json_file(path / "trainer_state.json"), dict)
    except HarnessRLError:  # not JSON: cut short mid-write
        return False


def last_checkpoint(run: RunDir | str | Path, warn: bool = True) -> str | None:
    """The newest complete ``checkpoint-<step>`` (an incomplete one is skipped, with a warning when ``warn``)."""
    complete = []
    for step, path in checkpoint_folders(run):
        if complete_checkpoint(path):
            complete.append((step, path))
        elif warn:
            logger.warning("%s is incomplete (no trainer_state.json: cut short mid-save); skipped", path)
    return str(max(complete)[1]) if complete else None
