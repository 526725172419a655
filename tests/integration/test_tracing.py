"""OpenTelemetry: each turn's spans reach an OTLP/HTTP receiver on loopback, as one trace.

`ferry` runs as a process, as a user runs it: its spans must be sent before it exits. The
receiver decodes what arrives with OpenTelemetry's own protobuf types.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool

from graph import tracing
from graph.tracing.otel import turn_ids
from tests.support.cli_helpers import ferry, ferry_env, one_json_object
from tests.support.scripted import ScriptedModel, answer, tool_call, with_usage
from tests.support.servers.otlp import OtlpServer, Span
from tools.calculator import calculator

QUESTION = "What is 150 * 3?"
OTEL_MODULES = ("graph.tracing.otel", "opentelemetry.exporter.otlp.proto.http.trace_exporter")


@pytest.fixture
def collector() -> Iterator[OtlpServer]:
    with OtlpServer() as server:
        yield server


@pytest.fixture
def agent_tools() -> list[BaseTool]:
    return [calculator]


def traced_env(tmp_path: Path, collector: OtlpServer, **settings: str) -> dict[str, str]:
    return ferry_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, **settings)


def operation(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == name]


def assert_nothing_private_sent(collector: OtlpServer, *texts: str) -> None:
    """No question, tool argument or secret anywhere in what the receiver got, attributes or not."""
    bodies = collector.bodies()
    assert bodies
    for text in texts:
        assert all(text.encode() not in body for body in bodies), text


def test_a_turn_is_one_trace_its_model_and_tool_calls_inside_it(
    tmp_path: Path, collector: OtlpServer
) -> None:
    env = traced_env(tmp_path, collector, FERRY_TEST_API_KEY="secret-value-0123456789")
    report = one_json_object(ferry("ask", "--json", QUESTION, env=env, cwd=tmp_path))
    assert report["stop_reason"] == "answered"

    spans = collector.spans()  # sent before the process exited
    assert len({s.trace_id for s in spans}) == 1
    [root] = operation(spans, "invoke_agent")
    assert root.name == "invoke_agent ferry" and root.parent_id == ""
    thread = report["thread_id"]
    assert root.attributes["ferry.thread_id"] == root.attributes["gen_ai.conversation.id"] == thread
    assert root.attributes["ferry.resumed"] is False
    # The ids are the turn's, derived from its question: what a resume elsewhere computes.
    derived = turn_ids(thread, root.attributes["ferry.question_id"])
    assert (int(root.trace_id, 16), int(root.span_id, 16)) == derived
    assert root.resource["service.name"] == "ferry"

    chats = operation(spans, "chat")
    assert [s.name for s in chats] == ["chat offline", "chat offline"]
    assert {s.parent_id for s in chats} == {root.span_id}
    assert (
        sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats)
        == (report["usage"]["input_tokens"])
    )
    assert all(s.attributes["gen_ai.provider.name"] == "ferry" for s in chats)
    assert all(s.attributes["ferry.run_id"] == root.attributes["ferry.run_id"] for s in spans)

    [tool] = operation(spans, "execute_tool")
    [call] = report["tool_calls"]
    assert tool.name == "execute_tool calculator" and tool.parent_id == root.span_id
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"] == tool.attributes["ferry.tool_call_id"]
    assert tool.attributes["ferry.tool_call_id"] == call["id"]
    assert tool.status == 0 and "error.type" not in tool.attributes
    assert_nothing_private_sent(collector, "150 * 3", "secret-value-0123456789")


def test_a_resume_after_an_approval_joins_the_turns_trace(
    tmp_path: Path, collector: OtlpServer
) -> None:
    env = traced_env(tmp_path, collector, FERRY_APPROVE_TOOLS="calculator")
    asked = one_json_object(ferry("ask", "--json", QUESTION, env=env, cwd=tmp_path))
    assert asked["stop_reason"] == "awaiting_approval"
    before = collector.spans()
    [root] = operation(before, "invoke_agent")
    assert [s.parent_id for s in operation(before, "chat")] == [root.span_id]
    assert operation(before, "execute_tool") == []

    thread = asked["thread_id"]
    resumed = ferry("resume", "--thread", thread, "--approve", "--json", env=env, cwd=tmp_path)
    assert one_json_object(resumed)["stop_reason"] == "answered"
    after = [s for s in collector.spans() if s not in before]

    assert {s.trace_id for s in after} == {root.trace_id}
    [invocation] = operation(after, "invoke_agent")
    assert invocation.parent_id == root.span_id  # the root, sent by the other process
    assert invocation.attributes["ferry.resumed"] is True
    assert invocation.attributes["ferry.run_id"] != root.attributes["ferry.run_id"]
    [tool] = operation(after, "execute_tool")
    [chat] = operation(after, "chat")
    assert tool.parent_id == chat.parent_id == invocation.span_id
    assert_nothing_private_sent(collector, "150 * 3")


def test_each_turn_of_a_thread_is_a_trace_and_a_failed_call_an_error_span(
    tmp_path: Path, collector: OtlpServer
) -> None:
    env = traced_env(tmp_path, collector)
    first = one_json_object(ferry("ask", "--json", "What is 2 + 2?", env=env, cwd=tmp_path))
    thread = first["thread_id"]
    ferry("ask", "--json", "--thread", thread, "What is 1 / 0?", env=env, cwd=tmp_path)

    spans = collector.spans()
    roots = [s for s in spans if s.parent_id == ""]
    assert len(roots) == 2 and len({s.trace_id for s in roots}) == 2
    [failed] = [s for s in operation(spans, "execute_tool") if s.trace_id == roots[1].trace_id]
    assert failed.status == 2 and failed.attributes["error.type"] == "tool_error"


def test_no_endpoint_no_tracing_module_imported(tmp_path: Path, collector: OtlpServer) -> None:
    probe = (
        "import sys\nfrom graph.cli import main\nmain(['ask', 'What is 2 + 2?'])\n"
        f"print([m in sys.modules for m in {OTEL_MODULES!r}], file=sys.stderr)"
    )

    def imported(env: dict[str, str]) -> str:
        done = subprocess.run(
            [sys.executable, "-c", probe], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stderr.splitlines()[-1]

    assert imported(ferry_env(tmp_path)) == "[False, False]"
    assert collector.requests == []
    assert imported(traced_env(tmp_path, collector)) == "[True, True]"  # the probe can tell


def test_python_runs_sync_and_async_are_traced(
    make_agent: Any, scripted: Any, collector: OtlpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    model: ScriptedModel = scripted(
        [
            with_usage(tool_call("calculator", expression="6 * 7"), 11, 5),
            answer("42"),
            answer("Still 42."),
        ]
    )
    agent = make_agent(model)
    config = {"configurable": {"thread_id": "t-python"}}
    agent.invoke({"messages": [("user", "What is 6 * 7?")]}, config)
    asyncio.run(agent.ainvoke({"messages": [("user", "And now?")]}, config))
    tracing.flush()

    spans = collector.spans()
    roots = [s for s in spans if s.parent_id == ""]
    assert len(roots) == 2 and len({s.trace_id for s in spans}) == 2
    for root in roots:
        inside = [s for s in spans if s.trace_id == root.trace_id and s is not root]
        assert {s.parent_id for s in inside} == {root.span_id}
    [tool] = operation(spans, "execute_tool")
    tokens = [s.attributes.get("gen_ai.usage.input_tokens") for s in operation(spans, "chat")]
    assert 11 in tokens
    assert tool.attributes["ferry.thread_id"] == "t-python"
    assert_nothing_private_sent(collector, "6 * 7")
