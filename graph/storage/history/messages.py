"""What both engines share about a thread's messages: which histories are Ferry's, and where.

The SQLite and Postgres savers rebuild `messages` the same way: find the checkpoint a config
names (or the thread's newest), fold the writes since the nearest known history with the
agent's reducer, and hand LangGraph the folded list as the seed. Only when the history holds
Ferry's messages (`are_messages`) and no edit replaced it (`Overwrite`): anything else is left
to LangGraph's generic rebuild, with the graph's own reducer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id
from langgraph.types import Overwrite

from graph.storage.internals import DeltaChannelHistory, DeltaSnapshot, snapshot_value

if TYPE_CHECKING:
    from graph.storage.history.folding import Fold

PART = 32
"""Messages a stored part of a history holds at least (four bench turns), in both engines."""
Key = tuple[str, str, str]
"""(thread_id, checkpoint_ns, checkpoint_id)"""
History = dict[str, DeltaChannelHistory]
"""What `get_delta_channel_history` returns for the `messages` channel."""


def named_key(config: RunnableConfig) -> Key | None:
    """The checkpoint `config` names; None if it names none (then: the thread's newest)."""
    if not (checkpoint_id := get_checkpoint_id(config)):
        return None
    configurable = config["configurable"]
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns", ""), checkpoint_id


def latest_key(latest: CheckpointTuple | None) -> Key | None:
    """The key of a thread's newest checkpoint, as `get_tuple` found it; None if it has none."""
    return None if latest is None else named_key(latest.config)


def no_messages() -> History:
    """The history of a thread without checkpoints."""
    return {"messages": {"writes": []}}


def seeded(messages: list[Any]) -> History:
    """A folded history handed to LangGraph as a copy: the channel hands its value out."""
    return {"messages": {"writes": [], "seed": list(messages)}}


def are_messages(seed: Any, writes: list[Any]) -> bool:
    """Whether a `messages` history holds messages only: then it is Ferry's message channel.

    The agent's reducer is applied only then: messages, or what a caller sends as one (text, a
    `(role, text)` pair, a message dict). A graph that keeps anything else under that name gets
    LangGraph's generic rebuild, with its own reducer.
    """
    base = seed.value if isinstance(seed, DeltaSnapshot) else (seed or [])
    if not isinstance(base, list) or not all(isinstance(m, BaseMessage) for m in base):
        return False
    items = (item for write in writes for item in (write if isinstance(write, list) else [write]))
    return all(_message_like(item) for item in items)


def _message_like(item: Any) -> bool:
    if isinstance(item, BaseMessage | str):
        return True
    if isinstance(item, dict):
        return "content" in item and ("role" in item or "type" in item)
    return isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)


def folded(
    seed: Any, writes: list[Any], fold: Fold | None, *, checked: bool = False
) -> list[Any] | None:
    """The messages `writes` fold into after `seed`; None if that is LangGraph's to do.

    `checked`: the seed is a list this process folded (and checked) before, so only the writes
    are checked (a walk over the whole history at every step would grow with it), and it is
    folded as it is (the reducer never changes the list it is given).
    """
    if fold is None or any(isinstance(value, Overwrite) for value in writes):
        return None  # no reducer given, or an edit in Studio
    if not are_messages([] if checked else seed, writes):
        return None
    return fold(seed if checked else snapshot_value(seed), writes)
