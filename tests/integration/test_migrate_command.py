"""`ferry migrate FILE` and `ferry export FILE --to-langgraph OUT`: into Ferry's layout and out.

What a user relies on: another application's threads in the file stay readable by it; a
backup of the file as it was; a kill leaves the file as before or as after; a busy, missing or
read-only file refused in one line with nothing changed; and a Ferry file's threads read and
continued by LangGraph's own `SqliteSaver`, then brought back.
"""

from __future__ import annotations

import json
import operator
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import StateGraph
from langgraph.types import Command

import graph as ferry_package
from graph import build_graph
from graph.cli import main
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.sqlite.migration import migrate
from tests.support.file_tools import RUNS, delete_file, peek
from tests.support.scripted import ScriptedModel, answer, tool_call

REPO = Path(ferry_package.__file__).resolve().parents[1]
BILLING: Any = {"configurable": {"thread_id": "billing-42"}}
APPROVE = Settings(approve_tools="delete_file")


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _stock(path: Path) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


class _Billing(TypedDict):
    charges: Annotated[list[int], operator.add]


def _billing(saver: BaseCheckpointSaver[Any]) -> Any:
    builder = StateGraph(_Billing)
    builder.add_node("charge", lambda state: {"charges": [len(state["charges"])]})
    builder.add_edge("__start__", "charge")
    return builder.compile(checkpointer=saver)


def _agent(saver: BaseCheckpointSaver[Any], *steps: Any) -> Any:
    return build_graph(
        model=ScriptedModel(list(steps)),
        tools=[peek, delete_file],
        checkpointer=saver,
        settings=APPROVE,
    )


def _ferry_threads(saver: BaseCheckpointSaver[Any]) -> None:
    """`looked`: a tool call and its answer; `paused`: a call awaiting approval."""
    agent = _agent(saver, tool_call("peek", path="a"), answer("a holds text"))
    agent.invoke({"messages": [("user", "look at a")]}, _config("looked"))
    agent = _agent(saver, tool_call("delete_file", path="a"))
    assert agent.invoke({"messages": [("user", "delete a")]}, _config("paused"))["__interrupt__"]


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """A stock file holding Ferry's two threads and another application's `billing-42`."""
    path = tmp_path / "shared.db"
    _billing(_stock(path)).invoke({"charges": [5]}, BILLING)
    _ferry_threads(_stock(path))
    return path


def _state(saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, Any]:
    """What a user reads of a thread: its state, what runs next, its pause, its history's ids."""
    agent = _agent(saver)
    snapshot = agent.get_state(_config(thread_id))
    return {
        "values": snapshot.values,
        "next": snapshot.next,
        "interrupts": [i.value for i in snapshot.interrupts],
        "history": [s.config["configurable"]["checkpoint_id"] for s in agent.get_state_history(
            _config(thread_id)
        )],
    }  # fmt: skip


def _billing_rows(path: Path) -> list[Any]:
    stock = _stock(path)
    with closing(stock.conn):
        return [(c.config, c.checkpoint["channel_values"]) for c in stock.list(BILLING)]


