"""The critic node of the evolver graph: have a candidate measured on the frozen policy, then commit it or send it back.

The critic is deterministic code, not a model: the measurement decides, and it is made trainer-side
(:mod:`harnessrl.critic`: the trial recipes, the acceptance rule, the learning-signal measures). This
node only routes on it. It calls
``run_frozen_policy_trial(candidate_id)`` (the trial runs the noise-aware test — a bootstrap interval
of the improvement entirely above zero — on the current, frozen policy and says ``accepted`` with a
reason and its measurements), parses its answer once into the tool contract's
:class:`~harnessrl.records.trials.TrialResult` and records the decision
(:class:`~harnessrl.graph.state.CriticDecision`, which holds that result) in the state. An accepted candidate goes to
``commit`` (``commit_update``, which refuses any candidate whose latest trial was not accepted); a
rejected one goes back to the proposer with the measurements for a revision, at most
``max_revisions`` times, after which the failure is given up and the reason recorded. A candidate the trial could
not decide yet (``pending``: too few groups of the tasks it covers for the sequential test) is neither revised nor
given up: the failure is deferred, and measured again when more of its tasks' groups are graded. With
``revise_unmet_pending``, a pending test that found the added checks broken more often than met first goes back to
the proposer once (the same checks with a hint, for the rule-based evolver); whatever that revision brings short of a
commit, the failure is deferred.

The module is ``critic_node``, not ``critic``, so the graph's node is never mistaken for the trial machinery
of :mod:`harnessrl.critic`.
"""

from __future__ import annotations

import logging
from typing import Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import JsonValue, ValidationError

from harnessrl.agents.tool_loop import call_tool, result_json, result_text
from harnessrl.critic.power import mostly_broken
from harnessrl.graph.state import CriticDecision, EvolverState, FailureOutcome, get_deps
from harnessrl.interfaces.evidence import Attempt
from harnessrl.records.event_payloads import CommitPayload, TrialPayload
from harnessrl.records.trials import TrialResult

__all__ = ["commit", "critic", "unmet_split"]

logger = logging.getLogger(__name__)


def _decision(message: ToolMessage, failure_id: str, candidate_id: str, revision: int) -> CriticDecision:
    """The trial tool's answer, parsed once into the contract's :class:`~harnessrl.records.trials.TrialResult`;
    an error, or an answer that is no trial result, is a decision without a trial (rejected, with the reason)."""
    trial, error = None, None
    if message.status == "error":
        error = f"the trial failed: {result_text(message)}"
    else:
        data = result_json(message)
        try:
            trial = TrialResult.model_validate(data)
        except ValidationError:
            error = f"unreadable trial result: {data!r}"
    return CriticDecision(failure_id=failure_id, candidate_id=candidate_id, revision=revision, trial=trial, error=error)


def unmet_split(trial: TrialResult) -> bool:
    """Whether a pooled test of added checks found them broken more often than met, from its ``split`` measurements
    (:func:`~harnessrl.critic.power.mostly_broken`)."""
    split = trial.measurements.split
    if split is None or split.broken is None or split.rollouts is None:
        return False
    return mostly_broken(split.broken, split.rollouts)


async def critic(
    state: EvolverState, config: RunnableConfig
) -> Command[Literal["commit", "proposer", "give_up", "defer"]]:
    """Run the candidate's trial and decide: commit, revise, give up, or defer (the trial could not decide yet)."""
    deps = get_deps(config)
    cfg = deps.config
    failure, candidate = state["current"], state["candidate"]
    if failure is None or candidate is None:
        return Command(goto="give_up", update={"give_up_reason": "critic: no candidate to measure"})
    proposal = state.get("proposal")
    revision = state.get("revision", 0)
    candidate_id = candidate.candidate_id
    message = await call_tool(deps.require_tool("run_frozen_policy_trial"), {"candidate_id": candidate_id})
    decision = _decision(message, failure.failure_id, candidate_id, revision)
    trial = decision.trial_json()
    await deps.emit(TrialPayload.model_validate({"failure_id": failure.failure_id, "revision": revision, **trial}))
    await deps.emit(decision.verdict_event())
    update: EvolverState = {"trials": [trial], "decisions": [decision]}
    if decision.accepted:
        return Command(goto="commit", update=update)
    attempt = Attempt(
        revision=revision,
        candidate_id=candidate_id,
        interface=proposal.interface if proposal else candidate.interface,
        tool=proposal.tool if proposal else None,
        payload=proposal.payload if proposal else candidate.payload,
        trial=decision.view(),
    )
    attempts = [*(state.get("attempts") or []), attempt]
    pending_reason = state.get("pending_reason")
    if decision.trial is not None and decision.trial.pending:
        if (
            cfg.revise_unmet_pending
            and pending_reason is None
            and revision < cfg.max_revisions
            and unmet_split(decision.trial)
            and not deps.out_of_time(state)
        ):
            update.update(attempts=attempts, revision=revision + 1, pending_reason=decision.reason)
            return Command(goto="proposer", update=update)
        update["give_up_reason"] = decision.reason
        return Command(goto="defer", update=update)
    update["attempts"] = attempts
    if pending_reason is not None:  # the revision asked after a pending verdict failed: that test goes on
        update["give_up_reason"] = f"{pending_reason}; its revision {candidate_id} was rejected: {decision.reason}"
        return Command(goto="defer", update=update)
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
    failure, candidate = state["current"], state["candidate"]
    if failure is None or candidate is None:
        return Command(goto="give_up", update={"give_up_reason": "commit: no candidate to commit"})
    candidate_id = candidate.candidate_id
    message = await call_tool(deps.require_tool("commit_update"), {"candidate_id": candidate_id})
    if message.status == "error":
        return Command(
            goto="give_up",
            update={"give_up_reason": f"commit_update refused candidate {candidate_id}: {result_text(message)}"},
        )
    data = result_json(message)
    result: dict[str, JsonValue] = (
        data if isinstance(data, dict) else {"candidate_id": candidate_id, "result": result_text(message)}
    )
    try:
        event = CommitPayload.model_validate({"failure_id": failure.failure_id, "task_id": failure.task_id, **result})
    except ValidationError as e:  # committed all the same: the answer is kept with the outcome, not reported
        logger.warning("commit_update's answer for %s is no commit step (%s); not reported", candidate_id, e)
    else:
        await deps.emit(event)
    proposal = state.get("proposal")
    decisions = state.get("decisions") or []
    outcome = FailureOutcome(
        failure_id=failure.failure_id,
        task_id=failure.task_id,
        kind=failure.kind,
        status="committed",
        interface=str(result.get("interface") or (proposal.interface if proposal else "")) or None,
        candidate_id=candidate_id,
        revisions=state.get("revision", 0),
        reason=decisions[-1].reason if decisions else "",
        commit=result,
    )
    return Command(goto="select_failure", update={"outcomes": [outcome]})
