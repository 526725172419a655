"""Ctrl-C during a run: stop within a second, leave the thread resumable, never a traceback.

LangGraph waits for a step's running tasks before it lets an exception out of a run, and the
interpreter joins its worker threads before it exits, so a tool or a model call could hold
Ctrl-C for as long as its timeout. The CLI therefore runs the graph in a daemon thread and
only reads its events: on Ctrl-C the reader stops, the run is abandoned where it stands, and
the process ends at once (`exit_now`) without waiting for it. Whatever the run had stored
stays stored; the calls it was running are answered on `ferry resume`, as after a kill.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_abandoned: list[threading.Thread] = []


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
        _abandoned.append(runner)  # not waited for: the process ends at once
        raise
    except BaseException:  # the reader failed (a closed stdout): the run ends cleanly
        stop.set()
        runner.join()
        raise


def runs_abandoned() -> bool:
    """Whether a run was left running (by Ctrl-C) that the process must not wait for."""
    return any(runner.is_alive() for runner in _abandoned)


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
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
