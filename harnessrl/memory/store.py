"""The training-time memory: per-step task statistics, failures and harness updates, in Chroma.

Three collections, named ``{namespace}-steps``, ``{namespace}-failures`` and ``{namespace}-updates``
(the namespace is the run's, so several runs can share one Chroma server):

- ``steps``: one document per task group per step (the :class:`GroupRecord` summary, plus the
  failures detected on it); metadata holds the group statistics, so a task's history is a metadata
  filter and similar situations on other tasks are a semantic search;
- ``failures``: one document per detected failure (its text description); the evidence is kept as
  JSON in the metadata;
- ``updates``: one document per harness update candidate (the failure it answers), with its payload,
  the critic's trial measurements, its verdict and, once known, its *outcome* (did the task's learning
  signal recover in the steps after it was applied).

This module holds :class:`TrainingMemory`, the one class callers use, and re-exports what they import
with it. Its parts, one module each:

- :mod:`~harnessrl.memory.chroma`: the client (embedded ``PersistentClient`` under ``run_dir/memory``,
  or a Chroma server), the collections, the idempotent batched upsert and the filtered search;
- :mod:`~harnessrl.memory.steps`, :mod:`~harnessrl.memory.failures`, :mod:`~harnessrl.memory.candidates`:
  what each collection's records are, how they are written and the queries the evolver's tools ask;
- :mod:`~harnessrl.memory.entries`: what a retrieval returns;
- :mod:`~harnessrl.memory.codec`: values as Chroma metadata and back;
- :mod:`~harnessrl.memory.embedding_function`: the packaged all-MiniLM-L6-v2 as Chroma's embedding function.
"""

from __future__ import annotations

from harnessrl.memory.candidates import CandidateMemory
from harnessrl.memory.embedding_function import MiniLMEmbeddingFunction
from harnessrl.memory.entries import CandidateEntry, FailureEntry, StepEntry
from harnessrl.memory.failures import FailureMemory
from harnessrl.memory.steps import StepMemory

__all__ = [
    "CandidateEntry",
    "FailureEntry",
    "MiniLMEmbeddingFunction",
    "StepEntry",
    "TrainingMemory",
]


class TrainingMemory(StepMemory, FailureMemory, CandidateMemory):
    """The run's training memory on Chroma. See the module docstring for what each collection holds.

    ``TrainingMemory(run_dir)`` opens (or creates) the embedded store ``run_dir/memory``;
    ``TrainingMemory(run_dir, url="http://127.0.0.1:8000")`` uses a Chroma server instead. Collections
    are prefixed by ``namespace``: by default ``harnessrl`` in the embedded store (it belongs to one run,
    and a renamed run directory still finds its records) and the run directory's name on a server
    (several runs share it: record the namespace with the run to find its memory again)."""
