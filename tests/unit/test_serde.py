"""Stored values come back exactly: compact message lists, compression, older stored forms."""

from __future__ import annotations

import datetime
import gc
import threading
import zlib
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
import zstandard
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from graph import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.codec.serde import (
    MESSAGES,
    FerrySerializer,
    StoredValueError,
    UnstorableValueError,
)
from tests.support.scripted import ScriptedModel, answer, tool_call
from tools import calculator

SERDE = FerrySerializer()
SERDE_PLAIN = JsonPlusSerializer()
NOON = datetime.datetime(2026, 11, 30, 12, tzinfo=datetime.UTC)


def _conversation() -> list[BaseMessage]:
    """One of each kind of message, with the fields providers actually fill in."""
    return [
        SystemMessage("Be brief.", id="s1"),
        HumanMessage("What is 2 * 21?", id="h1", name="ana"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "calculator", "args": {"expression": "2 * 21"}, "id": "c1"}],
            invalid_tool_calls=[
                {"name": "clock", "args": "{oops", "id": "c2", "error": "bad JSON"}
            ],
            usage_metadata={"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
            response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
            additional_kwargs={"refusal": None},
        ),
        ToolMessage("42", tool_call_id="c1", name="calculator", id="t1"),
        ToolMessage("no such zone", tool_call_id="c2", status="error", id="t2", artifact=[1, 2]),
        AIMessage([{"type": "text", "text": "It is 42."}], id="a2"),
        AIMessageChunk("partial", id="a3"),
        RemoveMessage(id="h1"),
    ]


def test_a_message_list_round_trips_in_the_compact_form() -> None:
    messages = _conversation()
    tag, data = SERDE.dumps_typed(messages)
    assert tag.startswith(MESSAGES)
    loaded = SERDE.loads_typed((tag, data))
    assert loaded == messages
    assert [type(m) for m in loaded] == [type(m) for m in messages]
    assert [m.model_dump() for m in loaded] == [m.model_dump() for m in messages]
    assert all(m.tool_calls[0]["type"] == "tool_call" for m in loaded[2:3])
    # Stored defaults are not shared: changing one message leaves the others alone.
    loaded[0].additional_kwargs["x"] = 1
    assert loaded[1].additional_kwargs == {}
    assert SERDE.loads_typed((tag, data))[0].additional_kwargs == {}


def test_the_compact_form_is_smaller_than_langgraphs() -> None:
    messages = _conversation()
    assert len(SERDE.dumps_typed(messages)[1]) < len(JsonPlusSerializer().dumps_typed(messages)[1])


class Receipt(BaseModel):
    amount: int


class Tagged(HumanMessage):
    """A user's own subclass: it comes back as itself once the serializer is told it may."""


SERDE_TAGGED = FerrySerializer(allowed_types=[Tagged])


@pytest.mark.parametrize(
    "messages",
    [
        [AIMessage("x", id="a", additional_kwargs={"pair": (1, 2)})],
        [AIMessage("x", id="a", response_metadata={"at": NOON})],
        [ToolMessage("x", tool_call_id="c", id="t", artifact=Receipt(amount=3))],
        [Tagged("x", id="h")],
        [HumanMessage("x", id="h", extra_field="kept")],
        [HumanMessage("x", id="h"), "not a message"],
    ],
    ids=["tuple", "datetime", "pydantic artifact", "subclass", "extra field", "mixed list"],
)
def test_values_msgpack_cannot_carry_exactly_take_langgraphs_path(messages: list[Any]) -> None:
    tag, data = SERDE_TAGGED.dumps_typed(messages)
    assert not tag.startswith(MESSAGES)
    loaded = SERDE_TAGGED.loads_typed((tag, data))
    langgraph = JsonPlusSerializer()
    assert loaded == langgraph.loads_typed(langgraph.dumps_typed(messages))
    assert [type(m) for m in loaded] == [type(m) for m in messages]


def test_a_class_of_the_users_own_is_stored_and_loaded_only_when_allowed() -> None:
    with pytest.raises(UnstorableValueError, match=r"type test_serde\.Tagged: .*allowed_types"):
        SERDE.dumps_typed([Tagged("x", id="h")])
    stored = SERDE_TAGGED.dumps_typed([Tagged("x", id="h")])
    with pytest.raises(StoredValueError, match="test_serde.Tagged: not a type Ferry stores"):
        SERDE.loads_typed(stored)  # written by a process that allowed it, read by one that does not
    assert type(SERDE_TAGGED.loads_typed(stored)[0]) is Tagged


