"""Fixtures shared by the integration tests: one PostgreSQL server for the session, MCP sessions
closed after each test that opens them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pgserver import REQUIRED, PostgresServer, find_bin_dir


def _installed_bin_dir() -> Path:
    """The server's tools; skips (or fails under CI) without an installation."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = (
            "no PostgreSQL server to test against: initdb is neither on PATH nor under "
            "/usr/lib/postgresql/*/bin (install the `postgresql` package; .ci/run does)"
        )
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    return bin_dir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway server on loopback, shared by the session's tests."""
    server = PostgresServer.start(_installed_bin_dir())
    yield server
    server.stop()


@pytest.fixture
def own_postgres_server() -> Iterator[PostgresServer]:
    """A throwaway server of this test's own, which it may restart."""
    server = PostgresServer.start(_installed_bin_dir())
    yield server
    server.stop()


@pytest.fixture
def mcp_sessions_closed() -> Iterator[None]:
    """Each test starts its own MCP servers (in-process CLI runs too): all exit at its end."""
    from tools.mcp import close_sessions

    yield
    close_sessions()
