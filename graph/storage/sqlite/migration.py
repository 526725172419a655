"""Files from before Ferry's layout: their rows in LangGraph's tables move into Ferry's.

A file written by an earlier Ferry, or by LangGraph's own `SqliteSaver` (handed to
`build_graph`, `graph.storage.sqlite.stock`), keeps its checkpoints in LangGraph's `checkpoints` and
`writes`. The first writable open moves them, in one transaction, into `ferry_steps` and
`ferry_writes` (`graph.storage.sqlite.layout`): each checkpoint's bytes as they were (never decoded,
so nothing is lost that this process cannot read, such as values sealed with another key),
its metadata as LangGraph's JSON. A read-only file is copied into memory and moved there.

A bad row costs its own thread at most: a row no saver could have written (a NULL or empty id,
a value that is text) is left where it is, and so is one whose checkpoint or task Ferry's
tables already hold (a stock saver used on the file again, or a planted row): Ferry's is never
replaced. Both are logged once a move, with a count and their threads.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Sequence
from itertools import groupby
from typing import Any

from graph.storage.internals import SNAPSHOT_COUNTERS
from graph.storage.sqlite import layout
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, key_of
from graph.storage.sqlite.schema import FERRY_TABLES

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
    from graph.storage.sqlite.versions import upgrade

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
    left = _Left()

    def number(thread_id: str) -> int:
        if thread_id not in numbers:
            conn.execute("INSERT OR IGNORE INTO ferry_threads (thread_id) VALUES (?)", (thread_id,))
            row = conn.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
            numbers[thread_id] = int(row.fetchone()[0])
        return numbers[thread_id]

    checkpoints = conn.execute(f"SELECT {', '.join(_CHECKPOINT)} FROM checkpoints").fetchall()
    moved: list[tuple[Any, ...]] = []
    for row in checkpoints:
        thread_id, namespace, checkpoint_id, parent, type_tag, blob, metadata = row
        if not _movable(row, _CHECKPOINT_TYPES, _CHECKPOINT_IDS):
            left.add(thread_id, taken=False)
            continue
        inserted = conn.execute(
            "INSERT INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (number(thread_id), namespace, key_of(checkpoint_id),
             key_of(parent) if parent else None, _may_hold_snapshot(parent, metadata),
             type_tag or "null", blob or b"", _text(metadata)),
        )  # fmt: skip
        if inserted.rowcount == 1:
            moved.append(row)
        else:  # never over one of Ferry's rows: a stock saver used again, or a planted row
            left.add(thread_id, taken=True)
    task_path = "task_path" if _has_task_path(conn) else "''"
    columns = [*_WRITE[:4], task_path, *_WRITE[5:]]
    writes = conn.execute(
        f"SELECT {', '.join(columns)} FROM writes "
        "ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx"
    )
    moved_writes: list[tuple[Any, ...]] = []
    for (thread_id, namespace, checkpoint_id, task_id), group in groupby(
        writes, key=lambda row: row[:4]
    ):
        rows = list(group)
        if not all(_movable(row, _WRITE_TYPES, _WRITE_IDS) for row in rows):
            left.add(thread_id, taken=False, rows=len(rows))
            continue
        records = [(idx, channel, t or "null", v or b"") for *_, idx, channel, t, v in rows]
        inserted = conn.execute(
            "INSERT INTO ferry_writes VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (number(thread_id), namespace, key_of(checkpoint_id), key_of(task_id),
             rows[-1][4], layout.packed(records)),
        )  # fmt: skip
        if inserted.rowcount == 1:
            moved_writes.extend(rows)
        else:
            left.add(thread_id, taken=True, rows=len(rows))
    _delete_moved(conn, "checkpoints", _CHECKPOINT, moved, everything=not left)
    _delete_moved(conn, "writes", columns, moved_writes, everything=not left)
    for table in _MOVED_CACHES:
        if has_table(conn, table):
            conn.execute(f"DELETE FROM {table}")
    left.report()
    return len(moved)


_CHECKPOINT = (
    "thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type", "checkpoint",
    "metadata",
)  # fmt: skip
_WRITE = (
    "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel",
    "type", "value",
)  # fmt: skip
_TEXT, _BLOB = (str,), (bytes, type(None))
_OPTIONAL = (str, type(None))
# What each column of a row holds as LangGraph's savers write it, and which are ids (not empty).
_CHECKPOINT_TYPES = (_TEXT, _TEXT, _TEXT, _OPTIONAL, _OPTIONAL, _BLOB, (str, *_BLOB))
_WRITE_TYPES = (_TEXT, _TEXT, _TEXT, _TEXT, _TEXT, (int,), _TEXT, _OPTIONAL, _BLOB)
_CHECKPOINT_IDS, _WRITE_IDS = (2,), (2, 3)


def _movable(
    row: tuple[Any, ...], types: tuple[tuple[type, ...], ...], ids: tuple[int, ...]
) -> bool:
    """Whether each column holds what LangGraph's savers write there, and no id is empty."""
    fits = all(type(value) in kinds for value, kinds in zip(row, types, strict=True))
    return fits and all(row[i] for i in ids)


def _delete_moved(
    conn: sqlite3.Connection,
    table: str,
    columns: Sequence[str],
    moved: list[tuple[Any, ...]],
    *,
    everything: bool,
) -> None:
    """Delete the rows moved from LangGraph's `table`, leaving any that were not in place."""
    if everything:
        conn.execute(f"DELETE FROM {table}")
        return
    same = " AND ".join(f"{column} IS ?" for column in columns)  # IS: NULL matches NULL
    conn.executemany(f"DELETE FROM {table} WHERE {same}", moved)


class _Left:
    """Rows of LangGraph's tables left in place, and whose they are: reported once."""

    def __init__(self) -> None:
        self.unmovable = 0
        self.taken = 0
        self.threads: set[str] = set()

    def add(self, thread_id: Any, *, taken: bool, rows: int = 1) -> None:
        if taken:
            self.taken += rows
        else:
            self.unmovable += rows
        self.threads.add(repr(thread_id)[:60] if not isinstance(thread_id, str) else thread_id)

    def __bool__(self) -> bool:
        return bool(self.unmovable or self.taken)

    def report(self) -> None:
        if not self:
            return
        log.warning(
            "%d rows of LangGraph's tables left in place, not moved into Ferry's: %d without "
            "valid ids or values, %d whose checkpoint or task Ferry's tables already hold (kept "
            "as they are); threads: %s",
            self.unmovable + self.taken, self.unmovable, self.taken,
            ", ".join(sorted(self.threads)[:10]),
        )  # fmt: skip


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
