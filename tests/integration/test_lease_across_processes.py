"""The thread lease across processes: a `ferry` process refused, and Postgres's advisory lock."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from graph.builder import build_graph
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from graph.storage.postgres.saver import async_postgres_saver, open_postgres_saver
from graph.threads.lease import WAIT_FOR_THREAD, ThreadBusy, thread_lease
from tests.support.cli_helpers import ferry, ferry_env
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(120)
QUESTION = {"messages": [("user", "What is 2 + 3?")]}
CONFIG = {"configurable": {"thread_id": "t1"}}


def test_a_ferry_process_on_a_busy_thread_exits_1_with_one_line(tmp_path: Path) -> None:
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    settings = Settings(model="offline", db=tmp_path / "ferry.db")
    saver = sqlite_saver(settings.db)
    try:
        with thread_lease(saver, CONFIG, settings):
            done = ferry("ask", "What is 2 + 3?", "--thread", "t1", env=env, cwd=tmp_path)
    finally:
        saver.conn.close()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("ferry: thread t1 is busy: another run holds it (host ")
    assert f"pid {os.getpid()}" in done.stderr


# --- Postgres --------------------------------------------------------------------------------

HOLDER = """
import sys, time
from graph.threads.lease import thread_lease
from graph.core.settings import Settings
from graph.storage.postgres.saver import async_postgres_saver, open_postgres_saver
with open_postgres_saver(sys.argv[1]) as saver:
    with thread_lease(saver, {"configurable": {"thread_id": "t1"}}, Settings()):
        print("held", flush=True)
        time.sleep(60)
"""


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")


def test_postgres_refuses_a_second_run_while_the_lock_is_held(database_url: str) -> None:
    settings = Settings(model="offline", database_url=database_url)
    with open_postgres_saver(database_url) as holder, open_postgres_saver(database_url) as other:
        agent = build_graph(checkpointer=other, settings=settings)
        with thread_lease(holder, CONFIG, settings):
            with pytest.raises(ThreadBusy, match=rf"\(host \S+, pid {os.getpid()}, since "):
                agent.invoke(QUESTION, CONFIG)
            assert agent.invoke(QUESTION, {"configurable": {"thread_id": "t2"}})["stop_reason"]
        assert agent.invoke(QUESTION, CONFIG)["stop_reason"] == "answered"


def test_postgres_frees_the_lock_when_its_owner_is_killed(database_url: str) -> None:
    repo = Path(__file__).resolve().parents[2]
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), database_url],
        cwd=repo,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "held\n"
        settings = Settings(model="offline", database_url=database_url)
        with open_postgres_saver(database_url) as saver:
            agent = build_graph(checkpointer=saver, settings=settings)
            with pytest.raises(ThreadBusy, match=rf"pid {owner.pid}\b"):
                agent.invoke(QUESTION, CONFIG)
            os.kill(owner.pid, signal.SIGKILL)
            owner.wait(10)
            killed = time.monotonic()
            # The server notices the closed connection within moments, not a timeout later.
            waiting = {"configurable": {"thread_id": "t1", WAIT_FOR_THREAD: 5}}
            assert agent.invoke(QUESTION, waiting)["stop_reason"] == "answered"
            assert time.monotonic() - killed < 2
    finally:
        owner.kill()
        owner.communicate(timeout=10)


def test_the_servers_async_postgres_saver_takes_the_lease(database_url: str) -> None:
    settings = Settings(model="offline", database_url=database_url)

    async def run() -> None:
        async with async_postgres_saver(database_url) as saver:
            agent = build_graph(checkpointer=saver, settings=settings)
            with thread_lease(holder, CONFIG, settings):
                with pytest.raises(ThreadBusy):
                    await agent.ainvoke(QUESTION, CONFIG)
            assert (await agent.ainvoke(QUESTION, CONFIG))["stop_reason"] == "answered"

    with open_postgres_saver(database_url) as holder:
        asyncio.run(run())
