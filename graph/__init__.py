"""Ferry: a durable, visible tool-calling agent on LangGraph.

`build_graph` and `graph` are imported lazily so that importing the settings (graph.core) and
`ferry --help` stay cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from graph.builder import build_graph

    graph: CompiledStateGraph[Any, Any, Any, Any]

__all__ = ["build_graph", "fold_messages", "graph"]


def fold_messages(messages: list[Any], updates: Any) -> list[Any]:
    """Fold updates into messages with Ferry's reducer (`graph.state`), imported when first used.

    What Ferry's commands hand the savers they open (`graph.storage.open_saver(settings,
    fold=...)`): storage imports nothing of the agent, and a command that only lists threads
    loads the loop only if one must be rebuilt.
    """
    from graph.state import fold_messages as fold

    return fold(messages, updates)


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from graph.builder import build_graph

        return build_graph
    if name == "graph":
        from graph.builder import graph

        return graph
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
