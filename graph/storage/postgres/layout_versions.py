"""The migrations of Ferry's tables in Postgres, from an older layout version to the current one.

The saver checks a database's version at every setup (`graph.storage.postgres.saver`) and
imports this module only when it is older than `LAYOUT_VERSION`. As LangGraph records its own
migrations in `checkpoint_migrations`, Ferry records its in `ferry_migrations`: one row per
version reached. A database without a row is version 0; one that Ferry up to 7f5a698 set up
already has version 1's tables (created IF NOT EXISTS), so its first setup here creates nothing
and records 1. `MIGRATIONS[k]` takes the tables from version k to k+1; the steps missing run
in the saver's transaction with their rows. Only ever append (graph/storage/FORMAT.md, "Layout
versions").
"""

from __future__ import annotations

from typing import Any

from graph.storage.threads.started import STARTED_CALLS_TABLE
from graph.storage.threads.summaries import SUMMARIES_TABLE

STORED_HISTORIES_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_histories (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, messages INTEGER NOT NULL, "
    "type TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns))"
)
"""One stored history per thread and namespace, replaced only by a longer one (as in SQLite)."""
PARTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_history_parts (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL, messages INTEGER NOT NULL, checkpoint_id TEXT NOT NULL, "
    "type TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, messages))"
)
"""Each part: the stored history's length with it (`messages`), where that is the history."""

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (STARTED_CALLS_TABLE, STORED_HISTORIES_TABLE, PARTS_TABLE, SUMMARIES_TABLE),
)
"""Each step's statements, from version k to k+1: appended to, never changed or reordered."""
_RECORD = "INSERT INTO ferry_migrations (v) VALUES (%s)"


def steps_after(version: int) -> list[tuple[int, tuple[str, ...]]]:
    """The versions still to reach from `version`, each with its statements."""
    return [(v + 1, MIGRATIONS[v]) for v in range(version, len(MIGRATIONS))]


def migrate(cur: Any, version: int) -> None:
    """Take Ferry's tables from `version` to the current one, in the cursor's transaction."""
    for reached, statements in steps_after(version):
        for statement in statements:
            cur.execute(statement)
        cur.execute(_RECORD, (reached,))


async def amigrate(cur: Any, version: int) -> None:
    """`migrate`, on an async cursor."""
    for reached, statements in steps_after(version):
        for statement in statements:
            await cur.execute(statement)
        await cur.execute(_RECORD, (reached,))
