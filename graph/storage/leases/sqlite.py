"""A run's lease on its thread, kept in the thread's own database: one run per thread at a time.

SQLite: one row per busy thread in `ferry_leases`, taken by one atomic upsert that succeeds only
when the row is free, expired (no heartbeat for the timeout) or held by a process known to be
gone (same host, its pid no longer running, or running a different program since). Postgres: a
session-level advisory lock keyed by the thread id, on a connection of its own; the server drops
it with the connection, so a killed holder frees its thread at once.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

LEASES_TABLE = """
CREATE TABLE IF NOT EXISTS ferry_leases (
    thread_id TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start_token TEXT NOT NULL,
    since REAL NOT NULL,
    heartbeat REAL NOT NULL
) WITHOUT ROWID"""
_TAKE = """
INSERT INTO ferry_leases VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (thread_id) DO UPDATE SET
    holder = excluded.holder, host = excluded.host, pid = excluded.pid,
    start_token = excluded.start_token, since = excluded.since, heartbeat = excluded.heartbeat
WHERE ferry_leases.heartbeat < ? OR ferry_leases.holder = ?"""


@dataclass(frozen=True)
class Holder:
    """Who holds a thread's lease, and since when (seconds since the epoch)."""

    host: str
    pid: int
    since: float

    def describe(self) -> str:
        """E.g. `host build-7, pid 4242, since 2025-06-01 12:00:03 UTC`."""
        when = datetime.fromtimestamp(self.since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"host {self.host}, pid {self.pid}, since {when}"


class LeaseStore(Protocol):
    """One run's lease on one thread: take it, renew it while the run lives, release it."""

    def take(self, thread_id: str) -> Holder | None:
        """Take the lease; None when taken, else who holds it."""
        ...

    def renew(self) -> bool:
        """Prove the holder alive; False if the lease was lost."""
        ...

    def release(self) -> None:
        """Give the lease up (only if still held)."""
        ...

    def close(self) -> None:
        """Close the store's connection."""
        ...


def process_start_token(pid: int) -> str | None:
    """What tells this process apart from a later one with the same pid; None when unknown.

    On Linux: the boot id and the process's start time in clock ticks since boot. A zombie
    (killed, not yet reaped) has the empty token: it is gone.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return "" if fields[0] == "Z" else f"{boot}:{fields[19]}"


def process_gone(pid: int, start_token: str) -> bool:
    """Whether the process that recorded `start_token` under this pid (on this host) has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        pass
    current = process_start_token(pid)
    return bool(start_token) and current is not None and current != start_token


class SqliteLeases:
    """Leases in a SQLite file, on a connection of their own (each statement commits alone)."""

    def __init__(self, path: Path, timeout_s: float, *, holder: str) -> None:
        self._path = path
        self._conn_or_none: sqlite3.Connection | None = None
        self._timeout_s = timeout_s
        self._holder = holder
        self._thread_id: str | None = None

    @property
    def _conn(self) -> sqlite3.Connection:
        """Opened on first use, by the thread that takes the lease (never an event loop)."""
        if self._conn_or_none is None:
            # Used by the thread that takes the lease, then its heartbeat, then its release:
            # one at a time, never at once.
            conn = sqlite3.connect(
                self._path, timeout=30, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout=30000")
            # As the saver's own connections: in WAL, a commit survives its process being
            # killed without waiting for an fsync (FULL waits for one at each take, renewal
            # and release). Only a crash of the machine can lose the last ones, and it ends
            # every run that held a lease with them (the boot id then frees their rows).
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(LEASES_TABLE)
            self._conn_or_none = conn
        return self._conn_or_none

    def _row(self, thread_id: str) -> tuple[Any, ...] | None:
        cur = self._conn.execute(
            "SELECT holder, host, pid, start_token, since FROM ferry_leases WHERE thread_id = ?",
            (thread_id,),
        )
        row: tuple[Any, ...] | None = cur.fetchone()
        return row

    def take(self, thread_id: str) -> Holder | None:
        """Take the lease if free, expired or held by a process gone from this host."""
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        row = self._row(thread_id)
        gone = "" if row is None else row[0]
        if row is not None and not (row[1] == host and process_gone(row[2], row[3])):
            gone = ""  # alive, or on another host: only its heartbeat can tell
        token = process_start_token(pid) or ""
        values = (thread_id, self._holder, host, pid, token, now, now)
        cur = self._conn.execute(_TAKE, (*values, now - self._timeout_s, gone or None))
        if cur.rowcount == 1:
            self._thread_id = thread_id
            return None
        row = self._row(thread_id)
        if row is None:  # released meanwhile: free now, the caller tries again
            return Holder(host="?", pid=0, since=now)
        return Holder(host=row[1], pid=row[2], since=row[4])

    def renew(self) -> bool:
        """Move the heartbeat to now."""
        cur = self._conn.execute(
            "UPDATE ferry_leases SET heartbeat = ? WHERE thread_id = ? AND holder = ?",
            (time.time(), self._thread_id, self._holder),
        )
        return cur.rowcount == 1

    def release(self) -> None:
        """Delete the lease's row, if it is still this run's."""
        if self._thread_id is not None:
            self._conn.execute(
                "DELETE FROM ferry_leases WHERE thread_id = ? AND holder = ?",
                (self._thread_id, self._holder),
            )
            self._thread_id = None

    def close(self) -> None:
        """Close the connection."""
        if self._conn_or_none is not None:
            self._conn_or_none.close()
