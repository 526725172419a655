"""Time travel from the command line, on SQLite and on Postgres: `ferry history --checkpoints`,
`ferry fork`, `ferry undo`, with the offline model; the thread as `ferry history` shows it."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.pgserver import PostgresServer


@pytest.fixture(params=["sqlite", "postgres"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    settings = {"FERRY_MODEL": "offline", "FERRY_APPROVE_TOOLS": "calculator"}
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        url = server.create_database(f"travel_{uuid.uuid4().hex[:12]}")
        settings["FERRY_DATABASE_URL"] = url
    return ferry_env(tmp_path, **settings)


def said(cli: Ferry, env: dict[str, str], cwd: Path, thread_id: str) -> list[str]:
    """The thread's messages as `ferry history --json` gives them: role and text."""
    done = succeeded(cli("history", "--thread", thread_id, "--json", env=env, cwd=cwd))
    return [f"{m['role']}: {m['content']}" for m in one_json_object(done)["messages"]]


def listed(cli: Ferry, env: dict[str, str], cwd: Path, thread_id: str) -> list[dict[str, str]]:
    done = cli("history", "--thread", thread_id, "--checkpoints", "--json", env=env, cwd=cwd)
    return list(one_json_object(succeeded(done))["checkpoints"])


def test_undo_then_fork_the_undone_turn_back(
    cli: Ferry, tmp_path: Path, env: dict[str, str]
) -> None:
    free = {**env, "FERRY_APPROVE_TOOLS": ""}
    succeeded(cli("ask", "--thread", "t1", "what time is it in Tokyo?", env=free, cwd=tmp_path))
    succeeded(cli("ask", "--thread", "t1", "hello", env=free, cwd=tmp_path))
    before = said(cli, env, tmp_path, "t1")
    checkpoints = listed(cli, env, tmp_path, "t1")
    assert [c["happened"] for c in checkpoints][-4:] == [
        "new input",
        "asked: hello",
        checkpoints[-2]["happened"],
        "turn ended (answered)",
    ]
    assert checkpoints[-2]["happened"].startswith("answered: ")

    undone = cli("undo", "--thread", "t1", env=env, cwd=tmp_path)
    assert undone.returncode == 0 and undone.stdout == ""
    assert "undid the last turn of t1 ('hello'); what its tools did is not undone" in (
        undone.stderr
    )
    assert said(cli, env, tmp_path, "t1") == before[:4]

    head = checkpoints[-1]["checkpoint_id"]
    forked = succeeded(
        cli("fork", "--thread", "t1", "--at", head, "--to", "t2", env=env, cwd=tmp_path)
    )
    assert forked.stdout == "t2\n"
    assert said(cli, env, tmp_path, "t2") == before
    assert said(cli, env, tmp_path, "t1") == before[:4]  # the original untouched by the fork


def test_a_forked_pause_pauses_again_and_the_original_keeps_its_own(
    cli: Ferry, tmp_path: Path, env: dict[str, str]
) -> None:
    asked = cli("ask", "--thread", "t1", "--json", "what is 7*6?", env=env, cwd=tmp_path)
    assert one_json_object(asked)["stop_reason"] == "awaiting_approval"
    paused = listed(cli, env, tmp_path, "t1")[-1]
    assert paused["happened"] == "called calculator; paused for approval"

    forked = succeeded(
        cli("fork", "--thread", "t1", "--at", paused["checkpoint_id"], env=env, cwd=tmp_path)
    )
    new = forked.stdout.strip()
    assert f"go on with `ferry resume --thread {new}`" in forked.stderr
    resumed = cli("resume", "--thread", new, "--json", env=env, cwd=tmp_path)
    assert one_json_object(resumed)["stop_reason"] == "awaiting_approval"
    approved = succeeded(cli("resume", "--thread", new, "--approve", env=env, cwd=tmp_path))
    assert "42" in approved.stdout
    rejected = succeeded(cli("resume", "--thread", "t1", "--reject", "no", env=env, cwd=tmp_path))
    assert "42" not in rejected.stdout
    assert said(cli, env, tmp_path, new)[2] == "tool: 42"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["undo", "--thread", "nobody"], "ferry: unknown thread 'nobody' (see `ferry threads`)"),
        (
            ["fork", "--thread", "t1", "--at", "0000"],
            "ferry: thread 't1' has no checkpoint '0000' (see `ferry history --thread t1 "
            "--checkpoints`)",
        ),
        (
            ["undo", "--thread", "t1"],
            "ferry: thread t1 has one turn: nothing is before it to go back to (delete the "
            "thread with `ferry delete --thread t1`)",
        ),
    ],
)
def test_what_cannot_be_done_is_one_line_and_exit_1(
    cli: Ferry, tmp_path: Path, env: dict[str, str], argv: list[str], line: str
) -> None:
    free = {**env, "FERRY_APPROVE_TOOLS": ""}
    succeeded(cli("ask", "--thread", "t1", "hello", env=free, cwd=tmp_path))
    done = cli(*argv, "--json", env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [line]
    assert json.loads(done.stdout)["error"]["type"] == "user_error"
