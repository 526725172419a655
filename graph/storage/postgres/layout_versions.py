"""The layout version of Ferry's tables in Postgres, beside LangGraph's, checked at setup.

As LangGraph records its own migrations in `checkpoint_migrations`, Ferry records its in
`ferry_migrations`: one row per version reached. A database without a row is version 0;
one that Ferry up to 7f5a698 set up already has version 1's tables (created IF NOT EXISTS), so
its first setup here creates nothing and records 1. `MIGRATIONS[k]` takes the tables from
version k to k+1; the steps missing run in one transaction with their rows. Only ever append
(graph/storage/FORMAT.md, "Layout versions").
"""

from __future__ import annotations

from typing import Any

from graph.storage.errors import DatabaseError
from graph.storage.postgres.history_sql import PARTS_TABLE, SAVED_HISTORIES_TABLE
from graph.storage.threads.started import STARTED_CALLS_TABLE
from graph.storage.threads.summaries import SUMMARIES_TABLE

MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS ferry_migrations (v INTEGER PRIMARY KEY)"
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (STARTED_CALLS_TABLE, SAVED_HISTORIES_TABLE, PARTS_TABLE, SUMMARIES_TABLE),
)
"""Each step's statements, from version k to k+1: appended to, never changed or reordered."""
# Other processes' setups wait here for the version read to stay true until the commit.
_LOCK = "LOCK TABLE ferry_migrations IN EXCLUSIVE MODE"
_VERSION = "SELECT coalesce(max(v), 0) AS v FROM ferry_migrations"
_RECORD = "INSERT INTO ferry_migrations (v) VALUES (%s)"


def current() -> int:
    """The layout version of Ferry's tables this Ferry writes."""
    return len(MIGRATIONS)


def refuse_newer(version: int, info: Any) -> None:
    """Refuse, naming the database, tables of a layout newer than this Ferry knows."""
    if version > current():
        where = f"postgres {info.host}:{info.port}/{info.dbname}"
        raise DatabaseError(
            f"database {where} (FERRY_DATABASE_URL): Ferry's tables are at layout version "
            f"{version}, made by a newer Ferry; upgrade Ferry (this one knows versions up to "
            f"{current()})"
        )


def steps_after(version: int) -> list[tuple[int, tuple[str, ...]]]:
    """The versions still to reach from `version`, each with its statements."""
    return [(v + 1, MIGRATIONS[v]) for v in range(version, current())]


def migrate(cur: Any) -> None:
    """Bring Ferry's tables up to date on a cursor of an autocommit connection."""
    cur.execute(MIGRATIONS_TABLE)
    with cur.connection.transaction():
        cur.execute(_LOCK)
        version = cur.execute(_VERSION).fetchone()["v"]
        refuse_newer(version, cur.connection.info)
        for reached, statements in steps_after(version):
            for statement in statements:
                cur.execute(statement)
            cur.execute(_RECORD, (reached,))


async def amigrate(cur: Any) -> None:
    """`migrate`, on an async cursor."""
    await cur.execute(MIGRATIONS_TABLE)
    async with cur.connection.transaction():
        await cur.execute(_LOCK)
        version = (await (await cur.execute(_VERSION)).fetchone())["v"]
        refuse_newer(version, cur.connection.info)
        for reached, statements in steps_after(version):
            for statement in statements:
                await cur.execute(statement)
            await cur.execute(_RECORD, (reached,))
