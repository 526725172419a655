"""Ferry: a durable, visible tool-calling agent on LangGraph.

`build_graph` and `graph` are imported lazily so that importing the settings (graph.core) and
`ferry --help` stay cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph.storage.history.folding import fold_by_default

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from graph.builder import build_graph

    graph: CompiledStateGraph[Any, Any, Any, Any]

__all__ = ["build_graph", "graph"]


def _fold_messages(messages: list[Any], updates: Any) -> list[Any]:
    """Ferry's `messages` reducer, imported when a saver first folds (`graph.state`)."""
    from graph.state import fold_messages

    return fold_messages(messages, updates)


# Storage imports nothing of the agent: it is handed the reducer (graph.storage.history.folding).
fold_by_default(_fold_messages)


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from graph.builder import build_graph

        return build_graph
    if name == "graph":
        from graph.builder import graph

        return graph
    raise AttributeError(f"module 'graph' has no attribute {name!r}")
