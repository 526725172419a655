"""The lease store of a run's saver: its database's own (`FerryStore.leases`), if it is Ferry's."""

from __future__ import annotations

import asyncio

from graph.storage.ferry_store import ferry_store
from graph.storage.leases.sqlite import LeaseStore


def leases_for(saver: object, timeout_s: float, *, holder: str) -> LeaseStore | None:
    """The lease store of a Ferry saver; None for other savers or in memory."""
    store = ferry_store(saver)
    return None if store is None else store.leases(timeout_s, holder=holder)


async def aleases_for(saver: object, timeout_s: float, *, holder: str) -> LeaseStore | None:
    """The lease store of any Ferry saver, the server's async ones included."""
    # The LangGraph server hands runs its checkpointer wrapped in an adapter that keeps the
    # saver `langgraph.json` names as `_inner` (tests/integration/test_studio.py covers it).
    saver = getattr(saver, "_inner", saver)
    return await asyncio.to_thread(leases_for, saver, timeout_s, holder=holder)
