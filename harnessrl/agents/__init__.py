"""The evolver's agents: attributor, proposer and critic nodes, and its chat-model backends."""

from harnessrl.agents.llm import make_chat_model
from harnessrl.agents.rule_based import RuleBasedChatModel
from harnessrl.agents.testing import ScriptedChatModel, malformed_tool_call, tool_call

__all__ = ["RuleBasedChatModel", "ScriptedChatModel", "make_chat_model", "malformed_tool_call", "tool_call"]
