"""The `ferry` commands about stored threads: history, threads, fork, undo, delete and prune."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from graph.cli.agent import (
    UsageError,
    UserError,
    existing_state,
    open_graph,
    print_json,
    refuse_without_database,
    thread_config,
)
from graph.core.controls import printable


def cmd_history(args: argparse.Namespace) -> int:
    """Show every stored message of a thread (escaped for the terminal unless `--json`).

    Then what the thread used and cost (its ledger, graph/runs/report.py): `thread_usage` in
    `--json`, one line on stderr otherwise.
    """
    from graph.runs.report import thread_usage
    from graph.storage.threads.reading import message_record

    refuse_without_database(args)
    if args.checkpoints:
        return _checkpoints(args)
    with open_graph(args, need_model=False) as graph:
        state = existing_state(graph, args.thread)
        records = [message_record(m) for m in state.values.get("messages", [])]
        ledger = thread_usage(state.values.get("messages", []))
    summary = state.values.get("summary")
    compacted = set(summary["compactions"]) if summary else set()
    if args.json:
        report: dict[str, object] = {"thread_id": args.thread, "messages": records}
        if summary:  # where the model was sent a summary of the messages before, and which
            report["compactions"] = [{"before_message": n} for n in summary["compactions"]]
            report["summary"] = summary["text"]
        report["thread_usage"] = ledger
        print_json(report)
        return 0
    for index, record in enumerate(records):
        if index in compacted:
            sys.stdout.write(
                "~ compaction: the model is sent a summary of the turns above "
                "(after the first message) ~\n"
            )
        label = record["role"] + (
            f" ({record['status']})" if record.get("status") == "error" else ""
        )
        if record["content"]:
            sys.stdout.write(printable(f"{label}: {record['content']}") + "\n")
        for call in record.get("tool_calls", []):
            call_args = json.dumps(call["args"], ensure_ascii=False)
            sys.stdout.write(printable(f"{label}: → {call['name']}({call_args})") + "\n")
    sys.stderr.write(_usage_line(ledger) + "\n")
    return 0


def _usage_line(ledger: dict[str, Any]) -> str:
    """The thread's ledger in words: tokens, the cache's share of the input, and the cost."""
    read, tokens_in = ledger["cache_read_tokens"], ledger["input_tokens"]
    cached = f" ({read / tokens_in:.0%} read from the prompt cache)" if read and tokens_in else ""
    unpriced = ledger["unpriced_calls"]
    cost = f"${ledger['cost_usd']:.4f}" + (
        f" (and {unpriced} model call(s) without a price)" if unpriced else ""
    )
    return f"usage: {tokens_in} tokens in{cached}, {ledger['output_tokens']} out; cost {cost}"


def _checkpoints(args: argparse.Namespace) -> int:
    """`history --checkpoints`: the thread's checkpoints from its start to its head."""
    from graph.threads.travel import checkpoints

    with open_graph(args, need_model=False) as graph:
        listed = checkpoints(graph, args.thread)
    if args.json:
        print_json({"thread_id": args.thread, "checkpoints": [c.as_json() for c in listed]})
        return 0
    for c in listed:
        line = f"{c.checkpoint_id}  {c.created_at or '-'}  step {c.step:>3}  {c.happened}"
        sys.stdout.write(printable(line) + "\n")
    return 0


def cmd_fork(args: argparse.Namespace) -> int:
    """Start a new thread from a thread as it was at one of its checkpoints."""
    from graph.threads.travel import fork

    refuse_without_database(args)
    with open_graph(args, need_model=False) as graph:
        new = fork(graph, args.thread, args.at, args.to)
        paused = graph.get_state(thread_config(new)).next == ("check",)
    if args.json:
        print_json({"thread_id": new, "forked_from": args.thread, "checkpoint_id": args.at})
        return 0
    sys.stdout.write(new + "\n")
    go_on = f"ferry resume --thread {new}" if paused else f"ferry chat --thread {new}"
    sys.stderr.write(
        f"forked thread {args.thread} at {args.at} into {new} (the original is untouched); "
        f"go on with `{go_on}`\n"
    )
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    """Take back a thread's last turn; what its tools did is not undone."""
    from graph.threads.travel import undo

    refuse_without_database(args)
    with open_graph(args, need_model=False) as graph:
        old_head, question = undo(graph, args.thread)
    if args.json:
        print_json({"thread_id": args.thread, "undone": question, "old_head": old_head})
        return 0
    sys.stderr.write(
        printable(
            f"undid the last turn of {args.thread} ({question!r}); what its tools did is not "
            f"undone. It stays reachable: ferry fork --thread {args.thread} --at {old_head}"
        )
        + "\n"
    )
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    """List stored threads, most recently updated first."""
    from graph import fold_messages
    from graph.core.settings import get_settings
    from graph.storage import database_name, open_saver
    from graph.storage.sqlite.listing import listed_from_rows
    from graph.storage.threads.reading import list_threads

    settings = get_settings()
    threads = None if settings.database_url else listed_from_rows(settings.db)
    if threads is None:
        with open_saver(settings, fold=fold_messages) as saver:
            threads = list_threads(saver)
    if args.json:
        print_json({"threads": threads})
        return 0
    sys.stderr.write(f"database: {database_name(settings)}\n")
    for t in threads:
        line = f"{t['thread_id']}  {t['updated_at']}  {t['messages']:>3} messages  {t['title']}"
        sys.stdout.write(printable(line.rstrip()) + "\n")
    return 0


def _cutoff(text: str) -> datetime:
    """`prune --before`'s date; a usage error unless it is an ISO date (or date and time)."""
    try:
        cutoff = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"prune --before {text!r}: not an ISO date; write e.g. 2025-01-31 or 2025-01-31T12:00"
        ) from None
    return cutoff if cutoff.tzinfo else cutoff.replace(tzinfo=UTC)


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete one thread and compact the database."""
    from graph import fold_messages
    from graph.core.settings import get_settings
    from graph.storage import open_saver

    settings = get_settings()
    with open_saver(settings, fold=fold_messages) as saver:
        if saver.get_tuple(thread_config(args.thread)) is None:
            raise UserError(f"unknown thread {args.thread!r} (see `ferry threads`)")
        saver.delete_thread(args.thread)
        saver.compact()
        size = saver.stored_bytes()
    if args.json:
        print_json({"deleted": [args.thread], "db_bytes": size})
    else:
        sys.stderr.write(f"deleted thread {args.thread}\n")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Keep the last N checkpoints per thread, or drop threads not updated since a date."""
    from graph import fold_messages
    from graph.core.settings import get_settings
    from graph.storage import open_saver
    from graph.storage.threads.reading import list_threads

    cutoff = _cutoff(args.before) if args.before else None
    removed = 0
    with open_saver(get_settings(), fold=fold_messages) as saver:
        before = saver.stored_bytes()
        deleted = saver.threads_updated_before(cutoff) if cutoff is not None else []
        if args.keep:  # first: a database that cannot prune them refuses before any change
            staying = [t["thread_id"] for t in list_threads(saver) if t["thread_id"] not in deleted]
            removed = saver.prune_checkpoints(staying, keep=args.keep)
        for thread_id in deleted:
            saver.delete_thread(thread_id)
        saver.compact()
        after = saver.stored_bytes()
    report = {
        "threads_deleted": deleted,
        "checkpoints_removed": removed,
        "db_bytes_before": before,
        "db_bytes_after": after,
    }
    if args.json:
        print_json(report)
    else:
        sys.stderr.write(
            f"deleted {len(deleted)} threads, removed {removed} checkpoints; "
            f"{before} → {after} bytes\n"
        )
    return 0
