"""The proposer node: one candidate update for the attributed interface, built through its builder tool.

The chat model is bound to the builder of the attributed interface (its ``builder_tool``, e.g.
``set_guidance``) and the read tools; on a revision also to the builder of the
configured fallback interface (e.g. park a task that guidance did not help). A builder validates and
records the candidate and applies nothing; its result (a ``Candidate`` with ``candidate_id``) ends
the tool loop. The conversation is kept across revisions, and each revision adds the critic's
reason and the trial's measurements to it.
"""

from __future__ import annotations

from typing import Literal

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command
from pydantic import ValidationError

from harnessrl.agents.tool_loop import ToolLoopResult, context_message, flat_args, result_json, run_tool_loop
from harnessrl.graph.prompts import load_prompt
from harnessrl.graph.state import (
    Attribution,
    EvolverState,
    GraphCandidate,
    GraphConfig,
    GraphFailure,
    ProposalRecord,
    get_deps,
)
from harnessrl.interfaces.registry import builder_tools
from harnessrl.interfaces.tools import READ_TOOLS
from harnessrl.records.event_payloads import ProposalPayload

__all__ = ["proposer"]


async def proposer(state: EvolverState, config: RunnableConfig) -> Command[Literal["critic", "give_up", "defer"]]:
    """Build a candidate (or, on a revision, a revised one) for the current failure."""
    deps = get_deps(config)
    cfg = deps.config
    failure = state["current"]
    attribution = state["attribution"]
    revision = state.get("revision", 0)
    if failure is None or attribution is None:
        return Command(goto="give_up", update={"give_up_reason": "proposer: no attribution"})
    if deps.out_of_time(state):
        return Command(goto="give_up", update={"give_up_reason": f"time budget exceeded before revision {revision}"})
    interfaces = [attribution.interface]
    if revision > 0 and cfg.fallback_interface and cfg.fallback_interface != attribution.interface:
        interfaces.append(cfg.fallback_interface)
    tool_of = builder_tools(cfg.interfaces)
    if attribution.interface not in tool_of:
        return Command(
            goto="give_up",
            update={"give_up_reason": f"proposer: {attribution.interface!r} is not an interface ({sorted(tool_of)})"},
        )
    builders = deps.tools_named([tool_of[i] for i in interfaces if i in tool_of])
    if not builders:
        return Command(
            goto="give_up",
            update={"give_up_reason": f"proposer: no builder tool ({tool_of[attribution.interface]}) was given"},
        )
    builder_names = [t.name for t in builders]
    messages = _conversation(state, cfg, failure, attribution, revision, builder_names)

    def final(name: str, message: ToolMessage) -> GraphCandidate | None:
        """The builder's answer as a candidate (None: no builder call, or no candidate in its answer)."""
        if name not in builder_names:
            return None
        data = result_json(message)
        if not (isinstance(data, dict) and data.get("candidate_id")):
            return None
        try:
            return GraphCandidate.model_validate(data)
        except ValidationError:
            return None

    result = await run_tool_loop(
        deps.model,
        [*deps.tools_named(READ_TOOLS), *builders],
        messages,
        is_final=final,
        max_iterations=cfg.max_tool_iterations,
        nudge=load_prompt("nudge", cfg.prompts_dir, tools=", ".join(builder_names)),
        deadline=deps.deadline(state),
        clock=deps.clock,
        max_calls_per_turn=cfg.max_tool_calls_per_turn,
    )
    if result.final_value is None:
        why = f"proposer (revision {revision}): {result.describe()}"
        pending = state.get("pending_reason")
        return Command(
            goto="defer" if pending else "give_up",  # after a pending verdict, that test goes on
            update={
                "give_up_reason": f"{pending}; no revision: {why}" if pending else why,
                "proposer_messages": result.messages,
            },
        )
    candidate: GraphCandidate = result.final_value
    record = _record(failure, attribution, revision, result, tool_of)
    await deps.emit(
        ProposalPayload(**record.model_dump(), candidate=candidate.model_dump(), iterations=result.iterations)
    )
    return Command(
        goto="critic",
        update={
            "candidate": candidate,
            "proposal": record,
            "proposals": [record],
            "proposer_messages": result.messages,
        },
    )


def _conversation(
    state: EvolverState,
    cfg: GraphConfig,
    failure: GraphFailure,
    attribution: Attribution,
    revision: int,
    builder_names: list[str],
) -> list[BaseMessage]:
    """The proposer's conversation: a new one (the failure, the attribution), or the kept one with the
    critic's reason and the trial's measurements added for a revision."""
    messages = list(state.get("proposer_messages") or [])
    if not messages:
        return [
            SystemMessage(content=load_prompt("proposer", cfg.prompts_dir, max_iterations=cfg.max_tool_iterations)),
            context_message(
                f"Propose one candidate update for this failure with {' or '.join(builder_names)}.",
                {
                    "failure": failure.model_dump(),
                    "attribution": attribution.model_dump(),
                    "revision": 0,
                    "max_revisions": cfg.max_revisions,
                    "builders": builder_names,
                },
            ),
        ]
    attempts = [a.model_dump(exclude_unset=True) for a in state.get("attempts") or []]
    last = attempts[-1] if attempts else {}
    trial = last.get("trial") or {}
    messages.append(
        context_message(
            load_prompt(
                "revision_pending" if state.get("pending_reason") else "revision",
                cfg.prompts_dir,
                candidate_id=last.get("candidate_id", "?"),
                revision=revision,
                max_revisions=cfg.max_revisions,
                reason=trial.get("reason") or "no reason given",
            ),
            {"revision": revision, "trial": trial, "attempts": attempts, "builders": builder_names},
        )
    )
    return messages


def _record(
    failure: GraphFailure, attribution: Attribution, revision: int, result: ToolLoopResult, tool_of: dict[str, str]
) -> ProposalRecord:
    """What the proposal was: the builder call that made the candidate, as the events record it."""
    candidate: GraphCandidate = result.final_value
    call = result.final_call or {}
    payload = flat_args(call.get("args") or {})
    return ProposalRecord(
        failure_id=failure.failure_id,
        task_id=failure.task_id,
        candidate_id=candidate.candidate_id,
        interface=str(
            candidate.interface or {t: i for i, t in tool_of.items()}.get(call.get("name", ""), attribution.interface)
        ),
        tool=call.get("name", ""),
        payload=payload,
        rationale=str(payload.get("rationale") or ""),
        revision=revision,
    )
