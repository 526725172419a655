"""Double-texting with `multitask_strategy="rollback"` through `langgraph dev`, as clients send it.

A first question is held inside its weather call (the loopback Open-Meteo answers only when
the test lets it); a second question arrives with `rollback`. The server cancels the first
run and deletes it through the saver's `adelete_for_runs`: nothing of it may stay (its
checkpoints, its question, its tool call), the second run's answer is stored as a whole
conversation, `ferry history` and `ferry threads` read it, and the thread goes on. On the
SQLite saver and on the Postgres one.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.langgraph_dev import langgraph_dev
from tests.support.pgserver import PostgresServer
from tests.support.servers.base import Reply, Request
from tests.support.servers.openmeteo import OpenMeteoServer

pytestmark = pytest.mark.timeout(300)
EARLIER = "what is 1 + 1"
FIRST = "what is the weather in Madrid"
SECOND = "what is 6 * 7"
THIRD = "what is 2 + 3"


class HeldWeather(OpenMeteoServer):
    """Open-Meteo whose geocoding answers only once `release` is set; `asked` says it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()
        self.release = threading.Event()

    def handle(self, request: Request) -> Reply:
        if request.path == "/v1/search":
            self.asked.set()
            self.release.wait()
        return super().handle(request)

    def __exit__(self, *exc: object) -> None:
        self.release.set()  # a test that failed before releasing it must not hang here
        super().__exit__(*exc)


def _question(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _turn(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each message's type and the text or tool a person would see of it."""
    shown = []
    for message in messages:
        calls = message.get("tool_calls") or []
        shown.append((message["type"], ",".join(c["name"] for c in calls) or message["content"]))
    return shown


def _rolled_back(client: SyncLangGraphClient, weather: HeldWeather) -> tuple[str, str]:
    """A thread whose held run was rolled back by a second; its id and the held run's.

    The thread has an earlier turn: a run that continues a thread stores its question on the
    checkpoint it starts from (on a new thread, in its own first checkpoint).
    """
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "agent", input=_question(EARLIER))
    first = client.runs.create(thread_id, "agent", input=_question(FIRST))
    weather.asked.wait()  # the first run is inside get_weather: its question is stored
    stored = client.threads.get_history(thread_id, limit=100)
    assert any(step["metadata"].get("run_id") == first["run_id"] for step in stored)
    second = client.runs.create(
        thread_id, "agent", input=_question(SECOND), multitask_strategy="rollback"
    )
    weather.release.set()  # the cancelled call may now return: nothing must store its result
    client.runs.join(thread_id, second["run_id"])
    assert client.runs.get(thread_id, second["run_id"])["status"] == "success"
    return thread_id, first["run_id"]


def _check_rolled_back(
    client: SyncLangGraphClient,
    thread_id: str,
    first_run: str,
    cli: Ferry,
    env: dict[str, str],
    cwd: Path,
) -> None:
    runs = [run["run_id"] for run in client.runs.list(thread_id)]
    assert first_run not in runs
    steps = client.threads.get_history(thread_id, limit=100)
    assert steps and all(step["metadata"].get("run_id") != first_run for step in steps)
    assert FIRST not in json.dumps(steps)
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    assert _turn(messages)[:3] == [("human", EARLIER), ("ai", "calculator"), ("tool", "2")]
    assert _turn(messages)[4:7] == [("human", SECOND), ("ai", "calculator"), ("tool", "42")]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"] * 2
    assert "42" in messages[7]["content"]

    history = one_json_object(succeeded(cli("history", "--thread", thread_id, "--json",
                                            env=env, cwd=cwd)))  # fmt: skip
    roles = [(m["role"], m["content"]) for m in history["messages"]]
    assert [r for r, _ in roles] == ["user", "assistant", "tool", "assistant"] * 2
    assert roles[4] == ("user", SECOND) and roles[6] == ("tool", "42")
    listed = one_json_object(succeeded(cli("threads", "--json", env=env, cwd=cwd)))["threads"]
    assert [(t["thread_id"], t["messages"]) for t in listed] == [(thread_id, 8)]

    third = client.runs.wait(thread_id, "agent", input=_question(THIRD))
    assert _turn(third["messages"])[8:11] == [("human", THIRD), ("ai", "calculator"), ("tool", "5")]
    assert _turn(third["messages"])[:8] == _turn(messages)
    assert len(third["messages"]) == 12
    history = one_json_object(succeeded(cli("history", "--thread", thread_id, "--json",
                                            env=env, cwd=cwd)))  # fmt: skip
    asked = [m["content"] for m in history["messages"] if m["role"] == "user"]
    assert asked == [EARLIER, SECOND, THIRD]


def _server_env(tmp_path: Path, weather: HeldWeather, **settings: str) -> dict[str, str]:
    return ferry_env(
        tmp_path,
        weather=weather,
        FERRY_MODEL="offline",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="true",
        **settings,
    )


# The cancelled run's task ends in CancelledError, which the server logs as it rolls back.
_CANCELLED = ("asyncio.exceptions.CancelledError", "CancelledError")


def test_rollback_deletes_the_first_run_on_the_sqlite_saver(cli: Ferry, tmp_path: Path) -> None:
    with HeldWeather() as weather:
        env = _server_env(tmp_path, weather)
        with langgraph_dev(tmp_path, env, expected_errors=_CANCELLED) as client:
            thread_id, first_run = _rolled_back(client, weather)
            _check_rolled_back(client, thread_id, first_run, cli, env, tmp_path)


def test_rollback_deletes_the_first_run_on_the_postgres_saver(
    cli: Ferry, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.create_database(f"rollback_{uuid.uuid4().hex[:12]}")
    with HeldWeather() as weather:
        env = _server_env(tmp_path, weather, FERRY_DATABASE_URL=url)
        with langgraph_dev(tmp_path, env, expected_errors=_CANCELLED) as client:
            thread_id, first_run = _rolled_back(client, weather)
            _check_rolled_back(client, thread_id, first_run, cli, env, tmp_path)
