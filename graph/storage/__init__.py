"""Where threads live: SQLite at `FERRY_DB`, or PostgreSQL at `FERRY_DATABASE_URL`.

The factories below choose (`graph.storage.sqlite`, `graph.storage.postgres`); the CLI, Python
and the server all go through them, so every entry point reads and writes the same threads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from graph.settings import Settings
from graph.storage.sqlite import FerrySaver, connect

if TYPE_CHECKING:
    from graph.storage.postgres import FerryPostgresSaver

__all__ = ["FerrySaver", "RecordsStarts", "connect", "default_saver", "open_saver", "sqlite_saver"]


@runtime_checkable
class RecordsStarts(Protocol):
    """A saver that records which tool calls started, so side effects never run twice."""

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        ...


def sqlite_saver(path: Path) -> FerrySaver:
    """A saver on `path` whose connection lives as long as the process."""
    return FerrySaver(connect(path))


if TYPE_CHECKING:
    Saver = FerrySaver | FerryPostgresSaver
    """What `default_saver` and `open_saver` return."""


def default_saver(settings: Settings) -> Saver:
    """A saver for the life of the process: Postgres at `FERRY_DATABASE_URL`, else `FERRY_DB`."""
    if settings.database_url:
        from graph.storage.postgres import postgres_saver

        return postgres_saver(settings.database_url)
    return sqlite_saver(settings.db)


@contextmanager
def open_saver(settings: Settings) -> Iterator[Saver]:
    """A saver for the length of a command, closed afterwards (Postgres or SQLite, as above)."""
    if settings.database_url:
        from graph.storage.postgres import open_postgres_saver

        with open_postgres_saver(settings.database_url) as postgres:
            yield postgres
        return
    saver = FerrySaver(connect(settings.db))
    try:
        yield saver
    finally:
        # A run that failed may still be saving a checkpoint from a worker thread; closing the
        # connection under its feet crashes SQLite, so wait for the saver's lock first.
        with saver.lock:
            saver.conn.close()
