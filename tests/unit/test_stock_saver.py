"""A checkpointer passed to `build_graph` is used as given, whatever its type (issue 21 §1).

LangGraph's docs teach `build_graph(checkpointer=SqliteSaver(conn))`, and the file may be
another application's too: Ferry stores its threads through that saver, changes nothing of it,
and never moves the rows it holds. A stock SQLite saver's cost is logged once.
"""

from __future__ import annotations

import logging
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Command

from graph import build_graph
from graph.core.settings import Settings
from graph.state import FerryState
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.sqlite import stock as stock_savers
from graph.storage.sqlite.ownership import FERRY_CHANNELS, FERRY_NODES
from graph.storage.sqlite.stock import as_given
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.scripted import ScriptedModel, answer, tool_call

CONFIG: Any = {"configurable": {"thread_id": "t1"}}
BILLING: Any = {"configurable": {"thread_id": "billing-42"}}


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()
    stock_savers._warn_once.cache_clear()  # once per process: start this test's count here


def _stock(path: Path, **kwargs: Any) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False), **kwargs)


class _Billing(TypedDict):
    charges: Annotated[list[int], operator.add]


def _billing_app(saver: BaseCheckpointSaver[Any]) -> Any:
    """Another application's plain graph: one node adding a charge."""
    builder = StateGraph(_Billing)
    builder.add_node("charge", lambda state: {"charges": [len(state["charges"])]})
    builder.add_edge("__start__", "charge")
    return builder.compile(checkpointer=saver)


def _billing_checkpoints(saver: BaseCheckpointSaver[Any]) -> list[tuple[str, Any]]:
    return [
        (c.config["configurable"]["checkpoint_id"], c.checkpoint["channel_values"])
        for c in saver.list(BILLING)
    ]


def _turn_with_tools(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """A turn that calls a tool, then one paused for approval and approved: every message."""
    model = ScriptedModel(
        [
            tool_call("peek", path="a"),
            answer("a holds text"),
            tool_call("delete_file", path="a"),
            answer("deleted"),
        ]
    )
    graph = build_graph(
        model=model,
        tools=[peek, delete_file],
        checkpointer=saver,
        settings=Settings(approve_tools="delete_file"),
    )
    assert graph.checkpointer is saver
    graph.invoke({"messages": [("user", "look at a")]}, CONFIG)
    paused = graph.invoke({"messages": [("user", "delete a")]}, CONFIG)
    assert paused["__interrupt__"] and RUNS == ["peek a"]  # paused before running it
    graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    model.assert_complete()
    assert RUNS == ["peek a", "delete a"]
    messages = graph.get_state(CONFIG).values["messages"]
    kinds = [type(m).__name__ for m in messages]
    assert kinds == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
    ]  # fmt: skip
    results = [m for m in messages if isinstance(m, ToolMessage)]
    calls = [m.tool_calls[0]["id"] for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert [(r.tool_call_id, r.content) for r in results] == [
        (calls[0], "contents of a"),
        (calls[1], "deleted a"),
    ]
    return [(m.type, m.content) for m in messages]


def test_a_stock_saver_is_used_as_given_and_left_unchanged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stock = _stock(tmp_path / "stock.db")
    serde, lock = stock.serde, stock.lock
    with caplog.at_level(logging.WARNING, logger="ferry.saver"):
        conversation = _turn_with_tools(stock)
    assert stock.serde is serde and stock.lock is lock  # nothing of the caller's swapped
    # The caller's own saver reads what the graph stored, in LangGraph's own tables.
    latest = stock.get_tuple(CONFIG)
    assert latest is not None and latest.checkpoint["channel_values"]["stop_reason"] == "answered"
    tables = {row[0] for row in stock.conn.execute("SELECT name FROM sqlite_master")}
    assert not any(name.startswith("ferry_") for name in tables)
    reread = build_graph(model=ScriptedModel([]), tools=[], checkpointer=_stock(stock_file(stock)))
    assert [(m.type, m.content) for m in reread.get_state(CONFIG).values["messages"]] == (
        conversation
    )
    warnings = [r.getMessage() for r in caplog.records if "stock SqliteSaver" in r.getMessage()]
    assert len(warnings) == 1  # once, however many graphs were built on it
    assert "4×" in warnings[0] and "ferry migrate FILE" in warnings[0]
    assert "no lease" in warnings[0] and "sqlite_saver(path)" in warnings[0]


def stock_file(saver: SqliteSaver) -> Path:
    return Path(next(row[2] for row in saver.conn.execute("PRAGMA database_list")))


def test_an_in_memory_saver_runs_a_whole_turn_and_logs_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saver = InMemorySaver()
    with caplog.at_level(logging.WARNING, logger="ferry.saver"):
        _turn_with_tools(saver)
    assert [r.getMessage() for r in caplog.records if r.name == "ferry.saver"] == []


def test_a_stock_saver_with_its_own_serializer_is_used_as_given_too(tmp_path: Path) -> None:
    serde = JsonPlusSerializer(pickle_fallback=True)
    stock = _stock(tmp_path / "stock.db", serde=serde)
    assert as_given(stock) is stock and stock.serde is serde


def test_a_ferry_saver_is_used_as_it_is(tmp_path: Path) -> None:
    saver = FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))
    assert as_given(saver) is saver


def test_another_apps_thread_in_the_same_file_reads_back_intact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The `billing-42` trial: a plain StateGraph's 3 checkpoints, then Ferry on the same file."""
    path = tmp_path / "shared.db"
    billing = _billing_app(_stock(path))
    billing.invoke({"charges": [5]}, BILLING)
    before = _billing_checkpoints(_stock(path))
    assert len(before) == 3

    _turn_with_tools(_stock(path))  # Ferry's graph on a SqliteSaver of the same file
    with caplog.at_level(logging.WARNING, logger="ferry.saver"):
        opened = sqlite_saver(path)  # and Ferry's own saver opening it: says so, moves nothing
        assert opened.thread_ids() == []
        assert sqlite_saver(path).thread_ids() == []
    notices = [r.getMessage() for r in caplog.records if "LangGraph's tables" in r.getMessage()]
    assert notices == [
        f"{path} holds 2 thread(s) in LangGraph's tables, which Ferry does not read; to "
        f"convert Ferry's: ferry migrate {path}"
    ]

    own = _stock(path)  # the other application, as it reads its file
    assert _billing_checkpoints(own) == before
    assert _billing_app(own).get_state(BILLING).values == {"charges": [5, 1]}
    assert _billing_app(own).invoke({"charges": [7]}, BILLING) == {"charges": [5, 1, 7, 3]}


def test_the_nodes_and_channels_the_migration_recognises_are_the_graphs() -> None:
    graph = build_graph(model=ScriptedModel([]), tools=[], checkpointer=InMemorySaver())
    assert set(graph.nodes) - {"__start__"} == set(FERRY_NODES)
    chosen = {c for c in graph.channels if not c.startswith("__")}  # LangGraph's own left out
    assert chosen <= FERRY_CHANNELS and set(FerryState.__annotations__) <= FERRY_CHANNELS
    assert FERRY_CHANNELS - chosen <= {f"branch:to:{node}" for node in FERRY_NODES}