def test_values_are_compressed_unless_too_small_to_gain() -> None:
    big = [ToolMessage("weather report " * 200, tool_call_id="c", id="t")]
    tag, data = SERDE.dumps_typed(big)
    assert tag == MESSAGES + "+zd1"
    assert len(data) < len(big[0].content) / 10
    assert SERDE.loads_typed((tag, data)) == big
    # A short reply shrinks too: the dictionary already holds the field names.
    reply = [AIMessage("", id="a", tool_calls=[{"name": "get_weather", "args": {}, "id": "c"}])]
    tag, data = SERDE.dumps_typed(reply)
    assert tag == MESSAGES + "+zd1" and len(data) < len(SERDE_PLAIN.dumps_typed(reply)[1]) / 2
    assert SERDE.loads_typed((tag, data)) == reply
    assert SERDE.dumps_typed({"stop_reason": "answered"}) == SERDE_PLAIN.dumps_typed(
        {"stop_reason": "answered"}
    )


def test_values_stored_by_langgraph_or_an_earlier_ferry_still_load() -> None:
    messages = _conversation()
    plain = SERDE_PLAIN.dumps_typed(messages)
    assert SERDE.loads_typed(plain) == messages
    for earlier in (  # how earlier Ferry versions stored them
        (plain[0] + "+zlib", zlib.compress(plain[1], 1)),
        (plain[0] + "+zstd", zstandard.ZstdCompressor().compress(plain[1])),
    ):
        assert SERDE.loads_typed(earlier) == messages


def test_fields_from_another_version_are_validated_instead_of_trusted() -> None:
    # The stored form: [[class name, fields that differ from their defaults], ...]
    fields = {"content": "hello", "id": "h", "renamed_field": "from a newer langchain-core"}
    loaded = SERDE.loads_typed((MESSAGES, ormsgpack.packb([["HumanMessage", fields]])))
    assert loaded[0].content == "hello"
    assert loaded[0].model_extra == {"renamed_field": "from a newer langchain-core"}


def test_threads_serialise_at_once_without_mixing_values() -> None:
    errors: list[str] = []

    def work(n: int) -> None:
        for i in range(200):
            value = [ToolMessage(f"{n}-{i} " * 100, tool_call_id=f"c{n}", id=f"t{n}-{i}")]
            if SERDE.loads_typed(SERDE.dumps_typed(value)) != value:
                errors.append(f"{n}-{i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_thread_read_by_a_new_process_equals_the_one_that_ran(tmp_path: Path) -> None:
    """The cold read (new saver, compact form, no cache) gives the running graph's messages."""
    db = tmp_path / "ferry.db"
    steps: list[Any] = []
    for i in range(3):
        steps += [tool_call("calculator", expression=f"{i} + 1"), answer(f"it is {i + 1}")]

    graph = build_graph(
        model=ScriptedModel(steps), tools=[calculator], checkpointer=sqlite_saver(db),
        settings=Settings(db=db),
    )  # fmt: skip
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        graph.invoke({"messages": [("user", f"what is {i} + 1?")]}, config)
    running = graph.get_state(config).values["messages"]
    fresh = build_graph(
        model=ScriptedModel([]), tools=[calculator], checkpointer=sqlite_saver(db),
        settings=Settings(db=db),
    )  # fmt: skip
    cold = fresh.get_state(config).values["messages"]
    assert cold == running
    assert [m.model_dump() for m in cold] == [m.model_dump() for m in running]
    assert [m.content for m in cold if isinstance(m, ToolMessage)] == ["1", "2", "3"]


def test_loading_messages_leaves_the_cycle_collector_as_it_found_it() -> None:
    serde = FerrySerializer()
    stored = serde.dumps_typed([HumanMessage("hi", id="h1")] * 300)
    assert gc.isenabled()
    assert len(serde.loads_typed(stored)) == 300
    assert gc.isenabled()
    gc.disable()
    try:
        serde.loads_typed(stored)
        assert not gc.isenabled()  # the application's choice is kept
    finally:
        gc.enable()
