"""The harness evolver's LangGraph: its state and structured outputs, ``build_graph(deps)``, its prompts."""

from harnessrl.graph.graph import build_graph, evolve
from harnessrl.graph.state import (
    Attribution,
    CriticDecision,
    EvolverConfig,
    EvolverDeps,
    EvolverState,
    FailureOutcome,
    ProposalRecord,
)

__all__ = [
    "Attribution",
    "CriticDecision",
    "EvolverConfig",
    "EvolverDeps",
    "EvolverState",
    "FailureOutcome",
    "ProposalRecord",
    "build_graph",
    "evolve",
]
