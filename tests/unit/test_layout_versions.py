"""A Ferry SQLite file's layout version: recognised, stamped, migrated in order, or refused.

Each migration is tested from a file of the version before: version 0 files (no Ferry tables)
are made here; the release's files (version 1) are the golden ones, written by Ferry 7f5a698
(tests/support/golden/files). A later step is appended in the tests the way a later Ferry
would append it, so the order, the stamp and the transaction are proven from a release's file.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from graph import build_graph
from graph.storage import FerrySaver, sqlite_saver
from graph.storage.codec.serde import serializer
from graph.storage.errors import LayoutVersionError
from graph.storage.sqlite import layout_versions
from graph.storage.sqlite.layout_versions import layout_version
from graph.storage.sqlite.saver import connect
from tests.support.layout_files import (
    FERRY_TABLES,
    GOLDEN,
    IntegerVersions,
    contents,
    digest,
    langgraphs_file,
    set_user_version,
    stored_versions,
    tables,
    user_version,
)
from tests.support.scripted import ScriptedModel

PINNED = "ALTER TABLE ferry_thread_summaries ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0"


@pytest.fixture(params=GOLDEN, ids=[p.stem for p in GOLDEN])
def release_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A copy of a file a release wrote (user_version 0, as a release leaves a new file)."""
    copy = tmp_path / "ferry.db"
    shutil.copy(request.param, copy)
    return copy


def messages(path: Path) -> dict[str, list[Any]]:
    """Each thread's messages, as the graph reads them."""
    saver = sqlite_saver(path)
    graph = build_graph(model=ScriptedModel([]), tools=[], checkpointer=saver)
    threads = sorted(saver.thread_ids())
    read = {t: graph.get_state({"configurable": {"thread_id": t}}).values for t in threads}
    saver.conn.close()
    return {t: [m.model_dump() for m in values["messages"]] for t, values in read.items()}


def appended(*steps: layout_versions.Migration) -> tuple[layout_versions.Migration, ...]:
    return (*layout_versions.MIGRATIONS, *steps)


def add_pinned(conn: sqlite3.Connection, serde: Any) -> None:
    """A later Ferry's step 1 → 2: a column for pinned threads."""
    conn.execute(PINNED)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    path.chmod(0o444)  # by its mode bits, also for root, whom permissions would not stop
    try:
        yield path
    finally:
        path.chmod(0o644)


def test_a_new_file_is_stamped_with_the_current_layout(tmp_path: Path) -> None:
    sqlite_saver(tmp_path / "new.db").setup()

    assert user_version(tmp_path / "new.db") == layout_versions.current() == 1
    assert tables(tmp_path / "new.db") >= FERRY_TABLES


@pytest.mark.parametrize("stamp", [0, 1], ids=["new-file", "rows-moved-in"])
def test_a_release_file_is_version_1_and_opening_it_only_stamps_it(
    release_file: Path, stamp: int
) -> None:
    """The release leaves user_version 0 on a new file, 1 on one whose rows it moved in."""
    set_user_version(release_file, stamp)
    before = contents(release_file)
    with closing(sqlite3.connect(release_file)) as conn:
        assert layout_version(conn) == 1

    sqlite_saver(release_file).setup()

    assert contents(release_file) == {**before, "user_version": 1}


@pytest.mark.parametrize("stamp", [0, 1])
def test_a_file_without_ferrys_tables_is_version_0_and_gets_them(
    tmp_path: Path, stamp: int
) -> None:
    """An empty file, or LangGraph's tables only (user_version 1: versions already strings)."""
    empty, stock = tmp_path / "empty.db", langgraphs_file(tmp_path / "stock.db")
    sqlite3.connect(empty).close()
    for path in (empty, stock):
        set_user_version(path, stamp)
        with closing(sqlite3.connect(path)) as conn:
            assert layout_version(conn) == 0

        sqlite_saver(path).setup()

        assert user_version(path) == 1 and tables(path) >= FERRY_TABLES


def test_migration_0_to_1_leaves_langgraphs_rows_as_they_are(tmp_path: Path) -> None:
    """Even an earliest Ferry's integer versions: only `ferry migrate` converts them."""
    path = langgraphs_file(tmp_path / "earliest.db", IntegerVersions)
    before = stored_versions(path)
    assert before and all(isinstance(v, int) for v in before)
    conn = sqlite3.connect(path)

    assert layout_versions.up_to_date(conn, serializer()) is conn
    conn.close()

    assert user_version(path) == 1 and tables(path) >= FERRY_TABLES
    assert stored_versions(path) == before


