"""The two systems under test, built the same way on the same SQLite connection settings.

Both get the same model, the same tools and a connection from `graph.storage.connect`
(WAL, busy timeout, synchronous=NORMAL), so the comparison is about how each stores its state,
not about SQLite pragmas.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver

SYSTEMS = ("ferry", "reference")


@dataclass
class System:
    """A compiled graph and the saver it writes through."""

    name: str
    graph: Any
    saver: Any
    path: Path

    def invoke(self, question: str, thread_id: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
        return self.graph.invoke({"messages": [("user", question)]}, config)  # type: ignore[no-any-return]

    def get_state(self, thread_id: str) -> Any:
        return self.graph.get_state({"configurable": {"thread_id": thread_id}})

    def close(self) -> None:
        conn = getattr(self.saver, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            conn.close()


def build(name: str, path: Path, model: BaseChatModel, tools: list[BaseTool]) -> System:
    """Build `name` ("ferry" or "reference") on the SQLite file `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if name == "ferry":
        from graph import build_graph
        from graph.settings import Settings
        from graph.storage import sqlite_saver

        saver = sqlite_saver(path)
        settings = Settings(
            db=path,
            model="offline",
            max_iterations=50,
            token_budget=0,
            time_budget_s=3600,
            tool_timeout_s=60,
            max_parallel_tools=4,
            approve_tools="",
        )
        graph = build_graph(model=model, tools=tools, checkpointer=saver, settings=settings)
    elif name == "reference":
        from langchain.agents import create_agent

        from graph.storage import connect

        saver = SqliteSaver(connect(path))
        graph = create_agent(model, tools=tools, checkpointer=saver)
    else:
        raise ValueError(f"unknown system {name!r}")
    return System(name=name, graph=graph, saver=saver, path=path)


def setup(system: System) -> None:
    """Create the saver's tables now, so the first measured turn does not pay for it."""
    saver_setup = getattr(system.saver, "setup", None)
    if callable(saver_setup):
        saver_setup()
