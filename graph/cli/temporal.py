"""`ferry worker`, `ferry cancel`, and `--temporal` for `ask`/`chat`/`resume`.

With `FERRY_TEMPORAL_ADDRESS` set (or `--temporal ADDRESS`), `ask`, `chat` and `resume` run
their turns with the Temporal runner (graph/temporal/runner.py): on whichever `ferry worker`
takes them, written once against the runner interface, so they print what they print
in-process: progress lines on stderr, the answer on stdout as it comes, the same `--json`
object and exit codes. Leaving (Ctrl-C, a kill) leaves the turn running; `ferry resume --thread
ID` watches it again and `ferry cancel --thread ID` stops it.
"""

from __future__ import annotations

import argparse
import sys

from graph.cli.agent import UserError, settings_of
from graph.cli.temporal_runtime import RUNTIME, run_on_temporal, say
from graph.cli.tool_call import add_tools_option


def add_temporal_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `ferry worker` and `ferry cancel`, and `--temporal` to ask, chat and resume."""
    help_address = "Temporal frontend host:port, overriding FERRY_TEMPORAL_ADDRESS"
    for name in ("ask", "chat", "resume"):  # their turns' runner (graph/cli/agent.py)
        sub.choices[name].add_argument("--temporal", metavar="ADDRESS", help=help_address)
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
    waiting = f"ferry worker: Temporal at {address} does not answer yet; waiting for it"
    run_on_temporal(lambda: serve(chosen, lambda: say(line), RUNTIME.get(), lambda: say(waiting)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel the thread's turn on Temporal and wait until it stopped (the turns' runner's)."""
    from graph.cli.agent import open_graph
    from graph.temporal.runner import TemporalRunner

    settings = settings_of(args)
    with (
        open_graph(args, need_model=False) as graph,
        TemporalRunner(settings, graph, say=say) as runner,
    ):
        stopped = runner.cancel(args.thread)
    if stopped is None:
        raise UserError(f"thread {args.thread} has no turn running on Temporal")
    if stopped == "ended":  # its last step was finishing when the cancel came
        sys.stderr.write(
            f"thread {args.thread}: its Temporal turn ended before the cancel reached it; "
            f"see it with: ferry history --thread {args.thread}\n"
        )
        return 0
    sys.stderr.write(
        f"thread {args.thread}: its Temporal run is cancelled and the thread is free; "
        f"continue it with: ferry resume --thread {args.thread}\n"
    )
    return 0
