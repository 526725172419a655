"""Reading the stored threads: what `ferry threads` and `ferry history` show.

A listing reads each thread's summary row (`graph.storage.threads.summaries`); only a thread
without a current one is rebuilt, so the message classes are imported only when one is. When
every row of a SQLite file is current, `graph.storage.sqlite.listing` reads them without a
saver, so not even LangGraph is imported.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from graph.storage.threads.summaries import PLAIN, Opener, Row, Summary, summary_of

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import Checkpoint, CheckpointTuple

    from graph.storage.ferry_store import FerryStore
    from graph.storage.history.folding import Fold
    from graph.storage.internals import DeltaChannelHistory

log = logging.getLogger("ferry.threads")


TITLE_CHARS = 60
TYPED_QUESTION = "ferry_typed_question"
"""A user message's `additional_kwargs` key for the question the person typed, when the message
holds more (text piped before it): the thread's title then, never the piped text."""


class ReadsHistories(Protocol):
    """A saver, as far as rebuilding a thread's messages needs one."""

    serde: Any
    fold: Fold | None
    """The `messages` reducer (`graph.storage.history.folding`)."""

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or its thread's newest."""
        ...

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """A channel's history up to `config`'s checkpoint."""
        ...


def title_of(messages: list[Any]) -> str:
    """A thread's title: its first question (as typed) on one line, cut to `TITLE_CHARS`."""
    from langchain_core.messages import BaseMessage

    first = next((m for m in messages if isinstance(m, BaseMessage) and m.type == "human"), None)
    typed = first.additional_kwargs.get(TYPED_QUESTION) if first is not None else None
    question = typed if isinstance(typed, str) else first.text if first is not None else ""
    text = " ".join(str(question).split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


def list_threads(saver: FerryStore) -> list[Summary]:
    """Every thread with its last update time, message count and title, most recent first."""
    threads = []
    opener = _opener(saver.serde)
    for row in saver.thread_summaries():
        summary = summary_of(row, opener) or _rebuilt(saver, str(row[0]))
        if summary is not None:
            threads.append(summary)
    return newest_first(threads)


def threads_updated_before(saver: FerryStore, cutoff: datetime) -> list[str]:
    """Ids of threads whose last checkpoint is older than `cutoff` (timezone-aware)."""
    return [
        t["thread_id"]
        for t in list_threads(saver)
        if datetime.fromisoformat(t["updated_at"]) < cutoff
    ]


def nothing_stored(path: Path) -> bool:
    """Whether no SQLite file is at `path` yet, nor a file where its folders should be.

    Commands that only read say so without creating it; a file in a folder's place is left to
    the saver, which names it.
    """
    folders = (path.parent, *path.parent.parents)
    return not path.exists() and not any(f.exists() and not f.is_dir() for f in folders)


def newest_first(threads: list[Summary]) -> list[Summary]:
    """Threads in the order `ferry threads` lists them: the most recently updated first."""
    return sorted(threads, key=lambda t: t["updated_at"], reverse=True)


def _rebuilt(saver: FerryStore, thread_id: str) -> Summary | None:
    """A thread's summary from its history, stored for the next listing; None if refused."""
    from graph.storage.codec.reads import StoredValueError

    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    try:
        latest = saver.get_tuple(config)
        if latest is None:
            return None
        row = summary_row(saver, latest.config, latest.checkpoint)
    except StoredValueError as refused:  # one bad thread must not hide the others
        log.warning("%s (left out of the list)", refused)
        return None
    saver.store_summary(row)
    return summary_of(row, _opener(saver.serde))


def summary_after_put(
    saver: ReadsHistories, saved: RunnableConfig, checkpoint: Checkpoint
) -> Row | None:
    """A thread's new summary row, after a checkpoint was put on its main namespace."""
    if saved["configurable"].get("checkpoint_ns"):
        return None
    try:
        return summary_row(saver, saved, checkpoint)
    except Exception as error:  # noqa: BLE001 - only a shortcut: the listing rebuilds the thread
        log.debug("summary of %s not stored: %s", saved["configurable"]["thread_id"], error)
        return None


def summary_row(saver: ReadsHistories, config: RunnableConfig, checkpoint: Checkpoint) -> Row:
    """A thread's summary as of one of its checkpoints (`config` names it)."""
    from langgraph.checkpoint.base import CheckpointTuple

    messages = stored_messages(saver, CheckpointTuple(config, checkpoint, {}))
    return row_from(saver.serde, config, checkpoint, messages)


def row_from(
    serde: Any, config: RunnableConfig, checkpoint: Checkpoint, messages: list[Any]
) -> Row:
    """A thread's summary row, given its messages at the checkpoint `config` names."""
    configurable = config["configurable"]
    thread_id, checkpoint_id = str(configurable["thread_id"]), configurable["checkpoint_id"]
    title, title_type = _sealed(serde, title_of(messages))
    return (thread_id, checkpoint_id, checkpoint["ts"], len(messages), title, title_type)


def _sealed(serde: Any, title: str) -> tuple[str, str]:
    """A title as stored: as it is, or sealed by the serializer when that encrypts."""
    if getattr(serde, "cipher", None) is None:
        return title, PLAIN
    type_tag, data = serde.dumps_typed(title)
    return base64.b64encode(data).decode("ascii"), str(type_tag)


def _opener(serde: Any) -> Opener:
    """Open a sealed title with the saver's serializer: text, or it raises."""

    def opened(title_type: str, stored: str) -> str:
        title = serde.loads_typed((title_type, base64.b64decode(stored, validate=True)))
        if not isinstance(title, str):
            raise TypeError(f"a title is text, not {type(title).__name__}")
        return title

    return opened


def stored_messages(saver: ReadsHistories, saved: CheckpointTuple) -> list[Any]:
    """The messages as of a checkpoint: its own snapshot, or rebuilt from the steps' writes.

    Writes the saver left unfolded are folded with its reducer (`saver.fold`).
    """
    from graph.storage.internals import snapshot_value

    values = saved.checkpoint["channel_values"]
    if "messages" in values:
        return snapshot_value(values["messages"])
    history = saver.get_delta_channel_history(config=saved.config, channels=["messages"])
    entry = history["messages"]
    seed, writes = snapshot_value(entry.get("seed")), [value for _, _, value in entry["writes"]]
    if not writes:
        return seed
    if saver.fold is None:
        raise ValueError("a saver without a messages reducer (fold=) cannot count messages")
    return saver.fold(seed, writes)


_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def message_record(message: BaseMessage) -> dict[str, Any]:
    """One message as `history --json` shows it: role, text content, and call details."""
    from langchain_core.messages import AIMessage, ToolMessage

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
