"""One run at a time per thread, across processes and hosts: a lease held for the run's life.

`FerryGraph.stream` and `astream` run inside `thread_lease` / `athread_lease`, so `invoke`,
`ainvoke`, `astream_events`, the CLI and the server all take it. The lease lives in the thread's
database (graph/storage/leases/sqlite.py), is renewed by a heartbeat while the run lives, and is
released when it ends, however it ends. A second run on a busy thread fails at once with
`ThreadBusy`, unless its config asks to wait: `{"configurable": {WAIT_FOR_THREAD: True}}` (up to
the holder's time budget plus the lease timeout) or a number of seconds. Savers other than
Ferry's, and databases in memory, take no lease.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, aclosing, asynccontextmanager, contextmanager
from typing import Any, TypeVar, cast
from weakref import WeakKeyDictionary

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from graph.core.settings import Settings, get_settings
from graph.storage.ferry_store import ferry_store
from graph.storage.leases.sqlite import Holder, LeaseStore

log = logging.getLogger("ferry.lease")

WAIT_FOR_THREAD = "ferry_wait_for_thread"
"""`configurable` key: True (or seconds) to wait for a busy thread instead of failing at once."""
_FIRST_POLL_S, _LAST_POLL_S = 0.05, 1.0


class ThreadBusy(RuntimeError):
    """Another run holds the thread; the message is one line naming it.

    A `RuntimeError`, so the LangGraph server shows clients its message, not a generic one.
    """

    def __init__(self, thread_id: str, holder: Holder, waited_s: float = 0.0) -> None:
        waited = f" after waiting {waited_s:.0f} s" if waited_s else ""
        super().__init__(
            f"thread {thread_id} is busy{waited}: another run holds it ({holder.describe()}); "
            f"wait for it with --wait (Python: configurable {WAIT_FOR_THREAD}=True)"
        )
        self.holder = holder


def _thread_id(config: RunnableConfig | None) -> str | None:
    configurable = (config or {}).get("configurable", {})
    if configurable.get("checkpoint_ns"):  # a subgraph runs inside its parent's lease
        return None
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)


def _wait_s(config: RunnableConfig | None, settings: Settings) -> float:
    wait = (config or {}).get("configurable", {}).get(WAIT_FOR_THREAD)
    if wait is True:  # the holder's run ends within its budget, or its lease expires
        return settings.time_budget_s + settings.lease_timeout_s
    return float(wait) if isinstance(wait, int | float) and wait > 0 else 0.0


def _heartbeat_s(settings: Settings) -> float:
    return min(5.0, settings.lease_timeout_s / 3)


class _Heartbeat(threading.Thread):
    """Renews a lease every few seconds until stopped."""

    def __init__(self, store: LeaseStore, thread_id: str, interval_s: float) -> None:
        super().__init__(name=f"ferry-lease-{thread_id}", daemon=True)
        self._store, self._thread_id, self._interval_s = store, thread_id, interval_s
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            try:
                renewed = self._store.renew()
            except Exception as exc:  # noqa: BLE001 - keep beating; the next one may succeed
                log.warning("lease on thread %s not renewed: %s", self._thread_id, exc)
                continue
            if not renewed:
                extra = {"event": "lease_lost", "thread_id": self._thread_id}
                log.error(
                    "lost the lease on thread %s to another run", self._thread_id, extra=extra
                )
                return

    def stop(self) -> None:
        self._stopped.set()
        self.join(timeout=30)


def _take_once(store: LeaseStore, thread_id: str, settings: Settings) -> _Heartbeat | Holder:
    """Take the lease and start its heartbeat, or say who holds it."""
    holder = store.take(thread_id)
    for _ in range(3):  # pid 0: released between the two reads, so free now
        if holder is None or holder.pid != 0:
            break
        holder = store.take(thread_id)
    if holder is not None:
        return holder
    beat = _Heartbeat(store, thread_id, _heartbeat_s(settings))
    beat.start()
    return beat


def _finish(store: LeaseStore, beat: _Heartbeat | None) -> None:
    try:
        if beat is not None:
            beat.stop()
            store.release()
    finally:
        store.close()


class _Wait:
    """The polls of a busy thread: growing intervals, until the time allowed runs out."""

    def __init__(self, thread_id: str, wait_s: float) -> None:
        self._thread_id, self._wait_s = thread_id, wait_s
        self._started, self._poll_s = time.monotonic(), _FIRST_POLL_S

    def next_poll_s(self, holder: Holder) -> float:
        """Seconds to sleep before trying again; raise `ThreadBusy` once the wait is over."""
        waited = time.monotonic() - self._started
        if waited + self._poll_s > self._wait_s:
            raise ThreadBusy(self._thread_id, holder, waited if self._wait_s else 0.0)
        if self._poll_s == _FIRST_POLL_S:
            extra = {"event": "lease_wait", "thread_id": self._thread_id}
            message = "thread %s is busy (%s); waiting up to %.0f s"
            log.warning(message, self._thread_id, holder.describe(), self._wait_s, extra=extra)
        poll_s, self._poll_s = self._poll_s, min(_LAST_POLL_S, self._poll_s * 1.5)
        return poll_s


def _lease_store(saver: object, settings: Settings) -> LeaseStore | None:
    """The lease store of a Ferry saver's database, for this run; None for other savers."""
    store = ferry_store(saver)
    if store is None:
        return None
    return store.leases(settings.lease_timeout_s, holder=str(uuid.uuid4()))


