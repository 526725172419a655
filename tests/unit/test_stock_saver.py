"""A stock `SqliteSaver` passed to `build_graph` stores Ferry's threads in Ferry's format."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from graph import build_graph
from graph.settings import Settings
from graph.storage import FerrySaver
from graph.storage import stock as stock_savers
from graph.storage.stock import adopted
from tests.support.scripted import ScriptedModel, answer

CONFIG = {"configurable": {"thread_id": "t1"}}


def _stock(path: Path, **kwargs: object) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False), **kwargs)  # type: ignore[arg-type]


def test_a_stock_saver_is_adopted_on_its_own_connection(tmp_path: Path) -> None:
    stock = _stock(tmp_path / "stock.db")
    model = ScriptedModel([answer("first"), answer("second")])
    graph = build_graph(model=model, tools=[], checkpointer=stock, settings=Settings())
    saver = graph.checkpointer
    assert isinstance(saver, FerrySaver)
    assert saver.conn is stock.conn and saver.lock is stock.lock
    graph.invoke({"messages": [("user", "one")]}, CONFIG)
    graph.invoke({"messages": [("user", "two")]}, CONFIG)
    model.assert_complete()
    tags = {row[0] for row in stock.conn.execute("SELECT type FROM writes")}
    assert any(tag.startswith("ferry-msgs") for tag in tags)  # Ferry's compact form
    texts = [m.content for m in graph.get_state(CONFIG).values["messages"]]
    assert texts == ["one", "first", "two", "second"]
    # The caller's own saver object still reads the thread.
    latest = stock.get_tuple(CONFIG)
    assert latest is not None and latest.checkpoint["channel_values"]["stop_reason"] == "answered"


def test_a_stock_saver_with_its_own_serializer_is_kept_and_its_cost_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stock = _stock(tmp_path / "stock.db", serde=JsonPlusSerializer(pickle_fallback=True))
    stock_savers._warn_once.cache_clear()  # once per process: start this process's count here
    with caplog.at_level(logging.WARNING, logger="ferry.saver"):
        assert adopted(stock, Settings()) is stock
        assert adopted(stock, Settings()) is stock
    warnings = [r.getMessage() for r in caplog.records if "stock SqliteSaver" in r.getMessage()]
    assert len(warnings) == 1
    assert "4×" in warnings[0] and "sqlite_saver" in warnings[0]


def test_a_ferry_saver_is_used_as_it_is(tmp_path: Path) -> None:
    saver = FerrySaver(sqlite3.connect(tmp_path / "ferry.db", check_same_thread=False))
    assert adopted(saver, Settings()) is saver


def test_a_thread_the_stock_saver_stored_continues_in_ferrys_format(tmp_path: Path) -> None:
    path = tmp_path / "stock.db"
    # Kept as given (its own serializer): the first turn is stored in LangGraph's format.
    kept = _stock(path, serde=JsonPlusSerializer(pickle_fallback=True))
    first = build_graph(model=ScriptedModel([answer("first")]), tools=[], checkpointer=kept)
    assert first.checkpointer is kept
    first.invoke({"messages": [("user", "one")]}, CONFIG)

    second = build_graph(
        model=ScriptedModel([answer("second")]), tools=[], checkpointer=_stock(path)
    )
    assert isinstance(second.checkpointer, FerrySaver)
    second.invoke({"messages": [("user", "two")]}, CONFIG)
    texts = [m.content for m in second.get_state(CONFIG).values["messages"]]
    assert texts == ["one", "first", "two", "second"]
    tags = {
        row[0] for row in kept.conn.execute("SELECT type FROM writes WHERE channel = 'messages'")
    }
    assert "msgpack" in tags and any(tag.startswith("ferry-msgs") for tag in tags)
