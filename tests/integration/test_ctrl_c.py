"""Ctrl-C (SIGINT) to a real `ferry` process mid-tool, mid-model and mid-stream, then resume.

Each run holds one request at a loopback server, so the signal lands at a known point; the
time from SIGINT to exit is bounded generously (Ferry aims at well under a second) to stay
deterministic on a loaded machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig

from tests.support.cli_helpers import (
    Ferry,
    assert_every_call_answered_in_place,
    ferry_env,
    history,
    roles,
    start_ferry,
    succeeded,
    tool_results,
    wait_until,
)
from tests.support.held import HOLD_LIMIT_S, HeldForecastServer, held_step
from tests.support.servers.openai import (
    OpenAIServer,
    openai_answer,
    openai_tool_calls,
    slow_stream,
)

pytestmark = pytest.mark.timeout(90)

EXIT_BOUND_S = 5.0
BOGOTA = "Bogotá, Bogota D.C., Colombia: 14.2 °C"


@pytest.fixture
def openmeteo() -> Iterator[HeldForecastServer]:
    with HeldForecastServer() as server:
        yield server


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def interrupt(
    process: subprocess.Popen[str], *, again_after_s: float | None = None
) -> tuple[float, str, str]:
    """SIGINT the process (twice if asked); the seconds until it exited, its stdout, stderr."""
    sent = time.monotonic()
    process.send_signal(signal.SIGINT)
    if again_after_s is not None:
        time.sleep(again_after_s)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
        seconds = time.monotonic() - sent
    finally:  # a process that hangs is killed and its pipes closed, so no later test sees it
        if process.poll() is None:
            process.kill()
        out, err = process.communicate(timeout=30)
    return seconds, out, err


def assert_interrupted(
    code: int | None, err: str, thread_id: str, *, seconds: float | None = None
) -> None:
    """Exit 130 (within EXIT_BOUND_S of SIGINT, if `seconds` are given), one line, no traceback.

    A test that holds what the run was doing checks instead that the run did not wait for it:
    a busy machine may take longer than any bound to exit, but never waits for the hold.
    """
    assert code == 130, err
    if seconds is not None:
        assert seconds < EXIT_BOUND_S, seconds
    assert "Traceback" not in err and "Error" not in err, err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert said == [f"ferry: interrupted; continue with: ferry resume --thread {thread_id}"], err
    assert err.endswith(said[0] + "\n"), err  # nothing printed after it


@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_ctrl_c_mid_tool_exits_at_once_and_resume_reruns_the_call(
    cli: Ferry, tmp_path: Path, openmeteo: HeldForecastServer, twice: bool
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo)
    thread_id = str(uuid.uuid4())
    question = "what's the weather in Bogotá?"
    process = start_ferry("ask", question, "--thread", thread_id, env=env, cwd=tmp_path)
    assert openmeteo.forecast_arrived.wait(HOLD_LIMIT_S), "the forecast was never requested"

    _, _, err = interrupt(process, again_after_s=0.05 if twice else None)

    assert not openmeteo.forecast_answered.is_set(), "the run waited for its tool call"
    assert_interrupted(process.returncode, err, thread_id)
    openmeteo.release.set()  # the abandoned call's request: nobody reads its reply
    resumed = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    assert BOGOTA in resumed.stdout
    # The same progress as `ask`: the call announced, then its outcome.
    tool_lines = [line for line in resumed.stderr.splitlines() if line[:1] in "→✓✗"]
    assert tool_lines[0] == '→ get_weather(city="Bogotá", units="celsius")', resumed.stderr
    assert tool_lines[1].startswith("✓ get_weather"), resumed.stderr
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]
    assert_every_call_answered_in_place(messages)
    [call] = messages[1]["tool_calls"]
    [result] = tool_results(messages, call["id"])
    assert result["status"] == "success" and result["content"].startswith(BOGOTA)


def test_ctrl_c_during_a_model_call_then_resume_is_accepted_by_the_provider(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer
) -> None:
    arrived, release, answered = threading.Event(), threading.Event(), threading.Event()
    answer = "150 * 3 = 450."
    openai.script(
        [
            openai_tool_calls(("calculator", {"expression": "150 * 3"}, "call_calc")),
            held_step(arrived, release, openai_answer(answer), answered),  # the interrupted call
            openai_answer(answer),
        ]
    )
    env = ferry_env(tmp_path, model=openai)
    thread_id = str(uuid.uuid4())
    process = start_ferry("ask", "What is 150 * 3?", "--thread", thread_id, env=env, cwd=tmp_path)
    try:
        assert arrived.wait(HOLD_LIMIT_S), "the second model call never came"
        _, _, err = interrupt(process, again_after_s=0.05)
        assert not answered.is_set(), "the run waited for the model's reply"
    finally:
        release.set()

    assert_interrupted(process.returncode, err, thread_id)
    resumed = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    assert resumed.stdout == answer + "\n"
    assert openai.rejections == []
    openai.assert_complete()
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]
    assert_every_call_answered_in_place(messages)
    assert messages[3] == {"role": "assistant", "content": answer}


def test_ctrl_c_mid_stream_then_resume_answers_once(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer
) -> None:
    long_answer = "Ferries cross the strait every hour, " * 8
    openai.script([slow_stream(openai_answer(long_answer), 0.1), openai_answer("Every hour.")])
    env = ferry_env(tmp_path, model=openai)
    thread_id = str(uuid.uuid4())
    process = start_ferry("ask", "How often?", "--thread", thread_id, env=env, cwd=tmp_path)
    wait_until(lambda: len(openai.chat_requests()) == 1, "the model call", timeout=HOLD_LIMIT_S)
    time.sleep(1.0)  # a few chunks on their way: the answer is streaming

    seconds, out, err = interrupt(process)

    assert_interrupted(process.returncode, err, thread_id, seconds=seconds)
    assert long_answer.startswith(out) and out, out  # a part of the answer, printed as it came
    resumed = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    assert resumed.stdout == "Every hour.\n"
    assert openai.rejections == []
    openai.assert_complete()
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert messages == [
        {"role": "user", "content": "How often?"},
        {"role": "assistant", "content": "Every hour."},
    ]


def test_ctrl_c_at_the_idle_chat_prompt_exits_quietly(tmp_path: Path) -> None:
    env = ferry_env(tmp_path)
    process = start_ferry("chat", env=env, cwd=tmp_path, stdin=subprocess.PIPE)
    assert process.stderr is not None
    try:
        assert process.stderr.readline().startswith("thread: ")
        assert process.stderr.read(5) == "you> "  # waiting for a question (stdout is piped)
        # A signal in the microseconds between the prompt and the blocking read would wait
        # for the next bytecode; a person cannot press Ctrl-C that fast.
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
    out, err = process.communicate(timeout=30)
    assert code == 0, err
    assert (out, err) == ("", "")  # nothing after the prompt: no traceback, no line


def test_resume_completes_a_turn_nothing_is_planned_for(cli: Ferry, tmp_path: Path) -> None:
    """A kill between a step's writes and its checkpoint can leave `state.next` empty although
    the last message is a question no one answered: `resume` goes by the messages."""
    from graph.builder import build_graph
    from graph.core.settings import Settings
    from graph.storage import open_saver

    env = ferry_env(tmp_path)
    thread_id = str(uuid.uuid4())
    succeeded(cli("ask", "What is 2 + 3?", "--thread", thread_id, env=env, cwd=tmp_path))
    settings = Settings(db=tmp_path / "ferry.db", model="offline")
    with open_saver(settings) as saver:
        graph = build_graph(checkpointer=saver, settings=settings)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        # Stored as if `check` had run after it: the turn looks over, nothing is planned.
        graph.update_state(config, {"messages": [("user", "What is 2 + 2?")]}, as_node="check")
        assert graph.get_state(config).next == ()

    resumed = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))

    assert resumed.stdout == "`2 + 2` = 4\n"
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == [
        "user", "assistant", "tool", "assistant",
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert_every_call_answered_in_place(messages)
    again = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))
    assert "nothing to resume" in again.stderr
