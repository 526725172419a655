"""Which lease store a saver's thread lives in: SQLite's `ferry_leases` or Postgres locks."""

from __future__ import annotations

import asyncio
import sys
import weakref
from pathlib import Path

from graph.storage import read_only
from graph.storage.codec.allowlist import NamesThreadOnRefusal
from graph.storage.leases.sqlite import LeaseStore, SqliteLeases, sqlite_file
from graph.storage.sqlite.saver import FerrySaver

_FILES: weakref.WeakKeyDictionary[FerrySaver, Path | None] = weakref.WeakKeyDictionary()
"""The file each saver's connection opened (a connection keeps its file)."""


def leases_for(saver: object, timeout_s: float, *, holder: str) -> LeaseStore | None:
    """The lease store of a synchronous Ferry saver; None for other savers or in memory."""
    if isinstance(saver, FerrySaver):
        if saver not in _FILES:  # asked once: every run would otherwise wait for the lock
            with saver.lock:
                _FILES[saver] = sqlite_file(saver.conn)
        path = _FILES[saver]
        # A read-only file is never continued: a lease would write it (root may, by mode).
        if path is None or read_only(path):
            return None
        return SqliteLeases(path, timeout_s, holder=holder)
    # Only a process that opened Postgres has its module loaded (importing it needs psycopg).
    if isinstance(saver, NamesThreadOnRefusal) and "graph.storage.postgres.saver" in sys.modules:
        from graph.storage.leases.postgres import PostgresLeases, conninfo_of

        info = conninfo_of(saver)
        return None if info is None else PostgresLeases(info, timeout_s)
    return None


async def aleases_for(saver: object, timeout_s: float, *, holder: str) -> LeaseStore | None:
    """The lease store of any Ferry saver, the server's async ones included."""
    # The LangGraph server hands runs its checkpointer wrapped in an adapter that keeps the
    # saver `langgraph.json` names as `_inner` (tests/integration/test_studio.py covers it).
    saver = getattr(saver, "_inner", saver)
    return await asyncio.to_thread(leases_for, saver, timeout_s, holder=holder)
