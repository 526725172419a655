"""Turns that fail every way leave no secret in the database, the logs, stdout or stderr.

Each failure quotes every secret of the environment, as a careless provider, gateway or tool
does (`upstream rejected Bearer sk-…`), in plain, base64 and URL-encoded forms: provider errors
(400, 401, 500, 504 after retries), tool errors, a file the agent reads, a tool timeout and a
model timeout. Then everything Ferry stored (decoded), logged and printed is searched for them.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.tools import ToolException, tool
from langchain_openai import ChatOpenAI

from graph.builder import build_graph
from graph.core.log import JsonFormatter
from graph.core.settings import Settings
from graph.storage import sqlite_saver
from tests.support.cli_helpers import (
    Ferry,
    ferry,
    ferry_env,
    history,
    one_json_object,
    succeeded,
)
from tests.support.leaks import found_in, quoting_every_form
from tests.support.servers.base import Reply
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.openmeteo import OpenMeteoServer, error
from tests.support.servers.tavily import TavilyServer, tavily_error
from tests.support.stored import step_values, write_values
from tests.support.turns import ask

KEY = "sk-test-Q9v/Xw+Lm2=Rt7kd"
SECRETS = {
    "OPENAI_API_KEY": KEY,
    "TAVILY_API_KEY": "tvly-test-3fK9pQ2wZx",
    "DB_PASS": "hunter2 p@ss/Wörd+x",  # the case of the issue: a password read from a file
    "FERRY_SERVER_TOKEN": "srv-token-8c1f4e2a9b",
}
URL_PASSWORD = "pg/pass@7Yq2"
# A URL setting with a password. (FERRY_DATABASE_URL itself would make the CLI use Postgres;
# the in-process test sets that one.)
URL = f"postgresql://ferry:{quote(URL_PASSWORD, safe='')}@db.internal:5432/ferry"
ALL = [*SECRETS.values(), URL_PASSWORD]
LEAK = f"upstream rejected Bearer {KEY}; " + quoting_every_form(ALL)


def provider_error(status: int, **headers: str) -> Reply:
    """An OpenAI-style error whose message quotes every secret."""
    body = {"error": {"message": LEAK, "type": "invalid_request_error", "code": None}}
    return Reply(status, body, headers=headers)


def stored_everything(db: Path) -> str:
    """Every value of every table of the database, its steps and writes decoded as well."""
    saver = sqlite_saver(db)
    conn = saver.conn
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = [
        _as_text(value)
        for table in tables
        for row in conn.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - the file's own names
        for value in row
    ]
    values = [value for value, _ in step_values(conn)] + write_values(conn)
    assert values  # the run stored something to search
    found += [repr(saver.serde.loads_typed(value)) for value in values]
    conn.close()
    return "\n".join(found)


def _as_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def raw_files(tmp_path: Path) -> str:
    """The database files' bytes as text: small values are stored uncompressed."""
    return "\n".join(
        path.read_bytes().decode("utf-8", "replace") for path in tmp_path.glob("ferry.db*")
    )


# --- the CLI: every failure of a thread, one process after another ---------------------------
# (What reads the thread afterwards, `history` and `threads`, runs in this process: it prints
# what is stored, which is searched whole after each run.)


@pytest.fixture
def servers() -> Iterator[tuple[OpenAIServer, OpenMeteoServer, TavilyServer]]:
    with (
        OpenAIServer() as openai,
        OpenMeteoServer() as openmeteo,
        TavilyServer(api_key=SECRETS["TAVILY_API_KEY"]) as tavily,
    ):
        yield openai, openmeteo, tavily


