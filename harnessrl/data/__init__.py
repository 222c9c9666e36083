"""Tasks and rubrics: the schema, loaders with per-row validation, and the bundled Rubric-Mix sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from harnessrl.data.loaders import ValidationReport, load_hf_dataset, load_tasks, validate_file
from harnessrl.data.schema import ChatMessage, Criterion, Task, prompt_text

__all__ = [
    "BENCH_DIR",
    "BUNDLED_DIR",
    "ChatMessage",
    "Criterion",
    "Task",
    "ValidationReport",
    "bundled_path",
    "data_path",
    "load_bundled",
    "load_hf_dataset",
    "load_judge_labels",
    "load_tasks",
    "prompt_text",
    "validate_file",
]

BUNDLED_DIR = Path(__file__).parent / "rubric_mix"
"""The bundled Rubric-Mix sample: ``train.jsonl``, ``heldout.jsonl`` (evaluation only), ``judge_labels.jsonl``."""


BENCH_DIR = Path(__file__).parent / "bench_suite"
"""The CPU benchmark suite (``harnessrl bench run --config configs/bench-cpu.yaml``): ``train.jsonl``,
``validation.jsonl``, ``test.jsonl``; tasks where plain GRPO on the embedded 135M policy measurably learns."""


def bundled_path(split: Literal["train", "heldout"] = "train") -> Path:
    """Path of a split of the bundled sample."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    return BUNDLED_DIR / f"{split}.jsonl"


def data_path(value: str, split: Literal["train", "validation", "test"]) -> Path:
    """A data setting as a file: ``bundled`` (the Rubric-Mix sample: its train file, or its held-out file for
    validation and test), ``bench`` (the CPU benchmark suite's file of that split), else a path."""
    if value == "bundled":
        return bundled_path("train" if split == "train" else "heldout")
    if value == "bench":
        return BENCH_DIR / f"{split}.jsonl"
    return Path(value)


def load_bundled(split: Literal["train", "heldout", "all"] = "train") -> list[Task]:
    """Load a split of the bundled sample ('all' = train + held-out, for tools that never train)."""
    if split == "all":
        return load_tasks(bundled_path("train")) + load_tasks(bundled_path("heldout"))
    return load_tasks(bundled_path(split))


def load_judge_labels(path: str | Path | None = None) -> list[dict]:
    """The hand-labelled judge agreement set (label 1: the response satisfies the criterion)."""
    path = Path(path) if path else BUNDLED_DIR / "judge_labels.jsonl"
    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} line {lineno}: not valid JSON ({e.msg})") from None
        missing = {"task_id", "criterion_id", "response", "label"} - row.keys()
        if missing or row["label"] not in (0, 1):
            raise ValueError(f"{path} line {lineno}: needs task_id, criterion_id, response and label 0/1")
        rows.append(row)
    return rows
