"""A run's progress as every runner shows it: the line of each call asked for and each result.

The CLI prints them (graph/cli/render.py); a Temporal step records them for its watchers
(graph/temporal/steps.py): one wording, whichever runner ran the turn.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from langchain_core.messages import AIMessage, ToolCall, ToolMessage


class Notes(Protocol):
    """Where a run's progress goes: a `Progress`, or a Temporal step's output (graph/temporal)."""

    def reply(self, message: AIMessage) -> None:
        """Show one model reply, whole, before the lines of the calls it asks for."""

    def note(self, line: str) -> None:
        """Show one progress line."""


def call_line(call: ToolCall) -> str:
    """The line a call asked for is shown with."""
    return f"→ {call['name']}({_args(call['args'])})"


def _args(args: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return text if len(text) <= 120 else text[:117] + "..."


def record_update(node: str, update: Any, progress: Notes) -> None:
    """Show one node's streamed update in `progress` (what it reports is stored: graph/runs).

    Tasks of one node that finish in the same tick (parallel tool calls) arrive as one list.
    """
    for one in update if isinstance(update, list) else [update]:
        if isinstance(one, dict):
            _record(node, one, progress)


def _record(node: str, update: dict[str, Any], progress: Notes) -> None:
    for message in update.get("messages") or []:
        if isinstance(message, AIMessage) and node == "call_model":
            progress.reply(message)
            for call in message.tool_calls:
                progress.note(call_line(call))
        elif isinstance(message, ToolMessage):
            ms = message.response_metadata.get("duration_ms")
            took = f" {ms} ms" if ms is not None else ""
            if message.status == "error":
                progress.note(f"✗ {message.name}{took}: {message.text.splitlines()[0]}")
            else:
                progress.note(f"✓ {message.name}{took}")
