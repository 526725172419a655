"""The types a stored value may name: Ferry's, LangGraph's and LangChain's data, nothing else.

Each is a class imported here, by Ferry; a stored name is only ever looked up in `ALLOWED`
(`graph.storage.codec.allowlist`), never imported. The LangChain types are the data classes of
`langchain_core` that its own loader allows (`langchain_core.load.mapping`) and LangGraph's
serializer round-trips: messages, agent actions and steps, documents, model outputs, prompt
values. Prompt templates, output parsers and runnables are left out: they are behaviour, not
data (a jinja2 template runs code when formatted), and no state of Ferry's holds one.
`tests/unit/test_stored_types.py` checks this table against both libraries on every upgrade.
"""

from __future__ import annotations

import collections
import datetime
import decimal
import ipaddress
import pathlib
import uuid
import zoneinfo
from collections.abc import Iterable

from langchain_core import agents, documents, outputs, prompt_values
from langchain_core import messages as lc
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy

MESSAGE_CLASSES: tuple[type[lc.BaseMessage], ...] = (
    lc.AIMessage, lc.AIMessageChunk, lc.ChatMessage, lc.ChatMessageChunk, lc.FunctionMessage,
    lc.FunctionMessageChunk, lc.HumanMessage, lc.HumanMessageChunk, lc.RemoveMessage,
    lc.SystemMessage, lc.SystemMessageChunk, lc.ToolMessage, lc.ToolMessageChunk,
)  # fmt: skip
"""The message classes Ferry's compact form stores (`graph.storage.codec.serde`)."""
LANGCHAIN_TYPES: tuple[type, ...] = (
    lc.BaseMessage, lc.BaseMessageChunk,
    agents.AgentAction, agents.AgentActionMessageLog, agents.AgentStep, agents.AgentFinish,
    documents.Document,
    outputs.Generation, outputs.GenerationChunk, outputs.ChatGeneration,
    outputs.ChatGenerationChunk, outputs.ChatResult, outputs.LLMResult, outputs.RunInfo,
    prompt_values.StringPromptValue, prompt_values.ChatPromptValue,
    prompt_values.ChatPromptValueConcrete, prompt_values.ImagePromptValue,
)  # fmt: skip
"""LangChain's data classes besides the messages (a graph's state may hold any of them)."""
VALUE_TYPES: tuple[type, ...] = (
    # LangGraph's own bookkeeping: tasks, interrupts, resumes, edits made in Studio.
    Send, Interrupt, Command, Overwrite, TimeoutPolicy,
    # Plain values that a message's metadata or a tool's artifact may hold (those LangGraph's
    # strict mode allows, but `re.compile`).
    datetime.date, datetime.time, datetime.timedelta, datetime.timezone, uuid.UUID,
    decimal.Decimal, set, frozenset, collections.deque, zoneinfo.ZoneInfo,
    ipaddress.IPv4Address, ipaddress.IPv4Interface, ipaddress.IPv4Network,
    ipaddress.IPv6Address, ipaddress.IPv6Interface, ipaddress.IPv6Network,
    pathlib.PosixPath,  # what `pathlib.Path(...)` makes on the systems Ferry runs on
)  # fmt: skip
ALLOWED: dict[tuple[str, str], type] = {
    (cls.__module__, cls.__name__): cls
    for cls in (*MESSAGE_CLASSES, *LANGCHAIN_TYPES, *VALUE_TYPES)
}
"""(module, name) → class, for every type a stored value may name."""


def allowing(extra: Iterable[type]) -> dict[tuple[str, str], type]:
    """`ALLOWED` plus the classes a caller stores itself (e.g. a tool's pydantic artifact)."""
    return {**ALLOWED, **{(cls.__module__, cls.__name__): cls for cls in extra}}
