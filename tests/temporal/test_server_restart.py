"""The Temporal server restarted, or gone, while `ferry ask --json` watches a turn.

The turn holds at a known point, by handshake: the worker's `lookup` tool holds mid-call while
a file exists (tests/temporal/worker_process.py). The test stops the server there, waits for
the client's one line, and starts the server again on the same address and state.

The client retries each call for 1 s (FERRY_TEMPORAL_RETRY_S) instead of the SDK's 10 s, so it
notices the server gone within a second or two; the worker keeps the defaults. The tests share
one server of the module's own, and one worker process, which rides out each restart; each test
on threads of its own.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from graph.temporal import connect
from tests.support.cli_helpers import RUN_TIMEOUT_S, Ferry, kill, start_ferry
from tests.support.servers.base import closed_port_url
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.temporal.helpers import (
    WAIT_LIMIT_S,
    DevServer,
    DevServerError,
    Shared,
    SharedWorker,
    shared_setup,
    shared_worker_process,
    wait_until,
)
from tests.temporal.worker_process import hold_file, tool_log

AWAY = "Temporal at {} is unreachable; the turn goes on; waiting…"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    """A Temporal dev server of this module's own, which its tests stop and start again."""
    try:
        server = DevServer(tmp_path_factory.mktemp("restarted"))
        server.start()
    except DevServerError as exc:
        pytest.fail(str(exc))
    yield server
    server.discard()


