"""`ferry` handing turns to Temporal: the same output, `--json` and exit codes as in-process.

Each test runs `ferry` against the module's shared worker process (tests/temporal/worker_process.py)
on the session's Temporal dev server, with the OpenAI emulator as the model: in this process
(the `cli` fixture), and as a process where only a process shows it (a kill, Ctrl-C, tokens on a
pipe while the turn runs, stdin). A test whose worker needs other settings starts its own.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from graph.temporal import connect, workflow_id
from tests.support.cli_helpers import (
    Ferry,
    ferry,
    kill,
    new_thread_id,
    start_ferry,
)
from tests.support.held import HOLD_LIMIT_S, held_step
from tests.support.langgraph_dev import langgraph_dev
from tests.support.servers.base import closed_port_url
from tests.support.servers.openai import (
    OpenAIServer,
    held_stream,
    openai_answer,
    openai_tool_calls,
)
from tests.temporal.helpers import SharedWorker, still_running, wait_until
from tests.temporal.worker_process import tool_log

CANCEL_REQUESTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
CALC = openai_tool_calls(("calculator", {"expression": "6 * 7"}))
REPORT_KEYS = [
    *("thread_id", "answer", "stop_reason", "output", "model_calls", "models", "tool_calls"),
    *("usage", "thread_usage"),
]


@pytest.fixture
def model(shared_model: OpenAIServer) -> OpenAIServer:
    return shared_model


@pytest.fixture
def env(
    tmp_path: Path, temporal_env: dict[str, str], shared_worker: SharedWorker
) -> dict[str, str]:
    """The environment of the test's `ferry`, on the shared worker's task queue and database."""
    return shared_worker.client_env(tmp_path)


def in_process(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "FERRY_TEMPORAL_ADDRESS"}


def test_ask_on_temporal_prints_what_it_prints_in_process_and_the_thread_goes_both_ways(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("It is 42."), openai_answer("Still 42."), CALC,
                  openai_answer("42 again.")])  # fmt: skip
    plain = cli("ask", "What is 6 * 7?", env=env, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "It is 42.\n"
    thread = new_thread_id(plain.stderr)
    assert '→ calculator(expression="6 * 7")' in plain.stderr and "✓ calculator" in plain.stderr
    here = cli("ask", "--json", "--thread", thread, "And now?", env=in_process(env), cwd=tmp_path)
    there = cli("ask", "--json", "--thread", thread, "Once more?", env=env, cwd=tmp_path)
    assert here.returncode == there.returncode == 0, (here.stderr, there.stderr)
    local, remote = json.loads(here.stdout), json.loads(there.stdout)
    assert list(remote) == list(local) == REPORT_KEYS
    assert remote["answer"] == "42 again." and remote["stop_reason"] == "answered"
    assert remote["model_calls"] == 2
    assert [(c["name"], c["status"]) for c in remote["tool_calls"]] == [("calculator", "success")]
    assert list(remote["tool_calls"][0]) == ["id", "name", "args", "status", "duration_ms"]
    history = cli("history", "--json", "--thread", thread, env=in_process(env), cwd=tmp_path)
    roles = [m["role"] for m in json.loads(history.stdout)["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant", "user",
                     "assistant", "tool", "assistant"]  # fmt: skip
    assert model.rejections == []


def test_ask_on_temporal_streams_the_answer_while_the_model_writes_it(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path
) -> None:
    arrived, release = threading.Event(), threading.Event()
    answer = "The answer is forty-two, as computed by hand."
    model.script([CALC, held_stream(openai_answer(answer), 3, arrived, release)])
    client = start_ferry("ask", "What is 6 * 7?", env=env, cwd=tmp_path)
    shown: list[str] = []
    assert client.stdout is not None
    reader = threading.Thread(target=lambda: shown.extend(iter(lambda: client.stdout.read(1), "")))
    reader.start()
    try:
        assert arrived.wait(HOLD_LIMIT_S)  # the model sent "The answer i" and holds the rest
        wait_until(lambda: "".join(shown) == "The answer i", "the first tokens on stdout")
    finally:
        release.set()
        reader.join(timeout=HOLD_LIMIT_S)
        client.wait(timeout=HOLD_LIMIT_S)
        _, err = kill(client)
    assert client.returncode == 0, err
    assert "".join(shown) == answer + "\n"  # printed once, as it came
    lines = err.splitlines()
    assert [line for line in lines if "calculator" in line][0].startswith("→ calculator(")
    assert sum(line.startswith("✓ calculator") for line in lines) == 1


def test_no_temporal_server_is_one_line_naming_the_address(
    env: dict[str, str], tmp_path: Path, cli: Ferry
) -> None:
    # A worker waits for its server instead (test_server_restart.py).
    address = closed_port_url().removeprefix("http://")
    done = cli("ask", "--temporal", address, "What is 6 * 7?", env=env, cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("thread: ")]
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"ferry: cannot reach Temporal at {address}")


def test_an_approval_waits_on_temporal_for_resume_approve(
    approving_worker: SharedWorker, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("It is 42.")])
    env = approving_worker.client_env(tmp_path)  # the worker's setting, not the client's
    asked = cli("ask", "--json", "What is 6 * 7?", env=env, cwd=tmp_path)
    report = json.loads(asked.stdout)
    assert asked.returncode == 0 and report["stop_reason"] == "awaiting_approval"
    assert [p["name"] for p in report["pending_approvals"]] == ["calculator"]
    thread = report["thread_id"]
    decided = cli("resume", "--json", "--thread", thread, "--approve", env=env, cwd=tmp_path)
    assert decided.returncode == 0, decided.stderr
    resumed = json.loads(decided.stdout)
    assert resumed["answer"] == "It is 42." and resumed["stop_reason"] == "answered"
    assert [c["status"] for c in resumed["tool_calls"]] == ["success"]


def test_the_run_outlives_a_killed_client_and_resume_prints_its_answer(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    arrived, release = threading.Event(), threading.Event()
    model.script([CALC, held_step(arrived, release, openai_answer("It is 42."))])
    client = start_ferry("ask", "--thread", "kept", "What is 6 * 7?", env=env, cwd=tmp_path)
    try:
        assert arrived.wait(HOLD_LIMIT_S)
        kill(client)  # SIGKILL: the run is on a worker, not in this process
    finally:
        release.set()
    resumed = cli("resume", "--thread", "kept", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "It is 42.\n"


def test_ctrl_c_leaves_the_streaming_turn_running_in_one_line_and_resume_prints_it(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    arrived, release = threading.Event(), threading.Event()
    answer = "The answer is forty-two, as computed by hand."
    model.script([held_stream(openai_answer(answer), 3, arrived, release)])
    client = start_ferry("ask", "--thread", "left", "What is 6 * 7?", env=env, cwd=tmp_path)
    shown: list[str] = []
    assert client.stdout is not None
    reader = threading.Thread(target=lambda: shown.extend(iter(lambda: client.stdout.read(1), "")))
    reader.start()
    try:
        assert arrived.wait(HOLD_LIMIT_S)
        wait_until(lambda: "".join(shown) == "The answer i", "the first tokens on stdout")
        client.send_signal(signal.SIGINT)
        reader.join(timeout=HOLD_LIMIT_S)
        client.wait(timeout=HOLD_LIMIT_S)
    finally:
        release.set()
        _, err = kill(client)
    assert client.returncode == 130
    assert err.splitlines()[-1] == "ferry: interrupted; continue with: ferry resume --thread left"
    assert "Traceback" not in err
    resumed = cli("resume", "--thread", "left", env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == answer + "\n"


def _cancel_requested(thread_id: str) -> bool:
    """Whether the thread's workflow history holds a cancel request."""

    async def read() -> bool:
        handle = (await connect()).get_workflow_handle(workflow_id(thread_id))
        events = (await handle.fetch_history()).events
        return any(e.event_type == CANCEL_REQUESTED for e in events)

    return asyncio.run(read())


