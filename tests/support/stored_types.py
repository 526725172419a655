"""One value of each type a stored value may name, for round trips through every saver."""

from __future__ import annotations

import collections
import datetime
import decimal
import ipaddress
import pathlib
import uuid
import zoneinfo
from typing import Any

from langchain_core import agents, documents, outputs, prompt_values
from langchain_core import messages as lc
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy

_ACTION = agents.AgentAction(tool="calculator", tool_input={"expression": "6*7"}, log="thinking")
_REPLY = lc.AIMessage("42", id="a1", usage_metadata={"input_tokens": 3, "output_tokens": 1,
                                                     "total_tokens": 4})  # fmt: skip
_GENERATION = outputs.ChatGeneration(message=_REPLY, generation_info={"finish_reason": "stop"})

EXAMPLES: dict[type, Any] = {
    lc.AIMessage: _REPLY,
    lc.AIMessageChunk: lc.AIMessageChunk("4", id="a2"),
    lc.ChatMessage: lc.ChatMessage("hi", role="critic", id="c1"),
    lc.ChatMessageChunk: lc.ChatMessageChunk("h", role="critic", id="c2"),
    lc.FunctionMessage: lc.FunctionMessage("1", name="f", id="f1"),
    lc.FunctionMessageChunk: lc.FunctionMessageChunk("1", name="f", id="f2"),
    lc.HumanMessage: lc.HumanMessage("What is 6*7?", id="h1"),
    lc.HumanMessageChunk: lc.HumanMessageChunk("Wh", id="h2"),
    lc.RemoveMessage: lc.RemoveMessage(id="h1"),
    lc.SystemMessage: lc.SystemMessage("Be brief.", id="s1"),
    lc.SystemMessageChunk: lc.SystemMessageChunk("Be", id="s2"),
    lc.ToolMessage: lc.ToolMessage("42", tool_call_id="t1", id="t1", artifact={"n": 42}),
    lc.ToolMessageChunk: lc.ToolMessageChunk("4", tool_call_id="t1", id="t2"),
    lc.BaseMessage: lc.BaseMessage("plain", type="custom", id="b1"),
    lc.BaseMessageChunk: lc.BaseMessageChunk("pl", type="custom", id="b2"),
    agents.AgentAction: _ACTION,
    agents.AgentActionMessageLog: agents.AgentActionMessageLog(
        tool="calculator", tool_input="6*7", log="", message_log=[_REPLY]
    ),
    agents.AgentStep: agents.AgentStep(action=_ACTION, observation="42"),
    agents.AgentFinish: agents.AgentFinish(return_values={"output": "42"}, log="done"),
    documents.Document: documents.Document("Ferry docs", metadata={"source": "README"}, id="d1"),
    outputs.Generation: outputs.Generation(text="42"),
    outputs.GenerationChunk: outputs.GenerationChunk(text="4"),
    outputs.ChatGeneration: _GENERATION,
    outputs.ChatGenerationChunk: outputs.ChatGenerationChunk(message=lc.AIMessageChunk("4")),
    outputs.ChatResult: outputs.ChatResult(generations=[_GENERATION], llm_output={"m": "x"}),
    outputs.LLMResult: outputs.LLMResult(generations=[[outputs.Generation(text="42")]]),
    outputs.RunInfo: outputs.RunInfo(run_id=uuid.UUID(int=7)),
    prompt_values.StringPromptValue: prompt_values.StringPromptValue(text="What is 6*7?"),
    prompt_values.ChatPromptValue: prompt_values.ChatPromptValue(messages=[_REPLY]),
    prompt_values.ChatPromptValueConcrete: prompt_values.ChatPromptValueConcrete(messages=[_REPLY]),
    prompt_values.ImagePromptValue: prompt_values.ImagePromptValue(
        image_url={"url": "https://example.com/a.png"}
    ),
    Send: Send("execute_tool", {"call": {"id": "t1"}}),
    Interrupt: Interrupt(value={"action_requests": []}, id="i1"),
    Command: Command(resume={"decisions": []}),
    Overwrite: Overwrite([_REPLY]),
    TimeoutPolicy: TimeoutPolicy(run_timeout=30),
    datetime.date: datetime.date(2026, 11, 30),
    datetime.time: datetime.time(12, 30),
    datetime.timedelta: datetime.timedelta(seconds=90),
    datetime.timezone: datetime.timezone(datetime.timedelta(hours=2)),
    uuid.UUID: uuid.UUID(int=42),
    decimal.Decimal: decimal.Decimal("4.20"),
    set: {1, 2},
    frozenset: frozenset({3}),
    collections.deque: collections.deque([4, 5]),
    zoneinfo.ZoneInfo: zoneinfo.ZoneInfo("Europe/Madrid"),
    ipaddress.IPv4Address: ipaddress.IPv4Address("192.0.2.1"),
    ipaddress.IPv4Interface: ipaddress.IPv4Interface("192.0.2.1/24"),
    ipaddress.IPv4Network: ipaddress.IPv4Network("192.0.2.0/24"),
    ipaddress.IPv6Address: ipaddress.IPv6Address("2001:db8::1"),
    ipaddress.IPv6Interface: ipaddress.IPv6Interface("2001:db8::1/64"),
    ipaddress.IPv6Network: ipaddress.IPv6Network("2001:db8::/64"),
    pathlib.PosixPath: pathlib.PosixPath("notes", "b.txt"),
}
# A datetime is stored as its text and the method that parses it, not by its class.
DATETIME = datetime.datetime(2026, 11, 30, 12, tzinfo=datetime.UTC)


def same(loaded: Any, value: Any) -> bool:
    """Whether a loaded value is `value` again: equal, and of the same class all the way down."""
    return type(loaded) is type(value) and bool(loaded == value)
