"""The systems under test, each behind the same small interface (`Peer`).

The LangGraph systems (Ferry, Ferry on a stock `SqliteSaver`, `create_agent` + `SqliteSaver`) get a
connection from `graph.storage.connect` (WAL, busy timeout, synchronous=NORMAL), so the comparison
is about how each stores its state, not about SQLite pragmas. The peers outside LangGraph (the bare
LangChain loop, the OpenAI Agents SDK) live in `bench.peers` and `bench.agents_peer`.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool

SYSTEMS = ("ferry", "reference", "sqlitesaver", "bare", "agents")
LANGGRAPH_SYSTEMS = ("ferry", "reference", "sqlitesaver")
LABELS = {
    "ferry": "Ferry",
    "reference": "create_agent + SqliteSaver",
    "sqlitesaver": "Ferry graph + stock SqliteSaver",
    "bare": "bare LangChain loop (JSONL)",
    "agents": "OpenAI Agents SDK + SQLiteSession",
}


class Peer(Protocol):
    """What the workloads need of a system: run a turn, read a thread, close."""

    name: str
    path: Path  # the storage: every file whose name starts with `path.name` counts

    def invoke(self, question: str, thread_id: str) -> BaseMessage:
        """Run one turn; return its final message."""
        ...

    def messages(self, thread_id: str) -> list[BaseMessage]:
        """The thread's messages as LangChain messages, read the system's normal way."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@dataclass
class System:
    """A compiled LangGraph graph and the saver it writes through."""

    name: str
    graph: Any
    saver: Any
    path: Path

    def invoke(self, question: str, thread_id: str) -> BaseMessage:
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 200}
        result = self.graph.invoke({"messages": [("user", question)]}, config)
        return result["messages"][-1]  # type: ignore[no-any-return]

    def messages(self, thread_id: str) -> list[BaseMessage]:
        return list(self.get_state(thread_id).values.get("messages", []))

    def get_state(self, thread_id: str) -> Any:
        return self.graph.get_state({"configurable": {"thread_id": thread_id}})

    def close(self) -> None:
        conn = getattr(self.saver, "conn", None)
        if isinstance(conn, sqlite3.Connection):
            conn.close()


def ferry_settings(path: Path) -> Any:
    """Ferry's settings for the bench: its defaults, offline, no budgets that could stop a turn."""
    from graph.core.settings import Settings

    return Settings(
        db=path,
        model="offline",
        max_iterations=50,
        token_budget=0,
        time_budget_s=3600,
        tool_timeout_s=60,
        max_parallel_tools=4,
        approve_tools="",
    )


def build(name: str, path: Path, model: BaseChatModel, tools: list[BaseTool]) -> Peer:
    """Build `name` (one of SYSTEMS) storing under `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if name == "ferry":
        from graph import build_graph
        from graph.storage import sqlite_saver

        saver: Any = sqlite_saver(path)
        graph = build_graph(
            model=model, tools=tools, checkpointer=saver, settings=ferry_settings(path)
        )
    elif name == "sqlitesaver":
        from langgraph.checkpoint.sqlite import SqliteSaver

        from graph import build_graph
        from graph.storage import connect

        saver = SqliteSaver(connect(path))
        graph = build_graph(
            model=model, tools=tools, checkpointer=saver, settings=ferry_settings(path)
        )
    elif name == "reference":
        from langchain.agents import create_agent
        from langgraph.checkpoint.sqlite import SqliteSaver

        from graph.storage import connect

        saver = SqliteSaver(connect(path))
        graph = create_agent(model, tools=tools, checkpointer=saver)
    elif name == "bare":
        from bench.peers import BareLoop

        return BareLoop(name, path, model, tools)
    elif name == "agents":
        from bench.agents_peer import AgentsSession

        return AgentsSession(name, path, tools)
    else:
        raise ValueError(f"unknown system {name!r}")
    return System(name=name, graph=graph, saver=saver, path=path)


def load(system: Peer, thread_id: str) -> Any:
    """Read a thread the system's own way, as a new process would to continue or show it.

    The graph's state for the LangGraph systems, the JSONL file for the bare loop, the session's
    items for the Agents SDK (without converting them to LangChain messages).
    """
    if isinstance(system, System):
        return system.get_state(thread_id).values.get("messages", [])
    native = getattr(system, "items", None)
    return native(thread_id) if callable(native) else system.messages(thread_id)


def setup(system: Peer) -> None:
    """Create the system's tables now, so the first measured turn does not pay for it."""
    saver_setup = getattr(getattr(system, "saver", None), "setup", None)
    if callable(saver_setup):
        saver_setup()
