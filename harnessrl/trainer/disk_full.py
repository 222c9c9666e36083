"""A full disk, diagnosed: one paragraph instead of a traceback.

:func:`disk_full_error` says what ran out (while saving which checkpoint, writing which file, or training), where,
how much is free there now, what is intact (the last complete checkpoint, ``harness.json``, the records), how much a
checkpoint of this run takes, and how to go on (free space or move the run directory, then ``--resume``); and it
records ``run_end`` (``reason: disk_full``) when the disk still takes a line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harnessrl.errors import HarnessRLError
from harnessrl.records.checkpoints import checkpoint_dir, complete_checkpoint, last_checkpoint
from harnessrl.records.run_dir import RunFileError, free_bytes

if TYPE_CHECKING:
    from harnessrl.trainer.run_state import RunState

__all__ = ["disk_full_error"]


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _cause(error: BaseException) -> str:
    """The innermost message of ``error``'s chain, short (what the OS or the library said)."""
    e, seen = error, {id(error)}
    while (nxt := e.__cause__ or e.__context__) is not None and id(nxt) not in seen:
        e = nxt
        seen.add(id(e))
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _checkpoint_bytes(r: RunState, last: str | None) -> int | None:
    """About what one checkpoint of this run takes: the ``last`` complete one's files, else the weights and
    (for the trained parameters) AdamW's two moments in float32."""
    if last is not None:
        return sum(p.stat().st_size for p in Path(last).rglob("*") if p.is_file())
    if r.model is None:
        return None
    params = list(r.model.parameters())
    return sum(p.numel() * p.element_size() for p in params) + sum(8 * p.numel() for p in params if p.requires_grad)


def disk_full_error(r: RunState, error: BaseException) -> HarnessRLError:
    """One paragraph for a full disk: what ran out, where, what is intact, how to go on; ``run_end`` recorded
    (``reason: disk_full``) when the disk still takes a line."""
    run = r.run
    assert run is not None
    step = r.trainer.state.global_step if r.trainer is not None else 0
    cut = checkpoint_dir(run, step)
    if r.stage == "training" and cut.is_dir() and not complete_checkpoint(cut):
        what = f"while saving {cut.name}"
    elif isinstance(error, RunFileError) and error.filename:
        what = f"while writing {Path(error.filename).name}"
    else:
        what = {"training": "while training", "final": "while saving the final model"}.get(r.stage, "while ending")
    last = last_checkpoint(run, warn=False)  # the paragraph names a checkpoint cut short
    free = free_bytes(run.path)
    intact = [
        f"{Path(last).name} (the last complete checkpoint)" if last else "no complete checkpoint yet",
        "harness.json (the harness as last committed"
        + (f": versions {r.harness.versions})" if r.harness is not None else ")"),
        f"the records of steps 1-{step} (events, metrics, steps)" if step else "the config and the events",
    ]
    if cut.is_dir() and not complete_checkpoint(cut):
        intact.append(f"{cut.name} was cut short: --resume skips it (delete it to free its space)")
    need = _checkpoint_bytes(r, last)
    try:
        run.event("run_end", step=step, reason="disk_full", error=_cause(error), resume_from=last and Path(last).name)
        recorded = "run_end is recorded in events.jsonl (reason: disk_full)"
    except OSError:
        recorded = "no run_end could be recorded (events.jsonl could not take a line either)"
    room = f" (a checkpoint of this run takes about {_size(need)}; grpo.save_total_limit bounds how many stay)"
    return HarnessRLError(
        f"the disk filled up {what}, at step {step}: the file system of {run.path} has no space left "
        f"({_cause(error)}; {_size(free) if free >= 0 else 'unknown'} free there now). Intact: {'; '.join(intact)}. "
        f"To go on: free space on that file system{room if need else ''}, or move the run directory to a larger "
        "disk and point run_dir there; then run the same command with --resume: it goes on from "
        f"{last or 'the start (no complete checkpoint)'} with the harness as last saved. "
        f"{recorded}."
    )
