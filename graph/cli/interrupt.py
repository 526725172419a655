"""Ctrl-C during a run: stop within a second, leave the thread resumable, never a traceback.

LangGraph waits for a step's running tasks before it lets an exception out of a run, and the
interpreter joins its worker threads before it exits, so a tool or a model call could hold
Ctrl-C for as long as its timeout. The CLI therefore runs the graph in a daemon thread and
only reads its events: on Ctrl-C the reader stops, the run is abandoned where it stands, and
the process ends at once (`exit_now`) without waiting for it. Whatever the run had stored
stays stored; the calls it was running are answered on `ferry resume`, as after a kill.

`ferry chat` goes on after a cancelled answer instead: the abandoned run stops at its next
step boundary (its stream is closed, so LangGraph starts no further step), the next turn on
the thread first waits for it (`wait_for_cancelled_runs`), and `rearm_interrupt` makes the
next Ctrl-C interrupt again.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

DOUBLE_PRESS_S = 0.5
"""A Ctrl-C this soon after the one just handled is the same press, repeated: not a new one."""
_clock = time.monotonic  # a test's own clock replaces it

_abandoned: list[threading.Thread] = []
# The stop event of the run whose code is running, in its context (its tools copy it).
_run_stop: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "ferry_run_stop", default=None
)
_interrupt_handler: list[Callable[[int, Any], None]] = []  # the armed guard's, while one is


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


def _ignore(_signum: int, _frame: Any) -> None:
    """Ignore a Ctrl-C in Python, not with SIG_IGN.

    A Ctrl-C that arrives while the handler is being changed is run with the handler set since,
    and CPython meets SIG_IGN there with "Signal 2 ignored due to race condition" and a
    traceback on the terminal.
    """


@contextmanager
def one_interrupt() -> Iterator[None]:
    """Turn the first Ctrl-C into KeyboardInterrupt and ignore every later one.

    The second Ctrl-C of an impatient user would otherwise land in the middle of the cleanup
    and print a traceback. Only the main thread may set signal handlers; elsewhere (an
    embedding program, a test worker) nothing changes.
    """
    # A process started immune to Ctrl-C (`nohup ferry … &`, a background job) stays so.
    immune = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if threading.current_thread() is not threading.main_thread() or immune:
        yield
        return

    def first(_signum: int, _frame: Any) -> None:
        signal.signal(signal.SIGINT, _ignore)  # not SIG_IGN: see _ignore
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    _interrupt_handler.append(first)
    try:
        yield
    finally:
        _interrupt_handler.remove(first)
        signal.signal(signal.SIGINT, previous)


def rearm_interrupt() -> None:
    """Let the next Ctrl-C interrupt again, once the last one was handled (in `one_interrupt`).

    A press within DOUBLE_PRESS_S of now is still the impatient double press just handled,
    and is ignored. Outside the guard (another thread, a process immune to Ctrl-C) nothing
    changes.
    """
    if not _interrupt_handler or threading.current_thread() is not threading.main_thread():
        return
    armed, handled_at = _interrupt_handler[-1], _clock()

    def after_the_last_press(signum: int, frame: Any) -> None:
        if _clock() - handled_at >= DOUBLE_PRESS_S:
            armed(signum, frame)

    signal.signal(signal.SIGINT, after_the_last_press)


class _NotFromCancelledRuns(logging.Filter):
    """Drop the log records of a run Ctrl-C cancelled: they would land in the next prompt."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not run_cancelled()


def quiet_cancelled_runs(*loggers: str) -> None:
    """Keep the log lines of cancelled runs off the handlers of `loggers` (the CLI's logs)."""
    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _NotFromCancelledRuns) for f in handler.filters):
                handler.addFilter(_NotFromCancelledRuns())


def quiet_after_interrupt() -> None:
    """Stop log lines: an abandoned run may still log, after the one line Ctrl-C prints."""
    logging.disable(logging.CRITICAL)


def exit_now(code: int) -> None:
    """End the process with `code` without waiting for abandoned runs' threads."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be shown anyway
            pass
    os._exit(code)
