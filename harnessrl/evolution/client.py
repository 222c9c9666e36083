"""The evolver's side of the MCP boundary: one evolution point against a trainer's tool server.

One MCP client session (langchain-mcp-adapters, streamable HTTP, bearer token) stays open for the whole
point, its tools are loaded as LangChain tools, and the evolver graph runs over them. The in-process
evolution point (:mod:`harnessrl.evolution.point`) and the external ``harnessrl evolver`` command both
run it. Nothing here (or anything it imports) loads torch, transformers, trl or chromadb: the external
evolver runs on a machine without them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harnessrl.graph.state import GraphConfig

__all__ = ["run_evolution_point"]


async def run_evolution_point(
    url: str,
    token: str,
    model,
    graph_config: GraphConfig,
    on_event: Callable[[str, dict[str, Any]], Any] | None = None,
):
    """One evolution point against a tool server: open one MCP session, load the tools, run the graph."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from harnessrl.graph import EvolverDeps, evolve

    client = MultiServerMCPClient(
        {"trainer": {"transport": "streamable_http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}
    )
    async with client.session("trainer") as session:
        tools = await load_mcp_tools(session)
        deps = EvolverDeps(model=model, tools=tools, on_event=on_event, config=graph_config)
        return await evolve(deps)
