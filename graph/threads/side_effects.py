"""Side-effect protection: a call that must not run twice is not re-run after a crash.

A tool declares side effects with `metadata={"retry_safe": False}` (MCP tools: by their
annotations). Before such a call runs, its start is recorded in the thread's database; a run
that finds the start already recorded (the process died mid-call) answers the call with
`NOT_RERUN` instead of running it again. A call that paused in `interrupt()` did not finish
either, but is meant to run again when resumed: its record is removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

if TYPE_CHECKING:
    from graph.storage.ferry_store import FerryStore

NOT_RERUN = (
    "{tool} was cut short by a crash and is not re-run automatically: it declares side effects "
    "(retry_safe=False). Check whether it took effect before calling it again."
)


def started_before(tool: BaseTool, call: ToolCall, config: RunnableConfig) -> bool:
    """Record that the call starts; True if it had started before (and then crashed)."""
    saver = _records(tool, config)
    return saver is not None and not saver.first_start(_thread_of(config), call["id"] or "")


def forget_start(tool: BaseTool, call: ToolCall, config: RunnableConfig) -> None:
    """Remove the call's start record: it paused, and runs again when the run is resumed."""
    saver = _records(tool, config)
    if saver is not None:
        saver.forget_start(_thread_of(config), call["id"] or "")


def _records(tool: BaseTool, config: RunnableConfig) -> FerryStore | None:
    """Where the starts of this tool's calls are recorded; None if they need not be.

    The run's own saver records starts: the served graph is compiled without one, and the
    server hands each run its saver, so it is looked up per run, never at compile time.
    """
    if (tool.metadata or {}).get("retry_safe", True) or not _thread_of(config):
        return None
    from graph.storage.ferry_store import ferry_store
    from graph.storage.internals import run_checkpointer

    return ferry_store(run_checkpointer(config))


def _thread_of(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id") or "")
