"""LangSmith traces of evolution points, against a fake LangSmith endpoint on loopback.

The evolution point runs for real (the trainer-side service behind the MCP tool server over HTTP, the
graph in the MCP client, the critic's trials on a frozen policy); only the chat model (a script), the
judge backend and the policy sampler are doubles. The fake endpoint answers LangSmith's ``/info`` and
records what the client posts to ``/runs/multipart`` (zstd-compressed or not) or ``/runs/batch``; the
test merges the posts and patches of each run as LangSmith does and reads the trace back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from email import policy
from email.parser import BytesParser
from typing import Any

import pytest
from helpers import fruit_world
from werkzeug import Request, Response

from harnessrl.agents.testing import ScriptedChatModel, tool_call
from harnessrl.evolution.client import run_evolution_point
from harnessrl.evolution.mcp_server import ToolServer
from harnessrl.graph import tracing
from harnessrl.graph.state import GraphConfig
from harnessrl.interfaces.tools import GetFailures

LANGSMITH_VARS = ("TRACING", "TRACING_V2", "ENDPOINT", "API_KEY", "PROJECT")


class FakeLangSmith:
    """What a LangSmith endpoint received: every request, and the runs merged from their posts and patches."""

    def __init__(self, httpserver, multipart: bool):
        self.requests: list[str] = []
        self.compressed = False
        self.runs: dict[str, dict[str, Any]] = {}
        info = {
            "version": "0.0-fake",
            "batch_ingest_config": {
                "use_multipart_endpoint": multipart,
                "size_limit": 100,
                "size_limit_bytes": 20_971_520,
                "scale_up_nthreads_limit": 16,
                "scale_up_qsize_trigger": 1000,
                "scale_down_nempty_trigger": 4,
            },
            "instance_flags": {"zstd_compression_enabled": multipart},
        }
        httpserver.expect_request("/info").respond_with_json(info)
        httpserver.expect_request("/runs/multipart", method="POST").respond_with_handler(self._multipart)
        httpserver.expect_request("/runs/batch", method="POST").respond_with_handler(self._batch)
        self.url = httpserver.url_for("/").rstrip("/")

    def _merge(self, operation: str, run_id: str, fields: dict[str, Any]) -> None:
        run = self.runs.setdefault(run_id, {"id": run_id})
        run.update(fields if operation == "post" else {k: v for k, v in fields.items() if v is not None})

    def _multipart(self, request: Request) -> Response:
        self.requests.append(request.path)
        body = request.get_data()
        if request.headers.get("Content-Encoding") == "zstd":
            import zstandard

            self.compressed = True
            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        head = f"Content-Type: {request.headers['Content-Type']}\r\n\r\n".encode()
        message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            operation, run_id, *field = name.split(".")
            if operation not in ("post", "patch"):
                continue
            value = json.loads(part.get_payload(decode=True))
            self._merge(operation, run_id, {field[0]: value} if field else value)
        return Response("{}", status=202, content_type="application/json")

    def _batch(self, request: Request) -> Response:
        self.requests.append(request.path)
        body = request.get_json()
        for operation in ("post", "patch"):
            for run in body.get(operation) or []:
                self._merge(operation, str(run["id"]), run)
        return Response("{}", status=202, content_type="application/json")

    # reading the trace
    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if r.get("name") == name]


def metadata(run: dict[str, Any]) -> dict[str, Any]:
    return (run.get("extra") or {}).get("metadata") or {}


@pytest.fixture
def langsmith_env(monkeypatch):
    """``langsmith_env(**values)`` sets exactly these LangSmith variables (TRACING="true", ...; the rest
    unset) and makes LangSmith and HarnessRL read them afresh; undone after the test."""

    def set_env(**values: str) -> None:
        for var in LANGSMITH_VARS:
            for namespace in ("LANGSMITH", "LANGCHAIN"):
                monkeypatch.delenv(f"{namespace}_{var}", raising=False)
        for var, value in values.items():
            monkeypatch.setenv(f"LANGSMITH_{var}", value)
        tracing.reset()

    yield set_env
    monkeypatch.undo()
    tracing.reset(timeout=0)


@pytest.fixture
def world(tmp_path):
    w = fruit_world(tmp_path)  # every rollout of "fruit" fails alike at steps 1 and 2; the policy explores
    server = ToolServer(w.service)
    url, token = server.start()
    yield w.service, w.run_dir, url, token
    server.stop()


def run_point(world, external: bool = False) -> dict[str, Any]:
    """One evolution point at step 2: a rubric candidate (rejected: the same answers still score alike),
    then, revised, a guidance candidate that samples hotter (accepted and committed). ``external``: as
    ``harnessrl evolver`` runs it (it holds training first and learns the step from the hold)."""
    service, run_dir, url, token = world
    listed = service.get_failures(GetFailures()).failures  # none after a first point: it handled the failure
    fid = listed[0].failure_id if listed else "handled"
    model = ScriptedChatModel(
        responses=[
            tool_call(
                "submit_attribution",
                {
                    "failure_id": fid,
                    "task_id": "fruit",
                    "interface": "rubric_criteria",
                    "rationale": "The rubric cannot tell these answers apart.",
                    "evidence": ["flat at 0.5 for 2 steps"],
                },
            ),
            tool_call(
                "edit_rubric",
                {
                    "task_id": "fruit",
                    "add": [{"id": "ripe", "text": "Says whether the fruit is ripe", "weight": 1}],
                    "failure_id": fid,
                    "rationale": "a stricter criterion",
                },
            ),
            tool_call(
                "set_guidance",
                {
                    "target": "fruit",
                    "text": "Think of tropical fruit.",
                    "fraction": 0.5,
                    "temperature": 1.4,
                    "failure_id": fid,
                    "rationale": "explore",
                },
            ),
        ]
    )
    config = GraphConfig(max_revisions=1, fallback_interface="rollout_guidance")
    if external:
        point = run_evolution_point(url, token, model, config, hold_s=30, run_dir=run_dir.path)
    else:
        point = run_evolution_point(url, token, model, config, run_dir=run_dir.path, step=2)
    return asyncio.run(point)


def assert_decisions_recorded(final, run_dir) -> None:
    assert [o.status for o in final["outcomes"]] == ["committed"]
    kinds = [e["kind"] for e in run_dir.read("events.jsonl")]
    assert kinds.count("verdict") == 2 and "commit" in kinds


@pytest.mark.parametrize(
    ("multipart", "external"), [(True, False), (False, True)], ids=["multipart-zstd/in-process", "batch/external"]
)
def test_one_trace_per_point_named_tagged_and_annotated(world, httpserver, langsmith_env, multipart, external):
    fake = FakeLangSmith(httpserver, multipart)
    langsmith_env(TRACING="true", ENDPOINT=fake.url, API_KEY="lsv2-test-key", PROJECT="harnessrl-tests")
    final = run_point(world, external)
    tracing.flush(timeout=30)
    run_dir = world[1]
    assert_decisions_recorded(final, run_dir)
    assert set(fake.requests) == {"/runs/multipart" if multipart else "/runs/batch"}
    assert fake.compressed is multipart  # zstd multipart where the server offers it, else a JSON batch

    # one trace: one root, the evolution point, and every run in it
    roots = [r for r in fake.runs.values() if not r.get("parent_run_id")]
    assert [r["name"] for r in roots] == [tracing.POINT_RUN_NAME]
    root = roots[0]
    assert {r["trace_id"] for r in fake.runs.values()} == {root["id"]}
    assert {"harnessrl", "evolution-point"} <= set(root["tags"])
    assert metadata(root)["run_dir"] == str(run_dir.path.resolve()) and metadata(root)["step"] == 2
    assert all(metadata(r).get("step") == 2 and "harnessrl" in r["tags"] for r in fake.runs.values())

    # runs named after the graph's nodes and the tools (the MCP server's and the attributor's own)
    names = {r["name"] for r in fake.runs.values()}
    assert {"fetch_failures", "select_failure", "attributor", "proposer", "critic", "commit"} <= names
    assert {"get_failures", "submit_attribution", "edit_rubric", "set_guidance"} <= names
    assert {"run_frozen_policy_trial", "commit_update", "record_event"} <= names
    assert not names & {"hold_training", "release_training"}  # the plumbing around the point stays out
    assert all(r.get("session_name") == "harnessrl-tests" for r in fake.runs.values())
    assert len(fake.named("critic")) == 2 and len(fake.named("proposer")) == 2

    # "all rejected rubric candidates": a filter on two tags finds the critic's run of the first candidate
    rejected = [r for r in fake.runs.values() if {"rubric_criteria", "rejected"} <= set(r["tags"])]
    assert [r["name"] for r in rejected] == ["critic"]
    meta = metadata(rejected[0])
    assert meta["task_id"] == "fruit" and meta["failure_kind"] == "non_discriminative_low"
    assert meta["interface"] == "rubric_criteria" and meta["verdict"] == "rejected" and meta["revision"] == 0
    assert meta["candidate_id"] and meta["trial_judge_calls"] > 0 and "trial_rollouts" in meta
    assert "non_discriminative_low" in rejected[0]["tags"]

    accepted = next(r for r in fake.named("critic") if metadata(r)["verdict"] == "accepted")
    meta = metadata(accepted)
    assert meta["interface"] == "rollout_guidance" and meta["attributed_interface"] == "rubric_criteria"
    assert meta["revision"] == 1 and meta["trial_rollouts"] > 0
    assert meta["candidate_id"] != metadata(rejected[0])["candidate_id"]
    assert {"rollout_guidance", "accepted"} <= set(accepted["tags"])
    commit = fake.named("commit")[0]
    assert metadata(commit)["outcome"] == "committed" and metadata(commit)["candidate_id"] == meta["candidate_id"]

    # the tool runs inside a node carry what the node is about
    by_id = fake.runs
    trials = fake.named("run_frozen_policy_trial")
    assert len(trials) == 2
    for trial in trials:
        parent = by_id[trial["parent_run_id"]]
        assert parent["name"] == "critic"
        assert metadata(trial)["candidate_id"] == metadata(parent)["candidate_id"]
        assert metadata(trial)["task_id"] == "fruit" and metadata(trial)["run_dir"] == metadata(root)["run_dir"]


def test_nothing_is_sent_without_the_variables(world, httpserver, langsmith_env):
    fake = FakeLangSmith(httpserver, multipart=True)
    langsmith_env(ENDPOINT=fake.url, API_KEY="lsv2-test-key")  # where traces would go, but tracing is not on
    final = run_point(world)
    tracing.flush(timeout=5)
    assert_decisions_recorded(final, world[1])
    assert httpserver.log == []


def test_an_unreachable_endpoint_is_one_warning_and_the_point_goes_on(world, langsmith_env, caplog):
    with socket.socket() as s:  # a loopback port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    langsmith_env(TRACING="true", ENDPOINT=f"http://127.0.0.1:{port}", API_KEY="lsv2-test-key")
    with caplog.at_level(logging.WARNING):
        final = run_point(world)
        assert_decisions_recorded(final, world[1])
        run_point(world)  # a second point in the same process (nothing left to handle, still traced): no second warning
        tracing.flush(timeout=5)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "LangSmith" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert f"127.0.0.1:{port}" in warnings[0].getMessage() and "events.jsonl" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("langsmith") and r.levelno >= logging.WARNING]


def test_a_hosted_endpoint_without_a_key_is_one_warning(world, langsmith_env, caplog):
    langsmith_env(TRACING="true", ENDPOINT="https://langsmith.invalid")
    with caplog.at_level(logging.WARNING):
        final = run_point(world)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "LangSmith" in r.getMessage()]
    assert len(warnings) == 1 and "LANGSMITH_API_KEY" in warnings[0].getMessage()
    assert_decisions_recorded(final, world[1])
