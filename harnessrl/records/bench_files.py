"""A bench's own files, read in one place: ``bench.json`` (what a bench ran) and a report's ``results.json`` (what a
later report takes rows from).

``harnessrl bench run`` writes ``bench.json`` into its folder: the bench config it ran from, each method's settings
(its ``key.sub: value`` overrides of the base training config) and one row per run (its method, seed, folder,
status, attempts and wall time). :func:`read_bench_manifest` reads it as a :class:`BenchManifest`.

``harnessrl bench report`` writes ``results.json``; a later report reads a committed one back for its run rows
(``--rows``) and a report counts the arms scored on its test split from the others. :func:`read_report_file` reads
what they need as a :class:`ReportFile`: the rows themselves are the analysis' to read (its run-figures model), so
here they are JSON mappings. A file that is not JSON, or not shaped like the file it should be, is a
:class:`~harnessrl.errors.HarnessRLError` naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from harnessrl.errors import HarnessRLError
from harnessrl.records.as_written import AsWritten, Number
from harnessrl.records.run_dir import read_json_file

__all__ = [
    "BENCH_MANIFEST",
    "BenchManifest",
    "ManifestAttempt",
    "ManifestRun",
    "ReportFile",
    "Settings",
    "read_bench_manifest",
    "read_report_file",
]

BENCH_MANIFEST = "bench.json"
"""The bench's manifest, in its output folder."""

Settings = dict[str, JsonValue]
"""A bench method's settings: its ``key.sub: value`` overrides of the base training config (``method`` among them)."""


class ManifestAttempt(AsWritten):
    """One attempt at a run, in its row of ``bench.json``: what the bench did, when, with which command line, and
    how it ended (``ended`` and the rest are set when it ends; keys an older bench wrote are kept as written)."""

    action: str | None = Field(None, description="start, resume or restart.")
    started: str | None = Field(None, description="When it started (ISO time).")
    command: list[str] = Field(default_factory=list, description="The command line it ran.")
    threads: int | None = Field(None, description="The torch threads of its process (absent: the environment's).")
    ended: str | None = Field(None, description="When it ended (ISO time).")
    wall_seconds: Number | None = Field(None, description="How long it ran.")
    returncode: int | None = Field(None, description="Its exit code (None: stopped by Ctrl-C; 124: timed out).")


class ManifestRun(AsWritten):
    """One run's row of ``bench.json`` (keys an older or newer bench wrote are kept as written)."""

    method: str | None = Field(None, description="The bench method (the run's folder under the bench).")
    seed: int | None = Field(None, description="The run's seed.")
    run_dir: str | None = Field(None, description="The run's folder when it was run.")
    config: str | None = Field(None, description="The run's resolved training config (``<method>/seed<k>.yaml``).")
    log: str | None = Field(None, description="The run's output (``<method>/seed<k>.log``).")
    attempts: list[ManifestAttempt] = Field(default_factory=list, description="Every attempt, in order.")
    status: str | None = Field(None, description="done, running, failed, interrupted, ...")
    last_action: str | None = Field(None, description="What the last bench run planned for it (skip, start, ...).")
    error: str | None = Field(None, description="What a failed run failed with.")
    log_tail: str | None = Field(None, description="The end of a failed run's log.")
    wall_seconds: Number | None = Field(None, description="The bench's measure of the run, over all its attempts.")

    def forget(self, *names: str) -> None:
        """Drop these keys from the row (a run done after a failure has no error): they are written no more."""
        for name in names:
            setattr(self, name, None)
        self._written = tuple(n for n in self._written if n not in names)


class BenchManifest(BaseModel):
    """``bench.json``, as a later ``bench run`` goes on from it and a report reads it; the merge of several bench
    folders' (or report files') has the same shape, with every bench config read listed in :attr:`bench_configs`."""

    model_config = ConfigDict(extra="ignore")

    bench_config: str | None = Field(None, description="The bench config the bench ran from (None: built in code).")
    bench_configs: list[str] = Field(default_factory=list, description="Every bench config of a merged manifest.")
    out: str | None = Field(None, description="The bench's output folder.")
    created: str | None = Field(None, description="When the first invocation wrote it (ISO time).")
    updated: str | None = Field(None, description="When it was last written (ISO time).")
    methods: dict[str, Settings] = Field(default_factory=dict, description="Each method's settings, in bench order.")
    seeds: list[int] = Field(default_factory=list, description="Every seed any invocation ran.")
    runs: dict[str, ManifestRun] = Field(default_factory=dict, description="``<method>/seed<k>`` -> its run's row.")


class ReportFile(BaseModel):
    """A bench report's ``results.json`` as another report reads it back."""

    model_config = ConfigDict(extra="ignore")

    runs: list[dict[str, JsonValue]] | None = Field(
        None, description="One row per run (the analysis reads each as run figures); None: not a bench report's."
    )
    bench_config: str | None = Field(None, description="The bench config of its runs (older reports: None).")
    method_settings: dict[str, Settings] | None = Field(None, description="Each method's settings (older: None).")
    methods: dict[str, JsonValue] = Field(default_factory=dict, description="Its methods (their aggregates).")


def _problems(e: ValidationError) -> str:
    return "; ".join(f"`{'.'.join(map(str, err['loc']))}` {err['msg'].lower()}" for err in e.errors()[:3])


def read_bench_manifest(path: str | Path) -> BenchManifest | None:
    """A bench folder's ``bench.json`` (None: the folder has none); an error naming the file and the field when it
    is not JSON or not a bench manifest."""
    data = read_json_file(path)
    if data is None:
        return None
    try:
        return BenchManifest.model_validate(data)
    except ValidationError as e:
        raise HarnessRLError(
            f"{path}: not a bench manifest ({_problems(e)}); it is written by `harnessrl bench run`: run the bench "
            "again to rewrite it, or move it away to report the run folders without it"
        ) from None


def read_report_file(path: str | Path, *, runs_required: bool = True) -> ReportFile:
    """A report's ``results.json``; an error naming the file when it is missing, not JSON, or not shaped like a
    bench report's (``runs_required``: it must have a ``runs`` list; else another command's results.json, which has
    none, reads with ``runs`` None)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HarnessRLError(f"{path}: not a readable results.json ({e})") from None
    if runs_required and (not isinstance(data, dict) or not isinstance(data.get("runs"), list)):
        raise HarnessRLError(f"{path}: no `runs` list (give the results.json a `harnessrl bench report` wrote)")
    try:
        return ReportFile.model_validate(data)
    except ValidationError as e:
        raise HarnessRLError(
            f"{path}: not a bench report's results.json ({_problems(e)}); give the results.json a "
            "`harnessrl bench report` wrote"
        ) from None
