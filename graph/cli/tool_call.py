"""`ferry tools call NAME '{json args}'`: run one tool call as the loop would, with no model.

The call goes through Ferry's own graph, not around it: one run of the compiled graph
(`build_graph`) whose model is `AsksForOneCall`, a chat model that asks for exactly this call
and then answers nothing. So the call passes `check` (unknown tool, argument size, breaker,
duplicates, approval, exfiltration guard) and `execute_tool` (release marks, LangGraph's
`ToolNode`, the timeout, the concurrency bound, redaction), and its result is fenced into the
model's next prompt (`--json`'s `model_sees`), all as in a turn; none of it is copied here.
Calling the tool node's executor directly would skip `check`, and with it the approval step.

The run is on an in-memory checkpointer and a new thread: nothing goes to `FERRY_DB`, since a
try is not a conversation and `ferry threads` should not fill up with them. The guards that
read a thread's past (the breaker's counts, duplicates, the exfiltration guard's earlier file
content) therefore see an empty thread and pass the call; those that read the call itself act.

Exit codes: 0 the tool succeeded; 1 it failed, timed out, was refused by a guard or rejected
at the prompt; 2 a usage error (unknown tool, bad arguments) or a call that needs approval
with no one to ask (no terminal, or `--json`) and no `--approve`: nothing ran.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import TYPE_CHECKING, Any

from graph.cli.agent import (
    UsageError,
    command_settings,
    print_json,
    resume_all,
    thread_config,
)
from graph.core.controls import printable

if TYPE_CHECKING:
    from graph.builder import FerryGraph

_TIMED_OUT = ("(FERRY_TOOL_TIMEOUT_S)", "the run's time budget ran out")
"""What Ferry's results say when a call ran out of time (graph/execution.py, tools/mcp)."""


def add_tool_call_command(tools: argparse.ArgumentParser) -> None:
    """`ferry tools call NAME [ARGS] [--json] [--approve]` under `ferry tools`."""
    what = "Run one tool call, through the loop's guards, with no model; print its result."
    forms = tools.add_subparsers(dest="tools_command", metavar="call", title="to try a tool")
    call = forms.add_parser("call", help=what, description=what)
    call.set_defaults(handler=cmd_tool_call)
    call.add_argument("name", help="the tool, as `ferry tools` names it")
    call.add_argument(
        "arguments", nargs="?", default="{}", help="""its arguments as one JSON object ('{}')"""
    )
    call.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_tools_option(call)
    call.add_argument(
        "--approve", action="store_true", help="approve it if it needs approval (no prompt)"
    )


def add_tools_option(parser: argparse.ArgumentParser) -> None:
    """`--tools module:ATTR`, repeatable: your own tools, in place of `FERRY_TOOLS`."""
    parser.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:ATTR",
        help="your own tools: a list of LangChain tools (or one) in a module importable from "
        "here; repeatable; replaces FERRY_TOOLS",
    )


