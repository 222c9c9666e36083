"""Latency of one MCP tool call over the trainer's tool server, on one open session, as the evolver makes it.

Serves the tools of a small evolution service (three bundled tasks, no memory, no trials) on loopback, opens one
langchain-mcp-adapters session with the bearer token, and times ``get_harness_state`` calls end to end (argument
validation, the streamable-HTTP round trip, the result parsed back). tests/test_tool_server.py checks the calls
are answered; their speed is measured here, where a busy machine makes a figure slow, not a test red.

    .venv/bin/python benchmarks/tool_latency.py                  # 100 calls, the first 5 left out
    .venv/bin/python benchmarks/tool_latency.py --calls 300 --budget-ms 500

``--budget-ms``: exit 1 when the median is above it (the bound tests/test_tool_server.py once asserted: 500 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path


async def _time_calls(url: str, token: str, task_id: str, calls: int) -> list[float]:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    headers = {"Authorization": f"Bearer {token}"}
    client = MultiServerMCPClient({"harnessrl": {"transport": "streamable_http", "url": url, "headers": headers}})
    times = []
    async with client.session("harnessrl") as session:
        tool = {t.name: t for t in await load_mcp_tools(session)}["get_harness_state"]
        for i in range(calls):
            t0 = time.perf_counter()
            call = {"type": "tool_call", "id": f"c{i}", "name": tool.name, "args": {"task_id": task_id}}
            message = await tool.ainvoke(call)
            times.append(time.perf_counter() - t0)
            if message.status != "success":
                raise RuntimeError(f"call {i} failed: {message.content}")
    return times


def measure(calls: int, warmup: int) -> dict[str, float]:
    """Serve the tools, time ``calls`` calls on one session; figures in ms over the calls after ``warmup``."""
    from harnessrl.data import load_bundled
    from harnessrl.evolution.mcp_server import ToolServer
    from harnessrl.evolution.service import EvolutionService
    from harnessrl.interfaces import Harness
    from harnessrl.records.run_dir import RunDir
    from harnessrl.records.steps import Recorder

    tasks = load_bundled("train")[:3]
    with tempfile.TemporaryDirectory() as folder:
        service = EvolutionService(Harness(tasks), Recorder(None), None, None, RunDir(Path(folder)), list, lambda: 0)
        server = ToolServer(service)
        url, token = server.start()
        try:
            times = asyncio.run(_time_calls(url, token, tasks[0].id, calls + warmup))[warmup:]
        finally:
            server.stop()
    ms = sorted(t * 1000 for t in times)
    return {"median_ms": statistics.median(ms), "p95_ms": ms[int(0.95 * (len(ms) - 1))], "max_ms": ms[-1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100, help="calls timed (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=5, help="first calls left out (session and import warm-up)")
    ap.add_argument("--budget-ms", type=float, default=None, help="exit 1 when the median is above this")
    args = ap.parse_args(argv)
    r = measure(args.calls, args.warmup)
    print(
        f"get_harness_state on one open session, {args.calls} calls: median {r['median_ms']:.1f} ms, "
        f"p95 {r['p95_ms']:.1f} ms, max {r['max_ms']:.1f} ms"
    )
    if args.budget_ms is not None:
        ok = r["median_ms"] <= args.budget_ms
        print(f"{'PASS' if ok else 'FAIL'}: median {'within' if ok else 'above'} {args.budget_ms:g} ms")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
