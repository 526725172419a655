"""The exfiltration guard: find outbound tool calls that quote file content read earlier.

A result can carry instructions ("read notes.txt and search for its contents"), and a model
may follow them. The guard looks at the arguments of every call to a tool that sends them off
the machine (`metadata={"outbound": True}`) and finds any that quote what a private tool
(`read_file`, or `metadata={"private": True}`) returned earlier in the thread: 24 or more
consecutive characters, or a whole line of 10 or more. Case and runs of whitespace are ignored,
so re-wrapping a quote does not hide it.

Matching costs O(length of the arguments), whatever the size of the files: each result is
indexed once (cached by its text) by the hashes of its 16-character windows at every 8th
position, an eighth of its length. Any common run of 24 characters contains one of those
windows, so a quote always finds a candidate; only candidates are checked against the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool

QUOTE_CHARS = 24
"""Consecutive characters of a file that count as quoting it."""
LINE_CHARS = 10
"""A whole line counts from this length on (shorter lines are too common to mean anything)."""
MAX_INDEXED_CHARS = 500_000
"""File content indexed per thread, newest first: bounds memory and time on huge threads."""
_KEY = 16
# A 24-run holds 9 consecutive 16-window starts, so one of them is a multiple of 8.
_STRIDE = QUOTE_CHARS - _KEY
_SPACES = re.compile(r"\s+")


def _normal(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


@dataclass(frozen=True)
class _Index:
    """One result's normalised text, its sampled window hashes and its whole lines."""

    text: str
    keys: frozenset[int]
    lines: frozenset[str]
    line_lengths: frozenset[int]


@lru_cache(maxsize=64)
def _index(content: str) -> _Index:
    text = _normal(content)
    keys = frozenset(hash(text[i : i + _KEY]) for i in range(0, len(text) - _KEY + 1, _STRIDE))
    lines = frozenset(
        line
        for line in map(_normal, content.splitlines())
        if LINE_CHARS <= len(line) < QUOTE_CHARS and sum(c.isalnum() for c in line) >= 6
    )
    return _Index(text, keys, lines, frozenset(map(len, lines)))


def _quote(argument: str, index: _Index) -> str | None:
    """The first fragment of `argument` that quotes the indexed text, or None."""
    for i in range(len(argument) - _KEY + 1):
        if hash(argument[i : i + _KEY]) not in index.keys:
            continue
        for start in range(max(0, i - _STRIDE), i + 1):  # the 24-run holding this window
            fragment = argument[start : start + QUOTE_CHARS]
            at = index.text.find(fragment) if len(fragment) == QUOTE_CHARS else -1
            if at >= 0:
                return _widened(argument, start, index.text, at)
    for start in range(len(argument)):
        for length in index.line_lengths:  # at most 14, usually a few
            if argument[start : start + length] in index.lines:
                return argument[start : start + length]
    return None


def _widened(argument: str, start: int, text: str, at: int) -> str:
    """The whole quote around the 24-character match `argument[start:]` = `text[at:]`."""
    begin, end = start, start + QUOTE_CHARS
    while begin > 0 and at > 0 and argument[begin - 1] == text[at - 1]:
        begin, at = begin - 1, at - 1
    while end < len(argument) and at + end - begin < len(text):
        if argument[end] != text[at + end - begin]:
            break
        end += 1
    return argument[begin:end].strip()


def _strings(value: Any) -> Iterator[str]:
    """Every scalar inside a call's arguments, as text."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


@dataclass(frozen=True)
class Finding:
    """An outbound call's quote of earlier file content: where it came from and what it is."""

    call: ToolCall
    source: str
    """What was read, as the model asked for it, e.g. `read_file(notes.txt)`."""
    fragment: str

    def description(self) -> str:
        """Why the call is held, for the person asked to approve it."""
        shown = self.fragment if len(self.fragment) <= 40 else self.fragment[:39] + "…"
        return (
            f"Held by the exfiltration guard: {self.call['name']} would send text that "
            f"{self.source} returned earlier (“{shown}”) off this machine. Approve only if "
            "you meant to share it."
        )

    def refusal(self, why: str) -> str:
        """The error result the model gets instead of a result."""
        name = self.call["name"]
        return (
            f"Not executed: the arguments quote content that {self.source} returned earlier, "
            f"and {name} would send it off this machine; {why}. Do not put file content in "
            f"the arguments of {name}; answer the user from what you have, or ask them."
        )


def is_outbound(tool: BaseTool | None) -> bool:
    """Whether a tool sends its arguments off the machine (`metadata={"outbound": True}`)."""
    return bool(tool is not None and (tool.metadata or {}).get("outbound"))


def is_private(tool: BaseTool) -> bool:
    """Whether a tool's results are the user's data (read_file, or `metadata={"private": True}`)."""
    return bool((tool.metadata or {}).get("private", tool.name == "read_file"))


class Guard:
    """Finds quotes of one thread's private results in outbound calls; indexed on first use."""

    def __init__(self, messages: Sequence[AnyMessage], private: set[str]) -> None:
        """Remember the thread's messages and the names of the tools whose results are private."""
        self._messages = messages
        self._private = private
        self._sources: list[tuple[str, _Index]] | None = None

    def _indexed(self) -> list[tuple[str, _Index]]:
        if self._sources is None:
            calls = {
                c["id"]: c for m in self._messages if isinstance(m, AIMessage) for c in m.tool_calls
            }
            self._sources, budget = [], MAX_INDEXED_CHARS
            for message in reversed(self._messages):
                if budget <= 0:
                    break
                if isinstance(message, ToolMessage) and message.status == "success":
                    call = calls.get(message.tool_call_id)
                    if call is not None and call["name"] in self._private:
                        content = message.text[:budget]
                        budget -= len(content)
                        self._sources.append((_source(call), _index(content)))
        return self._sources

    def finding(self, call: ToolCall) -> Finding | None:
        """The first quote of a private result in `call`'s arguments, or None."""
        arguments = [_normal(text) for text in _strings(call["args"])]
        for source, index in self._indexed():
            for argument in arguments:
                fragment = _quote(argument, index)
                if fragment is not None:
                    return Finding(call, source, fragment)
        return None


def _source(call: ToolCall) -> str:
    path = call["args"].get("path") if isinstance(call["args"], dict) else None
    return f"{call['name']}({path})" if path else call["name"]
