"""A turn run on a real Temporal dev server: stored like an in-process turn, replayable."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command
from temporalio import workflow

from graph.temporal import connect, run_turn, running_turn
from graph.temporal.shapes import WORKFLOW_NAME, TurnInput
from graph.temporal.workflow import FerryTurn
from tests.support.held import held_step
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.temporal.helpers import WAIT_LIMIT_S, ferry_graph, replay, shape, worker_here
from tests.temporal.worker_process import tool_log

QUESTION = "What is 6 * 7, and what is k?"
CALLS = openai_tool_calls(("calculator", {"expression": "6 * 7"}), ("lookup", {"key": "k"}))
ANSWER = "6 * 7 = 42, and k = 42."


@workflow.defn(name=WORKFLOW_NAME)
class TurnWithAPause(FerryTurn):
    """FerryTurn changed as a careless edit would: a timer before the first step."""

    @workflow.run
    async def run(self, turn: TurnInput) -> dict[str, Any]:
        await workflow.sleep(0.01)
        return await super().run(turn)


def test_a_temporal_turn_is_stored_as_an_in_process_turn_and_replays(
    temporal_env: dict[str, str], model: OpenAIServer, tmp_path: Path
) -> None:
    model.script([CALLS, openai_answer(ANSWER), CALLS, openai_answer(ANSWER)])

    async def main() -> tuple[dict[str, Any], list[Any], list[Any]]:
        client = await connect()
        with ferry_graph() as graph:
            here = graph.invoke(
                {"messages": [("user", QUESTION)]}, {"configurable": {"thread_id": "here"}}
            )
            async with worker_here(client, graph):
                report = await run_turn(client, "there", QUESTION)
            there = graph.get_state({"configurable": {"thread_id": "there"}}).values
        await replay(client, "there")
        # A change to the workflow's decisions no longer fits the recorded history.
        with pytest.raises(Exception, match="[Nn]ondetermin"):
            await replay(client, "there", [TurnWithAPause])
        return report, here["messages"], there["messages"]

    report, here, there = asyncio.run(main())
    assert shape(there) == shape(here)
    assert [m.type for m in there] == ["human", "ai", "tool", "tool", "ai"]
    assert there[-1].text == ANSWER
    assert list(report) == [
        "thread_id", "answer", "stop_reason", "output", "model_calls", "models", "tool_calls",
        "usage", "thread_usage",
    ]  # fmt: skip
    assert report["thread_id"] == "there" and report["answer"] == ANSWER
    assert report["stop_reason"] == "answered" and report["model_calls"] == 2
    # In the order the calls finished, as in-process.
    calls = sorted(report["tool_calls"], key=lambda c: c["name"])
    assert [(c["name"], c["args"], c["status"]) for c in calls] == [
        ("calculator", {"expression": "6 * 7"}, "success"),
        ("lookup", {"key": "k"}, "success"),
    ]
    assert [c["id"] for c in calls] == [m.tool_call_id for m in there[2:4]]
    assert set(report["usage"]) == {
        "input_tokens", "output_tokens", "total_tokens", "cost_usd", "unpriced_calls"
    }  # fmt: skip
    assert report["usage"]["cost_usd"] > 0 and report["usage"]["unpriced_calls"] == 0
    assert model.rejections == []  # every request was one the real API accepts


@pytest.mark.parametrize(
    ("settings", "stop_reason"),
    [
        ({"FERRY_MAX_ITERATIONS": "1"}, "max_iterations"),
        ({"FERRY_TOKEN_BUDGET": "10"}, "token_budget"),
    ],
)
def test_the_turn_budgets_stop_a_temporal_turn_as_in_process(
    temporal_env: dict[str, str],
    model: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, str],
    stop_reason: str,
) -> None:
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    model.script([CALLS])

    async def main() -> dict[str, Any]:
        client = await connect()
        with ferry_graph() as graph:
            async with worker_here(client, graph):
                return await run_turn(client, "budget", QUESTION)

    report = asyncio.run(main())
    assert report["stop_reason"] == stop_reason and report["model_calls"] == 1
    # The reply's calls are answered "not executed", as in-process; none ran.
    assert [c["status"] for c in report["tool_calls"]] == ["error", "error"]
    assert not tool_log().exists()


def test_the_time_budget_ends_a_temporal_turn_in_words(
    temporal_env: dict[str, str], model: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TIME_BUDGET_S", "2")
    arrived, release = threading.Event(), threading.Event()
    model.script([held_step(arrived, release, openai_answer("too late"))])

    async def main() -> dict[str, Any]:
        client = await connect()
        with ferry_graph() as graph:
            async with worker_here(client, graph):
                return await run_turn(client, "late", QUESTION)

    try:
        report = asyncio.run(main())
    finally:
        release.set()
    assert arrived.is_set()
    assert report["stop_reason"] == "time_budget"
    assert "FERRY_TIME_BUDGET_S" in report["answer"]


def test_a_pause_decided_in_process_ends_the_turn_waiting_on_temporal(
    temporal_env: dict[str, str], model: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Studio's (or Python's) resume runs the thread in-process: the waiting turn lets go."""
    monkeypatch.setenv("FERRY_APPROVE_TOOLS", "lookup")
    model.script([openai_tool_calls(("lookup", {"key": "k"})), openai_answer("42.")])

    async def main() -> tuple[dict[str, Any], dict[str, Any], Any]:
        client = await connect()
        with ferry_graph() as graph:
            async with worker_here(client, graph):
                paused = await run_turn(client, "studio", QUESTION)
                config: Any = {"configurable": {"thread_id": "studio"}}
                # What `langgraph dev` runs when Studio's resume button sends the decision.
                done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
                started = time.monotonic()
                while await running_turn(client, "studio") is not None:
                    assert time.monotonic() - started < WAIT_LIMIT_S, "the turn still waits"
                    await asyncio.sleep(0.1)
                # The thread goes on on Temporal, its turn no longer held by the old pause.
                model.script([openai_answer("Still 42.")])
                again = await run_turn(client, "studio", "And now?")
        await replay(client, "studio")
        return paused, again, done

    paused, again, done = asyncio.run(main())
    assert paused["stop_reason"] == "awaiting_approval"
    assert [m.type for m in done["messages"]] == ["human", "ai", "tool", "ai"]
    assert done["messages"][-1].text == "42."
    assert again["answer"] == "Still 42." and again["stop_reason"] == "answered"
    assert tool_log().read_text().splitlines() == ["lookup k"]  # run once, in-process
