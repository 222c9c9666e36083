"""Tasks and rubrics: the schema, loaders with per-row validation, judge labels, and the bundled Rubric-Mix sample."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from harnessrl.data.labels import JudgeLabel, LabelReport, validate_labels_file
from harnessrl.data.loaders import ValidationReport, load_hf_dataset, load_tasks, validate_file
from harnessrl.data.schema import ChatMessage, Criterion, Task, prompt_text

__all__ = [
    "BENCH_DIR",
    "BENCH_GOLD_DIR",
    "BUNDLED_DIR",
    "ChatMessage",
    "Criterion",
    "JudgeLabel",
    "LabelReport",
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
    "validate_labels_file",
]

BUNDLED_DIR = Path(__file__).parent / "rubric_mix"
"""The bundled Rubric-Mix sample: ``train.jsonl``, ``heldout.jsonl`` (evaluation only), ``judge_labels.jsonl``."""


BENCH_DIR = Path(__file__).parent / "bench_suite"
"""The CPU benchmark suite (``harnessrl bench run --config configs/bench-cpu.yaml``): ``train.jsonl``,
``validation.jsonl``, ``test.jsonl``; tasks where plain GRPO on the embedded 135M policy measurably learns."""


BENCH_GOLD_DIR = Path(__file__).parent / "bench_gold"
"""The gold-graded benchmark suite (``configs/bench-gold.yaml``): task families whose training rubrics carry
injected reward failures, each task with a ``gold_rubric`` that evaluation grades with (see its README.md)."""

BENCH_UNSTATED_DIR = Path(__file__).parent / "bench_unstated"
"""The unstated-failures gold suite (``configs/bench-unstated.yaml``): task families whose training rubrics fail in a
way no prompt states (a reward that pays length or a format, a lax rubric, a requirement out of reach), each task
with a ``gold_rubric`` that evaluation grades with (see its README.md)."""

_SUITES = {"bench": BENCH_DIR, "bench-gold": BENCH_GOLD_DIR, "bench-unstated": BENCH_UNSTATED_DIR}


def bundled_path(split: Literal["train", "heldout"] = "train") -> Path:
    """Path of a split of the bundled sample."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    return BUNDLED_DIR / f"{split}.jsonl"


def data_path(value: str, split: Literal["train", "validation", "test"]) -> Path:
    """A data setting as a file: ``bundled`` (the Rubric-Mix sample: its train file, or its held-out file for
    validation and test), ``bench`` (the CPU benchmark suite's file of that split), ``bench-gold`` (the
    gold-graded suite's), ``bench-unstated`` (the unstated-failures suite's), else a path."""
    if value == "bundled":
        return bundled_path("train" if split == "train" else "heldout")
    if value in _SUITES:
        return _SUITES[value] / f"{split}.jsonl"
    return Path(value)


def load_bundled(split: Literal["train", "heldout", "all"] = "train") -> list[Task]:
    """Load a split of the bundled sample ('all' = train + held-out, for tools that never train)."""
    if split == "all":
        return load_tasks(bundled_path("train")) + load_tasks(bundled_path("heldout"))
    return load_tasks(bundled_path(split))


def load_judge_labels(path: str | Path | None = None, tasks: list[Task] | None = None) -> list[JudgeLabel]:
    """Labelled judge verdicts (label 1: the response does what the criterion says), every row checked.

    Args:
        path: a labels file (see :mod:`harnessrl.data.labels`); default: the bundled hand-labelled set.
        tasks: what rows naming a ``task_id`` refer to; default: the bundled sample (train and held-out).

    Raises:
        DataValidationError: listing each bad row.
    """
    source = "the bundled sample" if tasks is None else "the tasks given"
    if tasks is None:
        tasks = load_bundled("all")
    return validate_labels_file(path or BUNDLED_DIR / "judge_labels.jsonl", tasks, source).raise_if_invalid()
