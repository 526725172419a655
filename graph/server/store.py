"""The LangGraph server's memory store: the same one, in the same database, as the CLI's.

`langgraph.json` names `store` below, so the memories a turn keeps through the server are the
ones `ferry memory list` shows and `ferry ask` recalls (graph/storage/stores.py), and Studio's
memory view and the server's `/store` API show them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.store.base import BaseStore

from graph.core.settings import get_settings


@asynccontextmanager
async def store() -> AsyncIterator[BaseStore]:
    """Open LangGraph's store on `FERRY_DB` (or `FERRY_DATABASE_URL`) for the server's life."""
    settings = get_settings()
    if settings.database_url:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        async with AsyncPostgresStore.from_conn_string(settings.database_url) as postgres:
            await postgres.setup()
            yield postgres
        return
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    settings.db.parent.mkdir(parents=True, exist_ok=True)
    async with AsyncSqliteStore.from_conn_string(str(settings.db)) as sqlite:
        await sqlite.setup()
        yield sqlite
