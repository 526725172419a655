"""A new process reads a long thread from what is stored; a running one replays only the new.

A step stores the messages it added; a read walks back to the nearest history it knows (one
the saver remembers, one stored for the thread, or a snapshot) and replays the writes since
(`graph.storage.sqlite.saver`). These tests check what a user would notice if that went wrong: a
new process (`ferry history`, a restarted server) reading another history than the running
one had, time travel or a fork picking up another branch's messages, rows of a thread left
behind by prune or delete, or a running process replaying the whole thread at every step (its
turns would slow down as the thread grows).

The thread is grown once for the module; each test works on its own copy of the file, with a
saver that holds in memory what the growing process's did (`running`).
"""

from __future__ import annotations

import os
import sqlite3
from collections import OrderedDict
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import tool

from graph import build_graph
from graph.core.settings import Settings
from graph.state import fold_messages
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.history.messages import PART
from graph.storage.sqlite import saver as sqlite_engine
from tests.support.scripted import ScriptedModel, answer, tool_call
from tests.support.stored import part_rows, step_values, write_records

THREAD = "long"
CONFIG: Any = {"configurable": {"thread_id": THREAD}}
TURNS = 80
PER_TURN = 4  # question, call, result, answer

Head = tuple[Any, list[BaseMessage]]
"""A turn's last checkpoint (its config) and the messages the turn ended with."""
Grown = tuple[Path, FerrySaver, list[Head]]
"""The grown thread's file, the saver that grew it, and each turn's head."""


@tool
def lookup(n: int) -> str:
    """Look up record n.

    Args:
        n: the record number.
    """
    return f"record {n}: " + "lorem ipsum " * 20


def _graph(saver: FerrySaver, turns: range = range(0)) -> Any:
    steps: list[Any] = []
    for turn in turns:
        steps += [tool_call("lookup", n=turn), answer(f"answer {turn}")]
    return build_graph(
        model=ScriptedModel(steps), tools=[lookup], checkpointer=saver, settings=Settings()
    )


def _run(graph: Any, turns: range, config: Any = CONFIG) -> list[Head]:
    """Play `turns`; each turn's head as the running process had it when the turn ended."""
    heads = []
    for turn in turns:
        result = graph.invoke({"messages": [("user", f"question {turn}")]}, config)
        head = graph.checkpointer.get_tuple(config)  # no read of the history: nothing remembered
        heads.append((head.config, result["messages"]))
    return heads


def _cold(db: Path) -> Any:
    """The graph of a new process on the file: a new saver, nothing remembered."""
    return _graph(sqlite_saver(db))


def _messages(graph: Any, config: Any = CONFIG) -> list[BaseMessage]:
    return list(graph.get_state(config).values["messages"])


