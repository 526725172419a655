"""What every connection to a Ferry SQLite file runs first, and Ferry's tables beside its steps.

The checkpoints and writes themselves are in `graph.storage.sqlite.layout`.
"""

from __future__ import annotations

import sqlite3

from graph.storage.threads.started import STARTED_CALLS_TABLE
from graph.storage.threads.summaries import SUMMARIES_TABLE

RECORD_START = "INSERT OR IGNORE INTO ferry_started_calls VALUES (?, ?)"
"""Record a tool call as started (nothing if it already was)."""
FORGET_START = "DELETE FROM ferry_started_calls WHERE thread_id = ? AND tool_call_id = ?"
"""Forget that a call started: it paused in `interrupt()`, and runs again when resumed."""

OPENING_STATEMENTS = (
    # Pages that fit the typical 1-2 KB message rows (only a new file can choose its page size;
    # an existing one keeps it).
    "PRAGMA page_size=8192",
    # WAL lets readers and one writer work at once; the busy timeout waits out other writers
    # instead of failing with "database is locked".
    "PRAGMA journal_mode=WAL",
    "PRAGMA busy_timeout=30000",
    "PRAGMA synchronous=NORMAL",
    # Read pages in place rather than copying each one: a first read of a long thread touches
    # all of its pages (about 15% less time in SQLite; the address space is not memory used).
    "PRAGMA mmap_size=268435456",
)
"""Run on every connection to a Ferry SQLite file, by the CLI, Python and the server alike."""

# Stored WITHOUT ROWID in SQLite (the same columns as in Postgres): a table's rows then live
# in its primary key's b-tree, with no second page for a separate index.
FERRY_TABLES = (f"{STARTED_CALLS_TABLE} WITHOUT ROWID", f"{SUMMARIES_TABLE} WITHOUT ROWID")
"""Ferry's tables beside the steps, created by the saver's setup."""
DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = ?",
    "DELETE FROM ferry_thread_summaries WHERE thread_id = ?",
)
"""Ferry's own rows of a thread, deleted with its checkpoints."""


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file has the table `name`."""
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    return found.fetchone() is not None


def file_of(conn: sqlite3.Connection) -> str:
    """The file `conn` is open on ('' in memory)."""
    return next(str(row[2]) for row in conn.execute("PRAGMA database_list") if row[1] == "main")
