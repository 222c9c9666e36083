"""The evolver's tools: EvolutionService in-process, and over a real MCP streamable-HTTP server on loopback,
called through the SDK's client and through langchain-mcp-adapters (what the graph uses)."""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import threading
import time

import httpx
import pytest
from helpers import build, call_tool, sdk_calls
from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from harnessrl.critic.trials import TrialCost, TrialResult
from harnessrl.data.schema import Task
from harnessrl.errors import HarnessRLError
from harnessrl.evolution.mcp_server import SSE_WRITER_MESSAGE, ToolServer
from harnessrl.evolution.service import CandidateError, EvolutionService
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks
from harnessrl.interfaces.registry import BUILTIN
from harnessrl.interfaces.tools import (
    Candidate,
    CommitResult,
    CommitUpdate,
    FailureList,
    GetFailures,
    HarnessView,
    InspectRollouts,
    MemoryResult,
    QueryMemory,
    RolloutList,
    RunTrial,
    flat_parameters,
    tool_table,
)
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord, group_stats

# --------------------------------------------------------------------------------------------- fixtures


def make_tasks() -> list[Task]:
    rubric = [
        {"id": "c1", "text": "States the main fact correctly.", "weight": 2.0},
        {"id": "c2", "text": "Explains the reasoning.", "weight": 1.0},
        {"id": "p1", "text": "Pads the answer with filler.", "weight": -1.0},
    ]
    return [
        Task(
            id="t1",
            domain="science",
            prompt="Why is the sky blue?",
            reference_answer="Rayleigh scattering.",
            rubric=rubric,
        ),
        Task(id="t2", domain="science", prompt="What is entropy?", rubric=rubric),
        Task(id="t3", domain="medical", prompt="What does insulin do?", rubric=rubric),
    ]


def make_step(step: int, rewards: dict[str, list[float]], long_text: bool = False) -> tuple[StepRecord, list]:
    groups, rollouts = [], []
    for tid, rs in rewards.items():
        mean, std = group_stats(rs)
        lengths = [10 * (i + 1) for i in range(len(rs))]
        groups.append(
            GroupRecord(
                step=step,
                task_id=tid,
                domain="medical" if tid == "t3" else "science",
                rubric_version=0,
                rewards=rs,
                mean=mean,
                std=std,
                flat=std < 0.02,
                lengths=lengths,
                criterion_means={"c1": mean, "c2": 0.5, "p1": 0.0},
            )
        )
        for i, r in enumerate(rs):
            text = f"answer {i} to {tid} at step {step}" + (" filler" * 400 if long_text and i == 0 else "")
            rollouts.append(
                RolloutRecord(
                    step=step,
                    task_id=tid,
                    member=i,
                    guided=False,
                    rubric_version=0,
                    temperature=1.0,
                    completion=text,
                    length_tokens=lengths[i],
                    length_words=len(text.split()),
                    reward=r,
                    verdicts={"c1": r, "c2": 0.5, "p1": 0.0},
                )
            )
    return StepRecord(step=step, groups=groups), rollouts


def make_failures() -> list[Failure]:
    low = dict(
        kind="non_discriminative_low",
        task_id="t2",
        domain="science",
        rubric_version=0,
        interface_hint="rollout_guidance",
        evidence={"mean": 0.05, "std": 0.0},
    )
    return [
        Failure(step=1, summary="t2: every rollout scored 0.05 (std 0.00)", **low),
        Failure(step=2, summary="t2: every rollout scored 0.05 (std 0.00) again", **low),
        Failure(
            kind="spurious_length",
            step=2,
            task_id="t1",
            domain="science",
            rubric_version=0,
            interface_hint="rubric_criteria",
            evidence={"feature": "length", "rho": 0.9},
            summary="t1: reward rises with length (rho 0.90 over 8 rollouts)",
        ),
    ]


