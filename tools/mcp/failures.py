"""What went wrong with an MCP session or call, in one line the user or the model can act on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from typing import IO, Any

from langchain_core.tools import ToolException
from mcp import McpError
from mcp.types import CONNECTION_CLOSED
from pydantic import ValidationError

_STREAM_GONE = ("BrokenResourceError", "ClosedResourceError")
"""anyio's errors for a stream whose other end is gone (MCP's stdio transport uses anyio, which
Ferry does not depend on directly): the same as the server closing the connection."""


class SessionLost(Exception):
    """The session went away during a call; the message says why."""


def result_of(
    task: asyncio.Future[Any], server: str, explain_lost: Callable[[BaseException], str]
) -> Any:
    """A finished call's result: the adapters' `(content, artifact)`.

    Raises:
        ToolException: the tool failed, or the server refused the call or sent a malformed
            result, in words naming the server.
        SessionLost: the session went away, with why (`explain_lost`).
    """
    try:
        return task.result()
    except ToolException:
        raise  # the tool's own error (`isError`), already in the server's words
    except McpError as exc:
        if exc.error.code == CONNECTION_CLOSED:
            raise SessionLost(explain_lost(exc)) from exc
        raise ToolException(f"MCP server '{server}' refused the call: {exc.error.message}") from exc
    except (ValidationError, ValueError, TypeError, NotImplementedError, RuntimeError) as exc:
        text = _problems(exc) if isinstance(exc, ValidationError) else first_line(exc)
        raise ToolException(f"MCP server '{server}' sent a malformed result: {text}") from exc
    except Exception as exc:  # noqa: BLE001 - a transport failure: the server went away
        raise SessionLost(explain_lost(exc)) from exc


def explain(exc: BaseException, stderr: IO[str] | None) -> str:
    """Why a session failed, in one line, with the last line the server wrote on `stderr`."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, McpError):
        text = exc.error.message
    elif type(exc).__name__ in _STREAM_GONE:  # Ferry's write found it gone before a read did
        text = "Connection closed"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    else:
        text = f"{type(exc).__name__}: {first_line(exc)}"
    last = _last_line(stderr)
    return f"{text} (its stderr ends: {last})" if last else text


def _last_line(stderr: IO[str] | None) -> str:
    if stderr is None or stderr.closed:
        return ""
    with suppress(OSError, ValueError):
        stderr.flush()
        size = stderr.seek(0, 2)
        stderr.seek(max(0, size - 4000))
        lines = [line.strip() for line in stderr.read().splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""
    return ""


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in exc.errors()[:3]
    )


def first_line(exc: BaseException) -> str:
    """The first line of the exception's message (its type's name if it has none)."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
