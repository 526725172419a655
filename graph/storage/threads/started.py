"""Ferry's record of started calls: its table, and how an async saver writes it for the tool node.

`execute_tool` is a sync node: in an async run (the server, `ainvoke`) LangGraph runs it in a
worker thread, which waits here for the record to be written on the saver's own event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

STARTED_CALLS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_started_calls ("
    "thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, tool_call_id))"
)
"""One row per tool call that has started, in SQLite and Postgres alike."""


def on_its_loop(loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, Any]) -> Any:
    """Run an async saver's `work` on its `loop` from another thread, and wait for it.

    How an async saver's `first_start`/`forget_start` run its async ones for a sync node.

    Raises:
        asyncio.InvalidStateError: Called on the saver's own loop, which would deadlock.
    """
    try:
        on_it = asyncio.get_running_loop() is loop
    except RuntimeError:  # no loop in this thread
        on_it = False
    if on_it:
        work.close()
        raise asyncio.InvalidStateError("a blocking call on the saver's loop: await it")
    return asyncio.run_coroutine_threadsafe(work, loop).result()
