"""The benchmark's chat model: stateless, deterministic, nearly free: only framework cost shows.

Each call looks at the messages since the last HumanMessage: while the turn has fewer tool results
than `rounds * per_round`, it asks for the next round of `per_round` tool calls; then it answers.
This is a benchmark driver, not a test double, so branching on the message list is the point.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatGeneration, ChatResult


class Clock:
    """Time spent inside the model and the tools, to subtract from a turn's wall and CPU time.

    One process-wide instance; the sequential workloads run one thread of turns at a time, so the
    totals belong to that thread (tools may run in a helper thread, hence the lock). CPU time is
    the calling thread's (`time.thread_time`), which is what the body burns wherever it runs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.model_s = 0.0
        self.tool_s = 0.0
        self.inside_cpu_s = 0.0
        self.model_calls = 0

    def add_model(self, seconds: float, cpu_s: float = 0.0) -> None:
        with self._lock:
            self.model_s += seconds
            self.inside_cpu_s += cpu_s
            self.model_calls += 1

    def add_tool(self, seconds: float, cpu_s: float = 0.0) -> None:
        with self._lock:
            self.tool_s += seconds
            self.inside_cpu_s += cpu_s

    def snapshot(self) -> tuple[float, float, float, int]:
        """(model seconds, tool seconds, CPU seconds inside both, model calls) so far."""
        with self._lock:
            return self.model_s, self.tool_s, self.inside_cpu_s, self.model_calls


def turn_seed(text: str) -> int:
    """The seed of a question: every peer's scripted model derives its tool arguments from it."""
    return zlib.crc32(text.encode())


def answer_text(results: int, seed: int) -> str:
    """The scripted model's final answer, the same for every peer."""
    return f"Done: read {results} results for question {seed}."


def call_id() -> str:
    """A tool-call id in the shape every peer's scripted model uses."""
    return f"call_{uuid.uuid4().hex}"


CLOCK = Clock()


def _turn_seed(messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """(seed of the current question, tool results since it)."""
    results = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            text = message.content if isinstance(message.content, str) else str(message.content)
            return turn_seed(text), results
        if isinstance(message, ToolMessage):
            results += 1
    return 0, results


class BenchModel(BaseChatModel):
    """Asks for `rounds` rounds of `per_round` calls to `tool_name`, then answers."""

    tool_name: str = "fetch_blob"
    rounds: int = 3
    per_round: int = 1

    @property
    def _llm_type(self) -> str:
        return "ferry-bench"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> BenchModel:  # type: ignore[override]
        return self

    def _reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        seed, results = _turn_seed(messages)
        if results < self.rounds * self.per_round:
            base = seed + results
            calls = [
                tool_call(name=self.tool_name, args={"n": base + j}, id=call_id())
                for j in range(self.per_round)
            ]
            reply = AIMessage(content="", tool_calls=calls)
        else:
            reply = AIMessage(content=answer_text(results, seed))
        reply.usage_metadata = {"input_tokens": 10, "output_tokens": 10, "total_tokens": 20}
        return reply

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        started, cpu = time.perf_counter(), time.thread_time()
        reply = self._reply(messages)
        CLOCK.add_model(time.perf_counter() - started, time.thread_time() - cpu)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def timed(fn: Callable[..., str]) -> Callable[..., str]:
    """Count the time spent inside a tool's body as tool time."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            CLOCK.add_tool(time.perf_counter() - started, time.thread_time() - cpu)

    return wrapper
