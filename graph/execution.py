"""Running one tool call: timeout, and every failure turned into words the model can act on."""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, ToolException
from pydantic import ValidationError

from graph.log import redact


class ToolTimeout(Exception):
    """The call did not finish in the time it was given."""


def run_with_timeout(fn: Callable[[], Any], timeout_s: float) -> Any:
    """Run `fn` in its own daemon thread; give up waiting after `timeout_s`.

    A thread cannot be killed, so a call that overruns is abandoned: its result is ignored, and
    because the thread is a daemon it never keeps the process alive.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc
        finally:
            done.set()

    context = contextvars.copy_context()  # keeps callbacks and tracing attached to the call
    threading.Thread(target=context.run, args=(target,), daemon=True, name="ferry-tool").start()
    if not done.wait(max(timeout_s, 0.0)):
        raise ToolTimeout
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def as_text(value: Any) -> str:
    """Tool output as the string content a provider accepts."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def run_call(
    tool: BaseTool, call: ToolCall, config: RunnableConfig, timeout_s: float, limit_s: float
) -> tuple[Literal["success", "error"], str]:
    """Run one call within `timeout_s`; every failure becomes text the model can act on.

    `limit_s` is the per-call timeout: a shorter `timeout_s` means the run's time budget is
    what ran out.
    """
    try:
        return "success", as_text(
            run_with_timeout(lambda: tool.invoke(call["args"], config), timeout_s)
        )
    except ToolTimeout:
        if timeout_s < limit_s:
            return (
                "error",
                f"Not finished: the run's time budget ran out while {tool.name} was running.",
            )
        return "error", (
            f"{tool.name} timed out after {limit_s:g} s (FERRY_TOOL_TIMEOUT_S). "
            "Try again later or with a simpler request."
        )
    except Exception as exc:  # noqa: BLE001 - every failure becomes a result the model reads
        return "error", describe_failure(tool, exc)


def describe_failure(tool: BaseTool, exc: BaseException) -> str:
    """An instructive error text for the model, never a traceback, never a secret."""
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
            for error in exc.errors()
        )
        text = f"Invalid arguments for {tool.name}: {problems}. Fix the arguments and call again."
    elif isinstance(exc, ToolException):
        text = str(exc) or f"{tool.name} failed."
    else:
        text = (
            f"{tool.name} failed unexpectedly ({type(exc).__name__}: {exc}). "
            "Try different arguments, another tool, or answer with what you know."
        )
    return redact(text)
