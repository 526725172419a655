"""A checkpoint's metadata reads back as it was put, delta-channel counters included."""

from __future__ import annotations

import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from graph.state import fold_messages
from graph.storage import FerrySaver
from graph.storage.internals import DeltaSnapshot

CONFIG = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}


def _saver(tmp_path: Path) -> FerrySaver:
    return FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))


class _State(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(fold_messages)]


def _graph(saver: FerrySaver) -> Any:
    builder = StateGraph(_State)
    builder.add_node("model", lambda state: {})
    builder.add_edge(START, "model")
    return builder.compile(checkpointer=saver)


def test_get_tuple_returns_the_metadata_put(tmp_path: Path) -> None:
    metadata = {
        "source": "loop",
        "step": 3,
        "parents": {},
        "counters_since_delta_snapshot": {"messages": [7, 4999], "notes": [1, 4999]},
    }
    _saver(tmp_path).put(CONFIG, empty_checkpoint(), metadata, {})  # type: ignore[arg-type]
    found = _saver(tmp_path).get_tuple({"configurable": {"thread_id": "t1"}})
    assert found is not None and found.metadata == metadata


def test_update_state_counts_on_from_what_the_run_stored(tmp_path: Path) -> None:
    """LangGraph's own test (test_delta_channel_update_state.py, 1.2.x) with Ferry's saver."""
    graph = _graph(_saver(tmp_path))
    config = {"configurable": {"thread_id": "after-invoke"}}
    graph.invoke({"messages": [HumanMessage("seed", id="m1")]}, config)
    graph.update_state(config, {"messages": [HumanMessage("appended", id="m2")]}, as_node="model")

    head = _saver(tmp_path).get_tuple(config)
    assert head is not None and "messages" not in head.checkpoint["channel_values"]
    assert head.metadata["counters_since_delta_snapshot"] == {"messages": [2, 4]}
    assert [m.content for m in _graph(_saver(tmp_path)).get_state(config).values["messages"]] == [
        "seed",
        "appended",
    ]


def test_a_head_stored_with_the_counter_zeroed_continues(tmp_path: Path) -> None:
    """Files of earlier releases hold the `messages` supersteps as 0: the count goes on from it."""
    graph = _graph(_saver(tmp_path))
    config = {"configurable": {"thread_id": "old"}}
    graph.invoke({"messages": [HumanMessage("seed", id="m1")]}, config)
    head = _saver(tmp_path).get_tuple(config)
    assert head is not None
    zeroed = {**head.metadata, "counters_since_delta_snapshot": {"messages": [2, 0]}}
    saver = _saver(tmp_path)
    stored = saver.put(head.parent_config or config, head.checkpoint, zeroed, {})  # type: ignore[arg-type]
    assert saver.get_tuple(stored) is not None

    graph = _graph(_saver(tmp_path))
    graph.invoke({"messages": [HumanMessage("next", id="m2")]}, config)
    head = _saver(tmp_path).get_tuple(config)
    assert head is not None and "messages" not in head.checkpoint["channel_values"]
    # The updates go on from 2, the supersteps from 0 (this run's three).
    assert head.metadata["counters_since_delta_snapshot"] == {"messages": [3, 3]}
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["seed", "next"]


class _PlainState(TypedDict):
    messages: Annotated[list[str], operator.add]  # a plain channel named like Ferry's


def test_a_plain_messages_channel_of_strings_is_stored_as_given(tmp_path: Path) -> None:
    """Not a delta channel, not LangChain messages: never folded as Ferry's (LangGraph's suite)."""
    builder = StateGraph(_PlainState)
    builder.add_node("one", lambda state: {"messages": ["one"]})
    builder.add_node("two", lambda state: {"messages": ["two"]})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    graph = builder.compile(checkpointer=_saver(tmp_path))
    config = {"configurable": {"thread_id": "plain"}}
    graph.invoke({"messages": ["start"]}, config)
    graph.invoke({"messages": ["again"]}, config)

    reread = builder.compile(checkpointer=_saver(tmp_path)).get_state(config)
    assert reread.values["messages"] == ["start", "one", "two", "again", "one", "two"]


class _FrequentState(TypedDict):
    messages: Annotated[list[Any], DeltaChannel(fold_messages, snapshot_frequency=2)]


def test_a_snapshot_the_channel_asks_for_is_kept_as_put(tmp_path: Path) -> None:
    """Only the one LangGraph's superstep bound forces is declined (storage stays linear)."""
    builder = StateGraph(_FrequentState)
    builder.add_node("model", lambda state: {"messages": [HumanMessage("reply")]})
    builder.add_edge(START, "model")
    graph = builder.compile(checkpointer=_saver(tmp_path))
    config = {"configurable": {"thread_id": "frequent"}}
    for turn in range(3):
        graph.invoke({"messages": [HumanMessage(f"q{turn}", id=f"q{turn}")]}, config)

    kept = [
        c.checkpoint["channel_values"]["messages"]
        for c in _saver(tmp_path).list(config)
        if "messages" in c.checkpoint["channel_values"]
    ]
    assert kept and all(isinstance(value, DeltaSnapshot) for value in kept)
    messages = _graph(_saver(tmp_path)).get_state(config).values["messages"]
    assert [m.content for m in messages] == ["q0", "reply", "q1", "reply", "q2", "reply"]
