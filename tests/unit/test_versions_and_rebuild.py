"""Channel versions, the message rebuild, and `prune`: what the saver returns is what it was given.

Versions: Ferry's compact strings sort as their numbers, before every LangGraph version, and a
file written by an earlier Ferry (integer versions, in LangGraph's tables) is upgraded as `ferry
migrate` moves its rows into Ferry's tables (`graph.storage.sqlite.migration`), in the same
transaction, and continues, in the CLI and on the server (the same saver). The rebuild: Ferry's
reducer only for Ferry's messages, and copies handed out.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph

from graph import build_graph
from graph.server.checkpointer import checkpointer
from graph.state import fold_messages
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.codec.serde import serializer
from graph.storage.sqlite.layout import compact_version
from graph.storage.sqlite.migration import MigrationError, migrate
from graph.storage.sqlite.saver import connect
from tests.support.scripted import ScriptedModel, answer

CONFIG: Any = {"configurable": {"thread_id": "t"}}


def test_compact_versions_sort_as_numbers_and_before_langgraphs() -> None:
    numbers = [1, 2, 9, 10, 11, 99, 100, 12345, 10**12]
    assert sorted(compact_version(n) for n in numbers) == [compact_version(n) for n in numbers]
    langgraph_version = f"{1:032}.{0.25:016}"
    assert all(compact_version(n) < langgraph_version for n in numbers)
    assert len(compact_version(1234)) == 7


class _OldFerrySaver(SqliteSaver):
    """The saver of an earlier Ferry: LangGraph's tables, Ferry's serializer, integer versions."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn, serde=serializer())

    def get_next_version(self, current: Any, channel: None) -> Any:
        return (current or 0) + 1


class _ServerNumbered(FerrySaver):
    """Numbers versions as the LangGraph server does (it ignores the saver's own numbering)."""

    get_next_version = SqliteSaver.get_next_version


def _turn(saver: Any, question: str, reply: str) -> list[str]:
    graph = build_graph(model=ScriptedModel([answer(reply)]), tools=[], checkpointer=saver)
    result = graph.invoke({"messages": [("user", question)]}, CONFIG)
    return [str(m.content) for m in result["messages"]]


def _versions(db: Path, saver_class: type[Any] = FerrySaver) -> list[Any]:
    saver = saver_class(connect(db))
    return [v for c in saver.list(CONFIG) for v in c.checkpoint["channel_versions"].values()]


def test_a_file_of_an_earlier_ferry_is_upgraded_and_continues_everywhere(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    _turn(_OldFerrySaver(connect(db)), "q1", "a1")
    old = _versions(db, _OldFerrySaver)
    assert old and all(isinstance(v, int) for v in old)
    assert migrate(db).moved == {"t": 4}  # the earliest Ferry's thread is Ferry's, by its channels
    assert _turn(sqlite_saver(db), "q2", "a2") == ["q1", "a1", "q2", "a2"]
    assert all(isinstance(v, str) for v in _versions(db))
    assert _versions(db, _OldFerrySaver) == []  # moved: nothing left in LangGraph's tables
    assert _turn(_ServerNumbered(connect(db)), "q3", "a3")[-1] == "a3"  # as Studio would
    assert _turn(sqlite_saver(db), "q4", "a4") == ["q1", "a1", "q2", "a2", "q3", "a3", "q4", "a4"]


def test_a_read_only_file_of_an_earlier_ferry_is_left_as_it_is_then_reads_once_migrated(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    _turn(_OldFerrySaver(connect(db)), "q1", "a1")
    db.chmod(0o444)
    try:
        with pytest.raises(MigrationError, match="read-only"):
            migrate(db)
        read_only = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        assert FerrySaver(read_only).thread_ids() == []  # nothing moved, not even in memory
    finally:
        db.chmod(0o644)
    assert all(isinstance(v, int) for v in _versions(db, _OldFerrySaver))  # as it was
    migrate(db)
    db.chmod(0o444)
    try:
        read_only = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
        graph = build_graph(model=ScriptedModel([]), tools=[], checkpointer=FerrySaver(read_only))
        assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == ["q1", "a1"]
    finally:
        db.chmod(0o644)


def _concatenated(state: list[int], writes: list[list[int]]) -> list[int]:
    return state + [n for write in writes for n in write]


class _Counted(TypedDict):
    messages: Annotated[list[int], DeltaChannel(_concatenated)]


def test_a_messages_channel_that_holds_no_messages_keeps_its_own_reducer(tmp_path: Path) -> None:
    builder = StateGraph(_Counted)
    builder.add_node("count", lambda state: {"messages": [len(state["messages"])]})
    builder.add_edge("__start__", "count")
    graph = builder.compile(checkpointer=sqlite_saver(tmp_path / "n.db"))
    graph.invoke({"messages": [7]}, CONFIG)
    graph.invoke({"messages": [8]}, CONFIG)
    cold = builder.compile(checkpointer=sqlite_saver(tmp_path / "n.db"))
    assert cold.get_state(CONFIG).values["messages"] == [7, 1, 8, 3]


def test_editing_the_state_one_reads_changes_nothing_stored(tmp_path: Path) -> None:
    model = ScriptedModel([answer("a1"), answer("a2")])
    graph = build_graph(model=model, tools=[], checkpointer=sqlite_saver(tmp_path / "e.db"))
    graph.invoke({"messages": [("user", "q1")]}, CONFIG)
    graph.get_state(CONFIG).values["messages"].clear()
    graph.invoke({"messages": [("user", "q2")]}, CONFIG)
    assert [m.content for m in model.calls[1] if m.type != "system"] == ["q1", "a1", "q2"]
    assert [m.content for m in graph.get_state(CONFIG).values["messages"]] == [
        "q1", "a1", "q2", "a2"
    ]  # fmt: skip


def test_prune_keeps_the_latest_checkpoint_and_its_history(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    for i in range(3):
        _turn(sqlite_saver(db), f"q{i}", f"a{i}")
    sqlite_saver(db, fold=fold_messages).prune(["t"], strategy="keep_latest")
    assert len(list(sqlite_saver(db).list(CONFIG))) == 1
    assert _turn(sqlite_saver(db), "q3", "a3") == ["q0", "a0", "q1", "a1", "q2", "a2", "q3", "a3"]


def test_the_servers_aprune_is_ferrys_prune(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "s.db"
    monkeypatch.setenv("FERRY_DB", str(db))
    for i in range(2):
        _turn(sqlite_saver(db), f"q{i}", f"a{i}")

    async def prune() -> None:
        async with checkpointer() as saver:
            await saver.aprune(["t"])

    asyncio.run(prune())
    assert len(list(sqlite_saver(db).list(CONFIG))) == 1
    assert _turn(sqlite_saver(db), "q2", "a2") == ["q0", "a0", "q1", "a1", "q2", "a2"]


def test_the_server_continues_a_file_of_an_earlier_ferry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "old.db"
    monkeypatch.setenv("FERRY_DB", str(db))
    _turn(_OldFerrySaver(connect(db)), "q1", "a1")
    migrate(db)
    model = ScriptedModel([answer("a2")])

    async def continue_on_the_server() -> list[str]:
        async with checkpointer() as saver:
            graph = build_graph(model=model, tools=[], checkpointer=saver)
            result = await graph.ainvoke({"messages": [("user", "q2")]}, CONFIG)
            return [str(m.content) for m in result["messages"]]

    assert asyncio.run(continue_on_the_server()) == ["q1", "a1", "q2", "a2"]
    assert all(isinstance(v, str) for v in _versions(db))