def test_cancel_returns_once_the_step_stopped_and_the_thread_is_free(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    arrived, release = threading.Event(), threading.Event()
    # The held reply asks for a tool: the turn would go on after it, and cancel stops it there.
    model.script([held_step(arrived, release, CALC), openai_answer("Here, in-process.")])
    client = start_ferry("ask", "--thread", "stopped", "What is 6 * 7?", env=env, cwd=tmp_path)
    cancelling = None
    try:
        assert arrived.wait(HOLD_LIMIT_S)  # the step holds the thread, mid model call
        cancelling = start_ferry("cancel", "--thread", "stopped", env=env, cwd=tmp_path)
        wait_until(lambda: _cancel_requested("stopped"), "the cancel request")
        assert cancelling.poll() is None  # the step still runs: cancel has not returned
        release.set()
        cancelled_err = cancelling.communicate(timeout=HOLD_LIMIT_S)[1]
        # Right after cancel returns, the thread is free for an in-process turn.
        here = cli("ask", "--thread", "stopped", "And now?", env=in_process(env), cwd=tmp_path)
        out, err = client.communicate(timeout=HOLD_LIMIT_S)
    finally:
        release.set()
        kill(client)
        if cancelling is not None:
            kill(cancelling)
    assert cancelling.returncode == 0, cancelled_err
    assert "its Temporal run is cancelled and the thread is free" in cancelled_err
    assert here.returncode == 0, here.stderr
    assert here.stdout == "Here, in-process.\n"
    assert client.returncode == 1 and out == ""
    assert err.strip().splitlines()[-1] == (
        "ferry: thread stopped: its turn on Temporal was cancelled (ferry cancel); "
        "continue it with: ferry resume --thread stopped"
    )
    assert "Error" not in err
    again = cli("cancel", "--thread", "stopped", env=env, cwd=tmp_path)
    assert again.returncode == 1 and "no turn running on Temporal" in again.stderr


def test_a_cancel_that_came_as_the_turn_ended_says_so(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cli: Ferry
) -> None:
    # The race is the worker's: a last step that ends before its next heartbeat brings it the
    # cancel keeps its answer, and the workflow returns it (graph/temporal/workflow.py). Which
    # side wins is not the test's to choose, so the client's answer stands in for it here.
    async def ended(_client: object, thread_id: str) -> str:
        assert thread_id == "finishing"
        return "ended"

    monkeypatch.setattr("graph.temporal.runner.cancel", ended)
    done = cli("cancel", "--thread", "finishing", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "thread finishing: its Temporal turn ended before the cancel reached it; "
        "see it with: ferry history --thread finishing\n"
    )


def test_a_new_question_sets_aside_a_turn_awaiting_approval(
    approving_worker: SharedWorker, model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    model.script([CALC, openai_answer("Then I will not compute it.")])
    env = approving_worker.client_env(tmp_path)  # the worker's setting, not the client's
    asked = cli("ask", "--json", "--thread", "aside", "What is 6 * 7?", env=env, cwd=tmp_path)
    assert json.loads(asked.stdout)["stop_reason"] == "awaiting_approval", asked.stderr
    again = cli("ask", "--json", "--thread", "aside", "Never mind.", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["answer"] == "Then I will not compute it."
    history = cli("history", "--json", "--thread", "aside", env=in_process(env), cwd=tmp_path)
    messages = json.loads(history.stdout)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert messages[2]["status"] == "error"  # the held call, answered as never approved


def test_chat_on_temporal_answers_each_question_on_one_thread(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    # `lookup` is a tool of the worker's only: run in-process, the call would be refused.
    lookup = openai_tool_calls(("lookup", {"key": "answer"}))
    model.script([lookup, openai_answer("It is 42."), openai_answer("Still 42.")])
    done = ferry(
        "chat",
        input="What is 6 * 7?\nAnd now?\n",
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "It is 42." in done.stdout and "Still 42." in done.stdout
    assert done.stdout.index("It is 42.") < done.stdout.index("Still 42.")
    thread = done.stderr.split("thread: ", 1)[1].split()[0]
    history = cli("history", "--json", "--thread", thread, env=in_process(env), cwd=tmp_path)
    messages = json.loads(history.stdout)["messages"]
    assert [m["role"] for m in messages] == [
        "user", "assistant", "tool", "assistant", "user", "assistant"
    ]  # fmt: skip
    assert [m["content"] for m in messages if m["role"] == "user"] == ["What is 6 * 7?", "And now?"]
    assert messages[2]["content"] == "answer = 42"
    assert tool_log().read_text().splitlines() == ["lookup answer"]  # run by the worker
    assert model.rejections == []


def test_a_pause_decided_in_studio_releases_the_turn_waiting_on_temporal(
    approving_worker: SharedWorker,
    temporal_env: dict[str, str],
    model: OpenAIServer,
    tmp_path: Path,
    cli: Ferry,
) -> None:
    """Studio (here langgraph-sdk on `langgraph dev`) resumes a pause a Temporal turn made."""
    env = {**approving_worker.client_env(tmp_path), "FERRY_APPROVE_TOOLS": "calculator"}
    model.script([CALC, openai_answer("It is 42.")])
    with langgraph_dev(tmp_path, in_process(env)) as client:
        thread = client.threads.create()["thread_id"]
        asked = cli("ask", "--json", "--thread", thread, "What is 6 * 7?", env=env, cwd=tmp_path)
        assert json.loads(asked.stdout)["stop_reason"] == "awaiting_approval", asked.stderr
        decided = client.runs.wait(
            thread, "agent", command={"resume": {"decisions": [{"type": "approve"}]}}
        )
        assert isinstance(decided, dict) and decided["stop_reason"] == "answered"
        assert decided["messages"][-1]["content"] == "It is 42."
    wait_until(lambda: not still_running(thread), "the Temporal turn to let go")
    resumed = cli("resume", "--thread", thread, env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing to resume" in resumed.stderr  # not a stale "awaiting approval"
    history = cli("history", "--json", "--thread", thread, env=in_process(env), cwd=tmp_path)
    roles = [m["role"] for m in json.loads(history.stdout)["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert model.rejections == []


def test_an_answer_schema_goes_with_the_turn_to_the_worker(
    env: dict[str, str], model: OpenAIServer, tmp_path: Path, cli: Ferry
) -> None:
    schema = {"title": "Product", "type": "object", "properties": {"value": {"type": "integer"}}}
    model.script(
        [
            CALC,
            openai_tool_calls(("Product", {"value": "forty-two"})),
            openai_tool_calls(("Product", {"value": 42})),
            openai_tool_calls(("Product", {"value": 42})),
        ]
    )
    done = cli("ask", "6 * 7?", "--schema", json.dumps(schema), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"value": 42}  # the answer, nothing else on stdout
    sent_back = model.chat_requests()[2]["messages"][-1]
    assert 'value: "forty-two" is not of type "integer"' in sent_back["content"]
    assert model.chat_requests()[0]["tool_choice"] == "required"

    there = cli("ask", "Again?", "--schema", json.dumps(schema), "--json", env=env, cwd=tmp_path)
    report = json.loads(there.stdout)
    assert there.returncode == 0 and report["output"] == {"value": 42}
    assert list(report) == REPORT_KEYS and model.rejections == []
