"""LangSmith traces of the evolver: one trace per evolution point, its runs named, tagged and annotated.

Tracing follows LangSmith's standard environment variables (``LANGSMITH_TRACING=true``,
``LANGSMITH_API_KEY``, ``LANGSMITH_ENDPOINT``, ``LANGSMITH_PROJECT``); without them nothing here does
anything and nothing is sent. With them, :func:`point_tracing` wraps one evolution point and
:func:`point_config` names its root run ``harnessrl-evolution-point``, tagged ``harnessrl`` and given the
run directory and the step as metadata, which every run below it inherits. Below the root, LangGraph
names a run after each node (``attributor``, ``proposer``, ``critic``, ``commit``, ``give_up``, ...) and
LangChain one after each tool (``query_memory``, ``edit_rubric``, ``run_frozen_policy_trial``, ...).
:func:`traced_node` annotates each node's run with what the graph's state says about the failure in hand
(its id, task, kind; the interface; the candidate; the critic's verdict and the trial's cost) and passes
the same metadata on to the tool and model runs inside the node, so a LangSmith filter such as
``tags: rubric_criteria AND rejected`` lists every rejected rubric candidate.

A trace is a convenience; the run's own decision trace (``events.jsonl``) is written whatever happens
here. An endpoint that does not answer (or a hosted one without an API key) is found once per process
by a one-second probe, reported in one warning, and tracing is switched off for the process instead of
a stream of failed uploads in the log.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import logging
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from pydantic import JsonValue

from harnessrl.graph.state import CriticDecision, EvolverState, FailureOutcome, ProposalRecord

__all__ = ["POINT_RUN_NAME", "TAG", "flush", "point_config", "point_tracing", "reset", "traced_node", "untraced"]

logger = logging.getLogger(__name__)

POINT_RUN_NAME = "harnessrl-evolution-point"
"""The name of each evolution point's root run."""
TAG = "harnessrl"
"""The tag of every run HarnessRL traces."""
PROBE_TIMEOUT_S = 1.0

_lock = threading.Lock()
_checked: dict[tuple[str, bool], bool] = {}  # (endpoint, has key) -> traces may go there
_clients: dict[tuple[str, str | None], Any] = {}  # (endpoint, key) -> langsmith.Client


# --------------------------------------------------------------------------------------------- the point
def point_config(*, run_dir: str | Path | None = None, step: int | None = None) -> RunnableConfig:
    """The config of an evolution point's root run (its name, tags and metadata; every run below inherits
    the tags and the metadata)."""
    metadata = {"run_dir": str(Path(run_dir).resolve()) if run_dir is not None else None, "step": step}
    return {
        "run_name": POINT_RUN_NAME,
        "tags": [TAG, "evolution-point"],
        "metadata": {k: v for k, v in metadata.items() if v is not None},
    }


