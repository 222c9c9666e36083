"""The harness evolver's LangGraph: its state, settings and structured outputs, ``build_graph(deps)``, its prompts."""

from harnessrl.graph.builder import build_graph, evolve, make_evolver_model
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
    "build_graph",
    "evolve",
    "make_evolver_model",
]
