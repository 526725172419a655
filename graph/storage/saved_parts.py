"""A thread's saved history, kept up to date by appending parts rather than copying it again.

`ferry_histories` holds one saved history per thread (its base). After it, each part in
`ferry_history_parts` holds the messages added since the previous saved point: the base and
the parts up to one of them, joined, are the history at that part's checkpoint. A part is
appended only when the history it extends is exactly what is saved (the same messages, and
the newest saved point still the one it extends, checked in the same statement), so the
saved copy grows with the thread, a few turns at a time, instead of being rewritten whole:
the bytes a turn adds stay the same however long the thread, and a cold read replays at
most one part's worth of writes. Anything else (a fork, an edit) leaves the parts alone; a
new base, saved as before, replaces them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

PART = 32
"""Messages a part holds at least (four bench turns): a cold read replays fewer than this."""

PARTS_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_history_parts (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    messages INTEGER NOT NULL,
    checkpoint_id TEXT NOT NULL,
    type TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, messages)
) WITHOUT ROWID"""
"""Each part: the saved history's length with it (`messages`), where that is the history."""

_POINTS = (
    "SELECT messages, checkpoint_id FROM ferry_history_parts "
    "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY messages"
)
_NEWEST = "SELECT max(messages) FROM ferry_history_parts WHERE thread_id = ? AND checkpoint_ns = ?"
_VALUES = (
    "SELECT messages, type, value FROM ferry_history_parts "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND messages <= ? ORDER BY messages"
)
# The newest saved point (the last part, else the base) must still be the one extended.
_APPEND = (
    "INSERT OR IGNORE INTO ferry_history_parts SELECT ?, ?, ?, ?, ?, ? WHERE coalesce("
    "(SELECT checkpoint_id FROM ferry_history_parts WHERE thread_id = ? AND checkpoint_ns = ? "
    "ORDER BY messages DESC LIMIT 1), "
    "(SELECT checkpoint_id FROM ferry_histories WHERE thread_id = ? AND checkpoint_ns = ?)) = ?"
)
DELETE_PARTS = "DELETE FROM ferry_history_parts WHERE thread_id = ? AND checkpoint_ns = ?"


def points(cur: sqlite3.Cursor, thread_id: str, namespace: str) -> list[tuple[int, str]]:
    """(length, checkpoint_id) of each part, oldest first; none if the file has no parts table."""
    try:
        cur.execute(_POINTS, (thread_id, namespace))
    except sqlite3.OperationalError:  # a read-only file from before parts
        return []
    return [(int(length), str(checkpoint_id)) for length, checkpoint_id in cur.fetchall()]


def newest(cur: sqlite3.Cursor, thread_id: str, namespace: str) -> int | None:
    """The length of the saved history with its newest part; None without parts."""
    try:
        cur.execute(_NEWEST, (thread_id, namespace))
    except sqlite3.OperationalError:  # a read-only file from before parts
        return None
    row = cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


def joined(
    cur: sqlite3.Cursor, serde: Any, thread_id: str, namespace: str, base: list[Any], upto: int
) -> list[Any] | None:
    """The base followed by the parts up to length `upto`; None if they do not fit together."""
    messages = list(base)
    cur.execute(_VALUES, (thread_id, namespace, upto))
    for length, type_tag, value in cur.fetchall():
        part = serde.loads_typed((type_tag, value))
        if not isinstance(part, list) or len(messages) + len(part) != length:
            return None
        messages.extend(part)
    return messages if len(messages) == upto else None


def extends(messages: Sequence[Any], saved: Sequence[Any]) -> bool:
    """Whether `messages` begins with exactly the `saved` ones (the same objects, or equal)."""
    if len(messages) < len(saved):
        return False
    return all(a is b or a == b for a, b in zip(messages, saved, strict=False))


def append(
    cur: sqlite3.Cursor,
    serde: Any,
    key: tuple[str, str, str],
    messages: list[Any],
    saved: tuple[str, int],
) -> bool:
    """Save `messages` past the `saved` point (checkpoint_id, length) as a part; whether it was."""
    thread_id, namespace, checkpoint_id = key
    saved_at, length = saved
    type_tag, value = serde.dumps_typed(messages[length:])
    cur.execute(
        _APPEND,
        (thread_id, namespace, len(messages), checkpoint_id, type_tag, value)
        + (thread_id, namespace, thread_id, namespace, saved_at),
    )
    return bool(cur.rowcount == 1)
