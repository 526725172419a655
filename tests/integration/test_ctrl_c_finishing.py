"""Ctrl-C (SIGINT) to a real `ferry ask` after its answer is stored, while the process finishes.

Each test holds the process at a known point of its last moments and signals it there: printing
`--json` into a pipe nobody reads yet, and the interpreter's teardown after `main` returned.
The waits are for the process to reach that point; their bounds only guard against a hang.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from graph.cli.interrupt import AFTER_STORED
from tests.support.cli_helpers import Ferry, ferry_env, history, roles, succeeded

pytestmark = pytest.mark.timeout(90)

HANG_GUARD_S = 60.0
QUESTION = "What is 2 + 3?"
ANSWER = "`2 + 3` = 5"


def full_pipe() -> tuple[int, int]:
    """A pipe whose buffer the test has filled: a write to it blocks until the test reads."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    try:
        while True:
            os.write(write_end, b"\0" * 4096)
    except BlockingIOError:
        pass
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags)
    return read_end, write_end


def wait_until_writing_stdout(pid: int) -> None:
    """Wait until the process's main thread is blocked in write(2) on its stdout (fd 1)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not Path(f"/proc/{pid}/syscall").read_text().startswith("1 0x1 "):
        assert time.monotonic() < deadline, "the process never wrote its stdout"
        time.sleep(0.01)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/syscall")
def test_ctrl_c_while_the_json_is_printed_finishes_it_and_says_so(
    cli: Ferry, tmp_path: Path
) -> None:
    env = ferry_env(tmp_path, FERRY_MODEL="offline")
    thread_id = str(uuid.uuid4())
    read_end, write_end = full_pipe()
    with os.fdopen(read_end, "rb") as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "graph.cli", "ask", QUESTION, "--thread", thread_id, "--json"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
        )
        os.close(write_end)
        try:
            wait_until_writing_stdout(process.pid)  # the answer is stored: only output is left
            process.send_signal(signal.SIGINT)
            out = stdout.read()  # frees the pipe: the process goes on, to its end
            err = process.stderr.read().decode() if process.stderr else ""
            code = process.wait(timeout=HANG_GUARD_S)
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()  # and its pipes closed

    assert code == 0, err  # the run's own code: it answered, and what it stored is whole
    assert "Traceback" not in err and err.endswith(AFTER_STORED + "\n"), err
    assert [line for line in err.splitlines() if "interrupted" in line] == [AFTER_STORED]
    report = json.loads(out.lstrip(b"\0"))  # the whole object, after the test's filler
    assert (report["answer"], report["stop_reason"]) == (ANSWER, "answered")
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]
    assert messages[-1] == {"role": "assistant", "content": ANSWER}
    again = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    assert "nothing to resume" in again.stderr


# `ferry` as its console script runs it, holding the process in the interpreter's teardown (an
# object of __main__ is deleted there) until the test releases it: where CPython has put back
# SIGINT's default action, so a Ctrl-C would end the process by the signal, without a word.
HELD_IN_TEARDOWN = """
import os, runpy, sys

class HeldInTeardown:
    def __del__(self):
        os.write(2, b"held in teardown\\n")
        os.read(int(os.environ["HOLD_FD"]), 1)

held = HeldInTeardown()
sys.argv[0] = "ferry"
runpy.run_module("graph.cli", run_name="__main__")
"""


def test_ctrl_c_as_the_process_ends_never_kills_it_by_the_signal(
    cli: Ferry, tmp_path: Path
) -> None:
    hold, release = os.pipe()
    env = ferry_env(tmp_path, FERRY_MODEL="offline", HOLD_FD=str(hold))
    thread_id = str(uuid.uuid4())
    process = subprocess.Popen(
        [sys.executable, "-c", HELD_IN_TEARDOWN, "ask", QUESTION, "--thread", thread_id],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=(hold,),
    )
    os.close(hold)
    assert process.stderr is not None and process.stdout is not None
    try:
        lines = []
        for line in process.stderr:  # to its end, or to the hold in the teardown
            lines.append(line)
            if line == "held in teardown\n":
                process.send_signal(signal.SIGINT)
                break
        os.close(release)
        err = "".join(lines) + process.stderr.read()
        out = process.stdout.read()
        code = process.wait(timeout=HANG_GUARD_S)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()  # and its pipes closed

    # Ferry ends the process once its command is done: no teardown for a Ctrl-C to land in.
    assert code == 0, (code, err)
    assert "held in teardown" not in err and "Traceback" not in err, err
    assert out == ANSWER + "\n"
    assert history(thread_id, env=env, cwd=tmp_path, run=cli)[-1]["content"] == ANSWER
