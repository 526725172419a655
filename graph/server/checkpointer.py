"""The LangGraph server's persistence: the same `FERRY_DB` file, in the same format, as the CLI.

`langgraph.json` names `checkpointer` below, so threads started in Studio continue with
`ferry ask --thread <id>`, and the other way round.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, CheckpointTuple
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from graph.settings import get_settings
from graph.storage.allowlist import NamesThreadOnRefusal
from graph.storage.serde import serializer
from graph.storage.sqlite import OPENING_STATEMENTS


def _as_text(versions: ChannelVersions) -> ChannelVersions:
    return {k: f"{v:032}.{0:.16f}" if isinstance(v, int) else v for k, v in versions.items()}


def server_versions(saved: CheckpointTuple) -> CheckpointTuple:
    """The checkpoint with the CLI's integer channel versions spelled as the server's strings.

    The server numbers versions itself, with LangGraph's zero-padded strings (it ignores the
    saver's `get_next_version`), and cannot compare them with the small integers `FerrySaver`
    writes: a thread started by `ferry` would fail on its first run in Studio. Spelled as
    strings of the same number, they order as before; the thread then keeps strings, which
    `ferry` continues as they are.
    """
    checkpoint = saved.checkpoint.copy()
    checkpoint["channel_versions"] = _as_text(checkpoint["channel_versions"])
    checkpoint["versions_seen"] = {
        node: _as_text(seen) for node, seen in checkpoint["versions_seen"].items()
    }
    return saved._replace(checkpoint=checkpoint)


class AsyncFerrySaver(NamesThreadOnRefusal, AsyncSqliteSaver):
    """The async saver on `FERRY_DB`: what it writes `FerrySaver` reads, and the other way round."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names (the latest by default), with string versions."""
        saved = await super().aget_tuple(config)
        return None if saved is None else server_versions(saved)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The checkpoints that match, newest first, with string versions."""
        async for saved in super().alist(config, filter=filter, before=before, limit=limit):
            yield server_versions(saved)


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
    path.parent.mkdir(parents=True, exist_ok=True)
    async with aiosqlite.connect(path, timeout=30) as conn:
        for statement in OPENING_STATEMENTS:
            await conn.execute(statement)
        saver = AsyncFerrySaver(conn, serde=serializer(settings))
        await saver.setup()
        yield saver
