"""A throwaway PostgreSQL server on loopback, in a temporary folder, for the Postgres tests.

    with PostgresServer.start() as server:
        url = server.create_database("t1")

It runs `initdb` and `pg_ctl` from PATH or `/usr/lib/postgresql/*/bin` (where Debian puts them).
`initdb` refuses to run as root, so as root the server runs as the `postgres` user (or `nobody`).
`find_bin_dir()` is None when no server is installed; the tests then skip, unless
`REQUIRE_POSTGRES_TESTS=1` (set by `.ci/run`) makes that a failure.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

REQUIRED = os.environ.get("REQUIRE_POSTGRES_TESTS") == "1"
START_TIMEOUT_S = 60


def find_bin_dir() -> Path | None:
    """The folder holding `initdb` and `pg_ctl`, newest version first; None if there is none."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> pwd.struct_passwd | None:
    """The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root, and there is no `postgres` or `nobody` user to run initdb")


@dataclass
class PostgresServer:
    """A running server: its folder, port and the command-line tools it was started with."""

    bin_dir: Path
    root: Path
    port: int
    user: pwd.struct_passwd | None

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _tool(self, *args: str) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {}
        if self.user is not None:
            extra = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        done = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C"},
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
            **extra,
        )
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}{tail}")
        return done

    @classmethod
    def start(cls, bin_dir: Path) -> PostgresServer:
        """Create a cluster in a new temporary folder and start it on a free loopback port."""
        user = _run_as()
        root = Path(tempfile.mkdtemp(prefix="ferry-pg-"))
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
        server = cls(bin_dir=bin_dir, root=root, port=_free_port(), user=user)
        try:
            server._tool(
                "initdb", "-D", "data", "-U", "postgres", "--auth=trust", "--no-sync",
                "--encoding=UTF8", "--locale=C",
            )  # fmt: skip
            options = (
                f"-p {server.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories="
                # Durability is not what these tests check; speed is welcome.
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
                # Table sizes change only by what the tests write (autovacuum adds map forks).
                " -c autovacuum=off"
            )
            for attempt in range(3):
                try:
                    server._tool(
                        "pg_ctl", "-D", "data", "-l", "server.log", "-o", options, "-w", "start"
                    )
                    break
                except RuntimeError:
                    # A free port can be taken between choosing it and binding it (another test
                    # worker): choose again.
                    if attempt == 2:
                        raise
                    old_port, server.port = server.port, _free_port()
                    options = options.replace(f"-p {old_port} ", f"-p {server.port} ")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return server

    def restart(self) -> None:
        """Restart the server (fast: open sessions are ended), on the same port and folder."""
        self._tool("pg_ctl", "-D", "data", "-l", "server.log", "-m", "fast", "-w", "restart")

    def stop(self) -> None:
        """Stop the server and delete its folder."""
        try:
            self._tool("pg_ctl", "-D", "data", "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str, template: str | None = None) -> str:
        """Create a database, empty or a copy of `template` (no one connected to it); its URL."""
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(statement)
        return self.url(name)
