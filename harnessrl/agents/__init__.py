"""The evolver's agents: attributor, proposer and critic nodes, and its chat-model backends.

Test doubles (a scripted tool-calling chat model) are in :mod:`harnessrl.agents.testing`, not exported here."""

from harnessrl.agents.llm import make_chat_model
from harnessrl.agents.rule_based import RuleBasedChatModel

__all__ = ["RuleBasedChatModel", "make_chat_model"]
