"""A loopback OpenAI Chat Completions emulator that plays a script and validates like the real API.

    with OpenAIServer() as server:
        server.script([openai_tool_calls(("get_weather", {"city": "Oslo"})), openai_answer("3 °C")])
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.url + "/v1", api_key="sk-test")

A step is `openai_answer(...)`, `openai_tool_calls(...)`, a `Reply` sent as it is, or a callable
`(request_json) -> step`. A request the real API would reject gets its 400 and plays no step.
A tool call's arguments may be a string, sent as it is (broken JSON, say); `cut_stream(step, n)`
closes a streamed reply cleanly after `n` characters of text and arguments, with no finish reason;
`slow_stream(step, s)` pauses `s` seconds before each streamed chunk; `held_stream(step, n,
arrived, release)` streams `n` chunks, then sets `arrived` and waits for `release` to go on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.held import HOLD_LIMIT_S
from tests.support.servers.base import Reply, Request
from tests.support.servers.scripted import ScriptedServer

Step = dict[str, Any] | Reply | Callable[[dict[str, Any]], Any]
Arguments = dict[str, Any] | str  # a string is sent as it is, valid JSON or not
ToolCallSpec = tuple[str, Arguments] | tuple[str, Arguments, str]
_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def openai_answer(text: str, usage: tuple[int, int] | None = None) -> dict[str, Any]:
    """A final answer; `usage` is `(prompt_tokens, completion_tokens)`, else estimated."""
    return {"content": text, "tool_calls": [], "usage": usage}


def openai_tool_calls(*calls: ToolCallSpec, usage: tuple[int, int] | None = None) -> dict[str, Any]:
    """A turn calling tools, each `(name, args)` or `(name, args, call_id)`."""
    return {"content": None, "tool_calls": list(calls), "usage": usage}


def cut_stream(step: dict[str, Any], after: int) -> dict[str, Any]:
    """`step`, streamed until `after` characters of text and arguments, then the stream ends."""
    return {**step, "cut_after": after}


def slow_stream(step: dict[str, Any], chunk_delay_s: float) -> dict[str, Any]:
    """`step`, streamed with a pause of `chunk_delay_s` before each chunk."""
    return {**step, "chunk_delay_s": chunk_delay_s}


def held_stream(
    step: dict[str, Any], chunks: int, arrived: threading.Event, release: threading.Event
) -> dict[str, Any]:
    """`step`, streamed: `chunks` chunks, then a pause until `release` (`arrived` set), the rest."""
    return {**step, "hold": (chunks, arrived, release)}


def _held(
    events: list[bytes], hold: tuple[int, threading.Event, threading.Event]
) -> Iterator[bytes]:
    chunks, arrived, release = hold
    yield from events[:chunks]
    arrived.set()
    release.wait(HOLD_LIMIT_S)
    yield from events[chunks:]


def _error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"message": message, "type": "invalid_request_error", "param": param, "code": code}


class InvalidRequest(Exception):
    """What the real API answers with HTTP 400."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.error = _error(message, param, code)


