"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round. The server numbers channel versions
itself, in LangGraph's format, which sorts after Ferry's (`graph.storage.versions`); the
integers an earlier Ferry stored are upgraded when the server opens the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph.settings import get_settings
from graph.storage.allowlist import NamesThreadOnRefusal
from graph.storage.serde import FerrySerializer, serializer
from graph.storage.sqlite import OPENING_STATEMENTS, FerrySaver, connect
from graph.storage.started import RecordsStartsOnItsLoop


class AsyncFerrySaver(RecordsStartsOnItsLoop, NamesThreadOnRefusal, AsyncSqliteSaver):
    """The async saver on `FERRY_DB`: what it writes `FerrySaver` reads, and the other way round."""

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        async with self.lock:
            cursor = await self.conn.execute(
                "INSERT OR IGNORE INTO ferry_started_calls VALUES (?, ?)", (thread_id, tool_call_id)
            )
            await self.conn.commit()
            return cursor.rowcount == 1

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune as `FerrySaver.prune` does (what `langgraph.json`'s `checkpointer.ttl` runs)."""
        rows = await (await self.conn.execute("PRAGMA database_list")).fetchall()
        path = next(Path(row[2]) for row in rows if row[1] == "main")
        await self.conn.commit()  # let the other connection write
        await asyncio.to_thread(_prune_file, path, self.serde, list(thread_ids), strategy)


def _prune_file(path: Path, serde: Any, thread_ids: list[str], strategy: str) -> None:
    saver = FerrySaver(connect(path), serde=serde)
    try:
        saver.prune(thread_ids, strategy=strategy)
    finally:
        saver.conn.close()


def _upgrade_file(path: Path, serde: FerrySerializer) -> None:
    """Set up the file as the CLI would (its tables, integer versions upgraded)."""
    saver = FerrySaver(connect(path), serde=serde)
    try:
        saver.setup()
    finally:
        saver.conn.close()


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the async saver on `FERRY_DB` (or `FERRY_DATABASE_URL`) for the server's lifetime."""
    settings = get_settings()
    if settings.database_url:
        from graph.storage.postgres import async_postgres_saver

        async with async_postgres_saver(settings.database_url) as postgres:
            yield postgres
        return
    path = settings.db
    serde = serializer(settings)
    await asyncio.to_thread(_upgrade_file, path, serde)
    async with aiosqlite.connect(path, timeout=30) as conn:
        for statement in OPENING_STATEMENTS:
            await conn.execute(statement)
        saver = AsyncFerrySaver(conn, serde=serde)
        await saver.setup()
        yield saver
