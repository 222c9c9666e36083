"""The attributor node: which harness interface can fix a reward failure, and why.

The chat model is bound to the read tools (``get_failures``, ``query_memory``, ``inspect_rollouts``,
``get_harness_state``) and to a final ``submit_attribution`` tool whose argument model is
:class:`~harnessrl.graph.state.Attribution`: ending a tool loop with a typed tool call is the robust
way to get structured output from any tool-calling model (an OpenAI-compatible LLM, the rule-based
model, a scripted one). The submit tool is local to the graph (it records nothing on the trainer);
the attribution is reported through ``on_event("attribution", ...)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool, ToolException
from langgraph.types import Command

from harnessrl.agents.tool_loop import context_message, result_json, run_tool_loop
from harnessrl.graph.prompts import load_prompt
from harnessrl.graph.state import Attribution, EvolverState, GraphFailure, get_deps, interface_menu
from harnessrl.interfaces.registry import interface_classes
from harnessrl.interfaces.tools import READ_TOOLS
from harnessrl.records.event_payloads import AttributionPayload

__all__ = ["SUBMIT_ATTRIBUTION", "attributor", "submit_attribution_tool"]

SUBMIT_ATTRIBUTION = "submit_attribution"


def submit_attribution_tool(failure: GraphFailure, interfaces: Sequence[str] = ()) -> StructuredTool:
    """The final tool of the attributor: validates an :class:`Attribution` of ``failure`` (to one of the
    registered interfaces, plus ``interfaces`` dotted paths) and echoes it."""
    known = list(interface_classes(interfaces))

    def submit(**fields: Any) -> str:
        attribution = Attribution.model_validate(fields)
        if attribution.interface not in known:
            raise ToolException(
                f"interface {attribution.interface!r} is not one of {known}: submit again with one of them"
            )
        if attribution.failure_id != failure.failure_id:
            raise ToolException(
                f"failure_id {attribution.failure_id!r} is not the failure you were given: "
                f"submit again with failure_id {failure.failure_id!r}"
            )
        if failure.task_id and attribution.task_id != failure.task_id:
            raise ToolException(f"task_id must be {failure.task_id!r}, the task the failure was detected on")
        return attribution.model_dump_json()

    return StructuredTool.from_function(
        submit,
        name=SUBMIT_ATTRIBUTION,
        description=inspect.cleandoc(Attribution.__doc__ or "") + "\n\nThe interfaces:\n" + interface_menu(interfaces),
        args_schema=Attribution,
        handle_tool_error=True,
        handle_validation_error=lambda e: f"Invalid attribution, submit again corrected: {e}",
    )


def _final(name: str, message: ToolMessage) -> Attribution | None:
    if name != SUBMIT_ATTRIBUTION:
        return None
    data = result_json(message)
    return Attribution.model_validate(data) if isinstance(data, dict) else None


async def attributor(state: EvolverState, config: RunnableConfig) -> Command[Literal["proposer", "give_up"]]:
    """Attribute the current failure to an interface (tool loop ending in ``submit_attribution``)."""
    deps = get_deps(config)
    cfg = deps.config
    failure = state["current"]
    if failure is None:
        return Command(goto="give_up", update={"give_up_reason": "attributor: no failure in hand"})
    if deps.out_of_time(state):
        return Command(goto="give_up", update={"give_up_reason": "time budget exceeded before attribution"})
    tools = [*deps.tools_named(READ_TOOLS), submit_attribution_tool(failure, cfg.interfaces)]
    prompt = load_prompt(
        "attributor", cfg.prompts_dir, max_iterations=cfg.max_tool_iterations, interfaces=interface_menu(cfg.interfaces)
    )
    messages = [
        SystemMessage(content=prompt),
        context_message(
            f"Attribute the failure in the data below to one interface, then call {SUBMIT_ATTRIBUTION} with its "
            "failure_id and task_id.",
            {"failure": failure.model_dump()},
        ),
    ]
    result = await run_tool_loop(
        deps.model,
        tools,
        messages,
        is_final=_final,
        max_iterations=cfg.max_tool_iterations,
        nudge=load_prompt("nudge", cfg.prompts_dir, tools=SUBMIT_ATTRIBUTION),
        deadline=deps.deadline(state),
        clock=deps.clock,
        max_calls_per_turn=cfg.max_tool_calls_per_turn,
    )
    attribution: Attribution | None = result.final_value
    if attribution is None:
        return Command(goto="give_up", update={"give_up_reason": f"attributor: {result.describe()}"})
    await deps.emit(
        AttributionPayload(
            **attribution.model_dump(),
            failure_kind=failure.kind,
            failure_step=failure.step,
            summary=failure.summary,
            iterations=result.iterations,
        )
    )
    return Command(goto="proposer", update={"attribution": attribution, "attributions": [attribution]})
