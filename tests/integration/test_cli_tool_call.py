"""`ferry tools call NAME ARGS`: one tool call with no model, through the loop's guards.

In-process through `graph.cli.main` (the `cli` fixture) for output and exit codes, on real
loopback servers (Open-Meteo, the FastMCP test server over stdio); the approval prompt through
a real pseudo-terminal, since only a terminal makes Ferry ask. The MCP test server answers
every call alike, so the module's tests share it (`mcp_config`).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_helpers import FERRY, Ferry, ferry_env, one_json_object, succeeded
from tests.support.held import HeldForecastServer
from tests.support.mcp import stdio_entry, write_config
from tests.support.servers.openmeteo import OpenMeteoServer
from tools.mcp import close_sessions

pytestmark = pytest.mark.timeout(120)
MADRID = "Madrid, Community of Madrid, Spain: 21.4 °C"
HANG_GUARD_S = 60.0  # only so a broken test cannot hang: nothing here asserts a speed


@pytest.fixture
def openmeteo() -> Iterator[OpenMeteoServer]:
    with OpenMeteoServer() as server:
        yield server


@pytest.fixture(scope="module")
def mcp_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The servers file naming the basic server, for the module's tests that call MCP tools.

    The first of them starts it; the next ones use its session (the same entry reuses the same
    session), which closes at the module's end, as a process's would at its exit.
    """
    yield write_config(tmp_path_factory.mktemp("mcp"), {"basic": stdio_entry()}, "servers.json")
    close_sessions()


def with_mcp(tmp_path: Path, config: Path, **settings: str) -> dict[str, str]:
    return ferry_env(tmp_path, FERRY_MCP_CONFIG=str(config), **settings)


def stored_threads(cli: Ferry, env: dict[str, str], tmp_path: Path) -> list[object]:
    threads = one_json_object(cli("threads", "--json", env=env, cwd=tmp_path))["threads"]
    assert isinstance(threads, list)
    return threads


def test_a_built_in_tool_prints_its_result_and_status_and_stores_nothing(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path)

    done = succeeded(
        cli("tools", "call", "calculator", '{"expression": "2 + 3 * 4"}', env=env, cwd=tmp_path)
    )

    assert done.stdout == "14\n"
    assert done.stderr.startswith("ok (calculator, ") and done.stderr.endswith(" ms)\n")
    assert stored_threads(cli, env, tmp_path) == []  # a try is not a conversation


def test_json_prints_one_object_with_the_call_its_status_and_what_the_model_would_see(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path)

    done = cli(
        "tools", "call", "calculator", '{"expression": "6 * 7"}', "--json", env=env, cwd=tmp_path
    )
    record = one_json_object(done)

    assert set(record) == {
        "tool",
        "args",
        "status",
        "result",
        "duration_ms",
        "source",
        "model_sees",
    }
    assert record["tool"] == "calculator" and record["args"] == {"expression": "6 * 7"}
    assert (record["status"], record["result"], record["source"]) == ("ok", "42", "built-in")
    assert isinstance(record["duration_ms"], int)
    # The result reaches the model fenced as data, as in every turn.
    opening, data, closing = record["model_sees"].split("\n")
    assert data == "42"
    assert opening.startswith('<tool_data fence="') and closing == "</" + opening[1:]


def test_a_failing_call_exits_1_with_the_error_the_model_would_read(
    cli: Ferry, tmp_path: Path
) -> None:
    done = cli(
        "tools",
        "call",
        "calculator",
        '{"expression": "1 / 0"}',
        env=ferry_env(tmp_path),
        cwd=tmp_path,
    )

    assert done.returncode == 1
    assert done.stdout == "Division by zero.\n"
    assert done.stderr.startswith("error (calculator, ")


def test_the_file_reader_refuses_a_path_outside_its_root(cli: Ferry, tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "notes.txt").write_text("inside\n")
    (tmp_path / "secret.txt").write_text("the launch code\n")
    env = ferry_env(tmp_path, FERRY_FILES_ROOT=str(root))

    escaped = cli(
        "tools", "call", "read_file", '{"path": "../secret.txt"}', "--json", env=env, cwd=root
    )
    inside = cli("tools", "call", "read_file", '{"path": "notes.txt"}', env=env, cwd=root)

    assert escaped.returncode == 1
    record = json.loads(escaped.stdout)
    assert record["status"] == "error"
    assert record["result"].startswith("Path escapes the files root")
    assert "launch code" not in escaped.stdout + escaped.stderr
    assert succeeded(inside).stdout.rstrip("\n").endswith("inside")


def test_an_unknown_tool_names_the_closest_one(cli: Ferry, tmp_path: Path) -> None:
    done = cli(
        "tools", "call", "calculater", '{"expression": "1"}', env=ferry_env(tmp_path), cwd=tmp_path
    )

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "ferry: unknown tool 'calculater'; did you mean 'calculator'? (see ferry tools)\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"expression": ', "the arguments for calculator are not JSON "
         "(Expecting value at character 15)"),
        ('["2 + 2"]', "the arguments for calculator must be a JSON object, not list"),
        ('{"expresion": "2"}', "unknown argument 'expresion' for calculator; "
         "did you mean 'expression'?"),
        ("{}", "calculator needs the argument 'expression' (string) (see ferry tools)"),
        ('{"expression": 4}', "argument 'expression' for calculator: "
         "Input should be a valid string"),
    ],
)  # fmt: skip
def test_bad_arguments_are_a_usage_error_naming_the_field(
    cli: Ferry, tmp_path: Path, arguments: str, message: str
) -> None:
    done = cli("tools", "call", "calculator", arguments, env=ferry_env(tmp_path), cwd=tmp_path)

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[0].startswith(f"ferry: {message}"), done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_call_that_outlasts_its_timeout_is_timed_out(cli: Ferry, tmp_path: Path) -> None:
    with HeldForecastServer() as held:  # holds the forecast until the test ends
        env = ferry_env(tmp_path, weather=held, FERRY_TOOL_TIMEOUT_S="1")
        done = cli("tools", "call", "get_weather", '{"city": "Madrid"}', env=env, cwd=tmp_path)
        assert held.forecast_arrived.is_set()

    assert done.returncode == 1
    assert done.stderr.startswith("timed out (get_weather, ")
    assert done.stdout.startswith("get_weather timed out after 1 s (FERRY_TOOL_TIMEOUT_S).")


