"""`ferry migrate FILE` and `ferry export FILE --to-langgraph OUT`: into Ferry's layout and out.

Both act on the file named, never on `FERRY_DB` by default: converting is a step the user takes
on purpose (`graph.storage.sqlite.migration`, `graph.storage.sqlite.export`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.cli.agent import UsageError, print_json
from graph.core.controls import printable

if TYPE_CHECKING:
    from graph.storage.sqlite.migration import Migrated


def _say(line: str) -> None:
    sys.stderr.write(printable(line) + "\n")


def cmd_migrate(args: argparse.Namespace) -> int:
    """Move a file's threads from LangGraph's tables into Ferry's, after a backup."""
    from graph.core.log import configure_logging
    from graph.core.settings import get_settings
    from graph.storage.codec.serde import serializer
    from graph.storage.sqlite.migration import BUSY_TIMEOUT_S, migrate

    if args.all and args.thread:
        raise UsageError("migrate: --all moves every thread; leave out --thread, or --all")
    settings = get_settings()
    configure_logging(settings)
    path = Path(args.file)

    def moving(thread_id: str, checkpoints: int) -> None:
        if not args.json:
            _say(f"moving {thread_id}: {checkpoints} checkpoints")

    report = migrate(
        path,
        thread_ids=args.thread or (),
        everything=args.all,
        serde=serializer(settings),
        busy_timeout_s=BUSY_TIMEOUT_S if args.busy_timeout is None else args.busy_timeout,
        on_thread=moving,
    )
    if args.json:
        print_json(_as_json(report))
    else:
        _tell(report)
    return 0


def _as_json(report: Migrated) -> dict[str, Any]:
    return {
        "file": str(report.path),
        "backup": None if report.backup is None else str(report.backup),
        "moved": report.moved,
        "left": report.left,
        "rows_left": report.rows_left,
    }


def _tell(report: Migrated) -> None:
    if not (report.moved or report.left or report.rows_left):
        _say(f"nothing to migrate: {report.path} holds no rows in LangGraph's tables")
        return
    if report.backup is not None:
        _say(f"backup: {report.backup}")
    checkpoints = sum(report.moved.values())
    _say(
        f"moved {_counted(len(report.moved), 'thread')} ({_counted(checkpoints, 'checkpoint')}) "
        "into Ferry's tables"
    )
    for thread_id, why in report.left.items():
        _say(f"left {thread_id} in LangGraph's tables: {why}")
    if report.rows_left:
        _say(
            f"left {report.rows_left} rows of {', '.join(report.rows_left_threads[:10])} in "
            "LangGraph's tables: no saver could have written them, or Ferry's tables already "
            "hold their checkpoint"
        )
    if report.left and not report.moved:
        _say(f"to move them anyway: ferry migrate {shlex.quote(str(report.path))} --all")


def cmd_export(args: argparse.Namespace) -> int:
    """Write a Ferry file's threads into a new file in LangGraph's stock `SqliteSaver` layout."""
    from graph.core.log import configure_logging
    from graph.core.settings import get_settings
    from graph.storage.codec.serde import serializer
    from graph.storage.sqlite.export import export_to_langgraph

    settings = get_settings()
    configure_logging(settings)
    report = export_to_langgraph(
        Path(args.file),
        Path(args.to_langgraph),
        thread_ids=args.thread or (),
        serde=serializer(settings),
    )
    if args.json:
        print_json(
            {"out": str(report.out), "checkpoints": report.checkpoints, "writes": report.writes}
        )
        return 0
    checkpoints = sum(report.checkpoints.values())
    _say(
        f"wrote {_counted(len(report.checkpoints), 'thread')} "
        f"({_counted(checkpoints, 'checkpoint')}, {_counted(report.writes, 'write')}) to "
        f"{report.out}, for LangGraph's SqliteSaver"
    )
    return 0


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def add_conversion_commands(sub: Any) -> None:
    """Add `migrate` and `export` to the command line's subcommands."""
    migrate = sub.add_parser(
        "migrate",
        help="Move a file's threads from LangGraph's tables into Ferry's (after a backup).",
        description="Convert FILE (written by LangGraph's SqliteSaver or an earlier Ferry) to "
        "Ferry's layout: a backup FILE.before-migrate-<time> first, then, in one transaction, "
        "Ferry's threads moved out of LangGraph's tables. Another application's threads stay "
        "where its own saver reads them unless named with --thread or --all.",
    )
    migrate.set_defaults(handler=cmd_migrate)
    migrate.add_argument("file", help="the SQLite file to convert")
    migrate.add_argument(
        "--thread", action="append", metavar="ID", help="move this thread (repeatable)"
    )
    migrate.add_argument("--all", action="store_true", help="move every thread, Ferry's or not")
    migrate.add_argument(
        "--busy-timeout",
        type=float,
        metavar="SECONDS",
        help="wait this long for another process's write to end (default: 30, as Ferry does)",
    )
    export = sub.add_parser(
        "export",
        help="Write a Ferry file's threads into a new file for LangGraph's SqliteSaver.",
        description="Write the threads of Ferry's file FILE into OUT, a new file in the layout "
        "of LangGraph's stock SqliteSaver (same ids, metadata and versions), which then reads "
        "and continues them. `ferry migrate OUT` brings them back.",
    )
    export.set_defaults(handler=cmd_export)
    export.add_argument("file", help="Ferry's SQLite file")
    export.add_argument(
        "--to-langgraph", required=True, metavar="OUT", help="the new file to write"
    )
    export.add_argument(
        "--thread", action="append", metavar="ID", help="export only this thread (repeatable)"
    )
    for p in (migrate, export):
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
