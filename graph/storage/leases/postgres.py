"""Leases on Postgres: a session-level advisory lock per thread, on a connection of its own.

The savers' connections commit each statement and come from a pool, so a lock taken on one of
them could be dropped or handed to another run; the lease opens its own connection and holds
it for the run's life. When the holder dies its connection closes and the server frees the lock
at once; when its host vanishes, the TCP keepalives set below end the session within about the
lease timeout. The holder and since when are in the connection's `application_name`.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from graph.storage.leases.sqlite import Holder

_CONNECT_TIMEOUT_S = 10
_NAME_PREFIX = "ferry-run"
_HOLDER = """
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid"""


def conninfo_of(saver: Any) -> str | None:
    """The connection string of a Postgres saver's pool or connection."""
    conn = saver.conn
    if isinstance(conn, ConnectionPool | AsyncConnectionPool):
        return str(conn.conninfo)
    if isinstance(conn, psycopg.Connection | psycopg.AsyncConnection):
        return make_conninfo(conn.info.dsn, password=conn.info.password)
    return None


def postgres_leases(saver: Any, timeout_s: float) -> PostgresLeases | None:
    """Leases on the database of a Postgres saver (sync or async), on connections of their own."""
    info = conninfo_of(saver)
    return None if info is None else PostgresLeases(info, timeout_s)


def advisory_key(thread_id: str) -> int:
    """The thread's advisory lock key: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(thread_id.encode(), digest_size=8, person=b"ferry-lease").digest()
    return int.from_bytes(digest, "big", signed=True)


def _parse_holder(name: str) -> Holder:
    """The holder from `ferry-run <pid> <since> <host>` (the host may be cut short)."""
    parts = name.split(" ", 3)
    try:
        return Holder(host=parts[3], pid=int(parts[1]), since=float(parts[2]))
    except (IndexError, ValueError):
        return Holder(host="?", pid=0, since=time.time())


class PostgresLeases:
    """One run's advisory lock on one thread."""

    def __init__(self, conninfo: str, timeout_s: float) -> None:
        self._conninfo = conninfo
        self._timeout_s = timeout_s
        self._conn_or_none: psycopg.Connection[tuple[Any, ...]] | None = None
        self._key: int | None = None

    @property
    def _conn(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn_or_none is None:
            conn = psycopg.Connection.connect(
                self._conninfo, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S
            )
            idle = max(1, int(self._timeout_s / 3))
            # Server-side keepalives: a holder whose host is gone loses the lock in about
            # idle + 3 * interval seconds, roughly the lease timeout.
            for setting, value in (
                ("tcp_keepalives_idle", idle),
                ("tcp_keepalives_interval", max(1, idle // 2)),
                ("tcp_keepalives_count", 3),
                ("tcp_user_timeout", int(self._timeout_s * 1000)),
            ):
                conn.execute("SELECT set_config(%s, %s, false)", (setting, str(value)))
            self._conn_or_none = conn
        return self._conn_or_none

    def take(self, thread_id: str) -> Holder | None:
        """Take the thread's lock if no other session holds it."""
        key = advisory_key(thread_id)
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row and row[0]:
            self._key = key
            name = f"{_NAME_PREFIX} {os.getpid()} {time.time():.0f} {socket.gethostname()}"
            self._conn.execute("SELECT set_config('application_name', %s, false)", (name[:63],))
            return None
        unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
        found = self._conn.execute(_HOLDER, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
        return _parse_holder(str(found[0]) if found else "")

    def renew(self) -> bool:
        """Check that the lock's session is still alive."""
        try:
            self._conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        """Unlock (closing the connection would too)."""
        if self._key is not None:
            key, self._key = self._key, None
            try:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                pass  # the session is gone, and its lock with it

    def close(self) -> None:
        """Close the lease's connection."""
        if self._conn_or_none is not None:
            self._conn_or_none.close()
