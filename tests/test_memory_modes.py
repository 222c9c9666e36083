"""The evolver in every memory configuration a run supports: memory off, embedded, on a Chroma server.

Each test runs one real evolution point on the fruit world (every rollout of "fruit" fails alike; the
frozen policy finds the banana only when it samples hot): the trainer-side service behind the MCP tool
server, the graph in the MCP client, the rule-based evolver as its model (it reads ``query_memory``
before attributing). The point must handle the failure and record its decisions in every
configuration; where there is a memory, its candidates and verdicts must land there and the memory
tools must answer from them.

Memory off runs in a child process in which ``chromadb`` cannot be imported (an import finder refuses
it and notes who asked), as on a machine without it: nothing on the evolver's path may reach for it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import chroma_server, fruit_world, sdk_calls

from harnessrl.agents import RuleBasedChatModel
from harnessrl.evolution.client import run_evolution_point
from harnessrl.evolution.mcp_server import ToolServer
from harnessrl.evolution.service import EvolutionService
from harnessrl.graph.state import GraphConfig

FAILURE_TEXT = "non discriminative low: every rollout of fruit scored 0.5"
"""The fruit failure as the memory words it (what the evolver searches ``what_worked`` with)."""

READS = [
    ("get_failures", {}),
    ("query_memory", {"mode": "task_history", "task_id": "fruit"}),
    ("query_memory", {"mode": "what_worked", "text": FAILURE_TEXT, "kind": "non_discriminative_low"}),
]


def evolve(service: EvolutionService) -> dict[str, Any]:
    """One evolution point against ``service`` behind a real tool server, then the read tools' answers over
    MCP, as JSON (what the memory-off child prints): ``outcomes``, and ``get_failures``, ``task_history``,
    ``what_worked`` (each the tool's structured result, or its error text)."""
    server = ToolServer(service)
    url, token = server.start()
    try:
        final = asyncio.run(run_evolution_point(url, token, RuleBasedChatModel(), GraphConfig()))
        results = asyncio.run(sdk_calls(url, token, READS))
    finally:
        server.stop()
    out: dict[str, Any] = {"outcomes": [o.model_dump(mode="json") for o in final["outcomes"]]}
    for (name, args), r in zip(READS, results, strict=True):
        answer = {"error": " ".join(getattr(b, "text", "") for b in r.content)} if r.isError else r.structuredContent
        out[args.get("mode", name)] = answer
    return out


def assert_handled_and_recorded(point: dict[str, Any], events: list[dict], failure_id: str) -> None:
    """The point handled the failure (committed a measured candidate), ``get_failures`` leaves it out since
    (handled), and the run's events hold each decision in order."""
    listed = point["get_failures"]
    assert "error" not in listed, listed
    assert listed["failures"] == [] and listed["handled"] == 1
    (outcome,) = point["outcomes"]
    assert outcome["failure_id"] == failure_id
    assert outcome["status"] == "committed", outcome  # a first guidance rejected, its revision (hotter) accepted
    assert outcome["interface"] == "rollout_guidance" and outcome["revisions"] == 1
    decisions = [(e["kind"], e.get("verdict")) for e in events if e.get("failure_id") == failure_id]
    assert decisions == [
        ("attribution", None),
        ("proposal", None),
        ("trial", None),
        ("verdict", "rejected"),
        ("proposal", None),
        ("trial", None),
        ("verdict", "accepted"),
        ("commit", None),
        ("failure_handled", None),
    ]
    assert next(e for e in events if e["kind"] == "commit")["candidate_id"] == outcome["candidate_id"]


def assert_remembered(memory, point: dict[str, Any], failure_id: str) -> None:
    """Both candidates and their verdicts are in ``memory``, the failure carries its attribution, and the
    memory tools answered from them."""
    committed = point["outcomes"][0]["candidate_id"]
    stored = memory.candidates(task_id="fruit")
    assert [(c.verdict, c.interface) for c in stored] == [
        ("rejected", "rollout_guidance"),
        ("committed", "rollout_guidance"),
    ]
    assert stored[1].id == committed and stored[1].parent_id == stored[0].id and stored[1].applied_step == 3
    for c in stored:
        assert c.failure_ids == [failure_id] and c.attribution  # the attributor's rationale came along
        assert c.trials and c.trials[-1]["candidate_id"] == c.id
    assert [f.interface for f in memory.failures(task_id="fruit")] == ["rollout_guidance"]

    worked = point["what_worked"]
    assert "error" not in worked, worked
    assert [i["id"] for i in worked["items"]] == [committed]  # the rejected one did not work
    assert worked["items"][0]["verdict"] == "committed" and worked["items"][0]["similarity"] > 0.9
    history = point["task_history"]
    assert "error" not in history, history
    steps = [i for i in history["items"] if i["record"] == "step"]
    assert [(s["step"], s.get("failures", [])) for s in steps] == [(1, []), (2, ["non_discriminative_low"])]
    assert [(i["id"], i["verdict"]) for i in history["items"] if i["record"] == "update"] == [
        (stored[0].id, "rejected"),
        (committed, "committed"),
    ]


# ------------------------------------------------------------------------------------------ memory off


CHILD = """
import json, sys
from importlib.abc import MetaPathFinder

class RefuseChromadb(MetaPathFinder):  # chromadb missing, as where it is not installed; notes who asked for it
    asked = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "chromadb":
            self.asked.append(name)
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, RefuseChromadb())
import test_memory_modes  # then harnessrl, the tests' helpers and the MCP and LangChain stacks

point = test_memory_modes.memory_off_point(sys.argv[1])
print(json.dumps({"point": point, "chromadb_asked": RefuseChromadb.asked}))
"""
"""The memory-off child process: chromadb made missing before anything else is imported, then one point."""


def memory_off_point(run_path: str) -> dict[str, Any]:
    """The fruit world with ``memory=None`` at ``run_path`` and one evolution point on it (:func:`evolve`)."""
    world = fruit_world(Path(run_path))
    assert world.service.memory is None
    return evolve(world.service)


def test_memory_off_without_chromadb(tmp_path):
    run_path = tmp_path / "run"
    here = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_path)], capture_output=True, text=True, env=env, cwd=here, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    assert child["chromadb_asked"] == [], child  # nothing even tried
    assert "chromadb" not in proc.stderr  # no logged failure of a memory write either

    point = child["point"]
    world_events = [json.loads(line) for line in (run_path / "events.jsonl").read_text().splitlines()]
    failure_id = point["outcomes"][0]["failure_id"]
    assert_handled_and_recorded(point, world_events, failure_id)
    # the memory tool answers, empty, and says why; the evolver decided from the failure alone
    for mode in ("task_history", "what_worked"):
        assert point[mode] == {
            "mode": mode,
            "items": [],
            "note": "this run keeps no training memory: decide from the failures",
        }
    assert not (run_path / "memory").exists()


