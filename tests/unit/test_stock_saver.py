"""A stock `SqliteSaver` passed to `build_graph` stores Ferry's threads in Ferry's format.

Adopted: a `FerrySaver` on its connection, which moves the rows the stock saver had stored
into Ferry's tables, so LangGraph's are left empty (the caller's object no longer reads them).
"""

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
from graph.storage.sqlite import stock as stock_savers
from graph.storage.sqlite.stock import adopted
from tests.support.scripted import ScriptedModel, answer
from tests.support.stored import write_records

CONFIG = {"configurable": {"thread_id": "t1"}}


def _stock(path: Path, **kwargs: object) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False), **kwargs)  # type: ignore[arg-type]


def _langgraph_rows(conn: sqlite3.Connection) -> int:
    """How many rows LangGraph's own tables hold (none where they do not exist)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    return sum(
        conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("checkpoints", "writes")
        if table in tables
    )


def _message_tags(conn: sqlite3.Connection) -> set[str]:
    return {record[2] for _, record in write_records(conn, "t1", "messages")}


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
    assert any(tag.startswith("ferry-msgs") for tag in _message_tags(stock.conn))  # Ferry's form
    texts = [m.content for m in graph.get_state(CONFIG).values["messages"]]
    assert texts == ["one", "first", "two", "second"]
    assert _langgraph_rows(stock.conn) == 0 and stock.get_tuple(CONFIG) is None


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
    stored_first = [c.config["configurable"]["checkpoint_id"] for c in kept.list(CONFIG)]

    second = build_graph(
        model=ScriptedModel([answer("second")]), tools=[], checkpointer=_stock(path)
    )
    assert isinstance(second.checkpointer, FerrySaver)
    second.invoke({"messages": [("user", "two")]}, CONFIG)
    texts = [m.content for m in second.get_state(CONFIG).values["messages"]]
    assert texts == ["one", "first", "two", "second"]
    # The first turn's writes were moved as they were; the second's are Ferry's.
    tags = _message_tags(kept.conn)
    assert "msgpack" in tags and any(tag.startswith("ferry-msgs") for tag in tags)
    # Every checkpoint of the first turn is still there, under the ids the stock saver gave.
    history = [s.config["configurable"]["checkpoint_id"] for s in second.get_state_history(CONFIG)]
    assert history[-len(stored_first) :] == stored_first and len(history) > len(stored_first)
    # Nothing is left in LangGraph's tables: the caller's stock object no longer finds it.
    assert _langgraph_rows(kept.conn) == 0
    assert kept.get_tuple(CONFIG) is None and list(kept.list(None)) == []
