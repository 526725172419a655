"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round. It is Ferry's own SQLite saver: its async
methods run the sync ones in worker threads (`graph.storage.sqlite.in_threads`), so the server's
event loop never waits on SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.core.settings import get_settings
from graph.state import fold_messages
from graph.storage.codec.serde import serializer
from graph.storage.sqlite.saver import FerrySaver, connect


@asynccontextmanager
async def checkpointer() -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open the saver on `FERRY_DB` (or `FERRY_DATABASE_URL`) for the server's lifetime."""
    settings = get_settings()
    if settings.database_url:
        from graph.storage.postgres.saver import async_postgres_saver

        async with async_postgres_saver(settings.database_url, fold=fold_messages) as postgres:
            yield postgres
        return
    conn = await asyncio.to_thread(connect, settings.db)
    saver = FerrySaver(conn, serde=serializer(settings), fold=fold_messages)
    await asyncio.to_thread(saver.setup)
    try:
        yield saver
    finally:
        with saver.lock:  # a run may still be saving from a worker thread
            saver.conn.close()
