"""Files of earlier layouts for the layout-version tests, and what a migration may change.

Version 0 files (LangGraph's tables only) are made here; version 1 files are the release's
golden files (tests/support/golden/files).
"""

from __future__ import annotations

import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import MessagesState, StateGraph

from graph.storage.codec.serde import serializer

GOLDEN = sorted((Path(__file__).parent / "golden" / "files").glob("ferry-*.db"))
"""The files releases wrote, oldest first."""
FERRY_TABLES = {
    "ferry_threads", "ferry_steps", "ferry_writes", "ferry_parts", "ferry_started_calls",
    "ferry_thread_summaries",
}  # fmt: skip


def user_version(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


def set_user_version(path: Path, version: int) -> None:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {version}")


def contents(path: Path) -> dict[str, Any]:
    """Every table's definition and rows, and the stamp: what a migration may change."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        schema = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        tables = [name for name, sql in schema if sql and sql.startswith("CREATE TABLE")]
        rows = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables}
        stamp = conn.execute("PRAGMA user_version").fetchone()[0]
    return {"schema": schema, "rows": rows, "user_version": stamp}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class IntegerVersions(SqliteSaver):
    """The saver of the earliest Ferry: LangGraph's tables, Ferry's serializer, integers."""

    def get_next_version(self, current: Any, channel: None) -> Any:
        return (current or 0) + 1


def langgraphs_file(path: Path, saver_class: type[SqliteSaver] = SqliteSaver) -> Path:
    """A file with one thread in LangGraph's tables only (version 0), as `saver_class` writes."""
    builder = StateGraph(MessagesState)
    builder.add_node("reply", lambda state: {"messages": [("ai", "hello")]})
    builder.add_edge("__start__", "reply")
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = saver_class(conn, serde=serializer())
    builder.compile(checkpointer=saver).invoke(
        {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "old"}}
    )
    conn.close()
    return path


def stored_versions(path: Path) -> list[Any]:
    """The channel versions of the checkpoints in LangGraph's `checkpoints` table."""
    serde = serializer()
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT type, checkpoint FROM checkpoints").fetchall()
    return [v for t, b in rows for v in serde.loads_typed((t, b))["channel_versions"].values()]


def tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
