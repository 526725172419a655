"""The graph `langgraph.json` serves, built when the server imports this module.

`graph.builder.graph` is built on first use instead (so importing the builder starts no MCP
server), but the server reads the graph from the module's namespace, not by attribute access.
"""

from __future__ import annotations

from graph.builder import served_graph

graph = served_graph()
"""Ferry's graph with the built-in and MCP tools, compiled without a checkpointer."""
