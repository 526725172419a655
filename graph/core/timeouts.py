"""Waiting for a call with a deadline: tool calls and model calls both run this way.

The call runs in a daemon thread of a small pool; the caller waits at most the time given.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any


class ToolTimeout(Exception):
    """The call did not finish in the time it was given."""


class _DaemonWorkers:
    """Daemon threads that run one call at a time and are kept for the next.

    Starting a thread costs more than many a tool call; an idle worker takes the next call, and
    a new one starts only when none is idle (say, beside a call that overran and runs on).
    """

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def run(self, call: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that worker's: it takes this call
        if start:
            threading.Thread(target=self._work, daemon=True, name="ferry-tool").start()
        self._calls.put(call)

    def _work(self) -> None:
        while True:
            self._calls.get()()
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonWorkers()


def run_with_timeout(fn: Callable[[], Any], timeout_s: float) -> Any:
    """Run `fn` in a daemon thread; give up waiting after `timeout_s`.

    A thread cannot be killed, so a call that overruns is abandoned: its result is ignored, and
    because the thread is a daemon it never keeps the process alive.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc
        finally:
            done.set()

    context = contextvars.copy_context()  # keeps callbacks and tracing attached to the call
    _WORKERS.run(lambda: context.run(target))
    if not done.wait(max(timeout_s, 0.0)):
        raise ToolTimeout
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
