"""A Postgres restart in the middle of `ferry ask`: Ferry's one line, never the driver's own.

The held Open-Meteo server holds the run inside its tool call while the server restarts, so
the run's next write meets a connection the restart ended.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.support.cli_helpers import ferry_env, start_ferry
from tests.support.held import HOLD_LIMIT_S, HeldForecastServer
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(180)


def ask_across_a_restart(
    server: PostgresServer, tmp_path: Path, **settings: str
) -> tuple[int, str, str]:
    """`ferry ask` a weather question, restart Postgres during its tool call; exit code, stderr."""
    url = server.create_database("ferry")
    thread_id = str(uuid.uuid4())
    with HeldForecastServer() as openmeteo:
        env = ferry_env(
            tmp_path, weather=openmeteo, FERRY_DATABASE_URL=url, FERRY_MODEL="offline", **settings
        )
        question = "what's the weather in Bogotá?"
        process = start_ferry("ask", question, "--thread", thread_id, env=env, cwd=tmp_path)
        try:
            assert openmeteo.forecast_arrived.wait(HOLD_LIMIT_S), "the forecast never came"
            server.restart()
        finally:
            openmeteo.release.set()
        _, err = process.communicate(timeout=120)
    return process.returncode, thread_id, err


def assert_only_ferrys_lines(err: str, thread_id: str, port: int) -> None:
    lines = err.splitlines()
    assert lines[:2] == [
        f"thread {thread_id}: new thread",
        '→ get_weather(city="Bogotá", units="celsius")',
    ], err
    assert re.fullmatch(r"✓ get_weather \d+ ms", lines[2]), err
    [failure] = lines[3:]  # one line, and no line of psycopg's before it
    assert failure.startswith(f"ferry: database postgres 127.0.0.1:{port}/ferry: "), err
    assert failure.endswith("; check FERRY_DATABASE_URL"), err


def test_a_postgres_restart_mid_run_is_one_line_of_ferrys(
    own_postgres_server: PostgresServer, tmp_path: Path
) -> None:
    code, thread_id, err = ask_across_a_restart(own_postgres_server, tmp_path)

    assert code == 1, err
    assert_only_ferrys_lines(err, thread_id, own_postgres_server.port)


def test_the_drivers_warning_goes_to_ferrys_log_file(
    own_postgres_server: PostgresServer, tmp_path: Path
) -> None:
    log_file = tmp_path / "logs" / "ferry.log"
    code, thread_id, err = ask_across_a_restart(
        own_postgres_server, tmp_path, FERRY_LOG_FILE=str(log_file)
    )

    assert code == 1, err
    assert_only_ferrys_lines(err, thread_id, own_postgres_server.port)
    logged = log_file.read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("warning psycopg: ") for line in logged), logged
