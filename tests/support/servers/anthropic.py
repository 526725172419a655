"""A loopback Anthropic Messages API emulator that plays a script and validates like the real API.

    with AnthropicServer() as server:
        server.script([anthropic_tool_uses(("lookup", {"key": "a"})), anthropic_answer("a=1")])
        model = ChatAnthropic(model="claude-x", base_url=server.url, api_key="sk-ant-test")

A step is `anthropic_answer(...)`, `anthropic_tool_uses(...)`, a `Reply` sent as it is, or a
callable `(request_json) -> step`. A request the real API would reject gets its 400 (or 401) and
plays no step; a request after the script ended gets a 500 and is kept in `unexpected`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.support.servers.base import Reply, Request
from tests.support.servers.scripted import ScriptedServer

Step = dict[str, Any] | Reply | Callable[[dict[str, Any]], Any]
ToolUseSpec = tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]

_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
# The keys each input block may carry; the real API rejects any other key.
_BLOCK_KEYS = {
    "user": {
        "text": {"type", "text", "cache_control", "citations"},
        "image": {"type", "source", "cache_control"},
        "document": {"type", "source", "title", "context", "citations", "cache_control"},
        "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    },
    "assistant": {
        "text": {"type", "text", "cache_control", "citations"},
        "tool_use": {"type", "id", "name", "input", "cache_control"},
        "thinking": {"type", "thinking", "signature"},
        "redacted_thinking": {"type", "data"},
    },
}


def anthropic_answer(text: str, usage: tuple[int, int] | None = None) -> dict[str, Any]:
    """A final answer; `usage` is `(input_tokens, output_tokens)`, else estimated."""
    return {"text": text, "tool_uses": [], "usage": usage}


def anthropic_tool_uses(
    *calls: ToolUseSpec, text: str | None = None, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    """A turn calling tools, each `(name, input)` or `(name, input, id)`, after optional `text`."""
    return {"text": text, "tool_uses": list(calls), "usage": usage}


class InvalidRequest(Exception):
    """What the real API answers with HTTP 400 (or `status`)."""

    def __init__(
        self, message: str, status: int = 400, kind: str = "invalid_request_error"
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = {"type": kind, "message": message}


class PromptCache:
    """Prompt caching as the Messages API accounts it, tokens estimated at four characters.

    A request's prefix is its tools, then its system blocks, then its messages' blocks. Each
    breakpoint — a block's `cache_control`, or the top-level `cache_control`, which marks the
    last block — writes the prefix up to it, if that is at least `min_tokens` long. A request
    reads the longest prefix written before, found at a breakpoint or up to 20 blocks before
    one; what lies between that and the last breakpoint is written, the rest is plain input.
    Tools count no tokens here (the request's estimate never counted them) but are part of
    every prefix, so changing them misses the cache, as it does on the real API.
    """

    LOOKBACK = 20

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._written: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, body: dict[str, Any], input_tokens: int) -> dict[str, int]:
        """The input's split into plain, read from the cache and written to it."""
        blocks = _blocks(body)
        keys, ends = [], []
        digest, chars = hashlib.sha256(), 0
        for role, block in blocks:
            digest.update(json.dumps([role, _unmarked(block)], sort_keys=True).encode())
            keys.append(digest.hexdigest())
            chars += len(json.dumps(block)) if role != "tools" else 0
            ends.append(chars // 4)
        marks = [i for i, (_, block) in enumerate(blocks) if "cache_control" in block]
        if body.get("cache_control") and blocks:
            marks.append(len(blocks) - 1)
        if not marks:
            return {"input_tokens": input_tokens, "read": 0, "written": 0}
        with self._lock:
            read_end = 0
            for mark in sorted(set(marks)):
                for i in range(mark, max(mark - self.LOOKBACK, -1), -1):
                    if keys[i] in self._written:
                        read_end = max(read_end, ends[i])
                        break
            last = max(marks)
            for mark in marks:
                if ends[mark] >= self.min_tokens:
                    self._written.add(keys[mark])
        read = min(read_end, input_tokens)
        written = (
            max(min(ends[last], input_tokens) - read, 0) if ends[last] >= self.min_tokens else 0
        )
        return {"input_tokens": input_tokens - read - written, "read": read, "written": written}


def _blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The request's cacheable blocks in prefix order, each with where it is."""
    blocks: list[tuple[str, dict[str, Any]]] = [("tools", t) for t in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", b) for b in system]
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            blocks.append((message["role"], {"type": "text", "text": content}))
        else:
            blocks += [(message["role"], b) for b in content]
    return blocks


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


class AnthropicServer(ScriptedServer):
    """Answer `POST /v1/messages` from a script, as JSON or as server-sent events.

    Its prompt cache (`cache`) accounts cache reads and writes the way the API does.
    """

    def __init__(self) -> None:
        super().__init__()
        self.cache = PromptCache()

    def message_requests(self) -> list[Any]:
        """Every messages request body received, rejected and faulted ones included."""
        return [r.json() for r in self.requests_to("/v1/messages")]

    def handle(self, request: Request) -> Reply:
        if request.method != "POST" or request.path != "/v1/messages":
            return Reply(404, _error_body("not_found_error", "Not Found"))
        body: Any = request.body.decode(errors="replace")
        try:
            _check_headers(request.headers)
            try:
                body = request.json()
            except ValueError as exc:
                raise InvalidRequest(f"There was an error parsing the body: {exc}") from exc
            _validate(body)
        except InvalidRequest as exc:
            self.reject(body, exc.error)
            return Reply(exc.status, _error_body(exc.error["type"], exc.error["message"]))
        step, number = self.next_step(body)
        if step is None:
            message = self.past_the_script()
            return Reply(500, _error_body("api_error", message))
        return step if isinstance(step, Reply) else _message(body, step, number, self.cache)


def _error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _message(body: dict[str, Any], step: dict[str, Any], number: int, cache: PromptCache) -> Reply:
    """The reply to a valid request: one message, whole or as server-sent events."""
    content: list[dict[str, Any]] = []
    if step["text"]:
        content.append({"type": "text", "text": step["text"]})
    for i, spec in enumerate(step["tool_uses"], start=1):
        call_id = spec[2] if len(spec) > 2 else f"toolu_ferry{number:04d}{i:02d}"
        content.append({"type": "tool_use", "id": call_id, "name": spec[0], "input": spec[1]})
    # Roughly four characters a token, like English text; tests only need plausible numbers.
    input_tokens, output_tokens = step["usage"] or (
        max(1, len(json.dumps([body.get("system"), body["messages"]])) // 4),
        max(1, len(json.dumps(content)) // 4),
    )
    cached = (
        cache.usage(body, input_tokens)
        if step["usage"] is None
        else {"input_tokens": input_tokens, "read": 0, "written": 0}
    )
    usage = {
        "input_tokens": cached["input_tokens"],
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cached["written"],
        "cache_read_input_tokens": cached["read"],
    }
    stop_reason = "tool_use" if step["tool_uses"] else "end_turn"
    message = {
        "id": f"msg_ferry{number:04d}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    headers = {"request-id": f"req_ferry{number:04d}"}
    if body.get("stream"):
        return Reply(headers=headers, chunks=_events(message))
    return Reply(body=message, headers=headers)


def _events(message: dict[str, Any]) -> list[bytes]:
    """Server-sent events for one message, in the order and shape the real API sends them."""
    usage = message["usage"]
    opening = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    opening["usage"] = {**usage, "output_tokens": 1}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": opening}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            start = {**block, "input": {}}
            pieces = ["", *_pieces(json.dumps(block["input"]))]
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append({"type": "message_delta", "delta": stop, "usage": usage})
    events.append({"type": "message_stop"})
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _check_headers(headers: dict[str, str]) -> None:
    if not headers.get("x-api-key") and not headers.get("authorization"):
        raise InvalidRequest("x-api-key header is required", 401, "authentication_error")
    if not headers.get("anthropic-version"):
        raise InvalidRequest("anthropic-version: header is required")


def _validate(body: Any) -> None:
    """Raise InvalidRequest for what the real Messages API rejects."""
    if not isinstance(body, dict):
        raise InvalidRequest("Input should be a valid dictionary")
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise InvalidRequest(f"{name}: Field required")
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        raise InvalidRequest("max_tokens: Input should be greater than or equal to 1")
    _check_system(body.get("system"))
    _check_tools(body.get("tools"))
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: at least one message is required")
    open_calls: list[str] = []  # the tool_use ids the previous message left to answer
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _check_message(i, message, last=i == len(messages) - 1)
        _check_results(i, blocks, open_calls)
        open_calls = []
        for j, block in enumerate(blocks):
            if block["type"] == "tool_use":
                _check_tool_use(f"messages.{i}.content.{j}", block, seen_ids)
                open_calls.append(block["id"])
    if open_calls:
        _missing_results(len(messages) - 1, open_calls)


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: Input should be a valid list")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{j}.type: Input should be 'text'")
        _check_keys(f"system.{j}", block, _BLOCK_KEYS["user"]["text"])
        if not block.get("text"):
            raise InvalidRequest("system: text content blocks must be non-empty")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    names = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise InvalidRequest(f"tools.{k}: Input should be a valid dictionary")
        allowed = {"type", "name", "description", "input_schema", "cache_control"}
        _check_keys(f"tools.{k}.custom", tool, allowed)
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise InvalidRequest(
                f"tools.{k}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise InvalidRequest(f"tools.{k}.custom.input_schema: Field required")
        if schema.get("type") != "object":
            raise InvalidRequest(f"tools.{k}.custom.input_schema.type: Input should be 'object'")
        names.append(name)
    if len(set(names)) != len(names):
        raise InvalidRequest("tools: Tool names must be unique.")


def _check_message(i: int, message: Any, last: bool) -> list[dict[str, Any]]:
    """Check one message's role and blocks; return its content as blocks."""
    if not isinstance(message, dict):
        raise InvalidRequest(f"messages.{i}: Input should be a valid dictionary")
    role = message.get("role")
    if role == "system":
        raise InvalidRequest(
            'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
            'parameter, not "system" as an input message role.'
        )
    if role not in ("user", "assistant"):
        raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    _check_keys(f"messages.{i}", message, {"role", "content"})
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise InvalidRequest(f"messages.{i}.content: Input should be a valid list")
    if not content and not (last and role == "assistant"):
        raise InvalidRequest(
            f"messages.{i}: all messages must have non-empty content except for the optional "
            "final assistant message"
        )
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        kind = block.get("type") if isinstance(block, dict) else None
        allowed = _BLOCK_KEYS[role].get(kind) if isinstance(kind, str) else None
        if allowed is None:
            expected = ", ".join(f"'{t}'" for t in _BLOCK_KEYS[role])
            raise InvalidRequest(
                f"{where}: Input tag '{kind}' found using 'type' does not match any of the "
                f"expected tags: {expected}"
            )
        _check_keys(where, block, allowed)
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
            raise InvalidRequest("messages: text content blocks must be non-empty")
        if kind == "tool_result":
            _check_result_content(where, block)
    return content


def _check_keys(where: str, value: dict[str, Any], allowed: set[str]) -> None:
    for key in value:
        if key not in allowed:
            raise InvalidRequest(f"{where}.{key}: Extra inputs are not permitted")


def _check_tool_use(where: str, block: dict[str, Any], seen_ids: set[str]) -> None:
    call_id = block.get("id")
    if not isinstance(call_id, str) or not _ID.match(call_id):
        raise InvalidRequest(f"{where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'")
    if call_id in seen_ids:
        raise InvalidRequest(f"{where}: `tool_use` ids must be unique")
    seen_ids.add(call_id)
    if not isinstance(block.get("name"), str):
        raise InvalidRequest(f"{where}.name: Field required")
    if not isinstance(block.get("input"), dict):
        raise InvalidRequest(f"{where}.input: Input should be a valid dictionary")


def _check_result_content(where: str, block: dict[str, Any]) -> None:
    if "is_error" in block and not isinstance(block["is_error"], bool):
        raise InvalidRequest(f"{where}.is_error: Input should be a valid boolean")
    content = block.get("content", "")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.content: Input should be a valid list")
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("text", "image", "document"):
            raise InvalidRequest(
                f"{where}.content.{k}: Input tag '{kind}' found using 'type' does not match any "
                "of the expected tags: 'text', 'image', 'document'"
            )
        if kind == "text" and not part.get("text"):
            raise InvalidRequest("messages: text content blocks must be non-empty")


def _check_results(i: int, blocks: list[dict[str, Any]], open_calls: list[str]) -> None:
    """The message after a tool_use turn must begin with exactly one result per call."""
    results = [b for b in blocks if b["type"] == "tool_result"]
    leading = 0
    while leading < len(blocks) and blocks[leading]["type"] == "tool_result":
        leading += 1
    answered: set[str] = set()
    for j, block in enumerate(blocks):
        if block["type"] != "tool_result":
            continue
        call_id = block.get("tool_use_id")
        if call_id not in open_calls:
            raise InvalidRequest(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {call_id}. Each `tool_result` block must have a corresponding "
                "`tool_use` block in the previous message."
            )
        if call_id in answered:
            raise InvalidRequest(
                f"messages.{i}.content.{j}: each tool_use must have a single result. Found "
                f"multiple `tool_result` blocks with id: {call_id}"
            )
        answered.add(call_id)
    missing = [c for c in open_calls if c not in answered]
    if missing:
        _missing_results(i - 1, missing)
    if open_calls and leading < len(results):
        raise InvalidRequest(
            f"messages.{i}: Did not find {len(open_calls)} `tool_result` block(s) at the "
            "beginning of this message. Messages following `tool_use` blocks must begin with a "
            "matching number of `tool_result` blocks."
        )


def _missing_results(i: int, missing: list[str]) -> None:
    raise InvalidRequest(
        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )
