"""`ferry info`: where Ferry's data and settings come from, and whether the database answers."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.cli.agent import command_settings, print_json
from graph.core.controls import printable

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from graph.core.settings import Settings


def changed_settings(settings: Settings) -> dict[str, str]:
    """The settings whose value differs from the default, as `FERRY_<NAME>` → value."""
    changed = {}
    for name, field in type(settings).model_fields.items():
        value = getattr(settings, name)
        if value != field.get_default(call_default_factory=True):
            shown = "(set)" if name == "database_url" else str(value)  # it may hold a password
            changed[f"FERRY_{name.upper()}"] = shown
    return changed


def check_database(settings: Settings) -> dict[str, Any]:
    """Open the database and count its threads: `{"ok": True, "threads": N}` or the error."""
    from graph import fold_messages
    from graph.storage import open_saver

    try:
        with open_saver(settings, fold=fold_messages) as saver:
            return {"ok": True, "threads": sum(1 for _ in saver.thread_ids())}
    except Exception as exc:  # noqa: BLE001 - reported, not raised: info shows what is wrong
        return {"ok": False, "error": str(exc)}


def mcp_servers(settings: Settings) -> list[dict[str, Any]]:
    """The configured MCP servers (started if they were not): name, transport, status, tools."""
    from graph.core.log import redact
    from graph.core.settings import ConfigError
    from tools.mcp import McpConfigError, mcp_servers

    try:
        servers = mcp_servers(settings.mcp_config)
    except McpConfigError as exc:
        raise ConfigError(str(exc)) from exc
    return [
        {
            "name": s.name,
            "transport": s.transport,
            "status": s.status,
            "reason": redact(s.reason),  # it may quote the server's stderr
            "tools": list(s.tools),
        }
        for s in servers
    ]


def gather(settings: Settings) -> dict[str, Any]:
    """Everything `ferry info` reports."""
    from graph.builder import default_tools
    from graph.storage import database_name
    from tools.trust import is_trusted

    model: dict[str, Any] = {"spec": settings.model}
    if settings.model.startswith("openai:"):
        model["base_url"] = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    env_file = Path.cwd() / ".env"
    servers = mcp_servers(settings)  # started once: the tools below are theirs, live
    tools = [
        {"name": t.name, "needs_approval": approval_reason(t, settings) is not None}
        for t in default_tools(settings)
    ]
    return {
        "model": model,
        "database": {"name": database_name(settings), **check_database(settings)},
        "files_root": str(Path(settings.files_root).absolute()),
        "tools": tools,
        "mcp_servers": servers,
        "env_file": str(env_file) if env_file.is_file() else None,
        "env_file_trusted": is_trusted(env_file),  # an untrusted one is ignored
        "settings": changed_settings(settings),
    }


def _plain(report: dict[str, Any]) -> list[str]:
    model, db = report["model"], report["database"]
    status = f"ok, {db['threads']} threads" if db["ok"] else f"error: {db['error']}"
    tools = ", ".join(t["name"] + (" (approval)" * t["needs_approval"]) for t in report["tools"])
    at = f" at {model['base_url']}" if "base_url" in model else ""
    lines = [
        f"model:      {model['spec']}{at}",
        f"database:   {db['name']} ({status})",
        f"files root: {report['files_root']}",
        f"tools:      {tools}",
        f"mcp:        {len(report['mcp_servers'])} servers"
        if report["mcp_servers"]
        else "mcp:        (no servers configured)",
        f".env:       {_env_file(report)}",
        "settings:   " + ("(all defaults)" if not report["settings"] else ""),
    ]
    lines += [f"  {name}={value}" for name, value in report["settings"].items()]
    servers = [_server_line(s) for s in report["mcp_servers"]]
    after = next(i for i, line in enumerate(lines) if line.startswith("mcp:")) + 1
    return lines[:after] + servers + lines[after:]


def _env_file(report: dict[str, Any]) -> str:
    if report["env_file"] is None:
        return "(none in the working directory)"
    path: str = report["env_file"]
    return path + ("" if report["env_file_trusted"] else " (ignored: not trusted; see ferry trust)")


def _server_line(server: dict[str, Any]) -> str:
    state = server["status"] + (f": {server['reason']}" if server["reason"] else "")
    tools = f", tools: {', '.join(server['tools'])}" if server["tools"] else ""
    return f"  {server['name']} ({server['transport']}, {state}{tools})"


def cmd_info(args: argparse.Namespace) -> int:
    """Print the model, database, files root, tools and changed settings; check the database."""
    from graph.core.log import configure_logging

    settings = command_settings(args)
    configure_logging(settings)  # a server that fails to start says so through Ferry's logs
    report = gather(settings)
    if args.json:
        print_json(report)
    else:
        sys.stdout.write(printable("\n".join(_plain(report))) + "\n")
    return 0 if report["database"]["ok"] else 1


def approval_reason(tool: BaseTool, settings: Settings) -> str | None:
    """Why each call of `tool` waits for a person's approval; None when it runs unasked.

    What the approval gate holds a tool for (graph/policy/approval.py): `FERRY_APPROVE_TOOLS`
    naming it, or its `metadata["approval"]` (an MCP tool without `readOnlyHint`, or the MCP
    servers file asking for it).
    """
    if tool.name in settings.approval_required:
        return "FERRY_APPROVE_TOOLS names it"
    reason = (tool.metadata or {}).get("approval")
    return str(reason) if reason else None


def tool_records(settings: Settings) -> list[dict[str, Any]]:
    """Every tool the model is offered: name, source, approval, description and arguments."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from graph.builder import default_tools
    from tools.memory import recall, remember

    records = []
    memory = {remember.name, recall.name}  # offered where there is a store: ask, chat, server
    for tool in [*default_tools(settings), remember, recall]:
        fields = convert_to_openai_tool(tool)["function"]["parameters"]  # what the model sees
        required = set(fields.get("required", []))
        records.append(
            {
                "name": tool.name,
                "source": "memory"
                if tool.name in memory
                else (tool.metadata or {}).get("source", "built-in"),
                "approval": approval_reason(tool, settings),
                "description": " ".join(tool.description.split()),
                "arguments": [
                    {"name": name, "type": spec.get("type", "any"), "required": name in required}
                    for name, spec in fields.get("properties", {}).items()
                ],
            }
        )
    return records


def cmd_tools(args: argparse.Namespace) -> int:
    """List every tool with its source and arguments."""
    from graph.core.log import configure_logging

    settings = command_settings(args)
    configure_logging(settings)
    mcp_servers(settings)  # every server started: the tools listed are live, and cached anew
    records = tool_records(settings)
    if args.json:
        print_json({"tools": records})
        return 0
    for record in records:
        arguments = ", ".join(
            a["name"] + ("" if a["required"] else "?") + f": {a['type']}"
            for a in record["arguments"]
        )
        summary = textwrap.shorten(record["description"], 96, placeholder=" …")
        sys.stdout.write(printable(f"{record['name']}({arguments})  [{record['source']}]") + "\n")
        sys.stdout.write(printable(f"    {summary}") + "\n")
        if record["approval"]:
            sys.stdout.write(printable(f"    asks first: {record['approval']}") + "\n")
    return 0
