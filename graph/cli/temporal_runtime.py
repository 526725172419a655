"""What `ferry worker`, `ferry cancel` and the Temporal turns share: settings, a runtime, a client.

Each command runs its Temporal work on a runtime of its own (`run_on_temporal`), dropped before
the process ends.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import gc
import logging
import sys
from collections.abc import Callable, Coroutine
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from graph.cli.agent import open_graph, with_tools_option
from graph.core.controls import printable

if TYPE_CHECKING:
    from collections.abc import Iterator

    from temporalio.client import Client
    from temporalio.runtime import Runtime

    from graph.builder import FerryGraph
    from graph.core.settings import Settings
    from graph.temporal.client import WaitForServer

T = TypeVar("T")


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings, with `--temporal ADDRESS` (and `--tools`) applied; logging configured."""
    from graph.core.log import configure_logging
    from graph.core.settings import get_settings

    settings = with_tools_option(get_settings(), args)  # the worker's; ask refuses it (temporal.py)
    if getattr(args, "temporal", None):
        settings = settings.model_copy(update={"temporal_address": args.temporal})
    configure_logging(settings)
    return settings


RUNTIME: contextvars.ContextVar[Runtime] = contextvars.ContextVar("ferry_temporal_runtime")


def run_on_temporal(
    coroutine: Callable[[], Coroutine[Any, Any, T]], settings: Settings | None = None
) -> T:
    """Run one command's Temporal work on a runtime of its own, dropped before the process ends.

    The SDK's process-wide runtime outlives the interpreter's shutdown, and its threads then
    sometimes abort the process (temporalio/sdk-python#300: "PyGILState_Release", exit 134
    after the answer was printed). A runtime released while Python still runs does not.
    The SDK's core writes its own log lines (coloured warnings while a server is away) to
    stdout unless told otherwise: here they go to Python's `temporalio.core` logger, which
    Ferry's logging keeps where logs are kept and never shows on a terminal (graph/core/log.py).
    A call the server did not answer, with `settings`, is one line naming its address.
    """
    from temporalio.runtime import (
        LogForwardingConfig,
        LoggingConfig,
        Runtime,
        TelemetryConfig,
        TelemetryFilter,
    )

    from graph.temporal.client import DEFAULT_ADDRESS, TemporalUnreachable, server_away

    forwarding = LogForwardingConfig(logger=logging.getLogger("temporalio.core"))
    telemetry = TelemetryConfig(
        logging=LoggingConfig(
            filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
        )
    )
    runtime = Runtime(telemetry=telemetry)
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


def server_wait(settings: Settings) -> WaitForServer:
    """How this command's watch waits for a server that went away: one line on stderr."""
    from graph.temporal.client import WaitForServer

    return WaitForServer.of(settings, say)


async def client_of(settings: Settings) -> Client:
    """A client of the configured Temporal server, on this command's runtime."""
    from graph.temporal import connect

    return await connect(settings, runtime=RUNTIME.get())


@contextmanager
def thread_graph(args: argparse.Namespace) -> Iterator[FerryGraph]:
    """The graph on the configured database, only to read threads (no model, no tools)."""
    with open_graph(args, need_model=False) as graph:
        yield graph


def say(line: str) -> None:
    """One line on stderr, made printable."""
    sys.stderr.write(printable(line) + "\n")
    sys.stderr.flush()
