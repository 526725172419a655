"""What `ferry` says when a command fails: one line on stderr, and with `--json` one object.

Each message says what to fix: the setting, the file or the URL involved.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from graph.cli.agent import UsageError, UserError, print_json
from graph.core.controls import printable

_BASE_URL_SETTINGS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def _model_server_error(exc: BaseException) -> str | None:
    """A provider SDK's connection error or 404, with the URL it tried and the setting."""
    sdks = [c.__module__.split(".")[0] for c in type(exc).__mro__]  # wrappers subclass the SDK's
    sdk = next((name for name in sdks if name in _BASE_URL_SETTINGS), None)
    if sdk is None or getattr(exc, "request", None) is None:
        return None
    setting = _BASE_URL_SETTINGS[sdk]
    url = os.environ.get(setting) or str(exc.request.url)  # type: ignore[attr-defined]  # checked above
    status = getattr(exc, "status_code", None)
    if status is None:
        return f"cannot reach the model server at {url} ({setting}): {exc}"
    if status == 404:  # a wrong base URL, or a model name the server does not know
        return f"the model server at {url} answered 404: {exc} (check {setting} and FERRY_MODEL)"
    return None  # a status that names its own cause (401: the key; 429: the quota)


def classify(exc: BaseException) -> tuple[int, str, str]:
    """The exit code, the error's type for `--json`, and its one-line message."""
    from graph.core.log import redact
    from graph.core.settings import ConfigError
    from graph.runs.errors import RunFailed, ServerUnreachable
    from graph.storage import DatabaseError
    from graph.storage.codec.reads import StoredValueError
    from graph.storage.errors import NotSupportedByDatabase
    from graph.threads.lease import ThreadBusy
    from graph.threads.travel import TravelError

    message = redact(str(exc))
    if isinstance(exc, UsageError):
        return 2, "usage_error", message
    if isinstance(exc, DatabaseError):
        return 1, "database_error", message
    if isinstance(exc, ConfigError):
        return 1, "config_error", message
    if isinstance(exc, ThreadBusy):
        return 1, "thread_busy", message
    if isinstance(exc, UserError | StoredValueError | TravelError | NotSupportedByDatabase):
        return 1, "user_error", message
    if isinstance(exc, ServerUnreachable):
        return 1, "connection_error", message
    if isinstance(exc, RunFailed):
        return 1, "run_error", message
    server = _model_server_error(exc)
    if server is not None:
        return 1, "connection_error", redact(server)
    return 1, type(exc).__name__, f"{type(exc).__name__}: {message}"


def report_failure(exc: BaseException, args: argparse.Namespace | None) -> int:
    """Print the failure: one line on stderr, and with `--json` one object; its exit code."""
    code, kind, message = classify(exc)
    sys.stderr.write(printable(f"ferry: {message}") + "\n")
    if args is not None and getattr(args, "json", False):
        report: dict[str, Any] = {
            "thread_id": getattr(args, "thread", None),
            "error": {"type": kind, "message": message},
        }
        print_json(report)
    return code


def debug_traceback() -> int:
    """`FERRY_DEBUG`: the whole traceback, redacted (a provider's error may quote the key)."""
    import traceback

    from graph.core.log import redact

    sys.stderr.write(redact(traceback.format_exc()))
    return 1


def did_you_mean(word: str, known: Sequence[str]) -> str:
    """`; did you mean 'x'?` for the known word closest to `word`, or nothing if none is close."""
    from difflib import get_close_matches

    close = get_close_matches(word, known, n=1, cutoff=0.7)
    return f"; did you mean {close[0]!r}?" if close else ""
