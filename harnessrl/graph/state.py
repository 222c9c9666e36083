"""The evolver graph's state, its structured outputs, its settings and what its nodes are given.

Layout after LangGraph's ``open_deep_research``: the state every node reads and partially updates
(:class:`EvolverState`), the pydantic models that cross the LLM boundary (:class:`Attribution` is
the argument model of the attributor's final ``submit_attribution`` tool, so its docstring is the
instruction the LLM reads), what the graph holds of the tools' answers (:class:`GraphFailure`,
:class:`GraphCandidate`: the tool contract's models, dumped as they were answered, so a prompt and an event quote
them unchanged), the records the graph keeps of each step (:class:`ProposalRecord`, :class:`CriticDecision`,
:class:`FailureOutcome`; an earlier attempt is the interfaces' :class:`~harnessrl.interfaces.evidence.Attempt`), the
settings (:class:`GraphConfig`, :class:`LLMConfig`) and the dependencies (:class:`EvolverDeps`: chat model, tools,
event callback) that ``build_graph`` hands to the nodes through the run's ``configurable``.

Nothing here imports torch, trl or chromadb: the evolver side imports fast and runs without a GPU stack.
"""

from __future__ import annotations

import inspect
import logging
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, JsonValue, computed_field, model_validator
from pydantic_core import to_jsonable_python

from harnessrl.errors import ConfigError
from harnessrl.interfaces.evidence import Attempt, FailureView, SuggestSettings, TrialView
from harnessrl.interfaces.registry import interface_classes
from harnessrl.interfaces.sampling import TaskSampling
from harnessrl.interfaces.tools import Candidate
from harnessrl.records.as_written import AsWritten
from harnessrl.records.event_payloads import EventPayload, VerdictPayload
from harnessrl.records.events import EventCallback
from harnessrl.records.trials import TrialMeasurements, TrialResult

__all__ = [
    "DEPS_KEY",
    "Attribution",
    "CriticDecision",
    "EvolverDeps",
    "EvolverState",
    "FailureOutcome",
    "GraphCandidate",
    "GraphConfig",
    "GraphFailure",
    "LLMConfig",
    "ProposalRecord",
    "get_deps",
    "interface_menu",
]

DEPS_KEY = "harnessrl_evolver_deps"

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# structured outputs


class Attribution(BaseModel):
    """Submit your attribution of the failure you were given: the harness interface whose update can
    fix it, why, and the evidence. Call this exactly once, as your last action, after reading what you
    need (the failure's numbers, the task's history, what fixed similar failures before, the current
    harness state). ``interface`` is one of the harness interfaces (:func:`interface_menu`)."""

    model_config = ConfigDict(extra="forbid")

    failure_id: str = Field(min_length=1, description="The failure_id of the failure you attribute.")
    task_id: str = Field(min_length=1, description="The task the failure was detected on.")
    interface: str = Field(min_length=1, description="The interface whose update can fix the failure.")
    rationale: str = Field(min_length=1, description="Why this interface: the reasoning, in one to three sentences.")
    evidence: list[str] = Field(
        default_factory=list,
        description="The facts the attribution rests on, each one short line with its numbers or memory record id.",
    )


class GraphFailure(AsWritten, FailureView):
    """A failure as the graph holds it: the read tools' :class:`~harnessrl.interfaces.evidence.FailureView` (its
    evidence the model of its kind), dumped as it was listed or given (:class:`~harnessrl.records.as_written.AsWritten`:
    the keys it came with, in their order), so the prompts and events quote it unchanged."""


class GraphCandidate(AsWritten, Candidate):
    """A candidate as a builder tool answered it (the tool contract's :class:`~harnessrl.interfaces.tools.Candidate`),
    dumped as it was answered (the proposal event quotes it)."""


class ProposalRecord(BaseModel):
    """A candidate the proposer built through a builder tool (nothing applied yet)."""

    failure_id: str
    task_id: str | None = None
    candidate_id: str
    interface: str
    tool: str = Field(description="The builder tool that made it.")
    payload: dict[str, JsonValue] = Field(default_factory=dict, description="The arguments of the builder call.")
    rationale: str = ""
    revision: int = Field(default=0, description="0 for the first proposal for a failure, n for the n-th revision.")


