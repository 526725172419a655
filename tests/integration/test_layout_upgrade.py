"""Bringing a file up to its layout version across processes: killed inside, raced, refused.

A process killed inside a migration (SIGKILL while it waits in the step, its transaction open)
leaves the version before, untouched; two processes opening an old file at once end with the
step applied once; `ferry` refuses a newer file in one line and exit code 1. The old files are
a version 0 file made here and the release's golden files (version 1), with a later step
appended in the child process the way a later Ferry would append it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import closing
from pathlib import Path

import pytest

from graph.storage.sqlite import layout_versions
from tests.support.cli_helpers import Ferry, ferry_env
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

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]

# The child opens the file with `sqlite_saver`, a step of its migration holding it until the
# test writes a line to its stdin (or kills it): "held-first" wraps the real step 0 → 1,
# "appended" adds a step 1 → 2 that records which process ran it.
OPENER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from graph.storage import sqlite_saver
    from graph.storage.sqlite import layout_versions

    path, how = Path(sys.argv[1]), sys.argv[2]
    real = layout_versions.MIGRATIONS

    def hold():
        print("inside", flush=True)
        sys.stdin.readline()

    def held_first(conn, serde):
        real[0](conn, serde)
        hold()

    def appended(conn, serde):
        conn.execute("CREATE TABLE applied (pid INTEGER)")
        conn.execute("INSERT INTO applied VALUES (?)", (os.getpid(),))
        hold()

    if how == "held-first":
        layout_versions.MIGRATIONS = (held_first,)
    else:
        layout_versions.MIGRATIONS = (*real, appended)
    print("opening", flush=True)
    print(sorted(sqlite_saver(path).thread_ids()), flush=True)
    """
)


@pytest.fixture
def opener(tmp_path: Path) -> Path:
    script = tmp_path / "opener.py"
    script.write_text(OPENER)
    return script


def start(
    opener: Path, path: Path, how: str, *, stdin: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, str(opener), str(path), how],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def said(process: subprocess.Popen[str], line: str) -> None:
    """Wait for the child to print `line` (it blocks on the file's lock or on its stdin)."""
    assert process.stdout is not None
    heard = process.stdout.readline().strip()
    if heard != line:
        process.kill()
        _, err = process.communicate()
        raise AssertionError(f"expected {line!r}, heard {heard!r}; stderr: {err}")


def killed_inside(opener: Path, path: Path, how: str) -> None:
    child = start(opener, path, how)
    said(child, "opening")
    said(child, "inside")
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL


@pytest.fixture(params=GOLDEN, ids=[p.stem for p in GOLDEN])
def release_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    copy = tmp_path / "ferry.db"
    shutil.copy(request.param, copy)
    return copy


def test_a_kill_inside_migration_0_to_1_leaves_version_0_then_it_completes(
    tmp_path: Path, opener: Path
) -> None:
    path = langgraphs_file(tmp_path / "earliest.db", IntegerVersions)
    before = contents(path)

    killed_inside(opener, path, "held-first")

    assert contents(path) == before and not tables(path) & FERRY_TABLES
    assert all(isinstance(v, int) for v in stored_versions(path))
    done = subprocess.run(
        [sys.executable, "-c", f"from graph.storage import sqlite_saver; "
         f"sqlite_saver(__import__('pathlib').Path({str(path)!r})).setup()"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, capture_output=True, text=True,
        check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert user_version(path) == 1 and tables(path) >= FERRY_TABLES
    assert all(isinstance(v, int) for v in stored_versions(path))  # `ferry migrate`'s to convert


def test_a_kill_inside_a_step_from_the_release_file_leaves_it_as_it_was(
    release_file: Path, opener: Path
) -> None:
    before = contents(release_file)

    killed_inside(opener, release_file, "appended")

    assert contents(release_file) == before
    with closing(sqlite3.connect(release_file)) as conn:
        assert layout_versions.layout_version(conn) == 1


def test_two_processes_opening_an_old_file_at_once_apply_the_step_once(
    release_file: Path, opener: Path
) -> None:
    first = start(opener, release_file, "appended")
    said(first, "opening")
    said(first, "inside")  # its write transaction open, the step done but not committed
    second = start(opener, release_file, "appended", stdin=subprocess.DEVNULL)  # never held
    said(second, "opening")  # it now reads version 1 and waits for the file's lock
    assert first.stdin is not None
    first.stdin.write("\n")
    first.stdin.flush()
    outputs = [first.communicate(timeout=60), second.communicate(timeout=60)]

    assert [first.returncode, second.returncode] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]  # both list the same threads
    with closing(sqlite3.connect(release_file)) as conn:
        applied = conn.execute("SELECT pid FROM applied").fetchall()
    assert applied == [(first.pid,)] and user_version(release_file) == 2


@pytest.mark.parametrize(
    "command", [["threads"], ["threads", "--json"], ["history", "--thread", "golden-short"]]
)
def test_ferry_refuses_a_file_of_a_newer_layout_in_one_line(
    cli: Ferry, release_file: Path, tmp_path: Path, command: list[str]
) -> None:
    set_user_version(release_file, layout_versions.current() + 1)
    before = digest(release_file)
    env = ferry_env(tmp_path, FERRY_DB=str(release_file))

    done = cli(*command, env=env, cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"ferry: {release_file}: layout version 2, made by a newer Ferry; upgrade Ferry "
        "(this one reads layout versions up to 1)"
    ]
    if "--json" in command:
        assert json.loads(done.stdout)["error"]["type"] == "database_error"
    assert digest(release_file) == before
