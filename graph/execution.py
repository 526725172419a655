"""Running one tool call as LangGraph's `ToolNode` does, within a timeout; failures in words.

`ToolNode` gives tools the whole LangChain protocol: the call's id and the graph state injected
(`InjectedToolCallId`, `InjectedState`, `ToolRuntime`), async-only tools, `content_and_artifact`
results, `interrupt()` and `Command` returns. Ferry keeps around it what `ToolNode` leaves to
its caller: the timeout, the texts the model reads when a call fails, and what is stored.

And a call that must not run twice is not re-run after a crash. A tool declares side effects
with `metadata={"retry_safe": False}` (MCP tools: by their annotations). Before such a call
runs, its start is recorded in the thread's database; a run that finds the start already
recorded (the process died mid-call) answers the call with `NOT_RERUN` instead of running it
again. A call that paused in `interrupt()` did not finish either, but is meant to run again
when resumed: its record is removed.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.types import Command
from pydantic import ValidationError
from pydantic_core import ErrorDetails, to_jsonable_python

from graph.core.log import redact
from graph.core.run import ToolTimeout, run_with_timeout

if TYPE_CHECKING:
    from graph.storage.ferry_store import FerryStore


def _async_only(tool: BaseTool) -> bool:
    """Whether a tool has a coroutine and no function (what MCP adapters make, for one)."""
    return isinstance(tool, StructuredTool) and tool.func is None and tool.coroutine is not None


_CALL_TIMEOUT: contextvars.ContextVar[float] = contextvars.ContextVar("ferry_call_timeout")
"""The running call's timeout, for `within_timeout` (ToolNode's threads copy the context)."""


def within_timeout(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
    """`ToolNode`'s call wrapper: the tool runs in a daemon thread, given up at the timeout.

    `ToolNode` runs sync tools in a thread pool, whose threads the interpreter waits for at
    exit: a call that overran there would keep the process alive. Here only a daemon thread
    is left behind, and the pool's thread returns at the timeout.
    """
    return run_with_timeout(lambda: execute(request), _CALL_TIMEOUT.get())


async def awaited(
    request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Any]]
) -> Any:
    """`ToolNode`'s async call wrapper: as it is (async-only tools are timed from outside)."""
    return await execute(request)


def tool_node(tools: Sequence[BaseTool]) -> ToolNode:
    """LangGraph's tool runner for `tools`; failures come back as exceptions, for Ferry's texts."""
    return ToolNode(
        tools, handle_tool_errors=False, wrap_tool_call=within_timeout, awrap_tool_call=awaited
    )


def _through_tool_node(
    node: ToolNode, tool: BaseTool, call: ToolCall, config: RunnableConfig, timeout_s: float
) -> Any:
    """The call run as LangGraph's `ToolNode` runs it: the whole call, injections, artifacts.

    Given the call alone, `ToolNode` reads the graph state from the running task when a tool
    asks for it (`InjectedState`, `ToolRuntime`), so the state is not stored with each task.
    An async-only tool runs on an event loop of its own in a daemon thread, so it works in
    sync runs too.
    """
    calls = [ToolCall(name=call["name"], args=call["args"], id=call["id"], type="tool_call")]
    if _async_only(tool):
        return run_with_timeout(lambda: asyncio.run(node.ainvoke(calls, config)), timeout_s)
    token = _CALL_TIMEOUT.set(timeout_s)
    try:
        return node.invoke(calls, config)
    finally:
        _CALL_TIMEOUT.reset(token)


