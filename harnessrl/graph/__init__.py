"""What the evolver graph's nodes share: its state, settings and structured outputs, its prompts and its tracing.

The agents (:mod:`harnessrl.agents`: the nodes and chat models) build on this package; the graph itself is
wired in :mod:`harnessrl.graph_builder` (``build_graph(deps)``, ``evolve``, ``make_evolver_model``), above them.
"""

from harnessrl.graph.state import (
    Attribution,
    CriticDecision,
    EvolverDeps,
    EvolverState,
    FailureOutcome,
    GraphConfig,
    LLMConfig,
    ProposalRecord,
)

__all__ = [
    "Attribution",
    "CriticDecision",
    "EvolverDeps",
    "EvolverState",
    "FailureOutcome",
    "GraphConfig",
    "LLMConfig",
    "ProposalRecord",
]
