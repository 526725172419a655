"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiosqlite
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph.compression import CompressingSerializer
from graph.persistence import CompactVersions
from graph.settings import get_settings


class AsyncFerrySaver(CompactVersions, AsyncSqliteSaver):
    """The async saver, writing what `FerrySaver` writes and reading what it reads."""


@asynccontextmanager
async def checkpointer() -> AsyncIterator[AsyncFerrySaver]:
    """Open the async saver on `FERRY_DB` for the server's lifetime."""
    path = get_settings().db
    path.parent.mkdir(parents=True, exist_ok=True)
    async with aiosqlite.connect(path, timeout=30) as conn:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA busy_timeout=30000")
        await conn.execute("PRAGMA synchronous=NORMAL")
        saver = AsyncFerrySaver(conn, serde=CompressingSerializer())
        await saver.setup()
        yield saver
