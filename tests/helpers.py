"""Test doubles, data and set-ups shared by the tests (importable: pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback
import types
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from harnessrl.critic.trials import FrozenPolicyTrials, TrialConfig, TrialCost, TrialResult
from harnessrl.data import Criterion, Task, prompt_text
from harnessrl.evolution.probation import ProbationRule
from harnessrl.evolution.service import EvolutionService
from harnessrl.interfaces import Harness
from harnessrl.judges import BackendVerdict, GradeRequest, RubricJudge, RubricRequest
from harnessrl.records.failures import Failure
from harnessrl.records.run_dir import RunDir
from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord

if TYPE_CHECKING:  # chromadb stays unimported unless a test opens a memory (the memory-off test forbids it)
    from harnessrl.memory.store import TrainingMemory


def record_group(
    harness: Harness,
    judge: RubricJudge,
    recorder: Recorder,
    step: int,
    task_id: str,
    texts: list[str],
    guided: int = 0,
) -> list[RolloutRecord]:
    """Grade ``texts`` as one group of ``task_id`` at ``step`` and record it, as the trainer does (which also
    warms the judge's cache the way training does); the first ``guided`` members saw the task's hint."""
    task = harness.tasks[task_id]
    rubric = harness.rubrics.current(task_id)
    results = judge.grade([RubricRequest.for_task(task, t, rubric.criteria) for t in texts])
    rollouts = [
        RolloutRecord(
            step=step,
            task_id=task_id,
            member=k,
            guided=k < guided,
            rubric_version=rubric.version,
            temperature=1.0,
            completion=t,
            length_tokens=len(t.split()),
            length_words=len(t.split()),
            reward=res.reward,
            verdicts={v.criterion_id: v.value for v in res.verdicts},
        )
        for k, (t, res) in enumerate(zip(texts, results, strict=True))
    ]
    guidance, hinted = harness.hints_for(task, rubric.version)
    group = GroupRecord.of(rollouts, task.domain, 0.02, guidance=guidance, hinted=hinted)
    prev = recorder.steps.get(step)
    recorder.add(
        StepRecord(step=step, groups=[*(prev.groups if prev else []), group]),
        [*recorder.rollouts.get(step, []), *rollouts],
    )
    return rollouts


def build(service: EvolutionService, interface: str, **fields: Any):
    """A candidate of ``interface`` built by the service, its fields validated into the builder tool's argument
    model first (what the MCP boundary does with a call's JSON)."""
    return service.build_candidate(interface, service.builder_args(interface).model_validate(fields))


def call_tool(service: EvolutionService, name: str, **fields: Any):
    """The tool ``name`` of ``service`` called with ``fields``, validated into its argument model first (what the
    MCP boundary does with a call's JSON)."""
    return service.tool_methods()[name](service.tools()[name].args.model_validate(fields))


def rule_based_point(service: EvolutionService, model=None, config=None) -> list:
    """One evolution point against ``service`` behind a real tool server, with the rule-based evolver (or ``model``,
    e.g. a scripted chat model standing in for an LLM) under ``config`` (a GraphConfig; its defaults when None): its
    outcomes."""
    import asyncio

    from harnessrl.agents import RuleBasedChatModel
    from harnessrl.evolution.client import run_evolution_point
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.graph.state import GraphConfig

    server = ToolServer(service)
    url, token = server.start()
    try:
        final = asyncio.run(run_evolution_point(url, token, model or RuleBasedChatModel(), config or GraphConfig()))
    finally:
        server.stop()
    return final["outcomes"]


WORD_CHECKS = {
    "at least one word": {"type": "word_count", "min": 1},
    "at most five words": {"type": "word_count", "max": 5},
}


def task_row(
    tid: str, domain: str, prompt: str, reference: str, judged: str, words: str = "at least one word", **extra
) -> dict:
    """A task as a data row: a judged criterion (weight 2) and a programmatic word-count check (weight 1)."""
    check = WORD_CHECKS[words]
    return {
        "id": tid,
        "domain": domain,
        "prompt": prompt,
        "reference_answer": reference,
        "rubric": [
            {"id": "c1", "text": judged, "weight": 2},
            {"id": "c2", "text": f"Writes {words}", "weight": 1, "check": check},
        ],
        **extra,
    }


# ------------------------------------------------------------------------------------------ the fruit world

FRUIT = Task(
    id="fruit",
    domain="food",
    prompt="Name a yellow fruit.",
    reference_answer="A banana.",
    rubric=[
        Criterion(id="yellow", text="Names a yellow fruit", weight=1),
        Criterion(id="banana", text="Says banana", weight=1, check={"type": "contains", "phrases": ["banana"]}),
    ],
)
FRUIT_TASKS = [
    FRUIT,
    Task(id="sea", domain="writing", prompt="Describe the sea.", rubric=[Criterion(id="c1", text="Vivid", weight=1)]),
]
FLAT_LOW = {1: ["An apple."] * 4, 2: ["An apple."] * 4}
"""Every rollout of "fruit" fails alike at steps 1 and 2: a flat, uniformly low group (0.5 each)."""


class FruitJudge:
    """Judge backend: a criterion whose text holds a key of ``met_by`` is met by an answer naming its value
    ("yellow" by naming the banana); anything else is met."""

    name = "scripted"

    def __init__(self, met_by: Mapping[str, str] | None = None):
        self.met_by = dict(met_by or {"yellow": "banana"})

    def grade(self, requests: Sequence[GradeRequest]) -> list[BackendVerdict | None]:
        out = []
        for r in requests:
            text, answer = r.criterion.text.lower(), r.response.lower()
            word = next((w for key, w in self.met_by.items() if key in text), None)
            out.append(BackendVerdict(1.0 if word is None else float(word in answer)))
        return out


class ExploringPolicy:
    """A frozen policy that finds the banana only when it samples hot: at temperature > 1.2 every other
    completion names it, at the run's 1.0 none does (a flat, uniformly low group)."""

    def __init__(self):
        self.calls: list[tuple[int, float]] = []

    def sample(self, prompts, temperature, max_new_tokens, **settings):
        self.calls.append((len(prompts), temperature))
        hot = temperature > 1.2
        return ["A banana." if hot and i % 2 == 0 else "An apple." for i in range(len(prompts))]


@dataclass
class FruitWorld:
    """The trainer side of an evolution point on the fruit task, as :func:`fruit_world` sets it up."""

    harness: Harness
    recorder: Recorder
    policy: Any
    trials: FrozenPolicyTrials
    failure: Failure
    run_dir: RunDir
    service: EvolutionService
    saved: bytes
    """``harness.json`` as first written (version 0 everywhere)."""

    @property
    def failure_id(self) -> str:
        return self.failure.id

    def events(self, kind: str | None = None) -> list[dict]:
        return [e for e in self.run_dir.read("events.jsonl") if kind is None or e["kind"] == kind]


def fruit_world(
    run_path: Path,
    *,
    groups: Mapping[int, list[str]] = FLAT_LOW,
    judge: FruitJudge | None = None,
    policy: Any = None,
    trial_config: TrialConfig | None = None,
    memory: TrainingMemory | None = None,
    **failure: Any,
) -> FruitWorld:
    """The fruit task's ``groups`` (step: completions) graded and recorded as training does, one failure
    detected on it at the last step (``failure``: its fields over a flat-low default), the critic's trials on
    the frozen ``policy`` (an :class:`ExploringPolicy` unless given; hints measured on fresh arms unless
    ``trial_config`` says otherwise), the service over them at that step, and
    ``harness.json`` written in a run directory at ``run_path``. With a training ``memory``, the steps and the
    failure are written to it as the step monitor writes them, and the service records its decisions there."""
    harness = Harness(FRUIT_TASKS)
    rubric_judge = RubricJudge(judge or FruitJudge())
    recorder = Recorder(None)
    for step, texts in groups.items():
        record_group(harness, rubric_judge, recorder, step, "fruit", texts)
    step = max(groups)
    fields = {
        "kind": "non_discriminative_low",
        "step": step,
        "task_id": "fruit",
        "domain": "food",
        "rubric_version": 0,
        "evidence": {"mean": 0.5, "std": 0.0},
        "summary": "every rollout of fruit scored 0.5",
        "interface_hint": "rollout_guidance",
        **failure,
    }
    found = Failure(**fields)
    policy = ExploringPolicy() if policy is None else policy
    config = trial_config or TrialConfig(guidance_trial="arms", rollouts_per_arm=8, max_rollouts=16)
    trials = FrozenPolicyTrials(harness, recorder, rubric_judge, policy, config)
    run_dir = RunDir(run_path)
    harness.save(run_dir.harness)
    if memory is not None:
        prompts = {t.id: prompt_text(t.prompt) for t in FRUIT_TASKS}
        for s in sorted(groups):
            memory.add_step(recorder.steps[s], {"fruit": [found.kind]} if s == step else {}, prompts)
        memory.add_failures([found])
    service = EvolutionService(
        harness, recorder, memory, trials, run_dir, lambda: [found], lambda: step, probation=ProbationRule.of(config)
    )
    return FruitWorld(harness, recorder, policy, trials, found, run_dir, service, run_dir.harness.read_bytes())


class AcceptAll:
    """A trials object that accepts every candidate."""

    def run(self, update, candidate_id, failure=None):
        return TrialResult(
            candidate_id=candidate_id,
            interface=update.interface,
            metric="signal_share",
            baseline=0.0,
            candidate=0.5,
            improvement=0.5,
            ci_low=0.1,
            ci_high=0.9,
            accepted=True,
            verdict_kind="accepted",
            reason="interval above 0",
            measurements={},
            cost=TrialCost(rollouts=0, judge_calls=0, seconds=0.0),
        )


# ------------------------------------------------------------------------------------------ a tiny policy's run

TINY_POLICY_TASKS = [
    # never met by the tiny policy: every group flat at 0 (non_discriminative_low)
    {"id": "never", "domain": "d1", "prompt": "Write the secret word.", "rubric": [
        {"id": "c1", "text": "Says zzqx", "weight": 1, "check": {"type": "contains", "phrases": ["zzqx"]}}]},
    # met by about half of a group's random completions (the first letter): the groups give signal
    {"id": "early", "domain": "d2", "prompt": "Start with an early letter.", "rubric": [
        {"id": "c1", "text": "Starts with a to m", "weight": 1,
         "check": {"type": "regex", "pattern": "\\A\\W*[a-mA-M]", "multiline": False}}]},
    {"id": "late", "domain": "d2", "prompt": "Start with a late letter.", "rubric": [
        {"id": "c1", "text": "Starts with n to z", "weight": 1,
         "check": {"type": "regex", "pattern": "\\A\\W*[n-zN-Z]", "multiline": False}}]},
]  # fmt: skip
"""Training data (rows) for a tiny random policy's run: one task it never meets, two that give signal."""


# ------------------------------------------------------------------------------------------ hangs


def thread_stacks() -> str:
    """Every live thread's stack, for a test that found something hung."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- thread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame))}"
        for ident, frame in sys._current_frames().items()
    )


def returns_within(timeout_s: float, fn: Callable[[], Any], what: str) -> Any:
    """``fn()`` run in a daemon thread, its result (or exception) returned (raised) here; fails the test with
    every thread's stack when it has not returned within ``timeout_s`` (a deadlock fails, it never hangs CI)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e

    worker = threading.Thread(target=target, name=f"watched: {what}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        pytest.fail(f"{what} did not return within {timeout_s:g} s (hung); the threads:\n{thread_stacks()}")
    if "error" in box:
        raise box["error"]
    return box.get("result")


# ------------------------------------------------------------------------------------------ servers on loopback


async def sdk_calls(url: str, token: str, calls: Sequence[tuple[str, dict]]) -> list[CallToolResult]:
    """Open one MCP SDK session to a tool server at ``url`` and make each (tool name, arguments) call in order."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [await session.call_tool(name, args) for name, args in calls]


def free_port() -> int:
    """A loopback port free at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def chroma_server(data: Path, start_s: float = 30.0) -> Iterator[str]:
    """A Chroma server (``chroma run``, the CLI chromadb installs next to this Python) over ``data`` on a free
    loopback port, up once its heartbeat answers; yields its URL. Skips the test when the CLI is missing or
    exits at start; its output goes to ``data``'s sibling ``.log`` file (a pipe nobody reads could fill up
    and stall it)."""
    exe = Path(sys.executable).parent / "chroma"
    found = str(exe) if exe.exists() else shutil.which("chroma")
    if found is None:
        pytest.skip("the `chroma` server CLI is not installed next to this Python (it comes with chromadb)")
    port = free_port()
    log_path = data.parent / f"{data.name}.log"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                [found, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        except OSError as e:
            pytest.skip(f"the `chroma` CLI cannot run here: {e}")
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_s
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.skip(f"the `chroma` server exited at start ({proc.returncode}): {log_path.read_text()[-500:]}")
            if time.monotonic() > deadline:
                said = log_path.read_text()[-500:]
                pytest.fail(f"the chroma server did not answer its heartbeat within {start_s:g} s: {said}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------------------------------ a fake judge server

Action = Callable[[dict], Response]
"""What the fake server does with a request's JSON body."""


@contextlib.contextmanager
def threaded_http_server() -> Iterator[HTTPServer]:
    """A pytest-httpserver on a free loopback port that answers requests concurrently."""
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        yield server
    finally:
        server.clear()
        server.stop()


class FakeChatServer:
    """A fake OpenAI-compatible chat-completions endpoint on ``server`` (cleared first): answers with the
    ``script`` actions in order, then with ``default``; notes each request's body, headers and arrival time,
    and the most requests in flight at once."""

    def __init__(self, server: HTTPServer, default: Action):
        self.url = server.url_for("/v1")
        self.script: list[Action] = []
        self.default = default
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.arrivals: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server.clear()
        server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(self.handle)

    def handle(self, request: Request) -> Response:
        body = request.get_json()
        with self._lock:
            self.arrivals.append(time.monotonic())
            self.bodies.append(body)
            self.headers.append(dict(request.headers))
            action = self.script.pop(0) if self.script else self.default
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return action(body)
        finally:
            with self._lock:
                self.in_flight -= 1


def load_script(path: Path) -> types.ModuleType:
    """A script that is not a package module (a benchmark, an example), imported under its file's stem and registered
    in ``sys.modules`` (dataclasses and pickles look their module up there)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