@contextmanager
def thread_lease(
    saver: object, config: RunnableConfig | None, settings: Settings
) -> Iterator[None]:
    """Hold the thread's lease for the block; raise `ThreadBusy` if another run holds it."""
    thread_id = _thread_id(config)
    store = None
    if thread_id is not None:
        store = _lease_store(saver, settings)
    if store is None or thread_id is None:
        yield
        return
    beat = None
    try:
        wait = _Wait(thread_id, _wait_s(config, settings))
        while isinstance(taken := _take_once(store, thread_id, settings), Holder):
            time.sleep(wait.next_poll_s(taken))
        beat = taken
        yield
    finally:
        _finish(store, beat)


@asynccontextmanager
async def athread_lease(
    saver: object, config: RunnableConfig | None, settings: Settings
) -> AsyncIterator[None]:
    """`thread_lease` for async runs: the database work happens off the event loop."""
    thread_id = _thread_id(config)
    store = None
    if thread_id is not None:
        # The LangGraph server hands runs its checkpointer wrapped in an adapter that keeps the
        # saver `langgraph.json` names as `_inner` (tests/integration/test_studio.py covers it).
        store = await asyncio.to_thread(_lease_store, getattr(saver, "_inner", saver), settings)
    if store is None or thread_id is None:
        yield
        return
    beat = None
    try:
        wait = _Wait(thread_id, _wait_s(config, settings))
        while isinstance(  # noqa: ASYNC110 - polls a lease another process holds; no event to await
            taken := await asyncio.to_thread(_take_once, store, thread_id, settings), Holder
        ):
            await asyncio.sleep(wait.next_poll_s(taken))
        beat = taken
        yield
    finally:
        # A thread finishes even if this task is cancelled meanwhile: the lease is released.
        await asyncio.to_thread(_finish, store, beat)


_SETTINGS: WeakKeyDictionary[object, Settings] = WeakKeyDictionary()


def remember_settings(graph: CompiledStateGraph[Any, Any, Any, Any], settings: Settings) -> None:
    """Record the settings a graph was built with, for the lease its runs take.

    Keyed by its builder, which every copy of the graph shares (the server copies the graph to
    hand it its saver; `with_config` copies it too).
    """
    _SETTINGS[graph.builder] = settings


def _run_config(
    graph: CompiledStateGraph[Any, Any, Any, Any], args: Any, kwargs: Any
) -> RunnableConfig:
    """The config a run sees: the graph's own (`with_config`) under the call's."""
    call: dict[str, Any] = dict((args[1] if len(args) > 1 else kwargs.get("config")) or {})
    base: dict[str, Any] = dict(graph.config or {})
    configurable = {**base.get("configurable", {}), **call.get("configurable", {})}
    return cast(RunnableConfig, {**base, **call, "configurable": configurable})


def _settings_of(graph: CompiledStateGraph[Any, Any, Any, Any]) -> Settings:
    return _SETTINGS.get(graph.builder) or get_settings()


def holding(
    graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig
) -> AbstractContextManager[None]:
    """Hold the thread's lease, as a run of `graph` would, for a write outside a run."""
    return thread_lease(
        graph.checkpointer, _run_config(graph, (None, config), {}), _settings_of(graph)
    )


Stream = TypeVar("Stream", bound=Callable[..., Iterator[Any]])
AsyncStream = TypeVar("AsyncStream", bound=Callable[..., AsyncIterator[Any]])


def leased(stream: Stream) -> Stream:
    """Run a graph's `stream` inside the thread's lease, from its first step to its last."""

    @functools.wraps(stream)
    def leased_stream(
        self: CompiledStateGraph[Any, Any, Any, Any], *args: Any, **kwargs: Any
    ) -> Iterator[Any]:
        config = _run_config(self, args, kwargs)
        with thread_lease(self.checkpointer, config, _settings_of(self)):
            yield from stream(self, *args, **kwargs)

    return cast(Stream, leased_stream)


def aleased(astream: AsyncStream) -> AsyncStream:
    """Run a graph's `astream` inside the thread's lease, however the stream ends."""

    @functools.wraps(astream)
    async def leased_astream(
        self: CompiledStateGraph[Any, Any, Any, Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        config = _run_config(self, args, kwargs)
        async with athread_lease(self.checkpointer, config, _settings_of(self)):
            async with aclosing(
                cast(AsyncGenerator[Any, None], astream(self, *args, **kwargs))
            ) as parts:
                async for part in parts:
                    yield part

    return cast(AsyncStream, leased_astream)
