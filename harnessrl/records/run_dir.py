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
      pending_tests.json  the critic's pending tests' pooled evidence (rewritten whole after each trial)
      checkpoints/      TRL checkpoints, best/ (best held-out score) and final/
      plots/, report.html, summary.json

JSONL files are appended line by line and flushed, so a killed process loses at most the line in
flight; readers skip a torn last line instead of failing. Every JSON file holds JSON: a value that is not a
finite number (NaN, infinity) is written as null (:func:`json_safe`), and a whole file that does not parse
is an error naming the file (:meth:`RunDir.read_json`). Whole files (``harness.json``, ``config.yaml``,
``summary.json``, ...) are written whole or not at all (:func:`write_atomic`): a full disk mid-write leaves
the previous version in place and says so (:class:`RunFileError`).

One live process trains into a run directory at a time: :func:`lock_run_dir` takes an exclusive
``flock`` on ``.lock`` in it (with the owner's pid and host written there for the error message), and a
second process, training or resuming, is refused with :class:`RunDirInUseError`. The OS releases a
flock when its process dies however it dies, so a lock left by a killed run is taken over, with a warning
that says it was stale and whose it was (:attr:`RunDirLock.stale`; a process that ends normally removes
the file).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import yaml
from pydantic import BaseModel, Field, JsonValue, ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.as_written import AsWritten, Number
from harnessrl.records.events import ALL_EVENT_KINDS, Event

__all__ = [
    "LOCK_NAME",
    "JsonlLine",
    "LockOwner",
    "RunDir",
    "RunDirInUseError",
    "RunDirLock",
    "RunFileError",
    "clear_run_dir",
    "free_bytes",
    "is_disk_full",
    "json_safe",
    "lock_run_dir",
    "open_append",
    "read_json_file",
    "read_jsonl",
    "read_jsonl_lines",
    "read_jsonl_models",
    "read_tail",
    "stale_lock_message",
    "write_atomic",
]

logger = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)

LOCK_NAME = ".lock"
"""The run directory's lock file (see :func:`lock_run_dir`)."""

_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_TEXT = (
    "no space left on device",  # strerror(ENOSPC), in a library's own error (safetensors' SafetensorError)
    "os error 28",  # Rust's io::Error for ENOSPC (safetensors, tokenizers)
    "disk quota exceeded",
    "os error 122",  # EDQUOT
    "database or disk is full",  # sqlite (the training memory's Chroma store)
)
_TORCH_WRITE_TEXT = ("pytorchstreamwriter failed writing", "unexpected pos", "file write failed")
"""torch.save's errors when a write comes up short: they name no cause (a full disk is the usual one)."""
_LOW_SPACE = 256 * 2**20


def is_disk_full(error: BaseException, path: str | Path | None = None) -> bool:
    """Whether ``error`` (or an error it was raised from) is a full disk or an exhausted quota: an ``OSError``
    with ENOSPC or EDQUOT, or a library's own error whose text says so (safetensors raises a
    ``SafetensorError`` "... No space left on device (os error 28)", sqlite "database or disk is full"). With
    ``path``: also a torch.save whose write came up short (its error names no cause) while the file system of
    ``path`` has less than 256 MiB free."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, OSError) and e.errno in _DISK_FULL:
            return True
        text = str(e).lower()
        if any(t in text for t in _DISK_FULL_TEXT):
            return True
        if path is not None and any(t in text for t in _TORCH_WRITE_TEXT) and 0 <= free_bytes(path) < _LOW_SPACE:
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def free_bytes(path: str | Path) -> int:
    """Bytes free on the file system of ``path`` (its nearest existing parent); -1 when unknown."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return -1


class RunFileError(HarnessRLError, OSError):
    """A run file could not be written (a full disk, a quota, a read-only file system): the file keeps its
    previous content. Also an ``OSError`` with the cause's ``errno``, so code that handles I/O errors
    still handles it."""


class RunDirInUseError(HarnessRLError):
    """Another live process holds the run directory's lock."""