class FakeTrials:
    """A trials object: accepts every candidate unless its rationale starts with 'reject'."""

    def __init__(self):
        self.calls = []

    def run(self, update, candidate_id, failure=None):
        self.calls.append((update, candidate_id, failure))
        accepted = not update.rationale.startswith("reject")
        return TrialResult(
            candidate_id=candidate_id,
            interface=update.interface,
            metric="group_reward_std",
            baseline=0.0,
            candidate=0.2 if accepted else 0.0,
            improvement=0.2 if accepted else 0.0,
            ci_low=0.1 if accepted else -0.1,
            ci_high=0.3,
            accepted=accepted,
            verdict_kind="accepted" if accepted else "not_reliable",
            reason="interval above 0" if accepted else "interval includes 0",
            measurements={"n": 8},
            cost=TrialCost(rollouts=0, judge_calls=8, seconds=0.01),
        )


class World:
    """A small run: three tasks, two recorded steps, three failures, a run directory."""

    def __init__(self, tmp_path, memory=None):
        self.tasks = make_tasks()
        self.harness = Harness(self.tasks)
        self.recorder = Recorder(None)
        for step, kw in ((1, {}), (2, {"long_text": True})):
            rec, rolls = make_step(
                step, {"t1": [0.1, 0.4, 0.7, 0.9], "t2": [0.05] * 4, "t3": [0.2, 0.5, 0.6, 0.3]}, **kw
            )
            self.recorder.add(rec, rolls)
        self.failures = make_failures()
        self.step = 2
        self.run_dir = RunDir(tmp_path / "run")
        self.harness.save(self.run_dir.harness)
        self.trials = FakeTrials()
        self.memory = memory
        self.service = EvolutionService(
            self.harness,
            self.recorder,
            memory,
            self.trials,
            self.run_dir,
            failures=lambda: self.failures,
            step=lambda: self.step,
        )

    def events(self, kind=None):
        return [e for e in self.run_dir.read("events.jsonl") if kind is None or e["kind"] == kind]

    def fid(self, kind):
        return next(f.failure_id for f in self.service.get_failures(GetFailures()).failures if f.kind == kind)


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


@pytest.fixture
def served(world):
    server = ToolServer(world.service)
    url, token = server.start()
    yield world, url, token
    server.stop()


def run(coro):
    return asyncio.run(coro)


def auth(token):
    return {"Authorization": f"Bearer {token}"}


async def lc_session(url, token, body):
    """Open one langchain-mcp-adapters session, load the tools, run ``body(tools)``."""
    client = MultiServerMCPClient({"harnessrl": {"transport": "streamable_http", "url": url, "headers": auth(token)}})
    async with client.session("harnessrl") as session:
        tools = {t.name: t for t in await load_mcp_tools(session)}
        return await body(tools)


async def lc_call(tool, args, call_id="call-1") -> ToolMessage:
    return await tool.ainvoke({"type": "tool_call", "id": call_id, "name": tool.name, "args": args})


def text_of(msg: ToolMessage) -> str:
    content = msg.content
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


# --------------------------------------------------------------------------------------------- schemas


TOOLS = tool_table()  # every registered interface's builder (an installed plug-in's too)
BUILTIN_TOOLS = {
    "get_failures",
    "query_memory",
    "inspect_rollouts",
    "get_harness_state",
    *(c.builder_tool for c in BUILTIN),
    "run_frozen_policy_trial",
    "commit_update",
}


def test_tool_table_is_flat_and_documented():
    assert [t for t in TOOLS if t in BUILTIN_TOOLS] == [
        "get_failures",
        "query_memory",
        "inspect_rollouts",
        "get_harness_state",
        "reweight_tasks",
        "set_guidance",
        "edit_rubric",
        "run_frozen_policy_trial",
        "commit_update",
    ]
    names = {n: [p.name for p in flat_parameters(s.args)] for n, s in TOOLS.items()}
    assert names["reweight_tasks"] == [
        "task_ids",
        "action",
        "weight",
        "park_steps",
        "rationale",
        "remedy",
        "failure_id",
    ]
    assert "signature" not in names["edit_rubric"] and "cover" not in names["edit_rubric"]  # the trainer's to fill
    assert names["query_memory"] == ["mode", "task_id", "text", "kind", "interface", "n"]  # a filter, kept
    assert "interface" not in names["edit_rubric"]  # the update's tag is implied by the tool
    for spec in TOOLS.values():
        assert spec.description.strip(), spec.name
    assert "applies nothing" in TOOLS["set_guidance"].description
    assert TOOLS["set_guidance"].description.startswith("Guide part of each rollout group")


