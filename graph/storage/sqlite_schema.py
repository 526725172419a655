"""The tables of a Ferry SQLite file, and what every connection to one runs first.

LangGraph's two tables are created here before LangGraph's saver sees the file (same columns,
stored `WITHOUT ROWID`), next to Ferry's own.
"""

from __future__ import annotations

from graph.storage import saved_parts
from graph.storage.started import STARTED_CALLS_TABLE
from graph.storage.summaries import SUMMARIES_TABLE

# LangGraph's own tables, created first WITHOUT ROWID (LangGraph then finds them; the columns are
# its own): each row lives in its primary-key index instead of beside a second copy of its key
# (~150 bytes a row, two dozen rows a turn). With 8 KB pages the 1-2 KB message rows still pack
# well; measured by `make bench` (bench/README.md).
CHECKPOINTS_TABLE = """
CREATE TABLE IF NOT EXISTS checkpoints (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    parent_checkpoint_id TEXT,
    type TEXT,
    checkpoint BLOB,
    metadata BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) WITHOUT ROWID"""
WRITES_TABLE = """
CREATE TABLE IF NOT EXISTS writes (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_path TEXT NOT NULL DEFAULT '',
    idx INTEGER NOT NULL,
    channel TEXT NOT NULL,
    type TEXT,
    value BLOB,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
) WITHOUT ROWID"""
# One history per thread (and namespace), at the checkpoint named; replaced only by a longer one.
SAVED_HISTORIES_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_histories (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    messages INTEGER NOT NULL,
    type TEXT NOT NULL,
    value BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns)
) WITHOUT ROWID"""

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
    CHECKPOINTS_TABLE,
    WRITES_TABLE,
)
"""Run on every connection to a Ferry SQLite file, by the CLI, Python and the server alike."""

FERRY_TABLES = (
    STARTED_CALLS_TABLE,
    SAVED_HISTORIES_TABLE,
    saved_parts.PARTS_TABLE,
    SUMMARIES_TABLE,
)
"""Ferry's own tables beside LangGraph's, created by every SQLite saver's setup."""
DELETE_FERRY_ROWS = (
    "DELETE FROM ferry_started_calls WHERE thread_id = ?",
    "DELETE FROM ferry_histories WHERE thread_id = ?",
    "DELETE FROM ferry_history_parts WHERE thread_id = ?",
    "DELETE FROM ferry_thread_summaries WHERE thread_id = ?",
)
"""Ferry's own rows of a thread, deleted with its checkpoints by every SQLite saver."""
