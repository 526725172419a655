"""Ctrl-C during a run: stop within a second, leave the thread resumable, never a traceback.

An in-process run is read from a daemon thread (graph/runs/background.py): on Ctrl-C the
reader stops, the run is abandoned where it stands, and the process ends at once (`exit_now`)
without waiting for it. Whatever the run had stored stays stored; the calls it was running are
answered on `ferry resume`, as after a kill. A turn on Temporal goes on without its client.

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
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from graph.runs.background import run_cancelled

if TYPE_CHECKING:
    from logging import LogRecord

DOUBLE_PRESS_S = 0.5
"""A Ctrl-C this soon after the one just handled is the same press, repeated: not a new one."""
_clock = time.monotonic  # a test's own clock replaces it

_interrupt_handler: list[Callable[[int, Any], None]] = []  # the armed guard's, while one is
AFTER_STORED = "ferry: interrupted after the run had ended; its outcome is stored, nothing lost"
_after_stored: dict[str, bool] = {}  # after a run is stored: "recording", "pressed", "said"
_console_exit: list[int] = []  # a console run's exit code, once its command returned


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
    logging = sys.modules.get("logging")  # imported by the run if it logs; not by `--help`
    if logging is not None:
        logging.shutdown()  # its own exit handler may come after this one: not after os._exit
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


class _NotFromCancelledRuns:
    """Drop the log records of a run Ctrl-C cancelled: they would land in the next prompt.

    A filter as logging takes any (an object with `filter`), so that importing this module,
    which `ferry --help` does, does not import logging.
    """

    def filter(self, record: LogRecord) -> bool:
        """Keep `record` unless it comes from a cancelled run."""
        return not run_cancelled()


def quiet_cancelled_runs(*loggers: str) -> None:
    """Keep the log lines of cancelled runs off the handlers of `loggers` (the CLI's logs)."""
    import logging

    for name in loggers:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _NotFromCancelledRuns) for f in handler.filters):
                handler.addFilter(_NotFromCancelledRuns())


def quiet_after_interrupt() -> None:
    """Stop log lines: an abandoned run may still log, after the one line Ctrl-C prints."""
    import logging

    logging.disable(logging.CRITICAL)


def exit_now(code: int) -> None:
    """End the process with `code` without waiting for abandoned runs' threads."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be shown anyway
            pass
    os._exit(code)
