"""Ferry's savers are one `FerryStore`, and nothing outside storage tells them apart by class."""

from __future__ import annotations

import ast
import inspect
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graph.storage import sqlite_saver
from graph.storage.errors import NotSupportedByDatabase
from graph.storage.ferry_store import FerryStore, ferry_store
from graph.storage.leases.postgres import PostgresLeases
from graph.storage.leases.sqlite import SqliteLeases
from graph.storage.postgres.saver import AsyncFerryPostgresSaver, FerryPostgresSaver
from graph.storage.sqlite.saver import FerrySaver

REPO = Path(__file__).resolve().parents[2]
STORAGE = REPO / "graph" / "storage"
ALLOWED = {"BaseCheckpointSaver"}
"""LangGraph's base class: whether a run has a saver at all, not which one (graph/builder.py)."""
SAVERS = [FerrySaver, FerryPostgresSaver, AsyncFerryPostgresSaver]


def _storage_saver_classes() -> set[str]:
    """Savers graph/storage defines, what they are made of, and `FerryStore`."""
    bases: dict[str, set[str]] = {}
    for path in STORAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {_last_name(b) for b in node.bases}
    found = {name for name in bases if name.endswith("Saver")} | {"FerryStore"}
    while grown := {n for n, b in bases.items() if b & (found | {"BaseCheckpointSaver"})} - found:
        found |= grown
    return found


def _last_name(node: ast.expr) -> str:
    node = node.value if isinstance(node, ast.Subscript) else node  # `BaseCheckpointSaver[Any]`
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _names(node: ast.expr) -> set[str]:
    """Every class name in isinstance's second argument: a name, `a.b`, a tuple, `A | B`."""
    found = set()
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            found.add(part.id)
        elif isinstance(part, ast.Attribute):
            found.add(part.attr)
    return found


def saver_checks(source: str, savers: set[str]) -> list[str]:
    """Each `isinstance(x, <a saver class>)` in `source`, as written."""
    return [
        ast.unparse(node)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "isinstance"
        and len(node.args) == 2
        and any(
            name in savers or (name.endswith("Saver") and name not in ALLOWED)
            for name in _names(node.args[1])
        )
    ]


def test_nothing_outside_storage_tells_savers_apart_by_class() -> None:
    savers = _storage_saver_classes()
    found = {
        str(path.relative_to(REPO)): checks
        for package in ("graph", "tools")
        for path in (REPO / package).rglob("*.py")
        if STORAGE not in path.parents and (checks := saver_checks(path.read_text(), savers))
    }
    assert found == {}, "ask `graph.storage.ferry_store.ferry_store(saver)` instead"


def test_the_check_sees_each_spelling_of_a_saver_class() -> None:
    savers = _storage_saver_classes()
    assert {"FerrySaver", "FerryPostgresSaver", "AsyncFerryPostgresSaver"} <= savers
    assert {"FerryStore", "NamesThreadOnRefusal"} <= savers
    source = (
        "isinstance(s, FerrySaver)\nisinstance(s, storage.FerryPostgresSaver)\n"
        "isinstance(s, (int, FerryStore))\nisinstance(s, NamesThreadOnRefusal | str)\n"
        "isinstance(s, SqliteSaver)\n"
        "isinstance(s, BaseCheckpointSaver)\nisinstance(m, AIMessage)\n"
    )
    assert saver_checks(source, savers) == [
        "isinstance(s, FerrySaver)",
        "isinstance(s, storage.FerryPostgresSaver)",
        "isinstance(s, (int, FerryStore))",
        "isinstance(s, NamesThreadOnRefusal | str)",
        "isinstance(s, SqliteSaver)",
    ]


def _protocol_methods() -> list[str]:
    return [n for n, v in vars(FerryStore).items() if inspect.isfunction(v) and n[0] != "_"]


def _parameters(method: Any) -> list[tuple[str, Any, Any]]:
    """Names, kinds and defaults (the types are mypy's to check: graph/storage/ferry_store.py)."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


@pytest.mark.parametrize("saver", SAVERS, ids=lambda s: s.__name__)
def test_each_saver_has_the_protocols_methods_with_its_signatures(saver: type[Any]) -> None:
    assert _protocol_methods() == [
        "get_tuple",
        "get_delta_channel_history",
        "thread_summaries",
        "store_summary",
        "first_start",
        "forget_start",
        "leases",
        "stored_bytes",
        "compact",
        "prune_checkpoints",
        "threads_updated_before",
    ]
    for name in _protocol_methods():
        assert _parameters(getattr(saver, name)) == _parameters(getattr(FerryStore, name)), name


def test_a_sqlite_saver_is_a_ferry_store_and_others_are_not(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    saver = sqlite_saver(tmp_path / "ferry.db")
    assert ferry_store(saver) is saver
    assert ferry_store(InMemorySaver()) is None and ferry_store(None) is None


def test_the_sqlite_store_keeps_its_files_size_leases_and_threads(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    saver = sqlite_saver(db)
    saver.setup()
    wal = db.with_name("ferry.db-wal")
    assert saver.stored_bytes() == db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    assert saver.first_start("t", "call-1") and not saver.first_start("t", "call-1")
    saver.forget_start("t", "call-1")
    assert saver.first_start("t", "call-1")
    saver.compact()
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed into the file
    assert saver.stored_bytes() == db.stat().st_size
    leases = saver.leases(30, holder="me")
    assert isinstance(leases, SqliteLeases)
    assert leases.take("t") is None
    leases.release()
    leases.close()
    assert saver.prune_checkpoints([], keep=2) == 0
    assert saver.threads_updated_before(datetime(2999, 1, 1, tzinfo=UTC)) == []


def test_a_sqlite_store_in_memory_takes_no_lease_and_stores_no_bytes() -> None:
    import sqlite3

    saver = FerrySaver(sqlite3.connect(":memory:", check_same_thread=False))
    assert saver.leases(30, holder="me") is None
    assert saver.stored_bytes() == 0


def test_a_read_only_sqlite_file_takes_no_lease(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    sqlite_saver(db).setup()
    db.chmod(0o444)
    try:
        saver = sqlite_saver(db)
        assert saver.leases(30, holder="me") is None
        assert saver.stored_bytes() >= db.stat().st_size
    finally:
        db.chmod(0o644)


@pytest.mark.parametrize("saver", [FerryPostgresSaver, AsyncFerryPostgresSaver])
def test_postgres_says_it_keeps_checkpoints_whole_in_the_clis_words(saver: type[Any]) -> None:
    postgres = object.__new__(saver)  # no database needed to refuse
    with pytest.raises(NotSupportedByDatabase) as refused:
        postgres.prune_checkpoints(["t"], keep=3)
    assert str(refused.value) == (
        "prune --keep works on SQLite only; with FERRY_DATABASE_URL use --before DATE"
    )
    postgres.compact()  # Postgres reuses freed space: nothing to do


def test_postgres_leases_are_advisory_locks_on_the_savers_database() -> None:
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    url = "postgresql://ferry@127.0.0.1:1/ferry"  # never connected to: a lease connects when taken
    for saver, pool in (
        (FerryPostgresSaver, ConnectionPool(url, open=False)),
        (AsyncFerryPostgresSaver, AsyncConnectionPool(url, open=False)),
    ):
        postgres = object.__new__(saver)
        postgres.conn = pool
        assert isinstance(postgres.leases(30, holder="me"), PostgresLeases)
        assert ferry_store(postgres) is postgres
