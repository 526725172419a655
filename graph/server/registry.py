"""Studio sees every thread of `FERRY_DB`: the dev server's registry follows the database.

`langgraph dev` serves only the threads in its own registry (kept under `.langgraph_api/`) and
answers 404 for any other, even when its checkpoints are in the database. The app that
`langgraph.json` mounts (`graph.server.security.app`) runs `lifespan` below, which registers the
database's threads with the server before it serves, drops the entries whose checkpoints are
gone (a previous `FERRY_DB`'s threads, deleted ones), and keeps doing both every few seconds,
so a thread started with `ferry ask` shows up in Studio. It also shows each thread's status as
its stored state says (`graph.server.thread_status`), so a thread the CLI paused for approval
is `interrupted` in Studio and Agent Inbox, and `idle` again once `ferry resume` ran it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Thread, ThreadState
from starlette.applications import Starlette

from graph.core.settings import get_settings
from graph.server.versions import postgres_versions, sqlite_versions

GRAPH_ID = "agent"
"""The graph's name in `langgraph.json`."""
SYNC_INTERVAL_S = 3.0
_PAGE = 1000
log = logging.getLogger("ferry.studio")


StatusSetter = Callable[[str, ThreadState], Awaitable[None]]
"""Shows a thread in the server as its state says (`graph.server.thread_status`)."""


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

    def __init__(
        self,
        client: LangGraphClient,
        db: Path,
        database_url: str | None = None,
        show_status: StatusSetter | None = None,
    ) -> None:
        self.client = client
        self.db = db
        self.database_url = database_url
        """Postgres holds the threads instead of `db` when set (`FERRY_DATABASE_URL`)."""
        self.show_status = show_status
        """Sets a thread's status in the server from its state; None: statuses left alone."""
        self.source = "FERRY_DATABASE_URL" if database_url else str(db)
        self.synced: dict[str, str] | None = None
        """The stored threads and their versions at the last successful sync; None before."""
        self.shown: dict[str, str] = {}
        """The version of each thread whose status the server shows."""

    async def sync(self, *, statuses: bool = True) -> None:
        """Register the stored threads the server lacks, drop those gone, show their statuses.

        An entry without checkpoints is dropped at the first sync (a previous `FERRY_DB`'s thread,
        or an empty one), later only if it had some at the last sync (`ferry delete`): a thread
        just created in Studio has none until its first run has made one.
        """
        stored = await asyncio.to_thread(self.stored)
        if stored != self.synced:  # else, the usual case, no request at all
            await self._register(stored)
        if statuses and self.show_status is not None:
            await self._show_statuses(stored)

    async def _register(self, stored: dict[str, str]) -> None:
        registry = await registered_threads(self.client)
        known = {str(t["thread_id"]) for t in registry}
        new = sorted(t for t in stored.keys() - known if servable(t))
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

    async def _show_statuses(self, stored: dict[str, str]) -> None:
        """Show the status of each thread whose version moved since its status was shown.

        A thread busy with a server run is left to that run, which sets its status when it
        ends, and looked at again next time; one the server marked `error` keeps it until the
        thread changes again. The version is read before the state, so a write that lands in
        between moves it, and the next sync reads the state again.
        """
        self.shown = {t: v for t, v in self.shown.items() if t in stored}
        moved = {t: v for t, v in stored.items() if servable(t) and self.shown.get(t) != v}
        if not moved:
            return
        statuses = {str(t["thread_id"]): t["status"] for t in await registered_threads(self.client)}
        for thread_id, version in sorted(moved.items()):
            status = statuses.get(thread_id)
            if status in (None, "busy"):
                continue
            if status != "error":
                try:
                    state = await self.client.threads.get_state(thread_id)
                    assert self.show_status is not None  # checked by the caller
                    await self.show_status(thread_id, state)
                except Exception:  # noqa: BLE001 - one unreadable thread must not stop the rest
                    log.warning("could not show the status of thread %s", thread_id, exc_info=True)
            self.shown[thread_id] = version  # a failure is logged once per version

    def stored(self) -> dict[str, str]:
        """The threads that have checkpoints where Ferry stores them, with their versions."""
        if self.database_url:
            return postgres_versions(self.database_url)
        return sqlite_versions(self.db)

    async def sync_or_log(self, *, statuses: bool = True) -> None:
        """Sync; on failure log it and leave the next sync to retry, so the server keeps serving."""
        try:
            await self.sync(statuses=statuses)
        except Exception:  # noqa: BLE001 - whatever went wrong, the server must keep serving
            log.warning("could not sync the server's threads with %s", self.source, exc_info=True)

    async def keep_in_sync(self) -> None:
        """Sync now, then every `SYNC_INTERVAL_S` seconds until cancelled."""
        while True:
            await self.sync_or_log()
            await asyncio.sleep(SYNC_INTERVAL_S)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Register `FERRY_DB`'s threads before serving, then sync every `SYNC_INTERVAL_S` seconds.

    Statuses are shown from the first sync after the server starts serving: each needs the
    thread's state, and a database of many threads would delay the start.
    """
    from graph.server.thread_status import set_thread_status

    settings = await asyncio.to_thread(get_settings)
    # No URL: the client calls this very server in-process (ASGI), bypassing authentication.
    client = get_client(url=None, api_key=None)
    registry = RegistrySync(client, settings.db, settings.database_url, set_thread_status)
    await registry.sync_or_log(statuses=False)
    syncing = asyncio.create_task(registry.keep_in_sync())
    try:
        yield
    finally:
        syncing.cancel()
        with suppress(asyncio.CancelledError):
            await syncing
        await client.aclose()
