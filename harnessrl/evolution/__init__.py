"""Where training meets the evolver: the tool service, its MCP server, the evolution point and the evolver's client.

``service`` implements the evolver's tools on the trainer's state, a facade over its parts (each over the shared
state of ``context``: ``read_tools``; ``build_tools``, the builders and the commit; ``trial_tool``; ``pending``,
pending tests and probations; ``findings``, the audit's and the reference witness's; ``ledger``, the failures
handled or deferred; ``orchestration``, the point's side; and ``hold``, the training hold and its lease;
``outcomes``, what committed updates did; ``handled``, the failures evolution points handled; ``candidates``,
the candidates the tools keep), ``mcp_server`` serves them over MCP,
``point`` pauses training for an evolution point, ``client`` runs the evolver graph against a tool
server (in-process, or as the external ``harnessrl evolver``). The submodules differ in weight
(``point`` imports transformers, ``client`` nothing of the training stack): import what you need from
them directly; this package's own import stays light.
"""

__all__: list[str] = []
