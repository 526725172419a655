"""The bare LangChain loop: the least a tool-calling agent with a transcript on disk can do.

A message list, the same model with its tools bound, the same tools, and one JSONL file per
thread (each message appended as LangChain's `message_to_dict`, flushed, not fsynced: Ferry's
SQLite runs with synchronous=NORMAL, which does not fsync each commit either). Loading a thread
reads its file. Its cost per model call is what LangChain itself spends on each call, mostly
normalising every message sent, so it is the floor the other systems are compared with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.tools import BaseTool

MAX_MODEL_CALLS = 50


class BareLoop:
    """Messages in memory, appended to `<path>.<thread>.jsonl` as they are made."""

    def __init__(self, name: str, path: Path, model: BaseChatModel, tools: list[BaseTool]) -> None:
        self.name = name
        self.path = path
        self.model = model.bind_tools(tools)
        self.tools = {t.name: t for t in tools}
        self._threads: dict[str, list[BaseMessage]] = {}
        self._files: dict[str, IO[str]] = {}

    def file(self, thread_id: str) -> Path:
        return self.path.with_name(f"{self.path.name}.{thread_id}.jsonl")

    def _append(self, thread_id: str, message: BaseMessage) -> None:
        self._threads[thread_id].append(message)
        out = self._files.get(thread_id)
        if out is None:
            out = self._files[thread_id] = self.file(thread_id).open("a", encoding="utf-8")
        out.write(json.dumps(message_to_dict(message), ensure_ascii=False) + "\n")
        out.flush()

    def invoke(self, question: str, thread_id: str) -> BaseMessage:
        if thread_id not in self._threads:
            self._threads[thread_id] = self.messages(thread_id)
        self._append(thread_id, HumanMessage(question))
        for _ in range(MAX_MODEL_CALLS):
            reply = self.model.invoke(self._threads[thread_id])
            assert isinstance(reply, AIMessage)
            self._append(thread_id, reply)
            if not reply.tool_calls:
                return reply
            for call in reply.tool_calls:
                self._append(thread_id, self.tools[call["name"]].invoke(call))
        raise RuntimeError(f"bare loop: no answer after {MAX_MODEL_CALLS} model calls")

    def messages(self, thread_id: str) -> list[BaseMessage]:
        """Read the thread's file (the in-memory list is what `invoke` works on)."""
        file = self.file(thread_id)
        if not file.exists():
            return []
        with file.open(encoding="utf-8") as lines:
            return messages_from_dict([json.loads(line) for line in lines])

    def close(self) -> None:
        for out in self._files.values():
            out.close()
        self._files.clear()
