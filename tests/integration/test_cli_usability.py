"""The `ferry` a new user expects: shorthands, one-line usage errors, errors that say what to fix,
`--json` failures as one object, thread titles and `ferry info`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from graph.core.settings import ConfigError, Settings
from graph.storage import database_name
from tests.support.cli_helpers import (
    FERRY,
    Ferry,
    ferry_env,
    history,
    new_thread_id,
    one_json_object,
    succeeded,
)
from tests.support.servers.openai import OpenAIServer


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed command (never a traceback), besides a new thread's id."""
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if not line.startswith("thread: ")]
    return line


def json_error(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """The `error` of the one JSON object a failed `--json` command printed."""
    assert done.stdout.count("\n") == 1, done.stdout
    report = json.loads(done.stdout)
    assert set(report) == {"thread_id", "error"}
    error: dict[str, str] = report["error"]
    assert set(error) == {"type", "message"}
    return error


# --- usage errors: exit 2, one line -------------------------------------------------------------


@pytest.mark.parametrize("question", ["", "   \n"])
def test_an_empty_question_is_a_usage_error(cli: Ferry, tmp_path: Path, question: str) -> None:
    done = cli("ask", question, env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert one_line(done) == "ferry: the question is empty"
    assert done.stdout == ""


def test_prune_before_a_word_is_a_usage_error(cli: Ferry, tmp_path: Path) -> None:
    done = cli("prune", "--before", "yesterday", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert "not an ISO date" in one_line(done) and "'yesterday'" in done.stderr
    assert not (tmp_path / "ferry.db").exists()  # checked before the database is opened


def test_a_misspelt_command_is_not_sent_to_the_model(cli: Ferry, tmp_path: Path) -> None:
    done = cli("thraeds", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert "did you mean 'threads'?" in done.stderr


def test_approval_of_an_unknown_tool_is_a_configuration_error(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path, FERRY_APPROVE_TOOLS="read_file,calculater")

    done = cli("ask", "What is 2 + 2?", env=env, cwd=tmp_path)

    assert done.returncode == 1
    line = one_line(done)
    assert "FERRY_APPROVE_TOOLS" in line and "'calculater'" in line and "calculator" in line
    assert done.stdout == ""  # nothing ran without its approval step


def test_build_graph_refuses_approval_of_a_tool_it_does_not_have() -> None:
    from graph import build_graph
    from tools import TOOLS

    with pytest.raises(ConfigError, match="FERRY_APPROVE_TOOLS names 'delete_file'"):
        build_graph(tools=TOOLS, checkpointer=None, settings=Settings(approve_tools="delete_file"))


# --- --json failures: one object, same exit codes -----------------------------------------------


def test_json_failure_is_one_object_with_the_thread_and_the_error(
    cli: Ferry, tmp_path: Path
) -> None:
    done = cli(
        "history", "--thread", "no-such-thread", "--json", env=ferry_env(tmp_path), cwd=tmp_path
    )

    assert done.returncode == 1
    assert json.loads(done.stdout)["thread_id"] == "no-such-thread"
    assert json_error(done) == {
        "type": "user_error",
        "message": "unknown thread 'no-such-thread' (see `ferry threads`)",
    }


def test_json_usage_error_is_one_object_and_exit_2(cli: Ferry, tmp_path: Path) -> None:
    done = cli("ask", "", "--json", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert json_error(done)["type"] == "usage_error"


# --- shorthands ---------------------------------------------------------------------------------


def test_a_question_alone_is_ask_and_continue_follows_the_latest_thread(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path)
    first = succeeded(cli("What is 150 * 3?", env=env, cwd=tmp_path))
    thread_id = new_thread_id(first.stderr)
    assert first.stdout == "`150 * 3` = 450\n"

    follow_up = succeeded(cli("-c", "and divided by 9", env=env, cwd=tmp_path))
    assert follow_up.stdout == "`450 / 9` = 50\n"
    assert "thread: " not in follow_up.stderr  # no new thread
    report = one_json_object(cli("ask", "--continue", "plus 1", "--json", env=env, cwd=tmp_path))
    assert report["thread_id"] == thread_id
    assert len(history(thread_id, env=env, cwd=tmp_path, run=cli)) == 12


def test_chat_continue_opens_the_latest_thread(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    thread_id = new_thread_id(succeeded(cli("What is 2 + 2?", env=env, cwd=tmp_path)).stderr)

    done = succeeded(cli("chat", "-c", env=env, cwd=tmp_path))  # stdin is empty: ends at once

    assert done.stderr.splitlines()[0] == f"thread: {thread_id}  (Ctrl-D to end)"


def test_continue_without_any_thread_says_so(cli: Ferry, tmp_path: Path) -> None:
    done = cli("-c", "hello", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 1
    assert one_line(done) == "ferry: no thread to continue yet: ask a question first"


def test_ask_dash_reads_the_question_from_stdin(tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    run = [*FERRY, "ask", "-"]

    def with_stdin(text: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            run, input=text, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=60
        )

    done = with_stdin("What is\n2 + 2?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "`2 + 2` = 4\n"

    empty = with_stdin("")
    assert empty.returncode == 2
    assert empty.stderr == "ferry: the question is empty (nothing on stdin)\n"


def test_a_piped_questions_thread_is_titled_by_the_question_typed(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path)
    notes = "Meeting notes, Tuesday\n\nThe ferry leaves at 9.\nBring tickets.\n"
    question = "summarise   this"  # as typed: the title puts it on one line, as any title

    done = subprocess.run(
        [*FERRY, "ask", question],
        input=notes,
        env=env,
        cwd=tmp_path,
        text=True,
        capture_output=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    thread_id = new_thread_id(done.stderr)
    [listed] = one_json_object(succeeded(cli("threads", "--json", env=env, cwd=tmp_path)))[
        "threads"
    ]
    assert (listed["thread_id"], listed["title"]) == (thread_id, "summarise this")
    # The model is sent the piped text and the question, as one message, as before.
    [asked, *_] = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert asked == {"role": "user", "content": notes.rstrip() + "\n\n" + question}


def test_version(cli: Ferry, tmp_path: Path) -> None:
    from importlib.metadata import version

    done = succeeded(cli("--version", env=ferry_env(tmp_path), cwd=tmp_path))

    assert done.stdout == f"ferry {version('ferry-agent')}\n"


def test_a_thread_id_never_used_is_announced_as_new(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)

    first = succeeded(cli("ask", "What is 2 + 2?", "--thread", "my-thread", env=env, cwd=tmp_path))
    again = succeeded(cli("ask", "plus 1", "--thread", "my-thread", env=env, cwd=tmp_path))

    assert first.stderr.splitlines()[0] == "thread my-thread: new thread"
    assert "new thread" not in again.stderr


# --- errors that say what to fix ----------------------------------------------------------------


def test_a_file_that_is_not_a_database_names_the_file_and_the_setting(
    cli: Ferry, tmp_path: Path
) -> None:
    (tmp_path / "ferry.db").write_text("these are my notes, not a database\n")

    done = cli("threads", "--json", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 1
    line = one_line(done)
    assert str(tmp_path / "ferry.db") in line and "FERRY_DB" in line
    assert "file is not a database" in line
    assert json_error(done)["type"] == "database_error"


def test_a_database_that_cannot_be_created_names_the_file(cli: Ferry, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the folder should be")
    env = ferry_env(tmp_path, FERRY_DB=str(tmp_path / "taken" / "ferry.db"))

    done = cli("threads", env=env, cwd=tmp_path)

    assert done.returncode == 1
    line = one_line(done)
    assert str(tmp_path / "taken" / "ferry.db") in line and "FERRY_DB" in line


def test_a_read_only_database_can_still_be_listed_and_read(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    thread_id = new_thread_id(succeeded(cli("What is 2 + 2?", env=env, cwd=tmp_path)).stderr)
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "ferry.db"
    shutil.copy(tmp_path / "ferry.db", copy)
    copy.chmod(0o444)  # by its mode bits, also for root, whom permissions would not stop
    env["FERRY_DB"] = str(copy)

    listed = one_json_object(cli("threads", "--json", env=env, cwd=tmp_path))
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    written = cli("-c", "plus 1", env=env, cwd=tmp_path)

    assert [t["thread_id"] for t in listed["threads"]] == [thread_id]
    assert messages[-1]["content"] == "`2 + 2` = 4"
    assert written.returncode == 1
    assert "read-only" in one_line(written) and str(copy) in written.stderr


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_model_server_names_its_url(cli: Ferry, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    env = ferry_env(tmp_path, OPENAI_API_KEY="sk-test-fake", OPENAI_BASE_URL=url)

    done = cli("ask", "hi", "--model", "openai:gpt-4.1-mini", "--json", env=env, cwd=tmp_path)

    assert done.returncode == 1
    line = one_line(done)
    assert url in line and "OPENAI_BASE_URL" in line
    assert json_error(done)["type"] == "connection_error"


def test_a_wrong_model_server_path_names_the_url_and_the_settings(
    cli: Ferry, tmp_path: Path
) -> None:
    with OpenAIServer() as server:
        url = server.url + "/wrong/v1"
        env = ferry_env(tmp_path, OPENAI_API_KEY="sk-test-fake", OPENAI_BASE_URL=url)
        done = cli("ask", "hi", "--model", "openai:gpt-4.1-mini", env=env, cwd=tmp_path)

    assert done.returncode == 1
    line = one_line(done)
    assert url in line and "404" in line and "OPENAI_BASE_URL" in line and "FERRY_MODEL" in line


def test_the_postgres_database_is_named_by_host_never_by_password() -> None:
    settings = Settings(database_url="postgresql://ferry:s3cret@db.example:5433/agent")

    assert database_name(settings) == "postgres db.example:5433/agent"


# --- ferry info ---------------------------------------------------------------------------------


def test_info_shows_where_everything_is(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path, FERRY_APPROVE_TOOLS="read_file", FERRY_MAX_ITERATIONS="5")
    succeeded(cli("What is 2 + 2?", env=env, cwd=tmp_path))

    report = one_json_object(cli("info", "--json", env=env, cwd=tmp_path))
    plain = succeeded(cli("info", env=env, cwd=tmp_path)).stdout

    assert report["model"] == {"spec": "offline"}
    assert report["database"] == {"name": str(tmp_path / "ferry.db"), "ok": True, "threads": 1}
    assert report["files_root"] == str(tmp_path)
    assert {"name": "read_file", "needs_approval": True} in report["tools"]
    assert report["settings"]["FERRY_APPROVE_TOOLS"] == "read_file"
    assert report["settings"]["FERRY_MAX_ITERATIONS"] == "5"
    assert f"database:   {tmp_path / 'ferry.db'} (ok, 1 threads)" in plain
    assert "read_file (approval)" in plain


def test_info_reports_a_broken_database_and_exits_1(cli: Ferry, tmp_path: Path) -> None:
    (tmp_path / "ferry.db").write_text("not a database")

    done = cli("info", "--json", env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 1
    database = json.loads(done.stdout)["database"]
    assert database["ok"] is False and "file is not a database" in database["error"]


# --- the offline model's answers are Markdown ---------------------------------------------------


def test_offline_answers_are_markdown_lists_with_code_spans(cli: Ferry, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("*first*\nsecond\n")
    env = ferry_env(tmp_path)

    several = succeeded(cli("What is 2*3 and what is 10 - 4?", env=env, cwd=tmp_path)).stdout
    read = succeeded(cli("read notes.txt", env=env, cwd=tmp_path)).stdout

    assert several == "- `2*3` = 6\n- `10 - 4` = 6\n"
    assert read.startswith("`notes.txt`:\n\n```\n") and read.endswith("*first*\nsecond\n```\n")


def test_tools_lists_every_tool_with_its_arguments(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    listed = one_json_object(succeeded(cli("tools", "--json", env=env, cwd=tmp_path)))["tools"]
    assert [t["name"] for t in listed] == [
        "web_search", "get_weather", "calculator", "read_file", "get_datetime",
        "remember", "recall",
    ]  # fmt: skip
    assert [t["source"] for t in listed[-2:]] == ["memory", "memory"]
    read_file = next(t for t in listed if t["name"] == "read_file")
    assert read_file["source"] == "built-in"
    assert [(a["name"], a["required"]) for a in read_file["arguments"]] == [
        ("path", True), ("start_line", False), ("max_lines", False),
    ]  # fmt: skip
    plain = succeeded(cli("tools", env=env, cwd=tmp_path)).stdout
    assert "read_file(path: string, start_line?: integer, max_lines?: integer)  [built-in]" in plain
