"""A worker SIGKILLed mid-turn: another worker finishes the turn, and nobody types anything.

The kill lands at a known point, by handshake: the model emulator holds a request until the
test releases it, or a tool holds mid-call (after recording its run) while a file exists. The dead
worker's turn goes on elsewhere after 2 s without a word from it (FERRY_TEMPORAL_HEARTBEAT_S),
not 10 s.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from graph.runs.report import turn_report
from graph.temporal import connect, start_turn, watch
from graph.temporal.shapes import workflow_id
from tests.support.held import held_step
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.temporal.helpers import (
    WAIT_LIMIT_S,
    ferry_graph,
    replay,
    shape,
    start_worker,
    stop,
    wait_until,
)
from tests.temporal.worker_process import hold_file, tool_log

HEARTBEAT_S = 2


@pytest.fixture(autouse=True)
def _short_heartbeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TEMPORAL_HEARTBEAT_S", str(HEARTBEAT_S))


def _runs() -> list[str]:
    return tool_log().read_text().splitlines() if tool_log().exists() else []


def test_a_turn_whose_worker_dies_mid_model_call_finishes_on_another(
    temporal_env: dict[str, str], model: OpenAIServer
) -> None:
    arrived, release = threading.Event(), threading.Event()
    model.script(
        [
            openai_tool_calls(("lookup", {"key": "k"})),
            held_step(arrived, release, openai_answer("never delivered: its worker died")),
            openai_answer("k = 42."),
        ]
    )

    def reached() -> None:
        assert arrived.wait(WAIT_LIMIT_S), "the second model call never arrived"

    # SIGKILL in the middle of the second model call
    report = _finished_by_a_second_worker(
        temporal_env, "dies", "What is k?", reached=reached, after_kill=release.set
    )
    assert report["answer"] == "k = 42." and report["stop_reason"] == "answered"
    assert _runs() == ["lookup k"]  # the finished call was not run again
    with ferry_graph() as graph:
        stored = graph.get_state({"configurable": {"thread_id": "dies"}})
        messages = stored.values["messages"]
    # The report is what the thread stored, not what the surviving worker happened to run.
    assert report["model_calls"] == 2
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("lookup", "success")]
    assert report["usage"] == turn_report("dies", stored, frozenset())["usage"]
    assert shape(messages) == [
        ("human", "What is k?"),
        ("ai", "", [("lookup", {"key": "k"})]),
        ("tool", "k = 42", "lookup", "success", 0),
        ("ai", "k = 42.", []),
    ]
    assert model.rejections == []


def test_a_side_effect_cut_short_by_a_dead_worker_is_never_run_twice(
    temporal_env: dict[str, str], model: OpenAIServer
) -> None:
    model.script(
        [
            openai_tool_calls(("send_payment", {"amount": 5})),
            openai_answer("I could not confirm the payment."),
        ]
    )
    hold_file().touch()
    # SIGKILL after the payment went out, before its result was stored
    report = _finished_by_a_second_worker(
        temporal_env,
        "pays",
        "Pay 5.",
        reached=lambda: wait_until(lambda: _runs() == ["paid 5"], "the payment"),
        after_kill=hold_file().unlink,
    )
    assert _runs() == ["paid 5"]
    assert report["answer"] == "I could not confirm the payment."
    [call] = report["tool_calls"]  # type: ignore[misc]
    assert call["name"] == "send_payment" and call["status"] == "error"
    with ferry_graph() as graph:
        messages = graph.get_state({"configurable": {"thread_id": "pays"}}).values["messages"]
    result = messages[2]
    assert result.type == "tool" and result.status == "error"
    assert "not re-run automatically" in result.text
    assert model.rejections == []


def _finished_by_a_second_worker(
    env: dict[str, str],
    thread_id: str,
    question: str,
    *,
    reached: Callable[[], None],
    after_kill: Callable[[], None],
) -> dict[str, object]:
    """Start a turn on one worker, SIGKILL it once `reached()` returns, then `after_kill()` and
    let a second worker serve (started beside the first, it took no work until then): the
    turn's report, once its recorded history has replayed."""
    serve = tool_log().with_suffix(".serve")
    first = start_worker(env, tool_log())
    second = None
    try:
        second = start_worker(env, tool_log(), serve_once=serve)

        async def main() -> dict[str, object]:
            client = await connect()
            handle = await start_turn(client, thread_id, question)
            await asyncio.to_thread(reached)
            stop(first)
            after_kill()
            serve.touch()
            report = await watch(handle)
            await replay(client, thread_id)
            history = await client.get_workflow_handle(workflow_id(thread_id)).fetch_history()
            timeouts = {
                event.activity_task_scheduled_event_attributes.heartbeat_timeout.ToTimedelta()
                for event in history.events
                if event.HasField("activity_task_scheduled_event_attributes")
            }
            assert timeouts == {timedelta(seconds=HEARTBEAT_S)}  # the client's setting
            return report

        return asyncio.run(main())
    finally:
        stop(first)
        if second is not None:
            stop(second)
