"""Reading the stored threads: what `ferry threads` and `ferry history` show."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from graph.state import fold_messages
from graph.storage.allowlist import StoredValueError
from graph.storage.internals import snapshot_value

if TYPE_CHECKING:
    from graph.storage import Saver

log = logging.getLogger("ferry.threads")


TITLE_CHARS = 60


def title_of(messages: list[Any]) -> str:
    """A thread's title: its first question on one line, cut to `TITLE_CHARS`."""
    first = next((m for m in messages if isinstance(m, BaseMessage) and m.type == "human"), None)
    text = " ".join(str(first.text).split()) if first is not None else ""
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


def list_threads(saver: Saver) -> list[dict[str, Any]]:
    """Every thread with its last update time, message count and title, most recent first."""
    threads = []
    for thread_id in saver.thread_ids():
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        try:
            latest = saver.get_tuple(config)
            if latest is None:
                continue
            messages = stored_messages(saver, latest)
        except StoredValueError as refused:  # one bad thread must not hide the others
            log.warning("%s (left out of the list)", refused)
            continue
        threads.append(
            {
                "thread_id": thread_id,
                "updated_at": latest.checkpoint["ts"],
                "messages": len(messages),
                "title": title_of(messages),
            }
        )
    return sorted(threads, key=lambda t: t["updated_at"], reverse=True)


def stored_messages(saver: BaseCheckpointSaver[Any], saved: CheckpointTuple) -> list[Any]:
    """The messages as of a checkpoint: its own snapshot, or rebuilt from the steps' writes."""
    values = saved.checkpoint["channel_values"]
    if "messages" in values:
        return snapshot_value(values["messages"])
    history = saver.get_delta_channel_history(config=saved.config, channels=["messages"])
    entry = history["messages"]
    writes = [value for _, _, value in entry["writes"]]
    return fold_messages(snapshot_value(entry.get("seed")), writes)


_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def message_record(message: BaseMessage) -> dict[str, Any]:
    """One message as `history --json` shows it: role, text content, and call details."""
    record: dict[str, Any] = {
        "role": _ROLES.get(message.type, message.type),
        "content": str(message.text),
    }
    if isinstance(message, AIMessage) and message.tool_calls:
        record["tool_calls"] = [
            {"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        record["tool_call_id"] = message.tool_call_id
        record["status"] = message.status
    return record
