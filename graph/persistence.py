"""Where threads live: one SQLite file (WAL, busy timeout) shared by the CLI, Python and Studio."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver

from graph.settings import Settings


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
    # WAL lets readers and one writer work at once; the busy timeout waits out other writers
    # instead of failing with "database is locked".
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def sqlite_saver(path: Path) -> SqliteSaver:
    """A saver on `path` whose connection lives as long as the process."""
    return SqliteSaver(connect(path))


@contextmanager
def open_saver(settings: Settings) -> Iterator[SqliteSaver]:
    """A saver on `FERRY_DB` for the length of a command, closed afterwards."""
    conn = connect(settings.db)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()
