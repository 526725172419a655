"""The MCP loop: one daemon thread's event loop, "ferry-mcp", where every MCP session lives.

An MCP session belongs to the event loop that opened it, while Ferry calls tools from worker
threads with loops of their own, or none: every call is handed to this loop and waited for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _mcp_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="ferry-mcp", daemon=True).start()
        return _loop


def run(coroutine: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """Run `coroutine` on the MCP loop and wait for it; past `timeout_s`, cancel it there."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _mcp_loop())
    try:
        return future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()  # the call stops waiting on the MCP loop too, its session stays usable
        raise TimeoutError from None


async def arun(coroutine: Coroutine[Any, Any, T], timeout_s: float) -> T:
    """`run` for a caller on another event loop; cancelling the caller cancels the call."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _mcp_loop())
    return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)


def stop_loop() -> None:
    """Stop the loop (at exit, after the sessions closed); the next call starts a new one."""
    global _loop
    with _lock:
        loop, _loop = _loop, None
    if loop is not None:
        loop.call_soon_threadsafe(loop.stop)
