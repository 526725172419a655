"""An in-process run in a daemon thread: Ctrl-C stops its reader at once, never waits for it.

LangGraph waits for a step's running tasks before it lets an exception out of a run, and the
interpreter joins its worker threads before it exits, so a tool or a model call could hold
Ctrl-C for as long as its timeout. The in-process runner therefore runs the graph in a daemon
thread and only reads its events: on Ctrl-C the reader stops, the run is abandoned where it
stands (its stream is closed, so LangGraph starts no further step), and the front end may end
the process at once without waiting for it (graph/cli/interrupt.py). Whatever the run had
stored stays stored; the calls it was running are answered on resume, as after a kill.

A model call of a run so cancelled stops at its next token (graph/runs/runner.py's
`StopCancelledAnswer`), so the reply the person cancelled is never stored. No LangChain here:
`ferry --help` imports this.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_abandoned: list[threading.Thread] = []
# The stop event of the run whose code is running, in its context (its tools copy it).
_run_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "ferry_run_stop", default=None
)


def run_in_background(produce: Callable[[], Iterable[T]]) -> Iterator[T]:
    """Yield what `produce()` yields, produced in a daemon thread that Ctrl-C never waits for.

    The producer's exceptions are raised here, in the reader's thread.
    """
    events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    stop = threading.Event()

    def pump() -> None:
        produced: Iterable[T] = ()
        try:
            produced = produce()
            for item in produced:
                events.put(("item", item))
                if stop.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - re-raised in the reader's thread
            events.put(("error", exc))
        else:
            events.put(("end", None))
        finally:
            close = getattr(produced, "close", None)
            if close:  # a run closed early ends after its running step, as LangGraph does
                close()

    context = contextvars.copy_context()  # the run sees the caller's context (logging ids…)
    context.run(_run_stop.set, stop)
    runner = threading.Thread(target=context.run, args=(pump,), daemon=True, name="ferry-run")
    runner.start()
    try:
        while True:
            try:
                kind, value = events.get(timeout=0.2)  # a timed wait: Ctrl-C is seen at once
            except queue.Empty:
                continue
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    except KeyboardInterrupt:
        stop.set()  # the run ends after its running step, if the process lives on (chat)
        _abandoned.append(runner)  # not waited for here
        raise
    except BaseException:  # the reader failed (a closed stdout): the run ends cleanly
        stop.set()
        runner.join()
        raise


def run_cancelled() -> bool:
    """Whether the run whose code calls this was cancelled by Ctrl-C (False outside a run)."""
    stop = _run_stop.get()
    return stop is not None and stop.is_set()


def runs_abandoned() -> bool:
    """Whether a run was left running (by Ctrl-C) that the process must not wait for."""
    return any(runner.is_alive() for runner in _abandoned)


def wait_for_cancelled_runs(announce: Callable[[], None]) -> None:
    """Wait until every run left by Ctrl-C has ended; `announce()` first if one still runs.

    Its running step (a tool call, up to its timeout) finishes and is stored, so two runs
    never overlap on a thread. Ctrl-C while waiting raises KeyboardInterrupt; the runs wait on.
    """
    if runs_abandoned():
        announce()
    while _abandoned:
        _abandoned[0].join(timeout=0.2)  # a timed wait: Ctrl-C is seen at once
        if not _abandoned[0].is_alive():
            _abandoned.pop(0)