def _described(messages: list[BaseMessage]) -> list[tuple[str, str | None, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


def _carried_on(grower: FerrySaver, db: Path) -> FerrySaver:
    """A saver on `db`, a copy of `grower`'s file, holding in memory what `grower` holds.

    The process that grew the thread, going on with this test's copy of its file: the
    histories it built, the steps it put (whose writes it folds, never reading them back),
    where the newest parts end, its threads' numbers. Its own containers are copied, so no
    test changes what another's saver holds.
    """
    # What a saver holds in memory: a new kind of it must be carried over below too.
    the_files_own = {
        "serde",
        "conn",
        "lock",
        "is_setup",
        "_cursor_thread",
        "_outer_commits",
        "_path",
    }
    assert set(vars(grower)) - the_files_own == {
        "fold", "cached_histories", "cached_steps", "_part_ends", "_thread_numbers"
    }  # fmt: skip
    assert set(vars(grower.cached_histories)) == {"_lock", "_histories"}
    assert set(vars(grower.cached_steps)) == {"_histories", "_lock", "_put_here", "_writes"}
    saver = sqlite_saver(db)
    saver._part_ends = dict(grower._part_ends)
    saver._thread_numbers = dict(grower._thread_numbers)
    saver.cached_histories._histories = OrderedDict(grower.cached_histories._histories)
    steps, grown_steps = saver.cached_steps, grower.cached_steps
    steps._put_here = OrderedDict(grown_steps._put_here)
    steps._writes = OrderedDict((k, list(v)) for k, v in grown_steps._writes.items())
    return saver


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Grown:
    """A thread of TURNS turns, grown by one process whose saver remembered as it went."""
    folder = tmp_path_factory.mktemp("grown")
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("FERRY_")]:
            patch.delenv(name)  # as conftest's _isolated_env does for each test
        patch.chdir(folder)
        grower = _graph(sqlite_saver(folder / "ferry.db"), range(TURNS))
        heads = _run(grower, range(TURNS))
    return folder / "ferry.db", grower.checkpointer, heads


@pytest.fixture
def db(tmp_path: Path, grown: Grown) -> Path:
    """This test's copy of the grown thread's file."""
    path = tmp_path / "ferry.db"
    with closing(sqlite3.connect(grown[0])) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return path


@pytest.fixture
def running(db: Path, grown: Grown) -> Any:
    """The graph of the process that grew the thread (a saver that remembered as it went)."""
    return _graph(_carried_on(grown[1], db))


@pytest.fixture
def heads(grown: Grown) -> list[Head]:
    """Each turn's head of the thread of TURNS turns, as the growing process had it."""
    return grown[2]


def test_a_new_process_rebuilds_the_history_the_running_one_had(
    db: Path, running: Any, heads: list[Head]
) -> None:
    head, seen = heads[-1]
    assert len(seen) == TURNS * PER_TURN
    assert running.checkpointer.cached_history(head) == seen  # cached, not read
    assert _messages(running) == seen
    cold = _messages(_cold(db))
    assert _described(cold) == _described(seen)  # order, types, ids and contents
    assert cold == seen  # every field (tool calls, their ids)
    # No step holds the messages themselves (LangGraph's snapshot: the history again).
    saver = running.checkpointer
    with closing(sqlite3.connect(db)) as conn:
        values = [saver.serde.loads_typed(value) for value, _ in step_values(conn)]
    assert len(values) > TURNS and all("messages" not in c["channel_values"] for c, _ in values)


def test_time_travel_reads_what_was_there(db: Path, heads: list[Head]) -> None:
    for turn in (1, 2, TURNS // 3, TURNS - 1):
        config, seen = heads[turn - 1]
        assert _messages(_cold(db), config) == seen, f"after turn {turn}"
    # One process reading forwards (each read may start from the one before), then backwards.
    cold = _cold(db)
    for turn in (*range(1, TURNS, 7), *range(TURNS, 0, -9)):
        config, seen = heads[turn - 1]
        assert _messages(cold, config) == seen, f"after turn {turn}"
    # Inside a turn: each step holds what the turn had by then (the answer last).
    (start, before), (end, seen) = heads[TURNS // 2 - 1], heads[TURNS // 2]
    within = [
        list(state.values["messages"])
        for state in _cold(db).get_state_history(CONFIG, before=end)
        if state.config["configurable"]["checkpoint_id"] > start["configurable"]["checkpoint_id"]
    ]
    lengths = [len(m) for m in within]  # newest first
    assert lengths == sorted(lengths, reverse=True)
    assert set(lengths) == set(range(len(before), len(seen) + 1))
    assert all(m == seen[: len(m)] for m in within)


def test_a_fork_from_an_old_checkpoint_reads_only_its_own_branch(
    db: Path, running: Any, heads: list[Head]
) -> None:
    fork_point, before = heads[TURNS // 3 - 1]
    forker = _graph(running.checkpointer, range(1000, 1001))  # the running process forks
    forker.invoke({"messages": [("user", "a different question")]}, fork_point)
    for graph in (running, _cold(db)):
        forked = _messages(graph)  # the fork's head is now the thread's newest checkpoint
        assert forked[: len(before)] == before and len(forked) == len(before) + PER_TURN
        assert forked[-PER_TURN].content == "a different question"
        assert forked[-1].content == "answer 1000"
        # The other branch's rows lie between the fork's steps; none of them is read.
        assert f"question {TURNS // 3}" not in [m.content for m in forked]
        original, seen = heads[-1]
        assert _messages(graph, original) == seen  # the other branch still reads its own


def test_an_edit_of_an_old_checkpoint_reads_only_its_own_branch(
    db: Path, running: Any, heads: list[Head]
) -> None:
    """`update_state` on an old checkpoint (an edit in Studio) starts a branch there.

    LangGraph stores the branch's whole history in the edit's checkpoint: a read must take it
    from there, not from the steps' writes, whichever branch they are on.
    """
    at, before = heads[TURNS // 2 - 1]
    edit = HumanMessage("an added note", id="note")
    edited = running.update_state(at, {"messages": [edit]})
    for graph in (running, _cold(db)):
        assert _messages(graph, edited) == [*before, edit]
        assert _messages(graph) == [*before, edit]  # the edit is the thread's newest
        original, seen = heads[-1]
        assert _messages(graph, original) == seen


def test_prune_then_delete_leave_nothing_of_the_thread_behind(
    db: Path, running: Any, heads: list[Head]
) -> None:
    other: Any = {"configurable": {"thread_id": "other"}}
    other_heads = _run(_graph(running.checkpointer, range(2)), range(2), other)
    other_steps = len(list(sqlite_saver(db).list(other)))
    expected = heads[-1][1]
    with closing(sqlite3.connect(db)) as conn:
        assert part_rows(conn, THREAD), "a long thread keeps its messages in parts"

    pruning = sqlite_saver(db, fold=fold_messages)  # `ferry prune`, from another process
    pruning.prune_thread(THREAD, keep=3)
    kept = list(sqlite_saver(db).list(CONFIG))
    with closing(sqlite3.connect(db)) as conn:
        assert len(kept) == 3 and len(step_values(conn)) == 3 + other_steps
        # The only writes left are the pending writes of the kept steps.
        assert len(write_records(conn, THREAD)) == sum(len(t.pending_writes or []) for t in kept)
        # The oldest kept step holds the whole history; the kept writes own their values again.
        assert part_rows(conn, THREAD) == []
        assert all(record[2] != "ferry-part" for _, record in write_records(conn, THREAD))
    assert _messages(_cold(db)) == expected and _messages(running) == expected

    sqlite_saver(db).delete_thread(THREAD)
    with closing(sqlite3.connect(db)) as conn:
        assert write_records(conn, THREAD) == [] and len(step_values(conn)) == other_steps
        assert part_rows(conn, THREAD) == []
    assert _cold(db).get_state(CONFIG).values == {}
    assert running.get_state(CONFIG).values == {}  # what it remembered is of no checkpoint now
    assert _messages(_cold(db), other) == other_heads[-1][1]


def test_a_running_saver_reads_no_write_back(
    db: Path, running: Any, heads: list[Head], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Structural, not timed: the writes each read of a turn replays from the file are counted.

    A running saver folds each step's writes into the history it holds as they are put, so it
    reads none of them back (a step another process put would be read, and replayed alone).
    The grown thread ends where a part does, where even a new process replays nothing: a first
    turn moves its head between parts, and the second is the one counted (a new saver there
    replays the first's writes).
    """
    first = range(TURNS, TURNS + 1)
    _run(_graph(running.checkpointer, first), first)
    assert (TURNS + 1) * PER_TURN % PART, "the head must sit between parts"
    replayed: list[int] = []
    message_writes = sqlite_engine.message_writes

    def counted(*args: Any) -> list[Any]:
        writes = message_writes(*args)
        replayed.append(len(writes))
        return writes

    monkeypatch.setattr(sqlite_engine, "message_writes", counted)
    second = range(TURNS + 1, TURNS + 2)
    [(head, seen)] = _run(_graph(running.checkpointer, second), second)
    assert len(seen) == (TURNS + 2) * PER_TURN
    assert sum(replayed) == 0, replayed
    assert _messages(running) == seen
    assert running.checkpointer.cached_history(head) is not None
