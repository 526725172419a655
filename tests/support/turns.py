"""One user turn through a compiled Ferry graph, the way most tests drive it."""

from __future__ import annotations

from typing import Any


def ask(graph: Any, text: str, thread: str = "t1") -> dict[str, Any]:
    """Send `text` as the user on `thread` and return the graph's final state."""
    result: dict[str, Any] = graph.invoke(
        {"messages": [("user", text)]}, {"configurable": {"thread_id": thread}}
    )
    return result
