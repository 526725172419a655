"""MCP servers' tools as Ferry tools: named, described by their annotations, bridged to a session.

Each tool is a `StructuredTool` with a sync `func` and an async `coroutine`, both handing the call
to the MCP loop (tools/mcp/loop.py) and waiting at most the per-call timeout. Its server may not
be running yet (its listing was cached): the call starts it (tools/mcp/lazy.py).
Its `metadata` tells Ferry's guards what the tool does:

- `retry_safe`: `readOnlyHint` or `idempotentHint` is true; otherwise (`destructiveHint`, or no
  hint at all) a call cut short by a crash is not run again.
- `outbound`: true, whatever `openWorldHint` says: the exfiltration guard checks its arguments.
- `private`: true: its results are the user's data, which the guard keeps from outbound calls.
- `approval`: why a person must approve each call (graph/policy/approval.py holds it), unless
  it declares `readOnlyHint`; absent when it runs without asking.

A server's annotations are its own claims, not the user's word: only a server's `tools` entry
in the user's config makes a tool not outbound or not private. It overrides any of them per tool,
and `approve` too, which wins over the server's `approve` (all of its tools, or none, ask).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from tools.mcp import content, loop
from tools.mcp.config import ServerSpec, Transport
from tools.mcp.lazy import McpServer
from tools.mcp.listing import ListedTool
from tools.mcp.listing_cache import first_warning
from tools.settings import tool_settings

log = logging.getLogger("ferry.mcp")
MAX_RESULT_CHARS = 1_000_000
"""What one result may hand the model; the rest is cut, with a note saying how much."""
_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_-]")


_SAID: set[str] = set()
"""The renames this process logged (the cache remembers them across runs, when it can)."""


@dataclass(frozen=True)
class ServerInfo:
    """What `ferry tools` and `ferry info` show about one configured server."""

    name: str
    transport: Transport
    status: str
    """`connected`, `listed` (from the cache: the first call starts it), `failed` (did not start)
    or `stopped` (went away; the next call restarts it)."""
    reason: str
    """Why it failed or stopped; empty when connected."""
    tools: tuple[str, ...]
    """Its tools, by the names the model sees."""


def build_tools(
    servers: list[McpServer], reserved: Iterable[str], start_timeout_s: float, config: str = ""
) -> tuple[list[BaseTool], list[ServerInfo]]:
    """The servers' tools, names that collide namespaced; and each server's info.

    `config` names the servers file as it is now (its path and hash): a rename is warned of
    once for each, not at every run.
    """
    taken = Counter(_name(t.name) for s in servers for t in s.tools)
    reserved = set(reserved)
    built: list[BaseTool] = []
    infos = []
    for server in servers:
        names, renamed = [], []
        for listed in server.tools:
            name = _name(listed.name)
            if name in reserved or taken[name] > 1:
                name = _name(f"{server.spec.name}__{listed.name}")
            if name != listed.name:
                renamed.append(f"{listed.name} → {name}")
            built.append(_ferry_tool(server, listed, name, start_timeout_s))
            names.append(name)
        spec = server.spec
        if renamed:
            _warn_renamed(spec.name, renamed, config)
        infos.append(
            ServerInfo(spec.name, spec.transport, server.status, server.reason, tuple(names))
        )
    return built, infos


def _warn_renamed(server: str, renamed: list[str], config: str) -> None:
    """Warn of the renames once per servers file as it is: in this process, and across runs."""
    said = json.dumps([config, server, renamed], ensure_ascii=False)
    key = hashlib.sha256(said.encode("utf-8")).hexdigest()
    if key in _SAID:
        return
    _SAID.add(key)
    if first_warning(key):
        log.warning(
            f"MCP server '{server}': tools renamed (a built-in tool or another server's "
            f"has the name, or it is not a valid tool name): {', '.join(renamed)}",
            extra={"event": "mcp_tools_renamed", "ferry_server": server},
        )


def tool_metadata(server: ServerSpec, tool: str, annotations: dict[str, Any]) -> dict[str, Any]:
    """What Ferry's guards read: from the annotations, the defaults, then the config's overrides.

    A server's `openWorldHint` is not trusted to say where its arguments go, nor anything to
    say its results are not the user's data: outbound and private unless the config says not.
    """
    overrides = {k: v for k, v in server.overrides.get(tool, {}).items() if k != "approve"}
    retry_safe = bool(annotations.get("readOnlyHint") or annotations.get("idempotentHint"))
    derived = {"retry_safe": retry_safe, "outbound": True, "private": True}
    metadata = {"source": f"mcp:{server.name}", **derived, **overrides}
    reason = approval_reason(server, tool, annotations)
    return {**metadata, "approval": reason} if reason else metadata


def approval_reason(server: ServerSpec, tool: str, annotations: dict[str, Any]) -> str | None:
    """Why each call of `tool` waits for a person's approval, in one line; None if none does.

    The user's word wins: the tool's own `approve` in the servers file, then the server's.
    Without it, only a tool that declares `readOnlyHint` runs unasked: a server that says
    nothing about a tool has not said that it changes nothing.
    """
    approve = server.overrides.get(tool, {}).get("approve")
    if approve is False or (approve is None and server.approve is False):
        return None
    if approve:
        return f"the MCP servers file asks for it (mcpServers.{server.name}.tools.{tool}.approve)"
    if server.approve:
        return f"the MCP servers file asks for it (mcpServers.{server.name}.approve)"
    if annotations.get("readOnlyHint") is True:
        return None
    if annotations.get("destructiveHint") is True:
        return "it declares destructiveHint (it may delete or overwrite things)"
    if annotations.get("readOnlyHint") is False:
        return "it declares readOnlyHint false (it changes things)"
    return "it does not declare readOnlyHint (it may change things)"


def _ferry_tool(
    server: McpServer, listed: ListedTool, name: str, start_timeout_s: float
) -> StructuredTool:
    tool = listed.name

    # The run's config is found by its type: a tool's own argument may be called `config`.
    def call(ferry_run_config: RunnableConfig, **arguments: Any) -> tuple[content.Content, Any]:
        timeout_s = tool_settings(ferry_run_config).tool_timeout_s
        try:
            output = loop.run(server.call(tool, arguments, start_timeout_s), timeout_s)
        except TimeoutError:
            raise _timed_out(server, name, timeout_s) from None
        return _capped(output)

    async def acall(
        ferry_run_config: RunnableConfig, **arguments: Any
    ) -> tuple[content.Content, Any]:
        timeout_s = tool_settings(ferry_run_config).tool_timeout_s
        try:
            output = await loop.arun(server.call(tool, arguments, start_timeout_s), timeout_s)
        except TimeoutError:
            raise _timed_out(server, name, timeout_s) from None
        return _capped(output)

    ferry_tool = StructuredTool(
        name=name,
        description=listed.description or f"The '{tool}' tool of MCP server '{server.spec.name}'.",
        args_schema=listed.input_schema or {"type": "object", "properties": {}},
        func=call,
        coroutine=acall,
        response_format="content_and_artifact",
        metadata=tool_metadata(server.spec, tool, listed.annotations),
    )

    def changed(live: ListedTool) -> None:
        ferry_tool.metadata = tool_metadata(server.spec, tool, live.annotations)

    server.on_change[tool] = changed
    return ferry_tool


def _timed_out(server: McpServer, name: str, timeout_s: float) -> ToolException:
    return ToolException(
        f"{name} timed out after {timeout_s:g} s (FERRY_TOOL_TIMEOUT_S): MCP server "
        f"'{server.spec.name}' did not answer. Try again later or with a simpler request."
    )


def _capped(output: Any) -> tuple[content.Content, Any]:
    """The adapters' `(blocks, artifact)` as text (at most `MAX_RESULT_CHARS`) and images."""
    blocks, artifact = output if isinstance(output, tuple) else (output, None)
    text, images = content.text_and_images(blocks)
    structured = artifact.get("structured_content") if isinstance(artifact, dict) else None
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
    text = text or "(the tool returned no content)"
    if len(text) > MAX_RESULT_CHARS:
        cut = len(text) - MAX_RESULT_CHARS
        text = (
            f"{text[:MAX_RESULT_CHARS]}\n[Ferry cut this result: {cut:,} of its "
            f"{len(text):,} characters are not shown.]"
        )
    if structured is not None and _restates(text, structured):
        artifact = None  # stored with the result for nothing (and unredacted, unlike the text)
    too_big = len(json.dumps(artifact, default=str)) > MAX_RESULT_CHARS
    return content.with_images(text, images), None if too_big else artifact


def _restates(text: str, structured: Any) -> bool:
    """Whether the text says what the structured content does (MCP asks servers for both)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text
    return structured in (parsed, {"result": parsed}, {"result": text})


def _name(name: str) -> str:
    """`name` as providers accept a tool's name: letters, digits, `_` and `-`, 64 at most."""
    return _NOT_A_NAME.sub("_", name)[:64] or "_"
