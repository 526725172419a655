"""The OpenAI emulator's own wire format, driven by the real ChatOpenAI client.

Raw httpx sends the malformed bodies. What both emulators do alike is in test_provider_contract.py.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.support.servers.base import Reply
from tests.support.servers.openai import OpenAIServer, openai_answer


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


def chat(server: OpenAIServer, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=server.url + "/v1",
        api_key="sk-test-ferry",
        max_retries=0,
        **kwargs,
    )


def merge(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return sum(chunks[1:], chunks[0])


def asked_for_weather(call_id: str = "call_a") -> list[Any]:
    return [
        HumanMessage("Weather in Madrid?"),
        AIMessage(
            "", tool_calls=[{"name": "get_weather", "args": {"city": "Madrid"}, "id": call_id}]
        ),
    ]


def test_usage_is_reported(server: OpenAIServer) -> None:
    server.script([openai_answer("ok", usage=(120, 7)), openai_answer("estimated")])
    model = chat(server)

    scripted = model.invoke("hi")
    estimated = model.invoke("hi " * 40)

    assert scripted.usage_metadata is not None
    assert scripted.usage_metadata["input_tokens"] == 120
    assert scripted.usage_metadata["output_tokens"] == 7
    assert scripted.usage_metadata["total_tokens"] == 127
    assert estimated.usage_metadata is not None
    assert estimated.usage_metadata["input_tokens"] > 20


def test_streamed_usage_when_asked(server: OpenAIServer) -> None:
    server.script([openai_answer("It is 21 °C", usage=(50, 4)), openai_answer("no usage")])

    with_usage = merge(list(chat(server, stream_usage=True).stream("hi")))
    without_usage = merge(list(chat(server).stream("hi")))

    assert with_usage.usage_metadata is not None
    assert with_usage.usage_metadata["total_tokens"] == 54
    assert server.chat_requests()[0]["stream_options"] == {"include_usage": True}
    assert without_usage.usage_metadata is None


def test_dangling_tool_call_is_rejected(server: OpenAIServer) -> None:
    history = [*asked_for_weather("call_x"), HumanMessage("Never mind.")]

    with pytest.raises(openai.BadRequestError) as caught:
        chat(server).invoke(history)

    assert caught.value.status_code == 400
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("An assistant message with 'tool_calls' must be followed")
    assert error["message"].endswith("did not have response messages: call_x")
    assert len(server.rejections) == 1
    server.assert_complete()  # a rejected request plays no step


def test_tool_message_without_a_call_is_rejected(server: OpenAIServer) -> None:
    history = [HumanMessage("hi"), ToolMessage("21 °C", tool_call_id="call_x")]

    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding message"):
        chat(server).invoke(history)

    assert server.rejections[0].error["param"] == "messages.[1].role"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "gpt-4o-mini", "messages": []}, "empty array"),
        ({"model": "gpt-4o-mini"}, "Missing required parameter: 'messages'"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "robot", "content": "hi"}]}, "'robot'"),
        (
            {
                "model": "gpt-4o-mini",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": "{}"},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_a", "content": {"temp": 21}},
                ],
            },
            "Invalid type for 'messages[2].content'",
        ),
    ],
)
def test_malformed_bodies_are_rejected(
    server: OpenAIServer, body: dict[str, Any], fragment: str
) -> None:
    response = httpx.post(server.url + "/v1/chat/completions", json=body)

    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
    assert server.rejections[0].body == body


def test_invalid_json_is_rejected(server: OpenAIServer) -> None:
    response = httpx.post(server.url + "/v1/chat/completions", content=b"{not json")

    assert response.status_code == 400
    assert server.rejections[0].body == "{not json"


def test_injected_rate_limit_keeps_the_script(server: OpenAIServer) -> None:
    server.script([openai_answer("after the limit")])
    limited = {"error": {"message": "Rate limit reached", "type": "requests", "code": None}}
    server.fail_next(Reply(429, limited, headers={"Retry-After": "1"}))
    model = chat(server)

    with pytest.raises(openai.RateLimitError) as caught:
        model.invoke("hi")

    assert caught.value.response.headers["retry-after"] == "1"
    assert model.invoke("hi").content == "after the limit"
    assert len(server.chat_requests()) == 2


def test_a_scripted_reply_is_sent_as_it_is(server: OpenAIServer) -> None:
    server.script([Reply(503, {"error": {"message": "overloaded", "type": "server_error"}})])

    with pytest.raises(openai.InternalServerError, match="overloaded"):
        chat(server).invoke("hi")


def test_async_clients_work_across_event_loops(server: OpenAIServer) -> None:
    server.script([openai_answer("first loop"), openai_answer("second loop streamed")])
    model = chat(server)

    first = asyncio.run(model.ainvoke("hi"))
    chunks = asyncio.run(collect(model.astream("hi")))

    assert first.content == "first loop"
    assert "".join(str(c.content) for c in chunks) == "second loop streamed"
    gc.collect()  # a connection left pooled on a closed loop would warn here


async def collect(stream: AsyncIterator[AIMessageChunk]) -> list[AIMessageChunk]:
    return [chunk async for chunk in stream]
