"""Channel versions: short deterministic strings that order with LangGraph's and old Ferry's.

LangGraph's SQLite savers number versions with a zero-padded counter plus a random fraction,
about 50 bytes per channel in every checkpoint: more than the messages of a typical step.
Ferry writes `0.<letter><digits>` instead (`0.a7`, `0.c123`: the letter is the number of
digits, so the strings sort as the numbers do), 5-8 bytes. Every LangGraph version begins with
32 zero-padded digits, and `"0." < "00"`, so any LangGraph version sorts after every Ferry one:
a thread that LangGraph's own code continues (the server numbers versions itself) keeps
ordering, and Ferry continues such a thread in LangGraph's format.

Ferry before this format wrote small integers, which no string compares with. `upgrade_rows`
turns them into the same numbers in this format, in the transaction that moves them into
Ferry's tables (`graph.storage.sqlite.migration`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Collection
from typing import Any

from graph.storage.codec.allowlist import StoredValueError

log = logging.getLogger("ferry.versions")
_PREFIX = "0."


def compact_version(number: int) -> str:
    """Version `number` in Ferry's format."""
    digits = str(number)
    return f"{_PREFIX}{chr(ord('a') + len(digits) - 1)}{digits}"


def version_number(version: str | int | float | None) -> int:
    """The counter a version (Ferry's, LangGraph's or an old Ferry's integer) carries."""
    if version is None:
        return 0
    if isinstance(version, int | float):
        return int(version)
    if version.startswith(_PREFIX):
        return int(version[3:])
    return int(version.split(".")[0])


def next_version(current: str | int | float | None) -> str | int:
    """The version after `current` in Ferry's format (an old file's integers stay integers).

    `current` is not in LangGraph's format: a thread in that one goes on in it.
    """
    if isinstance(current, int):
        return current + 1  # a file not yet upgraded (read-only): keep its integers
    return compact_version(version_number(current) + 1)


def is_langgraphs(version: object) -> bool:
    """Whether a version is in LangGraph's format (`<32 digits>.<fraction>`), not Ferry's."""
    return isinstance(version, str) and not version.startswith(_PREFIX)


def _as_text(versions: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    text = {k: compact_version(v) if isinstance(v, int) else v for k, v in versions.items()}
    return text, text != versions


def _upgraded(checkpoint: dict[str, Any]) -> bool:
    """Spell a checkpoint's integer versions in Ferry's format; whether any were changed."""
    checkpoint["channel_versions"], changed = _as_text(checkpoint.get("channel_versions", {}))
    for node, seen in checkpoint.get("versions_seen", {}).items():
        checkpoint["versions_seen"][node], seen_changed = _as_text(seen)
        changed = changed or seen_changed
    return changed


def upgrade_rows(
    conn: sqlite3.Connection, serde: Any, thread_ids: Collection[str] | None = None
) -> int:
    """Spell the integer versions an earlier Ferry stored in LangGraph's `checkpoints` as strings.

    Only the rows of `thread_ids` (every row if None), inside the caller's transaction: it
    commits nothing, so the rewrite and whatever the caller does with the rows (`ferry migrate`
    moves them) stand or fall together. A row that cannot be decoded (a missing key) is left as
    it is, and said so. Returns how many rows were rewritten.
    """
    if thread_ids is None:
        thread_ids = [row[0] for row in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    rewritten = 0
    for thread_id in thread_ids:  # a thread's rows at a time: a file's may not fit in memory
        rewritten += _upgrade_thread(conn, serde, thread_id)
    return rewritten


def _upgrade_thread(conn: sqlite3.Connection, serde: Any, thread_id: object) -> int:
    rows = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, type, checkpoint FROM checkpoints "
        "WHERE thread_id IS ?",
        (thread_id,),
    ).fetchall()
    rewritten = 0
    for namespace, checkpoint_id, type_tag, blob in rows:
        if not isinstance(type_tag, str | None) or not isinstance(blob, bytes):
            continue  # no saver wrote it: the move leaves it where it is, and says so
        try:
            checkpoint = serde.loads_typed((type_tag, blob))
        except StoredValueError as error:  # refused when its thread is read, naming it
            log.warning("thread %s: a checkpoint's versions not upgraded: %s", thread_id, error)
            continue
        if isinstance(checkpoint, dict) and _upgraded(checkpoint):
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? "
                "WHERE thread_id IS ? AND checkpoint_ns IS ? AND checkpoint_id IS ?",
                (*serde.dumps_typed(checkpoint), thread_id, namespace, checkpoint_id),
            )
            rewritten += 1
    return rewritten
