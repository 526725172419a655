"""The garbage collector around a command: paused while the graph loads, idle at the exit.

Loading LangGraph, LangChain and Ferry and building the graph make about a million objects
that live as long as the command, and little garbage. The collector's passes over them while
they are made (two full ones, and young ones rescanning the newest) cost about 0.1 s of CPU, as
much as the imports Ferry adds to LangGraph's; once they are frozen (`gc.freeze`), collections
during the run and a chat's later turns no longer walk them either. At the exit the interpreter
collects everything again, several times, as it clears its modules: about 0.25 s of CPU for a
process that is about to end and whose memory the operating system takes back at once.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def collection_after_loading() -> Iterator[Callable[[], None]]:
    """Pause collection until the `loaded()` it yields is called (or the block ends).

    `loaded()` freezes what was made so far and collects again from then on; they are unfrozen
    when the block ends, so a process that runs several commands (a test's) gets them collected.
    A collector paused before (by the application, or by a read elsewhere) stays as it was.
    """
    collecting = gc.isenabled()
    gc.disable()
    frozen = False

    def loaded() -> None:
        nonlocal frozen
        if frozen:
            return
        frozen = True
        gc.freeze()
        if collecting:
            gc.enable()

    try:
        yield loaded
    finally:
        loaded()
        gc.unfreeze()


def no_collection_at_exit() -> None:
    """Freeze every object once the process's other exit handlers have run (they run first).

    For a process that is the command: the interpreter's collections at its end then find
    nothing to walk. Python never promised to finalize what is left at exit; files, databases
    and servers are closed by the command and its exit handlers, before this one.
    """
    atexit.register(gc.freeze)
