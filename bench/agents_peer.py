"""The OpenAI Agents SDK peer: an `Agent` run by `Runner`, its history in a `SQLiteSession`.

The SDK calls models through its own `Model` interface, so `ScriptedAgentsModel` gives the same
scripted replies as `bench.model.BenchModel` (same seeds, arguments and answer text), and the
same tool body runs as a `function_tool`. No network: tracing is off and no provider is built.
Only this module and `bench.cold` import `agents` (the bench venv has it, `make test`'s has not).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agents import Agent, Model, ModelResponse, ModelSettings, RunConfig, Runner, function_tool
from agents.memory import SQLiteSession
from agents.usage import Usage
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from bench.model import CLOCK, answer_text, call_id, turn_seed

ROUNDS = 3


def _user_text(item: Any) -> str | None:
    if not isinstance(item, dict) or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _reply(items: list[Any], tool_name: str) -> list[Any]:
    """The scripted model's output items for the input `items` (see `BenchModel._reply`)."""
    results, seed = 0, 0
    for item in reversed(items):
        text = _user_text(item)
        if text is not None:
            seed = turn_seed(text)
            break
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            results += 1
    ident = call_id()
    if results < ROUNDS:
        arguments = json.dumps({"n": seed + results})
        return [
            ResponseFunctionToolCall(
                type="function_call", name=tool_name, arguments=arguments, call_id=ident, id=ident
            )
        ]
    text = ResponseOutputText(type="output_text", text=answer_text(results, seed), annotations=[])
    return [
        ResponseOutputMessage(
            type="message", id=f"msg_{ident}", role="assistant", status="completed", content=[text]
        )
    ]


class ScriptedAgentsModel(Model):
    """The bench's scripted model behind the Agents SDK's `Model` interface."""

    def __init__(self, tool_name: str = "fetch_blob") -> None:
        self.tool_name = tool_name

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        started, cpu = time.perf_counter(), time.thread_time()
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        output = _reply(items, self.tool_name)
        usage = Usage(requests=1, input_tokens=10, output_tokens=10, total_tokens=20)
        CLOCK.add_model(time.perf_counter() - started, time.thread_time() - cpu)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bench does not stream")


def to_langchain(items: list[Any]) -> list[BaseMessage]:
    """Session items as LangChain messages, so raw bytes are counted the same way for every peer."""
    out: list[BaseMessage] = []
    for item in items:
        text = _user_text(item)
        kind = item.get("type")
        if text is not None:
            out.append(HumanMessage(text))
        elif kind == "function_call":
            call = {
                "name": item["name"],
                "args": json.loads(item["arguments"]),
                "id": item["call_id"],
            }
            out.append(AIMessage("", tool_calls=[call]))
        elif kind == "function_call_output":
            out.append(ToolMessage(str(item["output"]), tool_call_id=item["call_id"]))
        elif kind == "message" or item.get("role") == "assistant":
            parts = item.get("content") or []
            out.append(AIMessage("".join(p.get("text", "") for p in parts)))
    return out


class AgentsSession:
    """One `Agent` on one SQLite file; a `SQLiteSession` per thread, kept open."""

    def __init__(self, name: str, path: Path, tools: list[BaseTool]) -> None:
        self.name = name
        self.path = path
        agent_tools = [
            function_tool(t.func, name_override=t.name)
            for t in tools
            if isinstance(t, StructuredTool) and t.func is not None
        ]
        self.agent = Agent(
            name="bench",
            instructions=None,
            model=ScriptedAgentsModel(agent_tools[0].name),
            model_settings=ModelSettings(),
            tools=agent_tools,
        )
        self.run_config = RunConfig(tracing_disabled=True)
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, SQLiteSession] = {}

    def session(self, thread_id: str) -> SQLiteSession:
        if thread_id not in self.sessions:
            self.sessions[thread_id] = SQLiteSession(thread_id, self.path)
        return self.sessions[thread_id]

    def invoke(self, question: str, thread_id: str) -> BaseMessage:
        run = Runner.run(
            self.agent, question, session=self.session(thread_id), run_config=self.run_config
        )
        result = self.loop.run_until_complete(run)
        return AIMessage(str(result.final_output))

    def items(self, thread_id: str) -> list[Any]:
        return self.loop.run_until_complete(self.session(thread_id).get_items())

    def messages(self, thread_id: str) -> list[BaseMessage]:
        return to_langchain(self.items(thread_id))

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()
        self.sessions.clear()
        self.loop.close()