class CriticDecision(BaseModel):
    """The critic's verdict on one candidate: its trial on the frozen policy as ``run_frozen_policy_trial``
    returned it (``trial``), or why there is none (``error``: the tool failed, or answered no trial result).
    Accepted only on a trial that accepted the candidate."""

    failure_id: str
    candidate_id: str
    revision: int = 0
    trial: TrialResult | None = None
    error: str | None = Field(default=None, description="Why there is no trial result (None: there is one).")

    @computed_field
    @property
    def accepted(self) -> bool:
        return self.trial is not None and self.trial.accepted

    @computed_field
    @property
    def reason(self) -> str:
        """The trial's reason (or the error): what a revision and the give-up record say."""
        if self.trial is None:
            return self.error or "rejected"
        return self.trial.reason or ("accepted" if self.trial.accepted else "rejected")

    def trial_json(self) -> dict[str, JsonValue]:
        """The trial as the graph keeps and reports it: the tool's result as JSON, or for a failed trial its
        candidate, verdict and reason."""
        if self.trial is not None:
            return self.trial.model_dump(mode="json")
        return {"candidate_id": self.candidate_id, "accepted": False, "reason": self.reason, "measurements": {}}

    def view(self) -> TrialView:
        """The trial as the proposer is told it when it revises: the interfaces' view of a trial result (dumped
        with ``exclude_unset``, the fields this decision has)."""
        if self.trial is None:
            return TrialView(accepted=False, reason=self.reason, measurements=TrialMeasurements())
        return TrialView.model_validate(self.trial.model_dump(include=set(TrialView.model_fields)))

    def verdict_event(self) -> VerdictPayload:
        """The ``verdict`` step the graph reports: the decision, and its trial's metric, numbers and measurements."""
        numbers = self.trial.model_dump(include=set(_NUMBERS)) if self.trial else dict.fromkeys(_NUMBERS)
        return VerdictPayload.model_validate(
            {
                "failure_id": self.failure_id,
                "candidate_id": self.candidate_id,
                "accepted": self.accepted,
                "reason": self.reason,
                "measurements": self.trial.measurements.model_dump() if self.trial else {},
                **{k: numbers[k] for k in _NUMBERS},
                "revision": self.revision,
            }
        )


_NUMBERS = ("metric", "baseline", "candidate", "improvement", "ci_low", "ci_high")
"""The trial's metric and its numbers, as a verdict reports them."""


class FailureOutcome(BaseModel):
    """How the graph's handling of one failure ended."""

    failure_id: str
    task_id: str | None = None
    kind: str | None = None
    status: Literal["committed", "gave_up", "deferred"]
    interface: str | None = None
    candidate_id: str | None = None
    revisions: int = 0
    reason: str = ""
    commit: dict[str, JsonValue] | None = Field(default=None, description="commit_update's answer (committed).")


# --------------------------------------------------------------------------------------------------
# state


class EvolverState(TypedDict, total=False):
    """What the evolver graph carries from node to node (nodes return partial updates).

    Per evolution point: ``failures`` (from ``get_failures``, ``listed``, or given in the input), ``cursor`` (index
    of the next one), and the accumulating records (``attributions``, ``proposals``, ``trials``,
    ``decisions``, ``outcomes``). Per failure (reset when the next one is selected): ``current``,
    ``attribution``, ``candidate``, ``revision``, ``attempts`` (each rejected candidate with its
    trial, for the proposer's revisions) and ``proposer_messages`` (the proposer's conversation, kept
    across revisions)."""

    failures: list[GraphFailure]
    listed: bool
    cursor: int
    started_at: float
    stop_reason: str | None

    current: GraphFailure | None
    attribution: Attribution | None
    candidate: GraphCandidate | None
    proposal: ProposalRecord | None
    revision: int
    attempts: list[Attempt]
    proposer_messages: list[AnyMessage]
    give_up_reason: str | None
    pending_reason: str | None  # the pending verdict a revision was asked after (revise_unmet_pending)

    attributions: Annotated[list[Attribution], operator.add]
    proposals: Annotated[list[ProposalRecord], operator.add]
    trials: Annotated[list[dict[str, JsonValue]], operator.add]  # each trial as JSON (CriticDecision.trial_json)
    decisions: Annotated[list[CriticDecision], operator.add]
    outcomes: Annotated[list[FailureOutcome], operator.add]


