"""Test doubles for the evolver, shipped so that users' tests need no LLM and no network.

:class:`ScriptedChatModel` replays scripted answers (``AIMessage`` objects with ``tool_calls``, plain
strings, or callables that build the answer from the conversation) and records every conversation it
was shown. LangChain's own fake chat models have no ``bind_tools``; this one returns itself from
``bind_tools`` (remembering the tool names), so the graph binds it like any tool-calling model::

    model = ScriptedChatModel(responses=[
        tool_call("query_memory", {"mode": "what_worked", "text": "uniformly low"}),
        tool_call("submit_attribution", {"failure_id": "f1", "task_id": "t1",
                                         "interface": "rollout_guidance", "rationale": "..."}),
        tool_call("set_guidance", {"target": "t1", "text": "...", "fraction": 0.5}),
    ])
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, JsonValue

__all__ = ["ScriptedChatModel", "malformed_tool_call", "tool_call"]

Scripted = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]


def tool_call(
    name: str, args: dict[str, JsonValue] | None = None, *, id: str | None = None, content: str = ""
) -> AIMessage:
    """An AIMessage that calls one tool (pass several to :class:`AIMessage` yourself for parallel calls)."""
    return AIMessage(
        content=content,
        tool_calls=[{"name": name, "args": dict(args or {}), "id": id or f"call_{uuid.uuid4().hex[:12]}"}],
    )


def malformed_tool_call(name: str, arguments: str, *, id: str | None = None, content: str = "") -> AIMessage:
    """An AIMessage whose tool call's ``arguments`` are not a JSON object, as LangChain reports a model's
    malformed call (``invalid_tool_calls``): the tool loop answers it with an error and runs nothing."""
    return AIMessage(
        content=content,
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "name": name,
                "args": arguments,
                "id": id or f"call_{uuid.uuid4().hex[:12]}",
                "error": "the arguments are not a JSON object",
            }
        ],
    )


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers with ``responses`` in order, one per call.

    Attributes:
        responses: the script; a callable entry gets the conversation and returns the answer.
        received: every conversation the model was called with, in order (for assertions).
        bound_tools: the names of the tools of the latest ``bind_tools`` call.
        cursor: how many answers were given.
    """

    responses: list[Any] = Field(default_factory=list)
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)
    cursor: int = 0

    @property
    def _llm_type(self) -> str:
        return "harnessrl-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.bound_tools = [getattr(t, "name", None) or t.get("name") or t["function"]["name"] for t in tools]
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.received.append(list(messages))
        if self.cursor >= len(self.responses):
            raise IndexError(
                f"ScriptedChatModel has no answer for call {self.cursor + 1}: the script has {len(self.responses)}; "
                "add answers to `responses`"
            )
        answer = self.responses[self.cursor]
        self.cursor += 1
        if callable(answer) and not isinstance(answer, BaseMessage):
            answer = answer(list(messages))
        if isinstance(answer, str):
            answer = AIMessage(content=answer)
        return answer.model_copy()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop)
