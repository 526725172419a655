"""One SQLite file as a saver uses it: its connection, its lock, cursors and thread numbers.

Every read and write of a `FerrySaver` goes through `SqliteFile.cursor`: one connection shared
by the threads of a process (LangGraph runs sync nodes in worker threads), serialised by one
lock; a transaction per outermost cursor.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graph.storage.sqlite.opening import prepared
from graph.storage.sqlite.schema import OPENING_STATEMENTS, file_of

_BUSY_TIMEOUT_S = 30
_NOT_ASKED = Path()


def read_only(path: Path) -> bool:
    """Whether the file exists but may not be written (by permission, or by its mode for root)."""
    if not path.is_file():
        return False
    return not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222


def connect(path: Path) -> sqlite3.Connection:
    """Open the checkpoint database, creating its folder, tuned for several writers."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    for statement in OPENING_STATEMENTS:
        # Turning a new file to WAL takes a moment's exclusive lock, and SQLite answers "database
        # is locked" there without its busy handler: processes opening a new file at once wait.
        while True:
            try:
                conn.execute(statement)
                break
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.01)
    return conn


def open_file(path: Path) -> sqlite3.Connection:
    """Connect to the SQLite file; read-only when it may not be written, so it can still be read."""
    if not read_only(path):
        return connect(path)
    uri = f"{path.absolute().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=_BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_S * 1000}")
    return conn


class SqliteFile:
    """A connection, the lock that serialises it, and the numbers its threads are stored under."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.is_setup = False
        self._cursor_thread: int | None = None  # the thread inside `cursor`, while one is
        self._outer_commits = False  # whether that outermost cursor commits when it closes
        self._threads: dict[str, int] = {}  # thread id → its number (numbers never change)
        self._path: Path | None = _NOT_ASKED

    @property
    def path(self) -> Path | None:
        """The file the connection opened; None in memory.

        Asked once: every run would otherwise wait for the lock.
        """
        if self._path is _NOT_ASKED:
            with self.lock:
                self._note_path()
        return self._path

    def _note_path(self) -> None:
        if self._path is _NOT_ASKED:
            self._path = Path(name) if (name := file_of(self.conn)) else None

    def setup(self, serde: Any) -> None:
        """Make the file ready for Ferry's reads and writes, once (`sqlite.opening`)."""
        if self.is_setup:
            return
        self._note_path()  # before a copy in memory of a read-only file replaces the connection
        self.conn = prepared(self.conn, serde)
        self.is_setup = True

    @contextmanager
    def cursor(self, serde: Any, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        """A cursor under the lock (the file set up first), committed when closed if `transaction`.

        Inside one this thread already holds, a cursor in the same transaction.
        """
        if self._cursor_thread == threading.get_ident():
            cur = self.conn.cursor()  # the lock is this thread's already (it is not reentrant)
            try:
                yield cur
            finally:
                if transaction and not self._outer_commits:
                    self.conn.commit()
                cur.close()
            return
        with self.lock:
            self.setup(serde)
            cur = self.conn.cursor()
            self._cursor_thread, self._outer_commits = threading.get_ident(), transaction
            try:
                yield cur
            finally:
                self._cursor_thread = None
                if transaction:
                    self.conn.commit()
                cur.close()

    def begin_writing(self, cur: sqlite3.Cursor) -> None:
        """Take the file's write lock before a transaction that reads, then writes.

        Its reads then see what it writes over; a transaction that read first and wrote later
        would fail at once if another process had committed in between ("database is locked",
        which the busy timeout does not wait out).
        """
        if not self.conn.in_transaction:
            cur.execute("BEGIN IMMEDIATE")

    def thread_number(self, cur: sqlite3.Cursor, thread_id: str) -> int | None:
        """The number a thread's rows are stored under; None if it has none."""
        if (number := self._threads.get(thread_id)) is not None:
            return number
        cur.execute("SELECT id FROM ferry_threads WHERE thread_id = ?", (thread_id,))
        row = cur.fetchone()
        if row is None:
            return None
        self._threads[thread_id] = int(row[0])
        return int(row[0])

    def numbered(self, cur: sqlite3.Cursor, thread_id: str) -> int:
        """The number a thread's rows are stored under, given one if it has none yet."""
        if (number := self.thread_number(cur, thread_id)) is not None:
            return number
        cur.execute("INSERT OR IGNORE INTO ferry_threads (thread_id) VALUES (?)", (thread_id,))
        number = self.thread_number(cur, thread_id)
        if number is None:
            raise sqlite3.DatabaseError(f"thread {thread_id}: not numbered in ferry_threads")
        return number
