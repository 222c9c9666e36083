"""A fourth interface as a plug-in: ``harnessrl-decoding`` (``examples/decoding``), installed in the test
environment through its ``harnessrl.interfaces`` entry point (``make setup`` installs it).

Nothing in HarnessRL names it. Installed, it must take every path an interface takes: the registry,
the harness and ``harness.json``, the MCP tool server (its builder tool), the attributor's choices and
prompt, the critic's trial on the frozen policy (fresh rollouts, rows shaped now vs with the
candidate), the commit, the training rows, the rule-based evolver (its ``suggest``) and the report.
The evolution point runs for real: the trainer-side service behind the MCP server over HTTP, the graph
in the MCP client; only the chat model (a script), the judge backend and the policy sampler are doubles.
"""

from __future__ import annotations

import asyncio
import json
from importlib.metadata import entry_points

import pytest
from helpers import FRUIT_TASKS, build, fruit_world

from harnessrl.agents import RuleBasedChatModel
from harnessrl.agents.testing import ScriptedChatModel, tool_call
from harnessrl.agents.tool_loop import context_message
from harnessrl.evolution.client import run_evolution_point
from harnessrl.evolution.mcp_server import ToolServer
from harnessrl.graph.state import GraphConfig, interface_menu
from harnessrl.interfaces import ENTRY_POINT_GROUP, Harness, interface_classes
from harnessrl.interfaces.tools import GetFailures, GetHarnessState
from harnessrl.trainer.run_report import write_report


@pytest.fixture(scope="module")
def decoding():
    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == "decoding"]
    assert found, (
        "the example interface is not installed: `pip install -e examples/decoding` (make setup does it); "
        "this test checks an installed plug-in"
    )
    cls = interface_classes()["decoding"]
    assert cls.__module__ == "harnessrl_decoding"  # the plug-in's own package, not HarnessRL's
    return cls


@pytest.fixture
def world(tmp_path, decoding):
    w = fruit_world(tmp_path)  # every rollout of "fruit" fails alike at steps 1 and 2; the policy explores
    return w.harness, w.service, w.run_dir, w.policy


def test_the_installed_plugin_takes_every_path(world):
    harness, service, run_dir, policy = world
    # the harness holds it, and the step's rows are shaped by it (nothing in force yet: no change)
    assert list(harness.versions) == ["task_sampling", "rollout_guidance", "rubric_criteria", "decoding"]
    fruit = harness.tasks["fruit"]
    assert harness.row(fruit, 0, 4).generation == {"temperature": 1.0}

    server = ToolServer(service)
    url, token = server.start()
    try:
        fid = service.get_failures(GetFailures()).failures[0].failure_id
        model = ScriptedChatModel(
            responses=[
                tool_call(
                    "submit_attribution",
                    {
                        "failure_id": fid,
                        "task_id": "fruit",
                        "interface": "decoding",
                        "rationale": "A hotter sample finds the banana: explore.",
                        "evidence": ["flat at 0.5 for 2 steps"],
                    },
                ),
                tool_call(
                    "set_decoding",
                    {"target": "fruit", "temperature": 1.4, "failure_id": fid, "rationale": "explore"},
                ),
            ]
        )
        events: list[tuple[str, dict]] = []

        def on_event(kind, payload):  # besides the server's record_event tool, which writes the events
            events.append((kind, payload))

        final = asyncio.run(run_evolution_point(url, token, model, GraphConfig(max_revisions=0), on_event))
    finally:
        server.stop()

    # the tool server serves its builder; the attributor was offered it, in its prompt and submit tool
    attributor_prompt = model.received[0][0].content
    assert "`decoding`" in attributor_prompt and "`decoding`" in interface_menu()
    assert "set_decoding" in model.bound_tools  # the proposer's tools, from the MCP server
    # the critic measured it on the frozen policy: fresh rollouts, the arms at 1.0 and 1.4
    trial = next(p for k, p in events if k == "trial")
    assert trial["accepted"] is True and trial["interface"] == "decoding" and trial["metric"] == "signal_share"
    row = trial["measurements"]["tasks"][0]
    assert row["temperature"] == {"baseline": 1.0, "candidate": 1.4}
    assert trial["cost"]["rollouts"] > 0 and {t for _, t in policy.calls} == {1.0, 1.4}
    # the commit applied it, harness.json holds it, and the next step's rows carry it
    assert [o.status for o in final["outcomes"]] == ["committed"]
    assert harness.versions["decoding"] == 1
    assert harness.row(fruit, 0, 4).generation == {"temperature": 1.4}
    assert harness.row(harness.tasks["sea"], 0, 4).generation == {"temperature": 1.0}
    saved = json.loads(run_dir.harness.read_text())
    assert saved["decoding"]["per_task"]["fruit"]["temperature"] == 1.4
    back = Harness.load(run_dir.harness, FRUIT_TASKS)
    assert back.versions == harness.versions and back.row(fruit, 0, 4).generation == {"temperature": 1.4}
    # the decision trace names it at every step
    written = run_dir.read("events.jsonl")
    assert {(e["kind"], e.get("interface")) for e in written} >= {
        ("attribution", "decoding"),
        ("proposal", "decoding"),
        ("commit", "decoding"),
    }
    # the report shows it: its version, its candidate and commit, and the rule in force
    run_dir.config.write_text("method: harnessrl\n")  # as `harnessrl train` writes it first (the world has none)
    html = write_report(run_dir.path).read_text()
    section = html[html.index("<h2>Harness</h2>") :]
    assert "<td>decoding</td><td>1</td><td>1</td><td>1</td>" in section
    assert "fruit" in section and "1.4" in section


def test_the_rule_based_evolver_proposes_through_the_plugin(world):
    _harness, service, _run_dir, _policy = world
    failure = service.get_failures(GetFailures()).failures[0].model_dump()
    task = service.get_harness_state(GetHarnessState(task_id="fruit")).task.model_dump()
    assert task["decoding"] is None and task["temperature"] == 1.0  # every interface's view of the task
    model = RuleBasedChatModel().bind_tools([{"name": "set_decoding", "description": "", "parameters": {}}])
    messages = [
        context_message(
            "Propose one candidate update.",
            {"failure": failure, "attribution": {"interface": "decoding", "evidence": []}},
        )
    ]
    call = model.decide(messages).tool_calls[0]
    assert call["name"] == "set_decoding"
    assert call["args"]["target"] == "fruit" and call["args"]["temperature"] == 1.3
    candidate = build(service, "decoding", **call["args"])
    assert candidate.preview["rule_after"]["temperature"] == 1.3


def test_a_plugin_by_dotted_path_and_its_settings(decoding):
    harness = Harness(
        FRUIT_TASKS, interfaces=["harnessrl_decoding:Decoding"], settings={"decoding": {"max_temperature": 1.2}}
    )
    assert harness.interfaces["decoding"].max_temperature == 1.2
    from harnessrl.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown decoding setting"):
        Harness(FRUIT_TASKS, settings={"decoding": {"max_temp": 2}})
    with pytest.raises(ConfigError, match="cannot be imported"):
        Harness(FRUIT_TASKS, interfaces=["harnessrl_nowhere:Nothing"])