def test_cli_runs_that_fail_every_way_leave_no_secret_anywhere(
    cli: Ferry, tmp_path: Path, servers: tuple[OpenAIServer, OpenMeteoServer, TavilyServer]
) -> None:
    openai, openmeteo, tavily = servers
    (tmp_path / "notes.txt").write_text(f"Credentials, do not share: {LEAK}\n", encoding="utf-8")
    openai.script(
        [
            openai_tool_calls(
                ("read_file", {"path": "notes.txt"}, "call_read"),
                ("get_weather", {"city": "Madrid"}, "call_weather"),
                ("web_search", {"query": "ferry schedules"}, "call_search"),
            ),
            openai_tool_calls(("get_weather", {"city": "Paris"}, "call_slow")),
            provider_error(401),  # ask fails
            provider_error(400),  # resume with FERRY_DEBUG=1 fails
            *[provider_error(504, **{"retry-after-ms": "1"})] * 4,  # resume --json: retries run out
            openai_answer("All done."),  # the last resume answers
        ]
    )
    openmeteo.fail_next(error(LEAK))  # Madrid's geocoding
    openmeteo.forecast_faults.append(Reply(delay_s=3.0))  # Paris's forecast: the tool times out
    tavily.fail_next(tavily_error(400, LEAK))
    log_file = tmp_path / "logs" / "ferry.jsonl"
    env = ferry_env(tmp_path, weather=openmeteo, model=openai, **SECRETS)
    env |= {"BACKUP_DATABASE_URL": URL, "FERRY_TAVILY_URL": tavily.url}
    env |= {
        "FERRY_TOOL_TIMEOUT_S": "1",
        "FERRY_LOG_FORMAT": "json",
        "FERRY_LOG_FILE": str(log_file),
        # The weather asked for after the read would wait for a decision under the default
        # rule; this test is about what failures leave behind.
        "FERRY_EXFILTRATION_GUARD": "allow",
    }
    debug = {**env, "FERRY_DEBUG": "1"}
    text_logs = {k: v for k, v in env.items() if not k.startswith("FERRY_LOG_")}
    stored: list[str] = []  # after each run: the next one replaces a failed step's error

    def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        done = ferry(*args, env=env, cwd=tmp_path)
        stored.append(stored_everything(tmp_path / "ferry.db") + raw_files(tmp_path))
        return done

    asked = run("ask", "Read notes.txt, then the weather and the news.", env=env)
    thread = asked.stderr.splitlines()[0].removeprefix("thread: ")
    resume = ("resume", "--thread", thread)
    debugged = run(*resume, env=debug)
    as_json = run(*resume, "--json", env=text_logs)
    answered = succeeded(run(*resume, env=debug))
    shown = history(thread, env=env, cwd=tmp_path, run=cli)
    listed = one_json_object(cli("threads", "--json", env=env, cwd=tmp_path))

    # Each run failed the way it was meant to, and the key was really in use.
    assert (asked.returncode, debugged.returncode, as_json.returncode) == (1, 1, 1)
    assert "AuthenticationError: Error code: 401" in asked.stderr
    assert "Traceback (most recent call last)" in debugged.stderr
    assert "Error: Error code: 400" in debugged.stderr
    assert "Error: Error code: 504" in as_json.stderr
    assert answered.stdout == "All done.\n"
    assert listed["threads"][0]["thread_id"] == thread
    assert {r.headers["authorization"] for r in openai.requests} == {f"Bearer {KEY}"}
    results = {m["tool_call_id"]: m for m in shown if m["role"] == "tool"}
    assert results["call_read"]["status"] == "success"
    assert "[redacted]" in results["call_read"]["content"]
    for call in ("call_weather", "call_search"):
        assert results[call]["status"] == "error" and "[redacted]" in results[call]["content"]
    assert "timed out after 1 s" in results["call_slow"]["content"]
    for snapshot, status in zip(stored, (401, 400, 504), strict=False):
        assert f"Error code: {status}" in snapshot  # LangGraph stored the run's error
    logged = log_file.read_text(encoding="utf-8")
    assert "tool_end" in logged and "model_call" in logged

    printed = [asked, debugged, as_json, answered]
    outputs = [p.stdout + p.stderr for p in printed] + [json.dumps(shown), json.dumps(listed)]
    assert found_in("\n".join(outputs), ALL) == []
    assert found_in(logged, ALL) == []
    assert [found_in(snapshot, ALL) for snapshot in stored] == [[]] * len(stored)
    # What the provider was sent (tool results) is scrubbed too; only its header carries the key.
    assert found_in(json.dumps(openai.chat_requests(), ensure_ascii=False), ALL) == []


