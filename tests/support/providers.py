"""One face for the OpenAI and Anthropic test servers, so one scenario runs against both.

A `Provider` starts its server, builds the real LangChain client pointed at it, scripts replies
in its wire format, reads each request back as a provider-neutral transcript of `Item`s, and
names a reply's stop reason and the SDK's errors the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from tests.support.servers.anthropic import AnthropicServer, anthropic_answer, anthropic_tool_uses
from tests.support.servers.openai import OpenAIServer, openai_answer, openai_tool_calls
from tests.support.servers.scripted import ScriptedServer


@dataclass(frozen=True)
class Item:
    """One thing a request sent: a turn's text, a tool call, or a tool result."""

    kind: str  # "user", "assistant", "tool_use" or "tool_result"
    text: str = ""
    call_id: str = ""
    is_error: bool | None = None  # tool results only; None where the wire format has no flag


@dataclass(frozen=True)
class Provider:
    """A test server and the wire format its real client speaks."""

    name: str
    model_name: str
    server: Callable[[], ScriptedServer]
    model: Callable[[ScriptedServer], BaseChatModel]
    tool_calls: Callable[..., dict[str, Any]]
    answer: Callable[..., dict[str, Any]]
    requests: Callable[[Any], list[dict[str, Any]]]
    transcript: Callable[[dict[str, Any]], list[Item]]
    tool_names: Callable[[dict[str, Any]], list[str]]
    stop: Callable[[BaseMessage], str]
    """Why a reply stopped: "answer", "tool_use", or the provider's own word for anything else."""
    bad_request: type[Exception]
    """What the SDK raises for an HTTP 400."""
    server_error: type[Exception]
    """What the SDK raises for an HTTP 500."""


OPENAI_MODEL, ANTHROPIC_MODEL = "gpt-4.1-mini", "claude-test"


def _stop(key: str, words: dict[str, str]) -> Callable[[BaseMessage], str]:
    def stop(reply: BaseMessage) -> str:
        word: str = reply.response_metadata[key]
        return words.get(word, word)

    return stop


def _openai_model(server: ScriptedServer) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=OPENAI_MODEL,
        base_url=server.url + "/v1",
        api_key="sk-test-loop",  # type: ignore[arg-type]  # pydantic coerces it to SecretStr
        max_retries=0,
        stream_usage=True,
    )


def _openai_transcript(request: dict[str, Any]) -> list[Item]:
    items = []
    for m in request["messages"]:
        if m["role"] == "tool":
            items.append(Item("tool_result", m["content"], m["tool_call_id"]))
            continue
        if m["role"] in ("user", "assistant") and m.get("content"):
            items.append(Item(m["role"], m["content"]))
        items += [Item("tool_use", call_id=c["id"]) for c in m.get("tool_calls") or []]
    return items


def _anthropic_model(server: ScriptedServer) -> BaseChatModel:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(  # type: ignore[call-arg]  # mypy misreads the optional `stop` as required
        model_name=ANTHROPIC_MODEL,
        base_url=server.url,
        api_key="sk-ant-test",  # type: ignore[arg-type]  # pydantic coerces it to SecretStr
        max_retries=0,
    )


def _anthropic_transcript(request: dict[str, Any]) -> list[Item]:
    items = []
    for m in request["messages"]:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for b in blocks:
            if b["type"] == "text":
                items.append(Item(m["role"], b["text"]))
            elif b["type"] == "tool_use":
                items.append(Item("tool_use", call_id=b["id"]))
            elif b["type"] == "tool_result":
                text = b["content"] if isinstance(b["content"], str) else str(b["content"])
                items.append(Item("tool_result", text, b["tool_use_id"], b["is_error"]))
    return items


OPENAI = Provider(
    name="openai",
    model_name=OPENAI_MODEL,
    server=OpenAIServer,
    model=_openai_model,
    tool_calls=openai_tool_calls,
    answer=openai_answer,
    requests=lambda server: server.chat_requests(),
    transcript=_openai_transcript,
    tool_names=lambda request: [t["function"]["name"] for t in request["tools"]],
    stop=_stop("finish_reason", {"stop": "answer", "tool_calls": "tool_use"}),
    bad_request=openai.BadRequestError,
    server_error=openai.InternalServerError,
)

ANTHROPIC = Provider(
    name="anthropic",
    model_name=ANTHROPIC_MODEL,
    server=AnthropicServer,
    model=_anthropic_model,
    tool_calls=anthropic_tool_uses,
    answer=anthropic_answer,
    requests=lambda server: server.message_requests(),
    transcript=_anthropic_transcript,
    tool_names=lambda request: [t["name"] for t in request["tools"]],
    stop=_stop("stop_reason", {"end_turn": "answer", "tool_use": "tool_use"}),
    bad_request=anthropic.BadRequestError,
    server_error=anthropic.InternalServerError,
)

PROVIDERS = [OPENAI, ANTHROPIC]
