"""A database error names the file, the setting, and — for the errors a full disk gives — the
free space where the file lives, so the line says what to fix."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from graph.core.settings import Settings
from graph.storage import _database_error


@pytest.mark.parametrize("error", ["disk I/O error", "database or disk is full"])
def test_a_full_disk_is_named_as_such(
    error: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage: Any = shutil.disk_usage(tmp_path)._replace(free=3 * 1024 * 1024)
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage)
    db = tmp_path / "ferry.db"
    message = str(_database_error(Settings(db=db), sqlite3.OperationalError(error)))
    assert message == (
        f"database {db}: {error} (the disk holding {tmp_path} is full or nearly: 3 MB free); "
        "check FERRY_DB (or FERRY_DATABASE_URL for Postgres)"
    )


def test_other_errors_say_nothing_of_the_disk(tmp_path: Path) -> None:
    db = tmp_path / "ferry.db"
    message = str(_database_error(Settings(db=db), sqlite3.DatabaseError("file is not a database")))
    assert message == (
        f"database {db}: file is not a database; check FERRY_DB (or FERRY_DATABASE_URL for "
        "Postgres)"
    )
