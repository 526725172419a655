"""Memory from the command line, on SQLite and on Postgres: `ferry ask` remembers in one thread
and recalls in another, `ferry memory list` shows it, `forget` removes it; each user their own."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.pgserver import PostgresServer


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    settings = {"FERRY_MODEL": "offline", "FERRY_USER": "ada"}
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        settings["FERRY_DATABASE_URL"] = server.create_database(f"mem_{uuid.uuid4().hex[:12]}")
    return ferry_env(tmp_path, **settings)


def test_remembered_in_one_thread_recalled_in_another_until_forgotten(
    cli: Ferry, tmp_path: Path, env: dict[str, str]
) -> None:
    said = succeeded(cli("ask", "remember that my dog is called Rex", env=env, cwd=tmp_path))
    assert said.stdout.startswith("Remembered (")
    listed = one_json_object(cli("memory", "list", "--json", env=env, cwd=tmp_path))
    [memory] = listed["memories"]
    assert (listed["user"], memory["fact"]) == ("ada", "my dog is called Rex")

    asked = succeeded(cli("ask", "what do you remember about dogs?", env=env, cwd=tmp_path))
    assert asked.stdout == "Remembered: Nothing remembered matches.\n"  # "dogs" is not "dog"
    asked = succeeded(cli("ask", "what do you remember?", env=env, cwd=tmp_path))
    assert asked.stdout == "Remembered: - my dog is called Rex\n"

    other = {**env, "FERRY_USER": "grace"}
    assert (
        one_json_object(cli("memory", "list", "--json", env=other, cwd=tmp_path))["memories"] == []
    )

    unknown = cli("memory", "forget", "nope", memory["id"], env=env, cwd=tmp_path)
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines() == [
        "forgot 1 memory",
        "ferry: no memory nope for ada (see ferry memory list)",
    ]
    asked = succeeded(cli("ask", "what do you remember?", env=env, cwd=tmp_path))
    assert asked.stdout == "Remembered: Nothing is remembered yet.\n"
    usage = cli("memory", "forget", env=env, cwd=tmp_path)
    assert usage.returncode == 2
