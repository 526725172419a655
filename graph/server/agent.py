"""The graph `langgraph.json` serves, built when the server imports this module.

`graph.builder.graph` is built on first use instead (so importing the builder starts no MCP
server), but the server reads the graph from the module's namespace, not by attribute access.
"""

from __future__ import annotations

from graph.builder import served_graph
from graph.core.log import configure_logging
from graph.core.settings import get_settings

if (_settings := get_settings()).log_file or _settings.log_format == "json":
    # Asked for: Ferry's own lines go to FERRY_LOG_FILE (or stderr as JSON lines), as from
    # the CLI. Otherwise they go where the server sends every log.
    configure_logging(_settings)

graph = served_graph()
"""Ferry's graph with the built-in and MCP tools, compiled without a checkpointer."""