def json_safe(value: Any) -> Any:
    """``value`` with every float that is not finite (NaN, infinity: not JSON) replaced by None, in nested
    dicts, lists and tuples too; anything else as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def write_atomic(path: str | Path, write: Callable[[IO[str]], None]) -> None:
    """Write a file whole or not at all: ``write(f)`` fills a temporary file beside ``path``, which is
    flushed, fsynced and renamed over it. If anything fails on the way (the disk fills up mid-write, the
    fsync fails, ...) the temporary file is removed and ``path`` keeps its previous content; an
    ``OSError`` is raised again as a :class:`RunFileError` that says so (and whether the disk is full)."""
    path = Path(path)
    existed = path.exists()
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), path.stat().st_mode & 0o777 if existed else 0o644)
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        kept = "keeps its previous content" if existed else "was not created"
        if is_disk_full(e):
            what = f"the disk is full ({e}): {path.name} {kept}. Free disk space (or move the run to a larger disk)"
        else:
            what = f"it could not be written ({e}): {path.name} {kept}. Fix the cause"
        err = RunFileError(f"{path}: {what} and go on; with `harnessrl train`, run it again with --resume")
        err.errno = e.errno
        raise err from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    # the rename itself reaches the disk with the directory; the file is in place whatever happens here
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# --------------------------------------------------------------------------------------------- the lock


class LockOwner(AsWritten):
    """The process that holds (or held) a run directory's lock, as its lock file says: written when it took the
    lock, read for the message of a process refused, and of one taking over a stale lock (``run_start``'s
    ``stale_lock``, as the file held it)."""

    pid: int | None = Field(None, description="Its process id (None: it has not written it yet).")
    host: str | None = Field(None, description="The host it runs on.")
    since: Number | None = Field(None, description="When it took the lock (Unix time).")


def _lock_owner(fd: int) -> LockOwner:
    """The owner a lock file names (none known: an empty file, or one that is not an owner's JSON)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return LockOwner.model_validate_json(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):  # a pydantic ValidationError is a ValueError
        return LockOwner()


def _in_use_message(path: Path, owner: LockOwner) -> str:
    pid, host = owner.pid, owner.host
    if pid == os.getpid() and host == socket.gethostname():
        return (
            f"{path} is already locked by this process (pid {pid}): a run directory takes one run at a time; "
            "finish or stop the other run in this process, or choose another run_dir"
        )
    since = owner.since
    when = ""
    if since is not None:
        when = f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"
    who = f"pid {pid} on host {host}{when}" if pid else "a process that has not written its pid yet"
    stop = f"stop it (`kill {pid}`" + (f" on {host}" if host and host != socket.gethostname() else "") + ")"
    return (
        f"{path} is in use by another live process: {who}. Two processes must not write one run directory "
        f"(resuming a run included): wait for it to finish, {stop} and then --resume, "
        "or train into another run_dir"
    )


class RunDirLock:
    """This process's exclusive lock on a run directory (from :func:`lock_run_dir`): :meth:`release` it,
    or use it as a context manager."""

    def __init__(self, path: Path, fd: int, created: bool, stale: LockOwner | None = None):
        self.path = path
        self._fd: int | None = fd
        self._created = created
        self.stale = stale
        """The owner written in a lock file left behind by a process that ended without releasing it (killed,
        crashed): its pid, host and start time; None when the lock was free."""

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Give the directory up (idempotent). The lock file goes first and the lock after, never the other
        way round: a process that opened the file meanwhile sees it gone and opens a fresh one. A directory
        the lock created and nothing else filled is removed too (a refused run leaves no trace)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            with contextlib.suppress(OSError):
                (self.path / LOCK_NAME).unlink()
            if self._created:
                with contextlib.suppress(OSError):
                    self.path.rmdir()  # only if empty
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> RunDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_run_dir(path: str | Path) -> RunDirLock:
    """Lock the run directory ``path`` (made if missing) for this process, or raise
    :class:`RunDirInUseError` naming the live process that holds it and what to do.

    An exclusive, non-blocking ``flock`` on ``path/.lock``; the owner's pid, host and start time are
    written in the file for that message (not its command line, which may hold a secret). A lock file
    left by a process that died (killed, crashed) holds no flock any more, since the OS drops it with the
    process, and is taken over silently. Works wherever ``flock`` does (local disks; NFS through the
    kernel's emulation)."""
    path = Path(path)
    created = not path.exists()
    lock_path = path / LOCK_NAME
    for _ in range(100):
        path.mkdir(parents=True, exist_ok=True)
        try:  # never through a symlink planted in the run directory
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except FileNotFoundError:  # the directory went with a released lock: make it again
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise HarnessRLError(f"{lock_path} is a symbolic link: remove it (the lock is a plain file)") from e
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _lock_owner(fd)
            os.close(fd)
            raise RunDirInUseError(_in_use_message(path, owner)) from None
        except BaseException:
            os.close(fd)
            raise
        try:  # the holder may have released (and removed) the file between our open and our flock
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    else:  # pragma: no cover - a hundred releases in a row between our open and our flock
        raise RunDirInUseError(f"{path}: could not take {lock_path}; other processes keep taking it: try again")
    previous = _lock_owner(fd)
    stale = previous if previous.pid else None
    if stale is not None:  # released locks take their file with them: this one's process ended holding it
        logger.warning("%s", stale_lock_message(lock_path, stale))
    owner = LockOwner(pid=os.getpid(), host=socket.gethostname(), since=time.time())
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(owner.model_dump()).encode("utf-8"), 0)
    return RunDirLock(path, fd, created, stale)


def stale_lock_message(lock_path: Path, owner: LockOwner) -> str:
    """What a lock file left by a process that ended without releasing it says, in one sentence."""
    since = owner.since
    when = f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" if since is not None else ""
    host = f" on host {owner.host}" if owner.host else ""
    return (
        f"{lock_path} was stale: pid {owner.pid}{host}{when} ended without releasing it (killed or crashed; "
        "the OS dropped its lock), so this process took it over. Nothing else is needed"
    )


