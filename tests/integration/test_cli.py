"""The `ferry` command line on one database: its contract in-process, what only a process shows
in a real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from graph.core.fence import fenced_data
from tests.support.cli_helpers import (
    FERRY,
    UUID4,
    Ferry,
    ferry_env,
    history,
    new_thread_id,
    one_json_object,
    roles,
    run_command,
    stored_text,
    succeeded,
)
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.openmeteo import OpenMeteoServer

THREE_INTENTS = "What day is it, how much is 150 * 3, and what's the weather in Bogotá?"
BOGOTA = "Bogotá, Bogota D.C., Colombia: 14.2 °C"
SECRET = "sk-test-fake"


@pytest.fixture
def openmeteo() -> Iterator[OpenMeteoServer]:
    with OpenMeteoServer() as server:
        yield server


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def tool_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if not line.startswith("thread: ")]


# --- ask, follow-up, history, threads -------------------------------------------------------


def test_ask_then_follow_up_then_history_on_one_thread(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)

    first = succeeded(cli("ask", "What is 150 * 3?", env=env, cwd=tmp_path))

    assert first.stdout == "`150 * 3` = 450\n"  # only the answer
    thread_id = new_thread_id(first.stderr)
    assert first.stderr.splitlines()[0] == f"thread: {thread_id}"
    started, finished = tool_lines(first.stderr)
    assert started == '→ calculator(expression="150 * 3")'
    assert finished.startswith("✓ calculator ") and finished.endswith(" ms")
    assert finished.removeprefix("✓ calculator ").removesuffix(" ms").isdigit()

    second = succeeded(
        cli("ask", "and divided by 9?", "--thread", thread_id, env=env, cwd=tmp_path)
    )

    assert second.stdout == "`450 / 9` = 50\n"
    assert "thread: " not in second.stderr  # not a new thread
    assert tool_lines(second.stderr)[0] == '→ calculator(expression="450 / 9")'

    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == [
        "user", "assistant", "tool", "assistant",
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    for call_message, result, expression, value in (
        (messages[1], messages[2], "150 * 3", "450"),
        (messages[5], messages[6], "450 / 9", "50"),
    ):
        assert set(call_message) == {"role", "content", "tool_calls"}
        assert call_message["content"] == ""
        [call] = call_message["tool_calls"]
        assert set(call) == {"id", "name", "args"}
        assert call["name"] == "calculator" and call["args"] == {"expression": expression}
        assert result == {
            "role": "tool",
            "content": value,
            "tool_call_id": call["id"],
            "status": "success",
        }
    assert messages[0] == {"role": "user", "content": "What is 150 * 3?"}
    assert messages[3] == {"role": "assistant", "content": "`150 * 3` = 450"}
    assert messages[4] == {"role": "user", "content": "and divided by 9?"}
    assert messages[7] == {"role": "assistant", "content": "`450 / 9` = 50"}

    plain = succeeded(cli("history", "--thread", thread_id, env=env, cwd=tmp_path))
    assert plain.stdout.splitlines() == [
        "user: What is 150 * 3?",
        'assistant: → calculator({"expression": "150 * 3"})',
        "tool: 450",
        "assistant: `150 * 3` = 450",
        "user: and divided by 9?",
        'assistant: → calculator({"expression": "450 / 9"})',
        "tool: 50",
        "assistant: `450 / 9` = 50",
    ]


def test_threads_lists_each_thread_with_its_message_count_newest_first(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path)
    older_ask = cli("ask", "What time is it, and what is 2 + 2?", env=env, cwd=tmp_path)
    older = new_thread_id(succeeded(older_ask).stderr)  # user, assistant, tool, tool, assistant
    newer_ask = cli("ask", "What is 150 * 3?", env=env, cwd=tmp_path)
    newer = new_thread_id(succeeded(newer_ask).stderr)  # user, assistant, tool, assistant

    report = one_json_object(cli("threads", "--json", env=env, cwd=tmp_path))

    assert set(report) == {"threads"}
    assert [set(t) for t in report["threads"]] == [
        {"thread_id", "updated_at", "messages", "title"}
    ] * 2
    assert [(t["thread_id"], t["messages"]) for t in report["threads"]] == [(newer, 4), (older, 5)]
    assert [t["title"] for t in report["threads"]] == [
        "What is 150 * 3?",
        "What time is it, and what is 2 + 2?",
    ]
    newest, oldest = (datetime.fromisoformat(t["updated_at"]) for t in report["threads"])
    assert newest.tzinfo is not None and newest > oldest

    listed = succeeded(cli("threads", env=env, cwd=tmp_path))
    plain = listed.stdout.splitlines()
    assert [line.split()[0] for line in plain] == [newer, older]
    assert plain[1].endswith(" 5 messages  What time is it, and what is 2 + 2?")
    assert listed.stderr == f"database: {tmp_path / 'ferry.db'}\n"


def test_ask_accepts_a_thread_id_chosen_by_the_user(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)

    done = succeeded(cli("ask", "What is 2 + 2?", "--thread", "my-notes", env=env, cwd=tmp_path))

    assert done.stdout == "`2 + 2` = 4\n"
    assert roles(history("my-notes", env=env, cwd=tmp_path, run=cli)) == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


# --- --json ----------------------------------------------------------------------------------


def test_json_reports_three_parallel_calls_in_one_object(
    cli: Ferry, tmp_path: Path, openmeteo: OpenMeteoServer
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo)

    done = cli("ask", THREE_INTENTS, "--json", env=env, cwd=tmp_path)
    report = one_json_object(done)

    assert set(report) == {
        "thread_id", "answer", "stop_reason", "output", "model_calls", "models", "tool_calls",
        "usage", "thread_usage",
    }  # fmt: skip
    assert UUID4.fullmatch(report["thread_id"])
    assert "thread: " not in done.stderr  # the id is in the object
    assert report["stop_reason"] == "answered"
    assert report["model_calls"] == 2
    calls = report["tool_calls"]
    assert all(set(c) == {"id", "name", "args", "status", "duration_ms"} for c in calls)
    assert sorted(c["name"] for c in calls) == ["calculator", "get_datetime", "get_weather"]
    assert [c["status"] for c in calls] == ["success"] * 3
    assert all(isinstance(c["duration_ms"], int) and c["duration_ms"] >= 0 for c in calls)
    assert len({c["id"] for c in calls}) == 3
    args = {c["name"]: c["args"] for c in calls}
    assert args["calculator"] == {"expression": "150 * 3"}
    assert args["get_weather"] == {"city": "Bogotá", "units": "celsius"}
    assert "450" in report["answer"]
    assert BOGOTA in report["answer"]
    usage = report["usage"]
    assert set(usage) == {
        "input_tokens", "output_tokens", "total_tokens", "cost_usd", "unpriced_calls"
    }  # fmt: skip
    assert (usage["cost_usd"], usage["unpriced_calls"]) == (0, 0)  # the offline model is free
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert len(openmeteo.requests_to("/v1/search")) == 1
    assert len(openmeteo.requests_to("/v1/forecast")) == 1

    stored = history(report["thread_id"], env=env, cwd=tmp_path, run=cli)
    assert roles(stored) == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert {m["tool_call_id"] for m in stored[2:5]} == {c["id"] for c in calls}


def test_json_reports_a_guard_stop_with_exit_0(
    cli: Ferry, tmp_path: Path, openmeteo: OpenMeteoServer
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo, FERRY_MAX_ITERATIONS="1")

    report = one_json_object(cli("ask", THREE_INTENTS, "--json", env=env, cwd=tmp_path))

    assert report["stop_reason"] == "max_iterations"
    assert report["model_calls"] == 1
    assert "FERRY_MAX_ITERATIONS" in report["answer"]


# --- exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["history", "resume"])
def test_unknown_thread_is_one_line_and_exit_1(cli: Ferry, tmp_path: Path, command: str) -> None:
    env = ferry_env(tmp_path)

    done = cli(command, "--thread", "no-such-thread", env=env, cwd=tmp_path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == "ferry: unknown thread 'no-such-thread' (see `ferry threads`)\n"


@pytest.mark.parametrize("how", ["FERRY_MODEL", "--model"])
def test_openai_model_without_key_is_one_line_and_exit_1(
    cli: Ferry, tmp_path: Path, how: str
) -> None:
    if how == "FERRY_MODEL":
        env, extra = ferry_env(tmp_path, FERRY_MODEL="openai:gpt-4.1-mini"), []
    else:
        env, extra = ferry_env(tmp_path), ["--model", "openai:gpt-4.1-mini"]

    done = cli("ask", "What is 2 + 2?", "--json", *extra, env=env, cwd=tmp_path)

    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]  # --json: the one object says what failed
    assert error["type"] == "config_error" and "OPENAI_API_KEY" in error["message"]
    [line] = done.stderr.splitlines()
    assert "OPENAI_API_KEY" in line and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([], id="no-command"),
        pytest.param(["ask"], id="missing-question"),
        pytest.param(["thraeds"], id="misspelt-command"),
        pytest.param(["--frob"], id="unknown-option"),
        pytest.param(["resume"], id="resume-without-thread"),
        pytest.param(["ask", "hi", "--frob"], id="unknown-ask-option"),
    ],
)
def test_usage_errors_exit_2(cli: Ferry, tmp_path: Path, argv: list[str]) -> None:
    done = cli(*argv, env=ferry_env(tmp_path), cwd=tmp_path)

    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("usage: ferry")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ferry.db").exists()  # nothing was opened


def test_resume_of_a_finished_thread_has_nothing_to_do(cli: Ferry, tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    thread_id = new_thread_id(succeeded(cli("ask", "What is 2 + 2?", env=env, cwd=tmp_path)).stderr)

    plain = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    report = one_json_object(cli("resume", "--thread", thread_id, "--json", env=env, cwd=tmp_path))

    assert plain.stdout == ""
    assert plain.stderr == f"thread {thread_id}: nothing to resume, its last run finished.\n"
    assert report["thread_id"] == thread_id
    assert report["stop_reason"] == "answered"
    assert (report["model_calls"], report["tool_calls"]) == (0, [])


def test_a_closed_stdout_ends_the_run_cleanly(tmp_path: Path) -> None:
    # `ferry ask … | head -c0`: the answer cannot be written. Ferry may report that, but must
    # not crash (SIGSEGV) by closing the database under LangGraph's still-running checkpoint
    # writes. The crash is a race, so a few tries make it likely to show.
    env = ferry_env(tmp_path)
    for attempt in range(3):
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            done = subprocess.run(
                [*FERRY, "ask", "What is 150 * 3?"],
                env=env,
                cwd=tmp_path,
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
                check=False,
            )
        finally:
            os.close(write_end)
        assert done.returncode in (0, 1), (attempt, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr


# --- help and startup cost ---------------------------------------------------------------------


def test_help_lists_the_commands(cli: Ferry, tmp_path: Path) -> None:
    done = succeeded(cli("--help", env=ferry_env(tmp_path), cwd=tmp_path))

    for command in ("ask", "chat", "resume", "history", "threads"):
        assert command in done.stdout


def test_the_console_script_is_installed(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "ferry"
    if not script.exists():
        pytest.skip("no `ferry` console script next to this interpreter")

    done = run_command([str(script), "ask", "--help"], env=ferry_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ferry ask")


def test_help_imports_no_langgraph_or_provider_sdk(tmp_path: Path) -> None:
    argv = [sys.executable, "-X", "importtime", "-m", "graph.cli", "--help"]
    done = run_command(argv, env=ferry_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "graph" in imported and "argparse" in imported
    heavy = ("langgraph", "langchain", "langchain_core", "langchain_openai", "openai", "httpx")
    assert [m for m in imported if m.split(".")[0] in heavy] == []

    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from graph.cli import build_parser; build_parser(); "
            "print('langgraph' in sys.modules)",
        ],
        env=ferry_env(tmp_path),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert probe.stdout == "False\n", probe.stderr


# --- the real OpenAI client against a loopback server --------------------------------------------


def script_parallel_calls(openai: OpenAIServer, answer: str) -> None:
    openai.script(
        [
            openai_tool_calls(
                ("calculator", {"expression": "150 * 3"}, "call_calc"),
                ("get_weather", {"city": "Bogotá"}, "call_weather"),
                usage=(100, 20),
            ),
            openai_answer(answer, usage=(150, 30)),
        ]
    )


ANSWER = "150 * 3 is 450, and it is 14.2 °C in Bogotá."


def test_openai_answer_streams_to_stdout(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer, openmeteo: OpenMeteoServer
) -> None:
    script_parallel_calls(openai, ANSWER)
    env = ferry_env(tmp_path, weather=openmeteo, model=openai)

    done = succeeded(cli("ask", "150 * 3, and the weather in Bogotá?", env=env, cwd=tmp_path))

    assert done.stdout == ANSWER + "\n"
    new_thread_id(done.stderr)
    assert '→ calculator(expression="150 * 3")' in done.stderr
    assert '→ get_weather(city="Bogotá")' in done.stderr
    assert openai.rejections == []
    openai.assert_complete()
    requests = openai.chat_requests()
    assert [r["stream"] for r in requests] == [True, True]
    assert all(r["model"] == "gpt-4.1-mini" for r in requests)


def test_openai_json_reports_the_servers_usage_and_sends_the_results_back(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer, openmeteo: OpenMeteoServer
) -> None:
    script_parallel_calls(openai, ANSWER)
    env = ferry_env(tmp_path, weather=openmeteo, model=openai)

    report = one_json_object(cli("ask", "150 * 3, and Bogotá?", "--json", env=env, cwd=tmp_path))

    assert report["answer"] == ANSWER
    assert report["stop_reason"] == "answered"
    assert report["model_calls"] == 2
    usage = report["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (250, 50, 300)
    assert usage["cost_usd"] > 0 and usage["unpriced_calls"] == 0  # gpt-4.1-mini is priced
    # The thread's ledger, as `history` shows it: the same cost, in --json and in words.
    thread = ["history", "--thread", report["thread_id"]]
    shown = one_json_object(cli(*thread, "--json", env=env, cwd=tmp_path))
    assert shown["thread_usage"]["cost_usd"] == usage["cost_usd"]
    assert shown["thread_usage"]["by_model"]["gpt-4.1-mini"]["input_tokens"] == 250
    words = succeeded(cli(*thread, env=env, cwd=tmp_path)).stderr.splitlines()[-1]
    assert words == f"usage: 250 tokens in, 50 out; cost ${usage['cost_usd']:.4f}"
    assert sorted((c["id"], c["name"], c["status"]) for c in report["tool_calls"]) == [
        ("call_calc", "calculator", "success"),
        ("call_weather", "get_weather", "success"),
    ]
    assert openai.rejections == []
    openai.assert_complete()
    first, second = openai.chat_requests()
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    sent = second["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent[2]["tool_calls"]] == ["call_calc", "call_weather"]
    results = {m["tool_call_id"]: str(fenced_data(m["content"])) for m in sent[3:]}
    assert results["call_calc"] == "450"
    assert results["call_weather"].startswith(BOGOTA)
    auth = {r.headers.get("authorization") for r in openai.requests_to("/chat/completions")}
    assert auth == {f"Bearer {SECRET}"}


def test_the_api_key_is_never_printed_logged_or_stored(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer, openmeteo: OpenMeteoServer
) -> None:
    script_parallel_calls(openai, ANSWER)
    log_file = tmp_path / "logs" / "ferry.log"
    env = ferry_env(
        tmp_path, weather=openmeteo, model=openai, FERRY_LOG_FILE=str(log_file),
        FERRY_LOG_FORMAT="json",
    )  # fmt: skip

    done = succeeded(cli("ask", "150 * 3, and Bogotá?", env=env, cwd=tmp_path))
    thread_id = new_thread_id(done.stderr)
    shown = succeeded(cli("history", "--thread", thread_id, "--json", env=env, cwd=tmp_path))
    listed = succeeded(cli("threads", "--json", env=env, cwd=tmp_path))

    outputs = [done.stdout, done.stderr, shown.stdout, shown.stderr, listed.stdout, listed.stderr]
    assert not [text for text in outputs if SECRET in text]
    stored = sorted(tmp_path.glob("ferry.db*"))
    assert tmp_path / "ferry.db" in stored
    assert not [path.name for path in stored if SECRET.encode() in path.read_bytes()]
    decoded = stored_text(tmp_path / "ferry.db")
    assert "Bogotá" in decoded and "450" in decoded  # the decoding reaches the messages
    assert SECRET not in decoded
    logged = log_file.read_text(encoding="utf-8")
    assert SECRET not in logged
    assert any(json.loads(line).get("event") == "model_call" for line in logged.splitlines())
