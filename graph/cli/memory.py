"""`ferry memory list | forget ID… | forget --all`: what Ferry remembers, by the user's hand.

The memories are `FERRY_USER`'s (tools/memory.py), in the store beside the threads
(graph/storage/stores.py): the same ones `ferry ask`, Python and the server read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graph.cli.agent import UsageError, UserError, print_json
from graph.core.controls import printable


def cmd_memory_list(args: argparse.Namespace) -> int:
    """List the user's memories, oldest first."""
    from graph.core.settings import get_settings
    from graph.storage.stores import open_store
    from graph.storage.threads.reading import nothing_stored
    from tools.memory import memories

    settings = get_settings()
    kept = []
    if settings.database_url or not nothing_stored(settings.db):  # a listing creates none
        with open_store(settings.db, settings.database_url) as store:
            kept = memories(store, settings.user)
    if args.json:
        print_json(
            {
                "user": settings.user,
                "memories": [
                    {"id": m.id, "fact": m.fact, "created_at": m.created_at.isoformat()}
                    for m in kept
                ],
            }
        )
        return 0
    if not kept:
        sys.stderr.write(f"nothing is remembered for {settings.user}\n")
    for m in kept:
        line = f"{m.id}  {m.created_at:%Y-%m-%d %H:%M}  {m.fact}"
        sys.stdout.write(printable(line) + "\n")
    return 0


def cmd_memory_forget(args: argparse.Namespace) -> int:
    """Forget memories by id, or all of them."""
    from graph.core.settings import get_settings
    from graph.storage.stores import open_store
    from graph.storage.threads.reading import nothing_stored
    from tools.memory import forget, memories

    if bool(args.ids) == args.all:
        raise UsageError("ferry memory forget: give memory ids (see ferry memory list) or --all")
    settings = get_settings()
    ids, gone = list(args.ids), []
    if settings.database_url or not nothing_stored(settings.db):  # none to forget otherwise
        with open_store(settings.db, settings.database_url) as store:
            ids = [m.id for m in memories(store, settings.user)] if args.all else ids
            gone = forget(store, settings.user, ids)
    unknown = sorted(set(ids) - set(gone))
    if args.json:
        print_json({"user": settings.user, "forgotten": gone, "unknown": unknown})
    else:
        sys.stderr.write(f"forgot {len(gone)} memor{'y' if len(gone) == 1 else 'ies'}\n")
    if unknown:
        raise UserError(
            f"no memory {', '.join(unknown)} for {settings.user} (see ferry memory list)"
        )
    return 0


def add_memory_commands(sub: Any) -> None:
    """Add `memory list` and `memory forget` to the command line's subcommands."""
    memory = sub.add_parser(
        "memory",
        help="List or forget what Ferry remembers for you across threads.",
        description="What the model was asked to remember (its remember tool), for FERRY_USER.",
    )
    actions = memory.add_subparsers(dest="memory_command", required=True)
    listing = actions.add_parser("list", help="list the memories, oldest first")
    listing.set_defaults(handler=cmd_memory_list)
    forgetting = actions.add_parser("forget", help="forget memories by id, or --all")
    forgetting.add_argument("ids", nargs="*", metavar="ID", help="memory ids (ferry memory list)")
    forgetting.add_argument("--all", action="store_true", help="forget every memory")
    forgetting.set_defaults(handler=cmd_memory_forget)
    for p in (listing, forgetting):
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
