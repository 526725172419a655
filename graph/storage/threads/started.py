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


class RecordsStartsOnItsLoop:
    """`first_start`/`forget_start` for an async saver: its async methods, run on its loop."""

    loop: asyncio.AbstractEventLoop

    async def afirst_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before."""
        raise NotImplementedError

    async def aforget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start: the call paused (`interrupt()`) and runs again when resumed."""
        raise NotImplementedError

    def first_start(self, thread_id: str, tool_call_id: str) -> bool:
        """Record that a call is starting; False if it had started before (from another thread).

        Raises:
            asyncio.InvalidStateError: Called on the saver's own loop, which would deadlock.
        """
        return bool(self._on_its_loop(self.afirst_start(thread_id, tool_call_id)))

    def forget_start(self, thread_id: str, tool_call_id: str) -> None:
        """Forget a start (from another thread): the call paused and runs again when resumed."""
        self._on_its_loop(self.aforget_start(thread_id, tool_call_id))

    def _on_its_loop(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run `work` on the saver's loop from another thread, and wait for it."""
        try:
            on_its_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:  # no loop in this thread
            on_its_loop = False
        if on_its_loop:
            work.close()
            raise asyncio.InvalidStateError("a blocking call on the saver's loop: await it")
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()
