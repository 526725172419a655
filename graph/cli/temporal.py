"""`ferry worker`, `ferry cancel`, and `ask`/`chat`/`resume` handing their turns to Temporal.

With `FERRY_TEMPORAL_ADDRESS` set (or `--temporal ADDRESS`), a turn runs on whichever `ferry
worker` takes it (graph/temporal). The command prints what it prints in-process: progress lines
on stderr, the answer on stdout (whole, once the turn ends: tokens are not streamed through
Temporal), the same `--json` object and exit codes. Leaving (Ctrl-C, a kill) leaves the turn
running; `ferry resume --thread ID` watches it again and `ferry cancel --thread ID` stops it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from graph.cli.agent import UsageError, UserError
from graph.cli.temporal_runtime import RUNTIME, client_of, run_on_temporal, say, settings_of
from graph.cli.temporal_turns import HOOKS
from graph.cli.tool_call import add_tools_option


def add_temporal_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ferry worker` and `ferry cancel`, and `--temporal` to ask, chat and resume."""
    help_address = "Temporal frontend host:port, overriding FERRY_TEMPORAL_ADDRESS"
    for name, on_temporal_handler in HOOKS.items():
        parser = sub.choices[name]
        parser.add_argument("--temporal", metavar="ADDRESS", help=help_address)
        in_process = parser.get_default("handler")
        parser.set_defaults(handler=_routed(in_process, on_temporal_handler))
    worker = sub.add_parser(
        "worker",
        help="Run Ferry's turns for Temporal (start any number, on any hosts).",
        description="Serve Ferry's turns from Temporal's task queue (FERRY_TEMPORAL_TASK_QUEUE).",
    )
    worker.set_defaults(handler=cmd_worker)
    cancel = sub.add_parser(
        "cancel",
        help="Stop the turn a thread runs on Temporal.",
        description="Stop the turn a thread runs on Temporal; the thread stays resumable.",
    )
    cancel.add_argument("--thread", required=True, help="the thread id")
    cancel.set_defaults(handler=cmd_cancel)
    for command in (worker, cancel):
        command.add_argument("--temporal", metavar="ADDRESS", help=help_address)
    add_tools_option(worker)  # the worker runs the turns' tools; ask hands it only the question


Handler = Callable[[argparse.Namespace], int]


def _routed(in_process: Handler, on_temporal_handler: Handler) -> Handler:
    """A command's handler that hands the turn to Temporal when an address is configured."""

    def handler(args: argparse.Namespace) -> int:
        if not on_temporal(args):
            return in_process(args)
        if args.tools:
            raise UsageError(
                "--tools: on Temporal the workers run the tools, not this command; start them "
                f"with ferry worker --tools {' --tools '.join(args.tools)} (or FERRY_TOOLS), "
                "and ask without --tools"
            )
        return on_temporal_handler(args)

    handler.__doc__ = in_process.__doc__
    return handler


def on_temporal(args: argparse.Namespace) -> bool:
    """Whether this command's turns go to Temporal (`--temporal` or FERRY_TEMPORAL_ADDRESS)."""
    from graph.core.settings import get_settings

    return bool(getattr(args, "temporal", None) or get_settings().temporal_address)


def cmd_worker(args: argparse.Namespace) -> int:
    """Serve Ferry's turns until stopped (Ctrl-C or SIGTERM); its running steps go elsewhere."""
    from graph.temporal.client import DEFAULT_ADDRESS
    from graph.temporal.worker import serve

    settings = settings_of(args)
    address = settings.temporal_address or DEFAULT_ADDRESS
    line = (
        f"ferry worker: serving task queue {settings.temporal_task_queue} at {address} "
        f"(namespace {settings.temporal_namespace}); Ctrl-C to stop"
    )
    chosen = settings.model_copy(update={"temporal_address": address})
    run_on_temporal(lambda: serve(chosen, lambda: say(line), RUNTIME.get()))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel the thread's turn on Temporal and wait until it stopped."""
    from graph.temporal import cancel

    settings = settings_of(args)

    async def stop() -> bool:
        return await cancel(await client_of(settings), args.thread)

    if not run_on_temporal(stop):
        raise UserError(f"thread {args.thread} has no turn running on Temporal")
    sys.stderr.write(
        f"thread {args.thread}: its Temporal run is cancelled and the thread is free; "
        f"continue it with: ferry resume --thread {args.thread}\n"
    )
    return 0
