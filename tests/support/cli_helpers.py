"""Run `ferry` the way a user does, and read what it stored.

    env = ferry_env(tmp_path, weather=openmeteo)
    done = ferry("ask", "What is 150 * 3?", env=env, cwd=tmp_path)
    messages = history(new_thread_id(done.stderr), env=env, cwd=tmp_path)

`ferry` starts a separate process: an explicit environment built from `os.environ` (already
cleaned by conftest), no stdin, and a timeout. Keep it for what only a process shows (signals,
kills, a closed pipe, startup imports). The `cli` fixture runs the same command in-process with
the same signature and result, for the arguments, output and exit-code contract.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pytest
from langchain_core.messages import ToolMessage

from graph.core.log import DRIVER_LOGGERS
from graph.core.settings import Settings
from graph.storage import open_saver
from tests.support.servers.base import LoopbackServer
from tests.support.stored import step_values, write_records, write_values

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
RUN_TIMEOUT_S = 60.0
FERRY = [sys.executable, "-m", "graph.cli"]


def ferry_env(
    tmp_path: Path,
    *,
    weather: LoopbackServer | None = None,
    model: LoopbackServer | None = None,
    **settings: str,
) -> dict[str, str]:
    """The environment of one test's `ferry` processes: its own database, files root and servers.

    `model` is an OpenAI-compatible server: the real client is used with a fake key.
    """
    env = dict(os.environ)
    env["FERRY_DB"] = str(tmp_path / "ferry.db")
    env["FERRY_FILES_ROOT"] = str(tmp_path)
    if weather is not None:
        env["FERRY_GEOCODING_URL"] = env["FERRY_FORECAST_URL"] = weather.url + "/v1"
    if model is not None:
        env["OPENAI_API_KEY"] = "sk-test-fake"
        env["OPENAI_BASE_URL"] = model.url + "/v1"
        env["FERRY_MODEL"] = "openai:gpt-4.1-mini"
    env.update(settings)
    return env


def ferry(
    *args: str,
    env: dict[str, str],
    cwd: Path,
    timeout: float = RUN_TIMEOUT_S,
    input: str | None = None,  # noqa: A002 - subprocess.run's name
) -> subprocess.CompletedProcess[str]:
    """Run `ferry ARGS…` to completion, `input` on its stdin (else none), and capture its output."""
    return run_command([*FERRY, *args], env=env, cwd=cwd, timeout=timeout, input=input)


class Ferry(Protocol):
    """Runs `ferry ARGS…` to completion: `ferry` (a process) or the `cli` fixture (in-process)."""

    def __call__(
        self, *args: str, env: dict[str, str], cwd: Path
    ) -> subprocess.CompletedProcess[str]: ...


# The loggers `configure_logging` takes over; an in-process run must hand them back.
_CLI_LOGGERS = ("ferry", "openai._base_client", *DRIVER_LOGGERS)


def ferry_in_process(
    *args: str, env: dict[str, str], cwd: Path, capsys: pytest.CaptureFixture[str]
) -> subprocess.CompletedProcess[str]:
    """Run `graph.cli.main(ARGS)` with exactly `env`, in `cwd`, no stdin; capture its output."""
    from graph.cli import main

    loggers = [logging.getLogger(name) for name in _CLI_LOGGERS]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        for name in set(os.environ) - set(env):
            patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        patch.chdir(cwd)
        patch.setattr(sys, "stdin", io.StringIO(""))
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 1
        finally:
            # A trusted `.env` wrote its variables into os.environ: a process's would end with it.
            for name in set(os.environ) - set(env):
                del os.environ[name]
            for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
                for handler in set(logger.handlers) - set(handlers):
                    handler.close()
                logger.handlers[:] = handlers
                logger.setLevel(level)
                logger.propagate = propagate
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["ferry", *args], code, out, err)


def run_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float = RUN_TIMEOUT_S,
    input: str | None = None,  # noqa: A002 - subprocess.run's name
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion, `input` on its stdin (else none), capturing its output."""
    return subprocess.run(
        argv,
        env=env,
        cwd=cwd,
        **({"stdin": subprocess.DEVNULL} if input is None else {"input": input}),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )


def start_ferry(
    *args: str, env: dict[str, str], cwd: Path, stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """Start `ferry ARGS…` in the background (to kill it mid-run)."""
    return subprocess.Popen(
        [*FERRY, *args],
        env=env,
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def kill(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL the process (no cleanup runs in it, like a crash); return its stdout and stderr."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    return out, err


def succeeded(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """Fail with the process's stderr unless it exited 0."""
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def one_json_object(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The single JSON object a `--json` command printed (the whole of stdout)."""
    value = json.loads(succeeded(done).stdout)
    assert isinstance(value, dict)
    assert done.stdout.count("\n") == 1 and done.stdout.endswith("\n"), done.stdout
    return value


def new_thread_id(stderr: str) -> str:
    """The `thread: <id>` a plain `ask` printed for a new thread (exactly one such line)."""
    ids = [
        line.removeprefix("thread: ") for line in stderr.splitlines() if line.startswith("thread: ")
    ]
    assert len(ids) == 1, stderr
    assert UUID4.fullmatch(ids[0]), ids[0]
    return ids[0]


def history(
    thread_id: str, *, env: dict[str, str], cwd: Path, run: Ferry = ferry
) -> list[dict[str, Any]]:
    """The thread's stored messages, as `ferry history --json` shows them."""
    report = one_json_object(run("history", "--thread", thread_id, "--json", env=env, cwd=cwd))
    assert report["thread_id"] == thread_id
    messages: list[dict[str, Any]] = report["messages"]
    return messages


def roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def tool_results(messages: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool" and m["tool_call_id"] == call_id]


def assert_every_call_answered_in_place(messages: list[dict[str, Any]]) -> None:
    """Each assistant message's calls are answered, once each, by the tool messages right after it.

    This is what providers require: no dangling call, no stray or duplicate result, and nothing
    (e.g. the next question) between a call and its result.
    """
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"tool message {i} answers no call just before it"
        calls = [c["id"] for c in message.get("tool_calls", [])]
        block = messages[i + 1 : i + 1 + len(calls)]
        assert [m["role"] for m in block] == ["tool"] * len(calls), (i, messages)
        assert sorted(m["tool_call_id"] for m in block) == sorted(calls), (i, messages)
        i += 1 + len(calls)


def stored_tool_results(db: Path, thread_id: str) -> list[ToolMessage]:
    """Tool results written to the database for the thread, pending writes included.

    A tool that finished while its siblings still run is stored only as a pending write of the
    step, so this reads the raw writes (with Ferry's own serializer) instead of the state.
    """
    if not db.exists():
        return []
    with open_saver(Settings(db=db)) as saver:
        try:
            rows = write_values(saver.conn, thread_id, "messages")
        except sqlite3.OperationalError:  # the process has not created its tables yet
            return []
        written = [saver.serde.loads_typed(value) for value in rows]
    messages = [m for w in written for m in (w if isinstance(w, list) else [w])]
    return [m for m in messages if isinstance(m, ToolMessage)]


def stored_text(db: Path) -> str:
    """Everything the database holds, decoded: stored values are compressed, so a secret in
    one would not show in the file's bytes."""
    with open_saver(Settings(db=db)) as saver:
        rows = [
            *step_values(saver.conn),
            *((value, channel) for _, (_, channel, *value) in write_records(saver.conn)),
        ]
        return "\n".join(f"{saver.serde.loads_typed(tuple(v))!r} {other!r}" for v, other in rows)


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll `condition` until it holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
