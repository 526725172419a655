"""Start `langgraph dev` on the repository's `langgraph.json`, as a user does, and stop it cleanly.

    with langgraph_dev(tmp_path, env) as client:   # a langgraph-sdk client
        client.threads.search()
    with serving(tmp_path, env) as url:            # just the URL, for raw HTTP requests
        httpx.get(f"{url}/ok")

Starting the server takes seconds: a test starts as few as it can.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

REPO = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
STARTUP_TIMEOUT_S = 60.0
READY_POLL_S = 0.05  # a refused connection costs nothing: a test waits no longer than it must
STOP_TIMEOUT_S = 15.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def project_folder(tmp_path: Path) -> Path:
    """A folder where `langgraph dev` finds the repository's `langgraph.json` and `graph/`.

    The dev server keeps its registry in `.langgraph_api/` under the folder it starts in, and
    Ferry reads `.env` from there: linking the two files the configuration names, instead of
    starting in the repository, keeps both to this test.
    """
    folder = tmp_path / "project"
    if not folder.exists():
        folder.mkdir()
        for name in ("langgraph.json", "graph"):
            (folder / name).symlink_to(REPO / name)
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(
    tmp_path: Path, env: dict[str, str], expected_errors: tuple[str, ...] = ()
) -> Iterator[str]:
    """Start `langgraph dev`, wait until it serves, yield its URL; then stop it, cleanly.

    The server logs a traceback for every failed run or request; those ending in one of
    `expected_errors` (an exception's qualified name) are errors the test provoked.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    earlier = list(tmp_path.glob("langgraph-dev-*.log"))
    log_path = tmp_path / f"langgraph-dev-{len(earlier) + 1}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
            + ["--port", str(port)],
            cwd=project_folder(tmp_path),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until_ready(url, process, log_path)
        try:
            yield url
        except BaseException as exc:
            exc.add_note(f"langgraph dev's log ends:\n{server_log(log_path)[-4000:]}")
            raise
    finally:
        stopped = stop(process)
    assert stopped, f"langgraph dev did not stop on SIGTERM\n{server_log(log_path)[-4000:]}"
    log = server_log(log_path)
    assert not unexpected_tracebacks(log, expected_errors), log


@contextlib.contextmanager
def langgraph_dev(
    tmp_path: Path, env: dict[str, str], expected_errors: tuple[str, ...] = ()
) -> Iterator[SyncLangGraphClient]:
    """Start `langgraph dev` (see `serving`) and yield a langgraph-sdk client of it."""
    with (
        serving(tmp_path, env, expected_errors) as url,
        get_sync_client(url=url, api_key=None) as client,
    ):
        yield client


def unexpected_tracebacks(log: str, expected_errors: tuple[str, ...]) -> list[str]:
    """The tracebacks in a server log whose exception is not one of `expected_errors`."""
    found = []
    for block in log.split("Traceback (most recent call last):")[1:]:
        # A traceback's frames are indented; its first unindented line names the exception.
        lines = [line for line in block.splitlines() if line and not line[0].isspace()]
        error = lines[0].split(":")[0] if lines else ""
        if error not in expected_errors:
            found.append(error or block[:200])
    return found


def server_log(path: Path) -> str:
    """The server's output, without terminal colours."""
    return ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))


def wait_until_ready(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"exited {process.returncode}\n{server_log(log_path)}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(READY_POLL_S)
    raise AssertionError(f"not serving after {STARTUP_TIMEOUT_S} s\n{server_log(log_path)}")


def stop(process: subprocess.Popen[bytes]) -> bool:
    """SIGTERM the server's process group, SIGKILL what is left; whether it stopped in time."""
    stopped = False
    if process.poll() is None:  # else it died by itself
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
            stopped = True
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # the group is empty after a clean stop
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=STOP_TIMEOUT_S)
    return stopped