@contextlib.contextmanager
def point_tracing() -> Iterator[bool]:
    """Trace what runs inside to LangSmith when its variables say so; yields whether it does.

    The first time in a process that tracing is on for an endpoint, the endpoint is probed (a GET of its
    ``/info`` with a one-second timeout; any HTTP answer counts as an answer). One that does not answer,
    or a hosted endpoint without ``LANGSMITH_API_KEY``, is reported in one warning and tracing is turned
    off for the rest of the process (``langsmith.configure(enabled=False)``)."""
    from langsmith import run_helpers
    from langsmith import utils as ls_utils

    if not ls_utils.tracing_is_enabled():
        yield False
        return
    endpoint = ls_utils.get_api_url(None)
    key = ls_utils.get_api_key(None)
    if not _usable(endpoint, key):
        yield False
        return
    with run_helpers.tracing_context(client=_client(endpoint, key)):
        yield True


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Run what is inside without tracing (the plumbing around a point, such as holding training)."""
    from langsmith import run_helpers

    with run_helpers.tracing_context(enabled=False):
        yield


def flush(timeout: float | None = None) -> None:
    """Wait until the traces queued so far are sent (at most ``timeout`` seconds; None: no limit).

    Not needed for the traces to arrive: the client sends them in the background and before the process
    exits. Tests and notebooks call it to read them back at once."""
    for client in list(_clients.values()):
        client.flush(timeout)


def reset(timeout: float | None = 5.0) -> None:
    """Forget what this process decided about tracing: close its LangSmith clients (after sending their
    queued traces, waiting at most ``timeout`` seconds), forget the endpoint checks, undo a switch-off, and
    re-read LangSmith's environment variables (which it caches). For tests, and for a notebook that changes
    ``LANGSMITH_*`` variables after tracing started."""
    import langsmith
    from langsmith import utils as ls_utils

    with _lock:
        clients = list(_clients.values())
        disabled = any(not ok for ok in _checked.values())
        _clients.clear()
        _checked.clear()
    for client in clients:
        client.close(timeout)
    if disabled:
        langsmith.configure(enabled=None)
    ls_utils.get_env_var.cache_clear()
    ls_utils.get_tracer_project.cache_clear()


def _client(endpoint: str, key: str | None):
    """One LangSmith client per endpoint and key in a process (it batches and sends in the background)."""
    from langsmith import Client

    with _lock:
        client = _clients.get((endpoint, key))
        if client is None:
            client = _clients[(endpoint, key)] = Client(api_url=endpoint, api_key=key)
        return client


def _usable(endpoint: str, key: str | None) -> bool:
    """Whether traces can go to ``endpoint`` (decided once per process; the first ``False`` is warned about
    and turns tracing off for the process)."""
    with _lock:
        known = _checked.get((endpoint, key is not None))
    if known is not None:
        return known
    hosted_without_key = key is None and not _is_loopback(endpoint)
    problem = "LANGSMITH_API_KEY is not set" if hosted_without_key else _probe(endpoint)
    with _lock:
        _checked[(endpoint, key is not None)] = problem is None
    if problem is not None:
        import langsmith

        langsmith.configure(enabled=False)
        _quiet_upload_errors()
        logger.warning(
            "LangSmith tracing is on (LANGSMITH_TRACING) but traces cannot reach %s: %s. Tracing is off for "
            "this process and training goes on; the run's events.jsonl records every evolver decision. "
            "Fix LANGSMITH_ENDPOINT / LANGSMITH_API_KEY, or unset LANGSMITH_TRACING.",
            endpoint,
            problem,
        )
    return problem is None


def _probe(endpoint: str) -> str | None:
    """None when ``endpoint`` answers HTTP within :data:`PROBE_TIMEOUT_S`, else what went wrong."""
    request = urllib.request.Request(f"{endpoint}/info", method="GET")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:  # it answered, if only with an error status: the endpoint is there
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{type(reason).__name__}: {reason}" if not isinstance(reason, str) else reason


def _is_loopback(endpoint: str) -> bool:
    host = urllib.parse.urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _UploadErrors(logging.Filter):
    """Drops the LangSmith client's per-batch upload failures (already reported by the one warning)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Failed to") and "ingest" in message)


def _quiet_upload_errors() -> None:
    """Runs traced before tracing was turned off may still be queued: their failed uploads stay quiet."""
    client_logger = logging.getLogger("langsmith.client")
    if not any(isinstance(f, _UploadErrors) for f in client_logger.filters):
        client_logger.addFilter(_UploadErrors())


# --------------------------------------------------------------------------------------------- the nodes
Metadata = dict[str, JsonValue]
"""A run's metadata: what the graph's state says, by name."""


def _state_annotations(node: str, state: EvolverState) -> Metadata:
    """What the state says about the failure ``node`` works on, before it runs."""
    failure = state.get("current")
    if failure is None:
        return {}
    attribution = state.get("attribution")
    attributed = attribution.interface if attribution is not None else None
    meta: Metadata = {
        "failure_id": failure.failure_id,
        "task_id": failure.task_id,
        "failure_kind": failure.kind,
        "failure_step": failure.step,
        "interface": attributed,
        "attributed_interface": attributed,
        "revision": state.get("revision", 0) if attribution is not None else None,
    }
    if node == "proposer":  # its candidate's interface is known when it is built (a revision may use another)
        meta["interface"] = None
    else:
        proposal, candidate = state.get("proposal"), state.get("candidate")
        meta["candidate_id"] = (proposal.candidate_id if proposal else None) or (
            candidate.candidate_id if candidate else None
        )
        meta["interface"] = (proposal.interface if proposal else None) or attributed
    return meta


