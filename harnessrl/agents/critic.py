"""The critic node of the evolver graph: have a candidate measured on the frozen policy, then commit it or send it back.

The critic is deterministic code, not a model: the measurement decides, and it is made trainer-side
(:mod:`harnessrl.critic`: the trial recipes, the acceptance rule, the learning-signal measures). This
node only routes on it. It calls
``run_frozen_policy_trial(candidate_id)`` (the trial runs the noise-aware test — a bootstrap interval
of the improvement entirely above zero — on the current, frozen policy and says ``accepted`` with a
reason and its measurements) and records the decision in the state. An accepted candidate goes to
``commit`` (``commit_update``, which refuses any candidate whose latest trial was not accepted); a
rejected one goes back to the proposer with the measurements for a revision, at most
``max_revisions`` times, after which the failure is given up and the reason recorded.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from harnessrl.agents.tool_loop import call_tool, result_json, result_text
from harnessrl.graph.state import CriticDecision, EvolverState, FailureOutcome, get_deps

__all__ = ["commit", "critic"]

_TRIAL_FIELDS = ("metric", "baseline", "candidate", "improvement", "ci_low", "ci_high")


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


async def critic(state: EvolverState, config: RunnableConfig) -> Command[Literal["commit", "proposer", "give_up"]]:
    """Run the candidate's trial and decide: commit, revise, or give up."""
    deps = get_deps(config)
    cfg = deps.config
    failure = state["current"] or {}
    candidate = state["candidate"] or {}
    proposal = state.get("proposal")
    revision = state.get("revision", 0)
    candidate_id = str(candidate.get("candidate_id"))
    message = await call_tool(deps.require_tool("run_frozen_policy_trial"), {"candidate_id": candidate_id})
    if message.status == "error":
        trial: dict[str, Any] = {
            "candidate_id": candidate_id,
            "accepted": False,
            "reason": f"the trial failed: {result_text(message)}",
            "measurements": {},
        }
    else:
        data = result_json(message)
        trial = data if isinstance(data, dict) else {"accepted": False, "reason": f"unreadable trial result: {data!r}"}
    await deps.emit("trial", {"failure_id": failure.get("failure_id"), "revision": revision, **trial})
    measurements = trial.get("measurements")
    decision = CriticDecision(
        failure_id=str(failure.get("failure_id")),
        candidate_id=candidate_id,
        accepted=trial.get("accepted") is True,
        reason=str(trial.get("reason") or ("accepted" if trial.get("accepted") is True else "rejected")),
        measurements=measurements if isinstance(measurements, dict) else {},
        metric=trial.get("metric") if isinstance(trial.get("metric"), str) else None,
        revision=revision,
        **{k: _number(trial.get(k)) for k in _TRIAL_FIELDS if k != "metric"},
    )
    await deps.emit("verdict", decision.model_dump())
    update: dict[str, Any] = {"trials": [trial], "decisions": [decision]}
    if decision.accepted:
        return Command(goto="commit", update=update)
    attempt = {
        "revision": revision,
        "candidate_id": candidate_id,
        "interface": proposal.interface if proposal else candidate.get("interface"),
        "tool": proposal.tool if proposal else None,
        "payload": proposal.payload if proposal else candidate.get("payload"),
        "trial": {k: trial.get(k) for k in ("accepted", "reason", *_TRIAL_FIELDS, "measurements") if k in trial},
    }
    update["attempts"] = [*(state.get("attempts") or []), attempt]
    if revision >= cfg.max_revisions:
        update["give_up_reason"] = (
            f"rejected {revision + 1} candidate(s), no revision left (max_revisions {cfg.max_revisions}); "
            f"last reason: {decision.reason}"
        )
        return Command(goto="give_up", update=update)
    if deps.out_of_time(state):
        update["give_up_reason"] = f"time budget exceeded after a rejected candidate; last reason: {decision.reason}"
        return Command(goto="give_up", update=update)
    update["revision"] = revision + 1
    return Command(goto="proposer", update=update)


async def commit(state: EvolverState, config: RunnableConfig) -> Command[Literal["select_failure", "give_up"]]:
    """Commit the accepted candidate (``commit_update``); it applies from the next training step."""
    deps = get_deps(config)
    failure = state["current"] or {}
    candidate = state["candidate"] or {}
    candidate_id = str(candidate.get("candidate_id"))
    message = await call_tool(deps.require_tool("commit_update"), {"candidate_id": candidate_id})
    if message.status == "error":
        return Command(
            goto="give_up",
            update={"give_up_reason": f"commit_update refused candidate {candidate_id}: {result_text(message)}"},
        )
    data = result_json(message)
    result = data if isinstance(data, dict) else {"candidate_id": candidate_id, "result": result_text(message)}
    await deps.emit("commit", {"failure_id": failure.get("failure_id"), "task_id": failure.get("task_id"), **result})
    proposal = state.get("proposal")
    decisions = state.get("decisions") or []
    outcome = FailureOutcome(
        failure_id=str(failure.get("failure_id")),
        task_id=failure.get("task_id"),
        kind=failure.get("kind"),
        status="committed",
        interface=str(result.get("interface") or (proposal.interface if proposal else "")) or None,
        candidate_id=candidate_id,
        revisions=state.get("revision", 0),
        reason=decisions[-1].reason if decisions else "",
        commit=result,
    )
    return Command(goto="select_failure", update={"outcomes": [outcome]})
