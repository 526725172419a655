"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round. The server numbers channel versions
itself, in LangGraph's format, which sorts after Ferry's (`graph.storage.versions`); the
integers an earlier Ferry stored are upgraded when the server opens the file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.settings import get_settings
from graph.storage.allowlist import NamesThreadOnRefusal
from graph.storage.checkpoint_rows import CompactCheckpointsAsync
from graph.storage.leases import main_file
from graph.storage.serde import FerrySerializer, serializer
from graph.storage.sqlite import FerrySaver, connect
from graph.storage.sqlite_schema import (
    DELETE_FERRY_ROWS,
    FERRY_TABLES,
    FORGET_START,
    OPENING_STATEMENTS,
    RECORD_START,
)
from graph.storage.started import RecordsStartsOnItsLoop


class AsyncFerrySaver(RecordsStartsOnItsLoop, NamesThreadOnRefusal, CompactCheckpointsAsync):
    """The async saver on `FERRY_DB`: what it writes `FerrySaver` reads, and the other way round."""

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        async with self.lock:
            cursor = await self.conn.execute(RECORD_START, (thread_id, tool_call_id))
            await self.conn.commit()
            return cursor.rowcount == 1

    async def aforget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        async with self.lock:
            await self.conn.execute(FORGET_START, (thread_id, tool_call_id))
            await self.conn.commit()

    async def setup(self) -> None:
        """Create LangGraph's tables and Ferry's, as `FerrySaver.setup` does."""
        await super().setup()
        async with self.lock:
            for statement in FERRY_TABLES:
                await self.conn.execute(statement)
            await self.conn.commit()

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread (from Studio, say) with Ferry's rows for it, as `FerrySaver` does."""
        await super().adelete_thread(thread_id)
        async with self.lock:
            for statement in DELETE_FERRY_ROWS:
                await self.conn.execute(statement, (str(thread_id),))
            await self.conn.commit()

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune as `FerrySaver.prune` does (what `langgraph.json`'s `checkpointer.ttl` runs)."""
        path = main_file(await self.conn.execute_fetchall("PRAGMA database_list"))
        if path is None:  # in memory: no other connection can reach its threads
            return
        await self.conn.commit()  # let the other connection write
        await asyncio.to_thread(_prune_file, path, self.serde, list(thread_ids), strategy)


def _prune_file(path: Path, serde: Any, thread_ids: list[str], strategy: str) -> None:
    with closing(connect(path)) as conn:
        FerrySaver(conn, serde=serde).prune(thread_ids, strategy=strategy)


def _upgrade_file(path: Path, serde: FerrySerializer) -> None:
    """Set up the file as the CLI would (its tables, integer versions upgraded)."""
    with closing(connect(path)) as conn:
        FerrySaver(conn, serde=serde).setup()


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
