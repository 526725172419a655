"""A `make bench` Temporal worker: `python -m bench.temporal_worker` (settings from the env).

Ferry's graph with two tools that record each run in BENCH_TOOL_LOG, one line per start and
per end, with the call's id: `lookup` (retry-safe) and `record` (`retry_safe=False`, a side
effect). BENCH_MAX_STEPS caps the steps this worker runs at once. Beside `FerryTurn` it serves
bench/temporal_floor.py's workflow, whose activities it runs as it runs the steps.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Annotated

from langchain_core.tools import BaseTool, InjectedToolCallId, tool

from bench.temporal_floor import FerryFloor
from graph.builder import build_graph
from graph.core.settings import get_settings
from graph.storage import open_saver
from graph.temporal import connect
from graph.temporal.worker import serve_graph

TOOL_WORK_S = 0.05


def _log(line: str) -> None:
    line = f"{line} {time.time():.4f} {os.getpid()}"  # when and where: set against the kills
    descriptor = os.open(os.environ["BENCH_TOOL_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, (line + "\n").encode())  # one write: lines never interleave
    finally:
        os.close(descriptor)


@tool
def lookup(key: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Look a key up.

    Args:
        key: what to look up.
        tool_call_id: injected.
    """
    _log(f"start {tool_call_id} lookup")
    time.sleep(TOOL_WORK_S)
    _log(f"end {tool_call_id} lookup")
    return f"{key} = 42"


@tool
def record(note: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Record a note (a side effect: it must never run twice).

    Args:
        note: what to record.
        tool_call_id: injected.
    """
    _log(f"start {tool_call_id} record")
    time.sleep(TOOL_WORK_S)
    _log(f"end {tool_call_id} record")
    return f"recorded {note}"


record.metadata = {"retry_safe": False}
TOOLS: list[BaseTool] = [lookup, record]


async def main() -> None:
    if os.environ.get("BENCH_UNSANDBOXED"):  # measures what the workflow sandbox costs
        from temporalio.worker import UnsandboxedWorkflowRunner

        from graph.temporal import worker

        worker.WORKFLOW_RUNNER = UnsandboxedWorkflowRunner()  # type: ignore[assignment]
    settings = get_settings()
    client = await connect(settings)
    with open_saver(settings) as saver:
        graph = build_graph(tools=TOOLS, checkpointer=saver, settings=settings)
        await serve_graph(
            client,
            graph,
            settings,
            max_steps=int(os.environ["BENCH_MAX_STEPS"]),
            workflows=[FerryFloor],
        )


if __name__ == "__main__":
    asyncio.run(main())