@pytest.mark.parametrize("file_read_only", [False, True], ids=["writable", "read-only"])
def test_a_file_of_a_newer_layout_is_refused_naming_it_and_left_as_it_was(
    release_file: Path, file_read_only: bool
) -> None:
    set_user_version(release_file, layout_versions.current() + 1)
    before = digest(release_file)

    with pytest.raises(LayoutVersionError) as refused:
        if file_read_only:
            with read_only(release_file):
                sqlite_saver(release_file).setup()
        else:
            sqlite_saver(release_file).setup()

    assert str(refused.value) == (
        f"{release_file}: layout version 2, made by a newer Ferry; upgrade Ferry "
        "(this one reads layout versions up to 1)"
    )
    assert digest(release_file) == before


def test_a_step_appended_runs_once_from_the_release_file_which_reads_the_same(
    release_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(release_file, release_file.with_name("unmigrated.db"))
    expected = messages(release_file.with_name("unmigrated.db"))
    ran: list[int] = []

    def counted(conn: sqlite3.Connection, serde: Any) -> None:
        ran.append(user_version(release_file))
        add_pinned(conn, serde)

    monkeypatch.setattr(layout_versions, "MIGRATIONS", appended(counted))

    assert messages(release_file) == expected
    assert messages(release_file) == expected

    assert ran == [0]  # once, from the unstamped release file
    assert user_version(release_file) == 2
    with closing(sqlite3.connect(release_file)) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(ferry_thread_summaries)")]
    assert columns[-1] == "pinned"


def test_a_step_that_fails_leaves_the_release_file_as_it_was(
    release_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = contents(release_file)

    def fails_halfway(conn: sqlite3.Connection, serde: Any) -> None:
        add_pinned(conn, serde)
        raise RuntimeError("the step failed")

    monkeypatch.setattr(layout_versions, "MIGRATIONS", appended(fails_halfway))

    with pytest.raises(RuntimeError, match="the step failed"):
        sqlite_saver(release_file).setup()

    assert contents(release_file) == before  # no column, not even the stamp of version 1


def test_migration_0_to_1_that_fails_leaves_the_version_0_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = langgraphs_file(tmp_path / "earliest.db", IntegerVersions)
    before = contents(path)
    real = layout_versions.MIGRATIONS[0]

    def fails_after_the_real_step(conn: sqlite3.Connection, serde: Any) -> None:
        real(conn, serde)
        raise RuntimeError("the step failed")

    monkeypatch.setattr(layout_versions, "MIGRATIONS", (fails_after_the_real_step,))

    with pytest.raises(RuntimeError, match="the step failed"):
        sqlite_saver(path).setup()

    assert contents(path) == before
    assert all(isinstance(v, int) for v in stored_versions(path))


def test_a_file_kept_busy_past_the_busy_timeout_fails_naming_it(tmp_path: Path) -> None:
    path = langgraphs_file(tmp_path / "stock.db")
    holder = sqlite3.connect(path)
    holder.execute("BEGIN IMMEDIATE")  # another process writing, for longer than we wait
    conn = connect(path)
    conn.execute("PRAGMA busy_timeout = 50")

    with pytest.raises(LayoutVersionError) as refused:
        FerrySaver(conn).setup()
    holder.rollback()

    assert str(refused.value).startswith(f"{path}: cannot bring it to layout version 1: ")
    assert "database is locked" in str(refused.value) and user_version(path) == 0
    FerrySaver(conn).setup()  # once the other process is done
    assert user_version(path) == 1 and tables(path) >= FERRY_TABLES


def test_a_read_only_release_file_is_read_as_it_is_unstamped(release_file: Path) -> None:
    expected = messages(Path(shutil.copy(release_file, release_file.with_name("copy.db"))))
    before = digest(release_file)

    with read_only(release_file):
        assert messages(release_file) == expected

    assert digest(release_file) == before and user_version(release_file) == 0


def test_a_read_only_file_of_an_older_layout_is_read_from_a_copy_brought_up_to_date(
    release_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = messages(Path(shutil.copy(release_file, release_file.with_name("copy.db"))))
    before = digest(release_file)
    monkeypatch.setattr(layout_versions, "MIGRATIONS", appended(add_pinned))

    with read_only(release_file):
        saver = sqlite_saver(release_file)
        saver.setup()
        in_memory = saver.conn.execute("PRAGMA database_list").fetchone()[2] == ""
        stamp = saver.conn.execute("PRAGMA user_version").fetchone()[0]
        assert messages(release_file) == expected

    assert in_memory and stamp == 2
    assert digest(release_file) == before and user_version(release_file) == 0
