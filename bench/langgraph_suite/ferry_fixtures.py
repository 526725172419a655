"""Ferry's savers as options of LangGraph's own checkpointer fixtures.

`run.sh` appends a few lines to the extracted `tests/conftest.py` of LangGraph that make the two
generator functions below its `sync_checkpointer` and `async_checkpointer` fixtures (a later name
in a conftest wins) and import the hooks. (This file does not import pytest, a dev dependency of
Ferry's: the conftest applies `pytest.fixture`.) The stock options (`memory`, `sqlite`,
`sqlite_aio`, `postgres`, ...) still come from LangGraph's own `tests/conftest_checkpointer.py`,
unchanged, as the baseline.

Options, chosen with `FERRY_LG_SYNC` and `FERRY_LG_ASYNC` (comma-separated):

    ferry            sync   `graph.storage.sqlite_saver(tmp)`: FerrySaver on a file
    ferry_aio        async  the same FerrySaver, through its async side (its `a…` methods)
    ferry_server     async  `graph.server.checkpointer.checkpointer()` with FERRY_DB=tmp
    ferry_pg         sync   `graph.storage.postgres.saver.open_postgres_saver(url)`
    ferry_server_pg  async  `graph.server.checkpointer.checkpointer()` with FERRY_DATABASE_URL
    <anything else>         LangGraph's `_checkpointer_<name>` from tests/conftest_checkpointer.py

Postgres options (Ferry's and LangGraph's) share one throwaway server per pytest worker, started by
Ferry's `tests/support/pgserver.py`, with a new database for each test.

Only tests that take one of the two fixtures are kept; each report carries the option it ran on
(`lg_saver`) and a key naming the test without it (`lg_key`); the controller writes them as JSON
lines to `FERRY_LG_REPORT` for `summarize.py`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
import tempfile
import unittest
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

SAVER_FIXTURES = ("sync_checkpointer", "async_checkpointer")
PGSERVER = Path(
    os.environ.get(
        "FERRY_PGSERVER", Path(__file__).resolve().parents[2] / "tests" / "support" / "pgserver.py"
    )
)
SYNC = [s for s in os.environ.get("FERRY_LG_SYNC", "sqlite,ferry").split(",") if s]
ASYNC = [s for s in os.environ.get("FERRY_LG_ASYNC", "sqlite_aio,ferry_aio").split(",") if s]
REPORT = os.environ.get("FERRY_LG_REPORT")


def _stock(name: str) -> Any:
    """LangGraph's own context manager for option `name` (its conftest_checkpointer)."""
    from tests import conftest_checkpointer  # LangGraph's `tests`, not Ferry's

    return getattr(conftest_checkpointer, f"_checkpointer_{name}")


# --- one Postgres server per worker -------------------------------------------------------------

_server: Any = None