def run_call(
    node: ToolNode,
    tool: BaseTool,
    call: ToolCall,
    config: RunnableConfig,
    timeout_s: float,
    limit_s: float,
) -> Any:
    """Run one call within `timeout_s`: `ToolNode`'s output, or the text of what went wrong.

    `limit_s` is the per-call timeout: a shorter `timeout_s` means the run's time budget is
    what ran out. An `interrupt()` inside the tool is not a failure: it pauses the run.
    """
    try:
        return _through_tool_node(node, tool, call, config, timeout_s)
    except ToolTimeout:
        if timeout_s < limit_s:
            return f"Not finished: the run's time budget ran out while {tool.name} was running."
        return (
            f"{tool.name} timed out after {limit_s:g} s (FERRY_TOOL_TIMEOUT_S). "
            "Try again later or with a simpler request."
        )
    except GraphBubbleUp:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes a result the model reads
        return describe_failure(tool, exc)


def results_of(output: Any, call: ToolCall, duration_ms: int) -> tuple[list[Any], str]:
    """The node's updates from `run_call`'s output, each result made ready to store; its status.

    Every result gets a random id (the fence value derives from it), its content redacted, its
    artifact as plain, redacted data (stored values load only Ferry's types), and the call's
    duration. A tool's `Command` keeps its other updates and its `goto`.
    """
    if isinstance(output, str):  # what went wrong
        output = {"messages": [ToolMessage(output, tool_call_id=call["id"] or "", status="error")]}
    updates = output if isinstance(output, list) else [output]
    status = "success"
    ready: list[Any] = []
    for update in updates:
        values = update.update if isinstance(update, Command) else update
        if not isinstance(values, dict) or "messages" not in values:
            ready.append(update)
            continue
        messages = [_stored(m, call, duration_ms) for m in values["messages"]]
        for message in messages:
            if isinstance(message, ToolMessage) and message.tool_call_id == call["id"]:
                status = message.status
        values = {**values, "messages": messages}
        ready.append(replace(update, update=values) if isinstance(update, Command) else values)
    return ready, status


def node_output(updates: list[Any]) -> dict[str, Any] | list[Any]:
    """The updates as a node returns them: one dict, or a list only when it holds a `Command`."""
    if any(isinstance(update, Command) for update in updates):
        return updates
    merged: dict[str, Any] = {}
    for update in updates:
        merged.update(update)
    return merged


def _stored(message: Any, call: ToolCall, duration_ms: int) -> Any:
    if not isinstance(message, ToolMessage):
        return message
    content = message.content
    return message.model_copy(
        update={
            "content": redact(content) if isinstance(content, str) else _redacted(content),
            "name": message.name or call["name"],
            "id": str(uuid.uuid4()),
            "artifact": _redacted_data(to_jsonable_python(message.artifact, fallback=repr)),
            "response_metadata": {**message.response_metadata, "duration_ms": duration_ms},
        }
    )


def _redacted_data(value: Any) -> Any:
    """JSON data with every string redacted: an artifact is stored as the result is."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted_data(item) for item in value]
    if isinstance(value, dict):
        return {key: _redacted_data(item) for key, item in value.items()}
    return value


def _redacted(blocks: list[Any]) -> list[Any]:
    return [
        redact(b)
        if isinstance(b, str)
        else {**b, "text": redact(str(b["text"]))}
        if isinstance(b, dict) and b.get("type") == "text" and "text" in b
        else b
        for b in blocks
    ]


def describe_failure(tool: BaseTool, exc: BaseException) -> str:
    """An instructive error text for the model, never a traceback, never a secret."""
    if isinstance(exc, ToolInvocationError):  # `ToolNode`'s: injected arguments left out
        text = _invalid_arguments(tool, exc.filtered_errors or exc.source.errors())
    elif isinstance(exc, ValidationError):
        text = _invalid_arguments(tool, exc.errors())
    elif isinstance(exc, ToolException):
        text = str(exc) or f"{tool.name} failed."
    else:
        text = (
            f"{tool.name} failed unexpectedly ({type(exc).__name__}: {exc}). "
            "Try different arguments, another tool, or answer with what you know."
        )
    return redact(text)


def _invalid_arguments(tool: BaseTool, errors: Sequence[ErrorDetails]) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
        for error in errors
    )
    return f"Invalid arguments for {tool.name}: {problems}. Fix the arguments and call again."


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
