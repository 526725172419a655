"""Moving rows of LangGraph's `checkpoints` and `writes` into Ferry's tables, inside a transaction.

`ferry migrate` (`graph.storage.sqlite.migration`) calls `move_rows` in the transaction it holds.
Each checkpoint's bytes move as they were (never re-encoded here, so nothing is lost that this
process cannot read, such as values sealed with another key), its metadata as LangGraph's JSON.

A bad row costs its own thread at most: a row no saver could have written (a NULL or empty id,
a value that is text) is left where it is, and so is one whose checkpoint or task Ferry's
tables already hold (a stock saver used on the file again, or a planted row): Ferry's is never
replaced. Both are counted, with their threads.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from graph.storage.internals import SNAPSHOT_COUNTERS
from graph.storage.sqlite import layout
from graph.storage.sqlite.layout import UNBOUNDED_CHANNEL, key_of
from graph.storage.sqlite.layout_versions import has_table

_MOVED_CACHES = ("ferry_histories", "ferry_history_parts")  # copies of histories, by old ids


@dataclass
class Moved:
    """What one move did: checkpoints moved per thread, and the rows it left in place."""

    checkpoints: Counter[str] = field(default_factory=Counter)
    writes: int = 0
    unmovable: int = 0  # rows no saver could have written
    taken: int = 0  # rows whose key Ferry's tables already hold
    left_threads: set[str] = field(default_factory=set)

    def leave(self, thread_id: Any, *, taken: bool, rows: int = 1) -> None:
        """Count `rows` of `thread_id` left in LangGraph's tables."""
        if taken:
            self.taken += rows
        else:
            self.unmovable += rows
        shown = thread_id if isinstance(thread_id, str) else repr(thread_id)[:60]
        self.left_threads.add(shown)

    @property
    def rows_left(self) -> int:
        """Rows of the threads moved that stayed in LangGraph's tables."""
        return self.unmovable + self.taken


def move_rows(conn: sqlite3.Connection, thread_ids: Collection[str] | None) -> Moved:
    """Move the rows of `thread_ids` (every row if None) from LangGraph's tables into Ferry's.

    Runs in the caller's transaction and commits nothing.
    """
    moved = Moved()
    numbers: dict[str, int] = {}

    def number(thread_id: str) -> int:
        if thread_id not in numbers:
            conn.execute("INSERT OR IGNORE INTO ferry_threads (thread_id) VALUES (?)", (thread_id,))
            row = conn.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
            numbers[thread_id] = int(row.fetchone()[0])
        return numbers[thread_id]

    where, params = _selection(thread_ids)
    checkpoints = conn.execute(
        f"SELECT {', '.join(_CHECKPOINT)} FROM checkpoints{where}", params
    ).fetchall()
    moved_checkpoints: list[tuple[Any, ...]] = []
    for row in checkpoints:
        thread_id, namespace, checkpoint_id, parent, type_tag, blob, metadata = row
        if not _movable(row, _CHECKPOINT_TYPES, _CHECKPOINT_IDS):
            moved.leave(thread_id, taken=False)
            continue
        inserted = conn.execute(
            "INSERT INTO ferry_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (number(thread_id), namespace, key_of(checkpoint_id),
             key_of(parent) if parent else None, _may_hold_snapshot(parent, metadata),
             type_tag or "null", blob or b"", _text(metadata)),
        )  # fmt: skip
        if inserted.rowcount == 1:
            moved_checkpoints.append(row)
            moved.checkpoints[thread_id] += 1
        else:  # never over one of Ferry's rows: a stock saver used again, or a planted row
            moved.leave(thread_id, taken=True)
    task_path = "task_path" if _has_task_path(conn) else "''"
    columns = [*_WRITE[:4], task_path, *_WRITE[5:]]
    writes = conn.execute(
        f"SELECT {', '.join(columns)} FROM writes{where} "
        "ORDER BY thread_id, checkpoint_ns, checkpoint_id, task_id, idx",
        params,
    )
    moved_writes: list[tuple[Any, ...]] = []
    for (thread_id, namespace, checkpoint_id, task_id), group in groupby(
        writes, key=lambda row: row[:4]
    ):
        rows = list(group)
        if not all(_movable(row, _WRITE_TYPES, _WRITE_IDS) for row in rows):
            moved.leave(thread_id, taken=False, rows=len(rows))
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
            moved.leave(thread_id, taken=True, rows=len(rows))
    moved.writes = len(moved_writes)
    everything = thread_ids is None and not moved.rows_left
    _delete_moved(conn, "checkpoints", _CHECKPOINT, moved_checkpoints, everything=everything)
    _delete_moved(conn, "writes", columns, moved_writes, everything=everything)
    for table in _MOVED_CACHES:  # an earlier Ferry's copies of histories: unused once moved
        if has_table(conn, table):
            conn.execute(f"DELETE FROM {table}{where}", params)
    return moved


def _selection(thread_ids: Collection[str] | None) -> tuple[str, tuple[str, ...]]:
    """A WHERE clause keeping the rows of `thread_ids` (every row if None), and its values."""
    if thread_ids is None:
        return "", ()
    chosen = tuple(thread_ids)
    return f" WHERE thread_id IN ({', '.join('?' * len(chosen))})", chosen


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
    """Delete the rows moved from LangGraph's `table`, leaving any that were not moved."""
    if everything:
        conn.execute(f"DELETE FROM {table}")
        return
    same = " AND ".join(f"{column} IS ?" for column in columns)  # IS: NULL matches NULL
    conn.executemany(f"DELETE FROM {table} WHERE {same}", moved)


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