# ------------------------------------------------------------------------------------------ memory on


@pytest.fixture
def embedded_memory(tmp_path) -> Iterator[Any]:
    from harnessrl.memory.store import TrainingMemory

    memory = TrainingMemory(tmp_path / "run")
    yield memory
    memory.close()


def test_memory_embedded(tmp_path, embedded_memory):
    world = fruit_world(tmp_path / "run", memory=embedded_memory)
    point = evolve(world.service)
    assert_handled_and_recorded(point, world.events(), world.failure_id)
    assert_remembered(embedded_memory, point, world.failure_id)
    assert embedded_memory.location == str(tmp_path / "run" / "memory")

    from harnessrl.memory.store import TrainingMemory

    with TrainingMemory(tmp_path / "run") as reopened:  # on disk in the run directory
        assert [c.verdict for c in reopened.candidates(task_id="fruit")] == ["rejected", "committed"]


@pytest.fixture
def server_memory(tmp_path) -> Iterator[Any]:
    from harnessrl.memory.store import TrainingMemory

    with chroma_server(tmp_path / "chroma") as url:
        memory = TrainingMemory(tmp_path / "run", url=url)
        yield memory
        memory.close()


def test_memory_on_a_chroma_server(tmp_path, server_memory):
    world = fruit_world(tmp_path / "run", memory=server_memory)
    point = evolve(world.service)
    assert_handled_and_recorded(point, world.events(), world.failure_id)
    assert_remembered(server_memory, point, world.failure_id)
    assert not (tmp_path / "run" / "memory").exists()  # nothing embedded: the records are on the server

    from harnessrl.memory.store import TrainingMemory

    # another client of the server (another process would do the same) finds them under the run's namespace
    with TrainingMemory(url=server_memory.location, namespace=server_memory.namespace) as other:
        assert [c.verdict for c in other.candidates(task_id="fruit")] == ["rejected", "committed"]
