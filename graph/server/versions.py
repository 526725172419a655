"""Which version of each stored thread the database holds, to see what changed since a sync.

A thread's version names its latest checkpoint and what was written at it since: a run that
pauses for approval writes its pause there (a pending write) without a new checkpoint, and a
status read in between must not be taken for the last word. Two reads of the same version
found the same state, so the registry sync asks the server for a thread's state only when its
version moved (`graph.server.registry`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SQLITE_VERSIONS = (
    "SELECT t.thread_id, hex(s.id) || ':' || coalesce(("
    "SELECT sum(length(w.records)) FROM ferry_writes AS w "
    "WHERE w.thread = s.thread AND w.ns = '' AND w.id = s.id), 0) "
    "FROM ferry_threads AS t JOIN ferry_steps AS s ON s.thread = t.id AND s.ns = '' "
    "AND s.id = (SELECT max(id) FROM ferry_steps WHERE thread = t.id AND ns = '')"
)
"""Each thread with checkpoints on its main namespace, and its version: the id of the latest
(UUIDs sort by time, and before them any other id) and the size of the writes at it (a task's
writes are one row that grows)."""
POSTGRES_VERSIONS = (
    "SELECT c.thread_id, c.checkpoint_id || ':' || ("
    "SELECT count(*) FROM checkpoint_writes AS w WHERE w.thread_id = c.thread_id "
    "AND w.checkpoint_ns = '' AND w.checkpoint_id = c.checkpoint_id) AS version "
    "FROM (SELECT thread_id, max(checkpoint_id) AS checkpoint_id FROM checkpoints "
    "WHERE checkpoint_ns = '' GROUP BY thread_id) AS c"
)
"""The same from LangGraph's Postgres tables, where each write is a row of its own."""


def sqlite_versions(db: Path) -> dict[str, str]:
    """Each thread of the SQLite file `db` that has checkpoints, and its version."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return {row[0]: row[1] for row in conn.execute(SQLITE_VERSIONS)}
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    finally:
        conn.close()


def postgres_versions(url: str) -> dict[str, str]:
    """Each thread stored in Postgres at `url` that has checkpoints, and its version."""
    from graph.storage.postgres.saver import connect

    with connect(url) as conn:
        row = conn.execute("SELECT to_regclass('checkpoint_writes') IS NOT NULL AS ready")
        ready = row.fetchone()
        if not (ready and ready["ready"]):
            return {}
        return {r["thread_id"]: r["version"] for r in conn.execute(POSTGRES_VERSIONS)}
