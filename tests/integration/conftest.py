"""Fixtures shared by the integration tests: one PostgreSQL server for the session, MCP sessions
closed after each test that opens them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.pgserver import REQUIRED, PostgresServer, find_bin_dir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway server on loopback; skips (or fails under CI) without an installation."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        reason = (
            "no PostgreSQL server to test against: initdb is neither on PATH nor under "
            "/usr/lib/postgresql/*/bin (install the `postgresql` package; .ci/run does)"
        )
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    server = PostgresServer.start(bin_dir)
    yield server
    server.stop()


@pytest.fixture
def mcp_sessions_closed() -> Iterator[None]:
    """Each test starts its own MCP servers (in-process CLI runs too): all exit at its end."""
    from tools.mcp import close_sessions

    yield
    close_sessions()
