"""The LangGraph server's memory store: the same one, in the same database, as the CLI's.

`langgraph.json` names `store` below, so the memories a turn keeps through the server are the
ones `ferry memory list` shows and `ferry ask` recalls (graph/storage/stores.py), and Studio's
memory view and the server's `/store` API show them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.store.base import BaseStore

from graph.core.settings import get_settings
from graph.storage.stores import set_up_store


@asynccontextmanager
async def store() -> AsyncIterator[BaseStore]:
    """Open LangGraph's store on `FERRY_DB` (or `FERRY_DATABASE_URL`) for the server's life."""
    settings = get_settings()
    # Its tables first, one process at a time (the CLI's may be starting too); their own setup
    # then finds nothing left to migrate and only notes that it is set up.
    await asyncio.to_thread(set_up_store, settings.db, settings.database_url)
    if settings.database_url:
        from langgraph.store.postgres.aio import AsyncPostgresStore

        async with AsyncPostgresStore.from_conn_string(settings.database_url) as postgres:
            yield postgres
        return
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string(str(settings.db)) as sqlite:
        await sqlite.setup()
        yield sqlite
