"""A turn on Temporal is one trace: each step an invocation on a worker, joined by derived ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_helpers import ferry, ferry_env
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.otlp import OtlpServer, Span
from tests.temporal.helpers import start_worker, stop, wait_until
from tests.temporal.worker_process import tool_log


@pytest.fixture
def collector() -> Iterator[OtlpServer]:
    with OtlpServer() as server:
        yield server


def operation(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == name]


def test_a_turn_on_temporal_with_an_approval_is_one_trace(
    tmp_path: Path, model: OpenAIServer, temporal_env: dict[str, str], collector: OtlpServer
) -> None:
    env = {
        **ferry_env(tmp_path, model=model),
        **temporal_env,
        "FERRY_TEST_TOOL_LOG": str(tool_log()),
        "FERRY_APPROVE_TOOLS": "calculator",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        # The worker lives on: its batch goes out every 50 ms instead of every 5 s.
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    model.script(
        [openai_tool_calls(("calculator", {"expression": "6 * 7"})), openai_answer("It is 42.")]
    )
    worker = start_worker(env, tool_log())
    try:
        asked = json.loads(ferry("ask", "--json", "What is 6 * 7?", env=env, cwd=tmp_path).stdout)
        assert asked["stop_reason"] == "awaiting_approval"
        thread = asked["thread_id"]
        decided = ferry("resume", "--json", "--thread", thread, "--approve", env=env, cwd=tmp_path)
        assert json.loads(decided.stdout)["stop_reason"] == "answered"

        def complete() -> bool:  # both model calls and the tool call, and the spans around them
            spans = collector.spans()
            ids = {s.span_id for s in spans}
            inner = [*operation(spans, "chat"), *operation(spans, "execute_tool")]
            return len(inner) == 3 and all(s.parent_id in ids for s in inner)

        wait_until(complete, "the turn's spans")
    finally:
        stop(worker)

    spans = collector.spans()
    assert len({s.trace_id for s in spans}) == 1
    [root] = [s for s in spans if s.parent_id == ""]
    assert root.attributes["ferry.resumed"] is False
    steps = [s for s in operation(spans, "invoke_agent") if s is not root]
    assert steps and all(s.parent_id == root.span_id for s in steps)
    assert all(s.attributes["ferry.thread_id"] == thread for s in spans)
    chats, [tool] = operation(spans, "chat"), operation(spans, "execute_tool")
    assert [s.attributes["gen_ai.response.model"] for s in chats] == ["gpt-4.1-mini"] * 2
    assert all(s.attributes["gen_ai.usage.output_tokens"] > 0 for s in chats)
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert all(b"6 * 7" not in body for body in collector.bodies())