def _pgserver() -> Any:
    """Ferry's tests/support/pgserver.py, loaded by path (`tests` here is LangGraph's package)."""
    spec = importlib.util.spec_from_file_location("ferry_pgserver", PGSERVER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _postgres() -> Any:
    """The worker's server, started on first use; LangGraph's fixtures are pointed at it too."""
    global _server
    if _server is None:
        pgserver = _pgserver()
        bin_dir = pgserver.find_bin_dir()
        if bin_dir is None:
            raise unittest.SkipTest("no PostgreSQL server installed (initdb, pg_ctl)")
        _server = pgserver.PostgresServer.start(bin_dir)
        from tests import conftest_checkpointer

        conftest_checkpointer.DEFAULT_POSTGRES_URI = f"{_server.url('')}"
    return _server


def pytest_unconfigure(config: Any) -> None:
    if _server is not None:
        _server.stop()


@contextmanager
def _database() -> Iterator[str]:
    """A new database on the worker's server, dropped afterwards."""
    server = _postgres()
    # Not uuid.uuid4: tests patch it (`deterministic_uuids`) and count the ids it gives.
    name = f"ferry_{secrets.token_hex(8)}"
    url = server.create_database(name)
    try:
        yield url
    finally:
        import psycopg

        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- Ferry's savers --------------------------------------------------------------------------


@contextmanager
def _ferry() -> Iterator[Any]:
    from graph.storage import sqlite_saver

    with tempfile.TemporaryDirectory(prefix="ferry-lg-") as tmp:
        saver = sqlite_saver(Path(tmp) / "ferry.db")
        try:
            yield saver
        finally:
            with saver.lock:
                saver.conn.close()


@asynccontextmanager
async def _ferry_aio() -> AsyncIterator[Any]:
    with _ferry() as saver:
        yield saver


@asynccontextmanager
async def _server_saver(**env: str) -> AsyncIterator[Any]:
    """The LangGraph server's saver (`langgraph.json` names it), on the settings in `env`."""
    from graph.server.checkpointer import checkpointer

    names = ("FERRY_DB", "FERRY_DATABASE_URL")
    before = {name: os.environ.get(name) for name in names}
    for name in names:
        os.environ.pop(name, None)
    os.environ.update(env)
    try:
        async with checkpointer() as saver:
            yield saver
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@asynccontextmanager
async def _ferry_server() -> AsyncIterator[Any]:
    with tempfile.TemporaryDirectory(prefix="ferry-lg-") as tmp:
        async with _server_saver(FERRY_DB=str(Path(tmp) / "ferry.db")) as saver:
            yield saver


@contextmanager
def _ferry_pg() -> Iterator[Any]:
    from graph.storage.postgres.saver import open_postgres_saver

    with _database() as url, open_postgres_saver(url) as saver:
        yield saver


@asynccontextmanager
async def _ferry_server_pg() -> AsyncIterator[Any]:
    with _database() as url:
        async with _server_saver(FERRY_DATABASE_URL=url) as saver:
            yield saver


SYNC_FERRY = {"ferry": _ferry, "ferry_pg": _ferry_pg}
ASYNC_FERRY = {
    "ferry_aio": _ferry_aio,
    "ferry_server": _ferry_server,
    "ferry_server_pg": _ferry_server_pg,
}


# --- the two fixtures, replacing LangGraph's (the conftest applies `pytest.fixture`) -------------


def sync_checkpointer(request: Any) -> Iterator[Any]:
    name = request.param
    if name in SYNC_FERRY:
        opened = SYNC_FERRY[name]()
    else:
        if name.startswith("postgres"):
            _postgres()
        opened = _stock(name)()
    with opened as saver:
        yield saver


async def async_checkpointer(request: Any) -> AsyncIterator[Any]:
    name = request.param
    if name in ASYNC_FERRY:
        async with ASYNC_FERRY[name]() as saver:
            yield saver
        return
    if name.startswith("postgres"):
        _postgres()
    opened = _stock(name)()
    if hasattr(opened, "__aenter__"):
        async with opened as saver:
            yield saver
    else:
        with opened as saver:  # `memory` is a sync context manager in the async fixture too
            yield saver


# --- keep the tests that run on a saver; label their reports ---------------------------------


def _saver_of(item: Any) -> tuple[str, str] | None:
    params = getattr(getattr(item, "callspec", None), "params", {})
    for fixture in SAVER_FIXTURES:
        if fixture in params:
            return fixture, str(params[fixture])
    return None


def _key_of(item: Any, saver: str) -> str:
    """The test without its saver: its node id with the saver's part of the id left out."""
    callspec = item.callspec
    ids = list(getattr(callspec, "_idlist", callspec.id.split("-")))
    if saver in ids:
        ids.remove(saver)
    return f"{item.nodeid.split('[')[0]}[{'-'.join(ids)}]"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Keep the tests that run on a saver, labelled (the labels go into each of their reports)."""
    kept, dropped = [], []
    for item in items:
        found = _saver_of(item)
        if found is None:
            dropped.append(item)
            continue
        fixture, saver = found
        item.user_properties.append(("lg_saver", saver))
        side = "sync" if fixture == SAVER_FIXTURES[0] else "async"
        item.user_properties.append(("lg_side", side))
        item.user_properties.append(("lg_key", _key_of(item, saver)))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_runtest_logreport(report: Any) -> None:
    """On the controller (or the only process): one JSON line per phase that did not pass."""
    if REPORT is None or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    props = dict(report.user_properties)
    if "lg_saver" not in props:
        return
    if report.when != "call" and report.passed:
        return
    line = {
        "nodeid": report.nodeid,
        "when": report.when,
        "outcome": report.outcome,
        "saver": props["lg_saver"],
        "side": props["lg_side"],
        "key": props["lg_key"],
        "crash": _crash(report),
        "xfail": hasattr(report, "wasxfail"),
        "duration": round(report.duration, 3),
    }
    with open(REPORT, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def _crash(report: Any) -> str | None:
    """The line that says why it failed or was skipped."""
    if report.passed:
        return None
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2])
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)[:2000]
    return str(report.longrepr).strip().splitlines()[-1][:2000] if report.longrepr else None


__all__ = [
    "async_checkpointer",
    "pytest_collection_modifyitems",
    "pytest_runtest_logreport",
    "pytest_unconfigure",
    "sync_checkpointer",
]
