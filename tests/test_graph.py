"""The evolver graph (attributor → proposer → critic ⟲ → commit) with scripted, rule-based and OpenAI-compatible models.

Fast and offline. The trainer's tools are LangChain StructuredTools over an in-test fake trainer with a
real :class:`~harnessrl.interfaces.Harness` (builders validate candidates with its ``preview``, commits
apply them) and tool results in the contract's JSON shapes; the critic's trials are small measurements
computed from the fake's cached rollouts.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import subprocess
import sys
from typing import Any, Literal

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field, create_model
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from harnessrl.agents import RuleBasedChatModel, make_chat_model
from harnessrl.agents.testing import ScriptedChatModel, tool_call
from harnessrl.agents.tool_loop import adapt_args, data_json
from harnessrl.data.schema import Task
from harnessrl.detection.ranks import spearman
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.graph import EvolverDeps, GraphConfig, LLMConfig
from harnessrl.graph.prompts import load_prompt
from harnessrl.graph_builder import build_graph, evolve
from harnessrl.interfaces import EditRubric, Harness, ReweightTasks, SetGuidance
from harnessrl.interfaces.evidence import SuggestSettings

# --------------------------------------------------------------------------------------------------
# a fake trainer: the contract's tools over a real harness
# --------------------------------------------------------------------------------------------------

REFERENCE = (
    "Plants use sunlight to turn water and carbon dioxide into glucose and oxygen; chlorophyll in the leaves "
    "captures the light energy."
)


def words(n: int) -> str:
    base = REFERENCE.rstrip(".").replace(";", "").split()
    return " ".join((base * (n // len(base) + 1))[:n])


TASKS = [
    Task(
        id="t_len",
        domain="science",
        prompt="Explain photosynthesis briefly.",
        reference_answer=REFERENCE,
        rubric=[
            {"id": "c1", "text": "Mentions sunlight as the energy source.", "weight": 1.0},
            {"id": "c2", "text": "Says that plants produce glucose and oxygen.", "weight": 1.0},
        ],
    ),
    Task(
        id="t_low",
        domain="instruction_following",
        prompt="Give the boiling point of water at sea level in Celsius, as a bare number.",
        reference_answer="100",
        rubric=[
            {
                "id": "bare",
                "text": "The answer is at most 3 words.",
                "weight": 1.0,
                "check": {"type": "word_count", "max": 3},
            },
            {"id": "value", "text": "States that the value is 100.", "weight": 1.0},
        ],
    ),
    Task(
        id="t_high",
        domain="writing",
        prompt="Write one sentence about the sea.",
        rubric=[{"id": "topic", "text": "Is about the sea.", "weight": 1.0}],
    ),
    Task(
        id="t_ref",
        domain="writing",
        prompt="Describe the sea at dawn.",
        reference_answer="At dawn the sea turns from grey to silver, gulls cry over the swell, and the first light "
        "catches the foam along the shore.",
        rubric=[{"id": "topic", "text": "Is about the sea.", "weight": 1.0}],
    ),
]

LEN_WORDS = [12, 16, 20, 24, 30, 36, 44, 52]
LEN_REWARDS = [0.3, 0.38, 0.45, 0.52, 0.6, 0.7, 0.8, 0.9]

FAIL_LEN = {
    "failure_id": "7:t_len:spurious_length:abc",
    "kind": "spurious_length",
    "step": 7,
    "task_id": "t_len",
    "domain": "science",
    "summary": "Task t_len (science): reward rises with completion length, Spearman rho 1.00 > 0.60 over 8 rollouts.",
    "evidence": {"feature": "length", "rho": 1.0, "n": 8, "p_value": 0.0001, "mean_length": 40.0},
    "interface_hint": "rubric_criteria",
}
FAIL_LOW = {
    "failure_id": "7:t_low:non_discriminative_low:def",
    "kind": "non_discriminative_low",
    "step": 7,
    "task_id": "t_low",
    "domain": "instruction_following",
    "summary": "Task t_low at step 7: all 4 rewards are uniformly low (mean 0.00 below 0.30, std 0.000 < 0.02).",
    "evidence": {"rewards": [0.0, 0.0, 0.0, 0.0], "mean": 0.0, "std": 0.0, "n": 4, "guided": 0, "temperature": 1.0},
    "interface_hint": "rollout_guidance",
}
FAIL_HIGH = {
    "failure_id": "7:t_high:non_discriminative_high:ghi",
    "kind": "non_discriminative_high",
    "step": 7,
    "task_id": "t_high",
    "domain": "writing",
    "summary": "Task t_high at step 7: all 4 rewards are uniformly high (mean 1.00 above 0.80).",
    "evidence": {"rewards": [1.0, 1.0, 1.0, 1.0], "mean": 1.0, "std": 0.0, "n": 4, "guided": 0},
    "interface_hint": "rubric_criteria",
}


def rollouts_for(task_id: str) -> list[dict[str, Any]]:
    if task_id == "t_len":
        return [
            {
                "step": 7,
                "member": i,
                "guided": False,
                "reward": r,
                "length_tokens": round(n * 1.3),
                "completion": words(n),
                "verdicts": {"c1": 1.0, "c2": min(1.0, r + 0.1)},
            }
            for i, (n, r) in enumerate(zip(LEN_WORDS, LEN_REWARDS, strict=True))
        ]
    if task_id == "t_low":
        text = "The boiling point of water at sea level is one hundred degrees Celsius, as is well known."
        return [
            {
                "step": 7,
                "member": i,
                "guided": False,
                "reward": 0.0,
                "length_tokens": 20,
                "completion": text,
                "verdicts": {"bare": 0.0, "value": 0.0},
            }
            for i in range(4)
        ]
    return [
        {
            "step": 7,
            "member": i,
            "guided": False,
            "reward": 1.0,
            "length_tokens": 9,
            "completion": "The sea is wide.",
            "verdicts": {"topic": 1.0},
        }
        for i in range(4)
    ]


def trial_json(candidate_id, interface, metric, baseline, candidate, accepted, reason, **measurements) -> dict:
    improvement = None if baseline is None or candidate is None else candidate - baseline
    return {
        "candidate_id": candidate_id,
        "interface": interface,
        "metric": metric,
        "baseline": baseline,
        "candidate": candidate,
        "improvement": improvement,
        "ci_low": None if improvement is None else improvement - 0.05,
        "ci_high": None if improvement is None else improvement + 0.05,
        "accepted": accepted,
        "verdict_kind": "accepted" if accepted else "not_reliable",
        "reason": reason,
        "measurements": measurements,
        "cost": {"rollouts": 0, "judge_calls": 8, "seconds": 0.01},
    }


def measured_trial(fake: FakeTrainer, cand: dict) -> dict:
    """A small, real measurement: rubric edits re-grade the cached rollouts (programmatic pitfalls applied
    to the completions), guidance gives the guided arm a spread when the hint quotes the failing criteria."""
    cid, update = cand["candidate_id"], cand["update"]
    if isinstance(update, EditRubric):
        crits = fake.harness.rubrics.rubric_with(update)
        pos = sum(c.weight for c in crits if c.weight > 0)
        rolls = rollouts_for(update.task_id)
        new = []
        for r in rolls:
            penalty = sum(-c.weight * c.check.evaluate(r["completion"]) for c in crits if c.weight < 0 and c.check)
            new.append(max(0.0, r["reward"] - penalty / pos))
        lengths = [len(r["completion"].split()) for r in rolls]
        before = spearman(lengths, [r["reward"] for r in rolls])
        after = spearman(lengths, new) or 0.0
        ref_penalty = sum(-c.weight * c.check.evaluate(REFERENCE) for c in crits if c.weight < 0 and c.check) / pos
        ref_after = 0.8 - ref_penalty
        accepted = after < before - 0.3 and ref_after >= statistics.median(new)
        reason = (
            f"|rho| fell {before:.2f} -> {after:.2f}, reference {ref_after:.2f} >= policy median"
            if accepted
            else f"|rho| {before:.2f} -> {after:.2f}: not a sure improvement, or the reference answer lost score"
        )
        return trial_json(
            cid,
            "rubric_criteria",
            "rho_reward_length",
            before,
            after,
            accepted,
            reason,
            rewards_before=[r["reward"] for r in rolls],
            rewards_after=new,
            reference_reward=ref_after,
            n=len(rolls),
        )
    if isinstance(update, SetGuidance):
        helps = update.fraction >= fake.min_fraction and "100" in (update.text or "") + str(fake.hint_needs_100)
        std = 0.21 if helps else 0.0
        return trial_json(
            cid,
            "rollout_guidance",
            "group_reward_std",
            0.0,
            std,
            helps,
            "guided rollouts succeed: the group is discriminative" if helps else "the guided arm stayed flat",
            guided_rewards=[1.0, 0.0, 0.0, 0.0] if helps else [0.0] * 4,
            unguided_rewards=[0.0] * 4,
        )
    return trial_json(cid, "task_sampling", "probe", None, None, True, "replay: the task teaches nothing now")


class FakeTrainer:
    """The trainer side of the tools, in process: a real harness, canned memory, measured trials."""

    def __init__(self, failures: list[dict], *, trial=measured_trial, memory: dict | None = None):
        self.harness = Harness(TASKS)
        self.failures = failures
        self.memory = memory or {}
        self.trial = trial
        self.candidates: dict[str, dict] = {}
        self.trial_results: dict[str, dict] = {}
        self.commits: list[dict] = []
        self.calls: list[tuple[str, dict]] = []
        self.fail_once: dict[str, str] = {}
        self.min_fraction = 0.5
        self.hint_needs_100 = ""

    def _log(self, name: str, args: dict) -> None:
        self.calls.append((name, args))
        if name in self.fail_once:
            raise ToolException(self.fail_once.pop(name))

    # read tools
    def get_failures(self, since_step=None, kinds=None, task_id=None, limit=20) -> str:
        self._log("get_failures", {"since_step": since_step, "kinds": kinds, "task_id": task_id, "limit": limit})
        out = [
            f for f in self.failures if (not kinds or f["kind"] in kinds) and (not task_id or f["task_id"] == task_id)
        ]
        return json.dumps({"failures": out[:limit]})

    def query_memory(self, mode, task_id=None, text=None, kind=None, interface=None, n=5) -> str:
        self._log("query_memory", {"mode": mode, "task_id": task_id, "text": text, "kind": kind})
        items = self.memory.get(mode, [])
        if mode == "task_history":
            items = [i for i in items if i.get("task_id") == task_id]
        return json.dumps({"mode": mode, "items": items[:n]})

    def inspect_rollouts(self, task_id, steps=2, limit=8) -> str:
        self._log("inspect_rollouts", {"task_id": task_id, "steps": steps, "limit": limit})
        if task_id not in self.harness.tasks:
            raise ToolException(f"unknown task id {task_id!r}; known: {sorted(self.harness.tasks)}")
        task = self.harness.tasks[task_id]
        return json.dumps(
            {
                "task_id": task_id,
                "rubric": [c.model_dump() for c in self.harness.rubrics.current(task_id).criteria],
                "reference_answer": task.reference_answer,
                "rollouts": rollouts_for(task_id)[:limit],
            }
        )

    def get_harness_state(self, task_id=None) -> str:
        self._log("get_harness_state", {"task_id": task_id})
        task = None
        if task_id:
            h = self.harness
            rule = h.guidance.rule_for(h.tasks[task_id])
            task = {
                "weight": h.sampling.state.weights[task_id],
                "status": h.sampling.state.status[task_id],
                "parked_until": h.sampling.state.parked_until.get(task_id),
                "guidance": rule.model_dump() if rule else None,
                "temperature": h.guidance.temperature_for(h.tasks[task_id]),
                "rubric_version": h.rubrics.current(task_id).version,
                "rubric": [c.model_dump() for c in h.rubrics.current(task_id).criteria],
            }
        return json.dumps({"versions": self.harness.versions, "task": task})

    # builders
    def _candidate(self, name: str, update, failure_id) -> str:
        self._log(name, {**update.model_dump(), "failure_id": failure_id})
        try:
            if isinstance(update, EditRubric):
                self.harness.rubrics.rubric_with(update)
            elif isinstance(update, ReweightTasks):
                self.harness.sampling.probabilities_with(update, step=8)
            elif update.scope == "task" and update.target not in self.harness.tasks:
                raise ValueError(f"unknown task id {update.target!r}")
        except ValueError as e:
            raise ToolException(f"invalid candidate: {e}") from None
        cid = f"cand-{len(self.candidates) + 1}"
        self.candidates[cid] = {"candidate_id": cid, "update": update, "failure_id": failure_id}
        return json.dumps(
            {
                "candidate_id": cid,
                "interface": update.interface,
                "payload": update.model_dump(),
                "failure_id": failure_id,
                "status": "proposed",
            }
        )

    def reweight_tasks(self, failure_id=None, **fields) -> str:
        return self._candidate("reweight_tasks", ReweightTasks.model_validate(fields), failure_id)

    def set_guidance(self, failure_id=None, **fields) -> str:
        return self._candidate("set_guidance", SetGuidance.model_validate(fields), failure_id)

    def edit_rubric(self, failure_id=None, **fields) -> str:
        return self._candidate("edit_rubric", EditRubric.model_validate(fields), failure_id)

    # critic
    def run_frozen_policy_trial(self, candidate_id) -> str:
        self._log("run_frozen_policy_trial", {"candidate_id": candidate_id})
        if candidate_id not in self.candidates:
            raise ToolException(f"no candidate {candidate_id!r}")
        result = self.trial(self, self.candidates[candidate_id])
        self.trial_results[candidate_id] = result
        return json.dumps(result)

    def commit_update(self, candidate_id) -> str:
        self._log("commit_update", {"candidate_id": candidate_id})
        trial = self.trial_results.get(candidate_id)
        if not trial or not trial["accepted"]:
            raise ToolException(f"candidate {candidate_id!r} has no accepted trial: commit refused")
        update = self.candidates[candidate_id]["update"]
        version = self.harness.apply(update, step=8, candidate_id=candidate_id)
        result = {
            "candidate_id": candidate_id,
            "interface": update.interface,
            "version": version,
            "applies_from_step": 8,
        }
        self.commits.append(result)
        return json.dumps(result)

    # the LangChain tools, named and shaped as in the contract
    def tools(self, shape: Literal["flat", "wrapped"] = "flat") -> list[StructuredTool]:
        specs: list[tuple[str, type[BaseModel], Any]] = [
            ("get_failures", GetFailures, self.get_failures),
            ("query_memory", QueryMemory, self.query_memory),
            ("inspect_rollouts", InspectRollouts, self.inspect_rollouts),
            ("get_harness_state", GetHarnessState, self.get_harness_state),
            ("reweight_tasks", _with_failure_id(ReweightTasks), self.reweight_tasks),
            ("set_guidance", _with_failure_id(SetGuidance), self.set_guidance),
            ("edit_rubric", _with_failure_id(EditRubric), self.edit_rubric),
            ("run_frozen_policy_trial", RunTrial, self.run_frozen_policy_trial),
            ("commit_update", CommitUpdate, self.commit_update),
        ]
        out = []
        for name, model, fn in specs:
            if shape == "flat":

                def run(_fn=fn, _model=model, **kw):
                    return _fn(**_model.model_validate(kw).model_dump(exclude={"interface"}))

                schema = model
            else:  # a FastMCP tool with one pydantic-model parameter: {"args": {...}}
                schema = create_model(f"{model.__name__}Call", args=(model, ...))

                def run(args, _fn=fn):
                    return _fn(**args.model_dump(exclude={"interface"}))

            out.append(
                StructuredTool.from_function(
                    run, name=name, description=model.__doc__ or name, args_schema=schema, handle_tool_error=True
                )
            )
        return out


class GetFailures(BaseModel):
    """Detected reward failures, newest first."""

    since_step: int | None = None
    kinds: list[str] | None = None
    task_id: str | None = None
    limit: int = 20


class QueryMemory(BaseModel):
    """Search the training memory."""

    mode: Literal["task_history", "similar_failures", "what_worked", "similar_tasks"]
    task_id: str | None = None
    text: str | None = None
    kind: str | None = None
    interface: str | None = None
    n: int = 5


class InspectRollouts(BaseModel):
    """A task's recent rollouts with verdicts, its rubric and reference answer."""

    task_id: str
    steps: int = 2
    limit: int = 8