def clear_run_dir(path: str | Path) -> None:
    """Remove everything in a run directory but its lock file (``--overwrite`` under the lock)."""
    for p in Path(path).iterdir():
        if p.name == LOCK_NAME:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def read_jsonl(path: str | Path) -> list[dict[str, JsonValue]]:
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


def read_jsonl_models(
    path: str | Path, model: type[_M], keep: Callable[[dict[str, JsonValue]], bool] = lambda row: True
) -> list[_M]:
    """Every line of a JSONL file that is a ``model`` (a torn line, or one that is not the model, skipped with a
    warning naming the line), of those ``keep`` keeps."""
    out = []
    for i, row in enumerate(read_jsonl(path), start=1):
        if isinstance(row, dict) and not keep(row):
            continue
        try:
            out.append(model.model_validate(row))
        except ValidationError as e:
            logger.warning("%s row %d is not a %s (%s); skipped", path, i, model.__name__, e.errors()[0]["msg"])
    return out


@dataclass(frozen=True)
class JsonlLine:
    """One line of a run's JSONL file as written (``text``, kept byte for byte to be moved elsewhere whole) and the
    fields a roll-back decides on (``step`` None: the line is no JSON object with a step, e.g. torn by a kill)."""

    text: str
    step: int | None
    kind: str | None = None
    """An event's kind (``events.jsonl``); None in other files."""
    candidate_id: str | None = None
    """The candidate an event is about; None when it names none."""


def read_jsonl_lines(path: str | Path) -> list[JsonlLine]:
    """Every non-blank line of a run's JSONL file (``steps.jsonl``, ``metrics.jsonl``, ``events.jsonl``, ...) with
    its step (a row without one is step 0), kind and candidate; a missing file has none."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            out.append(JsonlLine(text, None))
            continue
        try:
            step: int | None = int(row.get("step") or 0)
        except (ValueError, TypeError, OverflowError):
            step = None
        kind, candidate = row.get("kind"), row.get("candidate_id")
        out.append(
            JsonlLine(text, step, kind if isinstance(kind, str) else None, str(candidate) if candidate else None)
        )
    return out


def read_tail(path: str | Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a file that may still be growing (a run's log, its ``metrics.jsonl``), read from
    its last 8 KiB; "" when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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

    def lock(self) -> RunDirLock:
        """Lock this run directory for this process (see :func:`lock_run_dir`)."""
        return lock_run_dir(self.path)

    # writing
    def write_config(self, config) -> None:
        text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
        write_atomic(self.config, lambda f: f.write(text))

    def append(self, name: str, row: Mapping[str, object], sync: bool = False) -> None:
        """One line of ``name``: ``row`` as JSON (a float that is not finite as null, anything else JSON has no
        type for as its ``str``)."""
        with open_append(self.path / name) as f:
            f.write(json.dumps(json_safe(row), default=str, allow_nan=False) + "\n")
            f.flush()
            if sync:
                os.fsync(f.fileno())

    def event(self, kind: str, step: int | None = None, **payload: object) -> Event:
        """Append one event, checked against :class:`~harnessrl.records.events.Event` (fsynced: events
        are the run's decision trace), and return it. The one writer of ``events.jsonl``."""
        row = {"time": time.time(), "kind": kind, "step": step, **payload}
        try:
            event = Event.model_validate(row)
        except ValidationError as e:
            raise ValueError(f"not an event of events.jsonl ({kind!r}; kinds: {list(ALL_EVENT_KINDS)}): {e}") from None
        self.append("events.jsonl", row, sync=True)
        return event

    def write_json(self, name: str, data: Any) -> None:
        """Write ``name`` whole or not at all (:func:`write_atomic`)."""
        safe = json_safe(data)
        write_atomic(self.path / name, lambda f: json.dump(safe, f, indent=1, default=str, allow_nan=False))

    # reading
    def read(self, name: str) -> list[dict[str, JsonValue]]:
        return read_jsonl(self.path / name)

    def read_json(self, name: str) -> Any:
        """A whole JSON file of the run (None when it does not exist); one that does not parse raises
        :class:`~harnessrl.errors.HarnessRLError` naming it."""
        return read_json_file(self.path / name)


def read_json_file(path: str | Path) -> Any:
    """A run's whole JSON file (``summary.json``, ``harness.json``, ``tool_server.json``, ...), or None when it
    does not exist; raises :class:`~harnessrl.errors.HarnessRLError` naming the file when it cannot be read
    or is not JSON (a damaged run directory), never a traceback's worth of decoder internals."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise HarnessRLError(
            f"{path}: cannot be read as JSON ({e}); the file is damaged. Restore it (e.g. from a copy of the run), "
            "or move it away if the command can do without it"
        ) from None
