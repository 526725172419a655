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

Once a run has stopped and its outcome is stored (`outcome_stored`), nothing is left to lose:
a Ctrl-C while the CLI prints `--json`, closes the database and exits is recorded, not raised,
and said in one line once the command is done; the exit code is the command's own. A console
run then ends before the interpreter's teardown (`end_at_exit`), where Python has put back the
default action of SIGINT and a Ctrl-C would kill the process without a word.
"""

from __future__ import annotations

import atexit
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
AFTER_STORED = "ferry: interrupted after the run had ended; its outcome is stored, nothing lost"
_after_stored: dict[str, bool] = {}  # after a run is stored: "recording", "pressed", "said"
_console_exit: list[int] = []  # a console run's exit code, once its command returned


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
        if not (_after_stored.get("recording") and _console_exit):
            _after_stored["recording"] = False  # a console run records on, to its end
            signal.signal(signal.SIGINT, previous)


def outcome_stored() -> None:
    """Record Ctrl-C from now on instead of raising it: the run has stopped and is stored.

    The command then finishes what it prints (`--json`, the approval lines) and closes the
    database; `say_if_interrupted_after_stored` says the press in one line. Outside the guard
    (another thread, a process immune to Ctrl-C) nothing changes.
    """
    if not _interrupt_handler or threading.current_thread() is not threading.main_thread():
        return
    _after_stored.update(recording=True, pressed=False, said=False)
    signal.signal(signal.SIGINT, _record_press)


def _record_press(_signum: int, _frame: Any) -> None:
    _after_stored["pressed"] = True


def interrupt_again() -> None:
    """Let Ctrl-C interrupt again (a person is asked to decide); one pressed meanwhile does now."""
    if not _after_stored.get("recording") or not _interrupt_handler:
        return
    pressed = _after_stored["pressed"]
    _after_stored.clear()
    armed = _interrupt_handler[-1]
    signal.signal(signal.SIGINT, armed)
    if pressed:
        armed(signal.SIGINT, None)  # raises KeyboardInterrupt, as the press would have


def say_if_interrupted_after_stored() -> None:
    """Say, once, that a Ctrl-C came after the run's outcome was stored."""
    if _after_stored.get("pressed") and not _after_stored.get("said"):
        _after_stored["said"] = True
        sys.stderr.write(AFTER_STORED + "\n")
        sys.stderr.flush()


def end_at_exit(code: int) -> None:
    """End this console process with `code` before the teardown, if its run's outcome is stored."""
    _console_exit[:] = [code]


@atexit.register  # at import, so it runs after the callbacks registered later (last first)
def _end_before_teardown() -> None:
    if not (_after_stored.get("recording") and _console_exit):
        return
    logging.shutdown()  # registered before this: it would not run after os._exit
    for stream in (sys.stdout, sys.stderr):  # a Ctrl-C while it blocks is recorded
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, _ignore)
    try:
        say_if_interrupted_after_stored()
    except (OSError, ValueError):
        pass
    os._exit(_console_exit[0])


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