class GetHarnessState(BaseModel):
    """The harness versions and, for a task, what is in force for it."""

    task_id: str | None = None


class RunTrial(BaseModel):
    """Measure a candidate on the frozen policy."""

    candidate_id: str


class CommitUpdate(BaseModel):
    """Commit an accepted candidate."""

    candidate_id: str


def _with_failure_id(update: type[BaseModel]) -> type[BaseModel]:
    return create_model(
        update.__name__ + "Candidate",
        __base__=update,
        __doc__=update.__doc__,
        failure_id=(str | None, Field(default=None, description="The failure this candidate answers.")),
    )


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


class Events:
    def __init__(self):
        self.rows: list[tuple[str, dict]] = []

    def __call__(self, kind: str, payload: dict) -> None:
        json.dumps(payload)  # every payload is JSON-serialisable
        self.rows.append((kind, payload))

    @property
    def kinds(self) -> list[str]:
        return [k for k, _ in self.rows]

    def of(self, kind: str) -> list[dict]:
        return [p for k, p in self.rows if k == kind]


def run(deps: EvolverDeps, failures: list[dict] | None = None) -> dict:
    return asyncio.run(evolve(deps, failures))


def attribution_call(failure: dict, interface: str = "rollout_guidance") -> Any:
    return tool_call(
        "submit_attribution",
        {
            "failure_id": failure["failure_id"],
            "task_id": failure["task_id"],
            "interface": interface,
            "rationale": "Uniformly low: guidance for part of the group.",
            "evidence": ["mean 0.00, std 0.000"],
        },
    )


