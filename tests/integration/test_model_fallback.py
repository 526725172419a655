"""`FERRY_MODEL` as a list: the next model when one is unavailable, through `ferry ask --json`.

Two real clients against the two emulators, each of which answers 400 to a history its real API
would reject: OpenAI down (503 through the SDK's retries) → Anthropic writes the turn, and the
next call goes to Anthropic first (the failed model cools down); a request the provider refuses
(400) is the turn's error, never another model's try.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_helpers import Ferry, ferry_env, one_json_object, succeeded
from tests.support.servers.anthropic import AnthropicServer, anthropic_answer, anthropic_tool_uses
from tests.support.servers.base import Reply
from tests.support.servers.openai import OpenAIServer

MODELS = "openai:gpt-4.1-mini,anthropic:claude-test"


@pytest.fixture
def servers() -> Iterator[tuple[OpenAIServer, AnthropicServer]]:
    with OpenAIServer() as openai, AnthropicServer() as anthropic:
        yield openai, anthropic
    assert openai.rejections == [] and anthropic.rejections == []


def _env(tmp_path: Path, openai: OpenAIServer, anthropic: AnthropicServer) -> dict[str, str]:
    env = ferry_env(tmp_path, model=openai, FERRY_MODEL=MODELS)
    env.update(ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=anthropic.url)
    return env


def test_a_provider_that_is_down_hands_the_turn_to_the_next(
    cli: Ferry, tmp_path: Path, servers: tuple[OpenAIServer, AnthropicServer]
) -> None:
    openai, anthropic = servers
    openai.fail_next(Reply(503, {"error": {"message": "down"}}, {"Retry-After": "0"}), times=10)
    anthropic.script(
        [anthropic_tool_uses(("calculator", {"expression": "6 * 7"})), anthropic_answer("42")]
    )
    env = _env(tmp_path, openai, anthropic)
    done = cli("ask", "--json", "What is 6 * 7?", env=env, cwd=tmp_path)
    report = one_json_object(succeeded(done))
    assert (report["answer"], report["stop_reason"]) == ("42", "answered")
    assert report["models"] == ["anthropic:claude-test", "anthropic:claude-test"]
    assert [(c["name"], c["status"]) for c in report["tool_calls"]] == [("calculator", "success")]
    # OpenAI was tried once (with its SDK's retries), then passed over while it cools down.
    assert len(openai.chat_requests()) == 4
    anthropic.assert_complete()
    history = one_json_object(
        cli("history", "--thread", report["thread_id"], "--json", env=env, cwd=tmp_path)
    )
    assert [m["role"] for m in history["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_a_request_the_provider_refuses_is_not_retried_elsewhere(
    cli: Ferry, tmp_path: Path, servers: tuple[OpenAIServer, AnthropicServer]
) -> None:
    openai, anthropic = servers
    openai.fail_next(Reply(400, {"error": {"message": "bad request", "type": "invalid"}}))
    done = cli("ask", "What is 6 * 7?", env=_env(tmp_path, openai, anthropic), cwd=tmp_path)
    assert done.returncode == 1
    assert anthropic.message_requests() == []
    assert len(openai.chat_requests()) == 1


def test_the_answer_streams_once_from_the_model_that_wrote_it(
    cli: Ferry, tmp_path: Path, servers: tuple[OpenAIServer, AnthropicServer]
) -> None:
    openai, anthropic = servers
    openai.fail_next(Reply(503, {"error": {"message": "down"}}, {"Retry-After": "0"}), times=10)
    anthropic.script([anthropic_answer("Ferries carry people across water.")])
    done = succeeded(
        cli("ask", "What is a ferry?", env=_env(tmp_path, openai, anthropic), cwd=tmp_path)
    )
    assert done.stdout == "Ferries carry people across water.\n"
    assert "cut short" not in done.stderr