# --------------------------------------------------------------------------------------------------
# settings and dependencies


class GraphConfig(BaseModel):
    """Bounds and choices of one evolution point (the ``evolver`` section of a training config)."""

    model_config = ConfigDict(extra="forbid")

    max_failures: int = Field(default=4, ge=1, description="Failures handled per evolution point at most.")
    max_revisions: int = Field(
        default=2, ge=0, description="Revisions of a rejected candidate before giving up on the failure."
    )
    max_tool_iterations: int = Field(
        default=8, ge=1, description="Model calls per attribution or proposal (its tool loop) at most."
    )
    max_tool_calls_per_turn: int = Field(
        default=8, ge=1, description="Tool calls run per model answer at most; the rest are answered 'not run'."
    )
    time_budget_s: float = Field(
        default=600.0, gt=0, description="Wall-clock seconds per evolution point; the graph stops cleanly after it."
    )
    since_step: int | None = Field(default=None, ge=0, description="Ask get_failures only for failures since then.")
    failure_kinds: list[str] | None = Field(default=None, description="Ask get_failures only for these kinds.")
    fetch_limit: int = Field(default=20, ge=1, description="Failures asked of get_failures (deduplicated after).")
    fallback_interface: str | None = Field(
        default=TaskSampling.name,
        description="On a revision the proposer may also use this interface's builder (e.g. park a task that "
        "guidance did not help); null: only the attributed interface.",
    )
    interfaces: list[str] = Field(
        default_factory=list,
        description="Dotted paths of interfaces to add to the registered ones (the run's harness.interfaces).",
    )
    prompts_dir: Path | None = Field(
        default=None,
        description="A folder of prompt files (attributor.md, proposer.md, revision.md, ...) overriding the "
        "packaged ones; a missing file falls back to the packaged prompt.",
    )
    remedies: SuggestSettings = Field(
        default_factory=SuggestSettings, description="Settings of the built-in remedies (the rule-based evolver)."
    )
    revise_unmet_pending: bool = Field(
        default=True,
        description="A candidate whose pooled test is pending with its added checks broken more often than met "
        "goes back to the proposer once, in the same point, instead of waiting: a check the policy does not meet yet "
        "splits few groups and its test decides slowly, so the rule-based evolver proposes the same checks with a "
        "hint to part of each group (requirement_guided). Whatever the revision brings short of a commit, the "
        "failure is deferred as the pending verdict said (docs/design.md section 4, 'Pending and unmet'); false: it "
        "waits pending.",
    )

    @model_validator(mode="after")
    def _known_fallback(self):
        known = interface_classes(self.interfaces)
        if self.fallback_interface is not None and self.fallback_interface not in known:
            raise ValueError(
                f"fallback_interface {self.fallback_interface!r} is not an interface; known: {sorted(known)}"
            )
        return self


def interface_menu(extra: Sequence[str] = ()) -> str:
    """The registered interfaces as the evolver's prompts list them: one line each, its name, what it
    changes and when to blame it (its ``evolver_text``), and the failure kinds it can answer."""
    lines = []
    for name, cls in interface_classes(extra).items():
        kinds = list(dict.fromkeys((*cls.hint_for, *cls.answers)))
        lines.append(f"- `{name}`: {cls.evolver_text}" + (f" Answers: {', '.join(kinds)}." if kinds else ""))
    return "\n".join(lines)