class OpenAIServer(ScriptedServer):
    """Answer `POST /v1/chat/completions` from a script, as JSON or as server-sent events."""

    def chat_requests(self) -> list[Any]:
        """Every chat completions request body received, rejected and faulted ones included."""
        return [r.json() for r in self.requests_to("/chat/completions")]

    def handle(self, request: Request) -> Reply:
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return super().handle(request)
        body: Any = request.body.decode(errors="replace")
        try:
            body = request.json()
            _validate(body)
        except (ValueError, InvalidRequest) as exc:
            error = exc.error if isinstance(exc, InvalidRequest) else _error(f"Invalid JSON: {exc}")
            self.reject(body, error)
            return Reply(400, {"error": error})
        step, number = self.next_step(body)
        if step is None:
            message = self.past_the_script()
            return Reply(500, {"error": {**_error(message), "type": "server_error"}})
        return step if isinstance(step, Reply) else self._complete(body, step, number)

    def _complete(self, body: dict[str, Any], step: dict[str, Any], number: int) -> Reply:
        calls = [
            {
                "id": spec[2] if len(spec) > 2 else f"call_{number}_{i}",
                "type": "function",
                "function": {
                    "name": spec[0],
                    "arguments": spec[1] if isinstance(spec[1], str) else json.dumps(spec[1]),
                },
            }
            for i, spec in enumerate(step["tool_calls"], start=1)
        ]
        content = step["content"]
        # Roughly four characters a token, like English text; tests only need plausible numbers.
        prompt, completion = step["usage"] or (
            max(1, len(json.dumps(body["messages"])) // 4),
            max(1, len((content or "") + json.dumps(calls)) // 4),
        )
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        usage["total_tokens"] = prompt + completion
        finish = "tool_calls" if calls else "stop"
        head = {"id": f"chatcmpl-ferry{number}", "created": int(time.time())}
        head |= {"model": body["model"], "system_fingerprint": "fp_ferry"}
        if body.get("stream"):
            if not (body.get("stream_options") or {}).get("include_usage"):
                usage = {}
            events = _events(head, content, calls, finish, usage, step.get("cut_after"))
            held = _held(events, step["hold"]) if step.get("hold") else events
            return Reply(chunks=held, chunk_delay_s=step.get("chunk_delay_s", 0.0))
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return Reply(
            body={**head, "object": "chat.completion", "choices": [choice], "usage": usage}
        )


def _events(
    head: dict[str, Any],
    content: str | None,
    calls: list[dict[str, Any]],
    finish: str,
    usage: dict[str, int],
    cut_after: int | None = None,
) -> list[bytes]:
    """Server-sent events for one completion, cut the way OpenAI cuts them.

    With `cut_after`, the events stop once that many characters of text and arguments were
    sent: no finish reason, no usage, no `[DONE]`, as when a connection closes mid-reply.
    """

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        extra = {"usage": None} if usage else {}
        return {**head, "object": "chat.completion.chunk", "choices": [choice], **extra}

    budget = [cut_after if cut_after is not None else -1]

    def pieces(text: str) -> list[str]:
        if budget[0] < 0:
            return _pieces(text)
        kept, budget[0] = text[: budget[0]], max(0, budget[0] - len(text))
        return _pieces(kept)

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in pieces(content or "")]
    for index, call in enumerate(calls):
        if budget[0] == 0:
            break
        opening = {**call, "index": index, "function": {**call["function"], "arguments": ""}}
        chunks.append(chunk({"tool_calls": [opening]}))
        for piece in pieces(call["function"]["arguments"]):
            piece_delta = {"index": index, "function": {"arguments": piece}}
            chunks.append(chunk({"tool_calls": [piece_delta]}))
    if cut_after is not None:
        return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    chunks.append(chunk({}, finish))
    if usage:
        chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def _pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _validate(body: Any) -> None:
    """Raise InvalidRequest for what the real Chat Completions API rejects."""
    if not isinstance(body, dict):
        raise InvalidRequest("Invalid request body: expected a JSON object.")
    for name in ("model", "messages"):
        if name not in body:
            missing = "missing_required_parameter"
            raise InvalidRequest(f"Missing required parameter: '{name}'.", name, missing)
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        message = "Invalid 'messages': empty array. Expected an array with minimum length 1."
        raise InvalidRequest(message, "messages", "empty_array")
    # An assistant message with tool_calls opens a block that only tool messages may follow
    # until each call id is answered once.
    answered: dict[str, bool] = {}
    block_start = 0
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in _ROLES:
            supported = ", ".join(repr(r) for r in _ROLES)
            text = f"Invalid value: {role!r}. Supported values are: {supported}."
            raise InvalidRequest(text, f"messages[{i}].role", "invalid_value")
        if role == "tool":
            _check_tool_message(i, message, answered)
            answered[message["tool_call_id"]] = True
            continue
        _check_block_answered(block_start, answered)
        answered = {call.get("id"): False for call in message.get("tool_calls") or []}
        block_start = i
    _check_block_answered(block_start, answered)


def _check_tool_message(i: int, message: dict[str, Any], answered: dict[str, bool]) -> None:
    call_id = message.get("tool_call_id")
    if not answered:
        text = "Invalid parameter: messages with role 'tool' must be a response to a preceeding"
        raise InvalidRequest(f"{text} message with 'tool_calls'.", f"messages.[{i}].role")
    if not isinstance(call_id, str):
        text = f"Missing required parameter: 'messages[{i}].tool_call_id'."
        raise InvalidRequest(text, f"messages[{i}].tool_call_id", "missing_required_parameter")
    if call_id not in answered:
        text = f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls'"
        raise InvalidRequest(f"{text} of previous message.", f"messages.[{i}].tool_call_id")
    if answered[call_id]:
        text = f"Invalid parameter: duplicate tool message for 'tool_call_id' of '{call_id}'."
        raise InvalidRequest(text, f"messages.[{i}].tool_call_id")
    content = message.get("content")
    text_parts = isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    )
    if not (isinstance(content, str) or text_parts):
        text = f"Invalid type for 'messages[{i}].content': expected one of a string or array of"
        text += f" text parts, but got {type(content).__name__} instead."
        raise InvalidRequest(text, f"messages[{i}].content", "invalid_type")


def _check_block_answered(block_start: int, answered: dict[str, bool]) -> None:
    missing = [call_id for call_id, done in answered.items() if not done]
    if missing:
        text = (
            "An assistant message with 'tool_calls' must be followed by tool messages responding"
            " to each 'tool_call_id'. The following tool_call_ids did not have response messages:"
        )
        raise InvalidRequest(f"{text} {', '.join(missing)}", f"messages.[{block_start}].role")