def test_mcp_lists_every_tool_with_flat_inputs_and_output_schemas(served):
    _world, url, token = served

    async def body():
        async with (
            create_mcp_http_client(headers=auth(token)) as http,
            streamable_http_client(url, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return (await session.list_tools()).tools

    tools = {t.name: t for t in run(body())}
    assert set(tools) == set(TOOLS)
    rw = tools["reweight_tasks"].inputSchema
    assert "args" not in rw["properties"] and rw["required"] == ["task_ids"]
    assert rw["properties"]["weight"]["anyOf"][0]["exclusiveMinimum"] == 0  # constraints carried over
    assert "add" in tools["edit_rubric"].inputSchema["properties"]
    for t in tools.values():
        assert t.outputSchema is not None, t.name
        assert t.description == TOOLS[t.name].description
    assert tools["get_failures"].annotations.readOnlyHint is True
    assert tools["commit_update"].annotations.readOnlyHint is False


# --------------------------------------------------------------------------------------------- round trips


def test_every_tool_round_trips_through_the_sdk_client(served):
    world, url, token = served
    low = world.fid("non_discriminative_low")
    results = run(
        sdk_calls(
            url,
            token,
            [
                ("get_failures", {"limit": 5}),
                ("query_memory", {"mode": "task_history", "task_id": "t2"}),
                ("inspect_rollouts", {"task_id": "t1", "steps": 2, "limit": 3}),
                ("get_harness_state", {"task_id": "t2"}),
                ("reweight_tasks", {"task_ids": ["t3"], "weight": 2.0, "failure_id": low}),
                (
                    "set_guidance",
                    {"target": "t2", "text": "Start from the definition.", "fraction": 0.5, "failure_id": low},
                ),
                (
                    "edit_rubric",
                    {
                        "task_id": "t1",
                        "add": [
                            {
                                "id": "len",
                                "text": "Over 80 words.",
                                "weight": -1,
                                "check": {"type": "word_count", "min": 81},
                            }
                        ],
                    },
                ),
            ],
        )
    )
    assert not any(r.isError for r in results), [r.content for r in results if r.isError]
    failures = FailureList.model_validate(results[0].structuredContent)
    assert [f.kind for f in failures.failures] == ["non_discriminative_low", "spurious_length"]
    assert MemoryResult.model_validate(results[1].structuredContent).note  # no memory in this run: says so
    rollouts = RolloutList.model_validate(results[2].structuredContent)
    assert len(rollouts.rollouts) == 3 and rollouts.reference_answer == "Rayleigh scattering."
    state = HarnessView.model_validate(results[3].structuredContent)
    assert state.task.task_id == "t2" and state.step == 2
    cands = [Candidate.model_validate(r.structuredContent) for r in results[4:]]
    assert [c.interface for c in cands] == ["task_sampling", "rollout_guidance", "rubric_criteria"]
    assert cands[1].revision == 1 and cands[1].parent_id == cands[0].candidate_id  # same failure: a revision
    assert json.loads(results[6].content[0].text)["candidate_id"] == cands[2].candidate_id  # text mirrors it

    cid = cands[2].candidate_id
    trial, commit = run(
        sdk_calls(
            url, token, [("run_frozen_policy_trial", {"candidate_id": cid}), ("commit_update", {"candidate_id": cid})]
        )
    )
    assert not trial.isError and TrialResult.model_validate(trial.structuredContent).accepted
    done = CommitResult.model_validate(commit.structuredContent)
    assert done == CommitResult(candidate_id=cid, interface="rubric_criteria", version=1, applies_from_step=3)


def test_langchain_tools_round_trip_and_errors_come_back_as_error_messages(served):
    world, url, token = served

    async def body(tools):
        out = {}
        out["failures"] = await lc_call(tools["get_failures"], {"kinds": ["spurious_length"]})
        # a model-level validation error (park needs park_steps) and a field-level one (weight <= 0)
        out["invalid"] = await lc_call(tools["reweight_tasks"], {"task_ids": ["t1"], "action": "park"})
        out["invalid_field"] = await lc_call(tools["reweight_tasks"], {"task_ids": ["t1"], "weight": -3})
        # tool errors: an unknown task, an invalid edit
        out["unknown"] = await lc_call(tools["inspect_rollouts"], {"task_id": "nope"})
        out["bad_edit"] = await lc_call(tools["edit_rubric"], {"task_id": "t1", "remove": ["zz"]})
        # the server is still healthy: a full propose -> trial -> commit goes through
        cand = await lc_call(tools["reweight_tasks"], {"task_ids": ["t2"], "action": "park", "park_steps": 5})
        out["cand"] = cand
        cid = cand.artifact["structured_content"]["candidate_id"]
        out["trial"] = await lc_call(tools["run_frozen_policy_trial"], {"candidate_id": cid})
        out["commit"] = await lc_call(tools["commit_update"], {"candidate_id": cid})
        out["state"] = await lc_call(tools["get_harness_state"], {"task_id": "t2"})
        return out

    out = run(lc_session(url, token, body))
    assert out["failures"].status == "success"
    assert [f["kind"] for f in out["failures"].artifact["structured_content"]["failures"]] == ["spurious_length"]
    for key, needle in [
        ("invalid", "park_steps"),
        ("invalid_field", "greater than 0"),
        ("unknown", "nope"),
        ("bad_edit", "zz"),
    ]:
        assert out[key].status == "error", key
        assert needle in text_of(out[key]), (key, text_of(out[key]))
    assert "training task ids include ['t1', 't2', 't3']" in text_of(out["unknown"])
    assert out["commit"].artifact["structured_content"]["applies_from_step"] == 3
    task = out["state"].artifact["structured_content"]["task"]
    assert task["status"] == "parked" and task["parked_until"] == 8 and task["sampling_probability"] == 0
    assert world.harness.versions["task_sampling"] == 1


# --------------------------------------------------------------------------------------------- auth


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_requests_without_the_right_token_are_refused(served):
    _world, url, token = served
    with httpx.Client(timeout=30) as http:
        assert http.post(url, json=INIT, headers=ACCEPT).status_code == 401
        wrong = ("y" if token[0] == "x" else "x") + token[1:]  # never the token itself
        assert http.post(url, json=INIT, headers={**ACCEPT, **auth(wrong)}).status_code == 401
        assert http.post(url, json=INIT, headers={**ACCEPT, "Authorization": token}).status_code == 401  # no scheme
        # a non-ASCII token is a plain refusal, not a 500 (the token is compared as bytes)
        weird = {**ACCEPT, "Authorization": "Bearer ü€".encode()}
        assert http.post(url, json=INIT, headers=weird).status_code == 401
        # DNS-rebinding protection stays on: a foreign Host is refused even with the token
        foreign = http.post(url, json=INIT, headers={**ACCEPT, **auth(token), "Host": "evil.example:80"})
        assert foreign.status_code == 421
        ok = http.post(url, json=INIT, headers={**ACCEPT, **auth(token)})
        assert ok.status_code == 200
    assert run(sdk_calls(url, token, [("get_failures", {})]))[0].isError is False


# --------------------------------------------------------------------------------------------- commit rules


def test_commit_refuses_unmeasured_and_rejected_candidates_and_applies_accepted_ones(world):
    svc, before = world.service, world.run_dir.harness.read_text()
    fid = world.fid("spurious_length")
    add = [{"id": "short", "text": "Stays under 80 words.", "weight": 1}]
    bad = build(svc, "rubric_criteria", task_id="t1", add=add, rationale="reject me", failure_id=fid)
    with pytest.raises(CandidateError, match="not been measured: call run_frozen_policy_trial"):
        svc.commit_update(CommitUpdate(candidate_id=bad.candidate_id))
    assert not svc.run_frozen_policy_trial(RunTrial(candidate_id=bad.candidate_id)).accepted
    with pytest.raises(CandidateError, match=r"rejected by its latest trial .*interval includes 0.*Revise it"):
        svc.commit_update(CommitUpdate(candidate_id=bad.candidate_id))
    assert world.harness.versions["rubric_criteria"] == 0 and world.run_dir.harness.read_text() == before

    good = build(svc, "rubric_criteria", task_id="t1", add=add, rationale="counter the length hack", failure_id=fid)
    assert good.revision == 1 and good.parent_id == bad.candidate_id
    svc.run_frozen_policy_trial(RunTrial(candidate_id=good.candidate_id))
    done = svc.commit_update(CommitUpdate(candidate_id=good.candidate_id))
    assert (done.version, done.applies_from_step) == (1, 3)
    assert world.harness.rubrics.current("t1").step == 3
    assert [c.id for c in world.harness.rubrics.current("t1").criteria] == ["c1", "c2", "p1", "short"]
    saved = json.loads(world.run_dir.harness.read_text())
    assert saved["versions"]["rubric_criteria"] == 1
    assert saved["rubric_criteria"]["history"][0]["candidate_id"] == good.candidate_id
    assert svc.candidate(good.candidate_id).status == "committed"
    with pytest.raises(CandidateError, match="already committed"):
        svc.commit_update(CommitUpdate(candidate_id=good.candidate_id))
    with pytest.raises(CandidateError, match="already committed"):
        svc.run_frozen_policy_trial(RunTrial(candidate_id=good.candidate_id))
    with pytest.raises(CandidateError, match="unknown candidate_id"):
        svc.commit_update(CommitUpdate(candidate_id="c0-nope"))
    # the trials object got the update itself and the failure the candidate answers
    update, cid, failure = world.trials.calls[-1]
    assert isinstance(update, EditRubric) and cid == good.candidate_id and failure.kind == "spurious_length"


def test_commit_refuses_a_trial_the_harness_or_the_policy_has_moved_past(world):
    svc = world.service
    a = build(svc, "rubric_criteria", task_id="t1", add=[{"id": "x", "text": "Cites a source.", "weight": 1}])
    b = build(svc, "rubric_criteria", task_id="t1", reweight={"c2": 3.0})
    for c in (a, b):
        svc.run_frozen_policy_trial(RunTrial(candidate_id=c.candidate_id))
    svc.commit_update(CommitUpdate(candidate_id=a.candidate_id))
    with pytest.raises(CandidateError, match="updated after its trial: run run_frozen_policy_trial on it again"):
        svc.commit_update(CommitUpdate(candidate_id=b.candidate_id))
    svc.run_frozen_policy_trial(RunTrial(candidate_id=b.candidate_id))
    assert svc.commit_update(CommitUpdate(candidate_id=b.candidate_id)).version == 2

    c = build(svc, "task_sampling", task_ids=["t3"], weight=3.0)
    svc.run_frozen_policy_trial(RunTrial(candidate_id=c.candidate_id))
    world.step = 3  # the policy trained on after the trial
    with pytest.raises(CandidateError, match=r"measured at step 2 .* trained to step 3"):
        svc.commit_update(CommitUpdate(candidate_id=c.candidate_id))


def test_candidate_builders_apply_nothing_and_validate_with_preview(world):
    svc = world.service
    state, saved = json.dumps(world.harness.to_dict()), world.run_dir.harness.read_text()
    rw = build(svc, "task_sampling", **ReweightTasks(task_ids=["t1"], weight=4.0).model_dump(exclude={"interface"}))
    assert rw.preview["sampling_probability"]["t1"]["after"] > rw.preview["sampling_probability"]["t1"]["before"]
    sg = build(svc, "rollout_guidance", scope="domain", target="science", text="Name the law first.", fraction=0.25)
    assert sg.preview["tasks_affected"] == 2 and sg.preview["rule_after"]["fraction"] == 0.25
    er = build(svc, "rubric_criteria", task_id="t1", remove=["p1"], reword={"c2": "Explains why, step by step."})
    assert er.preview["removed"] == ["p1"] and er.preview["changed"] == ["c2"]
    assert {c.status for c in (rw, sg, er)} == {"proposed"}
    assert json.dumps(world.harness.to_dict()) == state and world.run_dir.harness.read_text() == saved
    assert world.harness.versions == {
        **dict.fromkeys(world.harness.versions, 0),
        "task_sampling": 0,
        "rollout_guidance": 0,
        "rubric_criteria": 0,
    }
    assert world.trials.calls == []

    for tool, kwargs, needle in [
        ("reweight_tasks", {"task_ids": ["t9"], "weight": 2.0}, "unknown task id"),
        ("set_guidance", {"scope": "domain", "target": "law", "text": "x"}, "unknown domain 'law'"),
        ("set_guidance", {"target": "t9", "text": "x"}, "unknown task id 't9'"),
        ("set_guidance", {"target": "t1", "fraction": 0}, "changes nothing"),
        ("edit_rubric", {"task_id": "t1", "remove": ["c1", "c2"]}, "no positive weight"),
        ("edit_rubric", {"task_id": "t1", "reweight": {"c1": 2}, "failure_id": "1:t1:x"}, "unknown failure_id"),
    ]:
        with pytest.raises(CandidateError, match=needle):
            call_tool(svc, tool, **kwargs)
    with pytest.raises(ValueError, match="at least one criterion"):  # the update model's own rule
        build(svc, "rubric_criteria", task_id="t1")


# --------------------------------------------------------------------------------------------- read tools


def test_get_failures_lists_a_persisting_failure_once_newest_first(world):
    svc = world.service
    got = svc.get_failures(GetFailures())
    assert got.total == 2
    low = next(f for f in got.failures if f.kind == "non_discriminative_low")
    assert (low.step, low.first_step, low.occurrences) == (2, 1, 2)
    assert low.failure_id.startswith("2:t2:non_discriminative_low:")
    assert svc.get_failures(GetFailures(task_id="t1")).failures[0].kind == "spurious_length"
    assert svc.get_failures(GetFailures(kinds=["criterion_dead"])).failures == []
    assert (
        svc.get_failures(GetFailures(limit=1)).total == 2 and len(svc.get_failures(GetFailures(limit=1)).failures) == 1
    )
    since = svc.get_failures(GetFailures(since_step=2, task_id="t2")).failures[0]
    assert since.occurrences == 1  # the step-1 occurrence is filtered out


def test_inspect_rollouts_spreads_over_rewards_and_truncates(world):
    svc = world.service
    got = svc.inspect_rollouts(InspectRollouts(task_id="t1", steps=1, limit=2))
    assert got.total == 4 and [r.step for r in got.rollouts] == [2, 2]
    assert [r.reward for r in got.rollouts] == [0.1, 0.9]  # the two extremes
    long = next(r for r in svc.inspect_rollouts(InspectRollouts(task_id="t1", steps=1)).rollouts if r.member == 0)
    assert long.truncated and "more characters]" in long.completion and len(long.completion) < 700
    assert [c["id"] for c in got.rubric] == ["c1", "c2", "p1"] and got.rubric_version == 0
    assert got.prompt == svc.harness.tasks["t1"].messages()[-1]["content"]  # what the remedies read requests from
    assert svc.inspect_rollouts(InspectRollouts(task_id="t3", steps=5)).total == 8


# --------------------------------------------------------------------------------------------- server lifecycle


def test_start_stop_twice_builds_a_new_server_each_time(world, caplog):
    server = ToolServer(world.service)
    seen = []
    with caplog.at_level(logging.DEBUG, logger="mcp"):
        for _ in range(2):
            url, token = server.start()
            assert server.running and url.startswith("http://127.0.0.1:")
            with pytest.raises(HarnessRLError, match="already running"):
                server.start()
            assert run(sdk_calls(url, token, [("get_harness_state", {})]))[0].structuredContent["step"] == 2
            seen.append((url, token))
            server.stop()
            assert not server.running
            server.stop()  # idempotent
            with pytest.raises(httpx.ConnectError), httpx.Client(timeout=2) as http:
                http.post(url, json=INIT, headers={**ACCEPT, **auth(token)})
    assert seen[0][1] != seen[1][1]  # a new token per start
    assert not [r for r in caplog.records if r.msg == SSE_WRITER_MESSAGE]
    assert not [t for t in threading.enumerate() if t.name.startswith("harnessrl-tool-server")]


def test_context_manager_and_concurrent_calls(world):
    with ToolServer(world.service) as server:

        async def body():
            async with (
                create_mcp_http_client(headers=auth(server.token)) as http,
                streamable_http_client(server.url, http_client=http) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                calls = [session.call_tool("reweight_tasks", {"task_ids": ["t1"], "weight": 1.0 + i}) for i in range(6)]
                calls += [session.call_tool("get_failures", {}) for _ in range(6)]
                return await asyncio.gather(*calls)

        results = run(body())
    assert not any(r.isError for r in results)
    ids = {r.structuredContent["candidate_id"] for r in results[:6]}
    assert len(ids) == 6 and len(world.service.candidates()) == 6


# --------------------------------------------------------------------------------------------- events, memory


def test_events_record_every_decision(world):
    svc = world.service
    fid = world.fid("non_discriminative_low")
    svc.on_event(
        "attribution",
        {"failure_id": fid, "interface": "rollout_guidance", "rationale": "all fail alike", "evidence": {"std": 0.0}},
    )
    cand = build(svc, "rollout_guidance", target="t2", text="Define entropy first.", failure_id=fid)
    svc.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    svc.commit_update(CommitUpdate(candidate_id=cand.candidate_id))
    svc.on_event("proposal", {"candidate_id": cand.candidate_id})  # already written by the tool: not twice
    svc.on_event("give_up", {"failure_id": fid, "kind": "x", "rounds": 3})
    kinds = [e["kind"] for e in world.events()]
    assert kinds == [
        "attribution", "proposal", "trial", "verdict", "commit", "failure_handled", "give_up", "failure_handled",
    ]  # fmt: skip
    att, prop, trial, verdict, commit, committed, give_up, gave_up = world.events()
    assert commit["covers"] == ["t2"] and verdict["verdict_kind"] == "accepted"
    assert (committed["failure_id"], committed["outcome"], committed["candidate_id"]) == (
        fid, "committed", cand.candidate_id,
    )  # fmt: skip
    assert (gave_up["failure_id"], gave_up["outcome"]) == (fid, "gave_up")
    assert att["task_id"] == "t2" and att["interface"] == "rollout_guidance" and att["evidence"] == {"std": 0.0}
    assert prop["candidate_id"] == cand.candidate_id and prop["update"]["target"] == "t2" and prop["step"] == 2
    assert trial["result"]["accepted"] is True and trial["failure_id"] == fid
    assert verdict["verdict"] == "accepted" and verdict["reason"] == "interval above 0"
    assert commit["version"] == 1 and commit["applies_from_step"] == 3
    assert give_up["payload_kind"] == "x" and give_up["rounds"] == 3
    assert svc.metrics()["evolver/committed/rollout_guidance"] == 1.0
    assert svc.metrics()["evolver/attributed/rollout_guidance"] == 1.0


@pytest.fixture(scope="module")
def embedder():
    import torch

    torch.set_num_threads(1)
    from harnessrl.memory.store import MiniLMEmbeddingFunction

    ef = MiniLMEmbeddingFunction()
    ef(["warm up"])
    return ef


def test_memory_records_candidates_trials_commits_and_answers_queries(tmp_path, embedder):
    from harnessrl.memory.store import TrainingMemory

    memory = TrainingMemory(tmp_path / "mem", embedding_function=embedder)
    world = World(tmp_path, memory=memory)
    for step in (1, 2):
        memory.add_step(world.recorder.steps[step], {"t2": ["non_discriminative_low"]})
    memory.add_failures(world.failures)
    svc = world.service
    fid = world.fid("non_discriminative_low")

    svc.record_attribution(fid, "rollout_guidance", "the group fails alike: guide part of it")
    assert memory.failures(task_id="t2", since_step=2)[0].interface == "rollout_guidance"
    cand = build(svc, "rollout_guidance", target="t2", text="Define entropy first.", failure_id=fid)
    entry = memory.candidate(cand.candidate_id)
    assert entry.verdict == "proposed" and entry.failure_ids == [fid] and entry.task_id == "t2"
    assert entry.attribution == "the group fails alike: guide part of it"
    svc.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    assert memory.candidate(cand.candidate_id).verdict == "accepted"
    assert memory.candidate(cand.candidate_id).trials[0]["metric"] == "group_reward_std"
    svc.commit_update(CommitUpdate(candidate_id=cand.candidate_id))
    entry = memory.candidate(cand.candidate_id)
    assert entry.verdict == "committed" and entry.applied_step == 3

    history = svc.query_memory(QueryMemory(mode="task_history", task_id="t2"))
    assert [i["record"] for i in history.items] == ["step", "step", "update"]
    assert history.items[-1]["verdict"] == "committed"
    # cross-task evidence leaves the task at hand out; the same text from another task finds it
    assert svc.query_memory(QueryMemory(mode="what_worked", task_id="t2")).items == []
    worked = svc.query_memory(QueryMemory(mode="what_worked", text="non discriminative low: every rollout scored 0.05"))
    assert worked.items[0]["id"] == cand.candidate_id
    similar = svc.query_memory(QueryMemory(mode="similar_failures", task_id="t1"))  # t1's latest failure as the query
    assert similar.items and all(i["task_id"] != "t1" for i in similar.items)
    assert svc.query_memory(QueryMemory(mode="similar_tasks", text="entropy", n=2)).items
    with pytest.raises(ValueError, match="needs a task_id"):
        svc.query_memory(QueryMemory(mode="task_history"))
    memory.close()


# --------------------------------------------------------------------------------------------- latency


def test_tool_call_latency_with_one_open_session(served):
    _world, url, token = served

    async def body(tools):
        times = []
        for i in range(30):
            t0 = time.perf_counter()
            msg = await lc_call(tools["get_harness_state"], {"task_id": "t1"}, f"c{i}")
            times.append(time.perf_counter() - t0)
            assert msg.status == "success"
        return times

    times = run(lc_session(url, token, body))
    assert len(times) == 30  # each call answered on the one session; its speed: benchmarks/tool_latency.py
    print(f"tool call latency, one open session: median {statistics.median(times[5:]) * 1000:.1f} ms")


# --------------------------------------------------------------------------------------------- outcomes


def test_a_commit_gets_its_outcome_from_the_next_groups(world):
    """After a commit, the changed task's next groups are compared with its groups before: the outcome
    goes to the events (and to the memory, where what_worked ranks by it)."""
    svc = world.service
    fid = world.fid("non_discriminative_low")  # t2: flat at 0.05 in steps 1 and 2
    cand = build(svc, "rollout_guidance", target="t2", text="Name the law.", fraction=0.5, failure_id=fid)
    svc.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    svc.commit_update(CommitUpdate(candidate_id=cand.candidate_id))  # applies from step 3
    svc.observe_step(make_step(2, {"t2": [0.05] * 4})[0])  # before the update applies: not counted
    assert world.events("outcome") == []
    svc.observe_step(make_step(3, {"t2": [0.1, 0.6, 0.1, 0.7], "t1": [0.2, 0.3, 0.4, 0.5]})[0])
    assert world.events("outcome") == []  # one group of t2 so far; two are needed
    svc.observe_step(make_step(4, {"t2": [0.05] * 4})[0])
    (event,) = world.events("outcome")
    assert event["candidate_id"] == cand.candidate_id and event["task_ids"] == ["t2"]
    assert (event["groups_before"], event["signal_share_before"]) == (2, 0.0)
    assert (event["groups_after"], event["signal_share_after"], event["recovered"]) == (2, 0.5, True)
    svc.observe_step(make_step(5, {"t2": [0.05] * 4})[0])
    assert len(world.events("outcome")) == 1  # measured once


def test_an_outcome_with_no_group_after_is_unknown(world):
    svc = world.service
    fid = world.fid("non_discriminative_low")
    cand = build(svc, "task_sampling", task_ids=["t2"], action="park", park_steps=50, failure_id=fid)
    svc.run_frozen_policy_trial(RunTrial(candidate_id=cand.candidate_id))
    svc.commit_update(CommitUpdate(candidate_id=cand.candidate_id))
    for step in range(3, 14):  # parked: t2 never comes back within outcome_steps
        svc.observe_step(make_step(step, {"t1": [0.2, 0.3, 0.4, 0.5]})[0])
    (event,) = world.events("outcome")
    assert event["groups_after"] == 0 and event["recovered"] is None and event["measured_at_step"] == 13