@pytest.fixture(scope="module")
def shared(server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """What the module's shared worker has in common with its clients: the module's server."""
    with shared_setup(server.address, tmp_path_factory.mktemp("shared")) as setup:
        yield setup


@pytest.fixture(scope="module")
def shared_worker(shared: Shared) -> Iterator[SharedWorker]:
    """The module's worker process, which rides out each restart."""
    with shared_worker_process(shared) as worker:
        yield worker


@pytest.fixture
def model(shared_model: OpenAIServer) -> OpenAIServer:
    return shared_model


@pytest.fixture
def env(
    server: DevServer, shared_worker: SharedWorker, model: OpenAIServer, tmp_path: Path
) -> Iterator[dict[str, str]]:
    """The environment of the shared worker's clients; the server running again after the test."""
    yield shared_worker.client_env(tmp_path)
    if not server.running:  # the test failed while its server was stopped
        server.start()


def _client_env(env: dict[str, str], **settings: str) -> dict[str, str]:
    """The client's environment: a call to a server that does not answer is retried for 1 s."""
    return {**env, "FERRY_TEMPORAL_RETRY_S": "1", **settings}


class Lines:
    """A process's stream, read line by line as it comes."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self._reader.start()

    def wait_for(self, line: str) -> None:
        wait_until(lambda: line in [kept.rstrip("\n") for kept in self.lines], repr(line))

    def text(self) -> str:
        self._reader.join(timeout=WAIT_LIMIT_S)
        return "".join(self.lines)


def _said(stderr: str) -> list[str]:
    """The lines on stderr besides the new thread's and the tool's progress."""
    progress = ("thread ", "→ lookup", "✓ lookup")
    return [line for line in stderr.splitlines() if not line.startswith(progress)]


def _runs() -> list[str]:
    return tool_log().read_text().splitlines() if tool_log().exists() else []


def _held_turn(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, thread_id: str
) -> tuple[subprocess.Popen[str], Lines, Lines]:
    """`ferry ask --json` on a turn whose lookup is running and held; the client and its output.

    `env` is the client's.
    """
    model.script([openai_tool_calls(("lookup", {"key": "k"})), openai_answer("k = 42.")])
    hold_file().touch()
    question = ("ask", "--json", "--thread", thread_id, "What is k?")
    client = start_ferry(*question, env=env, cwd=tmp_path)
    out, err = Lines(client.stdout), Lines(client.stderr)
    wait_until(lambda: _runs() == ["lookup k"], "the held lookup")
    return client, out, err


def _stored_answer(cli: Ferry, env: dict[str, str], tmp_path: Path, thread_id: str) -> str:
    in_process = {k: v for k, v in env.items() if k != "FERRY_TEMPORAL_ADDRESS"}
    history = cli("history", "--json", "--thread", thread_id, env=in_process, cwd=tmp_path)
    messages = json.loads(history.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    return str(messages[-1]["content"])


def test_a_server_restart_mid_turn_is_waited_for_and_the_answer_printed_as_one_object(
    server: DevServer, env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    client, out, err = _held_turn(_client_env(env), model, tmp_path, "restarted")
    try:
        server.stop()
        err.wait_for(AWAY.format(server.address))  # the client noticed, and waits
        server.start()
        hold_file().unlink()  # the turn goes on: the lookup ends, the model answers
        client.wait(timeout=RUN_TIMEOUT_S)
    finally:
        hold_file().unlink(missing_ok=True)
        kill(client)
    stdout, stderr = out.text(), err.text()
    assert client.returncode == 0, stderr
    report = json.loads(stdout)  # the whole of stdout: one object, no SDK line
    assert stdout.count("\n") == 1
    assert report["answer"] == "k = 42." and report["stop_reason"] == "answered"
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("lookup", "success")]
    assert _said(stderr) == [AWAY.format(server.address)], stderr  # no WARN, no RPCError
    assert _stored_answer(cli, env, tmp_path, "restarted") == "k = 42."
    assert _runs() == ["lookup k"]  # the call that ran through the restart ran once
    assert model.rejections == []


def test_a_server_away_longer_than_the_wait_ends_in_one_line_and_resume_finds_the_answer(
    server: DevServer, env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    client_env = _client_env(env, FERRY_TEMPORAL_WAIT_S="1")
    client, out, err = _held_turn(client_env, model, tmp_path, "gone")
    try:
        server.stop()
        client.wait(timeout=RUN_TIMEOUT_S)  # gives up on its own, once the wait is over
        server.start()
        hold_file().unlink()
        resumed = cli("resume", "--json", "--thread", "gone", env=client_env, cwd=tmp_path)
    finally:
        hold_file().unlink(missing_ok=True)
        kill(client)
    stdout, stderr = out.text(), err.text()
    assert client.returncode == 1
    failure = json.loads(stdout)  # one object
    assert stdout.count("\n") == 1 and failure["thread_id"] == "gone"
    assert failure["error"]["type"] == "connection_error"
    message = failure["error"]["message"]
    assert message.startswith(f"Temporal at {server.address} is still unreachable after 1 s")
    assert message.endswith("continue with: ferry resume --thread gone")
    assert _said(stderr) == [AWAY.format(server.address), f"ferry: {message}"], stderr
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["answer"] == "k = 42."  # the turn went on meanwhile
    assert _stored_answer(cli, env, tmp_path, "gone") == "k = 42."


def test_a_worker_started_before_its_server_waits_for_it_then_serves_turns(
    server: DevServer, env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    own = {**env, "FERRY_TEMPORAL_TASK_QUEUE": "started-early"}  # only this worker polls it
    server.stop()
    worker = start_ferry("worker", env=own, cwd=tmp_path)
    try:
        err = Lines(worker.stderr)
        err.wait_for(
            f"ferry worker: Temporal at {server.address} does not answer yet; waiting for it"
        )
        server.start()
        serving = "ferry worker: serving task queue started-early"
        wait_until(lambda: any(line.startswith(serving) for line in err.lines), "serving")
        model.script([openai_answer("Here.")])
        asked = cli("ask", "--json", "--thread", "early", "Are you there?", env=own, cwd=tmp_path)
    finally:
        kill(worker)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["answer"] == "Here."
    waits = [line for line in err.lines if "does not answer yet" in line]
    assert len(waits) == 1  # said once, however long the wait


def test_a_worker_waiting_for_its_server_stops_on_sigterm(
    env: dict[str, str], tmp_path: Path
) -> None:
    away = closed_port_url().removeprefix("http://")  # refused at once: no retry to wait out
    worker = start_ferry("worker", env={**env, "FERRY_TEMPORAL_ADDRESS": away}, cwd=tmp_path)
    try:
        err = Lines(worker.stderr)
        err.wait_for(f"ferry worker: Temporal at {away} does not answer yet; waiting for it")
        worker.send_signal(signal.SIGTERM)
        stopped = worker.wait(timeout=RUN_TIMEOUT_S)
    finally:
        kill(worker)
    assert stopped == 0, err.text()  # stopped as a serving worker stops, not killed by the signal
    assert "Traceback" not in err.text()


def test_a_call_is_retried_for_as_long_as_the_setting_says_and_no_count_cuts_it(
    temporal_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TEMPORAL_RETRY_S", "2.5")
    client = asyncio.run(connect(address=temporal_address))
    retry = client.service_client.config.retry_config
    assert retry is not None
    assert (retry.max_elapsed_time_millis, retry.max_retries) == (2500, 0)  # 0: no count
