"""`delete_file` (a tool worth approving) and `peek`, recording each run in `RUNS`."""

from __future__ import annotations

from langchain_core.tools import tool

RUNS: list[str] = []
"""What the tools did, in order ("delete a", "peek b"); each test module's fixture clears it."""


@tool
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file.
    """
    RUNS.append(f"delete {path}")
    return f"deleted {path}"


@tool
def peek(path: str) -> str:
    """Look at a file.

    Args:
        path: the file.
    """
    RUNS.append(f"peek {path}")
    return f"contents of {path}"