class LLMConfig(BaseModel):
    """The evolver's chat model: any LangChain chat model, by provider string or by a factory's dotted path
    (:mod:`harnessrl.agents.llm`)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        default="",
        description="'provider:model' as LangChain's init_chat_model reads it (openai:gpt-4.1-mini, "
        "anthropic:claude-sonnet-4-5, ollama:qwen3:8b), or a bare name an OpenAI-compatible server knows "
        "(Qwen/Qwen3-8B on vLLM or SGLang at base_url).",
    )
    provider: str | None = Field(
        default=None, description="The LangChain provider, when model does not say it (default: openai)."
    )
    factory: str | None = Field(
        default=None,
        description="'package.module:function' called with this config, returning any chat model with bind_tools "
        "(instead of model/provider).",
    )
    base_url: str | None = Field(
        default=None, description="Server URL, e.g. http://localhost:8000/v1; null: the provider's."
    )
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="The evolver model's sampling temperature; 0 (the default) makes its attributions and proposals "
        "as repeatable as the server allows.",
    )
    timeout_s: float = Field(default=120.0, gt=0, description="Seconds per request.")
    max_retries: int = Field(default=2, ge=0, description="Retries of a failed request, with backoff.")
    max_tokens: int | None = Field(default=2048, ge=16, description="Completion tokens per turn; null: the server's.")
    extra: dict[str, JsonValue] = Field(
        default_factory=dict, description="More keyword arguments for the model's class."
    )

    @model_validator(mode="after")
    def _names_a_model(self):
        if not self.factory and not self.model:
            raise ValueError("evolver.llm needs a model ('openai:gpt-4.1-mini', 'ollama:qwen3:8b', ...) or a factory")
        return self

    def provider_and_model(self) -> tuple[str, str]:
        """(provider, model name): from 'provider:model', else ``provider`` (default openai) and the name."""
        if self.provider:
            return self.provider, self.model
        head, sep, rest = self.model.partition(":")
        if sep and head in _PROVIDERS:
            return head, rest
        return "openai", self.model


# providers LangChain's init_chat_model knows by prefix (a name like "qwen3:8b" alone is not one of them)
_PROVIDERS = frozenset(
    {
        "openai", "anthropic", "azure_openai", "azure_ai", "google_vertexai", "google_genai", "bedrock",
        "bedrock_converse", "cohere", "fireworks", "together", "mistralai", "huggingface", "groq", "ollama",
        "google_anthropic_vertex", "deepseek", "ibm", "nvidia", "xai", "perplexity", "upstage",
    }
)  # fmt: skip


@dataclass
class EvolverDeps:
    """What the graph's nodes work with.

    Args:
        model: any LangChain chat model with ``bind_tools`` (ChatOpenAI, the rule-based model, a scripted one).
        tools: the evolver's LangChain tools by their contract names (from the MCP server in production).
        on_event: ``on_event(kind, payload)``, called for every step (sync or async); None: events are only logged.
        config: the evolution point's bounds.
        clock: seconds, monotonic (tests may pass a fake one).
    """

    model: BaseChatModel
    tools: Sequence[BaseTool]
    on_event: EventCallback | None = None
    config: GraphConfig = field(default_factory=GraphConfig)
    clock: Callable[[], float] = time.monotonic

    def deadline(self, state: EvolverState) -> float:
        """When this evolution point's time budget runs out (on :attr:`clock`)."""
        return state.get("started_at", self.clock()) + self.config.time_budget_s

    def out_of_time(self, state: EvolverState) -> bool:
        return self.clock() >= self.deadline(state)

    async def emit(self, event: EventPayload) -> None:
        """Report one step (its kind's payload model) to ``on_event`` (a failing callback is logged, never fatal to
        the evolver)."""
        kind = event.KIND
        payload = to_jsonable_python(event.written(), fallback=str)
        logger.info("evolver %s: %s", kind, {k: payload[k] for k in list(payload)[:6]})
        if self.on_event is None:
            return
        try:
            out = self.on_event(kind, payload)
            if inspect.isawaitable(out):
                await out
        except Exception:
            logger.exception("on_event(%r, ...) failed; the evolver goes on", kind)

    def tool(self, name: str) -> BaseTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def tools_named(self, names: Sequence[str]) -> list[BaseTool]:
        return [t for n in names if (t := self.tool(n)) is not None]

    def require_tool(self, name: str) -> BaseTool:
        tool = self.tool(name)
        if tool is None:
            have = sorted(t.name for t in self.tools)
            raise ConfigError(
                f"the evolver needs the tool {name!r} but was given only {have}: pass the trainer's tools "
                "(ToolServer + langchain-mcp-adapters, or the in-process EvolutionService tools)"
            )
        return tool


def get_deps(config: RunnableConfig | None) -> EvolverDeps:
    """The :class:`EvolverDeps` that ``build_graph`` put into the run's configurable."""
    deps = ((config or {}).get("configurable") or {}).get(DEPS_KEY)
    if not isinstance(deps, EvolverDeps):
        raise ConfigError("the evolver graph was run without its dependencies: build it with build_graph(deps)")
    return deps
