"""Releases: `execute_tool` runs a call only with a release that only `check` can make.

A client can route a run itself or write as a node (graph/provenance.py refuses both,
but a write path LangGraph adds later would not be known to it), so the tool node does not
trust where its task came from. `check` records, for each call it lets run, a mark: an HMAC
of the call (id, tool, arguments), the reply that made it, the turn's question and the thread,
under a key that is never stored in a thread nor sent to any client. `execute_tool` runs a
call only if the thread's latest reply asks for it unanswered and its mark is recorded.

- Unforgeable: without the key no one computes a mark, and the marks say nothing of it.
- Bound: a mark names its thread, turn and reply, so a copy of a thread, a reply written again
  or a later turn asking for the same call finds no mark of its own.
- Spent once used: `call_model` clears the marks, so nothing released before the model spoke
  again releases anything after it; a call answered since is refused by the first rule.

The key is `FERRY_RELEASE_KEY` when set (every machine of a deployment sets the same one:
Temporal workers on several hosts, several servers on one database), else a random key made
once per user in `$XDG_DATA_HOME/ferry/release.key` (mode 0600), which every process of that
user on this machine shares, so a run resumed by another process still finds its releases.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

RELEASED = "released_calls"
"""The state key under which `check` records the marks of the calls it let run."""
KEY_VARIABLE = "FERRY_RELEASE_KEY"
NOT_RELEASED = (
    "Not executed: this call reached the tool without passing Ferry's checks (approval, "
    "guards, outbound rules); only calls the model asked for and Ferry released run."
)


RELEASED_BEFORE_AN_UPGRADE = "released before an upgrade"
"""`unreleased`'s answer for a call an earlier Ferry released, with an unkeyed mark."""


class UnreleasedCallError(ValueError):
    """A tool task for a call no stored reply is waiting for: nothing may be written for it."""


def key_path() -> Path:
    """Where the per-user key lives: `$XDG_DATA_HOME/ferry/release.key`, else `~/.local/share/`."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec: a relative path is invalid and is ignored.
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"
    return base / "ferry" / "release.key"


@functools.cache
def _key_from(variable: str | None, path: Path) -> bytes:
    if variable:
        return hashlib.sha256(variable.encode()).digest()
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # O_EXCL: of two processes making it at once, one writes and both read its key
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as file:
        file.write(secrets.token_bytes(32))
    return path.read_bytes()


def release_key() -> bytes:
    """The key releases are made with (see the module's docstring for where it comes from)."""
    return _key_from(os.environ.get(KEY_VARIABLE) or None, key_path())


def _reply_asking(messages: Sequence[AnyMessage]) -> tuple[AIMessage | None, str]:
    """The latest tool-calling reply and the id of its turn's question."""
    block = len(messages) - 1
    while block >= 0 and isinstance(messages[block], ToolMessage):
        block -= 1
    reply = messages[block] if block >= 0 else None
    if not isinstance(reply, AIMessage):
        return None, ""
    question = next(
        (messages[i] for i in range(block - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
        None,
    )
    return reply, (question.id or "") if question else ""


def _mark(call: Mapping[str, Any], reply: AIMessage, turn: str, thread_id: str) -> str:
    text = json.dumps(
        [thread_id, turn, reply.id, call["id"], call["name"], call["args"]],
        sort_keys=True,
        default=str,
    )
    return hmac.new(release_key(), text.encode(), hashlib.sha256).hexdigest()[:32]


def release(
    calls: Sequence[Mapping[str, Any]], messages: Sequence[AnyMessage], thread_id: str
) -> str:
    """The marks `check` records for `calls` of the latest reply in `messages`, space-separated.

    `messages` ends with that reply (as a person may have edited it) and the results written
    with it.
    """
    reply, turn = _reply_asking(messages)
    if reply is None:
        return ""
    return " ".join(_mark(call, reply, turn, thread_id) for call in calls)


def unreleased(task: Any, state: Mapping[str, Any], thread_id: str) -> str | None:
    """Why `execute_tool` may not run this task's call, for the model to read; None if it may.

    A call the latest reply asks for but `check` did not release (or released with other
    arguments, in another turn or thread) is answered with `NOT_RELEASED`, so the thread stays
    valid for the provider.

    Raises:
        UnreleasedCallError: the task is malformed, or no stored reply waits for its call.
    """
    call = task.get("call") if isinstance(task, Mapping) else None
    if not isinstance(call, Mapping) or not {"id", "name", "args"} <= call.keys():
        raise UnreleasedCallError(f"a tool task must carry a tool call, got {task!r:.200}")
    messages = state.get("messages") or []
    reply, turn = _reply_asking(messages)
    asked = next((c for c in reply.tool_calls if c["id"] == call["id"]), None) if reply else None
    if reply is None or asked is None or _answered(messages, call["id"]):
        raise UnreleasedCallError(
            f"tool call {call['id']!r} ({call['name']}): no reply on the thread waits for it; "
            "a tool runs only for a call the model made and Ferry's check released"
        )
    marks = (state.get(RELEASED) or "").split()
    # The task's call as the stored reply asks for it: a task sent with other arguments than
    # the reply's (a route nobody listed) has no mark of its own.
    same = call["name"] == asked["name"] and call["args"] == asked["args"]
    if same and _mark(asked, reply, turn, thread_id) in marks:
        return None
    if _unkeyed_mark(asked) in marks and call["args"] == asked["args"]:
        return RELEASED_BEFORE_AN_UPGRADE
    return NOT_RELEASED


def _unkeyed_mark(call: Mapping[str, Any]) -> str:
    """The mark an earlier Ferry recorded: anyone could compute it, so it runs nothing.

    A thread stored mid-call by that version (a crash between `check` and the tool) has only
    such a mark; its call is answered as cut short instead of refused as never released.
    """
    text = json.dumps([call["id"], call["name"], call["args"]], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _answered(messages: Sequence[AnyMessage], call_id: str) -> bool:
    """Whether a result after the latest reply answers `call_id`."""
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            return False
        if message.tool_call_id == call_id:
            return True
    return False