GUIDE = {"scope": "task", "target": "t_low", "text": "Answer with the bare number 100.", "fraction": 0.5}


def scripted_trials(*accepted: bool):
    seq = list(accepted)

    def trial(fake: FakeTrainer, cand: dict) -> dict:
        ok = seq.pop(0)
        return trial_json(
            cand["candidate_id"],
            "rollout_guidance",
            "group_reward_std",
            0.0,
            0.2 if ok else 0.01,
            ok,
            "interval above 0" if ok else "bootstrap interval [-0.02, 0.05] crosses 0",
            guided_rewards=[1.0, 0.0] if ok else [0.0, 0.0],
        )

    return trial


# --------------------------------------------------------------------------------------------------
# the paths, driven by a scripted model
# --------------------------------------------------------------------------------------------------


def test_accept_path_attribute_propose_trial_commit():
    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(True))
    model = ScriptedChatModel(
        responses=[
            tool_call("query_memory", {"mode": "what_worked", "text": "uniformly low", "kind": FAIL_LOW["kind"]}),
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"], "rationale": "a hint"}),
        ]
    )
    events = Events()
    state = run(EvolverDeps(model=model, tools=fake.tools(), on_event=events))

    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    assert [name for name, _ in fake.calls] == [
        "get_failures",
        "query_memory",
        "set_guidance",
        "run_frozen_policy_trial",
        "commit_update",
    ]
    (att,) = events.of("attribution")
    assert att["interface"] == "rollout_guidance" and att["failure_id"] == FAIL_LOW["failure_id"]
    assert events.of("proposal")[0]["candidate_id"] == "cand-1"
    assert events.of("proposal")[0]["payload"]["fraction"] == 0.5
    assert events.of("verdict")[0]["accepted"] is True
    assert events.of("commit")[0]["version"] == 1
    assert fake.harness.guidance.rule_for(fake.harness.tasks["t_low"]).text == GUIDE["text"]
    (outcome,) = state["outcomes"]
    assert outcome.status == "committed" and outcome.candidate_id == "cand-1" and outcome.revisions == 0
    assert state["stop_reason"] == "done"
    # the attributor saw the read tools and submit_attribution; the proposer only its interface's builder
    first_prompt = model.received[0]
    assert FAIL_LOW["failure_id"] in first_prompt[-1].content
    # the tool result reached the model as JSON
    tool_msg = model.received[1][-1]
    assert isinstance(tool_msg, ToolMessage) and json.loads(tool_msg.content)["mode"] == "what_worked"
    assert "set_guidance" in model.bound_tools and "edit_rubric" not in model.bound_tools