def test_a_tool_that_needs_approval_runs_only_with_approve_when_no_one_can_be_asked(
    cli: Ferry, tmp_path: Path, openmeteo: OpenMeteoServer
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo, FERRY_APPROVE_TOOLS="get_weather")
    call = ("tools", "call", "get_weather", '{"city": "Madrid"}')

    refused = cli(*call, env=env, cwd=tmp_path)  # stdin is not a terminal
    refused_json = cli(*call, "--json", env=env, cwd=tmp_path)
    assert openmeteo.requests == []  # nothing ran
    approved = succeeded(cli(*call, "--approve", env=env, cwd=tmp_path))

    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == (
        "needs approval (get_weather): FERRY_APPROVE_TOOLS lists it; nothing ran. No one can "
        "approve without a terminal: pass --approve to run it\n"
    )
    assert refused_json.returncode == 2
    assert json.loads(refused_json.stdout) == {
        "tool": "get_weather", "args": {"city": "Madrid"}, "status": "needs approval",
        "result": None,
    }  # fmt: skip
    assert approved.stdout.startswith(MADRID)
    assert approved.stderr.startswith("ok (get_weather, ")


def _call_on_a_terminal(env: dict[str, str], cwd: Path, answer: str) -> tuple[int, str, str]:
    """Run `ferry tools call get_weather` with a terminal on stdin and stderr; answer its prompt.

    Returns the exit code, stdout, and what the terminal showed.
    """
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*FERRY, "tools", "call", "get_weather", '{"city": "Madrid"}'],
        stdin=terminal, stdout=subprocess.PIPE, stderr=terminal, env=env, cwd=cwd, text=True,
    )  # fmt: skip
    os.close(terminal)
    shown = b""
    try:
        while b"[y/N] " not in shown:
            ready, _, _ = select.select([controller], [], [], HANG_GUARD_S)
            assert ready, f"no prompt; the terminal showed {shown!r}"
            shown += os.read(controller, 4096)
        os.write(controller, answer.encode() + b"\n")
        out, _ = process.communicate(timeout=HANG_GUARD_S)
        while select.select([controller], [], [], 0)[0]:
            try:
                shown += os.read(controller, 4096)
            except OSError:  # the process closed its end
                break
    finally:
        process.kill()
        process.wait()
        os.close(controller)
    return process.returncode, out, shown.decode()


@pytest.mark.parametrize("answer", ["y", "n"])
def test_on_a_terminal_a_tool_that_needs_approval_asks_first(
    tmp_path: Path, openmeteo: OpenMeteoServer, answer: str
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo, FERRY_APPROVE_TOOLS="get_weather")

    code, out, shown = _call_on_a_terminal(env, tmp_path, answer)

    assert 'run get_weather {"city": "Madrid"}? [y/N] ' in shown
    if answer == "y":
        assert code == 0 and out.startswith(MADRID)
        assert "ok (get_weather, " in shown
    else:
        assert code == 1 and openmeteo.requests == []
        assert out.startswith("The user declined this call")
        assert "rejected (get_weather)" in shown


def test_an_mcp_tool_is_called_on_its_server(cli: Ferry, tmp_path: Path, mcp_config: Path) -> None:
    env = with_mcp(tmp_path, mcp_config)

    done = cli("tools", "call", "add", '{"a": 20, "b": 22}', "--json", env=env, cwd=tmp_path)
    record = one_json_object(done)

    assert (record["status"], record["result"], record["source"]) == (
        "ok",
        "20 + 22 = 42",
        "mcp:basic",
    )
    assert done.stderr.splitlines()[-1].startswith("ok (add, ")  # after the rename warning


def test_an_mcp_tool_s_failure_and_timeout_are_reported_as_such(
    cli: Ferry, tmp_path: Path, mcp_config: Path
) -> None:
    env = with_mcp(tmp_path, mcp_config, FERRY_TOOL_TIMEOUT_S="1")

    failed = cli("tools", "call", "fail", env=env, cwd=tmp_path)
    hung = cli("tools", "call", "hang", "{}", env=env, cwd=tmp_path)

    assert failed.returncode == 1 and "the ledger is locked" in failed.stdout
    assert failed.stderr.splitlines()[-1].startswith("error (fail, ")
    assert hung.returncode == 1 and "hang timed out after 1 s" in hung.stdout
    assert hung.stderr.splitlines()[-1].startswith("timed out (hang, ")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"a": 1, "b": "2"}', "argument 'b' for add must be integer, not string"),
        ('{"a": 1}', "add needs the argument 'b' (integer)"),
        ('{"a": 1, "b": 2, "c": 3}', "unknown argument 'c' for add (its arguments: a, b)"),
    ],
)
def test_an_mcp_tool_s_arguments_are_checked_against_its_schema(
    cli: Ferry, tmp_path: Path, mcp_config: Path, arguments: str, message: str
) -> None:
    env = with_mcp(tmp_path, mcp_config)
    done = cli("tools", "call", "add", arguments, env=env, cwd=tmp_path)

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1].startswith(f"ferry: {message}"), done.stderr
