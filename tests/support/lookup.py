"""`lookup`, the test tool the provider loop tests bind, and `CALLS`, the keys it was given."""

from __future__ import annotations

from langchain_core.tools import ToolException, tool

CALLS: list[str] = []
"""Every key `lookup` was called with, in order; each test module's fixture clears it."""


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    CALLS.append(key)
    if key == "missing":
        raise ToolException(f"Key {key!r} not found; known keys are one letter long.")
    return f"{key}={len(key)}"