def _update_annotations(update: object) -> Metadata:
    """What a node's state update adds: the attribution, the candidate, the verdict and trial cost, the outcome."""
    if not isinstance(update, Mapping):
        return {}
    meta: Metadata = {}
    if attributions := update.get("attributions"):
        meta["interface"] = meta["attributed_interface"] = attributions[-1].interface
    if proposals := update.get("proposals"):
        proposal: ProposalRecord = proposals[-1]
        meta.update(candidate_id=proposal.candidate_id, interface=proposal.interface)
        meta.update(revision=proposal.revision, builder_tool=proposal.tool)
    if decisions := update.get("decisions"):
        decision: CriticDecision = decisions[-1]
        trial = decision.trial
        meta["verdict"] = "accepted" if decision.accepted else "rejected"
        meta["verdict_reason"] = decision.reason
        numbers = trial.model_dump(include=set(_TRIAL_NUMBERS)) if trial is not None else {}
        cost = trial.cost.model_dump() if trial is not None else {}
        meta.update({f"trial_{k}": numbers.get(k) for k in _TRIAL_NUMBERS})
        meta.update({f"trial_{k}": cost.get(k) for k in ("rollouts", "judge_calls", "seconds")})
    if outcomes := update.get("outcomes"):
        outcome: FailureOutcome = outcomes[-1]
        meta["outcome"] = outcome.status
        meta["outcome_reason"] = outcome.reason
    elif update.get("give_up_reason"):
        meta["give_up_reason"] = update["give_up_reason"]
    return meta


_TRIAL_NUMBERS = ("metric", "baseline", "candidate", "improvement")
"""The trial's metric and numbers a critic run is annotated with."""


def _tags(meta: Metadata) -> list[str]:
    """The tags a run gets from its metadata: the failure kind, the interface, the verdict, the outcome."""
    return [str(meta[k]) for k in ("failure_kind", "interface", "verdict", "outcome") if meta.get(k)]


def _annotate(run: Any, meta: Metadata) -> Metadata:
    meta = {k: v for k, v in meta.items() if v is not None}
    if meta:
        run.add_metadata(meta)
        run.add_tags([t for t in _tags(meta) if t not in (run.tags or [])])
    return meta


Node = Callable[[Any, RunnableConfig], Awaitable[Any]]
FAILURE_NODES = ("attributor", "proposer", "critic", "commit", "give_up")
"""The nodes that work on one failure (the others, fetching and selecting failures, work on the point)."""


def traced_node(name: str, node: Node) -> Node:
    """``node`` with its LangSmith run annotated (see the module doc) if it is one of :data:`FAILURE_NODES`;
    it runs unchanged when nothing is traced."""
    if name not in FAILURE_NODES:
        return node

    @functools.wraps(node)
    async def run(state, config: RunnableConfig):
        from langsmith.run_helpers import get_current_run_tree

        tree = get_current_run_tree()
        if tree is None:
            return await node(state, config)
        meta = _annotate(tree, _state_annotations(name, state))
        child = var_child_runnable_config.get()
        token = None
        if meta and child is not None:  # the node's tool and model runs inherit what the node is about
            token = var_child_runnable_config.set(
                {
                    **child,
                    "metadata": {**(child.get("metadata") or {}), **meta},
                    "tags": [*(child.get("tags") or []), *_tags(meta)],
                }
            )
        try:
            command = await node(state, config)
        finally:
            if token is not None:
                var_child_runnable_config.reset(token)
        _annotate(tree, _update_annotations(getattr(command, "update", None)))
        return command

    return run