def test_reject_then_revise_then_accept():
    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(False, True))
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
            tool_call("set_guidance", {**GUIDE, "fraction": 0.75, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    events = Events()
    state = run(EvolverDeps(model=model, tools=fake.tools(), on_event=events), failures=[FAIL_LOW])

    assert events.kinds == [
        "attribution",
        "proposal",
        "trial",
        "verdict",
        "proposal",
        "trial",
        "verdict",
        "commit",
    ]
    verdicts = events.of("verdict")
    assert [v["accepted"] for v in verdicts] == [False, True]
    assert [p["revision"] for p in events.of("proposal")] == [0, 1]
    assert events.of("commit")[0]["candidate_id"] == "cand-2"
    # the revision prompt carried the critic's reason and measurements, after the first conversation
    revision_prompt = model.received[2]
    last = revision_prompt[-1]
    assert isinstance(last, HumanMessage)
    assert "crosses 0" in last.content and "guided_rewards" in last.content and "cand-1" in last.content
    assert any(isinstance(m, ToolMessage) and "cand-1" in m.content for m in revision_prompt)
    # on a revision the fallback builder (park) is offered too
    assert {"set_guidance", "reweight_tasks"} <= set(model.bound_tools)
    assert [d.accepted for d in state["decisions"]] == [False, True]
    assert state["outcomes"][0].status == "committed" and state["outcomes"][0].revisions == 1


def test_give_up_after_max_revisions():
    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(False, False))
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
            tool_call("set_guidance", {**GUIDE, "fraction": 0.75, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    events = Events()
    state = run(
        EvolverDeps(model=model, tools=fake.tools(), on_event=events, config=GraphConfig(max_revisions=1)),
        failures=[FAIL_LOW],
    )
    assert events.kinds == [
        "attribution",
        "proposal",
        "trial",
        "verdict",
        "proposal",
        "trial",
        "verdict",
        "give_up",
    ]
    (give_up,) = events.of("give_up")
    assert give_up["candidates"] == ["cand-1", "cand-2"]
    assert "max_revisions 1" in give_up["reason"] and "crosses 0" in give_up["reason"]
    assert "commit_update" not in [name for name, _ in fake.calls]
    assert fake.harness.guidance.version == 0
    (outcome,) = state["outcomes"]
    assert outcome.status == "gave_up" and outcome.revisions == 1


def test_tool_errors_reach_the_model_and_the_graph_recovers():
    fake = FakeTrainer(
        [FAIL_LEN], trial=lambda f, c: trial_json(c["candidate_id"], "rubric_criteria", "rho", 0.9, 0.2, True, "ok")
    )
    model = ScriptedChatModel(
        responses=[
            tool_call("inspect_rollouts", {"task_id": "no_such_task"}),  # tool error
            tool_call("nonexistent_tool", {}),  # unknown tool
            tool_call(
                "submit_attribution",
                {"failure_id": "wrong", "task_id": "t_len", "interface": "rubric_criteria", "rationale": "x"},
            ),
            tool_call(
                "submit_attribution",
                {"failure_id": FAIL_LEN["failure_id"], "task_id": "t_len", "interface": "oops", "rationale": "x"},
            ),
            tool_call(
                "submit_attribution",
                {
                    "failure_id": FAIL_LEN["failure_id"],
                    "task_id": "t_len",
                    "interface": "rubric_criteria",
                    "rationale": "length",
                },
            ),
            tool_call(
                "edit_rubric", {"task_id": "t_len", "reweight": {"zz": 0.5}, "failure_id": FAIL_LEN["failure_id"]}
            ),
            tool_call(
                "edit_rubric", {"task_id": "t_len", "reweight": {"c1": 0.5}, "failure_id": FAIL_LEN["failure_id"]}
            ),
        ]
    )
    events = Events()
    state = run(EvolverDeps(model=model, tools=fake.tools(), on_event=events), failures=[FAIL_LEN])
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]

    def last_tool(i: int) -> ToolMessage:
        msg = model.received[i][-1]
        assert isinstance(msg, ToolMessage)
        return msg

    assert last_tool(1).status == "error" and "unknown task id 'no_such_task'" in last_tool(1).content
    assert last_tool(2).status == "error" and "nonexistent_tool" in last_tool(2).content
    assert last_tool(3).status == "error" and "submit again with failure_id" in last_tool(3).content
    assert last_tool(4).status == "error" and "interface" in last_tool(4).content
    assert last_tool(6).status == "error" and "has no criterion ['zz']" in last_tool(6).content
    assert state["outcomes"][0].status == "committed"
    assert fake.harness.rubrics.current("t_len").criteria[0].weight == 0.5


def test_commit_refused_is_given_up_and_recorded():
    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(True))
    fake.fail_once["commit_update"] = "refused: the latest trial is not accepted"
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    events = Events()
    state = run(EvolverDeps(model=model, tools=fake.tools(), on_event=events), failures=[FAIL_LOW])
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "give_up"]
    assert "commit_update refused" in events.of("give_up")[0]["reason"]
    assert state["outcomes"][0].status == "gave_up"


def test_model_failure_gives_the_failure_up_and_goes_on():
    fake = FakeTrainer([FAIL_LOW, FAIL_HIGH], trial=scripted_trials(True))
    model = ScriptedChatModel(responses=[])  # runs out at once: every model call raises
    events = Events()
    state = run(EvolverDeps(model=model, tools=fake.tools(), on_event=events))
    assert events.kinds == ["give_up", "give_up"]
    assert all("model call failed" in p["reason"] for p in events.of("give_up"))
    assert [o.status for o in state["outcomes"]] == ["gave_up", "gave_up"]


