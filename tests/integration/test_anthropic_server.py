"""The Anthropic emulator's own wire format, driven by the real ChatAnthropic client.

Raw httpx sends the bad requests. What both emulators do alike is in test_provider_contract.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool

from tests.support.servers.anthropic import AnthropicServer, anthropic_answer, anthropic_tool_uses
from tests.support.servers.base import Reply

HEADERS = {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}


@tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"21 °C in {city}"


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as started:
        yield started


def chat(server: AnthropicServer, **kwargs: Any) -> ChatAnthropic:
    return ChatAnthropic(  # type: ignore[call-arg]  # mypy misreads the optional `stop` as required
        model_name="claude-test",
        base_url=server.url,
        api_key="sk-ant-test",  # type: ignore[arg-type]  # pydantic coerces it to SecretStr
        **{"max_retries": 0, **kwargs},
    )


def post(server: AnthropicServer, messages: list[Any], **extra: Any) -> httpx.Response:
    body = {"model": "claude-test", "max_tokens": 100, "messages": messages, **extra}
    return httpx.post(server.url + "/v1/messages", json=body, headers=HEADERS, timeout=10)


def weather_call(*ids: str) -> dict[str, Any]:
    blocks = [
        {"type": "tool_use", "id": i, "name": "get_weather", "input": {"city": "Oslo"}} for i in ids
    ]
    return {"role": "assistant", "content": blocks}


def result(call_id: str, text: str = "3 °C") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def rejected(response: httpx.Response, server: AnthropicServer) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert server.rejections[-1].error == body["error"]
    message: str = body["error"]["message"]
    return message


def test_tools_are_sent_with_an_input_schema(server: AnthropicServer) -> None:
    server.script([anthropic_answer("Hello from the loopback")])

    chat(server).bind_tools([get_weather]).invoke("hi")

    [body] = server.message_requests()
    assert body["tools"][0]["input_schema"]["type"] == "object"


def test_tool_uses_arrive_as_content_blocks(server: AnthropicServer) -> None:
    server.script(
        [
            anthropic_tool_uses(
                ("get_weather", {"city": "Madrid"}),
                ("get_weather", {"city": "Oslo"}, "toolu_oslo"),
                text="Checking both.",
            )
        ]
    )

    reply = chat(server).bind_tools([get_weather]).invoke("Weather in Madrid and Oslo?")

    assert isinstance(reply.content, list)
    assert [b["type"] for b in reply.content if isinstance(b, dict)] == [
        "text",
        "tool_use",
        "tool_use",
    ]
    assert reply.text == "Checking both."
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Madrid"}),
        ("get_weather", {"city": "Oslo"}),
    ]
    assert reply.tool_calls[1]["id"] == "toolu_oslo"
    assert reply.response_metadata["stop_reason"] == "tool_use"


def test_the_raw_reply_has_the_real_shape(server: AnthropicServer) -> None:
    server.script([anthropic_tool_uses(("get_weather", {"city": "Oslo"}), usage=(30, 9))])

    response = post(server, [{"role": "user", "content": "Oslo?"}])

    assert response.status_code == 200
    assert response.headers["request-id"].startswith("req_")
    body = response.json()
    assert body["id"].startswith("msg_")
    assert (body["type"], body["role"], body["model"]) == ("message", "assistant", "claude-test")
    [block] = body["content"]
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_")
    assert (block["name"], block["input"]) == ("get_weather", {"city": "Oslo"})
    assert body["stop_reason"] == "tool_use"
    assert body["usage"]["input_tokens"] == 30 and body["usage"]["output_tokens"] == 9


def test_the_event_stream_has_the_real_sequence(server: AnthropicServer) -> None:
    server.script([anthropic_tool_uses(("get_weather", {"city": "Oslo"}), text="Let me check.")])

    response = post(server, [{"role": "user", "content": "Oslo?"}], stream=True)

    events = [
        (lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: ")))
        for lines in (e.split("\n") for e in response.text.strip().split("\n\n"))
    ]
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"]["type"] for n, d in events if n == "content_block_start"]
    assert starts == ["text", "tool_use"]
    deltas = {d["delta"]["type"] for n, d in events if n == "content_block_delta"}
    assert deltas == {"text_delta", "input_json_delta"}
    assert names.count("content_block_stop") == 2
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert events[-2][1]["usage"]["output_tokens"] > 0


def test_injected_overload_is_retried_by_the_sdk(server: AnthropicServer) -> None:
    server.script([anthropic_answer("after the retry")])
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.fail_next(Reply(529, overloaded, headers={"retry-after": "0"}))

    assert chat(server, max_retries=1).invoke("hi").content == "after the retry"
    assert len(server.message_requests()) == 2


def test_missing_api_key_is_unauthorized(server: AnthropicServer) -> None:
    response = httpx.post(
        server.url + "/v1/messages",
        json={"model": "claude-test", "max_tokens": 10, "messages": []},
        headers={"anthropic-version": "2023-06-01"},
        timeout=10,
    )

    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_dangling_tool_use_is_rejected(server: AnthropicServer) -> None:
    history = [{"role": "user", "content": "Oslo?"}, weather_call("toolu_x")]
    history.append({"role": "user", "content": "Never mind."})

    message = rejected(post(server, history), server)

    assert message.startswith("messages.1: `tool_use` ids were found without `tool_result`")
    assert "toolu_x" in message
    server.assert_complete()  # a rejected request plays no step


def test_tool_use_as_the_last_message_is_rejected(server: AnthropicServer) -> None:
    message = rejected(
        post(server, [{"role": "user", "content": "Oslo?"}, weather_call("a")]), server
    )

    assert "without `tool_result` blocks immediately after: a." in message


def test_text_before_the_results_is_rejected(server: AnthropicServer) -> None:
    late = {"role": "user", "content": [{"type": "text", "text": "Here:"}, result("toolu_a")]}

    message = rejected(
        post(server, [{"role": "user", "content": "?"}, weather_call("toolu_a"), late]), server
    )

    assert message.startswith("messages.2: Did not find 1 `tool_result` block(s) at the beginning")


def test_results_then_text_is_accepted(server: AnthropicServer) -> None:
    server.script([anthropic_answer("ok")])
    both = {"role": "user", "content": [result("toolu_a"), {"type": "text", "text": "And?"}]}

    response = post(server, [{"role": "user", "content": "?"}, weather_call("toolu_a"), both])

    assert response.status_code == 200, response.text


def test_a_missing_result_among_several_is_rejected(server: AnthropicServer) -> None:
    partial = {"role": "user", "content": [result("toolu_a")]}
    history = [{"role": "user", "content": "?"}, weather_call("toolu_a", "toolu_b"), partial]

    message = rejected(post(server, history), server)

    assert message.startswith("messages.1: `tool_use` ids were found without")
    assert "toolu_b" in message and "toolu_a" not in message


def test_duplicate_results_are_rejected(server: AnthropicServer) -> None:
    twice = {"role": "user", "content": [result("toolu_a"), result("toolu_a", "again")]}
    history = [{"role": "user", "content": "?"}, weather_call("toolu_a"), twice]

    message = rejected(post(server, history), server)

    assert "Found multiple `tool_result` blocks with id: toolu_a" in message


def test_result_for_an_unknown_id_is_rejected(server: AnthropicServer) -> None:
    wrong = {"role": "user", "content": [result("toolu_a"), result("toolu_z")]}
    history = [{"role": "user", "content": "?"}, weather_call("toolu_a"), wrong]

    message = rejected(post(server, history), server)

    assert message.startswith("messages.2.content.1: unexpected `tool_use_id` found")


def test_non_boolean_is_error_is_rejected(server: AnthropicServer) -> None:
    bad = {"role": "user", "content": [{**result("toolu_a"), "is_error": "yes"}]}
    history = [{"role": "user", "content": "?"}, weather_call("toolu_a"), bad]

    assert "is_error" in rejected(post(server, history), server)


@pytest.mark.parametrize(
    ("messages", "extra", "expected"),
    [
        ([{"role": "system", "content": "Be brief."}], {}, 'Unexpected role "system"'),
        ([{"role": "user", "content": ""}], {}, "must have non-empty content"),
        (
            [{"role": "user", "content": [{"type": "text", "text": "hi", "index": 0}]}],
            {},
            "messages.0.content.0.index: Extra inputs are not permitted",
        ),
        ([], {}, "at least one message is required"),
        (
            [{"role": "user", "content": "hi"}],
            {"tools": [{"name": "a", "input_schema": {"type": "object"}}] * 2},
            "Tool names must be unique",
        ),
        (
            [{"role": "user", "content": "hi"}],
            {"tools": [{"name": "a b", "input_schema": {"type": "object"}}]},
            "tools.0.custom.name",
        ),
        (
            [{"role": "user", "content": "hi"}],
            {"system": [{"type": "image", "source": {}}]},
            "system.0.type",
        ),
    ],
)
def test_malformed_requests_are_rejected(
    server: AnthropicServer, messages: list[Any], extra: dict[str, Any], expected: str
) -> None:
    assert expected in rejected(post(server, messages, **extra), server)


def test_duplicate_tool_use_ids_are_rejected(server: AnthropicServer) -> None:
    history = [
        {"role": "user", "content": "?"},
        weather_call("toolu_a"),
        {"role": "user", "content": [result("toolu_a")]},
        weather_call("toolu_a"),
        {"role": "user", "content": [result("toolu_a")]},
    ]

    assert "`tool_use` ids must be unique" in rejected(post(server, history), server)
