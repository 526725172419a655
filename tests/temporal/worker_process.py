"""A Ferry worker with the tests' tools: `python -m tests.temporal.worker_process`.

Its settings come from the environment (FERRY_DB, FERRY_TEMPORAL_*, the OpenAI emulator's URL).
With FERRY_TEST_SERVE_FILE set, it starts (imports, connects, builds its graph) and
then takes no work until that file exists: a test starts a stand-by worker beside another.
Besides the calculator it has two tools that write each run to the file FERRY_TEST_TOOL_LOG
names, so a test can count runs:
`lookup` (retry-safe) and `send_payment` (`retry_safe=False`). Either holds mid-call, after
writing its line, while the file `hold_file()` exists: a test kills the worker at that point.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from langchain_core.tools import BaseTool, tool

from graph.builder import build_graph
from graph.core.settings import get_settings
from graph.storage import open_saver
from graph.temporal import connect
from graph.temporal.worker import serve_graph
from tools.calculator import calculator

HOLD_LIMIT_S = 60.0  # a hang guard: the test kills the worker long before
SERVE_LIMIT_S = 300.0  # a hang guard: the test lets a stand-by worker serve long before


def tool_log() -> Path:
    """The file the tools write their runs to."""
    return Path(os.environ["FERRY_TEST_TOOL_LOG"])


def hold_file() -> Path:
    """While this file exists, a tool holds mid-call after writing its line."""
    return tool_log().with_suffix(".hold")


def _ran(line: str) -> None:
    with tool_log().open("a") as log:
        log.write(line + "\n")
    started = time.monotonic()
    while hold_file().exists() and time.monotonic() - started < HOLD_LIMIT_S:
        time.sleep(0.05)


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    _ran(f"lookup {key}")
    return f"{key} = 42"


@tool
def send_payment(amount: int) -> str:
    """Send a payment.

    Args:
        amount: how much.
    """
    _ran(f"paid {amount}")
    return "paid"


send_payment.metadata = {"retry_safe": False}
TOOLS: list[BaseTool] = [calculator, lookup, send_payment]


async def main() -> None:
    settings = get_settings()
    client = await connect(settings)
    with open_saver(settings) as saver:
        graph = build_graph(tools=TOOLS, checkpointer=saver, settings=settings)
        await asyncio.to_thread(_until_told_to_serve)
        await serve_graph(client, graph, settings)


def _until_told_to_serve() -> None:
    serve = os.environ.get("FERRY_TEST_SERVE_FILE")
    started = time.monotonic()
    while serve and not Path(serve).exists():
        if time.monotonic() - started > SERVE_LIMIT_S:
            raise SystemExit(f"never told to serve: {serve} does not exist")
        time.sleep(0.02)


if __name__ == "__main__":
    asyncio.run(main())