def test_failures_are_deduplicated_and_bounded():
    dup = {**FAIL_LOW, "failure_id": "6:t_low:x", "step": 6}
    fails = [dup, FAIL_LOW, FAIL_HIGH, FAIL_LEN]
    fake = FakeTrainer(fails)
    model = ScriptedChatModel(responses=["nothing", "still nothing", "no", "no"])
    events = Events()
    state = run(
        EvolverDeps(model=model, tools=fake.tools(), on_event=events, config=GraphConfig(max_failures=2)),
    )
    assert [f.failure_id for f in state["failures"]] == [FAIL_LOW["failure_id"], FAIL_HIGH["failure_id"]]
    assert events.kinds == ["give_up", "give_up"]
    assert "stopped calling tools" in events.of("give_up")[0]["reason"]
    # the nudge reached the model after its first silent answer
    assert "submit_attribution" in model.received[1][-1].content


def test_time_budget_stops_cleanly():
    now = [0.0]
    accept = scripted_trials(True, True)

    def slow_trial(fake, cand):
        now[0] += 100.0  # the trial takes longer than the whole budget
        return accept(fake, cand)

    fake = FakeTrainer([FAIL_LOW, FAIL_HIGH], trial=slow_trial)
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    events = Events()
    deps = EvolverDeps(
        model=model, tools=fake.tools(), on_event=events, clock=lambda: now[0], config=GraphConfig(time_budget_s=50)
    )
    state = run(deps)
    # the failure in hand is finished (its accepted candidate committed), the next one is left for later
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    assert state["stop_reason"] == "time_budget"
    assert len(state["outcomes"]) == 1


def test_time_budget_spent_mid_revision_gives_up():
    now = [0.0]
    reject = scripted_trials(False, False)

    def slow_trial(fake, cand):
        now[0] += 100.0
        return reject(fake, cand)

    fake = FakeTrainer([FAIL_LOW, FAIL_HIGH], trial=slow_trial)
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    events = Events()
    deps = EvolverDeps(
        model=model, tools=fake.tools(), on_event=events, clock=lambda: now[0], config=GraphConfig(time_budget_s=50)
    )
    state = run(deps)
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "give_up"]
    assert "time budget" in events.of("give_up")[0]["reason"]
    assert state["stop_reason"] == "time_budget" and len(state["outcomes"]) == 1


def test_async_event_callback_and_a_failing_one():
    seen = []

    async def on_event(kind, payload):
        seen.append(kind)
        if kind == "trial":
            raise RuntimeError("event sink down")

    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(True))
    model = ScriptedChatModel(
        responses=[
            attribution_call(FAIL_LOW),
            tool_call("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
        ]
    )
    run(EvolverDeps(model=model, tools=fake.tools(), on_event=on_event), failures=[FAIL_LOW])
    assert seen == ["attribution", "proposal", "trial", "verdict", "commit"]


def test_build_graph_names_missing_tools():
    fake = FakeTrainer([])
    tools = [t for t in fake.tools() if t.name != "commit_update"]
    with pytest.raises(ConfigError, match="commit_update"):
        build_graph(EvolverDeps(model=ScriptedChatModel(), tools=tools))


# --------------------------------------------------------------------------------------------------
# the rule-based model drives the whole graph
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["flat", "wrapped"])
def test_rule_based_commits_a_length_pitfall_on_spurious_length(shape):
    fake = FakeTrainer([FAIL_LEN])
    events = Events()
    state = run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(shape), on_event=events))

    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    att = events.of("attribution")[0]
    assert att["interface"] == "rubric_criteria" and att["evidence"]
    (proposal,) = events.of("proposal")
    (crit,) = proposal["payload"]["add"]
    limit = math.ceil(1.2 * len(REFERENCE.split()))  # 1.2 x the reference answer's words
    assert crit["check"] == {"type": "word_count", "min": limit + 1}
    assert crit["weight"] < 0 and crit["kind"] == "programmatic"
    assert proposal["payload"]["failure_id"] == FAIL_LEN["failure_id"]
    assert proposal["payload"]["remedy"] == "length_pitfall"  # the remedy is a typed field of the update
    verdict = events.of("verdict")[0]
    assert verdict["accepted"] and verdict["candidate"] < verdict["baseline"]
    rubric = fake.harness.rubrics.current("t_len")
    assert rubric.version == 1 and any(c.id == "length_pitfall" for c in rubric.criteria)
    assert state["outcomes"][0].status == "committed"
    # the read tools went through the tools too
    assert {"query_memory", "get_harness_state", "inspect_rollouts"} <= {n for n, _ in fake.calls}


def test_rule_based_commits_guidance_on_uniformly_low():
    fake = FakeTrainer([FAIL_LOW])
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    assert events.of("attribution")[0]["interface"] == "rollout_guidance"
    payload = events.of("proposal")[0]["payload"]
    assert payload["fraction"] == 0.5 and payload["target"] == "t_low"
    # the hint is built from the failing criteria's text
    assert "at most 3 words" in payload["text"] and "100" in payload["text"]
    rule = fake.harness.guidance.rule_for(fake.harness.tasks["t_low"])
    assert rule is not None and rule.fraction == 0.5


def test_rule_based_revises_guidance_from_the_measurements():
    fake = FakeTrainer([FAIL_LOW])
    fake.min_fraction = 0.7  # a guided half stays flat; three quarters gets spread
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "proposal", "trial", "verdict", "commit"]
    first, second = (p["payload"] for p in events.of("proposal"))
    assert first["fraction"] == 0.5 and second["fraction"] == 0.75
    # the guided arm showed no spread: a more explicit hint (the reference's start) and more exploration
    assert second["temperature"] == 1.3 and "could start" in second["text"]
    assert "guided arm stayed flat" in second["rationale"]