def cmd_tool_call(args: argparse.Namespace) -> int:
    """Run one tool call through the graph; print its result on stdout, its status on stderr."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from graph.builder import build_graph, default_tools
    from graph.cli.tool_args import parse_arguments
    from graph.core.log import configure_logging
    from graph.models.one_call import AsksForOneCall
    from graph.nodes import CAN_APPROVE
    from graph.runs.report import pending_approvals_of

    settings = command_settings(args)
    configure_logging(settings)
    tools = {tool.name: tool for tool in default_tools(settings)}
    tool = tools.get(args.name)
    if tool is None:
        from graph.cli.errors import did_you_mean

        hint = did_you_mean(args.name, list(tools))
        raise UsageError(f"unknown tool {args.name!r}{hint} (see ferry tools)")
    arguments = parse_arguments(args.arguments, tool)
    model = AsksForOneCall(tool=tool.name, args=arguments)
    graph = build_graph(
        model=model, tools=list(tools.values()), checkpointer=InMemorySaver(), settings=settings
    )
    interactive = sys.stdin.isatty() and not args.json
    config = thread_config(str(uuid.uuid4()))
    config["configurable"][CAN_APPROVE] = interactive or args.approve
    ran = _run(graph, {"messages": [("user", f"ferry tools call {tool.name}")]}, config)
    pending = pending_approvals_of(graph.get_state(config))
    rejected = False
    if pending:
        if not (args.approve or interactive):
            return _needs_approval(args, tool.name, arguments, pending[0])
        approved = args.approve or _asks_yes(tool.name, arguments)
        rejected = not approved
        decision = (
            {"type": "approve"} if approved else {"type": "reject", "message": "at the prompt"}
        )
        ran = _run(graph, Command(resume=resume_all(pending, decision)), config)
    result = _result_of(graph, config, model.call_id)
    status = _status(result, ran=ran, rejected=rejected)
    record = {
        "tool": tool.name,
        "args": arguments,
        "status": status,
        "result": result.text,
        "duration_ms": result.response_metadata.get("duration_ms"),
        "source": (tool.metadata or {}).get("source", "built-in"),
        "model_sees": model.result_seen,
    }
    if result.artifact is not None:
        record["artifact"] = result.artifact
    _report(args, record)
    return 0 if status == "ok" else 1


def _run(graph: FerryGraph, graph_input: Any, config: Any) -> bool:
    """Run the graph to its next stop; whether `execute_tool` ran (the tool was called)."""
    from graph.core.run import RunContext
    from graph.runs.background import run_in_background

    ran = False
    # In a thread of its own, as `ask` runs: Ctrl-C stops the CLI at once, not at the timeout.
    updates = run_in_background(
        lambda: graph.stream(graph_input, config, stream_mode="updates", context=RunContext())
    )
    for update in updates:
        ran = ran or (isinstance(update, dict) and "execute_tool" in update)
    return ran


def _result_of(graph: FerryGraph, config: Any, call_id: str) -> Any:
    """The stored result of the call: exactly one, whatever answered it."""
    from langchain_core.messages import ToolMessage

    messages = graph.get_state(config).values.get("messages") or []
    return next(m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id)


def _status(result: Any, *, ran: bool, rejected: bool) -> str:
    """The outcome in Ferry's words: ok, error, timed out, refused (by a guard) or rejected."""
    if result.status == "success":
        return "ok"
    if rejected:
        return "rejected"
    if not ran:  # answered by `check`: a guard refused it before it could run
        return "refused"
    return "timed out" if any(mark in result.text for mark in _TIMED_OUT) else "error"


def _asks_yes(name: str, arguments: dict[str, Any]) -> bool:
    """Ask the person at the terminal; only `y` or `yes` approves."""
    import json

    shown = json.dumps(arguments, ensure_ascii=False)
    sys.stderr.write(printable(f"run {name} {shown}? [y/N] "))
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _needs_approval(
    args: argparse.Namespace, name: str, arguments: dict[str, Any], pending: dict[str, Any]
) -> int:
    """Nothing ran: say why and how to run it; exit code 2, as for a command that cannot work."""
    why = pending.get("description") or "FERRY_APPROVE_TOOLS lists it"
    where = "with --json" if args.json else "without a terminal"
    line = f"needs approval ({name}): {why}; nothing ran. No one can approve {where}: "
    sys.stderr.write(printable(line + "pass --approve to run it") + "\n")
    if args.json:
        print_json({"tool": name, "args": arguments, "status": "needs approval", "result": None})
    return 2


def _report(args: argparse.Namespace, record: dict[str, Any]) -> None:
    took = f", {record['duration_ms']} ms" if record["duration_ms"] is not None else ""
    sys.stderr.write(printable(f"{record['status']} ({record['tool']}{took})") + "\n")
    if args.json:
        print_json(record)
    else:
        sys.stdout.write(printable(record["result"]) + "\n")
