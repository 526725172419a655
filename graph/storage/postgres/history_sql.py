"""The statements behind Postgres's saved histories and rebuilds (`graph.storage.postgres.history`).

Ferry's tables beside LangGraph's: one saved history per thread and namespace (its base), and
the parts that extend it since.
"""

from __future__ import annotations

SAVED_HISTORIES_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_histories (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL, messages INTEGER NOT NULL, "
    "type TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns))"
)
"""One saved history per thread and namespace, replaced only by a longer one (as in SQLite)."""
PARTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS ferry_history_parts (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL, messages INTEGER NOT NULL, checkpoint_id TEXT NOT NULL, "
    "type TEXT NOT NULL, value BYTEA NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, messages))"
)
"""Each part: the saved history's length with it (`messages`), where that is the history."""

_BASE = "FROM ferry_histories WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
_PARTS = "FROM ferry_history_parts WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
POINTS = (
    f"SELECT checkpoint_id, messages, false AS part {_BASE} "
    f"UNION ALL SELECT checkpoint_id, messages, true {_PARTS} ORDER BY part, messages"
)
"""Where the thread's history is saved: the base, then each part, oldest first."""
VALUES = (
    f"SELECT messages, type, value, false AS part {_BASE} AND checkpoint_id = %(base)s "
    f"UNION ALL SELECT messages, type, value, true {_PARTS} AND messages <= %(upto)s "
    "ORDER BY part, messages"
)
"""The base saved at `base` and the parts up to length `upto`: one round trip."""
SAVE = (
    "INSERT INTO ferry_histories VALUES (%s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (thread_id, checkpoint_ns) DO UPDATE SET checkpoint_id = excluded.checkpoint_id,"
    " messages = excluded.messages, type = excluded.type, value = excluded.value "
    "WHERE ferry_histories.messages < excluded.messages"
)
LOCK_BASE = f"SELECT 1 {_BASE} FOR UPDATE"
# The newest saved point (the last part, else the base) must still be the one extended; the
# base row's lock (`LOCK_BASE`, same transaction) keeps it so until the part is in.
APPEND = (
    "INSERT INTO ferry_history_parts (thread_id, checkpoint_ns, messages, checkpoint_id, type, "
    "value) SELECT %(thread)s, %(ns)s, %(messages)s, %(at)s, %(type)s, %(value)s WHERE coalesce("
    f"(SELECT checkpoint_id {_PARTS} ORDER BY messages DESC LIMIT 1), "
    f"(SELECT checkpoint_id {_BASE})) = %(saved_at)s ON CONFLICT DO NOTHING"
)
DELETE_PARTS = "DELETE FROM ferry_history_parts WHERE thread_id = %s AND checkpoint_ns = %s"
SNAPSHOT = (
    "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
    "AND channel = 'messages' AND version = %s AND type <> 'empty'"
)
_HAS_SNAPSHOT = (
    "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = %(thread)s "
    "AND b.checkpoint_ns = %(ns)s AND b.channel = 'messages' AND b.type <> 'empty' "
    "AND b.version = (c.checkpoint -> 'channel_versions' ->> 'messages'))"
)
_VERSION = "c.checkpoint -> 'channel_versions' ->> 'messages'"
# A checkpoint's ancestors by parent links, stopping after the first whose history is known
# (`known`) or snapshotted. Each step is one primary-key lookup: a LATERAL subquery that LIMIT
# keeps from being flattened into a join, which the planner may run as a scan of the whole
# thread at every step. UNION, not UNION ALL: a re-put checkpoint that
# made the chain loop repeats a row, which ends the recursion.
CHAIN = (
    "WITH RECURSIVE chain AS ("
    f"SELECT c.checkpoint_id, c.parent_checkpoint_id, {_VERSION} AS version, "
    "false AS snapshot, false AS stop FROM checkpoints c "
    "WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = %(target)s "
    "UNION SELECT p.checkpoint_id, p.parent_checkpoint_id, p.version, p.snapshot, "
    "p.checkpoint_id = ANY(%(known)s::text[]) OR p.snapshot FROM chain a CROSS JOIN LATERAL ("
    f"SELECT c.checkpoint_id, c.parent_checkpoint_id, {_VERSION} AS version, "
    f"{_HAS_SNAPSHOT} AS snapshot FROM checkpoints c WHERE c.thread_id = %(thread)s "
    "AND c.checkpoint_ns = %(ns)s AND c.checkpoint_id = a.parent_checkpoint_id LIMIT 1) AS p "
    "WHERE NOT a.stop) "
    "SELECT checkpoint_id, parent_checkpoint_id, version, snapshot FROM chain"
)
# The range bounds the scan by the primary key's prefix whatever the planner estimates (a
# thread's writes are not scanned whole); `ANY` then picks the chain's rows out of it.
WRITES = (
    "SELECT checkpoint_id, channel, task_id, idx, type, blob, task_path FROM checkpoint_writes "
    "WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND channel = 'messages' "
    "AND checkpoint_id BETWEEN %(first)s AND %(last)s AND checkpoint_id = ANY(%(chain)s::text[])"
)
