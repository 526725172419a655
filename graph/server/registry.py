"""Studio sees every thread of `FERRY_DB`: the dev server's registry follows the database.

`langgraph dev` serves only the threads in its own registry (kept under `.langgraph_api/`) and
answers 404 for any other, even when its checkpoints are in the database. The app that
`langgraph.json` mounts (`graph.server.security.app`) runs `lifespan` below, which registers the
database's threads with the server before it serves, drops the entries whose checkpoints are
gone (a previous `FERRY_DB`'s threads, deleted ones), and keeps doing both every few seconds,
so a thread started with `ferry ask` shows up in Studio.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Thread
from starlette.applications import Starlette

from graph.settings import get_settings
from graph.storage.sqlite.saver import THREADS_WITH_STEPS

GRAPH_ID = "agent"
"""The graph's name in `langgraph.json`."""
SYNC_INTERVAL_S = 3.0
_PAGE = 1000
log = logging.getLogger("ferry.studio")


def stored_thread_ids(db: Path) -> set[str]:
    """Ids of the threads that have checkpoints in `db`; none if it has no tables yet."""
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute(THREADS_WITH_STEPS)
        return {row[0] for row in rows}
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return set()
        raise
    finally:
        conn.close()


def servable(thread_id: str) -> bool:
    """Whether the server can serve the thread: it accepts canonical UUIDs only."""
    try:
        return str(uuid.UUID(thread_id)) == thread_id
    except ValueError:
        return False


async def registered_threads(client: LangGraphClient) -> list[Thread]:
    """Every thread in the server's registry."""
    threads: list[Thread] = []
    while True:
        page = await client.threads.search(
            limit=_PAGE, offset=len(threads), select=["thread_id", "metadata", "status"]
        )
        threads += page
        if len(page) < _PAGE:
            return threads


class RegistrySync:
    """Keeps the server's registry of threads in step with the threads stored in `db`."""

    def __init__(self, client: LangGraphClient, db: Path, database_url: str | None = None) -> None:
        self.client = client
        self.db = db
        self.database_url = database_url
        """Postgres holds the threads instead of `db` when set (`FERRY_DATABASE_URL`)."""
        self.source = "FERRY_DATABASE_URL" if database_url else str(db)
        self.synced: set[str] | None = None
        """The stored threads at the last successful sync; None before the first."""

    async def sync(self) -> None:
        """Register the stored threads the server lacks; drop the entries whose thread is gone.

        An entry without checkpoints is dropped at the first sync (a previous `FERRY_DB`'s thread,
        or an empty one), later only if it had some at the last sync (`ferry delete`): a thread
        just created in Studio has none until its first run has made one.
        """
        stored = await asyncio.to_thread(self.stored)
        if stored == self.synced:
            return  # the usual case, and no request at all
        registry = await registered_threads(self.client)
        known = {str(t["thread_id"]) for t in registry}
        new = sorted(t for t in stored - known if servable(t))
        for thread_id in new:
            await self.client.threads.create(
                thread_id=thread_id, if_exists="do_nothing", graph_id=GRAPH_ID
            )
        gone = [
            str(t["thread_id"])
            for t in registry
            if str(t["thread_id"]) not in stored
            and (self.synced is None or str(t["thread_id"]) in self.synced)
            and t["status"] != "busy"
            and (t["metadata"] or {}).get("graph_id", GRAPH_ID) == GRAPH_ID
        ]
        for thread_id in gone:
            await self.client.threads.delete(thread_id)
        self.synced = stored
        if new or gone:
            log.info("threads of %s: %d registered, %d dropped", self.source, len(new), len(gone))

    def stored(self) -> set[str]:
        """Ids of the threads that have checkpoints where Ferry stores them."""
        if self.database_url:
            from graph.storage.postgres.saver import stored_thread_ids as stored_in_postgres

            return stored_in_postgres(self.database_url)
        return stored_thread_ids(self.db)

    async def sync_or_log(self) -> None:
        """Sync; on failure log it and leave the next sync to retry, so the server keeps serving."""
        try:
            await self.sync()
        except Exception:  # noqa: BLE001 - whatever went wrong, the server must keep serving
            log.warning("could not sync the server's threads with %s", self.source, exc_info=True)

    async def keep_in_sync(self) -> None:
        """Sync every `SYNC_INTERVAL_S` seconds until cancelled."""
        while True:
            await asyncio.sleep(SYNC_INTERVAL_S)
            await self.sync_or_log()


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Sync the registry with `FERRY_DB` before serving, then every `SYNC_INTERVAL_S` seconds."""
    settings = await asyncio.to_thread(get_settings)
    # No URL: the client calls this very server in-process (ASGI), bypassing authentication.
    client = get_client(url=None, api_key=None)
    registry = RegistrySync(client, settings.db, settings.database_url)
    await registry.sync_or_log()
    syncing = asyncio.create_task(registry.keep_in_sync())
    try:
        yield
    finally:
        syncing.cancel()
        with suppress(asyncio.CancelledError):
            await syncing
        await client.aclose()
