"""`ferry` killed mid-run (SIGKILL, like a crash), then resumed or asked something new.

Each test holds one request at a loopback server (the weather forecast, or a model call) so the
kill lands at a known point, not after a guessed delay.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from graph.core.fence import fenced_data
from graph.guards import INTERRUPTED
from tests.support.cli_helpers import (
    Ferry,
    assert_every_call_answered_in_place,
    ferry_env,
    history,
    kill,
    one_json_object,
    roles,
    start_ferry,
    stored_tool_results,
    succeeded,
    tool_results,
    wait_until,
)
from tests.support.held import HOLD_LIMIT_S, HeldForecastServer, held_step
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls

pytestmark = pytest.mark.timeout(90)

QUESTION = "how much is 150 * 3, and what's the weather in Bogotá?"
BOGOTA = "Bogotá, Bogota D.C., Colombia: 14.2 °C"


@pytest.fixture
def openmeteo() -> Iterator[HeldForecastServer]:
    with HeldForecastServer() as server:
        yield server


@pytest.fixture
def openai() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def kill_while_forecast_is_held(
    tmp_path: Path, env: dict[str, str], openmeteo: HeldForecastServer
) -> tuple[str, ToolMessage]:
    """Ask QUESTION on a new thread and SIGKILL ferry once the calculator's result is stored
    while the weather call waits for its forecast. Return the thread id and that result."""
    thread_id = str(uuid.uuid4())
    process = start_ferry("ask", QUESTION, "--thread", thread_id, env=env, cwd=tmp_path)
    try:
        assert openmeteo.forecast_arrived.wait(HOLD_LIMIT_S), "the forecast was never requested"
        stored = wait_for_results(tmp_path, thread_id, ["calculator"])
    finally:
        _, err = kill(process)
    assert process.returncode == -9, err
    assert "Traceback" not in err
    openmeteo.release.set()  # the killed process will never read the reply
    return thread_id, stored[0]


def wait_for_results(tmp_path: Path, thread_id: str, names: list[str]) -> list[ToolMessage]:
    """Wait until the tool results stored for the thread are those of `names`, and return them."""
    wait_until(
        lambda: [m.name for m in stored_tool_results(tmp_path / "ferry.db", thread_id)] == names,
        f"{names} results to be stored",
    )
    return stored_tool_results(tmp_path / "ferry.db", thread_id)


def calls_by_name(message: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["id"] for c in message["tool_calls"]}


# --- offline model ------------------------------------------------------------------------------


def test_resume_after_a_kill_mid_tool_runs_only_the_unfinished_call(
    cli: Ferry, tmp_path: Path, openmeteo: HeldForecastServer
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo)
    thread_id, calculator_result = kill_while_forecast_is_held(tmp_path, env, openmeteo)
    before = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(before) == ["user", "assistant", "tool"]  # the weather call is unfinished
    ids = calls_by_name(before[1])
    assert set(ids) == {"calculator", "get_weather"}
    assert before[2]["tool_call_id"] == ids["calculator"] and before[2]["content"] == "450"

    resumed = cli("resume", "--thread", thread_id, "--json", env=env, cwd=tmp_path)
    report = one_json_object(resumed)

    assert report["thread_id"] == thread_id
    assert report["stop_reason"] == "answered"
    assert report["model_calls"] == 1  # the answer; the calls were planned before the kill
    assert "`150 * 3` = 450" in report["answer"]
    assert BOGOTA in report["answer"]
    # Only the weather call ran in this invocation; the calculator's result was replayed.
    assert [(c["id"], c["name"], c["status"]) for c in report["tool_calls"]] == [
        (ids["get_weather"], "get_weather", "success")
    ]
    assert "calculator" not in resumed.stderr  # no progress line for a call that did not run

    after = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(after) == ["user", "assistant", "tool", "tool", "assistant"]
    assert_every_call_answered_in_place(after)
    [calculator] = tool_results(after, ids["calculator"])
    assert (calculator["content"], calculator["status"]) == ("450", "success")
    [forecast] = tool_results(after, ids["get_weather"])
    assert forecast["status"] == "success" and forecast["content"].startswith(BOGOTA)
    # The calculator ran once, before the kill: its stored result (a fresh message id each run)
    # is the one kept. The weather call had not finished, so it ran again from the start: one
    # geocoding and one forecast request before the kill, one of each after.
    stored = stored_tool_results(tmp_path / "ferry.db", thread_id)
    assert sorted(m.name or "" for m in stored) == ["calculator", "get_weather"]
    assert calculator_result in stored
    assert len(openmeteo.requests_to("/v1/search")) == 2
    assert len(openmeteo.requests_to("/v1/forecast")) == 2


def test_new_question_after_a_kill_mid_tool_answers_the_dangling_call_in_place(
    cli: Ferry, tmp_path: Path, openmeteo: HeldForecastServer
) -> None:
    env = ferry_env(tmp_path, weather=openmeteo)
    thread_id, _ = kill_while_forecast_is_held(tmp_path, env, openmeteo)

    done = succeeded(cli("ask", "What is 2 + 2?", "--thread", thread_id, env=env, cwd=tmp_path))

    assert done.stdout == "`2 + 2` = 4\n"
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == [
        "user", "assistant", "tool", "tool",
        "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert_every_call_answered_in_place(messages)
    ids = calls_by_name(messages[1])
    [forecast] = tool_results(messages, ids["get_weather"])
    assert (forecast["status"], forecast["content"]) == ("error", INTERRUPTED)
    [calculator] = tool_results(messages, ids["calculator"])  # finished before the kill: kept
    assert (calculator["status"], calculator["content"]) == ("success", "450")
    assert messages[4] == {"role": "user", "content": "What is 2 + 2?"}
    assert messages[6]["content"] == "4" and messages[6]["status"] == "success"
    # A new question does not re-run the old calls.
    assert len(openmeteo.requests_to("/v1/search")) == 1
    assert len(openmeteo.requests_to("/v1/forecast")) == 1


# --- the real OpenAI client against a loopback server (400 on any dangling call) -----------------


def test_new_question_after_a_kill_mid_tool_is_accepted_by_the_provider(
    cli: Ferry, tmp_path: Path, openmeteo: HeldForecastServer, openai: OpenAIServer
) -> None:
    openai.script(
        [
            openai_tool_calls(
                ("calculator", {"expression": "150 * 3"}, "call_calc"),
                ("get_weather", {"city": "Bogotá"}, "call_weather"),
            ),
            openai_answer("2 + 2 is 4."),
            openai_answer("Yes, 4."),
        ]
    )
    env = ferry_env(tmp_path, weather=openmeteo, model=openai)
    thread_id, _ = kill_while_forecast_is_held(tmp_path, env, openmeteo)

    report = one_json_object(
        cli("ask", "What is 2 + 2?", "--thread", thread_id, "--json", env=env, cwd=tmp_path)
    )

    assert openai.rejections == []
    assert (report["answer"], report["stop_reason"], report["model_calls"]) == (
        "2 + 2 is 4.",
        "answered",
        1,
    )
    sent = openai.chat_requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    results = {m["tool_call_id"]: fenced_data(m["content"]) for m in sent[3:5]}
    assert results == {"call_calc": "450", "call_weather": INTERRUPTED}
    assert sent[5]["content"] == "What is 2 + 2?"

    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert_every_call_answered_in_place(messages)

    # The next turn sends the stored history as it is: the repair must be in it, once.
    follow_up = cli("ask", "Sure?", "--thread", thread_id, env=env, cwd=tmp_path)
    assert succeeded(follow_up).stdout == "Yes, 4.\n"
    assert openai.rejections == []


def test_resume_after_a_kill_during_the_model_call(
    cli: Ferry, tmp_path: Path, openai: OpenAIServer
) -> None:
    arrived, release = threading.Event(), threading.Event()
    answer = "150 * 3 = 450."
    openai.script(
        [
            openai_tool_calls(("calculator", {"expression": "150 * 3"}, "call_calc")),
            held_step(arrived, release, openai_answer(answer)),  # never reaches the killed run
            openai_answer(answer),
        ]
    )
    env = ferry_env(tmp_path, model=openai)
    thread_id = str(uuid.uuid4())
    process = start_ferry("ask", "What is 150 * 3?", "--thread", thread_id, env=env, cwd=tmp_path)
    try:
        assert arrived.wait(HOLD_LIMIT_S), "the second model call never came"
        [calculator_result] = wait_for_results(tmp_path, thread_id, ["calculator"])
    finally:
        _, err = kill(process)
        release.set()
    assert process.returncode == -9, err

    done = succeeded(cli("resume", "--thread", thread_id, env=env, cwd=tmp_path))

    assert done.stdout == answer + "\n"
    assert openai.rejections == []
    openai.assert_complete()
    first, interrupted, resumed = openai.chat_requests()
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert resumed["messages"] == interrupted["messages"]  # the same step, from its checkpoint
    assert [m["role"] for m in resumed["messages"]] == ["system", "user", "assistant", "tool"]
    sent = resumed["messages"][3]
    assert (sent["role"], sent["tool_call_id"], fenced_data(sent["content"])) == (
        "tool",
        "call_calc",
        "450",
    )
    messages = history(thread_id, env=env, cwd=tmp_path, run=cli)
    assert roles(messages) == ["user", "assistant", "tool", "assistant"]
    assert messages[3] == {"role": "assistant", "content": answer}
    # The calculator ran once, before the kill: its result is the only one ever stored.
    assert stored_tool_results(tmp_path / "ferry.db", thread_id) == [calculator_result]
