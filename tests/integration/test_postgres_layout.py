"""Ferry's tables in Postgres: their layout version in `ferry_migrations`, checked at setup.

A database that Ferry 7f5a698 set up has Ferry's tables and no `ferry_migrations`: it is made
here the same way (today's setup, then the table dropped). A newer version is refused in one
line naming the database, by Python and by `ferry`, before anything is changed.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from graph.storage import DatabaseError
from graph.storage.postgres import layout_versions
from graph.storage.postgres.saver import LAYOUT_VERSION, open_postgres_saver, postgres_setup
from tests.support.cli_helpers import Ferry, ferry_env
from tests.support.pgserver import PostgresServer

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    return postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")


def recorded(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT v FROM ferry_migrations ORDER BY v")]


def started_calls(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [tuple(row) for row in conn.execute("SELECT * FROM ferry_started_calls")]


def test_a_new_database_records_the_current_version(database_url: str) -> None:
    postgres_setup(database_url)
    postgres_setup(database_url)  # a second setup records nothing more

    assert recorded(database_url) == [1] == list(range(1, LAYOUT_VERSION + 1))
    assert len(layout_versions.MIGRATIONS) == LAYOUT_VERSION


def test_the_migrations_are_imported_only_for_an_older_layout(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    postgres_setup(database_url)
    monkeypatch.delitem(sys.modules, "graph.storage.postgres.layout_versions")

    postgres_setup(database_url)

    assert "graph.storage.postgres.layout_versions" not in sys.modules


def test_a_database_of_the_release_keeps_its_rows_and_is_recorded_at_1(database_url: str) -> None:
    with open_postgres_saver(database_url) as saver:
        assert saver.first_start("t", "call-1")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE ferry_migrations")  # as Ferry 7f5a698 left it

    with open_postgres_saver(database_url) as saver:
        assert not saver.first_start("t", "call-1")  # the release's row, still there

    assert recorded(database_url) == [1] and started_calls(database_url) == [("t", "call-1")]


def test_a_database_of_a_newer_layout_is_refused_naming_it(
    database_url: str, cli: Ferry, tmp_path: Path
) -> None:
    postgres_setup(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO ferry_migrations VALUES (%s)", (LAYOUT_VERSION + 1,))
    name = database_url.rsplit("/", 1)[1]

    with pytest.raises(DatabaseError) as refused:
        postgres_setup(database_url)
    done = cli("threads", env=ferry_env(tmp_path, FERRY_DATABASE_URL=database_url), cwd=tmp_path)

    message = str(refused.value)
    assert message.startswith("database postgres ") and f"/{name} (FERRY_DATABASE_URL)" in message
    assert message.endswith(
        "Ferry's tables are at layout version 2, made by a newer Ferry; upgrade Ferry "
        "(this one knows versions up to 1)"
    )
    assert done.returncode == 1 and done.stderr.splitlines() == [f"ferry: {message}"]
    assert recorded(database_url) == [1, 2]
