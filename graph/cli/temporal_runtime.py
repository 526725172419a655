"""What the Temporal commands share: a runtime of their own, a line on stderr.

`ferry worker` runs its Temporal work on a runtime of its own (`run_on_temporal`), dropped
before the process ends; the turns' runner (graph/temporal/runner.py), which `ask`, `chat`,
`resume` and `cancel` use, does the same.
"""

from __future__ import annotations

import contextvars
import gc
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from graph.core.controls import printable

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

    from graph.core.settings import Settings

T = TypeVar("T")


RUNTIME: contextvars.ContextVar[Runtime] = contextvars.ContextVar("ferry_temporal_runtime")


def run_on_temporal(
    coroutine: Callable[[], Coroutine[Any, Any, T]], settings: Settings | None = None
) -> T:
    """Run one command's Temporal work on a runtime of its own, dropped before the process ends.

    The SDK's process-wide runtime outlives the interpreter's shutdown, and its threads then
    sometimes abort the process (temporalio/sdk-python#300: "PyGILState_Release", exit 134
    after the answer was printed). A runtime released while Python still runs does not.
    Its core's log lines never reach stdout (`quiet_runtime`). A call the server did not
    answer, with `settings`, is one line naming its address.
    """
    import asyncio  # here, not at the top: `ferry --help` imports this module

    from graph.temporal.client import (
        DEFAULT_ADDRESS,
        TemporalUnreachable,
        quiet_runtime,
        server_away,
    )

    runtime = quiet_runtime()
    token = RUNTIME.set(runtime)
    try:
        return asyncio.run(coroutine())
    except BaseException as exc:
        _forget_frames(exc)  # the frames hold the client, and the client its runtime
        if settings is not None and server_away(exc):
            address = settings.temporal_address or DEFAULT_ADDRESS
            raise TemporalUnreachable(
                f"Temporal at {address} is unreachable (FERRY_TEMPORAL_ADDRESS): "
                f"{getattr(exc, 'message', '') or 'no answer'}"
            ) from None
        raise
    finally:
        RUNTIME.reset(token)
        del runtime
        gc.collect()


def _forget_frames(exc: BaseException | None) -> None:
    while exc is not None:
        exc.__traceback__ = None
        exc = exc.__cause__ or exc.__context__


def say(line: str) -> None:
    """One line on stderr, made printable."""
    sys.stderr.write(printable(line) + "\n")
    sys.stderr.flush()
