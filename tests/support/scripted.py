"""An in-process chat model that plays a fixed script, records what it saw and fails loudly.

    model = ScriptedModel([tool_call("get_weather", city="Madrid"), answer("It is 21 °C")])
    ...run the agent...
    assert isinstance(model.calls[1][-1], ToolMessage)

A step is an `AIMessage` (built with the helpers below), a plain string (an answer), an
exception instance (raised at that call), or a callable `(messages) -> AIMessage` for a reply
that depends on what the model was sent. Tool calls without an id are numbered `call_1`,
`call_2`, ... in the order the model hands them out.

A test fails unless each model it made played its whole script and no more
(tests/support/script_check.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call as make_tool_call
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import PrivateAttr

from tests.support.script_check import created_at, track, unplayed_message

Step = AIMessage | str | BaseException | Callable[[list[BaseMessage]], AIMessage]
Usage = UsageMetadata | tuple[int, int]


class UnexpectedModelCall(AssertionError):
    """The model was called more often than its script allows."""


def _usage(usage: Usage) -> UsageMetadata:
    if isinstance(usage, tuple):
        input_tokens, output_tokens = usage
        return UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
    return usage


def answer(text: str, usage: Usage | None = None) -> AIMessage:
    """A final answer; `usage` is a UsageMetadata or `(input_tokens, output_tokens)`."""
    return AIMessage(content=text, usage_metadata=_usage(usage) if usage else None)


def tool_call(name: str, **args: Any) -> AIMessage:
    """A turn with one tool call; its id is assigned when the model plays it."""
    return AIMessage(content="", tool_calls=[make_tool_call(name=name, args=args, id=None)])


def tool_calls(*pairs: tuple[str, dict[str, Any]]) -> AIMessage:
    """A turn with several tool calls, given as `(name, args)` pairs."""
    calls = [make_tool_call(name=name, args=args, id=None) for name, args in pairs]
    return AIMessage(content="", tool_calls=calls)


def parallel(*turns: AIMessage) -> AIMessage:
    """Merge single-call turns, e.g. `parallel(tool_call(...), tool_call(...))`, into one."""
    return AIMessage(content="", tool_calls=[call for turn in turns for call in turn.tool_calls])


def with_usage(turn: AIMessage, input_tokens: int, output_tokens: int) -> AIMessage:
    """Return a copy of `turn` that reports this token usage."""
    return turn.model_copy(update={"usage_metadata": _usage((input_tokens, output_tokens))})


class _Script:
    """The mutable state of one model; copies of the model share it (see `__deepcopy__`)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps: deque[Step] = deque(steps)
        self.scripted = len(self.steps)
        self.calls: list[list[BaseMessage]] = []
        self.unexpected: list[list[BaseMessage]] = []
        self.bound_tools: list[str] = []
        self.tool_choice: Any = None
        self.tool_call_count = 0
        self.message_prefix = f"scripted-{uuid.uuid4().hex[:8]}"
        self.created_at = created_at()
        track(self)

    def assert_complete(self) -> None:
        """Fail unless every step was played and the model was never over-called."""
        if self.steps:
            raise AssertionError(f"ScriptedModel: {unplayed_message(self.steps, self.scripted)}")
        if self.unexpected:
            raise UnexpectedModelCall(
                f"ScriptedModel called {len(self.unexpected)} time(s) more than "
                f"the {self.scripted} scripted"
            )

    def __deepcopy__(self, memo: dict[int, Any]) -> _Script:
        # LangGraph and pydantic may copy the model; every copy must play the same script.
        return self


class ScriptedModel(BaseChatModel):
    """A chat model that replies with its scripted steps, one per call, in order."""

    _script: _Script = PrivateAttr()

    def __init__(self, steps: Sequence[Step] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._script = _Script(steps)

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """The messages sent on each call, oldest first (over-calls included)."""
        return self._script.calls

    @property
    def bound_tools(self) -> list[str]:
        """Names of the tools most recently bound with `bind_tools`."""
        return self._script.bound_tools

    @property
    def tool_choice(self) -> Any:
        return self._script.tool_choice

    @property
    def remaining(self) -> int:
        return len(self._script.steps)

    def assert_complete(self) -> None:
        """Fail unless every step was played and the model was never over-called."""
        self._script.assert_complete()

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ScriptedModel:
        """Record the tool names and return this same model, so calls are still recorded."""
        self._script.bound_tools = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        self._script.tool_choice = tool_choice
        return self

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _next_reply(self, messages: list[BaseMessage]) -> AIMessage:
        script = self._script
        seen = [m.model_copy(deep=True) for m in messages]
        script.calls.append(seen)
        if not script.steps:
            script.unexpected.append(seen)
            last = seen[-1].pretty_repr() if seen else "(no messages)"
            raise UnexpectedModelCall(
                f"call {len(script.calls)} but only {script.scripted} steps scripted; "
                f"last message:\n{last}"
            )
        step = script.steps.popleft()
        if callable(step):
            step = step(seen)
        if isinstance(step, BaseException):
            raise step
        reply = answer(step) if isinstance(step, str) else step.model_copy(deep=True)
        for call in reply.tool_calls:
            if call["id"] is None:
                script.tool_call_count += 1
                call["id"] = f"call_{script.tool_call_count}"
        if reply.id is None:
            reply.id = f"{script.message_prefix}-{len(script.calls)}"
        return reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next_reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        # BaseChatModel reports each chunk to the callbacks (LangGraph's "messages" mode) itself.
        reply = self._next_reply(messages)
        chunks = [AIMessageChunk(content=piece, id=reply.id) for piece in _split(reply.content)]
        for index, call in enumerate(reply.tool_calls):
            arguments = json.dumps(call["args"])
            half = len(arguments) // 2
            first = tool_call_chunk(
                name=call["name"], args=arguments[:half], id=call["id"], index=index
            )
            rest = tool_call_chunk(args=arguments[half:], index=index)
            chunks += [
                AIMessageChunk(content="", id=reply.id, tool_call_chunks=[part])
                for part in (first, rest)
            ]
        last = chunks[-1] if chunks else AIMessageChunk(content="", id=reply.id)
        last.usage_metadata = reply.usage_metadata
        last.chunk_position = "last"
        for chunk in chunks[:-1] + [last]:
            yield ChatGenerationChunk(message=chunk)


def _split(content: str | list[Any], pieces: int = 3) -> list[Any]:
    """Cut text at word boundaries into a few pieces (a list of blocks stays whole)."""
    if not isinstance(content, str):
        return [content]
    words = re.findall(r"\s*\S+\s*|\s+", content)
    size = max(1, -(-len(words) // pieces))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]