def test_rule_based_parks_a_task_when_guidance_already_failed():
    history = [
        {"id": "5:t_low", "step": 5, "task_id": "t_low", "mean": 0.0, "std": 0.0, "flat": True, "guided": 2},
        {"id": "6:t_low", "step": 6, "task_id": "t_low", "mean": 0.0, "std": 0.0, "flat": True, "guided": 2},
    ]
    fake = FakeTrainer([FAIL_LOW], memory={"task_history": history})
    events = Events()
    run(
        EvolverDeps(
            model=RuleBasedChatModel(remedies=SuggestSettings(park_steps=15)), tools=fake.tools(), on_event=events
        )
    )
    att = events.of("attribution")[0]
    assert att["interface"] == "task_sampling"
    assert any("guided rollouts, still flat" in e for e in att["evidence"])
    payload = events.of("proposal")[0]["payload"]
    assert payload["action"] == "park" and payload["task_ids"] == ["t_low"] and payload["park_steps"] == 15
    assert events.kinds[-1] == "commit"
    assert fake.harness.sampling.state.status["t_low"] == "parked"


def test_a_park_after_guidance_refused_for_its_budget_says_so_not_that_guidance_failed():
    """Guidance the critic could not afford was never measured: a park that follows it says that, with the critic's
    reason, instead of claiming the hint did not give the group a spread (gold-bench seed 2 at ef48919)."""

    def trial(fake: FakeTrainer, cand: dict) -> dict:
        if isinstance(cand["update"], SetGuidance):
            refused = trial_json(cand["candidate_id"], "rollout_guidance", "signal_share", None, None, False, "")
            return {**refused, "verdict_kind": "budget", "reason": "budget: probing task t_low needs 12 rollouts"}
        return trial_json(cand["candidate_id"], "task_sampling", "moved_signal_share", 0.0, 0.5, True, "ok")

    fake = FakeTrainer([FAIL_LOW], trial=trial)
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    park = events.of("proposal")[-1]["payload"]
    assert park["action"] == "park"
    assert "guidance could not be measured within the trial budget: budget: probing task" in park["rationale"]
    assert "did not make its group discriminative" not in park["rationale"]


def test_rule_based_follows_what_worked_in_memory():
    worked = [
        {
            "id": f"cand-{i}",
            "interface": "task_sampling",
            "verdict": "committed",
            "task_id": f"x{i}",
            "failure_kind": "non_discriminative_high",
            "outcome": {"recovered": True},
            "similarity": 0.9,
        }
        for i in range(2)
    ]
    # the rubric had its chance on this task (a rejected candidate in its history): the memory's vote retires it
    tried = [{"id": "cand-r", "interface": "rubric_criteria", "verdict": "rejected", "task_id": "t_high"}]
    fake = FakeTrainer([FAIL_HIGH], memory={"what_worked": worked, "task_history": tried})
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    att = events.of("attribution")[0]
    assert att["interface"] == "task_sampling" and "fixed similar" in att["rationale"]
    assert events.of("proposal")[0]["payload"]["action"] == "retire"
    assert fake.harness.sampling.state.status["t_high"] == "retired"
    # no rubric repair tried for the task yet: the same votes do not retire a uniformly-high task (a lax rubric
    # is not a solved task); the rubric is tried first
    fake = FakeTrainer([FAIL_HIGH], memory={"what_worked": worked})
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    att = events.of("attribution")[0]
    assert att["interface"] == "rubric_criteria"
    assert any("not retired on the memory's vote" in e for e in att["evidence"])
    # a rubric repair still pending for the task (the critic waits for more of its groups) has not had its chance:
    # the votes do not retire it either (a gold-bench seed retired three lax tasks while their check was pending)
    pending = [{**tried[0], "verdict": "pending"}, {**tried[0], "id": "cand-p", "verdict": "proposed"}]
    fake = FakeTrainer([FAIL_HIGH], memory={"what_worked": worked, "task_history": pending})
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    att = events.of("attribution")[0]
    assert att["interface"] == "rubric_criteria"
    assert any("still pending" in e for e in att["evidence"])
    assert events.of("proposal")[0]["interface"] == "rubric_criteria"  # the rubric is tried first
    # nor does one refused because its looks were spent undecided (not_reliable): the data could not tell
    spent = [{**tried[0], "trials": [{"verdict_kind": "pending"}, {"verdict_kind": "not_reliable"}]}]
    fake = FakeTrainer([FAIL_HIGH], memory={"what_worked": worked, "task_history": spent})
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    assert events.of("attribution")[0]["interface"] == "rubric_criteria"


def test_rule_based_adds_a_stricter_criterion_on_uniformly_high():
    fake = FakeTrainer([FAIL_HIGH])
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    payload = events.of("proposal")[0]["payload"]
    (crit,) = payload["add"]
    assert crit["weight"] == 1.0 and "about the sea" in crit["text"] and crit.get("kind", "judged") == "judged"
    assert events.kinds[-1] == "commit"


def test_rule_based_recovers_from_a_read_tool_error():
    fake = FakeTrainer([FAIL_LEN])
    fake.fail_once["query_memory"] = "memory is unreachable"
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    att = events.of("attribution")[0]
    assert any("query_memory failed: memory is unreachable" in e for e in att["evidence"])
    assert events.kinds[-1] == "commit"


def test_rule_based_moves_on_after_a_builder_error():
    fake = FakeTrainer([FAIL_LEN])
    fake.fail_once["edit_rubric"] = "invalid candidate: the server says no"
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    # the length pitfall errored; the next template of the ladder (1.0 x the reference) was proposed
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    (proposal,) = events.of("proposal")
    assert proposal["payload"]["remedy"] == "length_revise"
    assert proposal["payload"]["add"][0]["check"]["min"] == len(REFERENCE.split()) + 1


def _always_accept(fake: FakeTrainer, cand: dict) -> dict:
    return trial_json(cand["candidate_id"], cand["update"].interface, "std", 0.0, 0.2, True, "interval above 0")


def _failure(kind: str, task_id: str, **evidence) -> dict:
    return {
        "failure_id": f"7:{task_id}:{kind}",
        "kind": kind,
        "step": 7,
        "task_id": task_id,
        "domain": "science",
        "summary": f"{kind} on {task_id}",
        "evidence": evidence,
    }


@pytest.mark.parametrize(
    ("failure", "interface", "check"),
    [
        (
            _failure("spurious_feature", "t_len", feature="bullets", rho=0.7, partial_rho_given_length=0.65),
            "rubric_criteria",
            lambda p: p["add"][0]["check"]["type"] == "bullet_count" and p["add"][0]["weight"] < 0,
        ),
        (
            _failure("spurious_feature", "t_len", feature="exclamations", rho=0.7),
            "rubric_criteria",
            lambda p: p["add"][0]["check"]["type"] == "regex",
        ),
        (
            _failure("reference_below_policy", "t_len", reference_reward=0.4, median_reward=0.7),
            "rubric_criteria",
            lambda p: p["add"][0]["check"]["type"] == "word_count",  # the policy writes longer than the reference
        ),
        (
            _failure("reference_below_policy", "t_low", reference_reward=0.2, median_reward=0.5),
            "rubric_criteria",
            # the reference is "100": 1.2 x its one word is a bound no rollout meets, raised to their lower quartile
            lambda p: p["add"][0]["check"]["type"] == "word_count" and "lower quartile" in p["rationale"],
        ),
        (
            _failure("reference_below_policy", "t_ref", reference_reward=0.2, median_reward=0.5),
            "rubric_criteria",
            lambda p: p["add"][0]["id"] == "reference_points" and "gulls" in p["add"][0]["text"],
        ),
        (
            _failure(
                "criterion_saturated", "t_len", criterion_id="c1", criterion_text="Mentions sunlight.", weight=1.0
            ),
            "rubric_criteria",
            # a stricter wording grounded in the reference answer, never a reweight (an affine change GRPO ignores)
            lambda p: "reweight" not in p and 'reference answer does: "Plants use sunlight' in p["reword"]["c1"],
        ),
        (
            _failure(
                "criterion_saturated", "t_len", criterion_id="p", criterion_text="Pads it.", weight=-1, pitfall=True
            ),
            "rollout_guidance",
            lambda p: p["text"].startswith("Avoid this: Pads it"),
        ),
        (
            _failure("criterion_dead", "t_low", criterion_id="bare", criterion_text="The answer is at most 3 words."),
            "rollout_guidance",
            lambda p: "at most 3 words" in p["text"] and p["fraction"] == 0.5,
        ),
        (
            _failure("judge_disagreement", "t_len", worst_criterion="c2", mean_abs_delta=0.3),
            "rubric_criteria",
            lambda p: "explicitly" in p["reword"]["c2"],
        ),
    ],
    ids=lambda x: x["kind"] + ":" + x["task_id"] if isinstance(x, dict) else None,
)
def test_rule_based_templates_for_every_failure_kind(failure, interface, check):
    fake = FakeTrainer([failure], trial=_always_accept)
    events = Events()
    run(EvolverDeps(model=RuleBasedChatModel(), tools=fake.tools(), on_event=events))
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    assert events.of("attribution")[0]["interface"] == interface
    assert check(events.of("proposal")[0]["payload"])


def test_rule_based_gives_up_when_its_ladder_is_exhausted():
    fake = FakeTrainer([FAIL_HIGH], trial=scripted_trials(False, False, False))
    events = Events()
    state = run(
        EvolverDeps(
            model=RuleBasedChatModel(),
            tools=fake.tools(),
            on_event=events,
            config=GraphConfig(max_revisions=5, fallback_interface=None),
        )
    )
    # stricter, then stricter at twice the weight; retiring needs the (disabled) fallback builder
    tags = [p["payload"]["remedy"] for p in events.of("proposal")]
    assert tags == ["stricter", "stricter_more"]
    assert events.kinds[-1] == "give_up" and "stopped calling tools" in events.of("give_up")[0]["reason"]
    assert state["outcomes"][0].status == "gave_up"


def test_adapt_args_wraps_and_unwraps():
    wrapped = {"properties": {"args": {"$ref": "#/$defs/RunTrial"}}, "required": ["args"]}
    flat = {"properties": {"candidate_id": {"type": "string"}}}
    assert adapt_args(wrapped, {"candidate_id": "c"}) == {"args": {"candidate_id": "c"}}
    assert adapt_args(wrapped, {"args": {"candidate_id": "c"}}) == {"args": {"candidate_id": "c"}}
    assert adapt_args(flat, {"args": {"candidate_id": "c"}}) == {"candidate_id": "c"}
    assert adapt_args(flat, {"candidate_id": "c"}) == {"candidate_id": "c"}


# --------------------------------------------------------------------------------------------------
# the LLM backend against a fake OpenAI-compatible server
# --------------------------------------------------------------------------------------------------

KEY_ENV = "HARNESSRL_TEST_EVOLVER_KEY"


def _completion_with_tool_call(name: str, args: dict, n: int) -> dict:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-evolver",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{n}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def test_chat_openai_backend_drives_an_attribution(httpserver: HTTPServer, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    script = [
        ("query_memory", {"mode": "task_history", "task_id": "t_low"}),
        (
            "submit_attribution",
            {
                "failure_id": FAIL_LOW["failure_id"],
                "task_id": "t_low",
                "interface": "rollout_guidance",
                "rationale": "The policy never reaches the criteria.",
                "evidence": ["mean 0.0"],
            },
        ),
        ("set_guidance", {**GUIDE, "failure_id": FAIL_LOW["failure_id"]}),
    ]
    bodies: list[dict] = []

    def handler(request: Request) -> Response:
        assert request.headers.get("Authorization") == "Bearer sk-test"
        body = request.get_json()
        bodies.append(body)
        name, args = script[len(bodies) - 1]
        return Response(
            json.dumps(_completion_with_tool_call(name, args, len(bodies))), content_type="application/json"
        )

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    model = make_chat_model(LLMConfig(model="fake-evolver", base_url=httpserver.url_for("/v1"), api_key_env=KEY_ENV))
    fake = FakeTrainer([FAIL_LOW], trial=scripted_trials(True))
    events = Events()
    run(EvolverDeps(model=model, tools=fake.tools(), on_event=events), failures=[FAIL_LOW])

    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"]
    assert events.of("attribution")[0]["rationale"] == "The policy never reaches the criteria."
    first_tools = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert first_tools == {
        "get_failures",
        "query_memory",
        "inspect_rollouts",
        "get_harness_state",
        "submit_attribution",
    }
    assert bodies[0]["model"] == "fake-evolver" and bodies[0]["messages"][0]["role"] == "system"
    tool_turn = bodies[1]["messages"][-1]
    assert tool_turn["role"] == "tool" and tool_turn["tool_call_id"] == "call_1"
    assert json.loads(tool_turn["content"])["mode"] == "task_history"
    assert "set_guidance" in {t["function"]["name"] for t in bodies[2]["tools"]}


def test_make_chat_model_needs_a_key_for_a_remote_server(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=KEY_ENV):
        make_chat_model(LLMConfig(model="m", base_url="https://api.example.com/v1", api_key_env=KEY_ENV))
    local = make_chat_model(LLMConfig(model="m", base_url="http://127.0.0.1:8000/v1", api_key_env=KEY_ENV))
    assert local.model_name == "m"


# --------------------------------------------------------------------------------------------------
# prompts and imports
# --------------------------------------------------------------------------------------------------


