"""agent-chat-ui, Studio and Agent Inbox against `langgraph dev`: their requests, replayed as sent.

One server serves the whole module (it takes seconds to start), on a database the `ferry` CLI
shares. The model is the offline planner; `calculator` needs approval. The run requests are
the JSON bodies agent-chat-ui's `useStream().submit` sends (langgraph-sdk JS: `input`,
`stream_mode`, `stream_subgraphs`, `stream_resumable`, `on_disconnect`, the thread head's
`checkpoint`), posted with httpx; the rest is read through langgraph-sdk.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from graph.policy.approval import UNDECIDED
from tests.support.cli_helpers import Ferry, one_json_object
from tests.support.langgraph_dev import server_log, serving

SYNC_TIMEOUT_S = 30.0  # a hang guard: the server looks at the database every 3 s
MADE_UP = "Successfully handled tool call."  # what agent-chat-ui sends for a call it sees pending
NEW_MESSAGE = "Thanks, that is all for now."
OFFLINE_ANSWER = "I am Ferry's offline planner, not a language model"

pytestmark = pytest.mark.timeout(240)


class Server:
    """The running server: its URL, a langgraph-sdk client, and the CLI's environment."""

    def __init__(self, url: str, client: SyncLangGraphClient, env: dict[str, str], folder: Path):
        self.url, self.client, self.env, self.folder = url, client, env, folder


def server_env(folder: Path) -> dict[str, str]:
    """The server's and the CLI's environment: no keys, one database, loopback only."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FERRY_", "LANGSMITH_", "OPENAI_", "ANTHROPIC_", "TAVILY_"))
    }
    return kept | {
        "FERRY_DB": str(folder / "ferry.db"),
        "FERRY_FILES_ROOT": str(folder),
        "FERRY_MODEL": "offline",
        "FERRY_APPROVE_TOOLS": "calculator",
        "FERRY_TAVILY_URL": "http://127.0.0.1:9",
        "FERRY_GEOCODING_URL": "http://127.0.0.1:9",
        "FERRY_FORECAST_URL": "http://127.0.0.1:9",
        "XDG_CONFIG_HOME": str(folder / ".config"),
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "true",  # no PyPI look-up at start-up
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("agent-chat-ui")
    env = server_env(folder)
    with serving(folder, env) as url, get_sync_client(url=url, api_key=None) as client:
        yield Server(url, client, env, folder)


def submit(server: Server, thread_id: str, messages: list[dict[str, Any]]) -> list[Any]:
    """Send a message as agent-chat-ui does; the stream's events, as (event, data) pairs."""
    body: dict[str, Any] = {
        "input": {"messages": messages},
        "stream_mode": ["values", "messages-tuple"],
        "stream_subgraphs": True,
        "stream_resumable": True,
        "on_disconnect": "continue",
        "assistant_id": "agent",
    }
    head = server.client.threads.get_state(thread_id)["checkpoint"]
    if head:  # useStream branches from the thread head it shows
        body["checkpoint"] = {k: v for k, v in head.items() if k != "thread_id"}
    events: list[Any] = []
    with (
        httpx.Client(base_url=server.url, timeout=120) as http,
        http.stream("POST", f"/threads/{thread_id}/runs/stream", json=body) as reply,
    ):
        assert reply.status_code == 200, reply.read()
        event = None
        for line in reply.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((event, json.loads(line.removeprefix("data: "))))
    return events


def human(text: str) -> dict[str, Any]:
    """A message typed in agent-chat-ui: an id, and the text as a content block."""
    return {"id": str(uuid.uuid4()), "type": "human", "content": [{"type": "text", "text": text}]}


def made_up_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What agent-chat-ui adds for each call of a reply not followed by a tool result."""
    results = []
    for index, message in enumerate(messages):
        following = messages[index + 1] if index + 1 < len(messages) else None
        if message["type"] != "ai" or (following and following["type"] == "tool"):
            continue
        for call in message.get("tool_calls") or []:
            results.append(
                {
                    "type": "tool",
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "content": MADE_UP,
                    "id": f"do-not-render-{uuid.uuid4()}",
                }  # fmt: skip
            )
    return results


def wait_for_status(client: SyncLangGraphClient, thread_id: str, status: str) -> dict[str, Any]:
    """The thread as the server lists it once its status is `status`, found by that filter."""
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        found = [t for t in client.threads.search(status=status) if t["thread_id"] == thread_id]
        if found:
            return dict(found[0])
        if time.monotonic() > deadline:
            shown = client.threads.get(thread_id)["status"]
            raise AssertionError(f"thread {thread_id} not {status} in {SYNC_TIMEOUT_S} s: {shown}")
        time.sleep(0.2)


def wait_for_log(server: Server, event: str) -> list[str]:
    """The server log's lines of a Ferry event, once there is one (its output is buffered)."""
    deadline = time.monotonic() + SYNC_TIMEOUT_S
    while True:
        log = server_log(server.folder / "langgraph-dev-1.log")
        found = [line for line in log.splitlines() if f" {event} " in line]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_the_assistant_offers_no_settings(server: Server) -> None:
    [assistant] = server.client.assistants.search(graph_id="agent")
    schemas = server.client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["config_schema"] == {}
    assert schemas["context_schema"] is None
    assert list(schemas["input_schema"]["properties"]) == ["messages"]


