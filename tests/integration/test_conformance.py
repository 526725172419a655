"""LangGraph's checkpointer conformance suite against every Ferry saver.

langgraph-checkpoint-conformance drives a saver through its async methods. The sync savers
(FerrySaver, FerryPostgresSaver) are driven through `SyncDriven`, which runs each sync method
in a worker thread and declares only the capabilities the saver itself implements, so the
suite detects the same capabilities it would on the saver. The server's SQLite saver is a
`FerrySaver` too, opened as the server opens it: the suite then drives its own async methods
(`graph.storage.sqlite.saver`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer

from graph.server import checkpointer as server_checkpointer
from graph.storage.codec.serde import serializer
from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver, connect
from graph.storage.sqlite.saver import FerrySaver
from graph.storage.sqlite.saver import connect as sqlite_connect
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(300)
_ASYNC_OF_SYNC = {
    "aput": "put",
    "aput_writes": "put_writes",
    "aget_tuple": "get_tuple",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
}


def sync_driven(saver: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """`saver` behind async methods that run its sync ones in a worker thread."""

    def forward(sync_name: str) -> Callable[..., Any]:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(getattr(saver, sync_name), *args, **kwargs)

        return method

    async def alist(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in await asyncio.to_thread(lambda: list(saver.list(*args, **kwargs))):
            yield item

    methods: dict[str, Any] = {"alist": alist}
    for async_name, sync_name in _ASYNC_OF_SYNC.items():
        if getattr(type(saver), sync_name) is not getattr(BaseCheckpointSaver, sync_name):
            methods[async_name] = forward(sync_name)
    driven = type(f"SyncDriven{type(saver).__name__}", (BaseCheckpointSaver,), methods)
    wrapper: BaseCheckpointSaver[Any] = driven(serde=saver.serde)
    wrapper.get_next_version = saver.get_next_version  # type: ignore[method-assign]
    return wrapper


def _report(registered: RegisteredCheckpointer) -> dict[str, Any]:
    report = asyncio.run(validate(registered))
    counts = {"passed": 0, "failed": 0, "failures": []}
    for capability, result in report.results.items():
        counts["passed"] += result.tests_passed
        counts["failed"] += result.tests_failed
        counts["failures"] += [f"{capability}: {f}" for f in result.failures]
    counts["detected"] = sorted(c for c, r in report.results.items() if r.detected)
    return counts


def _assert_conforms(registered: RegisteredCheckpointer, detected: set[str]) -> None:
    counts = _report(registered)
    assert counts["failures"] == [], "\n".join(counts["failures"])
    assert set(counts["detected"]) >= detected, counts["detected"]
    assert counts["passed"] > 0


_BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}


def test_ferry_saver_conforms(tmp_path: Path) -> None:
    @checkpointer_test(name=f"FerrySaver-{uuid.uuid4().hex[:6]}")
    async def ferry_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        saver = FerrySaver(sqlite_connect(tmp_path / f"{uuid.uuid4().hex}.db"))
        yield sync_driven(saver)
        saver.conn.close()

    _assert_conforms(ferry_saver, _BASE | {"prune", "delete_for_runs"})


def test_the_servers_saver_conforms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    @checkpointer_test(name=f"ServerFerrySaver-{uuid.uuid4().hex[:6]}")
    async def server_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        monkeypatch.setenv("FERRY_DB", str(tmp_path / f"{uuid.uuid4().hex}.db"))
        async with server_checkpointer.checkpointer() as saver:
            assert isinstance(saver, FerrySaver)  # its own async methods, not `sync_driven`
            yield saver

    _assert_conforms(server_saver, _BASE | {"prune", "delete_for_runs"})


def test_the_postgres_savers_conform(postgres_server: PostgresServer) -> None:
    def database() -> str:
        return postgres_server.create_database(f"conf_{uuid.uuid4().hex[:12]}")

    @checkpointer_test(name=f"FerryPostgresSaver-{uuid.uuid4().hex[:6]}")
    async def sync_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        conn = connect(database())
        saver = FerryPostgresSaver(conn)
        saver.setup()
        yield sync_driven(saver)
        conn.close()

    @checkpointer_test(name=f"AsyncFerryPostgresSaver-{uuid.uuid4().hex[:6]}")
    async def async_saver() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with AsyncFerryPostgresSaver.from_conn_string(database()) as saver:
            saver.serde = serializer()
            await saver.setup()
            yield saver

    _assert_conforms(sync_saver, _BASE | {"prune", "delete_for_runs"})
    _assert_conforms(async_saver, _BASE | {"prune", "delete_for_runs"})
