"""Each thread's summary for `ferry threads`: title, message count and last update, in one row.

Listing a thousand threads must neither rebuild a thousand histories nor load the message
classes to do it. So each checkpoint a saver puts on a thread's main namespace rewrites the
thread's row (from the history the saver has just rebuilt for that step), and a listing reads
every row in one query. A row names the checkpoint it describes: a thread whose newest
checkpoint is another one (stored before these rows existed, by a saver that keeps none, or by
a process that stopped between the two writes) is rebuilt the slow way, and its row rewritten.

A row is plain text and numbers, shown as data, and one of the wrong type is treated as
missing. With `FERRY_ENCRYPTION_KEY` the title (the thread's first question) is stored sealed
by the saver's serializer, `title_type` naming how, and opened by it (`Opener`); otherwise
nothing in a row is ever decoded. This module imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

SUMMARIES_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_thread_summaries ("
    "thread_id TEXT PRIMARY KEY, checkpoint_id TEXT NOT NULL, updated_at TEXT NOT NULL, "
    "messages INTEGER NOT NULL, title TEXT NOT NULL, title_type TEXT NOT NULL)"
)
"""One row per thread, in SQLite and Postgres alike."""

_SAVE = (
    "INSERT INTO ferry_thread_summaries VALUES ({0}, {0}, {0}, {0}, {0}, {0}) "
    "ON CONFLICT (thread_id) DO UPDATE SET checkpoint_id = excluded.checkpoint_id, "
    "updated_at = excluded.updated_at, messages = excluded.messages, title = excluded.title, "
    "title_type = excluded.title_type"
)
SAVE_SQLITE, SAVE_POSTGRES = _SAVE.format("?"), _SAVE.format("%s")
"""Write a thread's row (a `Row`)."""
DELETE_SQLITE = "DELETE FROM ferry_thread_summaries WHERE thread_id = ?"
DELETE_POSTGRES = "DELETE FROM ferry_thread_summaries WHERE thread_id = %s"

# Each thread's newest checkpoint (LangGraph's: the largest id) by index seeks only, as a loose
# index scan: the next thread id after the last, then its largest checkpoint id. A listing then
# costs a few seeks per thread, however long the threads are.
_NEWEST = (
    "WITH RECURSIVE threads(thread_id) AS (SELECT min(thread_id) FROM checkpoints UNION ALL "
    "SELECT (SELECT min(c.thread_id) FROM checkpoints AS c WHERE c.thread_id > t.thread_id) "
    "FROM threads AS t WHERE t.thread_id IS NOT NULL), "
    "newest(thread_id, newest) AS (SELECT t.thread_id, (SELECT max(c.checkpoint_id) "
    "FROM checkpoints AS c WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = '') "
    "FROM threads AS t WHERE t.thread_id IS NOT NULL) "
)
LISTING = (
    _NEWEST + "SELECT n.thread_id, n.newest, s.updated_at, s.messages, s.title, s.title_type "
    "FROM newest AS n "
    "LEFT JOIN ferry_thread_summaries AS s "
    "ON s.thread_id = n.thread_id AND s.checkpoint_id = n.newest WHERE n.newest IS NOT NULL"
)
"""Each thread's newest checkpoint on its main namespace, with the summary of it if any
(Postgres, in LangGraph's tables)."""
LISTING_SQLITE = (
    "SELECT n.thread_id, n.newest, s.updated_at, s.messages, s.title, s.title_type FROM "
    "(SELECT t.thread_id, (SELECT max(id) FROM ferry_steps WHERE thread = t.id AND ns = '') "
    "AS newest FROM ferry_threads AS t) AS n "
    "LEFT JOIN ferry_thread_summaries AS s "
    "ON s.thread_id = n.thread_id AND s.checkpoint_id = n.newest WHERE n.newest IS NOT NULL"
)
"""The same in Ferry's SQLite layout (`graph.storage.sqlite.layout`): a few seeks per thread."""

Summary = dict[str, Any]
"""A thread as `ferry threads` shows it: thread_id, updated_at, messages, title."""
Row = tuple[str, str, str, int, str, str]
"""A stored summary: thread_id, checkpoint_id, updated_at, messages, title, title_type."""
Opener = Callable[[str, str], Any]
"""Opens a sealed title: (title_type, stored title) → the title (or raises)."""
PLAIN = ""
"""The `title_type` of a title stored as it is."""


def listing_rows(cur: Any) -> list[tuple[Any, ...]]:
    """Run the Postgres listing on a DB-API cursor (dict rows or tuples alike)."""
    cur.execute(LISTING)
    return [tuple(r.values()) if isinstance(r, Mapping) else tuple(r) for r in cur.fetchall()]


def summary_of(row: Sequence[Any], opener: Opener | None = None) -> Summary | None:
    """A listing row's summary as shown; None if it has none, or one not of Ferry's shape.

    A sealed title is opened by `opener`; without one, or if it fails, there is no summary.
    """
    thread_id, _, updated_at, messages, title, title_type = row
    if title_type != PLAIN and isinstance(title, str) and opener is not None:
        try:
            title = opener(str(title_type), title)
        except Exception:  # noqa: BLE001 - a row is a shortcut: the thread is rebuilt instead
            return None
    elif title_type != PLAIN:
        return None
    if not (
        isinstance(updated_at, str)
        and isinstance(title, str)
        and isinstance(messages, int)
        and not isinstance(messages, bool)
        and messages >= 0
        and _is_time(updated_at)
    ):
        return None
    return {"thread_id": thread_id, "updated_at": updated_at, "messages": messages, "title": title}


def _is_time(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False
