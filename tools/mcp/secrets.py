"""The secret values of the MCP servers file (`env` and `headers`), for Ferry's log redaction.

Standard library only: the log formatter asks for them on every line it writes.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_values: set[str] = set()


def remember_secrets(values: set[str]) -> None:
    """Add values that must never be written to a log, a tool result or a checkpoint."""
    with _lock:
        _values.update(v for v in values if v.strip())


def config_secrets() -> tuple[tuple[str, str], ...]:
    """Each secret as a `(name, value)` pair named like a secret, sorted (a cache key)."""
    with _lock:
        return tuple(("MCP_CONFIG_SECRET", value) for value in sorted(_values))