def test_a_message_typed_during_an_approval_is_answered_and_the_made_up_result_dropped(
    server: Server,
) -> None:
    thread_id = server.client.threads.create()["thread_id"]
    first = submit(server, thread_id, [human("What is 150 * 3?")])
    assert [e for e, _ in first if e == "error"] == []
    paused = [data for event, data in first if event == "values"][-1]
    [pause] = paused["__interrupt__"]
    [asked] = pause["value"]["action_requests"]
    assert (asked["name"], asked["args"]) == ("calculator", {"expression": "150 * 3"})

    shown = paused["messages"]  # what the UI holds and builds its next request from
    made_up = made_up_results(shown)
    assert [m["tool_call_id"] for m in made_up] == [asked["tool_call_id"]]
    second = submit(server, thread_id, [*made_up, human(NEW_MESSAGE)])

    assert [e for e, _ in second if e == "error"] == []
    assert [r["status"] for r in server.client.runs.list(thread_id)] == ["success", "success"]
    state = server.client.threads.get_state(thread_id)
    assert state["next"] == [] and state["tasks"] == []
    messages = state["values"]["messages"]
    assert [(m["type"], m.get("tool_call_id")) for m in messages] == [
        ("human", None),
        ("ai", None),
        ("tool", asked["tool_call_id"]),
        ("human", None),
        ("ai", None),
    ]
    assert (messages[2]["content"], messages[2]["status"]) == (UNDECIDED, "error")
    assert messages[3]["content"] == [{"type": "text", "text": NEW_MESSAGE}]
    assert messages[4]["content"].startswith(OFFLINE_ANSWER)
    assert not [m for m in messages if m["id"].startswith("do-not-render-")]
    assert MADE_UP not in json.dumps(messages)
    dropped = wait_for_log(server, "client_result_dropped")
    assert len(dropped) == 1 and f"tool_call_id={asked['tool_call_id']}" in dropped[0]
    assert MADE_UP not in server_log(server.folder / "langgraph-dev-1.log")
    last = [data for event, data in second if event == "values"][-1]
    assert [m["id"] for m in last["messages"]] == [m["id"] for m in messages]
    assert server.client.threads.get(thread_id)["status"] == "idle"


def test_stop_during_a_call_then_a_message_stores_one_result_per_call(server: Server) -> None:
    """Stop aborts the UI's stream while a call runs; the server run goes on and stores the
    real result. The UI still shows the call open, so with the next message it sends its
    made-up result for it: dropped, so the call keeps exactly one result."""
    thread_id = server.client.threads.create()["thread_id"]
    first = submit(server, thread_id, [human("What time is it in Tokyo?")])
    assert [e for e, _ in first if e == "error"] == []
    stored = server.client.threads.get_state(thread_id)["values"]["messages"]
    call_id = stored[1]["tool_calls"][0]["id"]
    assert [(m["type"], m.get("tool_call_id")) for m in stored[1:3]] == [
        ("ai", None),
        ("tool", call_id),
    ]
    shown = stored[:2]  # what the UI held when Stop cut its stream: the call, no result yet
    made_up = made_up_results(shown)
    assert [m["tool_call_id"] for m in made_up] == [call_id]

    second = submit(server, thread_id, [*made_up, human(NEW_MESSAGE)])

    assert [e for e, _ in second if e == "error"] == []
    messages = server.client.threads.get_state(thread_id)["values"]["messages"]
    results = [m for m in messages if m["type"] == "tool" and m["tool_call_id"] == call_id]
    assert len(results) == 1 and results[0]["content"] != MADE_UP
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert MADE_UP not in json.dumps(messages)
    dropped = [line for line in wait_for_log(server, "client_result_dropped") if call_id in line]
    assert len(dropped) == 1


def test_a_thread_the_cli_paused_is_listed_as_interrupted_until_it_is_resumed(
    server: Server, cli: Ferry
) -> None:
    paused = one_json_object(
        cli("ask", "What is 150 * 3?", "--json", env=server.env, cwd=server.folder)
    )
    assert paused["stop_reason"] == "awaiting_approval"
    thread_id = paused["thread_id"]

    listed = wait_for_status(server.client, thread_id, "interrupted")
    [pause] = [i for pauses in listed["interrupts"].values() for i in pauses]
    [asked] = pause["value"]["action_requests"]
    assert asked["tool_call_id"] == paused["pending_approvals"][0]["id"]
    assert [m["type"] for m in listed["values"]["messages"]] == ["human", "ai"]

    done = one_json_object(
        cli(
            "resume",
            "--thread",
            thread_id,
            "--approve",
            "--json",
            env=server.env,
            cwd=server.folder,
        )  # fmt: skip
    )
    assert done["stop_reason"] == "answered" and "450" in done["answer"]
    listed = wait_for_status(server.client, thread_id, "idle")
    assert listed["interrupts"] == {}
    assert listed["values"]["messages"][-1]["content"] == done["answer"]
    interrupted = server.client.threads.search(status="interrupted", limit=100)
    assert thread_id not in [t["thread_id"] for t in interrupted]
