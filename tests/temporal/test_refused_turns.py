"""A turn a worker does not take fails at once with one line, on a real Temporal dev server.

Before the checks, a turn asking for 1e12 s failed its workflow *task* (the deadline overflows
`datetime`), which Temporal retries forever: the turn hung, and its client with it. Each test
follows the turn's history to its end and fails on the first workflow-task failure, so it
tells the two apart by what Temporal recorded, not by how long anything took.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from graph.core.settings import get_settings
from graph.temporal import TurnFailed, connect, start_turn, watch
from graph.temporal.shapes import WORKFLOW_NAME, workflow_id
from tests.support.cli_helpers import Ferry
from tests.support.servers.openai import OpenAIServer, openai_answer
from tests.temporal.helpers import WAIT_LIMIT_S, SharedWorker, ferry_graph, worker_here

CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
}


async def outcome(handle: WorkflowHandle[Any, Any]) -> str:
    """What a client watching the turn is told: its one line, once the workflow closed.

    Fails on the first workflow-task failure in the turn's history: a turn refused by an
    exception of the wrong kind would retry its task forever instead of closing.
    """
    watching = asyncio.create_task(watch(handle))  # from the start, as `ferry ask` watches
    try:
        async for event in handle.fetch_history_events(wait_new_event=True):
            failed = event.workflow_task_failed_event_attributes
            assert event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, (
                f"the workflow failed its task, which Temporal retries: {failed.failure.message}"
            )
            if event.event_type in CLOSED:
                break
        with pytest.raises(TurnFailed) as ended:
            await watching
    finally:
        watching.cancel()
    return str(ended.value)


def refused(start: Any) -> str:
    """Start a turn with `start(client)` on a worker here; the line its client is told."""

    async def main() -> str:
        client: Client = await connect()
        with ferry_graph() as graph:
            async with worker_here(client, graph):
                handle = await start(client)
                # A hang guard, never a timing assertion: the history decides the outcome.
                return await asyncio.wait_for(outcome(handle), WAIT_LIMIT_S)

    return asyncio.run(main())


def test_turns_a_worker_does_not_take_fail_at_once_naming_the_field(
    temporal_env: dict[str, str], model: OpenAIServer
) -> None:
    settings = get_settings()  # a worker's FERRY_TIME_BUDGET_S: 300 s
    huge = settings.model_copy(update={"time_budget_s": 1e12})
    longer = settings.model_copy(update={"time_budget_s": 1000.0})
    ill_typed = {"thread_id": "typed", "time_budget_s": 300.0, "stream": "yes"}
    lines = {
        "huge": refused(lambda client: start_turn(client, "huge", "Hi", settings=huge)),
        "longer": refused(lambda client: start_turn(client, "longer", "Hi", settings=longer)),
        "model": refused(lambda client: start_turn(client, "model", "Hi", model="openai:gpt-5")),
        "typed": refused(
            lambda client: client.start_workflow(
                WORKFLOW_NAME,
                ill_typed,
                id=workflow_id("typed"),
                task_queue=settings.temporal_task_queue,
            )
        ),
    }
    prefix = "the Temporal run of ferry-thread-{} ended without an answer: the worker refused it: "
    assert lines["huge"].startswith(prefix.format("huge") + "time_budget_s: seconds above 0")
    assert lines["longer"] == prefix.format("longer") + (
        "time_budget_s: at most this worker's FERRY_TIME_BUDGET_S, 300 s; the turn has "
        + lines["longer"].rsplit("the turn has ", 1)[1]
    )
    assert lines["model"] == prefix.format("model") + (
        "model: 'openai:gpt-5' is not a model this worker runs; it runs openai:gpt-4.1-mini "
        "(FERRY_MODEL, FERRY_TEMPORAL_MODELS)"
    )
    assert lines["typed"] == prefix.format("typed") + "stream: true or false; got 'yes'"
    assert all("\n" not in line for line in lines.values())
    assert model.chat_requests() == []  # no turn reached the model


def test_ask_prints_the_refusal_in_one_line_and_a_model_the_worker_runs_still_answers(
    shared_worker: SharedWorker, shared_model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    shared_model.script([openai_answer("It is 42.")])
    env = shared_worker.client_env(tmp_path)
    huge = cli("ask", "What is 6 * 7?", env={**env, "FERRY_TIME_BUDGET_S": "1e12"}, cwd=tmp_path)
    named = cli("ask", "--model", "openai:gpt-4.1-mini", "What is 6 * 7?", env=env, cwd=tmp_path)
    assert huge.returncode == 1 and huge.stdout == ""
    [line] = huge.stderr.strip().splitlines()[-1:]
    assert "the worker refused it: time_budget_s: seconds above 0, at most 604800" in line, (
        huge.stderr
    )
    assert "TurnRefused" not in huge.stderr and "TurnFailed" not in huge.stderr
    assert named.returncode == 0, named.stderr
    assert named.stdout.strip() == "It is 42."
