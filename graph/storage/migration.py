"""Files from before Ferry's layout: their rows in LangGraph's tables move into Ferry's.

A file written by an earlier Ferry, or by LangGraph's own `SqliteSaver` (handed to
`build_graph`, `graph.storage.stock`), keeps its checkpoints in LangGraph's `checkpoints` and
`writes`. The first writable open moves them, in one transaction, into `ferry_steps` and
`ferry_writes` (`graph.storage.layout`): each checkpoint's bytes as they were (never decoded,
so nothing is lost that this process cannot read, such as values sealed with another key),
its metadata as LangGraph's JSON. A read-only file is copied into memory and moved there.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from itertools import groupby
from typing import Any

from graph.storage import layout
from graph.storage.internals import SNAPSHOT_COUNTERS
from graph.storage.layout import UNBOUNDED_CHANNEL, key_of
from graph.storage.sqlite_schema import FERRY_TABLES

log = logging.getLogger("ferry.saver")
_MOVED_CACHES = ("ferry_histories", "ferry_history_parts")  # copies of histories, by old ids


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has the table `name`."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return found is not None


def in_memory(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A copy of a read-only file in memory, with Ferry's tables: it can be read, not kept."""
    copy = sqlite3.connect(":memory:", check_same_thread=False)
    conn.backup(copy)
    conn.close()
    for statement in (*layout.TABLES, *FERRY_TABLES):
        copy.execute(statement)
    log.debug("read-only file from before Ferry's layout: read from a copy in memory")
    return copy


def move_langgraph_rows(conn: sqlite3.Connection, serde: Any) -> None:
    """Move the rows of LangGraph's tables into Ferry's (nothing if there are none)."""
    if not has_table(conn, "checkpoints") or not _has_rows(conn):
        return
    from graph.storage.versions import upgrade

    upgrade(conn, serde)  # integer versions of an early Ferry, spelled as strings first
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        log.warning("threads not moved to Ferry's tables yet: %s", error)
        return
    try:
        if _has_rows(conn):  # not moved by another process meanwhile
            moved = _move(conn)
            log.info("moved %d checkpoints into Ferry's tables", moved)
        conn.execute("COMMIT")
    except sqlite3.Error:
        conn.execute("ROLLBACK")
        raise


def _has_rows(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is not None


def _move(conn: sqlite3.Connection) -> int:
    numbers: dict[str, int] = {}

    def number(thread_id: str) -> int:
        if thread_id not in numbers:
            conn.execute("INSERT OR IGNORE INTO ferry_threads (thread_id) VALUES (?)", (thread_id,))
            row = conn.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
            numbers[thread_id] = int(row.fetchone()[0])
        return numbers[thread_id]

    checkpoints = conn.execute(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
        "metadata FROM checkpoints"
    ).fetchall()
    for thread_id, namespace, checkpoint_id, parent, type_tag, blob, metadata in checkpoints:
        conn.execute(
            "INSERT OR REPLACE INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (number(str(thread_id)), namespace, key_of(checkpoint_id),
             key_of(parent) if parent else None, _may_hold_snapshot(parent, metadata),
             type_tag or "null", blob or b"", _text(metadata)),
        )  # fmt: skip
    task_path = "task_path" if _has_task_path(conn) else "''"
    writes = conn.execute(
        f"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, {task_path}, idx, channel, "
        "type, value FROM writes ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
    )
    for (thread_id, namespace, checkpoint_id, task_id), group in groupby(
        writes, key=lambda row: row[:4]
    ):
        rows = list(group)
        records = [(idx, channel, t or "null", bytes(v or b"")) for *_, idx, channel, t, v in rows]
        conn.execute(
            "INSERT OR REPLACE INTO ferry_writes VALUES (?, ?, ?, ?, ?, ?)",
            (number(str(thread_id)), namespace, key_of(checkpoint_id), key_of(task_id),
             rows[-1][4], layout.packed(records)),
        )  # fmt: skip
    conn.execute("DELETE FROM checkpoints")
    conn.execute("DELETE FROM writes")
    for table in _MOVED_CACHES:
        if has_table(conn, table):
            conn.execute(f"DELETE FROM {table}")
    return len(checkpoints)


def _may_hold_snapshot(parent: Any, metadata: Any) -> int:
    """1 where LangGraph may have stored the messages in the checkpoint itself.

    LangGraph drops a delta channel's counter when it takes a snapshot, and the root of a
    pruned thread holds one; a checkpoint whose metadata cannot be read is opened to see.
    """
    try:
        counters = json.loads(metadata or "{}").get(SNAPSHOT_COUNTERS)
    except (ValueError, AttributeError):
        return 1
    return int(not parent or not isinstance(counters, dict) or UNBOUNDED_CHANNEL not in counters)


def _text(metadata: Any) -> str:
    """LangGraph's stored metadata as text ('{}' if it had none)."""
    if isinstance(metadata, bytes):
        return metadata.decode("utf-8", "replace") or "{}"
    return str(metadata) if metadata else "{}"


def _has_task_path(conn: sqlite3.Connection) -> bool:
    return any(row[1] == "task_path" for row in conn.execute("PRAGMA table_info(writes)"))
