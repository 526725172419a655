"""Ctrl-C in `ferry chat` on a terminal: mid-answer it cancels the answer, at the prompt it ends.

`ferry chat` runs on a pseudo-terminal that is its controlling terminal (`setsid --ctty`:
readline, `isatty`), and Ctrl-C is typed there, so the terminal itself echoes `^C` and sends
SIGINT. The held Open-Meteo server holds the forecast request until the test releases it, so
Ctrl-C lands mid-tool and the cancelled run is still running when the next question comes.
Every wait is for text on the screen or an event, bounded only as a hang guard.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_helpers import (
    FERRY,
    Ferry,
    assert_every_call_answered_in_place,
    ferry_env,
    history,
    roles,
    succeeded,
    tool_results,
)
from tests.support.held import HOLD_LIMIT_S, HeldForecastServer, held_step
from tests.support.servers.openai import OpenAIServer, openai_answer

pytestmark = pytest.mark.timeout(120)

SCREEN_WAIT_S = 30.0  # a hang guard: what is awaited is always on its way
BOGOTA = "Bogotá, Bogota D.C., Colombia: 14.2 °C"
WAITING = "ferry: waiting for the cancelled answer to finish its running step"
# What a terminal shows but a test reads past: escape sequences (readline's), carriage returns.
NOT_TEXT = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


class Chat:
    """`ferry chat` on a pseudo-terminal: type lines, press Ctrl-C, read the screen."""

    def __init__(self, thread_id: str, *, env: dict[str, str], cwd: Path) -> None:
        self.thread_id = thread_id
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            ["setsid", "--ctty", *FERRY, "chat", "--thread", thread_id],
            env=env,
            cwd=cwd,
            stdin=slave,
            stdout=slave,
            stderr=slave,
        )
        os.close(slave)
        self.screen = ""  # everything shown so far, as text
        self._read_to = 0  # how far `expect` has matched

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")  # the terminal sends SIGINT to its foreground process

    def ctrl_d(self) -> None:
        os.write(self.master, b"\x04")

    def expect(self, text: str) -> str:
        """Wait until `text` is shown after what was expected before; the screen up to it."""
        deadline = time.monotonic() + SCREEN_WAIT_S
        while (found := self.screen.find(text, self._read_to)) < 0:
            assert time.monotonic() < deadline, f"{text!r} never shown:\n{self.screen}"
            assert self._read(deadline), f"ended before showing {text!r}:\n{self.screen}"
        shown, self._read_to = self.screen[self._read_to : found], found + len(text)
        return shown

    def _read(self, deadline: float) -> bool:
        """Read what the terminal shows next; False once the process has closed it."""
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return True
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: the process ended and closed the terminal
            return False
        self.screen += NOT_TEXT.sub("", data.decode(errors="replace"))
        return bool(data)

    def wait(self) -> int:
        """The exit code, once the process has ended (hang guard: SCREEN_WAIT_S)."""
        code = self.process.wait(timeout=SCREEN_WAIT_S)
        while self._read(time.monotonic() + 0.1):  # the rest of the screen
            pass
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=SCREEN_WAIT_S)
        os.close(self.master)


@pytest.fixture
def openmeteo() -> Iterator[HeldForecastServer]:
    with HeldForecastServer() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, openmeteo: HeldForecastServer) -> dict[str, str]:
    # The held request waits for the test, not for the HTTP client to give up and retry.
    return ferry_env(tmp_path, weather=openmeteo, FERRY_HTTP_TIMEOUT_S=str(HOLD_LIMIT_S * 2))


@pytest.fixture
def thread_id() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def chat(env: dict[str, str], tmp_path: Path, thread_id: str) -> Iterator[Chat]:
    session = Chat(thread_id, env=env, cwd=tmp_path)
    try:
        session.expect("you> ")
        yield session
    finally:
        session.close()


def cancelled_line(thread_id: str) -> str:
    return (
        f"ferry: answer cancelled; continue it with: ferry resume --thread {thread_id}, or ask on"
    )


def cancel_mid_tool(chat: Chat, openmeteo: HeldForecastServer, *, presses: int = 1) -> None:
    """Ask for the weather, press Ctrl-C while the forecast is held; back at the prompt."""
    chat.type("what's the weather in Bogotá?")
    assert openmeteo.forecast_arrived.wait(HOLD_LIMIT_S), "the forecast was never requested"
    for _ in range(presses):
        chat.ctrl_c()
    chat.expect('→ get_weather(city="Bogotá", units="celsius")\n')
    chat.expect("^C\n" + cancelled_line(chat.thread_id) + "\n")  # on its own line
    # Then the prompt; the terminal echoes a later press whenever it reads it, before the
    # prompt or after it, and nothing else may come between.
    between = chat.expect("you> ")
    assert between.replace("^C", "").strip("\n") == "", chat.screen
    assert between.count("^C") <= presses - 1, chat.screen
    assert not openmeteo.forecast_answered.is_set(), "the chat waited for the cancelled tool"


def press_ctrl_c_at_the_prompt(chat: Chat) -> int:
    """Ctrl-C at the idle prompt until the chat ends; its exit code.

    A press in the instant between the prompt being drawn and the terminal being read waits
    for the next key (as in any readline program); a person's next press ends it, and so does
    the test's.
    """
    for _ in range(10):
        chat.ctrl_c()
        try:
            return chat.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            continue
    raise AssertionError(f"Ctrl-C at the prompt never ended the chat:\n{chat.screen}")


def test_ctrl_c_mid_tool_cancels_the_answer_and_the_chat_goes_on(
    chat: Chat, openmeteo: HeldForecastServer, env: dict[str, str], tmp_path: Path, cli: Ferry
) -> None:
    cancel_mid_tool(chat, openmeteo)

    chat.type("What is 2 + 2?")
    chat.expect(WAITING)  # the cancelled run still holds the thread: never two runs on it
    openmeteo.release.set()
    chat.expect('→ calculator(expression="2 + 2")\n✓ calculator ')
    chat.expect("`2 + 2` = 4\nyou> ")

    assert press_ctrl_c_at_the_prompt(chat) == 0
    chat.wait()
    assert "Traceback" not in chat.screen and "Error" not in chat.screen, chat.screen
    assert chat.screen.count("ferry: answer cancelled") == 1, chat.screen
    messages = history(chat.thread_id, env=env, cwd=tmp_path, run=cli)
    # The cancelled turn stopped at its step boundary: the tool's result, and no answer.
    assert roles(messages) == [
        "user", "assistant", "tool",
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert_every_call_answered_in_place(messages)
    [call] = messages[1]["tool_calls"]
    [result] = tool_results(messages, call["id"])
    assert result["status"] == "success" and result["content"].startswith(BOGOTA)
    assert messages[3] == {"role": "user", "content": "What is 2 + 2?"}


def test_a_double_ctrl_c_mid_answer_cancels_once_and_the_chat_goes_on(
    chat: Chat, openmeteo: HeldForecastServer, env: dict[str, str], tmp_path: Path, cli: Ferry
) -> None:
    cancel_mid_tool(chat, openmeteo, presses=2)  # an impatient double press
    openmeteo.release.set()

    chat.type("What is 3 * 3?")
    chat.expect("`3 * 3` = 9\nyou> ")
    chat.ctrl_d()
    assert chat.wait() == 0
    assert "Traceback" not in chat.screen and "Error" not in chat.screen, chat.screen
    assert chat.screen.count("ferry: answer cancelled") == 1, chat.screen
    messages = history(chat.thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages)[3:] == ["user", "assistant", "tool", "assistant"]
    assert_every_call_answered_in_place(messages)


def test_leaving_after_a_cancel_does_not_wait_and_resume_finishes_the_turn(
    chat: Chat, openmeteo: HeldForecastServer, env: dict[str, str], tmp_path: Path, cli: Ferry
) -> None:
    cancel_mid_tool(chat, openmeteo)

    chat.ctrl_d()  # the forecast is still held: the chat ends without waiting for it
    assert chat.wait() == 0
    assert not openmeteo.forecast_answered.is_set(), "the chat waited for the cancelled tool"
    assert "Traceback" not in chat.screen, chat.screen
    openmeteo.release.set()  # the abandoned request: nobody reads its reply

    resumed = succeeded(cli("resume", "--thread", chat.thread_id, env=env, cwd=tmp_path))
    assert BOGOTA in resumed.stdout
    messages = history(chat.thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]
    assert_every_call_answered_in_place(messages)


def test_ctrl_c_at_the_idle_prompt_ends_the_chat_with_0(chat: Chat) -> None:
    assert press_ctrl_c_at_the_prompt(chat) == 0
    chat.wait()
    assert re.search(r"\nyou> (\^C)+\n$", chat.screen), chat.screen  # and nothing more
    assert "ferry:" not in chat.screen, chat.screen


def test_ctrl_c_mid_model_call_stores_no_cancelled_reply(tmp_path: Path, cli: Ferry) -> None:
    arrived, release = threading.Event(), threading.Event()
    with OpenAIServer() as openai:
        openai.script(
            [
                # The reply the person cancels: it arrives only after Ctrl-C, and is dropped.
                held_step(arrived, release, openai_answer("Every hour, day and night.")),
                openai_answer("Every two hours at night."),
            ]
        )
        env = ferry_env(tmp_path, model=openai)
        chat = Chat(str(uuid.uuid4()), env=env, cwd=tmp_path)
        try:
            chat.expect("you> ")
            chat.type("How often do ferries run?")
            assert arrived.wait(HOLD_LIMIT_S), "the model was never called"
            chat.ctrl_c()
            chat.expect("^C\n" + cancelled_line(chat.thread_id) + "\nyou> ")
            chat.type("And at night?")
            chat.expect(WAITING)  # the model call is still out
            release.set()
            chat.expect("Every two hours at night.\nyou> ")
            chat.ctrl_d()
            assert chat.wait() == 0
        finally:
            release.set()
            chat.close()
        assert "Every hour" not in chat.screen, chat.screen
        assert openai.rejections == []
        openai.assert_complete()
        sent = openai.chat_requests()[-1]["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == [
            "How often do ferries run?",
            "And at night?",
        ]
    messages = history(chat.thread_id, env=env, cwd=tmp_path, run=cli)
    assert messages == [
        {"role": "user", "content": "How often do ferries run?"},
        {"role": "user", "content": "And at night?"},
        {"role": "assistant", "content": "Every two hours at night."},
    ]
