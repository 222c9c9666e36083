"""The harness evolver as a LangGraph ``StateGraph``: attributor → proposer → critic ⟲ (revise) → commit.

::

    START → fetch_failures → select_failure ──(none left, or the time budget spent)──→ END
                                  ↑    │
                                  │    ↓
                                  │  attributor → proposer → critic ──(accepted)──→ commit ──→ select_failure
                                  │       │          ↑  │      │
                                  │       │          │  │      └─(rejected, revisions left)─→ proposer
                                  │       ↓          ↓  ↓      └─(pending: the data cannot decide yet)─→ defer
                                  └──────────────── give_up  (no attribution or candidate, no revision
                                                              left, commit refused, out of time)

    select_failure ⟲ (a listed failure that a commit earlier in the point handled: a repair of its signature
                      covers it; ``get_failures`` asked again once the point has committed something)

One evolution point handles at most ``max_failures`` failures (from ``get_failures``, deduplicated,
or given in the input state) within ``time_budget_s``. For each: the attributor assigns it to an
interface, the proposer builds a candidate with that interface's builder tool, the critic measures
it on the frozen policy (``run_frozen_policy_trial``); accepted → ``commit_update``; rejected → the
proposer revises with the measurements, at most ``max_revisions`` times, then the failure is given
up. Every step is reported through ``on_event`` and every tool call goes through the given tools.

:func:`build_graph` is the one place the nodes and their routes are wired, and this module the only one
that imports :mod:`harnessrl.agents` (the nodes, and the chat models :func:`make_evolver_model` picks);
nothing is compiled or connected at import time. It is a layer of its own, above the agents, which build on
what every node shares (:mod:`harnessrl.graph`: the state, the prompts, the tracing), so neither of those
imports the other both ways.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic import BaseModel, JsonValue, ValidationError

from harnessrl.agents import attributor, critic_node, proposer
from harnessrl.agents.tool_loop import call_tool, result_json, result_text
from harnessrl.errors import ConfigError, HarnessRLError
from harnessrl.graph.state import (
    DEPS_KEY,
    EvolverDeps,
    EvolverState,
    FailureOutcome,
    GraphFailure,
    LLMConfig,
    get_deps,
)
from harnessrl.graph.tracing import point_config, point_tracing, traced_node
from harnessrl.interfaces.evidence import SuggestSettings
from harnessrl.records.event_payloads import DeferredPayload, GiveUpPayload
from harnessrl.records.failures import Failure, failure_id

__all__ = ["build_graph", "defer", "evolve", "fetch_failures", "give_up", "select_failure"]

logger = logging.getLogger(__name__)

_PER_FAILURE_RESET: EvolverState = {
    "current": None,
    "attribution": None,
    "candidate": None,
    "proposal": None,
    "revision": 0,
    "attempts": [],
    "proposer_messages": [],
    "give_up_reason": None,
    "pending_reason": None,
}


GivenFailure = Failure | BaseModel | Mapping[str, JsonValue]
"""A failure as the graph may be given it: a detected :class:`~harnessrl.records.failures.Failure`, a tool's
:class:`~harnessrl.interfaces.evidence.FailureView` (or another model of those fields), or their JSON."""


def _graph_failure(failure: GivenFailure) -> GraphFailure:
    """A failure as the graph holds it, with a ``failure_id`` (a failure given without one gets the id the
    training memory gives it: :func:`harnessrl.records.failures.failure_id`). Raises ValidationError when it has
    not the fields of a failure."""
    if isinstance(failure, GraphFailure):
        return failure
    d = failure.model_dump(mode="json") if isinstance(failure, BaseModel) else dict(failure)
    if not d.get("failure_id"):
        d["failure_id"] = failure_id(d)
    return GraphFailure.model_validate(d)


def _unreadable(e: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or '(failure)'}: {err['msg']}" for err in e.errors())


def _dedupe(failures: list[GraphFailure]) -> list[GraphFailure]:
    """One failure per (kind, task, criterion or feature): a standing failure is reported at every step
    while it lasts; the latest report is kept, in the order the failures came."""
    latest: dict[tuple[str, str, str | None], GraphFailure] = {}
    for f in failures:
        key = (f.kind, f.task_id, f.evidence.subject or None)
        if key not in latest or f.step >= latest[key].step:
            latest[key] = f
    keep = {id(f) for f in latest.values()}
    return [f for f in failures if id(f) in keep]


async def fetch_failures(state: EvolverState, config: RunnableConfig) -> Command[Literal["select_failure"]]:
    """The failures to handle: those in the input state, else ``get_failures`` (deduplicated, bounded)."""
    deps = get_deps(config)
    cfg = deps.config
    started = deps.clock()
    given = state.get("failures")
    stop_reason = None
    if given is None:
        args: dict[str, JsonValue] = {"limit": max(cfg.fetch_limit, cfg.max_failures)}
        if cfg.since_step is not None:
            args["since_step"] = cfg.since_step
        if cfg.failure_kinds:
            args["kinds"] = list(cfg.failure_kinds)
        listed, error = await _get_failures(deps, args)
        if error is not None:
            logger.warning("get_failures failed, nothing to evolve: %s", error)
            stop_reason = f"get_failures failed: {error}"
    else:
        listed = [_given_failure(i, f) for i, f in enumerate(given)]
    failures = _dedupe(listed)[: cfg.max_failures]
    return Command(
        goto="select_failure",
        update={
            "failures": failures,
            "listed": state.get("failures") is None,
            "cursor": 0,
            "started_at": started,
            "stop_reason": stop_reason,
        },
    )


def _given_failure(index: int, failure: GivenFailure) -> GraphFailure:
    """The ``index``-th failure of the graph's input, as the graph holds it; one that is not a failure is an error
    naming it and what it lacks."""
    try:
        return _graph_failure(failure)
    except ValidationError as e:
        raise HarnessRLError(
            f"the evolver's input failures[{index}] is not a failure ({_unreadable(e)}): give Failure models, or "
            "get_failures' entries (failure_id, kind, step, task_id, domain, summary, evidence)"
        ) from None


async def _get_failures(deps: EvolverDeps, args: dict[str, JsonValue]) -> tuple[list[GraphFailure], str | None]:
    """The ``get_failures`` tool's list for ``args``, and None; or an empty list and why the call failed (an answer
    that lists something other than failures included)."""
    message = await call_tool(deps.require_tool("get_failures"), args)
    data = result_json(message) if message.status != "error" else None
    if data is None:
        return [], result_text(message)[:500]
    items = data.get("failures", []) if isinstance(data, dict) else data
    if not isinstance(items, list):
        return [], f"get_failures answered no list of failures: {result_text(message)[:300]}"
    try:
        return [_graph_failure(f) for f in items], None
    except (TypeError, ValueError) as e:  # pydantic's ValidationError is a ValueError
        why = _unreadable(e) if isinstance(e, ValidationError) else str(e)
        return [], f"get_failures answered an entry that is not a failure ({why})"[:500]


async def _still_open(deps: EvolverDeps, failure: GraphFailure) -> bool:
    """Whether ``get_failures`` still lists ``failure``: a commit earlier in the point may have handled it (a repair
    of its signature covers it). When the question cannot be asked, it is taken as open (the service refuses a
    commit for a closed failure all the same)."""
    listed, error = await _get_failures(deps, {"limit": 200, "task_id": failure.task_id})
    if error is not None:
        logger.warning("get_failures failed; %s taken as open: %s", failure.failure_id, error[:300])
        return True
    return failure.failure_id in {f.failure_id for f in listed}


async def select_failure(
    state: EvolverState, config: RunnableConfig
) -> Command[Literal["attributor", "select_failure", "__end__"]]:
    """The next failure, or the end (none left, or the time budget spent); a listed failure that a commit earlier in
    the point has handled is passed over."""
    deps = get_deps(config)
    failures = state.get("failures") or []
    cursor = state.get("cursor", 0)
    if cursor >= len(failures):
        return Command(goto=END, update={**_PER_FAILURE_RESET, "stop_reason": state.get("stop_reason") or "done"})
    if deps.out_of_time(state):
        left = len(failures) - cursor
        logger.info("evolver time budget (%.0f s) spent; %d failure(s) left for later", deps.config.time_budget_s, left)
        return Command(goto=END, update={**_PER_FAILURE_RESET, "stop_reason": "time_budget"})
    committed = any(o.status == "committed" for o in state.get("outcomes") or [])
    if state.get("listed") and committed and not await _still_open(deps, failures[cursor]):
        # a repair committed at this point covers it (gold-bench seed 3 at ef48919: nocomma-06's uniformly-high group,
        # covered by the family's no-comma check, was then retired as solved on the lax rubric's grades)
        logger.info("failure %s was handled earlier in this point; next", failures[cursor].failure_id)
        return Command(goto="select_failure", update={"cursor": cursor + 1})
    return Command(goto="attributor", update={**_PER_FAILURE_RESET, "current": failures[cursor], "cursor": cursor + 1})


async def _end_failure(
    state: EvolverState, config: RunnableConfig, event: Literal["give_up", "deferred"], default_reason: str
) -> Command[Literal["select_failure"]]:
    """Record how the current failure ended without a commit (an event of kind ``event``, and its outcome) and go
    on with the next one."""
    deps = get_deps(config)
    failure = state.get("current")
    attribution = state.get("attribution")
    reason = state.get("give_up_reason") or default_reason
    candidate = state.get("candidate")
    payload = (GiveUpPayload if event == "give_up" else DeferredPayload)(
        failure_id=failure.failure_id if failure else None,
        task_id=failure.task_id if failure else None,
        failure_kind=failure.kind if failure else None,
        interface=attribution.interface if attribution else None,
        candidate_id=candidate.candidate_id if candidate else None,
        revisions=state.get("revision", 0),
        candidates=[a.candidate_id for a in state.get("attempts") or []],
        reason=reason,
    )
    await deps.emit(payload)
    outcome = FailureOutcome(
        failure_id=str(payload.failure_id),
        task_id=payload.task_id,
        kind=payload.failure_kind,
        status="gave_up" if event == "give_up" else "deferred",
        interface=payload.interface,
        candidate_id=payload.candidate_id,
        revisions=state.get("revision", 0),
        reason=reason,
    )
    return Command(goto="select_failure", update={"outcomes": [outcome], "give_up_reason": None})


async def give_up(state: EvolverState, config: RunnableConfig) -> Command[Literal["select_failure"]]:
    """Record that the current failure was given up, and why; go on with the next one."""
    return await _end_failure(state, config, "give_up", "unknown")


async def defer(state: EvolverState, config: RunnableConfig) -> Command[Literal["select_failure"]]:
    """The critic could not decide the current failure's candidate yet (pending): record that (a ``deferred``
    event) and go on with the next failure; the failure is not handled and comes back with more evidence."""
    return await _end_failure(state, config, "deferred", "pending")


def build_graph(deps: EvolverDeps) -> Runnable:
    """The compiled evolver graph with ``deps`` bound (run it with ``ainvoke({})`` or ``ainvoke({"failures": [...]})``).

    Raises :class:`~harnessrl.errors.ConfigError` when a tool the critic needs is missing.
    """
    deps.require_tool("run_frozen_policy_trial")
    deps.require_tool("commit_update")
    builder = StateGraph(EvolverState)

    def node(name: str, fn, destinations: tuple[str, ...]) -> None:
        builder.add_node(name, traced_node(name, fn), destinations=destinations)

    node("fetch_failures", fetch_failures, ("select_failure",))
    node("select_failure", select_failure, ("attributor", "select_failure", END))
    node("attributor", attributor.attributor, ("proposer", "give_up"))
    node("proposer", proposer.proposer, ("critic", "give_up", "defer"))
    node("critic", critic_node.critic, ("commit", "proposer", "give_up", "defer"))
    node("commit", critic_node.commit, ("select_failure", "give_up"))
    node("give_up", give_up, ("select_failure",))
    node("defer", defer, ("select_failure",))
    builder.add_edge(START, "fetch_failures")
    graph = builder.compile(name="harnessrl-evolver")
    cfg = deps.config
    # supersteps per failure: select, attributor, (proposer + critic) per round, commit, give_up
    per_failure = 4 + 2 * (cfg.max_revisions + 1)
    return graph.with_config(
        configurable={DEPS_KEY: deps},
        recursion_limit=10 + cfg.max_failures * per_failure,
        run_name="harnessrl-evolver",
    )


def make_evolver_model(
    backend: Literal["rule-based", "llm"] = "rule-based",
    llm: LLMConfig | None = None,
    interfaces: Sequence[str] = (),
    remedies: SuggestSettings | None = None,
):
    """The evolver's chat model: the rule-based one (knowing the registered interfaces plus ``interfaces``
    dotted paths, its remedies set by ``remedies``), or ChatOpenAI on any OpenAI-compatible server."""
    if backend == "llm":
        if llm is None:
            raise ConfigError("evolver.backend is 'llm' but evolver.llm is not set (model, base_url, api_key_env)")
        from harnessrl.agents.llm import make_chat_model

        return make_chat_model(llm)
    from harnessrl.agents.rule_based import RuleBasedChatModel

    return RuleBasedChatModel(interfaces=list(interfaces), remedies=remedies or SuggestSettings())


async def evolve(
    deps: EvolverDeps,
    failures: list[GivenFailure] | None = None,
    *,
    run_dir: str | Path | None = None,
    step: int | None = None,
) -> EvolverState:
    """Run one evolution point: handle ``failures`` (default: ask ``get_failures``); returns the final state.

    With LangSmith's variables set the point is one trace (:mod:`harnessrl.graph.tracing`) whose runs carry
    ``run_dir`` and ``step`` (the training step it follows) as metadata."""
    state: EvolverState = (
        {} if failures is None else {"failures": [_given_failure(i, f) for i, f in enumerate(failures)]}
    )
    graph = build_graph(deps)
    with point_tracing():
        return await graph.ainvoke(state, config=point_config(run_dir=run_dir, step=step))