# --- in process: the errors LangGraph stores, with every log record captured -----------------


@tool
def deploy(target: str) -> str:
    """Deploy to a target.

    Args:
        target: where to deploy.
    """
    raise RuntimeError(f"login to {target} failed: {LEAK}")


@tool
def vault(name: str) -> str:
    """Read a secret's metadata.

    Args:
        name: the secret's name.
    """
    raise ToolException(f"vault refused {name}: {LEAK}")


@tool
def dump_env(section: str) -> str:
    """Show configuration.

    Args:
        section: which part.
    """
    return f"[{section}] {LEAK}"


@tool
def slow(seconds: float) -> str:
    """Wait a while.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return LEAK


@pytest.fixture
def every_record(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every log record of every logger at INFO and up, formatted as Ferry's JSON lines."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    for name in ("ferry", "openai._base_client"):  # the CLI may have configured them earlier
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    monkeypatch.setattr(root, "level", logging.INFO)
    root.addHandler(handler)
    yield lines
    root.removeHandler(handler)


def test_stored_errors_and_results_carry_no_secret(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    every_record: list[str],
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    # Only their values matter here: the saver below is SQLite, unencrypted, all the same.
    encryption_key = "enc-key-0123456789abcdef01234567"
    monkeypatch.setenv("FERRY_ENCRYPTION_KEY", encryption_key)
    monkeypatch.setenv("FERRY_DATABASE_URL", URL)
    secrets = [*ALL, encryption_key]
    with OpenAIServer() as server:
        model = ChatOpenAI(
            model="gpt-4.1-mini",
            base_url=server.url + "/v1",
            api_key=KEY,  # type: ignore[arg-type]
            max_retries=0,
            timeout=0.5,
        )
        db = tmp_path / "ferry.db"
        graph = build_graph(
            model=model,
            tools=[deploy, vault, dump_env, slow],
            checkpointer=sqlite_saver(db),
            settings=Settings(tool_timeout_s=0.5),
        )
        server.script(
            [
                openai_tool_calls(
                    ("deploy", {"target": "prod"}),
                    ("vault", {"name": "db"}),
                    ("dump_env", {"section": "db"}),
                    ("slow", {"seconds": 2}),
                ),
                Reply(delay_s=2.0),  # the model call times out
                provider_error(401),
                provider_error(500),
                openai_answer("Recovered."),
            ]
        )
        config: Any = {"configurable": {"thread_id": "t1"}}
        failures, stored = [], []
        for graph_input in ({"messages": [("user", "Deploy it.")]}, None, None):
            with pytest.raises(Exception) as caught:  # noqa: PT011 - each fails its own way
                graph.invoke(graph_input, config)
            failures.append(type(caught.value).__name__)
            stored.append(stored_everything(db) + raw_files(tmp_path))
        result = ask(graph, "Try again.")  # a new turn, after the failed one
        server.assert_complete()

    assert failures == ["OpenAITimeoutError", "OpenAIAuthenticationError", "OpenAIAPIError"]
    assert result["messages"][-1].content == "Recovered."
    stored.append(stored_everything(db) + raw_files(tmp_path))
    expected = ("Request timed out", "Error code: 401", "Error code: 500")
    for snapshot, stored_error in zip(stored, expected, strict=False):
        assert stored_error in snapshot  # LangGraph stored the run's error
    results = [m for m in result["messages"] if m.type == "tool"]
    assert [m.status for m in results] == ["error", "error", "success", "error"]
    assert all("[redacted]" in m.content for m in results[:3])
    printed = capsys.readouterr()
    assert [found_in(snapshot, secrets) for snapshot in stored] == [[]] * len(stored)
    assert found_in("\n".join(every_record), secrets) == []
    assert found_in(printed.out + printed.err, secrets) == []