def test_migrate_moves_ferrys_threads_and_leaves_the_other_apps(
    shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {t: _state(_stock(shared), t) for t in ("looked", "paused")}
    billing = _billing_rows(shared)
    assert len(billing) == 3
    assert main(["migrate", str(shared)]) == 0
    err = capsys.readouterr().err.splitlines()
    [backup] = shared.parent.glob("shared.db.before-migrate-*")
    assert err[0] == "moving looked: 7 checkpoints" and err[1] == "moving paused: 3 checkpoints"
    assert err[2:] == [
        f"backup: {backup}",
        "moved 2 threads (10 checkpoints) into Ferry's tables",
        "left billing-42 in LangGraph's tables: not Ferry's: another graph's channels "
        "(branch:to:charge, charges)",
    ]
    assert _billing_rows(shared) == billing  # the other application reads its thread as it was
    assert _billing(_stock(shared)).get_state(BILLING).values == {"charges": [5, 1]}
    saver = sqlite_saver(shared)
    assert sorted(saver.thread_ids()) == ["looked", "paused"]
    assert {t: _state(saver, t) for t in ("looked", "paused")} == before
    assert _stock(shared).get_tuple(_config("looked")) is None  # moved, not copied
    assert _billing_rows(backup) == billing and _stock(backup).get_tuple(_config("looked"))

    assert main(["migrate", str(shared), "--thread", "billing-42", "--json"]) == 0  # asked
    report = json.loads(capsys.readouterr().out)
    assert report["moved"] == {"billing-42": 3} and report["left"] == {}
    assert _billing(sqlite_saver(shared)).get_state(BILLING).values == {"charges": [5, 1]}
    assert main(["migrate", str(shared)]) == 0
    assert capsys.readouterr().err == (
        f"nothing to migrate: {shared} holds no rows in LangGraph's tables\n"
    )


def test_a_busy_file_is_refused_after_the_timeout_and_left_unchanged(
    shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    billing = _billing_rows(shared)
    with closing(sqlite3.connect(shared, isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        assert main(["migrate", str(shared), "--busy-timeout", "0.2"]) == 1
        writer.execute("ROLLBACK")
    err = capsys.readouterr().err
    assert err.startswith(f"ferry: {shared} is busy: another process held its write lock")
    assert "nothing was changed" in err and err.count("\n") == 1
    assert list(shared.parent.glob("*before-migrate*")) == []
    assert _billing_rows(shared) == billing and _stock(shared).get_tuple(_config("looked"))
    tables = {row[0] for row in _stock(shared).conn.execute("SELECT name FROM sqlite_master")}
    assert "ferry_steps" not in tables


@pytest.mark.parametrize("case", ["missing", "read-only", "not sqlite"])
def test_a_file_migrate_cannot_convert_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    path = tmp_path / "f.db"
    if case == "read-only":
        stock = _stock(path)
        _ferry_threads(stock)
        stock.conn.close()  # its WAL into the file now, not when collected later
        path.chmod(0o444)
    elif case == "not sqlite":
        path.write_text("notes, not a database\n" * 100)
    before = path.read_bytes() if path.exists() else None
    try:
        assert main(["migrate", str(path)]) == 1
    finally:
        if path.exists():
            path.chmod(0o644)
    # The last line: a stock saver's cost may be logged before it (making the read-only file).
    err = capsys.readouterr().err.splitlines()[-1]
    expected = {
        "missing": "no such file",
        "read-only": "is read-only",
        "not sqlite": "not a SQLite",
    }
    assert err.startswith(f"ferry: {path}") and expected[case] in err
    assert (path.read_bytes() if path.exists() else None) == before


_HOLD_INSIDE = """
import sys
from pathlib import Path
from graph.storage.sqlite.migration import migrate

def hold(thread_id, checkpoints):
    print("inside", thread_id, flush=True)
    sys.stdin.read()  # until killed: the transaction is open, the rows moved

migrate(Path(sys.argv[1]), on_thread=hold)
"""


def test_a_migration_killed_inside_its_transaction_leaves_the_file_as_before(
    shared: Path,
) -> None:
    before = {t: _state(_stock(shared), t) for t in ("looked", "paused")}
    billing = _billing_rows(shared)
    with subprocess.Popen(
        [sys.executable, "-c", _HOLD_INSIDE, str(shared)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == "inside looked\n"  # every row moved, not committed
        process.send_signal(signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    assert {t: _state(_stock(shared), t) for t in ("looked", "paused")} == before
    assert _billing_rows(shared) == billing
    tables = {row[0] for row in _stock(shared).conn.execute("SELECT name FROM sqlite_master")}
    assert not any(name.startswith("ferry_") for name in tables)  # created in it, rolled back

    report = migrate(shared)  # run again: as after
    assert report.moved == {"looked": 7, "paused": 3}
    assert {t: _state(sqlite_saver(shared), t) for t in ("looked", "paused")} == before


def test_a_ferry_file_exported_is_read_and_continued_by_the_stock_saver_then_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, out = tmp_path / "ferry.db", tmp_path / "stock.db"
    _ferry_threads(sqlite_saver(source))
    ferrys = {t: _state(sqlite_saver(source), t) for t in ("looked", "paused")}
    assert main(["export", str(source), "--to-langgraph", str(out)]) == 0
    assert capsys.readouterr().err == (
        f"wrote 2 threads (10 checkpoints, 19 writes) to {out}, for LangGraph's SqliteSaver\n"
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("stock")] == ["stock.db"]
    stock = _stock(out)
    assert {t: _state(stock, t) for t in ("looked", "paused")} == ferrys
    assert main(["export", str(source), "--to-langgraph", str(out)]) == 1  # never over a file
    assert "exists: export writes a new file" in capsys.readouterr().err

    # LangGraph's saver continues both: a new turn, and the approval answered.
    agent = _agent(stock, answer("still text"), answer("deleted"))
    turn = agent.invoke({"messages": [("user", "and now?")]}, _config("looked"))
    assert [m.content for m in turn["messages"]][-2:] == ["and now?", "still text"]
    resumed = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), _config("paused"))
    assert RUNS == ["peek a", "delete a"] and resumed["stop_reason"] == "answered"
    continued = {t: _state(_stock(out), t) for t in ("looked", "paused")}
    assert continued["looked"]["values"]["messages"][:4] == ferrys["looked"]["values"]["messages"]

    assert main(["migrate", str(out)]) == 0  # and back into Ferry's layout
    capsys.readouterr()
    assert {t: _state(sqlite_saver(out), t) for t in ("looked", "paused")} == continued


def test_reading_a_stock_file_tells_the_user_on_stderr_and_changes_nothing(
    shared: Path, tmp_path: Path
) -> None:
    billing = _billing_rows(shared)
    env = {**os.environ, "FERRY_DB": str(shared), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "graph.cli", "threads"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == ""
    notice = (
        f"{shared} holds 3 thread(s) in LangGraph's tables, which Ferry does not read; to "
        f"convert Ferry's: ferry migrate {shared}"
    )
    assert done.stderr.splitlines().count(notice) == 1
    assert _billing_rows(shared) == billing and _stock(shared).get_tuple(_config("looked"))
