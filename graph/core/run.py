"""What one invocation carries: its id and clock, the log line helper, the time left.

And how a call waits within that time: tool calls and model calls both run in a daemon thread
of a small pool (`run_with_timeout`), the caller waiting at most the time given.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from graph.core.settings import Settings

log = logging.getLogger("ferry.loop")


CAN_APPROVE = "ferry_can_approve"
"""`configurable` key: False when no person can answer an approval prompt during this run.

The CLI sets it (`--json` or no terminal, and no decision given); Python and server runs
default to True, since their caller sees the interrupt and can resume with a decision.
"""


@dataclass
class RunContext:
    """Per-invocation facts: its id (for logs) and when it started (for the time budget).

    `FerryGraph` makes one for every invocation that is not given one (graph/builder.py); the
    graph declares no context schema, since neither is a setting Studio should offer. The start
    is not a field, so a caller cannot move it and escape the time budget.
    """

    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    """Names this invocation in every log line; a new UUID unless given."""

    def __post_init__(self) -> None:
        """Start the invocation's clock."""
        self.started_at: float = time.monotonic()
        self.span: Any = None
        """The invocation's OpenTelemetry span, parent of its model and tool calls' spans;
        None when tracing is off (graph/tracing)."""


def run_ids(config: RunnableConfig, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The thread and run ids every log line of this invocation carries."""
    context = runtime.context or RunContext()
    return {"thread_id": config.get("configurable", {}).get("thread_id"), "run_id": context.run_id}


def emit(
    message: str, ids: dict[str, Any], event: str, level: int = logging.INFO, **fields: Any
) -> None:
    """One log line with the run's ids; structured fields go to JSON logs."""
    log.log(level, message, extra={**ids, "event": event, **fields})


def seconds_left(settings: Settings, runtime: Runtime[RunContext]) -> float:
    """What is left of this invocation's time budget (`FERRY_TIME_BUDGET_S`)."""
    started = runtime.context.started_at if runtime.context else time.monotonic()
    return started + settings.time_budget_s - time.monotonic()


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
