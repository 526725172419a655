"""The server shows each thread's status from its stored state (graph/server/registry.py).

The contract test calls `set_thread_status` on the dev server's in-memory runtime, the one
internal the sync relies on; the rest drives `RegistrySync` over a real SQLite file with a
client fake that records what the sync asked of the server.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.types import Command

from graph.server.registry import RegistrySync
from graph.server.versions import sqlite_versions
from graph.storage import sqlite_saver
from tests.support.fixtures import Agent
from tests.support.scripted import ScriptedModel, tool_call


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    ferry = sqlite_saver(tmp_path / "ferry.db")
    yield ferry
    ferry.conn.close()


def paused_state(call_id: str = "call_1") -> dict[str, Any]:
    """A thread state as the server returns it, paused on one approval."""
    pause = {"id": "i1", "value": {"action_requests": [{"tool_call_id": call_id}]}}
    return {
        "values": {"messages": [{"type": "human", "content": "delete a"}]},
        "next": ["check"],
        "tasks": [{"id": "t1", "name": "check", "interrupts": [pause]}],
        "checkpoint": {"thread_id": "x", "checkpoint_ns": "", "checkpoint_id": "c1"},
    }


def test_set_thread_status_shows_the_state_in_the_dev_servers_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LANGGRAPH_RUNTIME_EDITION", "inmem")  # as `langgraph dev` sets it
    from langgraph_runtime_inmem.database import connect

    from graph.server.thread_status import set_thread_status

    thread_id = uuid.uuid4()

    async def shown(state: dict[str, Any]) -> dict[str, Any]:
        await set_thread_status(str(thread_id), state)  # type: ignore[arg-type]
        async with connect() as conn:
            [thread] = [t for t in conn.store["threads"] if t["thread_id"] == thread_id]
            return dict(thread)

    async def scenario() -> None:
        async with connect() as conn:
            conn.store["threads"].append(
                {
                    "thread_id": thread_id,
                    "status": "idle",
                    "values": {},
                    "interrupts": {},
                    "metadata": {"graph_id": "agent"},
                }  # fmt: skip
            )
        try:
            thread = await shown(paused_state())
            assert thread["status"] == "interrupted"
            assert thread["interrupts"] == {"t1": [paused_state()["tasks"][0]["interrupts"][0]]}
            assert thread["values"] == paused_state()["values"]
            done = {**paused_state(), "next": [], "tasks": []}
            thread = await shown(done)
            assert (thread["status"], thread["interrupts"]) == ("idle", {})
        finally:
            async with connect() as conn:
                conn.store["threads"][:] = [
                    t for t in conn.store["threads"] if t["thread_id"] != thread_id
                ]

    asyncio.run(scenario())


class FakeThreads:
    """The threads client the sync uses: a registry in a dict, states by thread, calls recorded."""

    def __init__(self) -> None:
        self.registry: dict[str, dict[str, Any]] = {}
        self.read: list[str] = []
        self.unreadable: set[str] = set()

    async def search(self, *, limit: int, offset: int, select: list[str]) -> list[Any]:
        return list(self.registry.values())[offset : offset + limit]

    async def create(self, *, thread_id: str, if_exists: str, graph_id: str) -> None:
        self.registry.setdefault(
            thread_id,
            {"thread_id": thread_id, "metadata": {"graph_id": graph_id}, "status": "idle"},
        )

    async def delete(self, thread_id: str) -> None:
        del self.registry[thread_id]

    async def get_state(self, thread_id: str) -> dict[str, Any]:
        self.read.append(thread_id)
        if thread_id in self.unreadable:
            raise RuntimeError("unreadable")
        return {"next": ["check"], "tasks": [], "values": {}}


class Sync:
    """A `RegistrySync` on `db` whose status setter records each status it would show."""

    def __init__(self, db: Path) -> None:
        self.threads = FakeThreads()
        self.shown: list[tuple[str, list[str]]] = []
        client: Any = type("Client", (), {"threads": self.threads})()
        self.sync = RegistrySync(client, db, show_status=self.show)

    async def show(self, thread_id: str, state: Any) -> None:
        self.shown.append((thread_id, state["next"]))

    def once(self) -> list[tuple[str, list[str]]]:
        self.shown.clear()
        asyncio.run(self.sync.sync())
        return list(self.shown)


def test_a_status_is_shown_again_only_when_the_thread_changed(
    make_agent: Agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    script = [tool_call("calculator", expression="1 + 1"), "2", "hi", "you're welcome", "more"]
    graph = make_agent(ScriptedModel(script), approve_tools="calculator")

    def turn(thread_id: str, graph_input: Any) -> None:
        graph.invoke(graph_input, {"configurable": {"thread_id": thread_id}})

    turn(first, {"messages": [("user", "1 + 1?")]})
    sync = Sync(tmp_path / "ferry.db")
    assert sync.once() == [(first, ["check"])]  # registered, then shown as its state says
    assert sync.once() == []  # nothing changed: no request at all
    registry = sync.threads.registry

    turn(first, Command(resume={"decisions": [{"type": "approve"}]}))
    registry[first]["status"] = "busy"  # a server run, which sets the status when it ends
    assert sync.once() == []
    registry[first]["status"] = "idle"
    assert sync.once() == [(first, ["check"])]  # looked at again, since not shown then

    turn(second, {"messages": [("user", "hello")]})
    assert sync.once() == [(second, ["check"])]

    turn(first, {"messages": [("user", "thanks")]})
    registry[first]["status"] = "error"  # the server's own word on its run: kept
    assert sync.once() == []
    registry[first]["status"] = "idle"
    assert sync.once() == []
    assert sync.threads.read == [first, first, second]

    turn(first, {"messages": [("user", "and more?")]})
    sync.threads.unreadable.add(first)
    caplog.clear()  # the syncs' info lines above, kept when another test left "ferry" at INFO
    with caplog.at_level(logging.WARNING, logger="ferry.studio"):
        assert sync.once() == [] and sync.once() == []
    logged = [r.getMessage() for r in caplog.records if r.name == "ferry.studio"]
    assert logged == [f"could not show the status of thread {first}"]  # once per version


def test_a_pause_written_after_its_checkpoint_moves_the_version(
    saver: BaseCheckpointSaver[Any], tmp_path: Path
) -> None:
    assert sqlite_versions(tmp_path / "none.db") == {}
    config: Any = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    stored = saver.put(config, empty_checkpoint(), {"source": "loop", "step": 1}, {})
    before = sqlite_versions(tmp_path / "ferry.db")
    assert list(before) == ["t1"]
    saver.put_writes(stored, [("__interrupt__", ["paused"])], "task-1")
    after = sqlite_versions(tmp_path / "ferry.db")
    assert after["t1"] != before["t1"]
    assert after == sqlite_versions(tmp_path / "ferry.db")


def test_a_run_given_the_servers_run_id_logs_under_it(
    make_agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = uuid.uuid4()  # the server puts its run's id in the config
    graph = make_agent(ScriptedModel(["hi"]))
    config: Any = {"configurable": {"thread_id": "t1"}, "run_id": run_id}
    with caplog.at_level(logging.INFO, logger="ferry.loop"):
        graph.invoke({"messages": [("user", "hello")]}, config, context={"user_id": "u1"})
    logged = {getattr(r, "run_id", None) for r in caplog.records if r.name == "ferry.loop"}
    assert logged == {str(run_id)}
