"""One run at a time per thread: the lease in the thread's SQLite file (graph/threads/lease.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.builder import FerryGraph, build_graph
from graph.core.settings import Settings
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.leases.sqlite import LEASES_TABLE, process_start_token
from graph.threads.lease import WAIT_FOR_THREAD, ThreadBusy, thread_lease
from tests.support.cli_helpers import Ferry, ferry_env

QUESTION = {"messages": [("user", "What is 2 + 3?")]}
HOLD_S = 0.8


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(model="offline", db=tmp_path / "ferry.db", lease_timeout_s=30)


@pytest.fixture
def saver(settings: Settings) -> Iterator[FerrySaver]:
    opened = sqlite_saver(settings.db)
    opened.setup()
    yield opened
    opened.conn.close()


@pytest.fixture
def agent(saver: FerrySaver, settings: Settings) -> FerryGraph:
    return build_graph(checkpointer=saver, settings=settings)


def config(thread_id: str = "t1", **configurable: object) -> dict[str, object]:
    return {"configurable": {"thread_id": thread_id, **configurable}}


def leases(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        conn.execute(LEASES_TABLE)
        return conn.execute("SELECT thread_id, host, pid, heartbeat FROM ferry_leases").fetchall()


def plant_lease(db: Path, *, host: str, pid: int, token: str, heartbeat_age_s: float) -> None:
    """A lease row as another run would have left it."""
    now = time.time()
    with sqlite3.connect(db) as conn:
        conn.execute(LEASES_TABLE)
        conn.execute(
            "INSERT INTO ferry_leases VALUES (?, ?, ?, ?, ?, ?, ?)",
            ("t1", "someone-else", host, pid, token, now - 60, now - heartbeat_age_s),
        )


def dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def held_in_background(saver: FerrySaver, settings: Settings, seconds: float) -> threading.Thread:
    taken = threading.Event()

    def hold() -> None:
        with thread_lease(saver, config(), settings):
            taken.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(10)
    return holder


def test_a_held_thread_refuses_a_second_run_at_once_in_one_line(
    agent: FerryGraph, saver: FerrySaver, settings: Settings
) -> None:
    agent.invoke(QUESTION, config())
    stored = len(agent.get_state(config()).values["messages"])
    with thread_lease(saver, config(), settings):
        started = time.monotonic()
        with pytest.raises(ThreadBusy) as busy:
            agent.invoke({"messages": [("user", "What is 4 + 4?")]}, config())
        assert time.monotonic() - started < 1
    message = str(busy.value)
    assert "\n" not in message
    assert message.startswith("thread t1 is busy: another run holds it (host ")
    assert f"pid {os.getpid()}, since " in message and "UTC" in message
    assert busy.value.holder.host == socket.gethostname()
    assert len(agent.get_state(config()).values["messages"]) == stored  # nothing of it stored
    assert leases(settings.db) == []
    assert agent.invoke({"messages": [("user", "What is 4 + 4?")]}, config())["stop_reason"]


def test_other_threads_run_while_one_is_held(
    agent: FerryGraph, saver: FerrySaver, settings: Settings
) -> None:
    with thread_lease(saver, config(), settings):
        assert agent.invoke(QUESTION, config("t2"))["stop_reason"] == "answered"


def test_every_entry_point_takes_the_lease(
    agent: FerryGraph, saver: FerrySaver, settings: Settings
) -> None:
    async def run_async() -> None:
        with pytest.raises(ThreadBusy):
            await agent.ainvoke(QUESTION, config())
        with pytest.raises(ThreadBusy):
            async for _ in agent.astream_events(QUESTION, config(), version="v2"):
                pass

    with thread_lease(saver, config(), settings):
        with pytest.raises(ThreadBusy):
            list(agent.stream(QUESTION, config()))
        with pytest.raises(ThreadBusy):
            agent.invoke(None, config())
        asyncio.run(run_async())


def test_waiting_runs_once_the_holder_is_done(
    agent: FerryGraph, saver: FerrySaver, settings: Settings
) -> None:
    holder = held_in_background(saver, settings, HOLD_S)
    started = time.monotonic()
    result = agent.invoke(QUESTION, config(**{WAIT_FOR_THREAD: True}))
    assert result["stop_reason"] == "answered"
    assert time.monotonic() - started >= HOLD_S / 2
    holder.join()


def test_waiting_is_bounded(agent: FerryGraph, saver: FerrySaver, settings: Settings) -> None:
    with thread_lease(saver, config(), settings):
        started = time.monotonic()
        with pytest.raises(ThreadBusy, match="is busy after waiting"):
            agent.invoke(QUESTION, config(**{WAIT_FOR_THREAD: 0.3}))
        assert 0.2 < time.monotonic() - started < 2


def test_the_lease_is_released_however_the_run_ends(agent: FerryGraph, settings: Settings) -> None:
    stream = agent.stream(QUESTION, config(), stream_mode="updates")
    next(stream)
    assert [row[0] for row in leases(settings.db)] == ["t1"]
    stream.close()  # a client that stops reading
    assert leases(settings.db) == []

    async def abandon() -> None:
        parts = agent.astream(QUESTION, config(), stream_mode="updates")
        await anext(parts)
        assert [row[0] for row in leases(settings.db)] == ["t1"]
        await parts.aclose()  # type: ignore[attr-defined]  # an async generator

    asyncio.run(abandon())
    assert leases(settings.db) == []
    with pytest.raises(RuntimeError), thread_lease(agent.checkpointer, config(), settings):
        raise RuntimeError("the run failed")
    assert leases(settings.db) == []


def test_a_dead_owners_lease_is_taken_over_at_once(agent: FerryGraph, settings: Settings) -> None:
    token = process_start_token(os.getpid()) or ""
    plant_lease(
        settings.db, host=socket.gethostname(), pid=dead_pid(), token=token, heartbeat_age_s=0
    )
    assert agent.invoke(QUESTION, config())["stop_reason"] == "answered"
    assert leases(settings.db) == []


@pytest.mark.skipif(process_start_token(os.getpid()) is None, reason="needs /proc")
def test_a_reused_pid_does_not_keep_a_lease(agent: FerryGraph, settings: Settings) -> None:
    # This process's pid, but recorded by an earlier process that had it.
    plant_lease(
        settings.db, host=socket.gethostname(), pid=os.getpid(), token="x:1", heartbeat_age_s=0
    )
    assert agent.invoke(QUESTION, config())["stop_reason"] == "answered"


def test_another_hosts_lease_holds_until_its_heartbeat_expires(
    agent: FerryGraph, settings: Settings
) -> None:
    # Its pid means nothing here: only the heartbeat tells whether it lives.
    plant_lease(settings.db, host="elsewhere", pid=dead_pid(), token="", heartbeat_age_s=5)
    with pytest.raises(ThreadBusy, match=r"host elsewhere, pid \d+"):
        agent.invoke(QUESTION, config())
    with sqlite3.connect(settings.db) as conn:
        conn.execute(
            "UPDATE ferry_leases SET heartbeat = heartbeat - ?", (settings.lease_timeout_s,)
        )
    assert agent.invoke(QUESTION, config())["stop_reason"] == "answered"


def test_a_live_run_keeps_its_lease_beyond_the_timeout(
    saver: FerrySaver, settings: Settings
) -> None:
    quick = settings.model_copy(update={"lease_timeout_s": 0.3})  # a heartbeat every 0.1 s
    with thread_lease(saver, config(), quick):
        first = leases(settings.db)[0][3]
        time.sleep(1.0)
        assert leases(settings.db)[0][3] > first  # type: ignore[operator]  # REAL column
        with pytest.raises(ThreadBusy):
            with thread_lease(saver, config(), quick):
                pass


def test_a_saver_in_memory_takes_no_lease(settings: Settings) -> None:
    memory = FerrySaver(sqlite3.connect(":memory:", check_same_thread=False))
    with thread_lease(memory, config(), settings), thread_lease(memory, config(), settings):
        pass


# --- the CLI -------------------------------------------------------------------------------


def test_the_cli_refuses_a_busy_thread_in_one_line_and_waits_with_wait(
    cli: Ferry, tmp_path: Path, saver: FerrySaver, settings: Settings
) -> None:
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    with thread_lease(saver, config(), settings):
        done = cli("ask", "What is 2 + 3?", "--thread", "t1", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ferry: thread t1 is busy: another run holds it")
    assert f"pid {os.getpid()}" in lines[0]

    holder = held_in_background(saver, settings, HOLD_S)
    done = cli("ask", "What is 2 + 3?", "--thread", "t1", "--wait", env=env, cwd=tmp_path)
    holder.join()
    assert (done.returncode, done.stdout) == (0, "`2 + 3` = 5\n"), done.stderr