def test_prompts_are_packaged_and_overridable(tmp_path):
    text = load_prompt("attributor", max_iterations=5)
    assert "submit_attribution" in text and "at most 5 turns" in text
    (tmp_path / "attributor.md").write_text('Custom {max_iterations} {"json": 1}', encoding="utf-8")
    assert load_prompt("attributor", tmp_path, max_iterations=3) == 'Custom 3 {"json": 1}'
    assert "critic rejected" in load_prompt("revision", tmp_path)  # falls back to the packaged file
    with pytest.raises(ConfigError, match="no prompt"):
        load_prompt("nope")


@pytest.mark.parametrize(
    "first",
    [
        "harnessrl.graph",
        "harnessrl.graph_builder",
        "harnessrl.agents",
        "harnessrl.agents.attributor",
        "harnessrl.agents.rule_based",
    ],
)
def test_evolver_side_imports_no_heavy_stack(first):
    code = (
        f"import sys, {first}\n"
        "import harnessrl.graph, harnessrl.graph_builder, harnessrl.agents, harnessrl.agents.critic_node\n"
        "import harnessrl.agents.testing\n"
        "heavy = [m for m in ('torch', 'trl', 'chromadb', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_failure_given_without_an_id_gets_the_memory_id():
    from harnessrl.graph_builder import _graph_failure
    from harnessrl.memory.store import TrainingMemory
    from harnessrl.records.failures import Failure

    failure = Failure(
        kind="non_discriminative_low",
        step=3,
        task_id="t_low",
        domain="instruction_following",
        evidence={"mean": 0.0, "std": 0.0, "rewards": [0.0, 0.0]},
        summary="all rewards uniformly low",
        interface_hint="rollout_guidance",
    )
    held = _graph_failure(failure)
    assert held.failure_id == TrainingMemory.failure_id(failure)
    # held as given: the failure's own fields in its order, the id after them (what the prompts quote)
    assert held.model_dump() == {**failure.model_dump(mode="json"), "failure_id": held.failure_id}


def test_the_prompt_quotes_the_failure_as_get_failures_listed_it():
    # the graph holds the failure typed (GraphFailure) and dumps it as it came: its keys, their order, a newer field
    listed = {"a_newer_field": {"x": [1, 2.5]}, **FAIL_LOW, "occurrences": 2, "first_step": 5}
    model = ScriptedChatModel(responses=["nothing", "still nothing"])
    run(EvolverDeps(model=model, tools=FakeTrainer([listed]).tools()))
    text = model.received[0][1].content
    assert text.split("```json\n")[1].split("\n```")[0] == data_json({"failure": listed})


def test_a_get_failures_answer_that_lists_no_failure_ends_the_point_with_why():
    fake = FakeTrainer([{k: v for k, v in FAIL_LOW.items() if k != "step"}])
    state = run(EvolverDeps(model=ScriptedChatModel(responses=[]), tools=fake.tools()))
    assert state["stop_reason"].startswith(
        "get_failures failed: get_failures answered an entry that is not a failure (step: Field required"
    )
    assert not state.get("outcomes")


def test_a_given_failure_that_is_no_failure_is_an_error_naming_it():
    deps = EvolverDeps(model=ScriptedChatModel(responses=[]), tools=FakeTrainer([]).tools())
    with pytest.raises(HarnessRLError, match=r"input failures\[1\] is not a failure \(summary: Field required"):
        run(deps, failures=[FAIL_LOW, {k: v for k, v in FAIL_HIGH.items() if k != "summary"}])


# --------------------------------------------------------------------------------------------------
# across the real MCP boundary: the trainer's EvolutionService served by ToolServer
# --------------------------------------------------------------------------------------------------


def test_rule_based_graph_over_the_mcp_tool_server(tmp_path):
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from harnessrl.critic.trials import TrialCost, TrialResult
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.evolution.service import EvolutionService
    from harnessrl.records.failures import Failure
    from harnessrl.records.steps import GroupRecord, Recorder, RolloutRecord, StepRecord

    harness = Harness(TASKS)
    recorder = Recorder(None)
    rolls = [
        RolloutRecord(
            step=7,
            task_id=r_id,
            member=r["member"],
            guided=False,
            rubric_version=0,
            temperature=1.0,
            completion=r["completion"],
            length_tokens=r["length_tokens"],
            length_words=len(r["completion"].split()),
            reward=r["reward"],
            verdicts=r["verdicts"],
        )
        for r_id in ("t_len", "t_low")
        for r in rollouts_for(r_id)
    ]
    groups = [
        GroupRecord(
            step=7,
            task_id=tid,
            domain=harness.tasks[tid].domain,
            rubric_version=0,
            rewards=[r.reward for r in rolls if r.task_id == tid],
            mean=statistics.mean(r.reward for r in rolls if r.task_id == tid),
            std=statistics.pstdev(r.reward for r in rolls if r.task_id == tid),
            flat=tid == "t_low",
            lengths=[r.length_tokens for r in rolls if r.task_id == tid],
            criterion_means={},
        )
        for tid in ("t_len", "t_low")
    ]
    recorder.add(StepRecord(step=7, groups=groups), rolls)
    failures = [
        Failure(**{k: v for k, v in f.items() if k != "failure_id"}, rubric_version=0) for f in (FAIL_LOW, FAIL_LEN)
    ]

    class Trials:
        def run(self, update, candidate_id, failure=None):
            fake = FakeTrainer([])
            fake.harness = harness
            data = measured_trial(fake, {"candidate_id": candidate_id, "update": update})
            data["cost"] = TrialCost(**data["cost"])
            return TrialResult(**data)

    service = EvolutionService(harness, recorder, None, Trials(), None, failures=lambda: failures, step=lambda: 7)
    server = ToolServer(service)
    url, token = server.start()
    events = Events()

    async def main():
        client = MultiServerMCPClient(
            {"h": {"transport": "streamable_http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}
        )
        async with client.session("h") as session:
            tools = await load_mcp_tools(session)
            return await evolve(EvolverDeps(model=RuleBasedChatModel(), tools=tools, on_event=events))

    try:
        state = asyncio.run(main())
    finally:
        server.stop()
    assert [o.status for o in state["outcomes"]] == ["committed", "committed"]
    assert events.kinds == ["attribution", "proposal", "trial", "verdict", "commit"] * 2
    assert harness.guidance.rule_for(harness.tasks["t_low"]).fraction == 0.5
    assert any(c.id == "length_pitfall" for c in harness.rubrics.current("t_len").criteria)
