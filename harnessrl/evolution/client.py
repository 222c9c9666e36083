"""The evolver's side of the MCP boundary: one evolution point against a trainer's tool server.

One MCP client session (langchain-mcp-adapters, streamable HTTP, bearer token) stays open for the whole
point, its tools are loaded as LangChain tools, and the evolver graph runs over them. The in-process
evolution point (:mod:`harnessrl.evolution.point`) and the external ``harnessrl evolver`` command both
run it. Nothing here (or anything it imports) loads torch, transformers, trl or chromadb: the external
evolver runs on a machine without them.
"""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from harnessrl.graph.state import GraphConfig
from harnessrl.interfaces.tools import HoldState
from harnessrl.records.events import EventCallback

__all__ = ["run_evolution_point"]

logger = logging.getLogger(__name__)


async def run_evolution_point(
    url: str,
    token: str,
    model,
    graph_config: GraphConfig,
    on_event: EventCallback | None = None,
    hold_s: float | None = None,
    *,
    run_dir: str | Path | None = None,
    step: int | None = None,
):
    """One evolution point against a tool server: open one MCP session, load the tools, run the graph.

    Every step the graph reports (attribution, proposal, ..., give-up) goes to the server's
    ``record_event`` tool, so the run's events.jsonl and memory hold it wherever the evolver runs; then
    to ``on_event`` too (e.g. to print it). ``hold_s``: first hold training for a lease of that many
    seconds (an evolver in its own process: the trainer stops at its next step boundary until the point
    ends and releases it); None: the caller already stopped training (an in-process evolution point).
    When the hold is not granted (the trainer did not reach a step boundary in time) the graph does not run:
    the result has no outcomes, ``held`` False and the reason in ``stop_reason``; a server where no training
    runs needs no hold (nothing moves the policy) and the point runs.
    ``run_dir`` and ``step`` (default: the step the hold stopped training at) go into the point's
    LangSmith trace as metadata when tracing is on (:mod:`harnessrl.graph.tracing`)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from harnessrl.graph.state import EvolverDeps
    from harnessrl.graph.tracing import untraced
    from harnessrl.graph_builder import evolve

    client = MultiServerMCPClient(
        {"trainer": {"transport": "streamable_http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}
    )
    async with client.session("trainer") as session:
        tools = await load_mcp_tools(session)
        record = next((t for t in tools if t.name == "record_event"), None)

        async def report(kind: str, payload: dict[str, JsonValue]) -> None:
            if record is not None:
                await record.ainvoke({"kind": kind, "payload": payload})
            if on_event is not None:
                out = on_event(kind, payload)
                if inspect.isawaitable(out):
                    await out

        deps = EvolverDeps(model=model, tools=tools, on_event=report, config=graph_config)
        by_name = {t.name: t for t in tools}
        if hold_s is None or "hold_training" not in by_name:
            return await evolve(deps, run_dir=run_dir, step=step)
        with untraced():  # the plumbing around the point stays out of its trace
            held = _hold_state(await by_name["hold_training"].ainvoke({"seconds": hold_s, "wait_s": hold_s}))
        if step is None and held is not None:
            step = held.step
        if held is None or (not held.held and held.training):
            # no frozen policy to measure on: a trial now would race the training step, so the graph does not run
            reason = f"training was not held ({(held.note if held else None) or 'hold_training did not say held'})"
            logger.warning("no evolution point: %s", reason)
            return {"outcomes": [], "stop_reason": f"not held: {reason}", "held": False}
        if not held.held:  # no training runs there: nothing moves the policy, nothing to release
            return await evolve(deps, run_dir=run_dir, step=step)
        try:
            return await evolve(deps, run_dir=run_dir, step=step)
        finally:
            with untraced():
                await by_name["release_training"].ainvoke({})


def _hold_state(result: Any) -> HoldState | None:
    """``hold_training``'s answer (it comes as MCP content blocks) as the contract's :class:`HoldState`; None when no
    block is one."""
    blocks = result if isinstance(result, list) else [result]
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else block
        try:
            data = json.loads(text) if isinstance(text, str) else None
            if isinstance(data, dict) and "held" in data:
                return HoldState.model_validate(data)
        except ValueError:  # not JSON, or not a HoldState (pydantic's ValidationError is a ValueError)
            continue
    return None
