"""Ferry's record of started calls: its table, and how an async saver writes it for the tool node.

`execute_tool` is a sync node: in an async run (the server, `ainvoke`) LangGraph runs it in a
worker thread, which waits here for the record to be written on the saver's own event loop.
"""

from __future__ import annotations

import asyncio

STARTED_CALLS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_started_calls ("
    "thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, tool_call_id))"
)
"""One row per tool call that has started, in SQLite and Postgres alike."""


class RecordsStartsOnItsLoop:
    """`first_start` for an async saver: its `afirst_start`, run on the saver's loop."""

    loop: asyncio.AbstractEventLoop

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        raise NotImplementedError

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before (from another thread).

        Raises:
            asyncio.InvalidStateError: Called on the saver's own loop, which would deadlock.
        """
        try:
            on_its_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:  # no loop in this thread
            on_its_loop = False
        if on_its_loop:
            raise asyncio.InvalidStateError("first_start on the saver's loop: await afirst_start")
        future = asyncio.run_coroutine_threadsafe(
            self.afirst_start(thread_id, tool_call_id), self.loop
        )
        return future.result()
